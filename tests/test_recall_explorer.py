"""The recall explorer of notebook 19: what it shows against the stored runs and counts made
here; and the stored runs against a re-run of their first steps."""

import json

import numpy as np
import pytest
from test_explorers import drive

from attn_core.explorers import recall_explorer
from attn_core.explorers.recall import MAX_TOKENS, PAIRS, STATES
from attn_core.nn.recall_model import MIXERS, RECALL_RUNS_PATH

# The explorers' frames: make test runs these, make check leaves them out (make test-explorers).
pytestmark = pytest.mark.explorer

RUNS = json.loads(RECALL_RUNS_PATH.read_text())["runs"]
STORED = {(r["mixer"], r["pairs"], r["d_state"], r["n_heads"]): r
          for r in RUNS if r.get("group", "grid") == "grid"}


def rewrite_means(mixer):
    """Means over the seeds of the stored rewrite runs, gathered here from the file."""
    def mean(kind, field):
        return np.mean([r[field] for r in RUNS if r.get("group") == "updates"
                        and r["mixer"] == mixer and r["updates"] == kind])
    return (mean("overwrite", "accuracy_updated"), mean("overwrite", "accuracy"),
            mean("new_keys", "accuracy"))


def check_shown(ex, mixer, pairs, d):
    shown = ex.shown()
    for mx in MIXERS:
        want = [STORED[(mx, m, d, 1)]["accuracy"] for m in PAIRS]
        np.testing.assert_allclose(shown["lines"][mx], want)
    assert shown["accuracy"] == pytest.approx(STORED[(mixer, pairs, d, 1)]["accuracy"], abs=5e-3)
    soft, mine = shown["memory"]
    t = np.arange(1, MAX_TOKENS + 1)
    np.testing.assert_array_equal(soft, 2 * d * t)  # a key and a value of d per token
    np.testing.assert_array_equal(mine, 2 * d * t if mixer == "softmax" else np.full(len(t), d * d))
    assert shown["kept"] == mine[3 * pairs - 1] and shown["softmax_kept"] == 2 * d * 3 * pairs
    got = (shown["rewritten"], shown["with_rewrites"], shown["fresh_keys"])
    np.testing.assert_allclose(got, rewrite_means(mixer), atol=5e-3)


def test_lines_readout_and_memory_follow_the_stored_runs():
    ex = recall_explorer()
    check_shown(ex, "linear", 16, 8)
    for name, value, mixer, pairs, d in (("mixer", "delta", "delta", 16, 8),
                                         ("pairs", 32, "delta", 32, 8),
                                         ("d_state", 16, "delta", 32, 16),
                                         ("mixer", "softmax", "softmax", 32, 16),
                                         ("pairs", 4, "softmax", 4, 16)):
        drive(ex, ex.controls[name], value)
        check_shown(ex, mixer, pairs, d)
    assert ex.errors == []


@pytest.mark.parametrize("kwargs, pattern", [({"mixer": "mamba"}, "mixer"),
                                             ({"pairs": 5}, "pairs"),
                                             ({"d_state": 12}, "d_state")])
def test_bad_arguments_are_refused_by_name(kwargs, pattern):
    with pytest.raises((ValueError, TypeError), match=pattern):
        recall_explorer(**kwargs)


def test_the_sweep_is_complete():
    assert {(mx, m, d, 1) for mx in MIXERS for m in PAIRS for d in STATES} <= set(STORED)
