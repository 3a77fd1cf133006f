"""MQAR with later writes (issue 48): the overwrite semantic against a plain dict that keeps
each key's latest value, its control with fresh keys, the options refused by name, and the
accuracy and read-weight measures restricted to the updated queries."""

import numpy as np
import pytest

from attn_core.delta_rule import delta_rule_weights
from attn_core.nn.recall_model import (
    RecallConfig,
    init_recall,
    recall_accuracy,
    right_pair_weight,
)
from attn_core.recall import mqar_batch

import reference as ref

N_KEYS, N_VALUES = 12, 5


def replay(ids, n_written):
    """Walk the writes of one sequence with a dict: key -> (latest value, its position), and
    key -> the position of the value that write replaced (or -1)."""
    latest, replaced = {}, {}
    for pos in range(0, n_written, 2):
        key, value = int(ids[pos]), int(ids[pos + 1]) - N_KEYS
        assert 0 <= key < N_KEYS and 0 <= value < N_VALUES
        replaced[key] = latest[key][1] if key in latest else -1
        latest[key] = (value, pos + 1)
    return latest, replaced


@pytest.mark.parametrize("m, u", [(5, 2), (6, 6), (4, 1), (7, 0)])
def test_overwrite_queries_ask_for_the_latest_value(m, u):
    b = mqar_batch(np.random.default_rng(m + u), 40, m, N_KEYS, N_VALUES, n_updates=u)
    w = 2 * (m + u)
    assert b.ids.shape == (40, w + m)
    for ids, tg, sc, src, old in zip(b.ids, b.targets, b.scored, b.source, b.earlier):
        latest, replaced = replay(ids, w)
        assert len(latest) == m  # u of the m keys came back
        assert np.flatnonzero(sc).tolist() == list(range(w, w + m))
        assert sorted(int(x) for x in ids[w:]) == sorted(latest)  # every key asked once
        for i in range(w, w + m):
            value, pos = latest[int(ids[i])]
            assert (tg[i], src[i], old[i]) == (value, pos, replaced[int(ids[i])])
            if old[i] >= 0:  # a rewrite: a new value, never the stale one
                assert ids[old[i] - 1] == ids[i] and ids[old[i]] - N_KEYS != value
        assert (old >= 0).sum() == u and (src[~sc] == -1).all() and (old[~sc] == -1).all()


def test_the_control_writes_as_many_distinct_keys_at_the_same_places():
    m, u = 6, 3
    over = mqar_batch(np.random.default_rng(5), 30, m, N_KEYS, N_VALUES, u, "overwrite")
    ctrl = mqar_batch(np.random.default_rng(5), 30, m, N_KEYS, N_VALUES, u, "new_keys")
    w = 2 * (m + u)
    assert ctrl.ids.shape == over.ids.shape
    # the same draws: the same answer positions, the same replaced positions
    np.testing.assert_array_equal(ctrl.source, over.source)
    np.testing.assert_array_equal(ctrl.earlier, over.earlier)
    for ids, tg, src, old in zip(ctrl.ids, ctrl.targets, ctrl.source,
                                     ctrl.earlier):
        latest, replaced = replay(ids, w)
        assert len(latest) == m + u and set(replaced.values()) == {-1}  # no key twice
        asked = {int(x) for x in ids[w:]}
        assert len(asked) == m
        for i in range(w, w + m):
            assert (tg[i], src[i]) == latest[int(ids[i])]
            if old[i] >= 0:  # the pair left unasked sits where the stale one would
                assert int(ids[old[i] - 1]) not in asked


