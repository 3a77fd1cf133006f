"""scores and attention against the float64 loop reference, and their properties."""

import importlib
import re
from unittest import mock

import numpy as np
import pytest
import reference as ref
from hypothesis import given
from hypothesis import strategies as st

from attn_core import MASKED_SCORE, attention, flash_attention, multi_head_attention, scores
from attn_core.softmax import stable_softmax

#: The module attn_core.attention (the package's name ``attention`` is the function).
attention_module = importlib.import_module("attn_core.attention")

SEED = 20240602


def qkv(n=4, d=3, batch=(), seed=SEED, dtype=np.float64):
    g = np.random.default_rng(seed)
    return tuple(g.standard_normal((*batch, n, d)).astype(dtype) for _ in range(3))


def weights_shape(p):
    """(..., n_q, n_k) with the batch dims of q, k and the mask (v does not shape weights)."""
    shapes = [p["q"].shape[:-2] + (p["n_q"], p["n_k"]), p["k"].shape[:-2] + (p["n_q"], p["n_k"])]
    if p["mask"] is not None:
        shapes.append(p["mask"].shape)
    return np.broadcast_shapes(*shapes)


def full_mask(p):
    """The problem's mask broadcast to the weights' shape (all True without a mask)."""
    if p["mask"] is None:
        return np.ones(weights_shape(p), dtype=bool)
    return np.broadcast_to(p["mask"], weights_shape(p))


# --- against the reference -----------------------------------------------------------------


@ref.PROPERTY
@given(ref.attention_problems())
def test_attention_equals_loop_reference(p):
    out, weights = attention(p["q"], p["k"], p["v"], mask=p["mask"])
    ref_out, ref_weights, _ = ref.attention(p["q"], p["k"], p["v"], p["mask"])
    assert out.shape == ref_out.shape
    # the weights do not depend on v: their batch dims are those of q, k and the mask
    assert weights.shape == weights_shape(p)
    np.testing.assert_allclose(np.broadcast_to(weights, ref_weights.shape), ref_weights,
                               **ref.tol(p["dtype"]))
    np.testing.assert_allclose(out, ref_out, **ref.tol(p["dtype"]))


@ref.PROPERTY
@given(ref.attention_problems(with_mask=False), st.sampled_from([None, 1.0, 0.25, 2.0]))
def test_scores_equal_loop_reference(p, scale):
    s = scores(p["q"], p["k"], scale=scale)
    no_v = np.zeros(p["k"].shape[:-1] + (1,))
    _, _, ref_s = ref.attention(p["q"], p["k"], no_v, scale=scale)
    np.testing.assert_allclose(s, ref_s, **ref.tol(p["dtype"]))


@ref.FAST
@given(ref.attention_problems(), st.sampled_from([0.5, 1.0, 3.0]))
def test_explicit_scale_equals_reference(p, scale):
    out, _ = attention(p["q"], p["k"], p["v"], mask=p["mask"], scale=scale)
    ref_out, _, _ = ref.attention(p["q"], p["k"], p["v"], p["mask"], scale=scale)
    np.testing.assert_allclose(out, ref_out, **ref.tol(p["dtype"]))


@ref.PROPERTY
@given(ref.attention_problems())
def test_dtype_is_preserved(p):
    out, weights = attention(p["q"], p["k"], p["v"], mask=p["mask"])
    assert out.dtype == p["dtype"] and weights.dtype == p["dtype"]


# --- the weights -----------------------------------------------------------------------------


@ref.PROPERTY
@given(ref.attention_problems())
def test_weight_rows_sum_to_one_or_are_all_zero(p):
    _, weights = attention(p["q"], p["k"], p["v"], mask=p["mask"])
    allowed = full_mask(p)
    empty = ~allowed.any(axis=-1)
    sums = weights.astype(np.float64).sum(axis=-1)
    atol = 1e-6 if p["dtype"] == np.float32 else 1e-12
    np.testing.assert_allclose(sums[~empty], 1.0, rtol=0, atol=atol)
    assert (weights[empty] == 0).all()
    assert ((weights >= 0) & (weights <= 1)).all()


