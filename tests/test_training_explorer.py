"""The training explorer and the training figures: what is shown is the stored run, and a
control change never trains."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

import attn_core.explorers.training as tx
from attn_core import figures
from attn_core.training import running_mean, scaling_runs

# The explorers' frames: make test runs these, make check leaves them out (make test-explorers).
pytestmark = pytest.mark.explorer


@pytest.fixture(scope="module")
def runs():
    return scaling_runs(d_ks=(4, 16), seeds=(0,), steps=20, snapshots=5)


def test_explorer_shows_the_stored_snapshot_and_curve(runs, monkeypatch):
    ex = tx.training_explorer(runs)
    monkeypatch.setattr(tx, "scaling_runs", lambda *a, **k: pytest.fail("trained in a callback"))
    c = ex.controls
    for d_k in (4, 16):
        for scaled in (True, False):
            c["d_k"].value, c["scaled"].value = d_k, scaled
            run = runs[d_k, scaled][0]
            for i, step in enumerate(run.snapshot_steps):
                c["step"].value = int(step)
                shown = ex.shown()
                np.testing.assert_allclose(shown["map"], run.snapshot_weights[i])
                np.testing.assert_allclose(shown["loss"], running_mean(run.losses, 10))
                assert shown["marker"][0] == step
                np.testing.assert_allclose(shown["query_row"], run.snapshot_weights[i][-1],
                                           atol=5e-4)
                assert f"d_k = {d_k}" in shown["readout"]
                assert ("unscaled" in shown["readout"]) != scaled
    assert ex.errors == []


def test_explorer_png_changes_with_the_step(runs):
    ex = tx.training_explorer(runs)
    first = ex.png
    ex.controls["step"].value = ex.controls["step"].options[0]
    assert ex.png != first


def test_loss_curves_draw_every_seed_and_the_mean():
    curves = np.array([[3.0, 2.0, 1.0], [2.0, 1.0, 0.5]])
    fig = plt.figure()
    ax, = figures.loss_curves([("panel", {"a": curves})], fig=fig)
    ys = [line.get_ydata() for line in ax.get_lines()]
    assert len(ys) == 3  # two seeds and their mean
    np.testing.assert_allclose(ys[-1], curves.mean(axis=0))
    plt.close(fig)


def test_attention_through_training_outlines_the_pattern():
    maps = np.full((2, 3, 3), 1 / 3)
    pattern = np.eye(3, k=-1)
    arts = figures.attention_through_training(maps, [0, 10], pattern=pattern)
    assert [a.ax.get_title() for a in arts] == ["step 0", "step 10"]
    assert len(arts[0].highlights) == 2
    with pytest.raises(ValueError, match="one step per snapshot"):
        figures.attention_through_training(maps, [0])
    plt.close("all")


def test_the_readout_numbers_follow_every_control_change(runs):
    """Issue 33: after every change of step (first, middle, last), d_k and scaling, the curve
    (a 10-step running mean by a loop), the marker on it, the map with the right pattern
    outlined, the query's row and the read-out's loss and weight on the matching pair are
    those of the chosen run at the chosen step, recomputed here."""
    ex = tx.training_explorer(runs)
    c = ex.controls
    steps = list(c["step"].options)
    moves = [("step", steps[0]), ("d_k", 4), ("step", steps[len(steps) // 2]),
             ("scaled", False), ("step", steps[-1]), ("d_k", 16), ("scaled", True),
             ("step", steps[1]), ("d_k", 4), ("step", steps[-1])]
    for name, value in moves:
        c[name].value = value
        step, d_k, scaled = c["step"].value, c["d_k"].value, c["scaled"].value
        run = runs[d_k, scaled][0]
        losses = [float(v) for v in run.losses]
        smooth = [sum(losses[max(0, t - 9):t + 1]) / len(losses[max(0, t - 9):t + 1])
                  for t in range(len(losses))]
        weights = run.snapshot_weights[list(run.snapshot_steps).index(step)]
        pattern = run.probe_pattern
        query = max(range(len(pattern)), key=lambda i: sum(pattern[i]))  # the scored row
        on_right = sum(float(weights[query][j]) for j in range(len(pattern))
                       if pattern[query][j] == 1)
        shown = ex.shown()
        where = (name, value)
        np.testing.assert_allclose(shown["loss"], smooth, rtol=1e-12, err_msg=str(where))
        loss = smooth[min(step, len(smooth) - 1)]
        assert shown["marker"][0] == step and shown["marker"][1] == pytest.approx(loss), where
        np.testing.assert_allclose(shown["map"], weights, atol=1e-12, err_msg=str(where))
        outlined = {(round(p.get_y() + 0.5), round(p.get_x() + 0.5))
                    for p in ex.art.map.highlights}
        assert outlined and outlined == {tuple(ij) for ij in np.argwhere(pattern == 1)}, where
        np.testing.assert_allclose(shown["query_row"], weights[query], atol=5e-4)
        how = "scaled by 1/√d_k" if scaled else "unscaled"
        assert (f"d_k = {d_k} ({how}), step {step}: loss {loss:.3f} · the query's weight on "
                f"the matching pair {on_right:.3f}") in shown["readout"], where
    assert ex.errors == []
