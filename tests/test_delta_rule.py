"""(Gated) DeltaNet: the recurrence and the chunked WY form against a float64 loop written in
the papers' own convention, the backward against finite differences, and the refusals."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_core.delta_rule import (
    delta_rule_backward,
    delta_rule_chunked,
    delta_rule_recurrent,
    delta_rule_weights,
    l2_normalise,
    l2_normalise_backward,
)

import reference as ref

EXACT = {"rtol": 0, "atol": 1e-12}
FD_TOL = {"rtol": 1e-5, "atol": 1e-7}


def loop_delta(q, k, v, beta, a):
    """S_t = a_t S_{t-1} (I - b_t k_t k_t^T) + b_t v_t k_t^T, S of shape (d_v, d_k) as the
    papers write it, out_t = S_t q_t: explicit matrices, one token at a time (2-D inputs)."""
    d_k, d_v = q.shape[-1], v.shape[-1]
    s = np.zeros((d_v, d_k))
    out = []
    for t in range(q.shape[0]):
        kk = np.outer(k[t], k[t])
        s = a[t] * s @ (np.eye(d_k) - beta[t] * kk) + beta[t] * np.outer(v[t], k[t])
        out.append(s @ q[t])
    return np.array(out), s.T


def loop_batched(q, k, v, beta, a):
    n = q.shape[-2]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], beta.shape[:-1],
                               a.shape[:-1])
    q, k, v = (np.broadcast_to(x, (*lead, *x.shape[-2:])) for x in (q, k, v))
    beta, a = (np.broadcast_to(x, (*lead, n)) for x in (beta, a))
    out = np.empty((*lead, n, v.shape[-1]))
    s = np.empty((*lead, q.shape[-1], v.shape[-1]))
    for idx in np.ndindex(*lead):
        out[idx], s[idx] = loop_delta(q[idx], k[idx], v[idx], beta[idx], a[idx])
    return out, s


@st.composite
def delta_problems(draw):
    p = draw(ref.attention_problems(square=True, with_mask=False, max_n=9))
    rng = np.random.default_rng(p["seed"])
    n = p["n_q"]
    beta = rng.uniform(0, 1, (*draw(ref.broadcast_variant(p["batch"])), n))
    gated = draw(st.booleans())
    a = rng.uniform(0.2, 1, (*draw(ref.broadcast_variant(p["batch"])), n)) if gated else None
    k = l2_normalise(p["k"].astype(np.float64))
    return {"q": p["q"].astype(np.float64), "k": k, "v": p["v"].astype(np.float64),
            "beta": beta, "a": a}


@ref.PROPERTY
@given(delta_problems(), st.integers(1, 5))
def test_recurrence_and_chunked_form_equal_the_loop(p, chunk):
    a = np.ones(1) if p["a"] is None else p["a"]
    want, s_want = loop_batched(p["q"], p["k"], p["v"], p["beta"], a)
    rec, s_rec = delta_rule_recurrent(p["q"], p["k"], p["v"], p["beta"], p["a"])
    chk, s_chk = delta_rule_chunked(p["q"], p["k"], p["v"], p["beta"], p["a"], chunk=chunk)
    for got, s in ((rec, s_rec), (chk, s_chk)):
        np.testing.assert_allclose(got, want, **EXACT)
        np.testing.assert_allclose(s, s_want, **EXACT)


@ref.FAST
@given(delta_problems())
def test_the_weights_times_the_values_are_the_output(p):
    want, _ = loop_batched(p["q"], p["k"], p["v"], p["beta"],
                           np.ones(1) if p["a"] is None else p["a"])
    w = delta_rule_weights(p["q"], p["k"], p["beta"], p["a"])
    np.testing.assert_allclose(w @ p["v"], want, **EXACT)


def test_a_repeated_key_is_overwritten_not_summed():
    g = np.random.default_rng(0)
    k = g.standard_normal((1, 4))
    k /= np.linalg.norm(k)
    keys = np.repeat(k, 2, axis=0)
    v = np.array([[5.0, 1.0], [2.0, -3.0]])
    out, s = delta_rule_recurrent(keys, keys, v, [1.0, 1.0])
    np.testing.assert_allclose(out[1], v[1], **EXACT)  # the second value, alone
    np.testing.assert_allclose(k @ s, v[1:], **EXACT)


def test_orthonormal_keys_are_each_recalled_exactly():
    g = np.random.default_rng(1)
    keys = np.linalg.qr(g.standard_normal((6, 6)))[0].T  # six orthonormal rows
    v = g.standard_normal((6, 3))
    _, s = delta_rule_recurrent(keys, keys, v, np.ones(6))
    np.testing.assert_allclose(keys @ s, v, atol=1e-12)


def test_beta_zero_writes_nothing_and_a_decays():
    g = np.random.default_rng(2)
    q, k, v = g.standard_normal((3, 4, 2))
    out, s = delta_rule_recurrent(q, l2_normalise(k), v, [0.0])
    assert not out.any() and not s.any()


@ref.FAST
@given(batch=ref.batch_shapes(max_dims=1, max_side=2), n=st.integers(1, 5),
       gated=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_backward_matches_finite_differences(batch, n, gated, seed):
    g = np.random.default_rng(seed)
    q, k = g.standard_normal((2, *batch, n, 3))
    k = 0.8 * l2_normalise(k)
    v = g.standard_normal((*batch, n, 2))
    beta = g.uniform(0.1, 0.9, (*batch, n))
    a = g.uniform(0.3, 0.95, (*batch, n)) if gated else None
    up = g.standard_normal((*batch, n, 2))
    grads = delta_rule_backward(q, k, v, beta, up, a=a)
    args = [q, k, v, beta, a]
    for i, grad in enumerate(grads[:5 if gated else 4]):
        def f(x, i=i):
            b = list(args)
            b[i] = x
            return float((delta_rule_chunked(*b[:4], a=b[4], chunk=2)[0] * up).sum())
        np.testing.assert_allclose(grad, ref.numeric_grad(f, args[i]), **FD_TOL)


def test_l2_normalise_backward_matches_finite_differences():
    g = np.random.default_rng(5)
    x, up = g.standard_normal((2, 3, 4))
    want = ref.numeric_grad(lambda z: float((l2_normalise(z) * up).sum()), x)
    np.testing.assert_allclose(l2_normalise_backward(x, up), want, **FD_TOL)
    assert not l2_normalise(np.zeros((1, 3))).any()  # 0, not NaN


Q = np.ones((3, 2)) / np.sqrt(2)


@pytest.mark.parametrize(("call", "exc", "pattern"), [
    (lambda: delta_rule_recurrent(Q, Q, Q, [1.5]), ValueError, r"beta must lie in \[0, 1\]"),
    (lambda: delta_rule_recurrent(Q, Q, Q, [0.5, 0.5]), ValueError,
     r"beta must have shape \(\.\.\., n\) with n = 3"),
    (lambda: delta_rule_chunked(Q, Q, Q, [0.5], a=[0.0]), ValueError, r"a must lie in \(0, 1\]"),
    (lambda: delta_rule_chunked(Q, Q, Q, [0.5], a=[0.5, 0.5]), ValueError,
     r"a must have shape"),
    (lambda: delta_rule_chunked(Q, Q, Q, [0.5], chunk=1.5), TypeError, r"chunk"),
    (lambda: delta_rule_recurrent(Q, Q[:2], Q, [0.5]), ValueError, r"same number of positions"),
    (lambda: delta_rule_recurrent(Q, Q, Q, [np.inf]), ValueError, r"beta must hold finite"),
    (lambda: delta_rule_backward(Q, Q, Q, [0.5], np.ones((2, 2))), ValueError,
     r"grad_out must have shape"),
    (lambda: l2_normalise("x"), TypeError, r"x must be an array"),
])
def test_bad_input_is_refused_by_name(call, exc, pattern):
    ref.assert_clear_error(call, exc, pattern)
