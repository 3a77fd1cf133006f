"""Tests of the exercise checks of notebook 08 (multi-head attention), and of the notebook's
key facts against independent references (plain Python loops, not attn_core's output)."""

import math

import numpy as np
import pytest
from reference import assert_not_yet, assert_unanswered, numbers_in

from attn_core import examples, multi_head_attention, split_heads
from attn_core.checks import (
    check_head_dim,
    check_head_queries,
    check_valid_head_counts,
    check_weights_shape,
)

# --- independent references ---------------------------------------------------------------


def loop_mha(x, w_q, w_k, w_v, w_o, h):
    """Multi-head attention with Python loops over heads, rows and columns."""
    n = len(x)
    width = len(w_q[0])
    d_k = width // h

    def matmul(a, b):
        return [[sum(a[i][t] * b[t][j] for t in range(len(b))) for j in range(len(b[0]))]
                for i in range(len(a))]

    q, k, v = matmul(x, w_q), matmul(x, w_k), matmul(x, w_v)
    concat = [[0.0] * width for _ in range(n)]
    all_weights = []
    for head in range(h):
        cols = range(head * d_k, (head + 1) * d_k)
        weights = []
        for i in range(n):
            s = [sum(q[i][c] * k[j][c] for c in cols) / math.sqrt(d_k) for j in range(n)]
            top = max(s)
            e = [math.exp(x - top) for x in s]
            total = sum(e)
            weights.append([x / total for x in e])
        for i in range(n):
            for c in cols:
                concat[i][c] = sum(weights[i][j] * v[j][c] for j in range(n))
        all_weights.append(weights)
    return matmul(concat, w_o), all_weights


def test_article_head_width_is_a_whole_slice():
    d_model, h = examples.ARTICLE_D_MODEL, examples.ARTICLE_HEADS
    assert d_model % h == 0
    assert split_heads(np.zeros((3, d_model)), h).shape == (h, 3, d_model // h)


@pytest.mark.parametrize("h", [1, 2, 4])
def test_multi_head_attention_matches_a_loop_on_the_sentence(h):
    g = examples.rng(8)
    n, d_model = len(examples.TOKENS), 8
    x = g.standard_normal((n, d_model))
    w_q, w_k, w_v, w_o = g.standard_normal((4, d_model, d_model)) / np.sqrt(d_model)
    out, weights = multi_head_attention(x, w_q, w_k, w_v, w_o, h=h)
    ref_out, ref_weights = loop_mha(x.tolist(), w_q.tolist(), w_k.tolist(), w_v.tolist(),
                                    w_o.tolist(), h)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-12)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=1e-12)


def test_split_then_merge_is_the_identity_on_positions():
    x = examples.rng(1).standard_normal((5, 12))
    heads = split_heads(x, 3)
    for head in range(3):
        for i in range(5):
            assert list(heads[head, i]) == list(x[i, head * 4:(head + 1) * 4])


# --- check_head_dim -----------------------------------------------------------------------


def test_head_dim_right():
    assert check_head_dim(768 // 12, 768, 12)
    assert check_head_dim(64.0)


@pytest.mark.parametrize("wrong", [768 * 12, 768 + 12, 768, 32, 12, "sixty-four"])
def test_head_dim_wrong_gets_a_hint_without_the_answer(wrong):
    fb = check_head_dim(wrong)
    assert_not_yet(fb)
    assert 64 not in numbers_in(fb.message)


def test_head_dim_unanswered():
    fb = check_head_dim(None)
    assert_unanswered(fb)
    assert 64 not in numbers_in(fb.message)


# --- check_valid_head_counts --------------------------------------------------------------


def divisors(d):
    return [h for h in range(1, d + 1) if d % h == 0]


def test_valid_head_counts_right_in_any_order_or_type():
    assert check_valid_head_counts([12, 6, 4, 3, 2, 1])
    assert check_valid_head_counts(np.array(divisors(12)))
    assert check_valid_head_counts(divisors(18), d_model=18)


@pytest.mark.parametrize("wrong", [[1, 2, 3, 4, 6], [2, 3, 4, 6, 12], [1, 2, 3, 4, 5, 6, 12],
                                   [2, 4, 8], ["a"]])
def test_valid_head_counts_wrong(wrong):
    fb = check_valid_head_counts(wrong)
    assert_not_yet(fb)
    assert not (numbers_in(fb.message) & {2.0, 3.0, 4.0, 6.0, 12.0})


def test_valid_head_counts_unanswered():
    assert_unanswered(check_valid_head_counts(None))


# --- check_weights_shape ------------------------------------------------------------------


def test_weights_shape_right():
    assert check_weights_shape((2, 4, 10, 10))
    assert check_weights_shape([3, 2, 5, 5], batch=3, h=2, n=5)


@pytest.mark.parametrize("wrong", [(2, 4, 10), (2, 10, 10), (2, 10, 4, 10), (4, 2, 10, 10),
                                   (2, 4, 10, 40), "shape"])
def test_weights_shape_wrong(wrong):
    assert_not_yet(check_weights_shape(wrong))


def test_weights_shape_hints_differ_by_mistake():
    missing = check_weights_shape((2, 10, 10)).message
    order = check_weights_shape((2, 10, 4, 10)).message
    assert "missing" in missing and "order" in order


def test_weights_shape_unanswered():
    fb = check_weights_shape(None)
    assert_unanswered(fb)
    assert "(2, 4, 10, 10)" not in fb.message


# --- check_head_queries -------------------------------------------------------------------


@pytest.fixture
def projection():
    g = examples.rng(3)
    return g.standard_normal((6, 8)), g.standard_normal((8, 8))


def test_head_queries_right_from_a_column_slice(projection):
    x, w_q = projection
    # head 3 of 4 (counted from 1): numpy columns 4 and 5, computed from a loop
    answer = [[sum(x[i, t] * w_q[t, c] for t in range(8)) for c in (4, 5)] for i in range(6)]
    assert check_head_queries(answer, x, w_q, h=4, head=3)


def test_head_queries_off_by_one_head_is_named(projection):
    x, w_q = projection
    before = check_head_queries(x @ w_q[:, 2:4], x, w_q, h=4, head=3)
    after = check_head_queries(x @ w_q[:, 6:8], x, w_q, h=4, head=3)  # index 3 taken for head 3
    assert_not_yet(before)
    assert_not_yet(after)
    assert "head before" in before.message
    assert "head after" in after.message and "index 0" in after.message


@pytest.mark.parametrize("head", [0, 5, 1.0, True])
def test_head_queries_head_is_counted_from_1(projection, head):
    x, w_q = projection
    with pytest.raises(ValueError):
        check_head_queries(None, x, w_q, h=4, head=head)


@pytest.mark.parametrize("make", [lambda x, w: x @ w, lambda x, w: x @ w[:, 4:6] + 1,
                                  lambda x, w: (x @ w[:, 4:6]).T])
def test_head_queries_wrong(projection, make):
    x, w_q = projection
    assert_not_yet(check_head_queries(make(x, w_q), x, w_q, h=4, head=3))


def test_head_queries_unanswered(projection):
    x, w_q = projection
    assert_unanswered(check_head_queries(None, x, w_q, h=4, head=3))
