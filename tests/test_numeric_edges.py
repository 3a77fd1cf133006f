"""Edges every maths function shares: the dtype rule, extreme but valid input without
warnings, and ragged input refused with a clear error.

The dtype rule is stated in attn_core/_validate.py: float16 counts as float32, integers and
booleans as float64, all inputs of a call are brought to ``np.result_type`` of those, and
every array result has that dtype.
"""

import warnings

import numpy as np
import pytest
import reference as ref

from attn_core import (
    attention,
    flash_attention,
    merge_heads,
    multi_head_attention,
    scores,
    softmax,
    softmax_jacobian,
    split_heads,
)

DTYPES = [np.float16, np.float32, np.float64, np.int64]


def rule(*dtypes):
    """The result dtype the rule promises, written out case by case (not via attn_core)."""
    seen = set()
    for d in map(np.dtype, dtypes):
        if d == np.float16 or d == np.float32:
            seen.add(np.float32)
        else:  # float64, integers and booleans
            seen.add(np.float64)
    return np.dtype(np.float64 if np.float64 in seen else np.float32)


def arr(shape, dtype, seed=0):
    g = np.random.default_rng(seed)
    return (g.standard_normal(shape) * 2).astype(dtype)


@pytest.mark.parametrize("dq", DTYPES)
@pytest.mark.parametrize("dk", DTYPES)
@pytest.mark.parametrize("dv", DTYPES)
def test_attention_and_flash_follow_the_dtype_rule(dq, dk, dv):
    q, k, v = arr((3, 2), dq, 1), arr((4, 2), dk, 2), arr((4, 5), dv, 3)
    expected = rule(dq, dk, dv)
    out, weights = attention(q, k, v)
    assert out.dtype == expected and weights.dtype == expected, (out.dtype, weights.dtype)
    assert flash_attention(q, k, v, block_size=2).dtype == expected
    ref_out, ref_weights, ref_s = ref.attention(q, k, v)
    np.testing.assert_allclose(weights, ref_weights, **ref.tol(expected))
    np.testing.assert_allclose(out, ref_out, **ref.tol(expected))
    s = scores(q, k)
    assert s.dtype == rule(dq, dk)
    np.testing.assert_allclose(s, ref_s, **ref.tol(rule(dq, dk)))


