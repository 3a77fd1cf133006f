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


def test_every_frame_equals_a_whole_redraw_of_the_same_state():
    """A new number of pairs moves the marker over the lines kept from the last frame, and
    the frame's PNG is encoded from the rows that changed (issue 48's latency): after each
    change of a walk through the controls, the light frame equals the canvas redrawn without
    the kept lines (the background, every line, the marker), pixel for pixel; at the end both
    themes' frames equal those of an explorer built at that state."""
    import io

    from PIL import Image

    def pixels(png):
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))

    ex = recall_explorer()
    art = ex.art
    walk = [("pairs", 32), ("pairs", 4), ("mixer", "delta"), ("pairs", 8), ("d_state", 16),
            ("pairs", 32), ("mixer", "softmax"), ("d_state", 8), ("pairs", 16)]
    for name, value in walk:
        drive(ex, ex.controls[name], value)
        shown = pixels(ex.png)
        ex.canvas.draw([*art.lines.values(), art.marker, art.memory_softmax, art.memory_method])
        redrawn = np.asarray(ex.figure.canvas.buffer_rgba())[..., :3]
        np.testing.assert_array_equal(shown, redrawn, err_msg=f"{name}={value}")
    c = ex.controls
    fresh = recall_explorer(c["mixer"].value, c["pairs"].value, c["d_state"].value)
    for got, want in ((ex.png, fresh.png),
                      (bytes(ex.image_dark.value), bytes(fresh.image_dark.value))):
        np.testing.assert_array_equal(pixels(got), pixels(want))
    assert ex.errors == []


def test_a_change_skips_the_blas_limit(monkeypatch):
    """A change reads stored runs and draws, no matrix product: it skips blas_threads, whose
    look at every loaded library was about 2 ms of each change (issue 48's latency)."""
    from attn_core.explorers import base

    ex = recall_explorer()
    calls = []
    monkeypatch.setattr(base, "blas_threads", lambda *a: calls.append(a))
    drive(ex, ex.controls["pairs"], 32)
    drive(ex, ex.controls["d_state"], 16)
    assert calls == [] and ex.errors == []
