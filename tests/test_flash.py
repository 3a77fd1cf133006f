"""flash_attention and flash_attention_steps: tiled attention equals plain attention."""


import numpy as np
import pytest
import reference as ref
from hypothesis import given
from hypothesis import strategies as st

from attn_core import DEFAULT_BLOCK_SIZE, attention, flash_attention, flash_attention_steps

SEED = 20240605

#: flash_attention against attention, both in float64: only the order of rounding differs.
FLOAT64_TOL = {"rtol": 0, "atol": 1e-12}


def block_sizes(n):
    """Every block size worth trying for n rows: 1, each size up to n, and more than n."""
    return st.one_of(st.just(1), st.integers(1, n), st.integers(n + 1, n + 5),
                     st.just(DEFAULT_BLOCK_SIZE))


def combined_mask(p, causal):
    """What flash_attention(causal=..., mask=...) means, as one mask for attention()."""
    mask = p["mask"]
    if causal:
        tri = np.tri(p["n_q"], p["n_k"], dtype=bool)
        mask = tri if mask is None else mask & tri
    return mask


@ref.PROPERTY
@given(ref.attention_problems(max_n=9), st.booleans(), st.data())
def test_flash_equals_attention_for_every_block_size(p, causal, data):
    block = data.draw(block_sizes(max(p["n_q"], p["n_k"])), label="block_size")
    out = flash_attention(p["q"], p["k"], p["v"], block_size=block, causal=causal, mask=p["mask"])
    expected, _ = attention(p["q"], p["k"], p["v"], mask=combined_mask(p, causal))
    assert out.shape == expected.shape and out.dtype == expected.dtype == p["dtype"]
    tol = FLOAT64_TOL if p["dtype"] == np.float64 else {"rtol": 1e-5, "atol": 2e-6}
    np.testing.assert_allclose(out, expected, **tol)


@ref.PROPERTY
@given(ref.attention_problems(max_n=7), st.booleans(), st.data())
def test_flash_equals_the_loop_reference(p, causal, data):
    block = data.draw(block_sizes(max(p["n_q"], p["n_k"])), label="block_size")
    out = flash_attention(p["q"], p["k"], p["v"], block_size=block, causal=causal, mask=p["mask"])
    ref_out, _, _ = ref.attention(p["q"], p["k"], p["v"], combined_mask(p, causal))
    np.testing.assert_allclose(out, ref_out, **ref.tol(p["dtype"]))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block", [1, 2, 3, 7, 8, 9, 64])
def test_every_block_size_on_one_problem(block, causal):
    g = np.random.default_rng(SEED)
    q, k, v = (g.standard_normal((2, 8, 4)) for _ in range(3))
    mask = g.random((8, 8)) < 0.7
    for m in (None, mask):
        full = np.tri(8, dtype=bool) if causal else np.ones((8, 8), dtype=bool)
        expected, _ = attention(q, k, v, mask=full if m is None else full & m)
        out = flash_attention(q, k, v, block_size=block, causal=causal, mask=m)
        np.testing.assert_allclose(out, expected, **FLOAT64_TOL)


@ref.PROPERTY
@given(ref.attention_problems(max_n=8), st.booleans(), st.data())
def test_steps_end_in_flash_attention_and_the_row_statistics(p, causal, data):
    block = data.draw(block_sizes(max(p["n_q"], p["n_k"])), label="block_size")
    args = (p["q"], p["k"], p["v"])
    steps = flash_attention_steps(*args, block_size=block, causal=causal, mask=p["mask"])
    out = flash_attention(*args, block_size=block, causal=causal, mask=p["mask"])
    last = steps[-1]
    np.testing.assert_array_equal(last.partial_output, out)
    # the running max and sum after the last tile, against the reference's row statistics
    row_max, row_sum = ref.scores_row_stats(p["q"], p["k"], combined_mask(p, causal))
    row_max = np.broadcast_to(row_max, last.running_max.shape)
    row_sum = np.broadcast_to(row_sum, last.running_sum.shape)
    np.testing.assert_array_equal(np.isneginf(last.running_max), np.isneginf(row_max))
    finite = np.isfinite(row_max)
    np.testing.assert_allclose(last.running_max[finite], row_max[finite], **ref.tol(p["dtype"]))
    np.testing.assert_allclose(last.running_sum, row_sum,
                               **(ref.tol(p["dtype"]) if p["dtype"] == np.float64
                                  else {"rtol": 1e-5, "atol": 1e-5}))


