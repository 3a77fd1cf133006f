"""Decoding with a key/value cache against full causal attention and the loop reference."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_core.decoding import KVCache, append_kv, decode_sequence, decode_step, empty_cache

import reference as ref

SEED = 20240613

# Why a tolerance and not assert_array_equal: row t of the full causal product sums
# w[t, j] * v[j] over all n keys (the masked ones with weight exactly 0), the decoded row
# over t + 1 keys. Adding exact zeros changes nothing, but BLAS picks its blocking (and
# so the order of the additions) by the matrix sizes, so the two can differ in the last
# bits. Both are compared with the float64 loop reference at the same tolerance.


@st.composite
def sequences(draw, max_n=7, max_d=4):
    batch = draw(ref.batch_shapes())
    n = draw(st.integers(1, max_n))
    d_k, d_v = draw(st.integers(1, max_d)), draw(st.integers(1, max_d))
    dtype = draw(st.sampled_from(ref.DTYPES))
    g = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    spread = draw(st.sampled_from([0.1, 1.0, 3.0]))
    q, k = (spread * g.standard_normal((*batch, n, d_k))).astype(dtype), \
        (spread * g.standard_normal((*batch, n, d_k))).astype(dtype)
    v = (spread * g.standard_normal((*batch, n, d_v))).astype(dtype)
    return q, k, v


@ref.PROPERTY
@given(sequences())
def test_decoding_token_by_token_gives_the_causal_rows(qkv):
    q, k, v = qkv
    n = q.shape[-2]
    want_out, want_w, _ = ref.attention(q, k, v, mask=ref.causal_mask(n))
    cache = empty_cache(k.shape[-1], v.shape[-1], batch=k.shape[:-2], dtype=k.dtype)
    for t in range(n):
        cache = append_kv(cache, k[..., t:t + 1, :], v[..., t:t + 1, :])
        assert cache.length == t + 1
        out, w = decode_step(q[..., t:t + 1, :], cache)
        assert out.shape == (*q.shape[:-2], 1, v.shape[-1])
        assert w.shape == (*q.shape[:-2], 1, t + 1)
        np.testing.assert_allclose(w[..., 0, :], want_w[..., t, :t + 1], **ref.tol(q.dtype))
        np.testing.assert_allclose(out[..., 0, :], want_out[..., t, :], **ref.tol(q.dtype))
        # the keys the full matrix masks for this row are exactly the ones not yet cached
        assert (want_w[..., t, t + 1:] == 0).all()


@ref.PROPERTY
@given(sequences())
def test_decode_sequence_equals_full_causal_attention(qkv):
    from attn_core import attention, causal_mask

    q, k, v = qkv
    n = q.shape[-2]
    out, cache = decode_sequence(q, k, v)
    full, _ = attention(q, k, v, mask=causal_mask(n))
    np.testing.assert_allclose(out, full, **ref.tol(q.dtype))
    np.testing.assert_array_equal(cache.keys, k)
    np.testing.assert_array_equal(cache.values, v)
    assert cache.nbytes == k.nbytes + v.nbytes


@ref.PROPERTY
@given(sequences(), st.data())
def test_a_chunk_of_queries_sees_the_cache_causally(qkv, data):
    """Prefill: m new tokens at once give the last m causal rows."""
    q, k, v = qkv
    n = q.shape[-2]
    m = data.draw(st.integers(1, n))
    cache = empty_cache(k.shape[-1], v.shape[-1], batch=k.shape[:-2], dtype=k.dtype)
    if m < n:
        cache = append_kv(cache, k[..., :n - m, :], v[..., :n - m, :])
    cache = append_kv(cache, k[..., n - m:, :], v[..., n - m:, :])
    out, w = decode_step(q[..., n - m:, :], cache)
    want_out, want_w, _ = ref.attention(q, k, v, mask=ref.causal_mask(n))
    np.testing.assert_allclose(out, want_out[..., n - m:, :], **ref.tol(q.dtype))
    np.testing.assert_allclose(w, want_w[..., n - m:, :], **ref.tol(q.dtype))


def test_float64_decoding_agrees_with_the_full_matrix_to_the_last_bits():
    """A larger problem than hypothesis draws: the disagreement is rounding, a few ulps."""
    from attn_core import attention, causal_mask

    g = np.random.default_rng(SEED)
    q, k, v = (g.standard_normal((2, 4, 64, 16)) for _ in range(3))
    out, _ = decode_sequence(q, k, v)
    full, _ = attention(q, k, v, mask=causal_mask(64))
    assert np.max(np.abs(out - full)) <= 16 * np.finfo(np.float64).eps * np.max(np.abs(v))


def test_heads_broadcast_against_a_shared_query_batch():
    g = np.random.default_rng(SEED)
    k, v = g.standard_normal((2, 3, 5, 4)), g.standard_normal((2, 3, 5, 2))
    q = g.standard_normal((3, 5, 4))  # no leading batch axis: broadcast over it
    out, _ = decode_sequence(q, k, v)
    want, _, _ = ref.attention(q, k, v, mask=ref.causal_mask(5))
    np.testing.assert_allclose(out, want, **ref.tol(np.float64))


def test_appending_leaves_the_old_cache_alone():
    c0 = empty_cache(2)
    c1 = append_kv(c0, [[1.0, 2.0]], [[3.0, 4.0]])
    c2 = append_kv(c1, [[5.0, 6.0]], [[7.0, 8.0]])
    assert (c0.length, c1.length, c2.length) == (0, 1, 2)
    assert c1.keys.tolist() == [[1.0, 2.0]]
    with pytest.raises(AttributeError):
        c2.keys = None


def test_integer_input_becomes_float64():
    c = append_kv(empty_cache(1), [[1]], [[2]])
    out, w = decode_step([[3]], c)
    assert out.dtype == np.float64 and w.tolist() == [[1.0]] and out.tolist() == [[2.0]]


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda: decode_step([[1.0, 0.0]], empty_cache(2)), ValueError, r"append_kv.*before"),
    (lambda: decode_step([[1.0, 0.0]], ([[1.0, 0.0]], [[1.0]])), TypeError,
     r"cache must be a KVCache"),
    (lambda: decode_step([[1.0, 0.0, 0.0]], append_kv(empty_cache(2), [[1.0, 0.0]], [[1.0, 1.0]])),
     ValueError, r"q_new must have last dimension d_k = 2"),
    (lambda: append_kv(empty_cache(2), [[1.0, 0.0]], [[1.0, 1.0], [2.0, 2.0]]), ValueError,
     r"same number of new tokens m"),
    (lambda: append_kv(empty_cache(2), [[1.0, 0.0, 0.0]], [[1.0, 1.0]]), ValueError,
     r"k_new must have last dimension 2"),
    (lambda: append_kv(empty_cache(2, 3), [[1.0, 0.0]], [[1.0, 1.0]]), ValueError,
     r"v_new must have last dimension 3"),
    (lambda: append_kv(empty_cache(2, batch=(2,)), [[1.0, 0.0]], [[1.0, 1.0]]), ValueError,
     r"k_new must have the cache's leading dimensions \(2,\)"),
    (lambda: append_kv(empty_cache(2), [[np.nan, 0.0]], [[1.0, 1.0]]), ValueError,
     r"k_new must hold finite values"),
    (lambda: append_kv(empty_cache(2), [1.0, 0.0], [[1.0, 1.0]]), ValueError,
     r"k_new must be a matrix with shape \(\.\.\., m, d_k\)"),
    (lambda: empty_cache(0), ValueError, r"d_k must be an integer >= 1, got 0"),
    (lambda: empty_cache(2, batch=[2]), TypeError, r"batch must be a tuple"),
    (lambda: empty_cache(2, dtype="int32"), ValueError, r"dtype must be a floating dtype"),
    (lambda: decode_sequence(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 2))), ValueError,
     r"same number of tokens n"),
    (lambda: decode_sequence(np.ones((3, 2)), np.ones((3, 1)), np.ones((3, 2))), ValueError,
     r"same last dimension d_k"),
])
def test_bad_input_is_named(call, exc, pattern):
    ref.assert_clear_error(call, exc, pattern)


def test_the_cache_type_is_a_plain_pair():
    c = KVCache(np.zeros((0, 2)), np.zeros((0, 3)))
    assert c.length == 0 and c.nbytes == 0


# --- immutability ------------------------------------------------------------------------------


def test_the_cache_arrays_are_read_only():
    c = append_kv(empty_cache(2), [[1.0, 2.0]], [[3.0, 4.0]])
    for arr in (c.keys, c.values):
        assert not arr.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        c.keys[0, 0] = 42.0
    with pytest.raises(ValueError, match="read-only"):
        c.values[...] = 0.0
    assert c.keys.tolist() == [[1.0, 2.0]] and c.values.tolist() == [[3.0, 4.0]]
    for arr in (empty_cache(3).keys, decode_sequence(np.ones((2, 2)), np.ones((2, 2)),
                                                     np.ones((2, 2)))[1].values):
        assert not arr.flags.writeable


def test_appending_to_a_read_only_cache_still_works():
    c = empty_cache(2, 1)
    for t in range(3):
        c = append_kv(c, [[t, t + 1.0]], [[10.0 * t]])
    assert c.keys.tolist() == [[0.0, 1.0], [1.0, 2.0], [2.0, 3.0]]
    assert c.values[:, 0].tolist() == [0.0, 10.0, 20.0] and not c.keys.flags.writeable
    out, _ = decode_step([[0.0, 1.0]], c)
    assert out.flags.writeable  # results are the caller's own arrays


def test_the_callers_arrays_are_not_frozen():
    k_new, v_new = np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]])
    c = append_kv(empty_cache(2), k_new, v_new)
    k_new[0, 0] = 9.0  # the caller may go on using its arrays ...
    assert c.keys[0, 0] == 1.0  # ... without changing the cache
    keys, values = np.zeros((1, 2)), np.zeros((1, 3))
    direct = KVCache(keys, values)
    keys[0, 0] = 5.0  # a cache built directly holds a copy, not a freeze of the input
    assert keys.flags.writeable and values.flags.writeable
    assert not direct.keys.flags.writeable and not direct.values.flags.writeable
    assert direct.keys[0, 0] == 0.0


def _roots(x):
    """The arrays and buffer under ``x`` (its base chain)."""
    out = [x]
    while isinstance(out[-1], np.ndarray) and out[-1].base is not None:
        out.append(out[-1].base)
    return out


@pytest.mark.parametrize("make", [
    lambda: append_kv(empty_cache(2), [[1.0, 2.0]], [[3.0, 4.0]]),
    lambda: KVCache(np.ones((1, 2)), np.ones((1, 2))),
    lambda: append_kv(append_kv(empty_cache(2, window=1, n_sink=1), [[1.0, 2.0]],
                                [[3.0, 4.0]]), [[5.0, 6.0]], [[7.0, 8.0]]),
    lambda: empty_cache(3, batch=(2,)),
], ids=["appended", "direct", "rolling", "empty"])
def test_no_one_can_make_the_cache_writeable_again(make):
    """Setting the flag back (on the array or anything under it) must fail: a cache is
    immutable, not only read-only by default."""
    c = make()
    before = (c.keys.copy(), c.values.copy())
    for arr in (c.keys, c.values):
        for under in _roots(arr):
            if isinstance(under, np.ndarray):
                with pytest.raises(ValueError, match="WRITEABLE"):
                    under.flags.writeable = True
            else:  # the buffer at the bottom is immutable bytes
                assert isinstance(under, bytes)
        with pytest.raises(ValueError, match="read-only"):
            arr[...] = 9.0
    assert np.array_equal(c.keys, before[0]) and np.array_equal(c.values, before[1])


def test_a_cache_holds_one_copy_of_its_tokens():
    """Immutability costs no second copy per array: the bytes under each array are as many
    as the array's, and a cache rebuilt from a cache's arrays shares them."""
    c = empty_cache(4, batch=(3,))
    for t in range(5):
        c = append_kv(c, np.full((3, 1, 4), t, float), np.full((3, 1, 4), -t, float))
    for arr in (c.keys, c.values):
        assert len(_roots(arr)[-1]) == arr.nbytes
    again = KVCache(c.keys, c.values)
    assert np.shares_memory(again.keys, c.keys) and np.shares_memory(again.values, c.values)
