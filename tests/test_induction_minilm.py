"""Notebook 15's MiniLM measurement: the repeated pieces, the four scores against loops over
the maps, and the stored file (tools/measure_minilm_repeats.py) against a fresh measurement
of sequences the notebook does not recompute."""

import numpy as np
import pytest

from attn_core.model.repeat_scores import (
    MEASURES,
    load_repeat_scores,
    repeat_layout,
    repeat_scores,
    repeated_pieces,
)


@pytest.fixture(scope="module")
def model():
    from attn_core.model.pretrained import load_model

    return load_model()


def test_the_pieces_repeat_once_and_the_control_never(model):
    repeat, control = repeated_pieces(model.tokenizer, n_seq=3, segment=5, seed=2)
    vocab = model.tokenizer.get_vocab()
    assert repeat.shape == control.shape == (3, 12)
    for ids in (repeat, control):
        assert (ids[:, 0] == vocab["[CLS]"]).all() and (ids[:, -1] == vocab["[SEP]"]).all()
    np.testing.assert_array_equal(repeat[:, 1:6], repeat[:, 6:11])
    assert all(len(set(row[1:-1])) == 10 for row in control)
    assert all(len(set(row[1:6])) == 5 for row in repeat)
    np.testing.assert_array_equal(repeat_layout(3), [-1, 0, 1, 2, 0, 1, 2, -2])


def _loop_scores(att, layout):
    """The four scores of one map (n, n), written out position by position."""
    n = len(layout)
    prev = np.mean([att[i, i - 1] for i in range(1, n)])
    back, after, itself = [], [], []
    for i in range(n):
        t_back = [j for j in range(1, i + 1) if layout[j - 1] == layout[i]]
        if t_back:
            back.append(sum(att[i, j] for j in t_back))
        others = [j for j in range(n) if j != i and layout[j] == layout[i]]
        if others:
            itself.append(sum(att[i, j] for j in others))
            after.append(sum(att[i, (j + 1) % n] for j in others))
    return prev, np.mean(back), np.mean(after), np.mean(itself)


def test_scores_against_loops_over_the_maps(model):
    from attn_core.model.encoder import encoder_forward

    repeat, control = repeated_pieces(model.tokenizer, n_seq=2, segment=4, seed=5)
    found = repeat_scores(model.weights, repeat, control, segment=4)
    layout = repeat_layout(4)
    for kind, ids in (("repeat", repeat), ("control", control)):
        att = encoder_forward(model.weights, ids).attentions  # (2, layers, heads, n, n)
        for s, layer, head in ((0, 0, 2), (1, 2, 9), (1, 5, 11)):
            expect = _loop_scores(att[s, layer, head], layout)
            got = [found[kind][m][s, layer, head] for m in MEASURES]
            np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-7)


@pytest.mark.slow
def test_stored_scores_recomputed_on_sequences_the_notebook_does_not_recompute(model):
    from attn_core.threads import blas_threads

    stored = load_repeat_scores()
    st = stored["settings"]
    assert not stored["made_by"]["commit"].endswith("+dirty")
    repeat, control = repeated_pieces(model.tokenizer, st["n_seq"], st["segment"], st["seed"])
    picked = [st["n_seq"] - 2, st["n_seq"] - 1]
    with blas_threads():
        found = repeat_scores(model.weights, repeat[picked], control[picked], st["segment"])
    for kind in ("repeat", "control"):
        for m in MEASURES:
            assert stored[kind][m].shape == (st["n_seq"], 6, 12)
            np.testing.assert_allclose(found[kind][m], stored[kind][m][picked], atol=1e-5)
