"""Speed of the tiny GPT (issue 21): a numpy training step against PyTorch's, and sampling
with the KV cache against recomputing the whole prefix.

Sections (each prints a table; both go to benchmarks/RESULTS.md as the section
"Tiny GPT (bench_gpt.py)", replacing only that section):

1. one training step (forward + backward + clip + AdamW, float32) at the full run's shapes
   (``tools/train_gpt.py``: its config and batch): attn_core.nn against the same model in
   PyTorch (``tests/test_gpt_torch.torch_gpt``, the tests' re-implementation, with
   ``torch.optim.AdamW`` and ``clip_grad_norm_``), attention through
   ``F.scaled_dot_product_attention(is_causal=True)``; the backend PyTorch picks is read
   with ``torch._fused_sdp_choice`` on the step's own tensors and printed. Both on 2
   threads; the two alternate round by round (rotating order, as bench_attention.py does)
   and the ratio is the median of the per-round ratios. Then the same step again while two
   CPU-bound processes run beside it (``_machine.BusyLoops``, started and stopped here):
   numpy on two BLAS threads, numpy on one (the course's rule, ``attn_core.threads``) and
   PyTorch, as ratios to PyTorch's busy step in that one run.
2. sampling, tokens per second, 64, 256 and 1024 tokens from a one-token prompt:
   ``attn_core.nn.generate`` (KV cache) against a loop that recomputes ``gpt_forward``
   over the whole prefix for every token (same sampling). The full run's n_ctx is 64, and
   learned positions stop there, so this section uses the same widths with n_ctx = 1024
   (random initial weights: speed does not depend on what the weights learned).

Run on a quiet machine: ``.venv/bin/python benchmarks/bench_gpt.py`` (a few minutes;
``--quick`` for fewer rounds, ``--no-write`` to print only).
"""

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))

import _machine  # noqa: E402
import _results  # noqa: E402

OVERRIDES = _machine.prepare_environment()  # re-execs this script once

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_info  # noqa: E402

from attn_core.nn import (  # noqa: E402
    AdamW,
    GPTConfig,
    clip_grad_norm,
    gpt_forward,
    gpt_loss_and_grads,
    init_gpt,
    is_decayed,
)
from attn_core.nn.generate import _draw, generate, next_token_probs  # noqa: E402
from attn_core.threads import LEARNER_THREADS, blas_threads  # noqa: E402

THREADS = 2
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## Tiny GPT (bench_gpt.py)"
SAMPLE_LENGTHS = (64, 256, 1024)
GOAL_RATIO = 1.5
#: The step beside two busy processes: numpy on 2 BLAS threads, on the learner rule's
#: thread count (attn_core.threads), and the peer.
BUSY_ROWS = ("numpy step, 2 BLAS threads, busy", "numpy step, 1 BLAS thread (the course's rule), "
             "busy", "PyTorch, busy")


def full_run_shapes():
    """The full run's config and batch, from tools/train_gpt.py (one source of truth)."""
    import train_gpt
    vocab, train_ids, _ = train_gpt.data()
    return train_gpt.config_for(vocab), train_gpt.TRAIN, train_ids



# --- 1. a training step ----------------------------------------------------------------------

def numpy_step(config, params, x, y, train):
    opt = AdamW(train["lr"], betas=train["betas"], weight_decay=train["weight_decay"],
                decay=is_decayed)

    def step():
        loss, grads = gpt_loss_and_grads(params, config, x, y)
        grads, _ = clip_grad_norm(grads, train["max_grad_norm"])
        opt.step(params, grads)
        return loss
    return step


