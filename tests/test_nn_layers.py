"""The layers of attn_core.nn, each against an independent reference.

* every backward pass against central finite differences of its own forward in float64, on
  shapes drawn by hypothesis (leading batch dims, n, d, heads): the loss is ``sum(y * R)``
  for a random ``R``, so ``grad_y = R``, and the whole gradient is checked along a random
  direction plus entry by entry on small shapes;
* forwards against plain-Python formulas (``math.tanh`` per entry, ``math.fsum`` per row);
* properties: layer norm's rows have mean 0 and variance 1, uniform logits cost log(v),
  the block is causal, dtypes are kept;
* the optimisers against a scalar Python Adam written here, decoupled decay on its own, and
  clipping by the global norm;
* bad input raises a clear error that names the argument.
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_core.nn import (
    SGD,
    AdamW,
    block_backward,
    block_forward,
    block_shapes,
    clip_grad_norm,
    cross_entropy,
    embed,
    embed_backward,
    gelu,
    gelu_backward,
    layer_norm,
    layer_norm_backward,
    mlp,
    mlp_backward,
)

from reference import FAST, assert_clear_error, batch_shapes, numeric_grad

H = 1e-6  # central differences: error ~ H^2 * f''' ~ 1e-12, rounding ~ 1e-16 / H ~ 1e-10
FD_TOL = {"rtol": 1e-6, "atol": 1e-7}



def check_grads(loss, args, grads):
    """Every gradient in ``grads`` (dict name -> array) against finite differences of
    ``loss(**args)`` with respect to ``args[name]``."""
    for name, g in grads.items():
        x = np.array(args[name], dtype=np.float64)

        def f(v, name=name):
            return loss(**{**args, name: v})

        np.testing.assert_allclose(g, numeric_grad(f, x), **FD_TOL, err_msg=name)


def rng_for(seed):
    return np.random.default_rng(seed)


# --- layer norm -------------------------------------------------------------------------------


@FAST
@given(batch=batch_shapes(), d=st.integers(2, 6), seed=st.integers(0, 2**16))
def test_layer_norm_backward_is_the_finite_difference(batch, d, seed):
    g = rng_for(seed)
    x = g.standard_normal((*batch, d)) * 2 + 1
    gamma, beta, r = g.standard_normal(d), g.standard_normal(d), g.standard_normal((*batch, d))
    grad_x, grad_gamma, grad_beta = layer_norm_backward(x, gamma, 1e-5, r)

    def loss(x, gamma, beta):
        return float(np.sum(layer_norm(x, gamma, beta, 1e-5) * r))

    check_grads(loss, {"x": x, "gamma": gamma, "beta": beta},
                {"x": grad_x, "gamma": grad_gamma, "beta": grad_beta})


@FAST
@given(batch=batch_shapes(), d=st.integers(2, 8), seed=st.integers(0, 2**16))
def test_layer_norm_rows_have_mean_0_and_variance_1(batch, d, seed):
    x = rng_for(seed).standard_normal((*batch, 3, d)) * 5 + 3
    y = layer_norm(x, np.ones(d), np.zeros(d), eps=1e-12)
    for row in y.reshape(-1, d):
        assert abs(math.fsum(row) / d) < 1e-12
        assert abs(math.fsum(v * v for v in row) / d - 1) < 1e-9


def test_layer_norm_keeps_the_dtype_and_eps_matters():
    x = np.array([[0.0, 1e-3]], dtype=np.float32)
    y = layer_norm(x, np.ones(2, np.float32), np.zeros(2, np.float32), eps=1e-5)
    assert y.dtype == np.float32
    # var = 2.5e-7, so eps = 1e-5 dominates: |y| = sqrt(2.5e-7 / (2.5e-7 + 1e-5)), not 1
    np.testing.assert_allclose(np.abs(y), math.sqrt(2.5e-7 / (2.5e-7 + 1e-5)), rtol=1e-5)
    g = layer_norm_backward(x, np.ones(2, np.float32), 1e-5, np.ones((1, 2), np.float32))
    assert {a.dtype for a in g} == {np.dtype(np.float32)}


# --- GELU -------------------------------------------------------------------------------------


def ref_gelu_tanh(v):
    return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))


@FAST
@given(values=st.lists(st.floats(-8, 8), min_size=1, max_size=12))
def test_gelu_is_the_tanh_formula_and_its_backward_the_derivative(values):
    x = np.array(values)
    np.testing.assert_allclose(gelu(x), [ref_gelu_tanh(v) for v in values], rtol=1e-13,
                               atol=1e-15)
    numeric = [(ref_gelu_tanh(v + H) - ref_gelu_tanh(v - H)) / (2 * H) for v in values]
    np.testing.assert_allclose(gelu_backward(x, np.ones_like(x)), numeric, **FD_TOL)


def test_gelu_backward_of_huge_inputs_is_the_limit_slope():
    x = np.array([1e200, -1e200, 3e38], dtype=np.float64)
    np.testing.assert_array_equal(gelu_backward(x, np.ones(3)), [1.0, 0.0, 1.0])
    x32 = np.array([3e38, -3e38], dtype=np.float32)
    out = gelu_backward(x32, np.ones(2, np.float32))
    assert out.dtype == np.float32 and out.tolist() == [1.0, 0.0]


# --- MLP --------------------------------------------------------------------------------------


@FAST
@given(batch=batch_shapes(max_dims=1), n=st.integers(1, 3), d=st.integers(1, 4),
       d_ff=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_mlp_backward_is_the_finite_difference(batch, n, d, d_ff, seed):
    g = rng_for(seed)
    args = {"x": g.standard_normal((*batch, n, d)), "w_in": g.standard_normal((d, d_ff)),
            "b_in": g.standard_normal(d_ff), "w_out": g.standard_normal((d_ff, d)),
            "b_out": g.standard_normal(d)}
    r = g.standard_normal((*batch, n, d))
    grad_x, grads = mlp_backward(**args, grad_y=r)

    def loss(**a):
        return float(np.sum(mlp(**a) * r))

    check_grads(loss, args, {"x": grad_x, **grads})


def test_mlp_is_gelu_between_two_affine_maps():
    g = rng_for(1)
    x, w_in, b_in = g.standard_normal((2, 3)), g.standard_normal((3, 4)), g.standard_normal(4)
    w_out, b_out = g.standard_normal((4, 3)), g.standard_normal(3)
    expected = [[math.fsum(ref_gelu_tanh(math.fsum(x[i, c] * w_in[c, j] for c in range(3))
                                         + b_in[j]) * w_out[j, k] for j in range(4)) + b_out[k]
                 for k in range(3)] for i in range(2)]
    np.testing.assert_allclose(mlp(x, w_in, b_in, w_out, b_out), expected, rtol=1e-12)


# --- embeddings -------------------------------------------------------------------------------


@FAST
@given(batch=batch_shapes(), n=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_embed_backward_is_the_finite_difference(batch, n, seed):
    g = rng_for(seed)
    vocab, n_ctx, d = 4, 6, 3  # few tokens: ids repeat, which a plain scatter would get wrong
    ids = g.integers(0, vocab, (*batch, n))
    args = {"wte": g.standard_normal((vocab, d)), "wpe": g.standard_normal((n_ctx, d))}
    r = g.standard_normal((*batch, n, d))
    grad_wte, grad_wpe = embed_backward(ids, args["wte"], args["wpe"], r)

    def loss(wte, wpe):
        return float(np.sum(embed(ids, wte, wpe) * r))

    check_grads(loss, args, {"wte": grad_wte, "wpe": grad_wpe})
    assert not grad_wpe[n:].any()


def test_embed_adds_the_two_rows():
    wte, wpe = rng_for(0).standard_normal((5, 2)), rng_for(1).standard_normal((4, 2))
    out = embed([[3, 3, 0]], wte, wpe)
    for i, t in enumerate([3, 3, 0]):
        assert out[0, i].tolist() == [wte[t, c] + wpe[i, c] for c in range(2)]


# --- cross-entropy ----------------------------------------------------------------------------


@FAST
@given(batch=batch_shapes(), n=st.integers(1, 4), v=st.integers(2, 6),
       spread=st.sampled_from([0.1, 3.0, 300.0]), seed=st.integers(0, 2**16))
def test_cross_entropy_is_the_mean_negative_log_likelihood_and_its_gradient(batch, n, v, spread,
                                                                          seed):
    g = rng_for(seed)
    logits, targets = g.standard_normal((*batch, n, v)) * spread, g.integers(0, v, (*batch, n))
    loss, grad = cross_entropy(logits, targets)
    rows, ts = logits.reshape(-1, v), targets.reshape(-1)
    nll = []
    for row, t in zip(rows, ts):
        m = max(row)
        nll.append(m + math.log(math.fsum(math.exp(z - m) for z in row)) - row[t])
    assert loss == pytest.approx(math.fsum(nll) / len(nll), rel=1e-12, abs=1e-12)
    if spread < 100:  # finite differences need a smooth loss at this step size
        numeric = numeric_grad(lambda z: cross_entropy(z, targets)[0], logits.copy())
        np.testing.assert_allclose(grad, numeric, **FD_TOL)
    np.testing.assert_allclose(grad.sum(axis=-1), 0, atol=1e-15)


@pytest.mark.parametrize("v", [2, 7, 65])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_uniform_logits_cost_log_v(v, dtype):
    loss, grad = cross_entropy(np.full((3, 4, v), 1.5, dtype=dtype), np.zeros((3, 4), int))
    assert loss == pytest.approx(math.log(v), rel=1e-6 if dtype == np.float32 else 1e-14)
    assert grad.dtype == dtype


# --- the block --------------------------------------------------------------------------------


def block_problem(seed, batch, n, d, heads, d_ff, scale=0.3):
    g = rng_for(seed)
    p = {k: scale * g.standard_normal(s) for k, s in block_shapes(d, d_ff).items()}
    p["ln1.g"] += 1
    p["ln2.g"] += 1
    return g.standard_normal((*batch, n, d)), p, g.standard_normal((*batch, n, d))


@FAST
@given(batch=batch_shapes(max_dims=1, max_side=2), n=st.integers(1, 4),
       heads_dk=st.sampled_from([(1, 2), (2, 1), (2, 2), (3, 1)]), d_ff=st.integers(1, 4),
       seed=st.integers(0, 2**16))
def test_block_backward_is_the_finite_difference(batch, n, heads_dk, d_ff, seed):
    heads, d_k = heads_dk
    x, p, r = block_problem(seed, batch, n, heads * d_k, heads, d_ff)
    grad_x, grads = block_backward(x, p, heads, r)

    def loss(x, **p):
        return float(np.sum(block_forward(x, p, heads)[0] * r))

    check_grads(loss, {"x": x, **p}, {"x": grad_x, **grads})


def test_block_is_causal_and_its_weights_sum_to_1():
    x, p, _ = block_problem(3, (2,), 6, 8, 2, 12)
    y, w = block_forward(x, p, 2)
    x2 = x.copy()
    x2[:, 4:] = rng_for(9).standard_normal(x2[:, 4:].shape)  # change positions 4 and 5
    y2, w2 = block_forward(x2, p, 2)
    np.testing.assert_array_equal(y2[:, :4], y[:, :4])
    assert not np.allclose(y2[:, 4:], y[:, 4:])
    np.testing.assert_allclose(w.sum(axis=-1), 1, rtol=1e-14)
    assert not np.triu(w, k=1).any()


def test_block_keeps_float32():
    x, p, r = block_problem(4, (), 5, 4, 2, 8)
    p32 = {k: v.astype(np.float32) for k, v in p.items()}
    y, w = block_forward(x.astype(np.float32), p32, 2)
    grad_x, grads = block_backward(x.astype(np.float32), p32, 2, r.astype(np.float32))
    assert {y.dtype, w.dtype, grad_x.dtype} | {g.dtype for g in grads.values()} == {
        np.dtype(np.float32)}
    np.testing.assert_allclose(y, block_forward(x, p, 2)[0], rtol=1e-5, atol=1e-5)


# --- optimisers -------------------------------------------------------------------------------


def ref_adamw(ws, gs, lr, b1, b2, eps, wd):
    """Scalar Python AdamW over a list of steps' gradients for one list of weights."""
    ws, m, s = list(ws), [0.0] * len(ws), [0.0] * len(ws)
    for t, g in enumerate(gs, start=1):
        for i, gi in enumerate(g):
            ws[i] -= lr * wd * ws[i]
            m[i] = b1 * m[i] + (1 - b1) * gi
            s[i] = b2 * s[i] + (1 - b2) * gi * gi
            ws[i] -= lr * (m[i] / (1 - b1 ** t)) / (math.sqrt(s[i] / (1 - b2 ** t)) + eps)
    return ws


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adamw_matches_a_scalar_reference(wd):
    g = rng_for(5)
    w0, steps = g.standard_normal(6), g.standard_normal((7, 6))
    params = {"w": w0.copy()}
    opt = AdamW(0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=wd)
    for grad in steps:
        opt.step(params, {"w": grad})
    np.testing.assert_allclose(params["w"], ref_adamw(w0, steps, 0.05, 0.8, 0.99, 1e-6, wd),
                               rtol=1e-13, atol=1e-15)


