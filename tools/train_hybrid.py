"""Train notebook 19's hybrid tiny GPT and its two peers, and store them with what is measured:
attn_core/data/hybrid-{model}-checkpoint.npz and hybrid-{model}-trace.json (issue 48, part 4).

``--model hybrid``: four layers, three gated-delta layers then one softmax layer
(:data:`attn_core.nn.hybrid.HYBRID_MODELS`); ``softmax`` and ``linear``: four layers of one kind.
Everything else is the tiny GPT's run (``tools/train_gpt.py``: the same corpus, split, seed,
batch, learning rate and schedule, float32, one BLAS thread), except the number of steps:
``STEPS`` = 600 instead of 2000, for the three runs alike: a gated-delta layer's backward (a
Python loop over the 64 positions) makes the hybrid's step about three times the softmax
model's (0.65 s of CPU against 0.19 s, measured at load 8-9), and the three runs, made at the
same time at ``nice 10`` on a shared 2-core machine where each got under a tenth of a core,
had to finish within the hour.

The trace holds every step's loss, the validation losses, the settings, seed, git commit, CPU
time and load, and the measures of the trained model: the validation text's loss per window
(mean and standard error), recall on a repeated random string
(:func:`attn_core.nn.hybrid.copy_recall`), and the model's parameter count.

Run from the repository root: ``python tools/train_hybrid.py --model hybrid`` (and
``softmax``, ``linear``); ``--steps N`` and ``--out DIR`` for a try (do not commit such a run).
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
    git_commit,  # noqa: E402
)

from attn_core.nn import GPTConfig  # noqa: E402
from attn_core.nn.checkpoint import save_checkpoint  # noqa: E402
from attn_core.nn.hybrid import HYBRID_MODELS, copy_recall, hybrid_paths, window_losses  # noqa: E402
from attn_core.nn.train import train_gpt  # noqa: E402
from attn_core.threads import blas_threads  # noqa: E402

#: Four layers (Qwen3-Next's group of three gated-delta layers and one full-attention layer).
N_LAYERS = 4
#: Steps of each of the three runs (the tiny GPT's 2000 cut: see the docstring).
STEPS = 600


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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=tuple(HYBRID_MODELS), required=True)
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--out", type=Path, default=None, help="folder for the two files "
                    "(default attn_core/data/)")
    args = ap.parse_args(argv)
    commit = git_commit()  # the tree the run starts from (read now: it may change meanwhile)
    vocab, train_ids, val_ids = data()
    config = config_for(vocab, args.model)
    train = dict(TRAIN, steps=args.steps)
    print(config, flush=True)

    def progress(step, loss):
        if step % 100 == 0:
            print(f"step {step:5d}  loss {loss:.4f}  cpu {time.process_time() - cpu0:6.1f} s",
                  flush=True)

    cpu0 = time.process_time()
    start = time.perf_counter()
    with blas_threads(THREADS), LoadMeter() as load:
        run = train_gpt(config, train_ids, val_ids, seed=SEED, callback=progress, **train)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu0
    cpu1 = time.process_time()
    measures = measure(run.params, config, val_ids)
    measure_cpu = time.process_time() - cpu1
    print(f"trained in {cpu_seconds:.0f} s CPU; {json.dumps(measures)}", flush=True)
    settings = dict(run.settings, val_fraction=VAL_FRACTION, threads=THREADS)
    meta = dict(model=args.model, settings=settings, seed=SEED, commit=commit,
                seconds=round(seconds, 1), cpu_seconds=round(cpu_seconds, 1),
                measure_cpu_seconds=round(measure_cpu, 1), machine_load=load.summary(),
                others_share=round(load.others, 3), numpy=np.__version__)
    ck_path, trace_path = hybrid_paths(args.model)
    if args.out is not None:
        ck_path, trace_path = args.out / ck_path.name, args.out / trace_path.name
    save_checkpoint(ck_path, run.params, config, vocab, meta)
    trace = dict(meta, format_version=1, layers=list(HYBRID_MODELS[args.model]),
                 config=dict(vocab_size=config.vocab_size, **dict(MODEL, n_layers=N_LAYERS),
                             d_ff=config.d_ff),
                 losses=run.losses.tolist(), val_losses=run.val_losses.tolist(),
                 eval_steps=run.eval_steps.tolist(), grad_norms=run.grad_norms.tolist(),
                 lrs=run.lrs.tolist(), measures=measures, python=platform.python_version(),
                 cpu=cpu_features())
    trace_path.write_text(json.dumps(trace, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {ck_path} and {trace_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
