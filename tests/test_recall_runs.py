"""The stored recall runs of notebook 19 (attn_core/data/recall-runs.json, from
``tools/train_recall.py``): every job stored once, from a committed tree, and a slice of the
sweep re-run: the first steps' losses of a run of each group, and (slow) one whole run's
accuracies."""

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from attn_core.nn.recall_model import RECALL_RUNS_PATH, load_recall_runs
from attn_core.threads import blas_threads

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import train_recall as sweep  # noqa: E402

STEPS = 30
#: The stored losses are rounded to 4 decimals; float64 training, so the rest is rounding.
ATOL = 1e-4

DATA = json.loads(RECALL_RUNS_PATH.read_text())
FIELDS = ("group", "mixer", "pairs", "d_state", "n_heads", "n_updates", "updates", "steps",
          "seed")


def test_every_job_is_stored_once_from_a_committed_tree():
    stored = [tuple(r[f] for f in FIELDS) for r in DATA["runs"]]
    assert sorted(stored) == sorted(sweep.jobs())
    assert re.fullmatch(r"[0-9a-f]{40}", DATA["trace"]["commit"])
    assert DATA["trace"]["train"] == sweep.TRAIN and DATA["trace"]["long_steps"] == sweep.LONG_STEPS
    for group in ("grid", "updates", "steps"):  # each group's keys are unique
        assert len(load_recall_runs(group=group)[1]) == sum(r["group"] == group
                                                            for r in DATA["runs"])


def first_losses(job, steps):
    """The first ``steps`` losses of a stored job, re-run (every 10th, as stored)."""
    group, mixer, m, d, h, u, updates, _, seed = job
    with blas_threads(1):
        r = sweep.run_one(group, mixer, m, d, h, u, updates, steps=steps, seed=seed)
    return r


@pytest.mark.parametrize("job", [
    ("updates", "delta", 8, 16, 1, 4, "overwrite", 300, 1),
    ("updates", "linear", 8, 16, 1, 4, "new_keys", 300, 2),
    ("grid", "gated_delta", 4, 16, 2, 0, "overwrite", 300, 0),
])
def test_first_steps_rerun_match_the_stored_losses(job):
    stored = next(r for r in DATA["runs"] if tuple(r[f] for f in FIELDS) == job)
    again = first_losses(job, STEPS)
    np.testing.assert_allclose(again["losses"], stored["losses"][:STEPS // 10], rtol=0,
                               atol=ATOL)


@pytest.mark.slow
def test_a_whole_rewrite_run_gives_its_stored_accuracies():
    job = ("updates", "linear", 8, 16, 1, 4, "overwrite", 300, 0)
    stored = next(r for r in DATA["runs"] if tuple(r[f] for f in FIELDS) == job)
    again = first_losses(job, job[7])
    for field in ("accuracy", "accuracy_updated", "accuracy_other", "right_weight_updated",
                  "earlier_weight"):
        assert again[field] == pytest.approx(stored[field], abs=0.01), field