def test_adamw_decay_is_decoupled_and_only_where_asked():
    params = {"w_q": np.full(3, 2.0), "b_q": np.full(3, 2.0)}
    opt = AdamW(0.1, weight_decay=0.5, decay=lambda name: name.startswith("w_"))
    opt.step(params, {"w_q": np.zeros(3), "b_q": np.zeros(3)})  # zero gradient: decay only
    np.testing.assert_allclose(params["w_q"], 2.0 * (1 - 0.1 * 0.5), rtol=1e-15)
    np.testing.assert_array_equal(params["b_q"], 2.0)


def test_adamw_keeps_float32_and_sgd_steps_against_the_gradient():
    params = {"w": np.ones(3, np.float32)}
    AdamW(1e-3).step(params, {"w": np.ones(3, np.float32)})
    assert params["w"].dtype == np.float32
    params = {"w": np.ones(2)}
    SGD(0.25).step(params, {"w": np.array([4.0, -4.0])})
    assert params["w"].tolist() == [0.0, 2.0]


@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_scales_by_the_global_norm(max_norm):
    g = rng_for(6)
    grads = {"a": g.standard_normal((3, 2)), "b": g.standard_normal(4).astype(np.float32)}
    clipped, norm = clip_grad_norm(grads, max_norm)
    expected = math.sqrt(math.fsum(float(v) ** 2 for a in grads.values() for v in a.ravel()))
    assert norm == pytest.approx(expected, rel=1e-12)
    new = math.sqrt(math.fsum(float(v) ** 2 for a in clipped.values() for v in a.ravel()))
    assert new == pytest.approx(min(expected, max_norm), rel=1e-5)
    assert clipped["b"].dtype == np.float32
    ratio = clipped["a"] / grads["a"]
    np.testing.assert_allclose(ratio, ratio.flat[0], rtol=1e-12)  # one factor for all