@ref.FAST
@given(ref.attention_problems(max_n=8), st.booleans(), st.data())
def test_steps_visit_every_tile_once_in_order(p, causal, data):
    n_q, n_k = p["n_q"], p["n_k"]
    block = data.draw(block_sizes(max(n_q, n_k)), label="block_size")
    steps = flash_attention_steps(p["q"], p["k"], p["v"], block_size=block, causal=causal,
                                  mask=p["mask"])
    expected = [(slice(i, min(i + block, n_q)), slice(j, min(j + block, n_k)))
                for i in range(0, n_q, block) for j in range(0, n_k, block)]
    assert [(s.rows, s.cols) for s in steps] == expected
    for s in steps:
        rows, cols = s.rows, s.cols
        # a tile is skipped exactly when causal and its first key is after its last query
        assert s.skipped == (causal and cols.start > rows.stop - 1)
        size = (rows.stop - rows.start) * (cols.stop - cols.start)
        assert s.tile_elements == (0 if s.skipped else size)
        assert s.skipped == (s.tile_scores is None)
        if not s.skipped:
            assert s.tile_scores.shape[-2:] == (rows.stop - rows.start, cols.stop - cols.start)
        # rows not reached yet still hold the initial state
        later = slice(rows.stop, None)
        assert np.isneginf(s.running_max[..., later]).all()
        assert (s.running_sum[..., later] == 0).all()


@ref.FAST
@given(ref.attention_problems(max_n=8, with_mask=False), st.data())
def test_running_max_never_decreases(p, data):
    block = data.draw(st.integers(1, 4), label="block_size")
    steps = flash_attention_steps(p["q"], p["k"], p["v"], block_size=block)
    for before, after in zip(steps, steps[1:]):
        assert (after.running_max >= before.running_max).all()


def test_steps_hold_copies_not_views():
    g = np.random.default_rng(SEED)
    q, k, v = (g.standard_normal((6, 2)) for _ in range(3))
    steps = flash_attention_steps(q, k, v, block_size=2)
    assert not np.array_equal(steps[0].partial_output, steps[-1].partial_output)
    assert not np.shares_memory(steps[0].running_sum, steps[1].running_sum)


def test_the_first_tile_alone_is_attention_over_its_keys():
    """After tile (0, 0), partial_output is attention restricted to the keys seen so far."""
    g = np.random.default_rng(SEED)
    q, k, v = (g.standard_normal((6, 3)) for _ in range(3))
    first = flash_attention_steps(q, k, v, block_size=2)[0]
    expected, _ = attention(q[:2], k[:2], v[:2])
    np.testing.assert_allclose(first.partial_output[:2], expected, **FLOAT64_TOL)


def test_causal_skips_tiles_above_the_diagonal():
    q = k = v = np.eye(6)
    steps = flash_attention_steps(q, k, v, block_size=2, causal=True)
    assert [s.skipped for s in steps] == [False, True, True, False, False, True,
                                          False, False, False]


# --- bad input -----------------------------------------------------------------------------

G = np.random.default_rng(SEED)
Q, K, V = (G.standard_normal((4, 2)) for _ in range(3))


def k_with(value):
    k = K.copy()
    k[3, 1] = value
    return k


