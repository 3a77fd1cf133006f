"""The induction explorer: what it shows is the stored run's forward pass (ablation
included), recomputed here independently; a control change never runs the model."""

import numpy as np
import pytest

import attn_core.explorers.induction as ix
import attn_core.nn.induction_run as ir
from attn_core.induction import FIRST, SECOND
from attn_core.nn import gpt_forward
from attn_core.nn.gpt import head_outputs

from reference import assert_clear_error, assert_same_frames

# The explorers' frames: make test runs these, make check leaves them out (make test-explorers).
pytestmark = pytest.mark.explorer


@pytest.fixture(scope="module")
def runs():
    return ir.load_runs()


def test_explorer_shows_each_snapshot_and_ablation(runs, monkeypatch):
    ex = ix.induction_explorer(runs)
    monkeypatch.setattr(ir, "gpt_forward", lambda *a, **k: pytest.fail("ran in a callback"))
    monkeypatch.setattr(ix, "snapshot_states", lambda *a, **k: pytest.fail("recomputed"))
    batches = ir.eval_batches()
    ids = batches["repeat"][0]
    ref = batches["reference"][0][:, :-1]
    config = runs.config(2)
    heads = ex.state["heads"]
    (l1, h1), (l2, h2) = heads["prev"], heads["induction"]
    c = ex.controls
    for step in runs.snapshot_steps(0, 2)[::4] + [runs.snapshot_steps(0, 2)[-1]]:
        params = runs.params(0, 2, step)
        for kind in ("none", "prev", "control"):
            c["step"].value, c["ablation"].value = step, kind
            ablate = None
            if kind != "none":  # the mean of the head's output, computed here by hand
                layer, h = heads[kind]
                mean = head_outputs(params, config, ref)[layer][:, h].mean(axis=0)
                ablate = {(layer, h): mean}
            _, weights = gpt_forward(params, config, ids[:1, :-1], ablate)  # not patched
            shown = ex.shown()
            np.testing.assert_allclose(shown["maps"][0], weights[l1][0, h1], atol=1e-6)
            np.testing.assert_allclose(shown["maps"][1], weights[l2][0, h2], atol=1e-6)
            assert shown["step"] == step
            assert str(step) in shown["readout"]
    assert ex.errors == []


def copy_losses_by_hand(params, config, ids, labels, ablate):
    """Mean loss on the first and second copy, from the logits by a float64 log-softmax."""
    logits, _ = gpt_forward(params, config, ids[:, :-1], ablate)
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    loss = -np.take_along_axis(log_p, ids[:, 1:, None], axis=-1)[..., 0]
    lab = labels[:, 1:]
    return loss[lab == FIRST].mean(), loss[lab == SECOND].mean()


def test_every_number_in_a_row_belongs_to_that_rows_model(runs):
    """Issue 31: the ablated rows showed the unablated first-copy loss (3.418 where the
    ablated model's is 3.406)."""
    ex = ix.induction_explorer(runs)
    batches = ir.eval_batches()
    ids, labels = batches["repeat"]
    ref = batches["reference"][0][:, :-1]
    config, heads = runs.config(2), ex.state["heads"]
    step = runs.snapshot_steps(0, 2)[-1]
    params = runs.params(0, 2, step)
    rows = {}
    for kind in ("none", "prev", "control"):
        ex.controls["ablation"].value = kind
        ablate = None
        if kind != "none":
            layer, h = heads[kind]
            ablate = {(layer, h): head_outputs(params, config, ref)[layer][:, h].mean(axis=0)}
        first, second = copy_losses_by_hand(params, config, ids, labels, ablate)
        rows[kind] = ex.shown()["numbers"]
        np.testing.assert_allclose(rows[kind][:2], [first, second], atol=6e-4)
    assert rows["prev"][1] > rows["none"][1] + 1.0  # second-copy loss, at the last step
    assert rows["prev"][0] != rows["none"][0]  # the first copy too: another model


def test_the_ablation_switch_takes_the_arrow_keys_and_shows_its_value(runs):
    """Issue 31: arrow keys on the ablation buttons moved JupyterLab's cells; a slider takes
    them. Its value is a plain label (a selection slider's own read-out takes typed text)."""
    import ipywidgets as W

    from attn_core.explorers.notes import READOUT_CLASS
    ex = ix.induction_explorer(runs)
    switch = ex.controls["ablation"]
    assert isinstance(switch, W.SelectionSlider) and switch.readout is False
    row = next(r for r in ex._rows if switch in getattr(r, "children", ()))
    label = next(w for w in row.children if READOUT_CLASS in w._dom_classes)
    for kind in ("prev", "control", "none"):
        switch.value = kind
        assert label.value == ix.ABLATION_LABELS[kind] == switch.label