def test_mixed_float32_and_float64_is_computed_in_float64():
    """attention(q32, k32, v64): float64 weights and output, to float64 precision."""
    q, k, v = arr((5, 3), np.float32, 1), arr((5, 3), np.float32, 2), arr((5, 2), np.float64, 3)
    out, weights = attention(q, k, v)
    assert out.dtype == weights.dtype == np.float64
    ref_out, ref_weights, _ = ref.attention(q, k, v)
    np.testing.assert_allclose(weights, ref_weights, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_split_and_merge_follow_the_dtype_rule(dtype):
    x = arr((2, 4), dtype)
    assert softmax(x).dtype == rule(dtype)
    np.testing.assert_allclose(softmax(x), ref.softmax(x), **ref.tol(rule(dtype)))
    p = softmax(x)
    assert softmax_jacobian(p.astype(dtype)).dtype == rule(dtype)
    assert split_heads(x, 2).dtype == rule(dtype)
    assert merge_heads(arr((2, 3, 2), dtype)).dtype == rule(dtype)


@pytest.mark.parametrize("dx", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("dw", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("db", [None, np.float16, np.float64])
def test_multi_head_attention_follows_the_dtype_rule(dx, dw, db):
    x = arr((3, 4), dx, 1)
    w = [arr((4, 4), dw, s) for s in range(4)]
    biases = None if db is None else tuple(arr((4,), db, 9 + i) for i in range(4))
    out, weights = multi_head_attention(x, *w, h=2, biases=biases)
    expected = rule(dx, dw) if db is None else rule(dx, dw, db)
    assert out.dtype == expected and weights.dtype == expected
    ref_out, ref_weights = ref.multi_head_attention(x, *w, h=2, biases=biases)
    np.testing.assert_allclose(weights, ref_weights, rtol=1e-3 if expected == np.float32
                               else 1e-9, atol=1e-4 if expected == np.float32 else 1e-9)


# --- extreme but valid input: a correct answer and no warning ----------------------------------

BIG = {np.float32: 3e38, np.float64: 1e308}


def _calls(dtype):
    big = BIG[dtype]
    half = np.sqrt(big)  # q . k = big and -big: finite scores whose difference overflows
    q, k, v = (np.array(a, dtype=dtype) for a in ([[half]], [[half], [-half]], [[1.0], [3.0]]))
    return [
        ("softmax", lambda: softmax(np.array([-big, big], dtype=dtype)), [0.0, 1.0]),
        ("softmax-rows", lambda: softmax(np.array([[-big, big], [big, -big]], dtype=dtype)),
         [[0.0, 1.0], [1.0, 0.0]]),
        ("softmax-underflow", lambda: softmax(np.array([0.0, -1e4], dtype=dtype)), [1.0, 0.0]),
        ("jacobian-tiny", lambda: softmax_jacobian(np.array([1.0, 1e-30], dtype=dtype))[1, 1],
         1e-30),
        ("scores", lambda: scores(q, k, scale=1.0), [[big, -big]]),
        ("attention", lambda: attention(q, k, v, scale=1.0)[1], [[1.0, 0.0]]),
        ("attention-out", lambda: attention(q, k, v, scale=1.0)[0], [[1.0]]),
        ("flash", lambda: flash_attention(q, k, v, block_size=1, scale=1.0), [[1.0]]),
        ("flash-causal", lambda: flash_attention(np.repeat(q, 2, 0), k, v, causal=True,
                                                 scale=1.0), [[1.0], [1.0]]),
        ("multi-head", lambda: multi_head_attention(
            np.array([[half], [-half]], dtype=dtype), *np.ones((4, 1, 1), dtype=dtype), h=1)[1],
         [[[1.0, 0.0], [0.0, 1.0]]]),
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index", range(10))
def test_extreme_valid_input_gives_the_answer_without_a_warning(dtype, index):
    """Today softmax([-1e308, 1e308]) is right but leaks 'overflow encountered in subtract'."""
    name, call, expected = _calls(dtype)[index]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = call()
    np.testing.assert_allclose(got, expected, rtol=1e-6, err_msg=name)


def test_every_extreme_case_is_run():
    assert len(_calls(np.float64)) == 10


# --- ragged input ---------------------------------------------------------------------------

RAGGED = [[True, False], [True]]
Q = K = V = np.eye(2)


@pytest.mark.parametrize("call", [
    pytest.param(lambda: attention(Q, K, V, mask=RAGGED), id="attention"),
    pytest.param(lambda: flash_attention(Q, K, V, mask=RAGGED), id="flash"),
    pytest.param(lambda: multi_head_attention(Q, Q, Q, Q, Q, h=1, mask=RAGGED), id="multi-head"),
])
def test_a_ragged_mask_gets_a_clear_error(call):
    ref.assert_clear_error(call, TypeError, r"^mask must be a rectangular boolean array")


@pytest.mark.parametrize("call, name", [
    pytest.param(lambda: attention([[1.0, 2.0], [3.0]], K, V), "q", id="attention-q"),
    pytest.param(lambda: softmax([[1.0, 2.0], [3.0]]), "x", id="softmax-x"),
    pytest.param(lambda: flash_attention(Q, K, [[1.0], [2.0, 3.0]]), "v", id="flash-v"),
])
def test_ragged_input_gets_a_clear_error(call, name):
    ref.assert_clear_error(call, TypeError, rf"^{name} must be a rectangular array of numbers "
                           r"\(every row the same length\)")