@ref.PROPERTY
@given(ref.attention_problems())
def test_masked_weights_are_exactly_zero(p):
    out, weights = attention(p["q"], p["k"], p["v"], mask=p["mask"])
    allowed = full_mask(p)
    assert (weights[~allowed] == 0.0).all()
    # a query with nothing allowed gets a zero output, never NaN
    empty = np.broadcast_to(~allowed.any(axis=-1), out.shape[:-1])
    assert (out[empty] == 0.0).all()
    assert np.isfinite(out).all()


def test_masked_score_is_minus_infinity():
    """attention's masked weights are exactly softmax of the scores with MASKED_SCORE filled in,
    and MASKED_SCORE is -inf (so that exp gives exactly 0)."""
    q, k, v = qkv(4, 3)
    mask = np.random.default_rng(SEED).random((4, 4)) < 0.5
    _, weights = attention(q, k, v, mask=mask)
    filled = np.where(mask, scores(q, k), MASKED_SCORE)
    np.testing.assert_allclose(weights, stable_softmax(filled), rtol=1e-14, atol=0)
    np.testing.assert_allclose(weights, ref.attention(q, k, v, mask)[1], rtol=1e-12, atol=1e-14)
    assert MASKED_SCORE == -np.inf


@ref.PROPERTY
@given(ref.attention_problems(square=True, with_mask=False), st.data())
def test_causal_output_i_never_sees_later_tokens(p, data):
    n = p["n_q"]
    mask = np.tri(n, dtype=bool)
    i = data.draw(st.integers(0, n - 1), label="i")
    out, _ = attention(p["q"], p["k"], p["v"], mask=mask)
    g = np.random.default_rng(p["seed"] + 1)
    changed = []
    for x in (p["q"], p["k"], p["v"]):
        y = x.copy()
        y[..., i + 1:, :] = 10 * g.standard_normal(y[..., i + 1:, :].shape)  # new later tokens
        changed.append(y)
    out2, w2 = attention(*changed, mask=mask)
    np.testing.assert_array_equal(out2[..., : i + 1, :], out[..., : i + 1, :])
    assert (w2[..., : i + 1, i + 1:] == 0).all()


def test_causal_change_actually_changes_later_outputs():
    """The causal test above can fail: without the mask, later tokens do change output i."""
    q, k, v = qkv(5, 3)
    v2 = v.copy()
    v2[3:] += 1.0
    assert not np.array_equal(attention(q, k, v)[0][0], attention(q, k, v2)[0][0])


# --- worked, hand-checkable cases ------------------------------------------------------------


def test_equal_scores_give_the_mean_of_the_values():
    q = np.zeros((3, 2))
    k = np.random.default_rng(SEED).standard_normal((4, 2))
    v = np.random.default_rng(SEED + 1).standard_normal((4, 5))
    out, weights = attention(q, k, v)
    np.testing.assert_allclose(weights, 0.25, rtol=0, atol=1e-15)
    np.testing.assert_allclose(out, np.broadcast_to(v.mean(axis=0), (3, 5)), rtol=1e-13)


def test_log3_scale_gives_three_to_one_weights():
    eye = np.eye(2)
    v = np.array([[1.0, 2.0], [3.0, 4.0]])
    out, weights = attention(eye, eye, v, scale=np.log(3.0))
    np.testing.assert_allclose(weights, [[0.75, 0.25], [0.25, 0.75]], rtol=1e-14)
    np.testing.assert_allclose(out, [[1.5, 2.5], [2.5, 3.5]], rtol=1e-14)


def test_default_scale_is_one_over_sqrt_dk():
    q, k, _ = qkv(4, 9)
    np.testing.assert_allclose(scores(q, k), scores(q, k, scale=1.0) / 3.0, rtol=1e-14)


def test_list_and_integer_input_work_in_float64():
    out, weights = attention([[1, 0], [0, 1]], [[1, 0], [0, 1]], [[1, 2], [3, 4]])
    assert out.dtype == weights.dtype == np.float64
    ref_out, _, _ = ref.attention(np.eye(2), np.eye(2), [[1, 2], [3, 4]])
    np.testing.assert_allclose(out, ref_out, rtol=1e-13)


def test_inputs_are_not_modified():
    q, k, v = qkv(4, 3)
    copies = [x.copy() for x in (q, k, v)]
    attention(q, k, v, mask=np.tri(4, dtype=bool))
    for x, c in zip((q, k, v), copies):
        np.testing.assert_array_equal(x, c)


