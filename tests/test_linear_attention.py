"""Linear attention's three forms against a plain float64 loop, and against each other."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_core.cost import kv_cache_bytes
from attn_core.cost_beyond import linear_attention_flops, linear_overtakes_at, linear_state_bytes
from attn_core.linear_attention import (
    elu_feature_map,
    empty_linear_state,
    linear_attention,
    linear_attention_quadratic,
    linear_attention_recurrent,
    linear_decode_step,
)

import reference as ref
from tolerances import assert_rounding_close


def phi_loop(x):
    return [xi + 1.0 if xi > 0 else math.exp(xi) for xi in x]


def loop_linear_attention(q, k, v, causal):
    """Katharopoulos et al.'s equation 4, summed term by term in float64 (2-D inputs)."""
    q, k, v = (np.asarray(a, np.float64).tolist() for a in (q, k, v))
    out = []
    for i, qi in enumerate(q):
        fq = phi_loop(qi)
        keys = range(i + 1) if causal else range(len(k))
        sims = [sum(a * b for a, b in zip(fq, phi_loop(k[j]))) for j in keys]
        total = sum(sims)
        out.append([sum(s * v[j][c] for s, j in zip(sims, keys)) / total
                    for c in range(len(v[0]))])
    return np.array(out)


def loop_batched(q, k, v, causal):
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (np.broadcast_to(a, (*lead, *a.shape[-2:])) for a in (q, k, v))
    out = np.empty((*lead, q.shape[-2], v.shape[-1]))
    for idx in np.ndindex(*lead):
        out[idx] = loop_linear_attention(q[idx], k[idx], v[idx], causal)
    return out


@ref.PROPERTY
@given(ref.attention_problems(square=True, with_mask=False), st.booleans(),
       st.integers(1, 4))
def test_the_three_forms_equal_the_loop(p, causal, chunk):
    q, k, v = p["q"], p["k"], p["v"]
    want = loop_batched(q, k, v, causal)
    quad, weights = linear_attention_quadratic(q, k, v, causal=causal)
    lin = linear_attention(q, k, v, causal=causal, chunk=chunk)
    # the error model of tests/tolerances.py: sums of n products of d_k-long dot products,
    # then a division (depth 2)
    inner = p["n_q"] * p["d_k"]
    for got in (quad, lin):
        assert got.dtype == p["dtype"]
        assert_rounding_close(got, want.astype(p["dtype"]), inner, depth=2)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-5)
    if causal:
        rec, state = linear_attention_recurrent(q, k, v)
        assert_rounding_close(rec, want.astype(p["dtype"]), inner, depth=2)
        assert state.seen == p["n_q"] and state.s.shape[-2:] == (p["d_k"], p["d_v"])
        assert np.all(np.triu(weights, 1) == 0)


def test_float64_forms_agree_to_1e_12():
    g = np.random.default_rng(34)
    q, k, v = g.standard_normal((3, 2, 50, 8))
    for causal in (False, True):
        a, _ = linear_attention_quadratic(q, k, v, causal=causal)
        b = linear_attention(q, k, v, causal=causal, chunk=7)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    c, _ = linear_attention_recurrent(q, k, v)
    np.testing.assert_allclose(c, linear_attention(q, k, v, causal=True), rtol=0, atol=1e-12)


def test_feature_map_is_elu_plus_one_and_positive():
    x = np.array([[-30.0, -1.0, 0.0, 0.5, 4.0]])
    np.testing.assert_allclose(elu_feature_map(x), [phi_loop(x[0])], rtol=1e-15)
    assert (elu_feature_map(x) > 0).all()


def test_state_has_a_fixed_size_and_equals_the_sums():
    g = np.random.default_rng(3)
    q, k, v = g.standard_normal((3, 40, 4))
    state = empty_linear_state(4)
    sizes = set()
    for t in range(40):
        _, state = linear_decode_step(state, q[t], k[t], v[t])
        sizes.add(state.nbytes)
    assert sizes == {(16 + 4) * 8}
    fk = elu_feature_map(k)
    np.testing.assert_allclose(state.s, fk.T @ v, rtol=1e-12)
    np.testing.assert_allclose(state.z, fk.sum(axis=0), rtol=1e-12)
    with pytest.raises(ValueError):
        state.s[0, 0] = 1.0