def test_explorer_png_changes_with_the_step(runs):
    ex = ix.induction_explorer(runs)
    first = ex.png
    ex.controls["step"].value = ex.controls["step"].options[0]
    assert ex.png != first


@pytest.mark.parametrize("kwargs, exc, pattern", [
    (dict(seed=7), ValueError, r"seed"),
    (dict(step=3), ValueError, r"step"),
    (dict(ablation="all"), ValueError, r"ablation"),
    (dict(sequence=64), ValueError, r"sequence"),
])
def test_bad_arguments_name_themselves(runs, kwargs, exc, pattern):
    assert_clear_error(lambda: ix.induction_explorer(runs, **kwargs), exc, pattern)


def _by_hand(params, config, ids, labels, ablate, head):
    """Second-copy loss and the induction head's score over the batch, from the forward pass
    with a float64 log-softmax and a loop over the targets (not attn_core's scorers)."""
    logits, weights = gpt_forward(params, config, ids[:, :-1], ablate)  # (b, n-1, V)
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    b, m = ids.shape[0], ids.shape[1] - 1
    loss = -logp[np.arange(b)[:, None], np.arange(m)[None, :], ids[:, 1:]]  # (b, n-1)
    first, second = (float(loss[labels[:, 1:] == c].mean()) for c in (1, 2))
    layer, h = head
    w = np.asarray(weights[layer][:, h], dtype=np.float64)  # (b, n-1, n-1)
    scores = []
    for s in range(b):
        t = ids[s, :-1]
        total, count = 0.0, 0
        for i in range(m):
            keys = [j for j in range(1, i + 1) if t[j - 1] == t[i]]
            if keys:
                total += sum(w[s, i, j] for j in keys)
                count += 1
        scores.append(total / count)
    return first, second, float(np.mean(scores))


def test_the_readout_numbers_follow_every_control_change(runs):
    """After each change of step and ablation, the read-out's first- and second-copy losses
    and induction score are those of the model at that step under that ablation (recomputed
    by hand), and without an ablation the first-copy loss is the marker's value on its curve."""
    ex = ix.induction_explorer(runs)
    batches = ir.eval_batches()
    ids, labels = batches["repeat"]
    ref = batches["reference"][0][:, :-1]
    config = runs.config(2)
    heads = ex.state["heads"]
    steps = runs.snapshot_steps(0, 2)
    for step, kind in [(steps[-1], "prev"), (steps[0], "none"), (steps[len(steps) // 2],
                                                                  "control"),
                       (steps[-1], "none")]:
        ex.controls["step"].value, ex.controls["ablation"].value = step, kind
        params = runs.params(0, 2, step)
        ablate = None
        if kind != "none":
            layer, h = heads[kind]
            mean = head_outputs(params, config, ref)[layer][:, h].mean(axis=0)
            ablate = {(layer, h): mean}
        first, second, score = _by_hand(params, config, ids, labels, ablate,
                                        heads["induction"])
        shown = ex.shown()
        first_shown, second_shown, score_shown = shown["numbers"]
        assert second_shown == pytest.approx(second, abs=0.006), (step, kind)
        assert score_shown == pytest.approx(score, abs=0.006), (step, kind)
        assert first_shown == pytest.approx(first, abs=0.006), (step, kind)
        if kind == "none":
            assert first_shown == pytest.approx(shown["markers"]["first copy"], abs=0.006)
        assert f"step {step}" in shown["readout"]


def test_after_changes_the_frames_are_a_fresh_explorers_at_that_state(runs):
    ex = ix.induction_explorer(runs)
    c = ex.controls
    steps = runs.snapshot_steps(0, 2)
    for step, kind in [(steps[0], "prev"), (steps[len(steps) // 2], "control"),
                       (steps[1], "none"), (steps[1], "prev")]:
        c["step"].value, c["ablation"].value = step, kind
    fresh = ix.induction_explorer(runs, step=steps[1], ablation="prev")
    assert ex.errors == []
    assert_same_frames(ex, fresh)
