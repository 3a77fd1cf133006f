"""Train notebook 19's hybrid tiny GPT and its two peers, and store them with what is measured
(issue 48, part 4).

``--model hybrid``: four layers, three gated-delta layers then one softmax layer
(:data:`attn_core.nn.hybrid.HYBRID_MODELS`); ``softmax`` and ``linear``: four layers of one kind.
Everything else is the tiny GPT's run (``tools/train_gpt.py``: the same corpus, split, batch,
learning rate, schedule and 2000 steps, float32, one BLAS thread, its training loop
``timed_run``); ``--seed`` picks the seed (0, notebook 14's, by default). Seed 0 stores
attn_core/data/hybrid-{model}-checkpoint.npz and hybrid-{model}-trace.json; another seed
stores only its trace, hybrid-{model}-s{seed}-trace.json (the spread over seeds is read from
the traces' measures; the weights of seed 0 are the ones the notebook recomputes from).

The trace holds every step's loss, the validation losses, the settings, seed, git commit, CPU
time and load, and the measures of the trained model: the validation text's loss per window
(mean and standard error), recall on a repeated random string
(:func:`attn_core.nn.hybrid.copy_recall`), and the model's parameter count.

``--copy``: recall measured where it can be learnt. The same three stacks of four layers,
attention-only and small (notebook 15/18's copy-task model: 2 heads of 16, no MLP), each
trained on the copy task of notebook 15 with its settings (``tools/train_induction.py``'s
``train_variant``) for seeds 0, 1, 2, and measured as notebook 18 measures its copy sweep
(the first and second copy's loss by segment length); stored in hybrid-copy.npz and
hybrid-copy-trace.json. A language model of this size trained on the text does not copy a
random string (its ``copy_recall`` is at its control), so recall is measured on models trained
for it, as Zoology (Arora et al. 2023) compares mixers.

Run from the repository root: ``python tools/train_hybrid.py --model hybrid --seed 0`` (and
``softmax``, ``linear``, seeds 1, 2), ``python tools/train_hybrid.py --copy``; ``--steps N`` and
``--out DIR`` for a try (do not commit such a run).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))

import numpy as np  # noqa: E402
from _machine import LoadMeter  # noqa: E402
from train_gpt import (  # noqa: E402
    MODEL,
    SEED,
    THREADS,
    TRAIN,
    VAL_FRACTION,
    cpu_features,
    data,
    git_commit,
    timed_run,
)

from attn_core.nn import GPTConfig  # noqa: E402
from attn_core.nn.checkpoint import save_checkpoint  # noqa: E402
from attn_core.nn.hybrid import (  # noqa: E402
    HYBRID_COPY_PATH,
    HYBRID_COPY_TRACE,
    HYBRID_MODELS,
    copy_recall,
    hybrid_paths,
    window_losses,
)
from attn_core.threads import blas_threads  # noqa: E402

#: Four layers (Qwen3-Next's group of three gated-delta layers and one full-attention layer).
N_LAYERS = 4
#: Steps of each run: the tiny GPT's.
STEPS = TRAIN["steps"]
#: Seeds of the stored runs.
SEEDS = (0, 1, 2)


def config_for(vocab, model):
    return GPTConfig(vocab_size=len(vocab), **dict(MODEL, n_layers=N_LAYERS),
                     attention=HYBRID_MODELS[model])


def measure(params, config, val_ids):
    """The stored measures of a trained model (each recomputable by the notebook)."""
    with blas_threads(THREADS):
        w = window_losses(params, config, val_ids)
        recall = copy_recall(params, config)
    return {"val_loss": float(w.mean()), "val_loss_sem": float(w.std(ddof=1) / np.sqrt(len(w))),
            "val_windows": len(w), "recall": recall,
            "n_params": int(sum(a.size for a in params.values()))}


def copy_sweep(seeds, steps=None, out=None):
    """``--copy``: the three stacks, attention-only, trained on the copy task (notebook 15's
    task, model width and settings; four layers) for each seed, and measured by segment
    length as notebook 18's sweep is; stores hybrid-copy.npz (every run's weights) and
    hybrid-copy-trace.json."""
    from train_induction import INIT_STD, copy_by_length, train_variant
    from train_induction import MODEL as COPY_MODEL
    from train_induction import TRAIN as COPY_TRAIN

    from attn_core.nn.copy_lengths import LENGTH_BATCH, LENGTHS, length_batches
    from attn_core.nn.induction_run import TASK

    steps = steps or COPY_TRAIN["steps"]
    commit = git_commit()
    batches = length_batches()
    runs, arrays = [], {}
    start, cpu0 = time.perf_counter(), time.process_time()
    with blas_threads(THREADS), LoadMeter() as load:
        for seed in seeds:
            for model, layers in HYBRID_MODELS.items():
                c = time.process_time()
                config, run = train_variant(seed, layers, COPY_MODEL["n_heads"], steps,
                                            n_layers=N_LAYERS)
                got = copy_by_length(run.params, config, batches)
                runs.append(dict(seed=seed, model=model, layers=list(layers), **got,
                                 train_losses=[round(x, 4) for x in run.losses.tolist()],
                                 cpu_seconds=round(time.process_time() - c, 1)))
                arrays.update({f"s{seed}.{model}/{k}": v for k, v in run.params.items()})
                print(f"seed {seed}, {model}: second-copy loss by length {got['second']} "
                      f"({time.process_time() - c:.0f} s CPU)", flush=True)
    npz_path, trace_path = HYBRID_COPY_PATH, HYBRID_COPY_TRACE
    if out is not None:
        npz_path, trace_path = out / npz_path.name, out / trace_path.name
    np.savez_compressed(npz_path, **arrays)
    trace = dict(format_version=1, task={k: list(v) if isinstance(v, tuple) else v
                                         for k, v in TASK.items()},
                 lengths=list(LENGTHS), length_batch=LENGTH_BATCH,
                 config=dict(vocab_size=TASK["vocab_size"], n_ctx=TASK["n_ctx"], **COPY_MODEL,
                             n_layers=N_LAYERS),
                 init_std=INIT_STD, settings=dict(COPY_TRAIN, steps=steps), seeds=list(seeds),
                 runs=runs, commit=commit, seconds=round(time.perf_counter() - start, 1),
                 cpu_seconds=round(time.process_time() - cpu0, 1),
                 machine_load=load.summary(), others_share=round(load.others, 3),
                 numpy=np.__version__, python=platform.python_version(), cpu=cpu_features())
    trace_path.write_text(json.dumps(trace, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {npz_path} and {trace_path}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=tuple(HYBRID_MODELS))
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--copy", action="store_true", help="the three stacks on the copy task, "
                    "every seed (see the docstring)")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None, help="folder for the files "
                    "(default attn_core/data/)")
    args = ap.parse_args(argv)
    if args.copy == (args.model is not None):
        ap.error("give --model or --copy")
    if args.copy:
        return copy_sweep(SEEDS, args.steps, args.out)
    commit = git_commit()  # the tree the run starts from (read now: it may change meanwhile)
    vocab, train_ids, val_ids = data()
    config = config_for(vocab, args.model)
    train = dict(TRAIN, steps=args.steps or STEPS)
    print(config, f"seed {args.seed}", flush=True)
    run, seconds, cpu_seconds, load = timed_run(config, train_ids, val_ids, train, args.seed)
    cpu1 = time.process_time()
    measures = measure(run.params, config, val_ids)
    measure_cpu = time.process_time() - cpu1
    print(f"trained in {cpu_seconds:.0f} s CPU; {json.dumps(measures)}", flush=True)
    settings = dict(run.settings, val_fraction=VAL_FRACTION, threads=THREADS)
    meta = dict(model=args.model, settings=settings, seed=args.seed, commit=commit,
                seconds=round(seconds, 1), cpu_seconds=round(cpu_seconds, 1),
                measure_cpu_seconds=round(measure_cpu, 1), machine_load=load.summary(),
                others_share=round(load.others, 3), numpy=np.__version__)
    ck_path, trace_path = hybrid_paths(args.model, args.seed)
    if args.out is not None:
        ck_path = None if ck_path is None else args.out / ck_path.name
        trace_path = args.out / trace_path.name
    if ck_path is not None:
        save_checkpoint(ck_path, run.params, config, vocab, meta)
    trace = dict(meta, format_version=1, layers=list(HYBRID_MODELS[args.model]),
                 config=dict(vocab_size=config.vocab_size, **dict(MODEL, n_layers=N_LAYERS),
                             d_ff=config.d_ff),
                 losses=run.losses.tolist(), val_losses=run.val_losses.tolist(),
                 eval_steps=run.eval_steps.tolist(), grad_norms=run.grad_norms.tolist(),
                 lrs=run.lrs.tolist(), measures=measures, python=platform.python_version(),
                 cpu=cpu_features())
    trace_path.write_text(json.dumps(trace, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {trace_path}" + ("" if ck_path is None else f" and {ck_path}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