def test_a_batched_call_equals_one_call_per_batch_element():
    q, k, v = qkv(5, 3, batch=(2, 3))
    mask = np.random.default_rng(SEED).random((3, 5, 5)) < 0.7
    out, weights = attention(q, k, v, mask=mask)
    for b in range(2):
        for c in range(3):
            o, w = attention(q[b, c], k[b, c], v[b, c], mask=mask[c])
            np.testing.assert_allclose(out[b, c], o, rtol=1e-13, atol=1e-14)
            np.testing.assert_allclose(weights[b, c], w, rtol=1e-13, atol=1e-14)


# --- bad input -------------------------------------------------------------------------------

Q, K, V = qkv(3, 2)


def with_value(x, value):
    y = x.copy()
    y[1, 0] = value
    return y


def _bad_finite_cases():
    cases = []
    for name in ("q", "k", "v"):
        for value, shown in ((np.nan, "nan"), (np.inf, "inf"), (-np.inf, "-inf")):
            args = {"q": Q, "k": K, "v": V}
            args[name] = with_value(args[name], value)
            cases.append(pytest.param(
                lambda a=args: attention(**a), ValueError,
                rf"^{name} must hold finite values, got {shown} at index \(1, 0\)",
                id=f"{name}-{shown}"))
    return cases


BAD_INPUT = [
    pytest.param(lambda: attention(Q, np.ones((3, 4)), V), ValueError,
                 r"^q and k must have the same last dimension d_k .*"
                 r"got q of shape \(3, 2\) and k of shape \(3, 4\)", id="qk-last-dim"),
    pytest.param(lambda: scores(Q, np.ones((3, 4))), ValueError,
                 r"^q and k must have the same last dimension d_k .*"
                 r"got q of shape \(3, 2\) and k of shape \(3, 4\)", id="scores-qk-last-dim"),
    pytest.param(lambda: attention(Q, K, np.ones((4, 2))), ValueError,
                 r"^k and v must have the same number of positions n_k .*"
                 r"got k of shape \(3, 2\) and v of shape \(4, 2\)", id="kv-length"),
    pytest.param(lambda: attention(Q, K, V, mask=np.ones((3, 3), dtype=int)), TypeError,
                 r"^mask must be a boolean array \(True where a query may attend\), got dtype int",
                 id="mask-not-bool"),
    pytest.param(lambda: attention(Q, K, V, mask=np.ones((3, 3))), TypeError,
                 r"^mask must be a boolean array .*got dtype float64", id="mask-float"),
    pytest.param(lambda: attention(Q, K, V, mask=np.ones((2, 2), dtype=bool)), ValueError,
                 r"^mask of shape \(2, 2\) is not broadcastable to the scores' shape \(3, 3\)",
                 id="mask-not-broadcastable"),
    pytest.param(lambda: attention(np.ones((2, 3, 2)), np.ones((4, 3, 2)), np.ones((4, 3, 2))),
                 ValueError, r"^the leading \(batch\) dimensions must broadcast .*"
                 r"got q \(2, 3, 2\), k \(4, 3, 2\)", id="batch-not-broadcastable"),
    pytest.param(lambda: attention(np.ones(2), K, V), ValueError,
                 r"^q must be a matrix with shape \(\.\.\., n, d\) \(rank >= 2\), "
                 r"got shape \(2,\) \(rank 1\)", id="q-rank-1"),
    pytest.param(lambda: attention(Q, np.ones(2), V), ValueError,
                 r"^k must be a matrix .*\(rank >= 2\), got shape \(2,\) \(rank 1\)",
                 id="k-rank-1"),
    pytest.param(lambda: attention(Q, K, 1.0), ValueError,
                 r"^v must be a matrix .*\(rank >= 2\), got shape \(\) \(rank 0\)", id="v-rank-0"),
    pytest.param(lambda: scores(np.ones(2), K), ValueError,
                 r"^q must be a matrix .*\(rank >= 2\), got shape \(2,\) \(rank 1\)",
                 id="scores-q-rank-1"),
    pytest.param(lambda: attention("abc", K, V), TypeError,
                 r"^q must be an array of numbers, got str", id="q-string"),
    pytest.param(lambda: attention(Q, K, None), TypeError,
                 r"^v must be an array of numbers, got NoneType", id="v-none"),
    pytest.param(lambda: attention(Q.astype(complex), K, V), TypeError,
                 r"^q must hold real numbers, got dtype complex128", id="q-complex"),
    pytest.param(lambda: attention(Q, K, V, scale=0.0), ValueError,
                 r"^scale must be a positive finite number, got 0\.0", id="scale-zero"),
    pytest.param(lambda: attention(Q, K, V, scale="big"), TypeError,
                 r"^scale must be a positive real number or None, got 'big'", id="scale-str"),
    *_bad_finite_cases(),
    # Empty sequences or an empty feature dimension are bad input too; today they fail
    # deep inside numpy (an empty max) or silently give NaN (1/sqrt(0) = inf scale).
    pytest.param(lambda: attention(Q, np.ones((0, 2)), np.ones((0, 2))), ValueError,
                 r"^k .*(at least one|non-empty|empty|>= 1).*got shape \(0, 2\)", id="k-empty"),
    pytest.param(lambda: attention(np.ones((3, 0)), np.ones((3, 0)), V), ValueError,
                 r"^q .*(at least one|non-empty|empty|>= 1).*got shape \(3, 0\)", id="dk-zero"),
]