def test_bad_input_is_named():
    q = np.ones((3, 2))
    ref.assert_clear_error(lambda: linear_attention(q, np.ones((3, 4)), q), ValueError, "d_k")
    ref.assert_clear_error(lambda: linear_attention(q, q, np.ones((4, 2))), ValueError, "n_k")
    ref.assert_clear_error(lambda: linear_attention(q, np.ones((5, 2)), np.ones((5, 2)),
                                                    causal=True), ValueError, "causal")
    ref.assert_clear_error(lambda: linear_attention(q, q, q, chunk=0), ValueError, "chunk")
    ref.assert_clear_error(lambda: linear_decode_step("s", q[0], q[0], q[0]), TypeError,
                           "LinearState")
    ref.assert_clear_error(lambda: linear_decode_step(empty_linear_state(3), q[0], q[0], q[0]),
                           ValueError, "q_t")


def test_flops_are_the_loop_count_and_linear_wins_past_d_k():
    n, d_model, h = 100, 32, 4
    d_k = d_model // h
    f = linear_attention_flops(n, d_model, h)
    # per head: S is n outer products of d_k x d_k (multiply-adds), the read-out n products
    # of a d_k vector with a d_k x d_k matrix
    assert f["state"] == h * n * d_k * d_k * 2 == f["readout"]
    for d_model, h in ((64, 1), (512, 8), (96, 3)):
        n = linear_overtakes_at(d_model, h)
        from attn_core.cost import attention_flops
        soft = [attention_flops(m, d_model, h)["total"] for m in (n - 1, n)]
        lin = [linear_attention_flops(m, d_model, h)["total"] for m in (n - 1, n)]
        assert soft[0] <= lin[0] and soft[1] > lin[1]
        assert d_model // h <= n <= 2 * d_model // h + 2


def test_state_bytes_stop_growing_where_the_cache_grows():
    state = linear_state_bytes(2, 4, 8, dtype="float64")
    assert state == 2 * 4 * (8 * 8 + 8) * 8
    assert kv_cache_bytes(1, 2, 4, 8, "float64") < state < kv_cache_bytes(100, 2, 4, 8, "float64")


def test_weights_backward_against_finite_differences():
    from attn_core.linear_attention import linear_weights_backward
    g = np.random.default_rng(7)
    q, k, v = g.standard_normal((3, 2, 6, 3))
    grad_out = g.standard_normal((2, 6, 3))
    for causal in (False, True):
        def loss(q, k, causal=causal):
            return float((linear_attention_quadratic(q, k, v, causal=causal)[0] * grad_out).sum())

        out, w = linear_attention_quadratic(q, k, v, causal=causal)
        gq, gk = linear_weights_backward(q, k, w, grad_out @ v.swapaxes(-1, -2))
        np.testing.assert_allclose(gq, ref.numeric_grad(lambda x: loss(x, k), q), rtol=1e-6,
                                   atol=1e-8)
        np.testing.assert_allclose(gk, ref.numeric_grad(lambda x: loss(q, x), k), rtol=1e-6,
                                   atol=1e-8)


# --- bad input: a clear error, no warning first (issue 46) ------------------------------


def test_state_cannot_be_made_writeable_again_and_the_callers_arrays_stay_free():
    from attn_core.decoding import empty_cache
    from attn_core.linear_attention import LinearState
    s, z = np.zeros((3, 2)), np.zeros(3)
    st_ = LinearState(s, z, 0)
    cache = empty_cache(3)
    for arr in (st_.s, st_.z, cache.keys, cache.values):
        with pytest.raises(ValueError):
            arr.flags.writeable = True
        with pytest.raises(ValueError):
            arr[...] = 1.0
    s[0, 0] = 5.0  # the caller's own array is copied, not frozen
    assert st_.s[0, 0] == 0.0 and s.flags.writeable


def test_huge_entries_give_the_clear_error_and_no_warning():
    import warnings
    q = np.full((4, 3), 1e308)
    forms = (lambda: linear_attention(q, q, q), lambda: linear_attention(q, q, q, causal=True),
             lambda: linear_attention_quadratic(q, q, q),
             lambda: linear_attention_recurrent(q, q, q))
    for form in forms:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a RuntimeWarning would fail the test
            with pytest.raises(ValueError, match="overflowed"):
                form()


def test_weights_backward_refuses_shapes_that_do_not_fit_q_and_k():
    from attn_core.linear_attention import linear_weights_backward
    g = np.random.default_rng(0)
    q, k = g.standard_normal((3, 2)), g.standard_normal((4, 2))
    _, a = linear_attention_quadratic(q, k, g.standard_normal((4, 2)))
    with pytest.raises(ValueError, match="grad_weights"):
        linear_weights_backward(q, k, a, g.standard_normal((3, 5)))
    with pytest.raises(ValueError, match="weights"):
        linear_weights_backward(q, k, a[:2], g.standard_normal((2, 4)))
    with pytest.raises(ValueError, match="d_k"):
        linear_weights_backward(q, g.standard_normal((4, 3)), a, a)
