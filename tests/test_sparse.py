"""Sparse patterns against their definitions written as loops; block-sparse attention against
masked full attention; layers to connect against a breadth-first search."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from attn_core.attention import attention
from attn_core.cost import attention_flops
from attn_core.cost_beyond import masked_attention_flops
from attn_core.masks import window_mask
from attn_core.sparse import (
    bigbird_mask,
    block_layout,
    block_sparse_attention,
    block_sparse_cells,
    fixed_mask,
    layers_to_connect,
    local_global_mask,
    strided_mask,
)

import reference as ref


def loop_mask(n, allowed):
    return np.array([[allowed(i, j) for j in range(n)] for i in range(n)])


@ref.FAST
@given(st.integers(1, 30), st.integers(1, 8), st.integers(1, 8))
def test_patterns_follow_their_definitions(n, stride, c):
    c = min(c, stride)
    assert (strided_mask(n, stride) == loop_mask(
        n, lambda i, j: j <= i and (i - j < stride or (i - j) % stride == 0))).all()
    assert (fixed_mask(n, stride, c) == loop_mask(
        n, lambda i, j: j <= i and (j // stride == i // stride or j % stride >= stride - c))).all()
    g = min(c, n)
    assert (local_global_mask(n, stride, g) == loop_mask(
        n, lambda i, j: abs(i - j) <= stride or i < g or j < g)).all()
    assert (local_global_mask(n, stride, g, causal=True)
            == (local_global_mask(n, stride, g) & np.tri(n, dtype=bool))).all()


def test_bigbird_is_whole_blocks_with_window_global_and_random():
    n, block = 32, 4
    m = bigbird_mask(n, block, n_random=2, n_global=1, seed=5)
    layout = block_layout(m, block)
    for bi in range(8):
        for bj in range(8):
            tile = m[bi * block:(bi + 1) * block, bj * block:(bj + 1) * block]
            assert tile.all() or not tile.any()  # whole blocks only
            if abs(bi - bj) <= 1 or bi == 0 or bj == 0:
                assert layout[bi, bj]
    extra = layout.sum(axis=1) - np.array([8] + [min(bi + 1, 7) - max(bi - 1, 0) + 1 + (bi > 1)
                                                 for bi in range(1, 8)])
    assert (extra[1:] == 2).all()  # two random blocks each, where room is left
    assert (bigbird_mask(n, block, 2, seed=5) == m).all()
    assert not (bigbird_mask(n, block, 2, seed=6) == m).all()


@st.composite
def sparse_problems(draw):
    n = draw(st.integers(1, 20))
    kind = draw(st.sampled_from(["strided", "fixed", "local", "bigbird", "random"]))
    s = draw(st.integers(1, 6))
    g = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    mask = {"strided": lambda: strided_mask(n, s), "fixed": lambda: fixed_mask(n, s),
            "local": lambda: local_global_mask(n, s, 1),
            "bigbird": lambda: bigbird_mask(n, s, 1, 1, seed=3),
            "random": lambda: g.random((n, n)) < 0.2}[kind]()
    batch = draw(ref.batch_shapes())
    dtype = draw(st.sampled_from(ref.DTYPES))
    d = draw(st.integers(1, 4))
    q, k, v = (g.standard_normal((3, *batch, n, d))).astype(dtype)
    return q, k, v, mask, draw(st.integers(1, 7))


@ref.PROPERTY
@given(sparse_problems())
def test_block_sparse_equals_masked_full_attention_and_the_loop(problem):
    q, k, v, mask, block = problem
    got = block_sparse_attention(q, k, v, mask, block=block)
    full, _ = attention(q, k, v, mask=mask)
    want, _, _ = ref.attention(q, k, v, mask=mask)
    np.testing.assert_allclose(got, want, **ref.tol(q.dtype))
    np.testing.assert_allclose(got, full, **ref.tol(q.dtype))
    if q.dtype == np.float64:
        np.testing.assert_allclose(got, full, rtol=0, atol=1e-12)


def test_block_sparse_skips_empty_tiles_and_counts_cells():
    m = strided_mask(64, 8)
    layout = block_layout(m, 8)
    tiles = [(i, j) for i in range(8) for j in range(8)
             if m[8 * i:8 * i + 8, 8 * j:8 * j + 8].any()]
    assert layout.sum() == len(tiles) < 64
    assert block_sparse_cells(m, 8) == 64 * len(tiles)
    assert block_sparse_cells(np.ones((10, 10), bool), 4) == 100  # ragged edge tiles
    assert masked_attention_flops(100, 16, 2) == attention_flops(10, 16, 2)


def bfs_hops(mask):
    """Fewest steps along allowed cells from input j to output i, by breadth-first search."""
    n = len(mask)
    hops = np.zeros((n, n), dtype=int)
    for j in range(n):
        frontier, seen, depth = {j}, {j}, 0
        while frontier:
            depth += 1
            frontier = {i for i in range(n) for f in frontier if mask[i, f]} - seen
            seen |= frontier
            for i in frontier:
                hops[i, j] = depth
        hops[j, j] = 1
    return hops


def test_layers_to_connect_equals_a_search():
    for m in (window_mask(20, 3), strided_mask(20, 4), fixed_mask(20, 5),
              local_global_mask(20, 2, 1), bigbird_mask(24, 3, 1, 1)):
        assert (layers_to_connect(m) == bfs_hops(m)).all()
    assert layers_to_connect(strided_mask(64, 8)).max() == 2
    assert layers_to_connect(window_mask(64, 8))[63, 0] == 9  # ceil(63 / 7)


def test_bad_input_is_named():
    q = np.ones((4, 2))
    ref.assert_clear_error(lambda: block_sparse_attention(q, q, q, np.ones((3, 3), bool)),
                           ValueError, "mask")
    ref.assert_clear_error(lambda: block_sparse_attention(q, q, q, np.ones((4, 4))),
                           ValueError, "bool")
    ref.assert_clear_error(lambda: fixed_mask(8, 2, n_summary=3), ValueError, "n_summary")
    ref.assert_clear_error(lambda: strided_mask(8, 0), ValueError, "stride")
    ref.assert_clear_error(lambda: bigbird_mask(8, 2, seed="x"), TypeError,
                           r"^seed must be an int >= 0, got str 'x'")
    ref.assert_clear_error(lambda: bigbird_mask(8, 2, seed=-1), ValueError,
                           r"^seed must be an int >= 0, got -1")
    ref.assert_clear_error(lambda: layers_to_connect(np.zeros((3, 3), bool)), ValueError,
                           "itself")


def test_hops_from_is_a_column_of_layers_to_connect():
    from attn_core.sparse import hops_from
    for m in (window_mask(30, 4), strided_mask(30, 5), fixed_mask(30, 6),
              bigbird_mask(30, 3, 1, 1, seed=2) & np.tri(30, dtype=bool)):
        full = layers_to_connect(m)
        for j in (0, 1, 7, 29):
            assert (hops_from(m, j) == full[:, j]).all()


def test_keys_kept_equals_a_loop_over_future_queries():
    from attn_core.sparse import keys_kept
    for m in (window_mask(24, 5), strided_mask(24, 4), fixed_mask(24, 6, 2)):
        n = len(m)
        want = [sum(any(m[i, j] for i in range(t, n)) for j in range(t + 1)) for t in range(n)]
        assert keys_kept(m).tolist() == want
    assert keys_kept(window_mask(24, 5))[10] == 5
    assert keys_kept(strided_mask(48, 4))[23] == 24  # every old key is read again later


def test_block_sparse_refuses_values_of_fewer_positions_than_keys():
    import pytest
    g = np.random.default_rng(0)
    q, k = g.standard_normal((2, 8, 4))
    with pytest.raises(ValueError, match="k and v must have the same number of positions"):
        block_sparse_attention(q, k, g.standard_normal((6, 4)), strided_mask(8, 3), block=2)
    with pytest.raises(ValueError, match="d_k"):
        block_sparse_attention(q, g.standard_normal((8, 3)), k, strided_mask(8, 3), block=2)


def test_bigbird_seed_is_checked_by_name():
    import pytest
    with pytest.raises(TypeError, match="seed"):
        bigbird_mask(16, 2, seed="x")
    with pytest.raises(ValueError, match="seed"):
        bigbird_mask(16, 2, seed=-1)
