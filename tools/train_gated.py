"""Train the course's small models with and without Qiu et al.'s output gate and measure the
attention sink in each (issue 48, part 5): attn_core/data/gate-runs.npz (final parameters)
and attn_core/data/gate-trace.json (settings, commit, seeds, CPU time, measurements).

Two settings, each with ``output_gate=False`` and ``True``, same seeds, data, steps:

* ``induction``: notebook 15's two-layer attention-only model on repeated random tokens
  (``train_induction.py``'s model, task and settings), seeds 0, 1, 2: the smallest model of the
  course with a sink (its second layer parks weight on position 0 where nothing repeats).
* ``induction_long``: the same model, task and seeds trained three times as long
  (``LONG_STEPS``), with and without the gate (both trained here: no ungated run of that length
  is stored elsewhere): does the sink shrink with the gate given more training?
* ``gpt``: the tiny GPT of notebook 14 (``train_gpt.py``'s model and settings) on the
  characters, seed 0: no sink without the gate (notebook 16).

The ungated runs are not trained again: they are the stored runs of notebooks 14 and 15
(``gpt-checkpoint.npz``; ``induction-snapshots.npz`` at step 2500), which this tool's own
ungated training reproduces (``--merge`` re-runs their first ``CHECK_STEPS`` steps and records
the largest difference from the stored traces' losses). The gated model starts from the
ungated one's initial weights (same seed, same draws), its gate weights drawn as ``init_gpt``
of the gated config draws them (its gate biases 0: every gate at 0.5), and sees the same
batches. One BLAS thread. Run from the repository root, from a committed tree::

    nice -n 10 python tools/train_gated.py --part induction      # about 3 minutes of CPU
    nice -n 10 python tools/train_gated.py --part gpt --seed 0   # about 4-5
    nice -n 10 python tools/train_gated.py --part induction_long # about 12
    python tools/train_gated.py --merge                          # measures, writes the files

Each part writes ``build/gate-parts/<part>.npz`` and ``.json``; ``--merge`` starts from the
runs already stored (so a part trained in an earlier session is kept: its commit stays in
``commits``), replaces those a part in ``build/gate-parts`` trained again, adds the stored
ungated runs, measures every run (``attn_core.nn.gate_sinks``, float64) and writes the two
stored files.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import numpy as np  # noqa: E402
import train_gpt as tg  # noqa: E402
import train_induction as ti  # noqa: E402

from attn_core.nn import Checkpoint, GPTConfig  # noqa: E402
from attn_core.nn.gate_sinks import (  # noqa: E402
    GATE_RUNS_PATH,
    GATE_TRACE_PATH,
    first_weights,
    mean_gates,
    uniform_share,
    zeroed_value_losses,
)
from attn_core.nn.gate_sinks import gated_init as _gated_init  # noqa: E402
from attn_core.nn.induction_run import TASK, copy_losses, eval_batches, sampler  # noqa: E402
from attn_core.nn.streaming import held_out_windows  # noqa: E402
from attn_core.nn.train import text_loss, train_gpt  # noqa: E402
from attn_core.threads import blas_threads  # noqa: E402

PARTS = ROOT / "build" / "gate-parts"
INDUCTION_SEEDS = (0, 1, 2)
#: Key positions whose value is zeroed, one at a time (0: the candidate sink; the others: the
#: control); the losses are averaged over the predictions ``SCORED`` of each setting.
ZEROED = {"induction": (0, 1, 2, 3), "induction_long": (0, 1, 2, 3), "gpt": (0, 1, 2, 4, 8)}
SCORED = {"induction": (14, None), "induction_long": (14, None), "gpt": (12, None)}
#: Steps of the ``induction_long`` part (notebook 15's 2500, three times).
LONG_STEPS = 3 * ti.TRAIN["steps"]
#: The tiny GPT is measured on the first held-out windows (of 661).
GPT_WINDOWS = 256


def run_name(part, seed, gate):
    return f"{part}.s{seed}.{'gated' if gate else 'plain'}"


def gated_init(config, rng_of):
    """:func:`attn_core.nn.gated_init` (the attention-only model starts from notebook 15's
    larger spread)."""
    return _gated_init(config, rng_of, **({} if config.mlp else {"std": ti.INIT_STD}))


def train_induction(seed, gate, steps=None):
    config = GPTConfig(TASK["vocab_size"], TASK["n_ctx"], n_layers=2, **ti.MODEL,
                       output_gate=gate)
    init = gated_init(config, lambda: np.random.default_rng(seed))
    val = [sampler()(np.random.default_rng(TASK["eval_seed"] + 1), TASK["eval_batch"])]
    run = train_gpt(config, None, None, seed=seed, params=init, sample=sampler(), val=val,
                    **dict(ti.TRAIN, eval_every=ti.EVAL_EVERY, steps=steps or ti.TRAIN["steps"]))
    return config, run


def train_tiny_gpt(seed, gate, steps=None):
    vocab, train_ids, val_ids = tg.data()
    config = GPTConfig(vocab_size=len(vocab), **tg.MODEL, output_gate=gate)
    init = gated_init(config, lambda: np.random.default_rng(seed).spawn(2)[0])
    init = {k: v.astype(tg.TRAIN["dtype"]) for k, v in init.items()}
    run = train_gpt(config, train_ids, val_ids, seed=seed, params=init,
                    **dict(tg.TRAIN, steps=steps or tg.TRAIN["steps"]))
    return config, run


def train_part(part, seeds, steps=None, parts=PARTS, gates=(True,)):
    if part == "induction_long":  # both trained: no ungated run of this length is stored
        steps, gates = steps or LONG_STEPS, (False, True)
    commit = tg.git_commit()  # the tree the runs are trained from (read before, not after)
    parts.mkdir(parents=True, exist_ok=True)
    runs, arrays = {}, {}
    for seed in seeds:
        for gate in gates:
            cpu = time.process_time()
            with blas_threads(tg.THREADS):
                config, run = (train_tiny_gpt if part == "gpt" else train_induction)(
                    seed, gate, steps)
            name = run_name(part, seed, gate)
            runs[name] = dict(part=part, seed=seed, output_gate=gate,
                              config=dataclasses.asdict(config), settings=run.settings,
                              cpu_seconds=round(time.process_time() - cpu, 1),
                              losses=[round(x, 4) for x in run.losses.tolist()],
                              val_losses=[round(x, 5) for x in run.val_losses.tolist()],
                              eval_steps=run.eval_steps.tolist())
            arrays.update({f"{name}/{k}": v for k, v in run.params.items()})
            print(f"{name}: val {run.val_losses[-1]:.4f}, {runs[name]['cpu_seconds']} s CPU",
                  flush=True)
    tag = part if part != "gpt" else f"{part}.s{'-'.join(map(str, seeds))}"
    np.savez_compressed(parts / f"{tag}.npz", **arrays)
    meta = dict(commit=commit, load_average=[round(x, 1) for x in os.getloadavg()],
                runs=runs)
    (parts / f"{tag}.json").write_text(json.dumps(meta) + "\n", encoding="utf-8")


def _mean_se(a, axis=0):
    a = np.asarray(a, dtype=np.float64)
    return (np.round(a.mean(axis=axis), 6).tolist(),
            np.round(a.std(axis=axis, ddof=1) / np.sqrt(a.shape[axis]), 6).tolist())


def measure(part, params, config):
    """The measurements of one run (float64)."""
    p64 = {k: v.astype(np.float64) for k, v in params.items()}
    out = {}
    if part != "gpt":
        b = eval_batches()
        ids, labels = b["repeat"]
        first, second = copy_losses(p64, config, ids, labels)
        out.update(first_copy_loss=round(first, 5), second_copy_loss=round(second, 5))
        half = TASK["eval_segment"]
        texts = {"no_repeat": (b["no_repeat"][0], None), "first_copy": (ids, half)}
        zero_ids = ids
    else:
        vocab, _, val_ids = tg.data()
        texts_all = held_out_windows(Checkpoint(params, config, vocab, {}))[:GPT_WINDOWS]
        out["val_loss_text"] = round(text_loss(params, config, val_ids), 5)
        texts = {"windows": (texts_all, None)}
        zero_ids = texts_all
    for key, (t, nq) in texts.items():
        w = first_weights(p64, config, t, nq)  # (texts, layers, heads)
        mean, se = _mean_se(w)
        out[f"first_weight.{key}"] = dict(mean=mean, se=se,
                                          uniform=round(uniform_share(nq or t.shape[1]), 6))
    zl = zeroed_value_losses(p64, config, zero_ids, ZEROED[part], slice(*SCORED[part]))
    base = zl[None]
    out["zeroed_value"] = {str(pos): dict(zip(("mean", "se"), _mean_se(zl[pos] - base)))
                           for pos in ZEROED[part]}
    out["loss_unzeroed"] = round(float(base.mean()), 6)
    if config.output_gate:
        out["mean_gate"] = np.round(mean_gates(p64, config, zero_ids[:64]), 5).tolist()
    return out


#: Steps of the ungated training re-run at merge time against the stored traces.
CHECK_STEPS = 20


def stored_plain_runs(seeds_of):
    """The ungated runs: notebook 15's and 14's stored final parameters, as ``(runs,
    arrays)`` in the parts' layout, each with ``reproduced``: the largest difference between
    the stored trace's first ``CHECK_STEPS`` losses and this tool's own ungated training."""
    from attn_core.nn import load_checkpoint
    from attn_core.nn.induction_run import load_runs
    runs, arrays = {}, {}
    stored = load_runs()
    for seed in seeds_of.get("induction", ()):
        name = run_name("induction", seed, False)
        config = stored.config(2)
        with blas_threads(tg.THREADS):
            _, run = train_induction(seed, False, CHECK_STEPS)
        ref = stored.run(seed, 2)["train_losses"][:CHECK_STEPS]
        runs[name] = dict(part="induction", seed=seed, output_gate=False,
                          config=dataclasses.asdict(config), cpu_seconds=0.0,
                          source="induction-snapshots.npz (notebook 15), step 2500",
                          reproduced=float(np.abs(run.losses - np.array(ref)).max()))
        arrays.update({f"{name}/{k}": v for k, v in stored.params(seed, 2, 2500).items()})
    for seed in seeds_of.get("gpt", ()):
        if seed != tg.SEED:
            raise ValueError(f"only seed {tg.SEED} of the tiny GPT is stored, not {seed}")
        ck = load_checkpoint()
        trace = json.loads(tg.TRACE_PATH.read_text(encoding="utf-8"))
        with blas_threads(tg.THREADS):
            _, run = train_tiny_gpt(seed, False, CHECK_STEPS)
        name = run_name("gpt", seed, False)
        runs[name] = dict(part="gpt", seed=seed, output_gate=False,
                          config=dataclasses.asdict(ck.config), cpu_seconds=0.0,
                          source="gpt-checkpoint.npz (notebook 14)",
                          val_losses=trace["val_losses"], eval_steps=trace["eval_steps"],
                          reproduced=float(np.abs(run.losses - np.array(
                              trace["losses"][:CHECK_STEPS])).max()))
        arrays.update({f"{name}/{k}": v for k, v in ck.params.items()})
    return runs, arrays


def _stored_trained_runs():
    """The runs of the stored trace that a part trained (not the ungated runs it reads back),
    with their arrays and commits: the starting point of a merge."""
    if not GATE_TRACE_PATH.exists():
        return {}, {}, set(), []
    trace = json.loads(GATE_TRACE_PATH.read_text(encoding="utf-8"))
    runs = {n: {k: v for k, v in r.items() if k != "measures"}
            for n, r in trace["runs"].items() if "source" not in r}
    with np.load(GATE_RUNS_PATH) as f:
        arrays = {k: f[k] for k in f.files if k.split("/")[0] in runs}
    return runs, arrays, set(trace["commits"]), list(trace["part_load_averages"])


def merge():
    runs, arrays, commits, loads = _stored_trained_runs()
    for meta_path in sorted(PARTS.glob("*.json")):
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        commits.add(meta["commit"])
        loads.append(meta["load_average"])
        runs.update(meta["runs"])
        with np.load(meta_path.with_suffix(".npz")) as f:
            arrays.update({k: f[k] for k in f.files})
    seeds_of = {}
    for r in runs.values():
        seeds_of.setdefault(r["part"], []).append(r["seed"])
    plain_runs, plain_arrays = stored_plain_runs(seeds_of)
    runs.update(plain_runs)
    arrays.update(plain_arrays)
    cpu = time.process_time()
    with blas_threads(tg.THREADS):
        for name, r in sorted(runs.items()):
            prefix = f"{name}/"
            params = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
            r["measures"] = measure(r["part"], params, GPTConfig(**r["config"]))
            print(name, json.dumps(r["measures"])[:300], flush=True)
    trace = dict(format_version=1, commits=sorted(commits), merge_commit=tg.git_commit(),
                 part_load_averages=loads, merge_cpu_seconds=round(time.process_time() - cpu, 1),
                 train_cpu_seconds=round(sum(r["cpu_seconds"] for r in runs.values()), 1),
                 induction=dict(task=TASK, model=ti.MODEL, init_std=ti.INIT_STD,
                                train=ti.TRAIN),
                 induction_long=dict(steps=LONG_STEPS),
                 gpt=dict(model=tg.MODEL, train=tg.TRAIN, windows=GPT_WINDOWS),
                 zeroed=ZEROED, scored=SCORED, numpy=np.__version__, cpu=tg.cpu_features(),
                 runs=runs)
    np.savez_compressed(GATE_RUNS_PATH, **arrays)
    GATE_TRACE_PATH.write_text(json.dumps(trace, indent=None) + "\n", encoding="utf-8")
    print(f"wrote {GATE_RUNS_PATH} and {GATE_TRACE_PATH}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("induction", "induction_long", "gpt"))
    ap.add_argument("--seed", type=int, nargs="+", default=None)
    ap.add_argument("--merge", action="store_true")
    ap.add_argument("--steps", type=int, default=None, help="fewer steps, a try: written to "
                    "build/gate-try/, never merged")
    args = ap.parse_args(argv)
    if args.merge:
        merge()
        return 0
    if args.part is None:
        ap.error("give --part or --merge")
    seeds = args.seed or (INDUCTION_SEEDS if args.part != "gpt" else (0,))
    if args.steps:
        train_part(args.part, seeds, args.steps, ROOT / "build" / "gate-try")
        return 0
    if tg.git_commit().endswith("+dirty"):
        sys.exit("commit first: the stored runs record the commit they were trained from")
    train_part(args.part, seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
