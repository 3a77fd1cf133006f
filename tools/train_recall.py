"""Train notebook 19's one-layer recall models on multi-query associative recall (MQAR) and
store their results: attn_core/data/recall-runs.json (issue 48).

The sweep: every mixer of ``attn_core.nn.recall_model.MIXERS`` x ``PAIRS`` x ``STATES``
(``d_state``, one head: a state of ``d_state^2`` numbers), and the control at equal
parameters: two heads of ``d_state / 2`` (half the state, the same weights' shapes) for
``CONTROL_MIXERS`` at ``CONTROL_STATE``. Each run: ``train_recall(config, m, **TRAIN,
seed=SEED)``, then measured on ``EVAL`` fresh sequences (seed ``EVAL_SEED``): accuracy, and
the mean share of the read's weight on the right pair. One BLAS thread.

Run from a committed tree at the repository root: ``nice -n 10 .venv/bin/python
tools/train_recall.py``. The trace (commit, CPU time per run and in all, seeds, load) is
stored with the results.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import numpy as np  # noqa: E402
from train_gpt import cpu_features, git_commit  # noqa: E402

from attn_core.nn.recall_model import (  # noqa: E402
    MIXERS,
    RecallConfig,
    recall_accuracy,
    right_pair_weight,
    train_recall,
)
from attn_core.recall import mqar_batch  # noqa: E402
from attn_core.threads import blas_threads  # noqa: E402

OUT = ROOT / "attn_core" / "data" / "recall-runs.json"
PAIRS = (4, 8, 16, 32)
STATES = (8, 16)
CONTROL_STATE = 16
CONTROL_MIXERS = ("linear", "gated_delta")
TRAIN = dict(steps=300, batch=32, lr=3e-3)
SEED = 0
EVAL_SEED, EVAL = 1000, 256


def run_one(mixer, m, d_state, n_heads):
    config = RecallConfig(mixer, d_state=d_state, n_heads=n_heads)
    t0 = time.process_time()
    params, losses = train_recall(config, m, **TRAIN, seed=SEED)
    batch = mqar_batch(np.random.default_rng(EVAL_SEED), EVAL, m)
    return {"mixer": mixer, "pairs": m, "d_state": d_state, "n_heads": n_heads,
            "accuracy": recall_accuracy(params, config, batch),
            "right_weight": right_pair_weight(params, config, batch),
            "final_loss": float(losses[-20:].mean()),
            "losses": [round(float(x), 4) for x in losses[::10]],
            "cpu_s": round(time.process_time() - t0, 2), "load": os.getloadavg()[0]}


def main():
    commit = git_commit()
    jobs = [(mx, m, d, 1) for d in STATES for m in PAIRS for mx in MIXERS]
    jobs += [(mx, m, CONTROL_STATE, 2) for m in PAIRS for mx in CONTROL_MIXERS]
    runs, t0 = [], time.process_time()
    with blas_threads(1):
        for job in jobs:
            runs.append(run_one(*job))
            r = runs[-1]
            print(f"{r['mixer']:12s} m={r['pairs']:2d} D={r['d_state']:2d} h={r['n_heads']} "
                  f"acc={r['accuracy']:.3f} w={r['right_weight']:.3f} cpu={r['cpu_s']}s "
                  f"load={r['load']:.1f}", flush=True)
    trace = {"commit": commit, "cpu_s": round(time.process_time() - t0, 1),
             "seed": SEED, "eval_seed": EVAL_SEED, "eval_sequences": EVAL, "train": TRAIN,
             "model": {"d_model": 32, "n_keys": 32, "n_values": 32}, "cpu": cpu_features(),
             "command": "nice -n 10 .venv/bin/python tools/train_recall.py"}
    OUT.write_text(json.dumps({"trace": trace, "runs": runs}, indent=1) + "\n")
    print(f"stored {len(runs)} runs in {OUT} ({trace['cpu_s']} s of CPU)")


if __name__ == "__main__":
    main()