def test_no_updates_is_plain_mqar():
    a = mqar_batch(np.random.default_rng(3), 4, 6, N_KEYS, N_VALUES)
    b = mqar_batch(np.random.default_rng(3), 4, 6, N_KEYS, N_VALUES, 0, "new_keys")
    for field in ("ids", "targets", "scored", "source", "earlier"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert a.ids.shape == (4, 18) and (a.earlier == -1).all()


@pytest.mark.parametrize("kwargs, exc, pattern", [
    ({"n_updates": 7}, ValueError, r"n_updates must be <= n_pairs"),
    ({"n_updates": -1}, ValueError, r"n_updates must be an integer >= 0"),
    ({"n_updates": 1.5}, TypeError, r"n_updates must be an integer"),
    ({"updates": "append"}, ValueError, r"updates must be one of"),
    ({"n_updates": 3, "n_keys": 8}, ValueError, r"n_pairs \+ n_updates must be <= n_keys"),
    ({"n_updates": 2, "n_values": 1}, ValueError, r"n_values must be >= 2"),
])
def test_bad_options_are_refused_by_name(kwargs, exc, pattern):
    args = {"n_keys": N_KEYS, "n_values": N_VALUES} | kwargs
    ref.assert_clear_error(lambda: mqar_batch(np.random.default_rng(0), 2, 6, **args), exc,
                           pattern)


def test_accuracy_splits_over_the_updated_and_the_other_queries():
    c = RecallConfig("decay", d_state=4, d_model=6, n_keys=N_KEYS, n_values=N_VALUES)
    p = init_recall(c, np.random.default_rng(0), std=1.0)
    b = mqar_batch(np.random.default_rng(1), 50, 6, N_KEYS, N_VALUES, n_updates=2)
    upd = b.earlier >= 0
    whole, a, rest = (recall_accuracy(p, c, b, where=x) for x in (None, upd, ~upd))
    assert whole == pytest.approx((2 * a + 4 * rest) / 6, abs=1e-12)
    ref.assert_clear_error(lambda: recall_accuracy(p, c, b, where=upd[:, 1:]), ValueError,
                           r"where must be a bool array")
    ref.assert_clear_error(lambda: recall_accuracy(p, c, b, where=~b.scored), ValueError,
                           r"where selects no query")
    ref.assert_clear_error(lambda: right_pair_weight(p, c, b, positions=b.earlier),
                           ValueError, r"positions must be >= 0")


def test_the_sum_weighs_both_writes_of_a_key_equally():
    """The same key token gives the same unit key, so a sum (no gate) reads the stale and the
    latest write of a key with the same weight, whatever the query."""
    b = mqar_batch(np.random.default_rng(2), 20, 5, N_KEYS, N_VALUES, n_updates=2)
    upd = b.earlier >= 0
    c = RecallConfig("linear", d_state=8, d_model=6, n_keys=N_KEYS, n_values=N_VALUES)
    p = init_recall(c, np.random.default_rng(0), std=1.0)
    latest = right_pair_weight(p, c, b, where=upd)
    stale = right_pair_weight(p, c, b, positions=b.earlier, where=upd)
    assert latest == pytest.approx(stale, rel=1e-12) and latest > 0


def test_a_delta_step_of_one_leaves_no_weight_on_the_stale_write():
    """Read right after a key's rewrite, with that key as the query: the delta rule's weights
    (from the chunked form) put 0 on the stale write and 1 on the new one; the sum 1 on both.
    Checked on a float64 loop of the recurrence with one-hot values (each value's weight)."""
    g = np.random.default_rng(4)
    keys = g.standard_normal((7, 5))
    keys[5] = keys[2]  # position 5 rewrites the key of position 2
    keys /= np.linalg.norm(keys, axis=1, keepdims=True)
    q = keys.copy()
    s = np.zeros((5, 7))  # values one-hot: column j of the state's read is v_j's weight
    for t in range(6):
        s = s + np.outer(keys[t], np.eye(7)[t] - keys[t] @ s)  # beta = 1
    loop = keys[5] @ s
    np.testing.assert_allclose(loop[[2, 5]], [0, 1], atol=1e-12)
    w = delta_rule_weights(q, keys, np.ones(7))
    np.testing.assert_allclose(w[5, :6], loop[:6], atol=1e-12)
    w_sum = np.tril(q @ keys.T)
    assert w_sum[5, 2] == pytest.approx(1) and w_sum[5, 5] == pytest.approx(1)
