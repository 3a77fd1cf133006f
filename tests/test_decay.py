"""Decayed linear attention: its three forms against a float64 loop, its backward against
finite differences, and its refusals."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_core.decay import (
    decay_mask,
    decayed_attention_backward,
    decayed_attention_chunked,
    decayed_attention_quadratic,
    decayed_attention_recurrent,
)

import reference as ref

EXACT = {"rtol": 0, "atol": 1e-12}
FD_TOL = {"rtol": 1e-5, "atol": 1e-7}


def loop_decayed(q, k, v, g):
    """out_i = sum_{j <= i} (g_{j+1} ... g_i) (q_i . k_j) v_j, term by term (2-D inputs)."""
    q, k, v, g = (np.asarray(x, np.float64).tolist() for x in (q, k, v, g))
    out = []
    for i in range(len(q)):
        row = [0.0] * len(v[0])
        for j in range(i + 1):
            weight = sum(a * b for a, b in zip(q[i], k[j]))
            for t in range(j + 1, i + 1):
                weight *= g[t]
            row = [r + weight * x for r, x in zip(row, v[j])]
        out.append(row)
    return np.array(out)


def loop_batched(q, k, v, g):
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], g.shape[:-1])
    n = q.shape[-2]
    q, k, v = (np.broadcast_to(a, (*lead, *a.shape[-2:])) for a in (q, k, v))
    g = np.broadcast_to(g, (*lead, n))
    out = np.empty((*lead, n, v.shape[-1]))
    for idx in np.ndindex(*lead):
        out[idx] = loop_decayed(q[idx], k[idx], v[idx], g[idx])
    return out


@st.composite
def decay_problems(draw):
    p = draw(ref.attention_problems(square=True, with_mask=False, max_n=7))
    rng = np.random.default_rng(p["seed"])
    per_head = draw(st.booleans())  # RetNet: one gate per head; GLA / Mamba-2: one per token
    shape = (*draw(ref.broadcast_variant(p["batch"])), 1 if per_head else p["n_q"])
    low = draw(st.sampled_from([0.05, 0.5, 1.0]))
    g = rng.uniform(low, 1.0, shape) if low < 1 else np.ones(shape)
    return {key: p[key].astype(np.float64) for key in "qkv"} | {"g": g}


@ref.PROPERTY
@given(decay_problems(), st.integers(1, 5))
def test_the_three_forms_equal_the_loop(p, chunk):
    q, k, v, g = p["q"], p["k"], p["v"], p["g"]
    want = loop_batched(q, k, v, g)
    quad, _ = decayed_attention_quadratic(q, k, v, g)
    rec, s_rec = decayed_attention_recurrent(q, k, v, g)
    chk, s_chk = decayed_attention_chunked(q, k, v, g, chunk=chunk)
    for got in (quad, rec, chk):
        np.testing.assert_allclose(got, want, **EXACT)
    np.testing.assert_allclose(s_chk, s_rec, **EXACT)


def test_the_final_state_is_the_decayed_sum_of_outer_products():
    g_ = np.random.default_rng(3)
    q, k, v = g_.standard_normal((3, 6, 2))
    g = g_.uniform(0.2, 1, 6)
    _, s = decayed_attention_recurrent(q, k, v, g)
    want = sum(np.prod(g[j + 1:]) * np.outer(k[j], v[j]) for j in range(6))
    np.testing.assert_allclose(s, want, **EXACT)


def test_gates_of_one_give_causal_linear_attention_without_feature_map():
    g_ = np.random.default_rng(4)
    q, k, v = g_.standard_normal((3, 5, 3))
    out, w = decayed_attention_quadratic(q, k, v, [1.0])
    np.testing.assert_allclose(w, np.tril(q @ k.T), **EXACT)
    np.testing.assert_allclose(out, np.tril(q @ k.T) @ v, **EXACT)


def test_the_mask_of_long_small_gates_underflows_to_zero_not_nan():
    mask = decay_mask(np.full(400, 0.1))
    assert np.isfinite(mask).all() and mask[-1, 0] == 0.0 and mask[-1, -1] == 1.0
    np.testing.assert_allclose(mask[5, 3], 0.01, rtol=1e-12)


@ref.FAST
@given(batch=ref.batch_shapes(max_dims=1, max_side=2), n=st.integers(1, 5),
       seed=st.integers(0, 2**32 - 1))
def test_backward_matches_finite_differences(batch, n, seed):
    g_ = np.random.default_rng(seed)
    q, k = g_.standard_normal((2, *batch, n, 3))
    v = g_.standard_normal((*batch, n, 2))
    g = g_.uniform(0.3, 1.0, (*batch, n))
    up = g_.standard_normal((*batch, n, 2))
    grads = decayed_attention_backward(q, k, v, g, up)
    args = [q, k, v, g]
    for i, grad in enumerate(grads):
        def f(x, i=i):
            a = list(args)
            a[i] = x
            return float((decayed_attention_quadratic(*a)[0] * up).sum())
        np.testing.assert_allclose(grad, ref.numeric_grad(f, args[i]), **FD_TOL)


def test_backward_broadcasts_a_shared_key_over_the_batch():
    g_ = np.random.default_rng(8)
    q = g_.standard_normal((2, 4, 3))
    k, v = g_.standard_normal((4, 3)), g_.standard_normal((4, 2))
    g = g_.uniform(0.3, 1, 4)
    up = g_.standard_normal((2, 4, 2))
    dq, dk, dv, dg = decayed_attention_backward(q, k, v, g, up)
    assert dk.shape == (2, 4, 3)  # per batch entry: the caller sums
    want = ref.numeric_grad(lambda x: float((decayed_attention_quadratic(q, x, v, g)[0]
                                             * up).sum()), k)
    np.testing.assert_allclose(dk.sum(axis=0), want, **FD_TOL)


Q = np.ones((3, 2))


@pytest.mark.parametrize(("call", "exc", "pattern"), [
    (lambda: decayed_attention_quadratic(Q, Q, Q, [1.0, 0.0, 1.0]), ValueError,
     r"g must lie in \(0, 1\]"),
    (lambda: decayed_attention_quadratic(Q, Q, Q, [1.5]), ValueError, r"g must lie in"),
    (lambda: decayed_attention_recurrent(Q, Q, Q, [0.5, 0.5]), ValueError,
     r"g must have shape \(\.\.\., n\) with n = 3"),
    (lambda: decayed_attention_chunked(Q, Q, Q, [0.5], chunk=0), ValueError, r"chunk"),
    (lambda: decayed_attention_quadratic(Q, Q[:2], Q, [0.5]), ValueError,
     r"same number of positions"),
    (lambda: decayed_attention_quadratic(Q, np.ones((3, 4)), Q, [0.5]), ValueError,
     r"same last dimension d_k"),
    (lambda: decayed_attention_quadratic(Q, Q, Q, [np.nan]), ValueError, r"g must hold finite"),
    (lambda: decayed_attention_quadratic("q", Q, Q, [0.5]), TypeError, r"q must be an array"),
    (lambda: decayed_attention_backward(Q, Q, Q, [0.5], np.ones((3, 5))), ValueError,
     r"grad_out must have shape"),
    (lambda: decay_mask([[0.5, -0.1]]), ValueError, r"g must lie in"),
])
def test_bad_input_is_refused_by_name(call, exc, pattern):
    ref.assert_clear_error(call, exc, pattern)
