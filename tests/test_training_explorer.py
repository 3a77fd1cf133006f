"""The training explorer and the training figures: what is shown is the stored run, and a
control change never trains."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

import attn_core.explorers.training as tx
from attn_core import figures
from attn_core.training import running_mean, scaling_runs


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
