"""attn_core.model.head_roles against plain loops, on random row-stochastic weights and
on heads built to have (or lack) each pattern."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from reference import assert_clear_error

from attn_core.model import head_roles as hr
from attn_core.softmax import softmax


def random_weights(seed, shape):
    """Row-stochastic weights (..., n, n) from seeded random scores."""
    return softmax(np.random.default_rng(seed).standard_normal(shape) * 2.0, axis=-1)


shapes = st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(2, 9))


def loop_mean(values):
    return sum(values) / len(values)


@given(seed=st.integers(0, 2**32 - 1), shape=shapes)
def test_scores_equal_plain_loops(seed, shape):
    layers, heads, n = shape
    a = random_weights(seed, (layers, heads, n, n))
    prev, diag = hr.previous_token_score(a), hr.self_score(a)
    last = hr.attention_to_position(a, -1, queries=range(1, n))
    top = hr.top_key(a, n - 1)
    assert prev.shape == diag.shape == last.shape == top.shape == (layers, heads)
    for l in range(layers):
        for h in range(heads):
            rows = a[l, h].tolist()
            assert prev[l, h] == pytest.approx(loop_mean([rows[i][i - 1] for i in range(1, n)]))
            assert diag[l, h] == pytest.approx(loop_mean([rows[i][i] for i in range(n)]))
            assert last[l, h] == pytest.approx(loop_mean([rows[i][n - 1] for i in range(1, n)]))
            best = max(range(n), key=lambda j: rows[n - 1][j])
            assert top[l, h] == best


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(3, 9), data=st.data())
def test_same_word_score_equals_plain_loop(seed, n, data):
    words = data.draw(st.lists(st.sampled_from(["a", "b", "c", None]), min_size=n, max_size=n))
    words[0], words[-1] = "a", "a"  # at least one repeated word
    a = random_weights(seed, (2, n, n))
    got = hr.same_word_score(a, words)
    for h in range(2):
        per_query = []
        for i in range(n):
            others = [j for j in range(n) if j != i and words[i] is not None
                      and words[j] == words[i]]
            if others:
                per_query.append(sum(a[h, i, j] for j in others))
        assert got[h] == pytest.approx(loop_mean(per_query))


def shifted(n, offset):
    """Every query puts all its weight ``offset`` positions away (clamped to the ends)."""
    w = np.zeros((n, n))
    for i in range(n):
        w[i, min(max(i + offset, 0), n - 1)] = 1.0
    return w


@pytest.mark.parametrize("n", [2, 5, 12])
def test_built_heads_score_one_on_their_own_pattern_and_low_on_others(n):
    previous, itself, to_first = shifted(n, -1), np.eye(n), np.zeros((n, n))
    to_first[:, 0] = 1.0
    assert hr.previous_token_score(previous) == pytest.approx(1.0)
    assert hr.self_score(itself) == pytest.approx(1.0)
    assert hr.attention_to_position(to_first, 0) == pytest.approx(1.0)
    assert hr.previous_token_score(itself) == 0.0
    assert hr.self_score(previous) == pytest.approx(1.0 / n)  # only row 0 looks at itself
    uniform = np.full((n, n), 1.0 / n)
    for score in (hr.previous_token_score(uniform), hr.self_score(uniform),
                  hr.attention_to_position(uniform, -1)):
        assert score == pytest.approx(1.0 / n)  # the baseline the notebook compares with


def test_same_word_partners_ignore_special_tokens_and_self():
    assert hr.same_word_partners([None, "x", None, "x", "y"]) == [[], [3], [], [1], []]


def test_heads_above_is_one_based_sorted_and_inclusive():
    scores = np.array([[0.2, 0.5], [0.9, 0.49]])
    found = hr.heads_above(scores, 0.5)
    assert [(f.layer, f.head) for f in found] == [(2, 1), (1, 2)]
    assert [f.score for f in found] == [0.9, 0.5]
    assert hr.heads_above(scores, 0.95) == []


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda: hr.previous_token_score(np.ones((2, 3))), ValueError, r"weights.*square"),
    (lambda: hr.previous_token_score(np.ones((1, 1))), ValueError, r"at least 2 positions"),
    (lambda: hr.self_score("x"), TypeError, r"weights"),
    (lambda: hr.attention_to_position(np.eye(3), 3), ValueError, r"key.*between 0 and 2"),
    (lambda: hr.attention_to_position(np.eye(3), 1.5), TypeError, r"key must be an int"),
    (lambda: hr.attention_to_position(np.eye(3), 0, queries=[]), ValueError, r"queries"),
    (lambda: hr.top_key(np.eye(3), -4), ValueError, r"query"),
    (lambda: hr.same_word_score(np.eye(3), ["a", "b"]), ValueError, r"words.*one entry"),
    (lambda: hr.same_word_score(np.eye(3), ["a", "b", "c"]), ValueError, r"no word"),
    (lambda: hr.heads_above(np.ones(3), 0.5), ValueError, r"scores.*\(layers, heads\)"),
])
def test_bad_input_is_named(call, exc, pattern):
    assert_clear_error(call, exc, pattern)
