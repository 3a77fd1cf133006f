"""Train the tiny GPT's full run and store it: attn_core/data/gpt-checkpoint.npz and
attn_core/data/gpt-trace.json (issue 21).

Seeded (``SEED``), float32, one BLAS thread (``THREADS``: the matrices are small, 2048 rows
of width 64, and on the loaded 2-core machine OpenBLAS's two threads waited for each other:
measured 0.18 s per step with one thread against 2.2 s with two while other processes kept
both cores busy).

The trace records the loss of every step, the validation losses, the unigram and bigram
baselines on the same validation text, the settings, the seed, the git commit, the measured
time, numpy's version and the CPU's features, so ``tests/test_gpt_trace.py`` can re-run
the first steps and compare.

Run from the repository root: ``python tools/train_gpt.py`` (about 3-6 minutes on one core).
``--steps N`` shortens it (for a try; do not commit such a run). ``--attention linear``
trains the same model, with the same settings, seed and data, with linear attention in every
head (notebook 18) and stores it beside the first: ``gpt-linear-checkpoint.npz`` and
``gpt-linear-trace.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
from _machine import LoadMeter  # noqa: E402

from attn_core.nn import GPTConfig  # noqa: E402
from attn_core.nn.baselines import ALPHA, bigram_loss, unigram_loss  # noqa: E402
from attn_core.nn.checkpoint import CHECKPOINT_PATH, save_checkpoint  # noqa: E402
from attn_core.nn.data import CharVocab, load_corpus, split_corpus  # noqa: E402
from attn_core.nn.train import text_loss, train_gpt  # noqa: E402
from attn_core.threads import LEARNER_THREADS, blas_threads  # noqa: E402

TRACE_PATH = ROOT / "attn_core" / "data" / "gpt-trace.json"
SEED = 0
THREADS = LEARNER_THREADS  # the course's one rule (attn_core.threads)
#: The model: small enough for a few minutes of numpy training on 2 cores.
MODEL = dict(n_ctx=64, d_model=64, n_heads=4, n_layers=2)
#: The optimisation (train_gpt's arguments).
TRAIN = dict(steps=2000, batch=32, lr=3e-3, warmup=100, eval_every=100, n_val_batches=8,
             max_grad_norm=1.0, weight_decay=0.1, betas=(0.9, 0.99), dtype="float32")
VAL_FRACTION = 0.1


def git_commit():
    """The HEAD commit, with ``+dirty`` if tracked files other than the stored outputs
    (``attn_core/data/``, which one run of these tools writes while the next starts beside it)
    differ from it."""
    def run(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout
    commit = run("rev-parse", "HEAD").strip() or "unknown"
    dirty = run("status", "--porcelain", "--untracked-files=no", "--", ".",
                ":(exclude)attn_core/data").strip()
    return commit + ("+dirty" if dirty else "")


def cpu_features():
    """numpy's detected CPU features (those it dispatches to) and the CPU model."""
    from numpy._core._multiarray_umath import __cpu_features__ as feats
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    return {"model": model, "machine": platform.machine(),
            "numpy_features": sorted(k for k, v in feats.items() if v),
            "NPY_DISABLE_CPU_FEATURES": os.environ.get("NPY_DISABLE_CPU_FEATURES", "")}


def data():
    """The vocabulary and the training and validation ids of the shipped corpus."""
    text = load_corpus()
    vocab = CharVocab.from_text(text)
    train_ids, val_ids = split_corpus(vocab.encode(text), VAL_FRACTION)
    return vocab, train_ids, val_ids


def config_for(vocab, attention="softmax"):
    return GPTConfig(vocab_size=len(vocab), **MODEL, attention=attention)


def paths_for(attention, out_dir=None):
    """The checkpoint and trace paths of a run: 14's for softmax, ``gpt-linear-*`` beside."""
    ck, trace = CHECKPOINT_PATH, TRACE_PATH
    if attention != "softmax":
        ck = ck.with_name(f"gpt-{attention}-checkpoint.npz")
        trace = trace.with_name(f"gpt-{attention}-trace.json")
    if out_dir is not None:
        ck, trace = out_dir / ck.name, out_dir / trace.name
    return ck, trace


def timed_run(config, train_ids, val_ids, train, seed):
    """Train (``train_gpt`` with the settings ``train``, one BLAS thread), printing the loss
    every 100 steps; returns ``(run, seconds, cpu_seconds, load)`` (``load``: the
    :class:`LoadMeter` of the run). The one training loop of this script and of
    ``tools/train_hybrid.py``."""
    def progress(step, loss):
        if step % 100 == 0:
            print(f"step {step:5d}  loss {loss:.4f}  {time.perf_counter() - start:6.1f} s, "
                  f"cpu {time.process_time() - cpu0:6.1f} s", flush=True)

    start, cpu0 = time.perf_counter(), time.process_time()
    with blas_threads(THREADS), LoadMeter() as load:
        run = train_gpt(config, train_ids, val_ids, seed=seed, callback=progress, **train)
    return run, time.perf_counter() - start, time.process_time() - cpu0, load


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=TRAIN["steps"])
    ap.add_argument("--out", type=Path, default=None, help="folder for the two files "
                    "(default attn_core/data/)")
    ap.add_argument("--attention", choices=("softmax", "linear"), default="softmax",
                    help="each head's weights: the softmax (14's run) or linear attention")
    args = ap.parse_args(argv)
    vocab, train_ids, val_ids = data()
    config = config_for(vocab, args.attention)
    train = dict(TRAIN, steps=args.steps)
    uni = unigram_loss(train_ids, val_ids, len(vocab))
    bi = bigram_loss(train_ids, val_ids, len(vocab))
    print(f"{config}\ntrain {len(train_ids)} / val {len(val_ids)} characters; "
          f"unigram {uni:.4f}, bigram {bi:.4f} nats/char", flush=True)

    run, seconds, cpu_seconds, load = timed_run(config, train_ids, val_ids, train, SEED)
    with blas_threads(THREADS):
        val_text = text_loss(run.params, config, val_ids)
    print(f"done in {seconds:.1f} s; validation loss {run.val_losses[-1]:.4f} on the fixed "
          f"batches, {val_text:.4f} on the whole validation text", flush=True)
    settings = dict(run.settings, val_fraction=VAL_FRACTION, threads=THREADS,
                    baseline_alpha=ALPHA)
    meta = dict(settings=settings, seed=SEED, commit=git_commit(), seconds=round(seconds, 1),
                cpu_seconds=round(cpu_seconds, 1), machine_load=load.summary(),
                others_share=round(load.others, 3), numpy=np.__version__,
                val_loss=float(run.val_losses[-1]), val_loss_text=val_text)
    ck_path, trace_path = paths_for(args.attention, args.out)
    save_checkpoint(ck_path, run.params, config, vocab, meta)
    attention = {} if args.attention == "softmax" else {"attention": args.attention}
    trace = dict(meta, format_version=1, config=dict(vocab_size=config.vocab_size, **MODEL,
                                                     d_ff=config.d_ff, **attention),
                 losses=run.losses.tolist(), val_losses=run.val_losses.tolist(),
                 eval_steps=run.eval_steps.tolist(), grad_norms=run.grad_norms.tolist(),
                 lrs=run.lrs.tolist(), unigram_loss=uni, bigram_loss=bi,
                 python=platform.python_version(), cpu=cpu_features())
    trace_path.write_text(json.dumps(trace, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {ck_path} and {trace_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
