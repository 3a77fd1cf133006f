"""fast_attention: the same output as the float64 loop reference and as attention()."""

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_core import attention
from attn_core import fast as fast_module
from attn_core.fast import fast_attention

import reference as ref

SEED = 20261201


def combined_mask(p, causal):
    """What fast_attention(causal=..., mask=...) means, as one mask for the reference."""
    mask = p["mask"]
    if causal:
        tri = np.tri(p["n_q"], p["n_k"], dtype=bool)
        mask = tri if mask is None else mask & tri
    return mask


#: block_bytes that force one query row per block, a few rows, and one block for everything
BLOCKS = st.sampled_from([1, 8, 40, 1 << 20])
THREADS = st.sampled_from([1, 2, 3])


@ref.PROPERTY
@given(ref.attention_problems(max_n=9), st.booleans(), BLOCKS, THREADS)
def test_equals_the_loop_reference(p, causal, block_bytes, threads):
    out = fast_attention(p["q"], p["k"], p["v"], mask=p["mask"], causal=causal,
                         threads=threads, block_bytes=block_bytes)
    expected, _, _ = ref.attention(p["q"], p["k"], p["v"], combined_mask(p, causal))
    assert out.dtype == p["dtype"]
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out, expected, **ref.tol(p["dtype"]))


@ref.PROPERTY
@given(ref.attention_problems(max_n=9), st.booleans(), BLOCKS, THREADS,
       st.sampled_from([0.3, 1.0, 2.5]))
def test_equals_attention(p, causal, block_bytes, threads, scale):
    out = fast_attention(p["q"], p["k"], p["v"], mask=p["mask"], scale=scale, causal=causal,
                         threads=threads, block_bytes=block_bytes)
    expected, _ = attention(p["q"], p["k"], p["v"], mask=combined_mask(p, causal), scale=scale)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    tol = {"rtol": 1e-12, "atol": 1e-12} if p["dtype"] == np.float64 else {"rtol": 1e-5,
                                                                            "atol": 2e-6}
    np.testing.assert_allclose(out, expected, **tol)


@pytest.mark.parametrize("safe_bound", [0.0, np.inf])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_with_and_without_the_max_shift(monkeypatch, safe_bound, dtype):
    """Both ways of computing exp (shifted by the row max, or not) give the reference."""
    monkeypatch.setitem(fast_module.SAFE_BOUND, np.dtype(dtype), safe_bound)
    g = np.random.default_rng(SEED)
    q, k, v = (g.standard_normal((2, 17, 5)).astype(dtype) for _ in range(3))
    out = fast_attention(q, k, v, block_bytes=64, threads=2)
    expected, _, _ = ref.attention(q, k, v)
    np.testing.assert_allclose(out, expected, **ref.tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_scores_take_the_shifted_path(dtype):
    """Scores far beyond exp's range (|s| ~ 10^4): shifted, so neither inf nor 0/0."""
    g = np.random.default_rng(SEED)
    q, k, v = (g.standard_normal((33, 8)) for _ in range(3))
    q *= 300.0
    assert (np.linalg.norm(q, axis=1) * np.linalg.norm(k, axis=1).max() / np.sqrt(8)
            > fast_module.SAFE_BOUND[np.dtype(dtype)]).all()
    q, k, v = (x.astype(dtype) for x in (q, k, v))
    out = fast_attention(q, k, v, block_bytes=200)
    expected, _, _ = ref.attention(q, k, v)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, expected, **ref.tol(dtype))


def test_a_block_mixes_safe_and_large_rows():
    g = np.random.default_rng(SEED)
    q, k, v = (g.standard_normal((12, 4)) for _ in range(3))
    q[::3] *= 500.0  # every third query's scores are huge
    out = fast_attention(q, k, v, block_bytes=10 ** 6)  # one block holds both kinds
    np.testing.assert_allclose(out, ref.attention(q, k, v)[0], **ref.tol(np.float64))


@pytest.mark.parametrize("causal", [False, True])
def test_fully_masked_rows_give_zero(causal):
    g = np.random.default_rng(SEED)
    q, k, v = (g.standard_normal((3, 10, 4)) for _ in range(3))
    mask = g.random((3, 10, 10)) < 0.5
    mask[:, 2] = False  # row 2 of every batch element attends to nothing
    mask[1, 7] = False
    out = fast_attention(q, k, v, mask=mask, causal=causal, block_bytes=8, threads=2)
    assert (out[:, 2] == 0).all() and (out[1, 7] == 0).all()
    np.testing.assert_allclose(out, ref.attention(q, k, v, combined_mask(
        {"mask": mask, "n_q": 10, "n_k": 10}, causal))[0], **ref.tol(np.float64))


def test_causal_skips_no_needed_key_at_block_boundaries():
    """Rows 0..n-1 split into blocks of 1, 2, 3, ... rows: each row sees exactly keys <= i."""
    g = np.random.default_rng(SEED)
    n = 23
    q, k, v = (g.standard_normal((n, 3)) for _ in range(3))
    expected = ref.attention(q, k, v, np.tri(n, dtype=bool))[0]
    for rows in range(1, n + 2):
        out = fast_attention(q, k, v, causal=True, threads=2, block_bytes=rows * n * 8)
        np.testing.assert_allclose(out, expected, **ref.tol(np.float64))