BAD_INPUT = []
for fn in (flash_attention, flash_attention_steps):
    name = fn.__name__
    BAD_INPUT += [
        pytest.param(lambda fn=fn: fn(Q, K, V, block_size=0), ValueError,
                     r"^block_size must be an integer >= 1, got 0$", id=f"{name}-block-zero"),
        pytest.param(lambda fn=fn: fn(Q, K, V, block_size=-3), ValueError,
                     r"^block_size must be an integer >= 1, got -3$", id=f"{name}-block-negative"),
        pytest.param(lambda fn=fn: fn(Q, K, V, block_size=2.5), TypeError,
                     r"^block_size must be an integer >= 1, got 2\.5$", id=f"{name}-block-float"),
        pytest.param(lambda fn=fn: fn(Q, np.ones((4, 3)), V), ValueError,
                     r"^q and k must have the same last dimension d_k, "
                     r"got q of shape \(4, 2\) and k of shape \(4, 3\)$", id=f"{name}-qk-last-dim"),
        pytest.param(lambda fn=fn: fn(Q, K, np.ones((5, 2))), ValueError,
                     r"^k and v must have the same number of positions n_k, "
                     r"got k of shape \(4, 2\) and v of shape \(5, 2\)$", id=f"{name}-kv-length"),
        pytest.param(lambda fn=fn: fn(Q, K, V, mask=np.ones((4, 4), dtype=np.int8)), TypeError,
                     r"^mask must be a boolean array .*got dtype int8", id=f"{name}-mask-not-bool"),
        pytest.param(lambda fn=fn: fn(Q, K, V, mask=np.ones((3, 4), dtype=bool)), ValueError,
                     r"^mask of shape \(3, 4\) is not broadcastable to the scores' shape \(4, 4\)",
                     id=f"{name}-mask-not-broadcastable"),
        pytest.param(lambda fn=fn: fn(Q, K, V, causal="yes"), TypeError,
                     r"^causal must be True or False, got 'yes'$", id=f"{name}-causal-str"),
        pytest.param(lambda fn=fn: fn(np.ones(2), K, V), ValueError,
                     r"^q must be a matrix with shape \(\.\.\., n, d\) \(rank >= 2\), "
                     r"got shape \(2,\) \(rank 1\)$", id=f"{name}-q-rank-1"),
        pytest.param(lambda fn=fn: fn(Q, K, np.ones(4)), ValueError,
                     r"^v must be a matrix .*got shape \(4,\) \(rank 1\)$", id=f"{name}-v-rank-1"),
    ]
    for value, shown in ((np.nan, "nan"), (np.inf, "inf"), (-np.inf, "-inf")):
        BAD_INPUT.append(pytest.param(
            lambda fn=fn, value=value: fn(Q, k_with(value), V), ValueError,
            rf"^k must hold finite values, got {shown} at index \(3, 1\)", id=f"{name}-k-{shown}"))
BAD_INPUT += [
    pytest.param(lambda: flash_attention(np.full((2, 2), np.nan), K, V), ValueError,
                 r"^q must hold finite values, got nan at index \(0, 0\) \(4 non-finite",
                 id="q-nan"),
    pytest.param(lambda: flash_attention(Q, K, np.where(V > 0, np.inf, V)), ValueError,
                 r"^v must hold finite values, got inf at index", id="v-inf"),
    # No keys at all: attention() fails inside numpy here, flash_attention silently returns
    # zeros; both should refuse it with the same sentence.
    pytest.param(lambda: flash_attention(Q, np.ones((0, 2)), np.ones((0, 2))), ValueError,
                 r"^k .*(at least one|non-empty|empty|>= 1).*got shape \(0, 2\)", id="k-empty"),
]


@pytest.mark.parametrize(("call", "exc_type", "pattern"), BAD_INPUT)
def test_bad_input_gets_a_clear_error(call, exc_type, pattern):
    ref.assert_clear_error(call, exc_type, pattern)


# --- overflow: finite in, finite out, or a clear error ------------------------------------------

NEG_OVERFLOW = [
    pytest.param([[1e200]], [[-1e200], [-1e200]], [[1.0], [3.0]], 1.0, id="1e200"),
    pytest.param([[1.0, 2.0]], [[-1e300, 0.0], [-3e300, 1.0]], [[1.0], [3.0]], 1e10,
                 id="large-scale"),
    pytest.param(np.float32([[1e20]]), np.float32([[-1e20], [-1e20]]), np.float32([[1.0], [3.0]]),
                 None, id="float32-1e20"),
]