@pytest.mark.parametrize(("call", "exc_type", "pattern"), BAD_INPUT)
def test_bad_input_gets_a_clear_error(call, exc_type, pattern):
    ref.assert_clear_error(call, exc_type, pattern)


def test_a_float_mask_of_zeros_and_ones_is_refused_with_a_hint():
    """A float 0/1 mask is refused (no silent truthiness), and the message says how to fix it."""
    with pytest.raises(TypeError, match=r"m != 0"):
        attention(Q, K, V, mask=np.tri(3))


@pytest.mark.parametrize("dtype, big", [(np.float32, 1e20), (np.float64, 1e200)])
def test_overflowing_scores_are_refused_not_nan(dtype, big):
    """Finite inputs whose dot products overflow must not give NaN silently.

    Today q = k = 1e20 in float32 gives inf scores, and stable_softmax then shifts an
    all-inf row by 0 (its "all -inf" branch also catches +inf): inf / inf = NaN output.
    """
    q = k = np.full((2, 2), big, dtype=dtype)
    v = np.ones((2, 2), dtype=dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            out, weights = attention(q, k, v)
        except ValueError as exc:
            assert re.search(r"overflow|too large|finite", str(exc)), str(exc)
            return
    assert np.isfinite(out).all() and np.isfinite(weights).all(), (out, weights)


# --- scores that overflow to -inf are an error, not a masked row ----------------------------

#: (q, k, v, scale) whose scores all overflow to -inf in a row that may attend to every key.
#: The true answer of the first is weights [0.5, 0.5] and output 2.0.
NEG_OVERFLOW = [
    pytest.param([[1e200]], [[-1e200], [-1e200]], [[1.0], [3.0]], 1.0, id="1e200"),
    pytest.param([[1.0, 2.0]], [[-1e300, 0.0], [-3e300, 1.0]], [[1.0], [3.0]], 1e10,
                 id="large-scale"),
    pytest.param(np.float32([[1e20]]), np.float32([[-1e20], [-1e20]]), np.float32([[1.0], [3.0]]),
                 None, id="float32-1e20"),
]


@pytest.mark.parametrize(("q", "k", "v", "scale"), NEG_OVERFLOW)
def test_scores_overflowing_to_minus_inf_are_refused(q, k, v, scale):
    """Today they give all-zero weights and a zero output, as if the row were fully masked."""
    ref.assert_clear_error(lambda: attention(q, k, v, scale=scale), ValueError,
                           r"overflowed to -inf")
    ref.assert_clear_error(lambda: scores(q, k, scale=scale), ValueError, r"overflowed")


def test_only_the_mask_makes_a_row_empty():
    """A fully masked row is zeros; an allowed row whose scores overflow to -inf raises."""
    q, k, v = [[1.0], [1e200]], [[-1e200], [-1e200]], [[1.0], [3.0]]
    out, weights = ref.assert_no_warnings(
        lambda: attention(q, k, v, mask=[[True, True], [False, False]], scale=1.0))
    assert weights[1].tolist() == [0.0, 0.0] and out[1].tolist() == [0.0]
    np.testing.assert_allclose(weights[0], [0.5, 0.5], rtol=1e-15)
    ref.assert_clear_error(
        lambda: attention(q, k, v, mask=[[True, True], [True, False]], scale=1.0), ValueError,
        r"overflowed to -inf")


def test_one_score_overflowing_to_minus_inf_beside_a_finite_one_gets_weight_zero():
    """Its true weight is exp(-1e400), 0 in every float dtype: no error, and no warning."""
    out, weights = ref.assert_no_warnings(
        lambda: attention([[1e200]], [[-1e200], [1.0]], [[1.0], [3.0]], scale=1.0))
    assert weights.tolist() == [[0.0, 1.0]] and out.tolist() == [[3.0]]


def test_a_scale_that_overflows_the_queries_is_refused():
    ref.assert_clear_error(lambda: attention([[1e300]], [[1.0], [2.0]], [[1.0], [3.0]],
                                             scale=1e10), ValueError, r"q \* scale.*overflowed")


# --- an empty batch --------------------------------------------------------------------------


@pytest.mark.parametrize("batch", [(0,), (2, 0), (0, 3)])
def test_an_empty_batch_gives_empty_results(batch):
    """Like flash_attention and multi_head_attention; today a ZeroDivisionError."""
    q, k, v = (np.zeros((*batch, 4, 2)) for _ in range(3))
    out, weights = attention(q, k, v)
    assert out.shape == (*batch, 4, 2) and weights.shape == (*batch, 4, 4)
    out, weights = attention(q, k, np.zeros((*batch, 4, 5)), mask=np.tri(4, dtype=bool))
    assert out.shape == (*batch, 4, 5) and weights.shape == (*batch, 4, 4)
    assert flash_attention(q, k, v).shape == out.shape[:-1] + (2,)
    x = np.zeros((*batch, 4, 2))
    mha_out, mha_w = multi_head_attention(x, *np.eye(2)[None].repeat(4, 0), h=1)
    assert mha_out.shape == (*batch, 4, 2) and mha_w.shape == (*batch, 1, 4, 4)


# --- several row blocks ------------------------------------------------------------------------


def _row_block_sizes(shape, itemsize=8):
    return [r.stop - r.start for r in attention_module._row_blocks(shape, itemsize)]


@ref.PROPERTY
@given(ref.attention_problems(max_n=7), st.sampled_from([1, 2]))
def test_attention_equals_loop_reference_with_tiny_row_blocks(p, rows_per_block):
    """The reference comparison with the row blocks forced down to 1 or 2 query rows each."""
    out0, w0 = attention(p["q"], p["k"], p["v"], mask=p["mask"])  # to learn the weights' shape
    row_bytes = int(np.prod(w0.shape[:-2])) * w0.shape[-1] * w0.itemsize
    with mock.patch.object(attention_module, "BLOCK_BYTES", rows_per_block * row_bytes):
        assert set(_row_block_sizes(w0.shape, w0.itemsize)[:-1]) <= {rows_per_block}
        out, weights = attention(p["q"], p["k"], p["v"], mask=p["mask"])
    ref_out, ref_weights, _ = ref.attention(p["q"], p["k"], p["v"], p["mask"])
    np.testing.assert_allclose(np.broadcast_to(weights, ref_weights.shape), ref_weights,
                               **ref.tol(p["dtype"]))
    np.testing.assert_allclose(out, ref_out, **ref.tol(p["dtype"]))


def test_a_problem_spanning_several_row_blocks_by_default_equals_the_reference():
    """n = 1100 float64 weights take 9.7 MB: three blocks of BLOCK_BYTES (4 MiB) by default.

    Query rows are independent, so the loop reference is run on the rows either side of
    every block boundary (and the first and last); every row must be a proper distribution.
    """
    n = 1100
    q, k, v = qkv(n, 3, seed=SEED + 5)
    mask = np.random.default_rng(SEED).random((n, n)) < 0.8
    sizes = _row_block_sizes((n, n))
    assert len(sizes) >= 3, sizes
    out, weights = attention(q, k, v, mask=mask)
    bounds = np.cumsum(sizes)[:-1]
    rows = sorted({0, n - 1, *bounds, *(bounds - 1), *(bounds + 1)})
    ref_out, ref_weights, _ = ref.attention(q[rows], k, v, mask[rows])
    np.testing.assert_allclose(weights[rows], ref_weights, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out[rows], ref_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    assert (weights[~mask] == 0).all()