def torch_step(torch, config, params, x, y, train):
    from test_gpt_torch import torch_gpt
    F = torch.nn.functional
    tp = {k: torch.from_numpy(v.copy()).requires_grad_(True) for k, v in params.items()}
    decayed = [v for k, v in tp.items() if is_decayed(k)]
    rest = [v for k, v in tp.items() if not is_decayed(k)]
    opt = torch.optim.AdamW([{"params": decayed, "weight_decay": train["weight_decay"]},
                             {"params": rest, "weight_decay": 0.0}], lr=train["lr"],
                            betas=train["betas"], eps=1e-8, foreach=True)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad(set_to_none=True)
        logits, _ = torch_gpt(torch, tp, config, tx, sdpa=True)
        loss = F.cross_entropy(logits.reshape(-1, config.vocab_size), ty.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(tp.values(), train["max_grad_norm"])
        opt.step()
        return float(loss.detach())
    return step


def sdpa_backend(torch, config, x):
    """The backend torch picks for the step's attention (query, key, value needing grads)."""
    b, n, h = x.shape[0], x.shape[1], config.n_heads
    q = torch.randn(b, h, n, config.d_head, requires_grad=True)
    choice = int(torch._fused_sdp_choice(q, q, q, is_causal=True))
    return f"{choice} ({torch.nn.attention.SDPBackend(choice).name})"


def train_section(torch, rounds):
    config, train, train_ids = full_run_shapes()
    rng = np.random.default_rng(0)
    from attn_core.nn.data import get_batch
    x, y = get_batch(rng, train_ids, train["batch"], config.n_ctx)
    params = init_gpt(config, np.random.default_rng(0), dtype="float32")
    ours = numpy_step(config, {k: v.copy() for k, v in params.items()}, x, y, train)
    theirs = torch_step(torch, config, params, x, y, train)
    first = (float(numpy_step(config, {k: v.copy() for k, v in params.items()}, x, y,
                              train)()),
             torch_step(torch, config, params, x, y, train)())
    from attn_core.nn import cross_entropy
    tparams = {k: torch.from_numpy(v.copy()) for k, v in params.items()}
    from test_gpt_torch import torch_gpt

    def ours_forward():
        return cross_entropy(gpt_forward(params, config, x)[0], y)[0]

    def theirs_forward():
        with torch.no_grad():
            logits, _ = torch_gpt(torch, tparams, config, torch.from_numpy(x), sdpa=True)
            return float(torch.nn.functional.cross_entropy(
                logits.reshape(-1, config.vocab_size), torch.from_numpy(y).reshape(-1)))

    ours_1 = numpy_step(config, {k: v.copy() for k, v in params.items()}, x, y, train)

    def ours_one_thread():
        with blas_threads(LEARNER_THREADS):
            return ours_1()

    times, _ = _machine.interleaved({"attn_core.nn (numpy)": ours, "PyTorch": theirs,
                         "numpy step, 1 BLAS thread": ours_one_thread,
                         "numpy forward + loss": ours_forward,
                         "PyTorch forward + loss (no grad)": theirs_forward}, rounds)
    ratio = float(np.median(np.array(times["attn_core.nn (numpy)"]) / np.array(times["PyTorch"])))
    # The same contenders beside two busy processes: what a learner's laptop in a video call
    # does to a step on two BLAS threads, and what the course's one thread does instead.
    busy_rounds = max(3, rounds // 3)
    with _machine.BusyLoops(2, seconds=600) as busy, _machine.LoadMeter() as meter:
        busy_times, _ = _machine.interleaved({
            BUSY_ROWS[0]: ours, BUSY_ROWS[1]: ours_one_thread, BUSY_ROWS[2]: theirs},
            busy_rounds)
    return dict(config=config, batch=train["batch"], times=times, ratio=ratio, first=first,
                backend=sdpa_backend(torch, config, x), busy_times=busy_times,
                busy_load=f"{busy.describe()}; {meter.summary()}")


# --- 2. sampling -----------------------------------------------------------------------------

def generate_recompute(params, config, prompt, n_new, seed=0):
    """The slow way: a full causal forward over the whole prefix for every new token."""
    rng = np.random.default_rng(seed)
    ids = list(prompt)
    with blas_threads():  # the same BLAS threads as generate (the learner rule)
        return _recompute(params, config, ids, n_new, rng)


def _recompute(params, config, ids, n_new, rng):
    for _ in range(n_new):
        logits, _ = gpt_forward(params, config, np.array(ids[-config.n_ctx:]))
        ids.append(_draw(rng, next_token_probs(logits[-1])))
    return np.array(ids)


def sample_section(rounds, base):
    config = GPTConfig(vocab_size=base.vocab_size, n_ctx=max(SAMPLE_LENGTHS),
                       d_model=base.d_model, n_heads=base.n_heads, n_layers=base.n_layers)
    params = init_gpt(config, np.random.default_rng(0), dtype="float32")
    rows = []
    for n in SAMPLE_LENGTHS:
        n_new = n - 1
        same = np.array_equal(generate(params, config, [0], n_new, seed=1).ids,
                              generate_recompute(params, config, [0], n_new, seed=1))
        times, _ = _machine.interleaved({
            "kv": lambda n_new=n_new: generate(params, config, [0], n_new, seed=1),
            "recompute": lambda n_new=n_new: generate_recompute(params, config, [0], n_new,
                                                                seed=1),
        }, rounds if n < 1024 else max(1, rounds // 3))
        kv, full = (float(np.median(times[k])) for k in ("kv", "recompute"))
        rows.append(dict(n=n, kv=n_new / kv, full=n_new / full, speedup=full / kv, same=same))
    return config, rows


# --- report ----------------------------------------------------------------------------------

def lines(train, sample_config, samples, load, started, info):
    t_np = np.median(train["times"]["attn_core.nn (numpy)"])
    t_pt = np.median(train["times"]["PyTorch"])
    goal = "met" if train["ratio"] <= GOAL_RATIO else "NOT met"
    c = train["config"]
    md = [SECTION, "",
          f"Generated by `benchmarks/bench_gpt.py` on {started}. Do not edit by hand. "
          f"{THREADS} threads for numpy and torch; load: {load}.", "",
          *_machine.describe(info, OVERRIDES), "",
          f"### Training step, float32: d_model {c.d_model}, {c.n_layers} layers, "
          f"{c.n_heads} heads, n_ctx {c.n_ctx}, vocab {c.vocab_size}, batch {train['batch']}",
          "",
          "| | median per step | x PyTorch |", "|---|---:|---:|",
          f"| attn_core.nn (numpy) | {1e3 * t_np:.1f} ms | {train['ratio']:.2f} |",
          f"| PyTorch {_version('torch')} (SDPA, autograd, torch.optim.AdamW) | "
          f"{1e3 * t_pt:.1f} ms | 1.00 |",
          *[f"| {name} | {1e3 * np.median(train['times'][name]):.1f} ms | "
            f"{np.median(train['times'][name]) / t_pt:.2f} |"
            for name in ("numpy step, 1 BLAS thread", "numpy forward + loss",
                         "PyTorch forward + loss (no grad)")], "",
          "(The 1-thread row is the same numpy step with OpenBLAS limited to one thread, "
          "which is how tools/train_gpt.py trains: on a loaded machine OpenBLAS's two threads "
          "wait for each other. The last two rows time the forward pass and the loss alone: "
          "the rest of a step is the backward pass, the clip and AdamW.)", "",
          *busy_lines(train), "",
          f"Goal: numpy within x{GOAL_RATIO} of PyTorch: **{goal}** (median of the per-round "
          f"ratios over {len(train['times']['PyTorch'])} interleaved rounds). PyTorch's "
          f"attention backend for these shapes (`torch._fused_sdp_choice`, with gradients): "
          f"{train['backend']}. First-step loss, numpy vs torch: {train['first'][0]:.6f} vs "
          f"{train['first'][1]:.6f}.", "",
          f"### Sampling, tokens per second (n_ctx {sample_config.n_ctx}, same widths, "
          "float32, one-token prompt)", "",
          "| tokens | KV cache | recompute the prefix | speed-up | same tokens |",
          "|---:|---:|---:|---:|---|"]
    for r in samples:
        md.append(f"| {r['n']} | {r['kv']:.0f} | {r['full']:.0f} | x{r['speedup']:.1f} | "
                  f"{'yes' if r['same'] else 'NO'} |")
    md += ["", "Both run on the course's one BLAS thread (`attn_core.threads`). "
           "The recompute loop runs `gpt_forward` over the whole prefix for every token "
           "(O(t^2) attention per token); the KV cache runs each token once per layer and "
           "attends with one query over the cache (`attn_core.decoding`). Both draw from the "
           "same distributions with the same seed, so they produce the same tokens.", ""]
    return md


def busy_lines(train):
    """The busy machine's table: each row's median step and its ratio to PyTorch's (the median
    of the per-round ratios)."""
    times = {k: np.array(v) for k, v in train["busy_times"].items()}
    peer = times[BUSY_ROWS[2]]
    md = ["### The same step beside two busy processes", "",
          f"Measured in the same run: {train['busy_load']}; {len(peer)} interleaved rounds.", "",
          "| | median per step | x PyTorch (busy) |", "|---|---:|---:|"]
    for name in BUSY_ROWS:
        md.append(f"| {name} | {1e3 * np.median(times[name]):.1f} ms | "
                  f"{np.median(times[name] / peer):.2f} |")
    md += ["", "(Two OpenBLAS threads wait for each other at every product while the other core "
           "is taken; one thread does not wait. Every path a learner meets runs on "
           "`attn_core.threads.blas_threads()`: one thread.)"]
    return md


def _version(name):
    try:
        return __import__(name).__version__
    except ImportError:
        return "missing"


def write_section(md):
    _results.write_block(RESULTS, "gpt", md)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--no-write", action="store_true", help="print only, keep RESULTS.md")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(THREADS)
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    with blas_threads(THREADS), _machine.LoadMeter() as m:
        train = train_section(torch, 5 if args.quick else 15)
        sample_config, samples = sample_section(1 if args.quick else 3, train["config"])
    md = lines(train, sample_config, samples, m.summary(), started, threadpool_info())
    print("\n".join(md))
    if not args.no_write:
        write_section(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
