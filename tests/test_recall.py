"""MQAR, the model-free state recall and the one-layer recall models of notebook 19."""

import numpy as np
import pytest

from attn_core.delta_rule import l2_normalise
from attn_core.nn.recall_model import (
    MIXERS,
    RecallConfig,
    init_recall,
    read_weights,
    recall_forward,
    recall_loss_and_grads,
    recall_state_floats,
)
from attn_core.recall import mqar_batch, state_recall

import reference as ref


def test_mqar_queries_ask_for_the_pairs_values():
    b = mqar_batch(np.random.default_rng(0), batch=5, n_pairs=6, n_keys=10, n_values=7)
    for ids, tg, sc, src in zip(b.ids, b.targets, b.scored, b.source):
        table = {int(ids[2 * j]): int(ids[2 * j + 1]) - 10 for j in range(6)}
        assert len(table) == 6  # distinct keys
        for i in np.flatnonzero(sc):
            assert tg[i] == table[int(ids[i])]
            assert ids[src[i] - 1] == ids[i] and ids[src[i]] - 10 == tg[i]
        assert sorted(ids[12:]) == sorted(table)


def test_state_recall_is_exact_for_orthonormal_keys_and_not_beyond_the_dimension():
    g = np.random.default_rng(1)
    keys = np.linalg.qr(g.standard_normal((8, 8)))[0].T
    vals = g.standard_normal((8, 3))
    for rule in ("sum", "delta"):
        np.testing.assert_allclose(state_recall(keys, vals, rule), vals, atol=1e-12)
    many = l2_normalise(g.standard_normal((16, 8)))  # 16 unit keys in 8 dimensions
    vals = g.standard_normal((16, 3))
    for rule in ("sum", "delta"):
        assert np.abs(state_recall(many, vals, rule) - vals).max() > 0.1


def test_the_sum_rule_reads_the_value_plus_cross_terms():
    g = np.random.default_rng(2)
    keys, vals = l2_normalise(g.standard_normal((5, 4))), g.standard_normal((5, 2))
    want = [sum((keys[i] @ keys[j]) * vals[j] for j in range(5)) for i in range(5)]
    np.testing.assert_allclose(state_recall(keys, vals, "sum"), want, atol=1e-12)


@pytest.mark.parametrize("mixer", MIXERS)
def test_model_gradients_match_finite_differences(mixer):
    c = RecallConfig(mixer, d_state=4, n_heads=2, d_model=5, n_keys=4, n_values=3)
    rng = np.random.default_rng(0)
    p = init_recall(c, rng)
    for name in ("w_g", "w_b", "c_b"):
        if name in p:
            p[name] = rng.standard_normal(p[name].shape) * 0.5
    b = mqar_batch(rng, 2, 3, 4, 3)
    _, grads = recall_loss_and_grads(p, c, b.ids, b.targets, b.scored)
    for name in p:
        def f(x, name=name):
            return recall_loss_and_grads(p | {name: x}, c, b.ids, b.targets, b.scored)[0]
        np.testing.assert_allclose(grads[name], ref.numeric_grad(f, p[name]),
                                   rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("mixer", MIXERS)
def test_read_weights_times_values_give_the_mixers_output(mixer):
    c = RecallConfig(mixer, d_state=4, n_heads=2, d_model=5, n_keys=4, n_values=3)
    rng = np.random.default_rng(3)
    p = init_recall(c, rng)
    b = mqar_batch(rng, 2, 3, 4, 3)
    _, cache = recall_forward(p, c, b.ids)
    w = read_weights(p, c, b.ids)
    o = (w @ cache["v"]).transpose(0, 2, 1, 3).reshape(cache["o"].shape)
    np.testing.assert_allclose(o, cache["o"], atol=1e-12)


def test_state_floats_and_bad_configs():
    assert recall_state_floats(RecallConfig("delta", d_state=16, n_heads=2), 999) == 128
    assert recall_state_floats(RecallConfig("softmax", d_state=16), 10) == 320
    ref.assert_clear_error(lambda: RecallConfig("mamba"), ValueError, r"mixer must be one of")
    ref.assert_clear_error(lambda: RecallConfig("delta", d_state=6, n_heads=4), ValueError,
                           r"d_state must be divisible by n_heads")
    ref.assert_clear_error(lambda: mqar_batch(np.random.default_rng(0), 1, 9, n_keys=8),
                           ValueError, r"n_pairs must be <= n_keys")
    ref.assert_clear_error(lambda: state_recall(np.eye(2), np.eye(3)), ValueError,
                           r"same number of pairs")
