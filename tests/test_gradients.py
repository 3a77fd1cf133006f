"""Backward passes against central finite differences in float64 (the independent reference).

For a random upstream gradient G, the scalar L = sum(out * G) has dL/d(out) = G, so the
backward pass given G must return dL/d(input), which finite differences measure one entry
at a time from the forward functions alone.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_core import (
    attention,
    attention_backward,
    multi_head_attention,
    multi_head_attention_backward,
    softmax,
    softmax_backward,
)

import reference as ref

FD_TOL = {"rtol": 1e-5, "atol": 1e-7}



def as64(p):
    return {key: (val.astype(np.float64) if isinstance(val, np.ndarray) and val.dtype.kind == "f"
                  else val) for key, val in p.items()}


# --- softmax_backward ------------------------------------------------------------------------


@ref.PROPERTY
@given(batch=ref.batch_shapes(), n=st.integers(1, 6), spread=st.sampled_from([0.1, 1.0, 5.0]),
       seed=st.integers(0, 2**32 - 1), axis_last=st.booleans())
def test_softmax_backward_matches_finite_differences(batch, n, spread, seed, axis_last):
    g = np.random.default_rng(seed)
    x = spread * g.standard_normal((*batch, n))
    upstream = g.standard_normal(x.shape)
    axis = -1 if axis_last or x.ndim == 1 else 0
    grad = softmax_backward(softmax(x, axis=axis), upstream, axis=axis)
    expected = ref.numeric_grad(lambda z: float((softmax(z, axis=axis) * upstream).sum()), x)
    np.testing.assert_allclose(grad, expected, **FD_TOL)


def test_softmax_backward_is_the_jacobian_times_the_gradient():
    g = np.random.default_rng(1)
    p, up = softmax(g.standard_normal(5)), g.standard_normal(5)
    jac = np.diag(p) - np.outer(p, p)
    np.testing.assert_allclose(softmax_backward(p, up), jac.T @ up, rtol=1e-12)


def test_softmax_backward_of_a_fully_masked_row_is_zero_and_float32_stays_float32():
    p = softmax(np.array([[-np.inf, -np.inf], [0.0, 1.0]], dtype=np.float32))
    grad = softmax_backward(p, np.ones((2, 2), dtype=np.float32))
    assert grad.dtype == np.float32
    assert np.array_equal(grad[0], [0.0, 0.0])


@pytest.mark.parametrize(("args", "exc", "pattern"), [
    (([0.5, 0.5], [1.0]), ValueError, r"grad_p must have the shape of p"),
    (([0.5, 0.5], "ab"), TypeError, r"grad_p must be an array"),
    (([0.5, np.nan], [1.0, 1.0]), ValueError, r"p must hold finite values"),
    (([0.5, 0.5], [1.0, np.inf]), ValueError, r"grad_p must hold finite values"),
])
def test_softmax_backward_bad_input_gets_a_clear_error(args, exc, pattern):
    ref.assert_clear_error(lambda: softmax_backward(*args), exc, pattern)


def test_softmax_backward_bad_axis():
    ref.assert_clear_error(lambda: softmax_backward([0.5, 0.5], [1.0, 1.0], axis=2),
                           ValueError, r"axis must be in \[-1, 0\]")


# --- attention_backward ----------------------------------------------------------------------


@ref.FAST
@given(ref.attention_problems(max_n=4, max_d=3), st.sampled_from([None, 1.0, 0.7]),
       st.integers(0, 2**32 - 1))
def test_attention_backward_matches_finite_differences(p, scale, seed):
    p = as64(p)
    q, k, v, mask = p["q"], p["k"], p["v"], p["mask"]
    out, _ = attention(q, k, v, mask=mask, scale=scale)
    upstream = np.random.default_rng(seed).standard_normal(out.shape)
    grads = attention_backward(q, k, v, upstream, mask=mask, scale=scale)
    inputs = {"q": q, "k": k, "v": v}
    for i, name in enumerate("qkv"):
        def loss(z, name=name):
            args = {**inputs, name: z}
            return float((attention(**args, mask=mask, scale=scale)[0] * upstream).sum())
        assert grads[i].shape == inputs[name].shape
        np.testing.assert_allclose(grads[i], ref.numeric_grad(loss, inputs[name]), **FD_TOL,
                                   err_msg=f"grad_{name}")


@ref.FAST
@given(ref.attention_problems())
def test_attention_backward_keeps_dtype_and_is_finite(p):
    out, _ = attention(p["q"], p["k"], p["v"], mask=p["mask"])
    grads = attention_backward(p["q"], p["k"], p["v"], np.ones_like(out), mask=p["mask"])
    for grad in grads:
        assert grad.dtype == p["dtype"]
        assert np.isfinite(grad).all()


def test_fully_masked_row_gets_zero_gradients_not_nan():
    g = np.random.default_rng(3)
    q, k, v = g.standard_normal((3, 4, 2))
    mask = np.ones((4, 4), dtype=bool)
    mask[2] = False  # query 2 may attend to nothing
    upstream = np.zeros((4, 2))
    upstream[2] = 1.0  # only query 2's output matters
    grad_q, grad_k, grad_v = attention_backward(q, k, v, upstream, mask=mask)
    for grad in (grad_q, grad_k, grad_v):
        assert np.array_equal(grad, np.zeros_like(grad))


def test_masked_keys_get_no_gradient_through_the_weights():
    g = np.random.default_rng(4)
    q, k, v = g.standard_normal((3, 4, 3))
    mask = np.tri(4, dtype=bool)
    _, grad_k, grad_v = attention_backward(q, k, v, g.standard_normal((4, 3)), mask=mask)
    # the last key is seen only by the last query; with upstream only on query 0 it gets none
    upstream = np.zeros((4, 3))
    upstream[0] = 1.0
    _, grad_k, grad_v = attention_backward(q, k, v, upstream, mask=mask)
    assert np.array_equal(grad_k[1:], np.zeros((3, 3)))
    assert np.array_equal(grad_v[1:], np.zeros((3, 3)))


@pytest.mark.parametrize(("kwargs", "exc", "pattern"), [
    ({"grad_out": np.ones((4, 2))}, ValueError, r"grad_out must have the shape of the forward"),
    ({"grad_out": "x"}, TypeError, r"grad_out must be an array"),
    ({"grad_out": np.full((4, 3), np.nan)}, ValueError, r"grad_out must hold finite"),
    ({"k": np.ones((4, 5))}, ValueError, r"q and k must have the same last dimension"),
    ({"v": np.ones((5, 3))}, ValueError, r"k and v must have the same number of positions"),
    ({"mask": np.ones((4, 4))}, TypeError, r"mask must be a boolean array"),
    ({"scale": -1.0}, ValueError, r"scale must be a positive"),
])
def test_attention_backward_bad_input_gets_a_clear_error(kwargs, exc, pattern):
    args = {"q": np.ones((4, 2)), "k": np.ones((4, 2)), "v": np.ones((4, 3)),
            "grad_out": np.ones((4, 3)), **kwargs}
    ref.assert_clear_error(lambda: attention_backward(**args), exc, pattern)


# --- multi_head_attention_backward -------------------------------------------------------------


@st.composite
def small_mha_problems(draw):
    batch = draw(ref.batch_shapes(max_dims=1, max_side=2))
    n, h = draw(st.integers(1, 4)), draw(st.integers(1, 2))
    d_k, d_v = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    d_model, d_out = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    g = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    params = {"x": g.standard_normal((*batch, n, d_model)),
              "w_q": g.standard_normal((d_model, h * d_k)),
              "w_k": g.standard_normal((d_model, h * d_k)),
              "w_v": g.standard_normal((d_model, h * d_v)),
              "w_o": g.standard_normal((h * d_v, d_out))}
    with_bias = draw(st.booleans())
    for name, width in (("b_q", h * d_k), ("b_k", h * d_k), ("b_v", h * d_v), ("b_o", d_out)):
        params[name] = g.standard_normal(width) if with_bias else np.zeros(width)
    kind = draw(st.sampled_from(["none", "causal", "random"]))
    mask = {"none": None, "causal": np.tri(n, dtype=bool),
            "random": g.random((h, n, n)) < 0.6}[kind]
    return params, h, mask, with_bias, g.standard_normal((*batch, n, d_out))


def mha_call(params, h, mask, with_bias):
    biases = tuple(params[b] for b in ("b_q", "b_k", "b_v", "b_o")) if with_bias else None
    return multi_head_attention(params["x"], params["w_q"], params["w_k"], params["w_v"],
                                params["w_o"], h, mask=mask, biases=biases)[0]


@ref.FAST
@given(small_mha_problems())
def test_multi_head_attention_backward_matches_finite_differences(problem):
    params, h, mask, with_bias, upstream = problem
    biases = tuple(params[b] for b in ("b_q", "b_k", "b_v", "b_o")) if with_bias else None
    grads = multi_head_attention_backward(params["x"], params["w_q"], params["w_k"],
                                          params["w_v"], params["w_o"], h, upstream,
                                          mask=mask, biases=biases)
    assert set(grads) == set(params)
    for name, value in params.items():
        def loss(z, name=name):
            # a None bias is the zero bias: pass it explicitly so it can be perturbed
            return float((mha_call({**params, name: z}, h, mask, True) * upstream).sum())
        assert grads[name].shape == value.shape
        np.testing.assert_allclose(grads[name], ref.numeric_grad(loss, value), **FD_TOL,
                                   err_msg=name)


def test_multi_head_backward_float32_stays_float32_and_mask_batch_sums_back_to_x():
    g = np.random.default_rng(5)
    x = g.standard_normal((3, 4)).astype(np.float32)
    w = g.standard_normal((4, 4, 4)).astype(np.float32)
    mask = g.random((2, 2, 3, 3)) < 0.7  # a batch of 2 coming from the mask only
    grads = multi_head_attention_backward(x, *w, 2, np.ones((2, 3, 4), np.float32), mask=mask)
    assert all(grad.dtype == np.float32 for grad in grads.values())
    assert grads["x"].shape == x.shape


@pytest.mark.parametrize(("change", "exc", "pattern"), [
    ({"grad_out": np.ones((3, 5))}, ValueError, r"grad_out must have the shape"),
    ({"h": 3}, ValueError, r"must be divisible by the head count h"),
    ({"w_k": np.ones((4, 2))}, ValueError, r"w_q and w_k must have the same shape"),
    ({"w_o": np.ones((3, 4))}, ValueError, r"w_o must have shape \(4, d_out\)"),
    ({"biases": (np.ones(3), None, None, None)}, ValueError, r"b_q must have shape \(4,\)"),
    ({"x": np.ones(4)}, ValueError, r"x must be a matrix"),
])
def test_multi_head_backward_bad_input_gets_a_clear_error(change, exc, pattern):
    args = {"x": np.ones((3, 4)), "w_q": np.ones((4, 4)), "w_k": np.ones((4, 4)),
            "w_v": np.ones((4, 4)), "w_o": np.ones((4, 4)), "h": 2,
            "grad_out": np.ones((3, 4)), **change}
    ref.assert_clear_error(lambda: multi_head_attention_backward(**args), exc, pattern)