# --- errors -----------------------------------------------------------------------------------

X = np.ones((2, 3))
P = {k: np.ones(s) for k, s in block_shapes(4, 8).items()}
BAD = [
    (lambda: layer_norm(X, np.ones(3), np.zeros(3), eps=0), ValueError, r"eps must be"),
    (lambda: layer_norm(X, np.ones(4), np.zeros(3), 1e-5), ValueError, r"gamma must have shape"),
    (lambda: layer_norm_backward(X, np.ones(3), 1e-5, np.ones(3)), ValueError, r"grad_y must"),
    (lambda: gelu_backward(X, np.ones(2)), ValueError, r"grad_y must have the shape of x"),
    (lambda: mlp(X, np.ones((4, 5)), np.ones(5), np.ones((5, 3)), np.ones(3)), ValueError,
     r"w_in must have shape \(3, d_ff\)"),
    (lambda: mlp(X, np.ones((3, 5)), np.ones(4), np.ones((5, 3)), np.ones(3)), ValueError,
     r"b_in must have shape \(5,\)"),
    (lambda: embed([[0, 9]], np.ones((5, 2)), np.ones((4, 2))), ValueError,
     r"ids must be token ids in 0\.\.4.*got 9"),
    (lambda: embed([0, 1, 2, 3, 4], np.ones((5, 2)), np.ones((4, 2))), ValueError,
     r"ids has n = 5 .* n_ctx = 4"),
    (lambda: embed([0.5], np.ones((5, 2)), np.ones((4, 2))), TypeError, r"ids must be integer"),
    (lambda: embed([0], np.ones((5, 2)), np.ones((4, 3))), ValueError, r"wte .* and wpe"),
    (lambda: cross_entropy(np.ones((2, 3)), [0, 3]), ValueError, r"targets must be class ids"),
    (lambda: cross_entropy(np.ones((2, 3)), [0]), ValueError, r"targets must have the shape"),
    (lambda: cross_entropy(np.array([[np.nan, 0.0]]), [0]), ValueError, r"logits must hold"),
    (lambda: block_forward(np.ones((2, 4)), {**P, "attn.w_q": np.ones((4, 3))}, 2), ValueError,
     r"p\['attn.w_q'\] must have shape \(4, 4\)"),
    (lambda: block_forward(np.ones((2, 4)), {k: v for k, v in P.items() if k != "ln2.b"}, 2),
     ValueError, r"p is missing .*ln2.b"),
    (lambda: block_forward(np.ones((2, 4)), P, 3), ValueError, r"divisible by the head count"),
    (lambda: block_forward(np.ones((2, 4)), P, 0), ValueError, r"n_heads must be"),
    (lambda: AdamW(-1.0), ValueError, r"lr must be >= 0"),
    (lambda: AdamW(0.1, betas=(0.9, 1.0)), ValueError, r"betas\[1\] must be in \[0, 1\)"),
    (lambda: AdamW(0.1, betas=0.9), TypeError, r"betas must be a pair"),
    (lambda: clip_grad_norm({"a": np.ones(2)}, 0.0), ValueError, r"max_norm must be"),
    (lambda: clip_grad_norm({"a": np.array([np.inf])}, 1.0), ValueError, r"global norm is inf"),
]


@pytest.mark.parametrize(("call", "exc", "pattern"), BAD)
def test_bad_input_names_the_argument(call, exc, pattern):
    assert_clear_error(call, exc, pattern)