def test_many_blocks_on_many_threads_equal_one_thread():
    g = np.random.default_rng(SEED)
    q, k, v = (g.standard_normal((2, 3, 64, 8)).astype(np.float32) for _ in range(3))
    one = fast_attention(q, k, v, threads=1, block_bytes=1)
    for threads in (2, 5):
        np.testing.assert_array_equal(fast_attention(q, k, v, threads=threads, block_bytes=1),
                                      one)


def test_dtypes():
    q = k = v = np.arange(12).reshape(3, 4)
    assert fast_attention(q, k, v).dtype == np.float64  # integers: float64, as attention
    q32 = np.ones((3, 4), np.float32)
    assert fast_attention(q32, q32, q32).dtype == np.float32
    assert fast_attention(q32, q32, q32.astype(np.float64)).dtype == np.float64


Q, K, V = np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 5))
BAD = [
    (lambda f: f(Q, np.ones((3, 4)), V), "q"),
    (lambda f: f(Q, K, np.ones((3, 5))), "v"),
    (lambda f: f(np.ones(2), K, V), "q"),
    (lambda f: f(Q, K, "v"), "v"),
    (lambda f: f(Q, K, V, mask=np.ones((3, 4))), "mask"),
    (lambda f: f(Q, K, V, mask=np.ones((2, 2), dtype=bool)), "mask"),
    (lambda f: f(Q, K, V, scale=-1.0), "scale"),
    (lambda f: f(np.full((3, 2), np.nan), K, V), "q"),
    (lambda f: f(np.ones((2, 3, 2)), np.ones((3, 4, 2)), np.ones((3, 4, 5))), "batch"),
    (lambda f: f(np.full((3, 2), 1e30, np.float32), np.full((4, 2), 1e30, np.float32),
                 np.ones((4, 5), np.float32)), "overflow"),
]


@pytest.mark.parametrize("call, word", BAD)
def test_bad_input_fails_like_attention(call, word):
    """The same exception type as attention(), raised by attn_core's checks, naming the input."""
    with pytest.raises((ValueError, TypeError)) as expected:
        call(attention)
    with pytest.raises(expected.type) as excinfo:
        call(fast_attention)
    ref.assert_raised_by_attn_core(excinfo)
    assert word in str(excinfo.value)


@pytest.mark.parametrize("kwargs", [{"threads": 0}, {"threads": 1.5}, {"block_bytes": 0},
                                    {"causal": 1}])
def test_bad_options(kwargs):
    with pytest.raises((ValueError, TypeError), match=next(iter(kwargs))):
        fast_attention(Q, K, V, **kwargs)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype, big", [(np.float64, 1e200), (np.float32, 1e20)])
def test_scores_overflowing_to_minus_inf_are_refused_like_attention(causal, dtype, big):
    """A row whose allowed scores all overflow to -inf is an error, never a silent zero row
    (issue 16, edge 1), and no RuntimeWarning leaks from the worker threads."""
    q = np.array([[big]], dtype)
    k = np.array([[-big], [-big]], dtype)
    v = np.array([[1.0], [3.0]], dtype)
    with pytest.raises(ValueError, match="overflowed to -inf"):
        attention(q, k, v, scale=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="overflowed to -inf"):
            fast_attention(q, k, v, scale=1.0, causal=causal)
    # the same row fully masked is not an error: it gives zeros
    out = fast_attention(q, k, v, mask=np.zeros((1, 2), bool), scale=1.0)
    np.testing.assert_array_equal(out, np.zeros((1, 1), dtype))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_grouped_heads_equal_repeated_keys_and_the_reference(causal, dtype):
    """Grouped-query layout, q (..., kv, g, n, d) against k, v (..., kv, 1, n, d): the g heads
    of a group go through one product per block (fast._groups); the output equals the same
    keys repeated for every head, the float64 loop, and one thread equals three."""
    g = np.random.default_rng(SEED)
    q = g.standard_normal((2, 3, 4, 19, 8)).astype(dtype)  # batch 2, 3 key/value heads, g = 4
    k, v = (g.standard_normal((2, 3, 1, 19, 8)).astype(dtype) for _ in range(2))
    k_rep, v_rep = (np.repeat(x, 4, axis=2) for x in (k, v))  # (2, 3, 4, 19, 8)
    assert fast_module._groups(q, k, v, None, (2, 3, 4)) == 4
    assert fast_module._groups(q, k_rep, v_rep, None, (2, 3, 4)) == 1
    mask = np.tri(19, dtype=bool) if causal else None
    expected = ref.attention(q, k_rep, v_rep, mask)[0]
    for block_bytes in (1, 8 * 19 * 8, 1 << 20):  # one row, 2 rows of the 4 heads, all
        one = fast_attention(q, k, v, causal=causal, threads=1, block_bytes=block_bytes)
        assert one.shape == q.shape and one.dtype == dtype
        np.testing.assert_allclose(one, expected, **ref.tol(dtype))
        np.testing.assert_allclose(
            one, fast_attention(q, k_rep, v_rep, causal=causal, block_bytes=block_bytes),
            rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)
        np.testing.assert_array_equal(
            fast_attention(q, k, v, causal=causal, threads=3, block_bytes=block_bytes), one)


def test_grouped_heads_with_large_scores_take_the_shifted_path():
    g = np.random.default_rng(SEED)
    q = g.standard_normal((3, 2, 11, 4)) * 400.0  # every score far beyond exp's range
    k, v = (g.standard_normal((3, 1, 11, 4)) for _ in range(2))
    out = fast_attention(q, k, v, causal=True, block_bytes=100)
    expected = ref.attention(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1),
                             np.tri(11, dtype=bool))[0]
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, expected, **ref.tol(np.float64))
