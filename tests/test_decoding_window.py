"""The rolling (sliding-window) KV cache with optional sinks, and grouped-query decoding,
against full attention under the masks of notebook 07 (attn_core.masks) at every step."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_core import attention
from attn_core.decoding import append_kv, decode_sequence, decode_step, empty_cache
from attn_core.masks import causal_mask, receptive_field, window_mask

import reference as ref
from tolerances import assert_rounding_close


def sink_window_mask(n, window, n_sink):
    """Query i may see keys j <= i with i - j < window, or j < n_sink: built by hand."""
    return np.array([[j <= i and (i - j < window or j < n_sink) for j in range(n)]
                     for i in range(n)])


@st.composite
def window_problems(draw):
    batch = draw(ref.batch_shapes())
    n = draw(st.integers(1, 9))
    window = draw(st.integers(1, 6))
    n_sink = draw(st.integers(0, 3))
    d_k, d_v = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dtype = draw(st.sampled_from(ref.DTYPES))
    g = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q, k = (g.standard_normal((*batch, n, d_k)).astype(dtype) for _ in range(2))
    v = g.standard_normal((*batch, n, d_v)).astype(dtype)
    return {"q": q, "k": k, "v": v, "window": window, "n_sink": n_sink, "n": n}


@ref.PROPERTY
@given(window_problems())
def test_rolling_cache_equals_full_attention_with_the_window_mask_at_every_step(p):
    q, k, v, n, w, s = p["q"], p["k"], p["v"], p["n"], p["window"], p["n_sink"]
    mask = window_mask(n, w, n_sink=s)
    assert np.array_equal(mask, sink_window_mask(n, w, s))
    full, _ = attention(q, k, v, mask=mask)
    cache = empty_cache(k.shape[-1], v.shape[-1], batch=k.shape[:-2], dtype=k.dtype,
                        window=w, n_sink=s)
    for t in range(n):
        cache = append_kv(cache, k[..., t:t + 1, :], v[..., t:t + 1, :])
        assert cache.length == min(t + 1, s + w) and cache.seen == t + 1
        out, _ = decode_step(q[..., t:t + 1, :], cache)
        assert_rounding_close(out[..., 0, :], full[..., t, :], max(n, k.shape[-1]), depth=2,
                              err_msg=f"step {t}")
    out, _ = decode_sequence(q, k, v, window=w, n_sink=s)
    assert_rounding_close(out, full, max(n, k.shape[-1]), depth=2)


def test_the_rolling_cache_keeps_the_sinks_and_the_last_window_tokens():
    cache = empty_cache(1, window=3, n_sink=2)
    for t in range(10):
        cache = append_kv(cache, [[float(t)]], [[10.0 * t]])
    assert cache.keys[:, 0].tolist() == [0.0, 1.0, 7.0, 8.0, 9.0]
    assert cache.values[:, 0].tolist() == [0.0, 10.0, 70.0, 80.0, 90.0]
    assert cache.seen == 10 and cache.length == 5


def test_rolling_cache_memory_is_bounded_by_the_window():
    w, s, d = 8, 2, 4
    rolling, full = empty_cache(d, batch=(3,), window=w, n_sink=s), empty_cache(d, batch=(3,))
    one = np.ones((3, 1, d))
    for _ in range(50):
        rolling, full = append_kv(rolling, one, one), append_kv(full, one, one)
    row = 2 * 3 * d * 8  # keys and values, 3 heads, float64
    assert rolling.nbytes == (s + w) * row and full.nbytes == 50 * row
    # the kept arrays are their own, not views of the grown ones (so the evicted rows go)
    base = rolling.keys
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base  # down to the buffer the cache owns
    assert len(memoryview(base).cast("B")) == rolling.keys.nbytes


@ref.PROPERTY
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 6), st.sampled_from(ref.DTYPES),
       st.integers(0, 2**32 - 1), st.sampled_from([None, 2]))
def test_grouped_query_decoding_equals_decoding_with_the_kv_heads_repeated(n_kv, groups, n,
                                                                           dtype, seed, window):
    g = np.random.default_rng(seed)
    h, d = n_kv * groups, 3
    q = g.standard_normal((2, h, n, d)).astype(dtype)
    k, v = (g.standard_normal((2, n_kv, n, d)).astype(dtype) for _ in range(2))
    out, cache = decode_sequence(q, k, v, n_kv_heads=n_kv, window=window)
    # reference: every query head with its own copy of its group's key/value head
    k_rep = np.stack([k[:, i // groups] for i in range(h)], axis=1)
    v_rep = np.stack([v[:, i // groups] for i in range(h)], axis=1)
    mask = causal_mask(n) if window is None else window_mask(n, window)
    expect, _ = attention(q, k_rep, v_rep, mask=mask)
    assert_rounding_close(out, expect, max(n, d), depth=2)
    assert cache.keys.shape[1] == n_kv  # the cache holds the key/value heads only


def test_grouped_decode_step_with_several_new_tokens_is_causal_within_them():
    g = np.random.default_rng(5)
    q = g.standard_normal((4, 5, 2))
    k, v = g.standard_normal((2, 2, 5, 2))
    cache = append_kv(append_kv(empty_cache(2, batch=(2,)), k[:, :2], v[:, :2]), k[:, 2:],
                      v[:, 2:])
    out, w = decode_step(q[:, 2:], cache, n_kv_heads=2)
    expect, _ = attention(q, np.repeat(k, 2, axis=0), np.repeat(v, 2, axis=0),
                          mask=causal_mask(5))
    np.testing.assert_allclose(out, expect[:, 2:], rtol=1e-12, atol=1e-12)
    assert w.shape == (4, 3, 5)


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda: empty_cache(2, n_sink=1), ValueError, r"^n_sink = 1 needs a window"),
    (lambda: empty_cache(2, window=0), ValueError, r"^window"),
    (lambda: empty_cache(2, window=2, n_sink=-1), ValueError, r"^n_sink"),
    (lambda: decode_step(np.ones((2, 1)), append_kv(append_kv(empty_cache(1, window=1),
                                                              [[1.0]], [[1.0]]),
                                                    [[1.0], [2.0]], [[1.0], [2.0]])),
     ValueError, r"rolling cache \(window = 1\) has evicted keys"),
    (lambda: decode_step(np.ones((3, 1, 2)), append_kv(empty_cache(2, batch=(2,)),
                                                       np.ones((2, 1, 2)), np.ones((2, 1, 2))),
                         n_kv_heads=2), ValueError, r"^n_kv_heads must divide"),
    (lambda: decode_step(np.ones((4, 1, 2)), append_kv(empty_cache(2, batch=(1,)),
                                                       np.ones((1, 1, 2)), np.ones((1, 1, 2))),
                         n_kv_heads=2), ValueError, r"^the cache must hold n_kv_heads = 2"),
    (lambda: decode_step(np.ones((1, 2)), append_kv(empty_cache(2), np.ones((1, 2)),
                                                    np.ones((1, 2))), n_kv_heads=1),
     ValueError, r"^with n_kv_heads, q_new must be \(\.\.\., h, m, d_k\)"),
])
def test_bad_window_and_head_arguments_get_a_clear_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern) as excinfo:
        call()
    ref.assert_raised_by_attn_core(excinfo)


@pytest.mark.parametrize("window, layers", [(1, 3), (2, 1), (2, 4), (3, 3), (5, 2)])
def test_receptive_field_is_where_a_perturbed_input_changes_the_output(window, layers):
    """Stack real attention layers (residual, halved so that nothing grows and no softmax
    saturates) and nudge one input: the outputs it changes are exactly those the composed
    masks say it reaches."""
    n = 12
    mask = window_mask(n, window)
    x0 = 0.5 * np.random.default_rng(0).standard_normal((n, 3))

    def stack(x):
        for _ in range(layers):
            x = 0.5 * (x + attention(x, x, x, mask=mask)[0])
        return x

    base = stack(x0)
    depends = np.zeros((n, n), dtype=bool)
    for j in range(n):
        x = x0.copy()
        x[j] += 1e-2
        depends[:, j] = np.abs(stack(x) - base).max(axis=-1) > 1e-14
    reach = receptive_field(mask, layers)
    assert np.array_equal(reach, depends)
    assert int(np.argmax(reach[-1])) == n - 1 - min(n - 1, layers * (window - 1))
