"""Checks of notebook 02 (queries, keys, values), against plain-Python references."""

import math
import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_core import examples
from attn_core.checks import (
    PROJECTION_OPTIONS,
    check_product_shape,
    check_projection_choice,
    check_query_row,
)

X_SMALL = [[1.0, 0.0, 2.0], [1.0, 3.0, 2.0], [2.0, 1.0, 0.0]]  # as in notebook 02
WQ_SMALL = [[1.0, 0.0], [2.0, 1.0], [0.0, 3.0]]
WK_SMALL = [[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]


def ref_row_times(row, w):
    """row @ w with loops."""
    return [sum(row[r] * w[r][c] for r in range(len(row))) for c in range(len(w[0]))]


def numbers_in(text):
    return set(re.findall(r"\d+(?:\.\d+)?", text))


def notebook_matrices(seed=examples.SEED):
    g = examples.rng(seed)
    x = g.standard_normal((4, 8))
    return x, g.standard_normal((8, 4)), g.standard_normal((8, 4)), g.standard_normal((8, 4))


def test_product_shape():
    assert check_product_shape((6, 3), (6, 8), (8, 3), names=("X", "W_v"))
    assert check_product_shape([6, 3], (6, 8), (8, 3))
    fb = check_product_shape((3, 6), (6, 8), (8, 3))
    assert not fb and "swapped" in fb.message
    fb = check_product_shape((6, 8), (6, 8), (8, 3))
    assert not fb and "inner size" in fb.message
    fb = check_product_shape((6, 8, 3), (6, 8), (8, 3))
    assert not fb and "axes" in fb.message
    assert not check_product_shape("6 by 3", (6, 8), (8, 3))
    fb = check_product_shape(None, (6, 8), (8, 3))
    assert fb.message.startswith("… No answer yet")
    for msg in (fb.message, check_product_shape((3, 6), (6, 8), (8, 3)).message):
        assert "(6, 3)" not in msg


def test_query_row_by_hand():
    expected = ref_row_times(X_SMALL[1], WQ_SMALL)
    assert check_query_row(expected, X_SMALL, WQ_SMALL, row=2, w_k=WK_SMALL)
    key = ref_row_times(X_SMALL[1], WK_SMALL)
    fb = check_query_row(key, X_SMALL, WQ_SMALL, row=2, w_k=WK_SMALL)
    assert not fb and "key" in fb.message
    other = ref_row_times(X_SMALL[2], WQ_SMALL)  # counted from 0 by mistake
    fb = check_query_row(other, X_SMALL, WQ_SMALL, row=2)
    assert not fb and "token 3" in fb.message
    fb = check_query_row([1.0, 2.0, 3.0], X_SMALL, WQ_SMALL, row=2)
    assert not fb and "shape" in fb.message
    fb = check_query_row(None, X_SMALL, WQ_SMALL, row=2)
    assert fb.message.startswith("… No answer yet")
    answer_numbers = {f"{x:g}" for x in expected}
    for msg in (fb.message, check_query_row(key, X_SMALL, WQ_SMALL, row=2, w_k=WK_SMALL).message):
        assert not numbers_in(msg) & answer_numbers


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 6), st.integers(1, 4), st.integers(0, 10_000))
def test_query_row_property(n, d_model, d_k, seed):
    g = np.random.default_rng(seed)
    x = g.standard_normal((n, d_model)).round(2).tolist()
    w = g.standard_normal((d_model, d_k)).round(2).tolist()
    row = 1 + seed % n
    expected = ref_row_times(x[row - 1], w)
    assert check_query_row(expected, x, w, row=row)
    assert not check_query_row([v + 1.0 for v in expected], x, w, row=row)


def test_projection_choice_notebook_inputs():
    x, w_q, w_k, w_v = notebook_matrices()
    fb = check_projection_choice("W_q or W_k", x, w_q, w_k, w_v, a=1, b=3)
    assert fb
    assert check_projection_choice(" w_q OR w_k ", x, w_q, w_k, w_v)
    for wrong in ("W_v only", "W_k or W_v", "any of the three"):
        fb = check_projection_choice(wrong, x, w_q, w_k, w_v)
        assert not fb and "W_v changes every value" in fb.message
        assert "W_q or W_k" not in fb.message
    fb = check_projection_choice("W_q", x, w_q, w_k, w_v)
    assert not fb and "choose one of" in fb.message.lower()
    assert check_projection_choice(None, x, w_q, w_k, w_v).message.startswith("… No answer")


def test_projection_choice_by_experiment():
    """An independent version of the experiment: V[b] = x[b] @ W_v does not involve W_q or
    W_k, and the weight of a on b involves W_q and W_k but not W_v."""
    x, w_q, w_k, w_v = notebook_matrices(seed=7)
    a, b = 2, 4

    def weight(wq, wk):
        q = ref_row_times(x[a - 1].tolist(), wq.tolist())
        keys = [ref_row_times(r, wk.tolist()) for r in x.tolist()]
        s = [sum(p * r for p, r in zip(q, k, strict=True)) / math.sqrt(len(q)) for k in keys]
        e = [math.exp(v - max(s)) for v in s]
        return e[b - 1] / sum(e)

    g = np.random.default_rng(1)
    assert not math.isclose(weight(w_q + g.standard_normal(w_q.shape), w_k), weight(w_q, w_k))
    assert not math.isclose(weight(w_q, w_k + g.standard_normal(w_k.shape)), weight(w_q, w_k))
    assert check_projection_choice("W_q or W_k", x, w_q, w_k, w_v, a=a, b=b)
    assert set(PROJECTION_OPTIONS["W_q or W_k"]) == {"W_q", "W_k"}