@pytest.mark.parametrize("block_size", [1, DEFAULT_BLOCK_SIZE])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("q", "k", "v", "scale"), NEG_OVERFLOW)
def test_scores_overflowing_to_minus_inf_are_refused(q, k, v, scale, block_size, causal):
    """Today: a zero output, as if the row were fully masked (the answer of 1e200 is 2.0)."""
    if causal:  # a causal row 0 sees key 0 only: put the overflowing keys first
        q = np.repeat(np.asarray(q), 2, axis=0)
    ref.assert_clear_error(
        lambda: flash_attention(q, k, v, block_size=block_size, causal=causal, scale=scale),
        ValueError, r"overflowed to -inf")


def test_only_the_mask_makes_a_row_empty():
    q, k, v = [[1.0], [1e200]], [[-1e200], [-1e200]], [[1.0], [3.0]]
    out = ref.assert_no_warnings(lambda: flash_attention(
        q, k, v, block_size=1, mask=[[True, True], [False, False]], scale=1.0))
    assert out.tolist() == [[2.0], [0.0]]
    ref.assert_clear_error(
        lambda: flash_attention(q, k, v, block_size=1, mask=[[True, True], [True, False]],
                                scale=1.0), ValueError, r"overflowed to -inf")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("block_size", [1, 3, DEFAULT_BLOCK_SIZE])
def test_values_near_the_largest_finite_number_give_a_finite_output(dtype, block_size):
    """Today the un-normalised running sum of exp(score - m) * value overflows to inf."""
    g = np.random.default_rng(3)
    q, k = (g.standard_normal((20, 4)).astype(dtype) for _ in range(2))
    v = (0.9 * np.finfo(dtype).max * np.sign(g.standard_normal((20, 3)))).astype(dtype)
    v[:, 0] = 0.9 * np.finfo(dtype).max  # one column of equal large values: out = that value
    expected, _ = attention(q, k, v)
    assert np.isfinite(expected).all()
    out = ref.assert_no_warnings(lambda: flash_attention(q, k, v, block_size=block_size))
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, expected, rtol=1e-4 if dtype == np.float32 else 1e-11,
                               atol=1e-5 * float(np.finfo(dtype).max))
    np.testing.assert_allclose(out[:, 0], v[0, 0], rtol=1e-5 if dtype == np.float32 else 1e-13)


@pytest.mark.parametrize("block_size", [1, 3, DEFAULT_BLOCK_SIZE])
def test_values_at_the_largest_finite_number_give_finite_output_or_a_clear_error(block_size):
    g = np.random.default_rng(4)
    q, k = g.standard_normal((2, 9, 2))
    v = np.full((9, 2), np.finfo(np.float64).max)
    for call in (lambda: flash_attention(q, k, v, block_size=block_size),
                 lambda: attention(q, k, v)[0]):
        try:
            out = ref.assert_no_warnings(call)
        except ValueError as exc:
            assert "overflowed" in str(exc)
        else:
            assert np.isfinite(out).all()


@ref.FAST
@given(ref.attention_problems(), st.sampled_from([1, 2, 3]), st.data())
def test_running_state_stays_within_the_range_of_the_values(p, block_size, data):
    """Every partial output is a weighted average of values: inside [min v, max v]."""
    steps = flash_attention_steps(p["q"], p["k"], p["v"], block_size=block_size, mask=p["mask"])
    lo, hi = p["v"].min(), p["v"].max()
    slack = 1e-5 if p["dtype"] == np.float32 else 1e-12
    for step in steps:
        out = step.partial_output
        assert ((out >= lo - slack * (1 + abs(lo))) | (out == 0)).all()
        assert ((out <= hi + slack * (1 + abs(hi))) | (out == 0)).all()
