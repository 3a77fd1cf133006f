"""Train notebook 19's one-layer recall models on multi-query associative recall (MQAR) and
store their results: attn_core/data/recall-runs.json (issue 48).

Three groups of runs, each ``train_recall(config, m, ...)`` then measured on ``EVAL`` fresh
sequences of the same task (seed ``EVAL_SEED``), one BLAS thread:

``grid``
    Plain MQAR (every key once): every mixer of ``attn_core.nn.recall_model.MIXERS`` x
    ``PAIRS`` x ``STATES`` (``d_state``, one head: a state of ``d_state^2`` numbers), and the
    control at equal parameters: two heads of ``d_state / 2`` (half the state, the same
    weights' shapes) for ``CONTROL_MIXERS`` at ``CONTROL_STATE``. ``TRAIN`` steps, seed
    ``SEED``.
``updates``
    The delta rule's test: ``UPDATE_PAIRS`` pairs of which ``UPDATE_N`` are written again with
    a new value before the queries (``updates="overwrite"``), against the control with the same
    number of writes on fresh keys (``"new_keys"``), state ``UPDATE_STATE``, every mixer, seeds
    ``UPDATE_SEEDS``.
``steps``
    Training length: the runs of ``LONG_JOBS`` again with ``LONG_STEPS`` steps.

Measured for each run: the accuracy (on every query, and on the queries whose pair was
updated), the mean share of the read's weight on the right pair (the latest write) and on the
write an update replaced, and the accuracy by the quarter of the writes the asked pair sits in.

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
UPDATE_PAIRS, UPDATE_N, UPDATE_STATE = 8, 4, 16
UPDATE_SEEDS = (0, 1, 2)
LONG_STEPS = 1500
#: (mixer, pairs, d_state, n_updates, updates) run again for LONG_STEPS steps
LONG_JOBS = tuple((mx, m, d, 0, "overwrite") for m, d in ((16, 8), (32, 16))
                  for mx in ("linear", "delta")) + \
    tuple((mx, UPDATE_PAIRS, UPDATE_STATE, UPDATE_N, "overwrite")
          for mx in ("linear", "decay", "delta"))
EVAL_SEED, EVAL = 1000, 256


def by_quarter(params, config, batch):
    """Accuracy on the queries whose pair's latest write lies in each quarter of the writes
    (first quarter: the oldest pairs)."""
    n_writes = int(batch.scored[0].argmax()) // 2
    quarter = np.where(batch.scored, 4 * (batch.source // 2) // n_writes, -1)
    return [recall_accuracy(params, config, batch, where=quarter == i) for i in range(4)]


def run_one(group, mixer, m, d_state, n_heads=1, n_updates=0, updates="overwrite",
            steps=TRAIN["steps"], seed=SEED):
    config = RecallConfig(mixer, d_state=d_state, n_heads=n_heads)
    train = TRAIN | {"steps": steps}
    t0 = time.process_time()
    params, losses = train_recall(config, m, **train, seed=seed, n_updates=n_updates,
                                  updates=updates)
    batch = mqar_batch(np.random.default_rng(EVAL_SEED), EVAL, m, n_updates=n_updates,
                       updates=updates)
    r = {"group": group, "mixer": mixer, "pairs": m, "d_state": d_state, "n_heads": n_heads,
         "n_updates": n_updates, "updates": updates, "steps": steps, "seed": seed,
         "accuracy": recall_accuracy(params, config, batch),
         "right_weight": right_pair_weight(params, config, batch),
         "accuracy_by_quarter": by_quarter(params, config, batch)}
    if n_updates:
        upd = batch.earlier >= 0
        r["accuracy_updated"] = recall_accuracy(params, config, batch, where=upd)
        r["accuracy_other"] = recall_accuracy(params, config, batch, where=~upd)
        r["right_weight_updated"] = right_pair_weight(params, config, batch, where=upd)
        r["earlier_weight"] = right_pair_weight(params, config, batch, positions=batch.earlier,
                                                where=upd)
    r |= {"final_loss": float(losses[-20:].mean()),
          "losses": [round(float(x), 4) for x in losses[::10]],
          "cpu_s": round(time.process_time() - t0, 2), "load": os.getloadavg()[0]}
    return r


def jobs():
    """Every run of the sweep: (group, mixer, pairs, d_state, n_heads, n_updates, updates,
    steps, seed)."""
    s = TRAIN["steps"]
    out = [("grid", mx, m, d, 1, 0, "overwrite", s, SEED)
           for d in STATES for m in PAIRS for mx in MIXERS]
    out += [("grid", mx, m, CONTROL_STATE, 2, 0, "overwrite", s, SEED)
            for m in PAIRS for mx in CONTROL_MIXERS]
    out += [("updates", mx, UPDATE_PAIRS, UPDATE_STATE, 1, UPDATE_N, upd, s, seed)
            for seed in UPDATE_SEEDS for upd in ("overwrite", "new_keys") for mx in MIXERS]
    out += [("steps", mx, m, d, 1, u, upd, LONG_STEPS, SEED) for mx, m, d, u, upd in LONG_JOBS]
    return out


def main():
    commit = git_commit()
    runs, t0 = [], time.process_time()
    with blas_threads(1):
        for job in jobs():
            runs.append(run_one(*job))
            r = runs[-1]
            print(f"{r['group']:8s}{r['mixer']:12s} m={r['pairs']:2d} u={r['n_updates']} "
                  f"{r['updates']:9s} D={r['d_state']:2d} h={r['n_heads']} "
                  f"steps={r['steps']} seed={r['seed']} acc={r['accuracy']:.3f} "
                  f"w={r['right_weight']:.3f} cpu={r['cpu_s']}s load={r['load']:.1f}",
                  flush=True)
    trace = {"commit": commit, "cpu_s": round(time.process_time() - t0, 1),
             "seed": SEED, "eval_seed": EVAL_SEED, "eval_sequences": EVAL, "train": TRAIN,
             "update_seeds": list(UPDATE_SEEDS), "long_steps": LONG_STEPS,
             "model": {"d_model": 32, "n_keys": 32, "n_values": 32}, "cpu": cpu_features(),
             "command": "nice -n 10 .venv/bin/python tools/train_recall.py"}
    OUT.write_text(json.dumps({"trace": trace, "runs": runs}, indent=1) + "\n")
    print(f"stored {len(runs)} runs in {OUT} ({trace['cpu_s']} s of CPU)")


if __name__ == "__main__":
    main()
