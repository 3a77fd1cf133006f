"""split_heads, merge_heads and multi_head_attention against loops over heads."""

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_core import attention, merge_heads, multi_head_attention, split_heads

import reference as ref

SEED = 20240604


@st.composite
def mha_problems(draw):
    """x (batch..., n, d_model), weights, h, optional biases and an optional mask."""
    batch = draw(ref.batch_shapes())
    n = draw(st.integers(1, 5))
    h = draw(st.integers(1, 3))
    d_k, d_v = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    d_model, d_out = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(ref.DTYPES))
    g = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def normal(*shape):
        return g.standard_normal(shape).astype(dtype)

    x = normal(*batch, n, d_model)
    def weight(rows, cols):  # scaled so that activations stay near 1
        return (g.standard_normal((rows, cols)) / np.sqrt(rows)).astype(dtype)

    w_q, w_k = weight(d_model, h * d_k), weight(d_model, h * d_k)
    w_v, w_o = weight(d_model, h * d_v), weight(h * d_v, d_out)
    biases = None
    if draw(st.booleans()):
        biases = tuple(None if draw(st.booleans()) else normal(width)
                       for width in (h * d_k, h * d_k, h * d_v, d_out))
    kind = draw(st.sampled_from(["none", "causal", "per-head", "batched"]))
    mask = None
    if kind == "causal":
        mask = np.tri(n, dtype=bool)
    elif kind == "per-head":
        mask = g.random((h, n, n)) < 0.6
    elif kind == "batched":
        heads = draw(st.sampled_from([1, h]))
        mask = g.random(draw(ref.broadcast_variant(batch)) + (heads, n, n)) < 0.6
    return {"x": x, "w": (w_q, w_k, w_v, w_o), "h": h, "biases": biases, "mask": mask,
            "dtype": np.dtype(dtype), "n": n, "d_k": d_k, "d_v": d_v, "batch": batch}


def run(p, **changes):
    p = {**p, **changes}
    return multi_head_attention(p["x"], *p["w"], p["h"], mask=p["mask"], biases=p["biases"])


def mha_tol(dtype):
    # a chain of three matmuls and a softmax: float32 gets a little more room
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == np.float32 else ref.tol(dtype)


# --- against the references --------------------------------------------------------------


@ref.PROPERTY
@given(mha_problems())
def test_multi_head_attention_equals_loop_reference(p):
    out, weights = run(p)
    ref_out, ref_weights = ref.multi_head_attention(p["x"], *p["w"], p["h"], p["mask"], p["biases"])
    assert out.shape == ref_out.shape
    np.testing.assert_allclose(np.broadcast_to(weights, ref_weights.shape), ref_weights,
                               **mha_tol(p["dtype"]))
    np.testing.assert_allclose(out, ref_out, **mha_tol(p["dtype"]))


@ref.PROPERTY
@given(mha_problems())
def test_multi_head_attention_equals_a_loop_over_heads_of_attention(p):
    """Each head is attention() on its own column slices; heads concatenated, then w_o."""
    out, weights = run(p)
    w_q, w_k, w_v, w_o = p["w"]
    b_q, b_k, b_v, b_o = p["biases"] or (None,) * 4
    h, d_k, d_v, x = p["h"], p["d_k"], p["d_v"], p["x"]
    head_outs = []
    for i in range(h):
        qs, vs = slice(i * d_k, (i + 1) * d_k), slice(i * d_v, (i + 1) * d_v)
        q_i, k_i, v_i = x @ w_q[:, qs], x @ w_k[:, qs], x @ w_v[:, vs]
        q_i = q_i if b_q is None else q_i + b_q[qs]
        k_i = k_i if b_k is None else k_i + b_k[qs]
        v_i = v_i if b_v is None else v_i + b_v[vs]
        m_i = m = p["mask"]
        if m is not None and m.ndim >= 3:  # (..., h or 1, n, n): this head's slice
            m_i = m[..., i if m.shape[-3] > 1 else 0, :, :]
        o_i, w_i = attention(q_i, k_i, v_i, mask=m_i)
        np.testing.assert_allclose(weights[..., i, :, :], w_i, **mha_tol(p["dtype"]))
        head_outs.append(o_i)
    concat = np.concatenate(head_outs, axis=-1)
    expected = concat @ w_o if b_o is None else concat @ w_o + b_o
    np.testing.assert_allclose(out, expected, **mha_tol(p["dtype"]))


@ref.PROPERTY
@given(mha_problems())
def test_weights_shape_rows_and_dtype(p):
    out, weights = run(p)
    assert out.dtype == weights.dtype == p["dtype"]
    assert weights.shape[-3:] == (p["h"], p["n"], p["n"])
    assert out.shape[-2:] == (p["n"], p["w"][3].shape[1])
    allowed = np.ones(weights.shape, dtype=bool) if p["mask"] is None else \
        np.broadcast_to(p["mask"], weights.shape)
    assert (weights[~allowed] == 0).all()
    sums = weights.astype(np.float64).sum(axis=-1)
    has_key = allowed.any(axis=-1)
    np.testing.assert_allclose(sums[has_key], 1.0, rtol=0, atol=1e-5)
    assert (sums[~has_key] == 0).all()


@ref.FAST
@given(mha_problems(), st.data())
def test_causal_output_i_never_sees_later_tokens(p, data):
    n = p["n"]
    i = data.draw(st.integers(0, n - 1))
    mask = np.tri(n, dtype=bool)
    out, _ = run(p, mask=mask)
    x2 = p["x"].copy()
    x2[..., i + 1:, :] = 7.0
    out2, _ = run(p, mask=mask, x=x2)
    np.testing.assert_array_equal(out2[..., : i + 1, :], out[..., : i + 1, :])


# --- one big projection = h small ones; split and merge ------------------------------------


@ref.PROPERTY
@given(mha_problems())
def test_one_big_projection_split_equals_h_per_head_projections(p):
    x, (w_q, _, w_v, _), h, d_k, d_v = p["x"], p["w"], p["h"], p["d_k"], p["d_v"]
    for w, width in ((w_q, d_k), (w_v, d_v)):
        heads = split_heads(x @ w, h)  # (..., h, n, width)
        assert heads.shape == x.shape[:-2] + (h, p["n"], width)
        for i in range(h):
            np.testing.assert_allclose(heads[..., i, :, :], x @ w[:, i * width:(i + 1) * width],
                                       **mha_tol(p["dtype"]))


@ref.PROPERTY
@given(ref.batch_shapes(), st.integers(1, 5), st.integers(1, 4), st.integers(1, 4),
       st.sampled_from(ref.DTYPES))
def test_split_heads_by_its_definition_and_merge_is_its_inverse(batch, n, h, d_k, dtype):
    x = np.random.default_rng(SEED).standard_normal((*batch, n, h * d_k)).astype(dtype)
    heads = split_heads(x, h)
    assert heads.shape == (*batch, h, n, d_k) and heads.dtype == dtype
    for idx in np.ndindex(*batch, h, n, d_k):
        *b, i, r, c = idx
        assert heads[idx] == x[(*b, r, i * d_k + c)]
    np.testing.assert_array_equal(merge_heads(heads), x)
    y = np.random.default_rng(SEED + 1).standard_normal((*batch, h, n, d_k)).astype(dtype)
    np.testing.assert_array_equal(split_heads(merge_heads(y), h), y)


def test_biases_as_a_dict_equal_biases_as_a_tuple():
    g = np.random.default_rng(SEED)
    x = g.standard_normal((4, 6))
    w = [g.standard_normal((6, 6)) for _ in range(4)]
    b_q, b_o = g.standard_normal(6), g.standard_normal(6)
    a = multi_head_attention(x, *w, h=2, biases=(b_q, None, None, b_o))
    b = multi_head_attention(x, *w, h=2, biases={"q": b_q, "o": b_o})
    np.testing.assert_array_equal(a[0], b[0])


def test_one_head_is_plain_attention_then_w_o():
    g = np.random.default_rng(SEED)
    x = g.standard_normal((5, 4))
    w_q, w_k, w_v, w_o = (g.standard_normal((4, 4)) for _ in range(4))
    out, weights = multi_head_attention(x, w_q, w_k, w_v, w_o, h=1)
    o, w = attention(x @ w_q, x @ w_k, x @ w_v)
    np.testing.assert_allclose(weights[0], w, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(out, o @ w_o, rtol=1e-12, atol=1e-12)


# --- bad input -----------------------------------------------------------------------------

X = np.random.default_rng(SEED).standard_normal((3, 8))
W = np.random.default_rng(SEED + 1).standard_normal((8, 8))
X_NAN = X.copy()
X_NAN[2, 5] = np.nan


def mha(x=X, w_q=W, w_k=W, w_v=W, w_o=W, h=2, **kw):
    return multi_head_attention(x, w_q, w_k, w_v, w_o, h, **kw)


BAD_INPUT = [
    pytest.param(lambda: split_heads(X, 3), ValueError,
                 r"^d_model \(the last dimension of x\) = 8 must be divisible by the head count h, "
                 r"got h = 3; head counts that divide 8: \[1, 2, 4, 8\]$",
                 id="split-not-divisible"),
    pytest.param(lambda: split_heads(np.ones((2, 12)), 5), ValueError,
                 r"^d_model .*= 12 must be divisible .*got h = 5; "
                 r"head counts that divide 12: \[1, 2, 3, 4, 6, 12\]$",
                 id="split-not-divisible-12"),
    pytest.param(lambda: mha(h=3), ValueError,
                 r"^the width of w_q and w_k \(h \* d_k\) = 8 "
                 r"must be divisible by the head count h, "
                 r"got h = 3; head counts that divide 8: \[1, 2, 4, 8\]$", id="mha-not-divisible"),
    pytest.param(lambda: mha(w_v=np.ones((8, 6)), w_o=np.ones((6, 8)), h=4), ValueError,
                 r"^the width of w_v \(h \* d_v\) = 6 must be divisible by the head count h, "
                 r"got h = 4; head counts that divide 6: \[1, 2, 3, 6\]$",
                 id="mha-wv-not-divisible"),
    pytest.param(lambda: split_heads(X, 0), ValueError,
                 r"^h must be an integer >= 1, got 0$", id="split-h-zero"),
    pytest.param(lambda: mha(h=0), ValueError,
                 r"^h must be an integer >= 1, got 0$", id="mha-h-zero"),
    pytest.param(lambda: mha(h=-2), ValueError,
                 r"^h must be an integer >= 1, got -2$", id="mha-h-negative"),
    pytest.param(lambda: mha(h=2.0), TypeError,
                 r"^h must be an integer >= 1, got 2\.0$", id="mha-h-float"),
    pytest.param(lambda: split_heads(np.ones(8), 2), ValueError,
                 r"^x must be a matrix with shape \(\.\.\., n, d\) \(rank >= 2\), "
                 r"got shape \(8,\) \(rank 1\)$", id="split-rank-1"),
    pytest.param(lambda: mha(x=np.ones(8)), ValueError,
                 r"^x must be a matrix .*\(rank >= 2\), got shape \(8,\) \(rank 1\)$",
                 id="mha-rank-1"),
    pytest.param(lambda: merge_heads(np.ones((3, 8))), ValueError,
                 r"^x must be an array of rank >= 3 .*got shape \(3, 8\) \(rank 2\)$",
                 id="merge-rank-2"),
    pytest.param(lambda: mha(w_q=np.ones(8)), ValueError,
                 r"^w_q must be a matrix .*got shape \(8,\) \(rank 1\)$", id="wq-rank-1"),
    pytest.param(lambda: mha(w_k=np.ones((6, 8))), ValueError,
                 r"^w_k must have shape \(8, d_out\), got shape \(6, 8\)$", id="wk-rows"),
    pytest.param(lambda: mha(w_o=np.ones((4, 8))), ValueError,
                 r"^w_o must have shape \(8, d_out\), got shape \(4, 8\)$", id="wo-rows"),
    pytest.param(lambda: mha(w_k=np.ones((8, 4))), ValueError,
                 r"^w_q and w_k must have the same shape, got \(8, 8\) and \(8, 4\)$", id="wq-wk"),
    pytest.param(lambda: mha(x=X_NAN), ValueError,
                 r"^x must hold finite values, got nan at index \(2, 5\)", id="x-nan"),
    pytest.param(lambda: mha(w_v=np.where(np.eye(8) > 0, np.inf, W)), ValueError,
                 r"^w_v must hold finite values, got inf at index \(0, 0\)", id="wv-inf"),
    pytest.param(lambda: split_heads(np.full((2, 4), -np.inf), 2), ValueError,
                 r"^x must hold finite values, got -inf at index \(0, 0\)", id="split-neginf"),
    pytest.param(lambda: mha(mask=np.tri(3)), TypeError,
                 r"^mask must be a boolean array .*got dtype float64", id="mask-not-bool"),
    pytest.param(lambda: mha(mask=np.ones((3, 3, 3), dtype=bool)), ValueError,
                 r"^mask of shape \(3, 3, 3\) is not broadcastable "
                 r"to the scores' shape \(2, 3, 3\)",
                 id="mask-not-broadcastable"),
    pytest.param(lambda: mha(biases=(np.ones(4), None, None, None)), ValueError,
                 r"^b_q must have shape \(8,\), got shape \(4,\)$", id="bias-shape"),
    pytest.param(lambda: mha(biases={"z": np.ones(8)}), ValueError,
                 r"^biases keys must be among 'q', 'k', 'v', 'o', got \['z'\]$", id="bias-key"),
    # An empty sequence: today numpy's "zero-size array to reduction operation maximum".
    pytest.param(lambda: mha(x=np.ones((0, 8))), ValueError,
                 r"^x .*(at least one|non-empty|empty|>= 1).*got shape \(0, 8\)", id="x-empty"),
    pytest.param(lambda: mha(biases=(None, None)), ValueError,
                 r"^biases must be \(b_q, b_k, b_v, b_o\), got 2 items$", id="bias-count"),
]


@pytest.mark.parametrize(("call", "exc_type", "pattern"), BAD_INPUT)
def test_bad_input_gets_a_clear_error(call, exc_type, pattern):
    ref.assert_clear_error(call, exc_type, pattern)


def test_the_suggested_head_counts_really_divide():
    """The list in the message is usable advice: each suggestion runs."""
    with pytest.raises(ValueError) as excinfo:
        split_heads(np.ones((2, 18)), 4)
    counts = [int(c) for c in re.search(r"\[([\d, ]+)\]$", str(excinfo.value))[1].split(",")]
    assert counts == [h for h in range(1, 19) if 18 % h == 0]
    for h in counts:
        split_heads(np.ones((2, 18)), h)


# --- overflow: finite in, finite out, or a clear error naming what overflowed ---------------------


def _mha_1d(x, w_q=1.0, w_k=1.0, w_v=1.0, w_o=1.0, **kwargs):
    """multi_head_attention with d_model = 1 and one head: every weight a (1, 1) matrix."""
    x = np.asarray(x, dtype=getattr(x, "dtype", float))[:, None]  # (n, 1)
    return multi_head_attention(x, *(np.full((1, 1), w, dtype=x.dtype)
                                     for w in (w_q, w_k, w_v, w_o)), h=1, **kwargs)


OVERFLOWS = [
    pytest.param(lambda: _mha_1d([1e200, 1.0], w_q=1e200), r"x @ w_q \(the query projection\)",
                 id="query-projection"),
    pytest.param(lambda: _mha_1d([1e200, 1.0], w_k=1e200), r"x @ w_k \(the key projection\)",
                 id="key-projection"),
    pytest.param(lambda: _mha_1d([1e200, 1.0], w_v=1e200), r"x @ w_v \(the value projection\)",
                 id="value-projection"),
    pytest.param(lambda: _mha_1d([1e200, 1.0], w_q=1e-200, w_k=1e-200, w_o=1e200),
                 r"heads @ w_o \(the output projection\)", id="output-projection"),
    pytest.param(lambda: _mha_1d([1e308, 1.0], biases=([1.7e308], None, None, None)),
                 r"x @ w_q \(the query projection\)", id="query-bias"),
    pytest.param(lambda: _mha_1d([1e200, 1e200], w_q=1e100, w_k=1e100),
                 r"scores .*overflowed to inf", id="scores-plus-inf"),
    pytest.param(lambda: _mha_1d([1e100, 1e100], w_q=1e100, w_k=-1e100),
                 r"scores .*overflowed to -inf", id="scores-minus-inf"),
    pytest.param(lambda: _mha_1d(np.float32([1e20, 1e20]), w_k=-1.0),
                 r"scores .*overflowed to -inf in float32", id="float32-scores-minus-inf"),
]


@pytest.mark.parametrize(("call", "pattern"), OVERFLOWS)
def test_overflow_is_a_clear_error_naming_what_overflowed(call, pattern):
    """Today each returns inf or NaN (or a zero row for -inf) silently."""
    ref.assert_clear_error(call, ValueError, pattern)


def test_a_masked_row_is_empty_but_an_overflowed_row_is_an_error():
    mask = np.array([[True, True], [False, False]])
    out, weights = ref.assert_no_warnings(lambda: _mha_1d([1.0, 2.0], mask=mask))
    assert weights[0, 1].tolist() == [0.0, 0.0]
    ref.assert_clear_error(lambda: _mha_1d([1e100, 1e100], w_q=1e100, w_k=-1e100, mask=mask),
                           ValueError, r"overflowed to -inf")


@pytest.mark.parametrize("biases", [5, "abc", 1.5, np.zeros(4)])
def test_biases_of_the_wrong_kind_get_a_clear_error(biases):
    x, w = np.ones((3, 4)), np.eye(4)
    ref.assert_clear_error(lambda: multi_head_attention(x, w, w, w, w, h=2, biases=biases),
                           TypeError, r"^biases must be a tuple \(b_q, b_k, b_v, b_o\) or a dict")


@pytest.mark.parametrize("h", [1, 2])
def test_split_and_merge_return_new_arrays_not_views(h):
    """split_heads documents a copy: writing into its result leaves the input as it was."""
    x = np.arange(12.0).reshape(3, 4)
    heads = split_heads(x, h)
    assert not np.shares_memory(heads, x)
    heads[...] = -1.0
    assert x.tolist() == np.arange(12.0).reshape(3, 4).tolist()
    merged = merge_heads(heads)
    assert not np.shares_memory(merged, heads)


def test_value_mask_zeroes_a_keys_value_in_chosen_heads_and_keeps_the_weights():
    """Notebook 16's control: each zeroed (head, key) takes away exactly weight x value, put
    through that head's slice of w_o; the weights do not move. Written as loops here."""
    g = np.random.default_rng(16)
    n, d, h = 5, 6, 3
    x = g.standard_normal((n, d))
    w_q, w_k, w_v, w_o = g.standard_normal((4, d, d))
    b_v = g.standard_normal(d)
    keep = g.random((h, n)) > 0.4
    out, weights = multi_head_attention(x, w_q, w_k, w_v, w_o, h, biases=(None, None, b_v, None))
    cut, cut_weights = multi_head_attention(x, w_q, w_k, w_v, w_o, h,
                                            biases=(None, None, b_v, None), value_mask=keep)
    np.testing.assert_array_equal(cut_weights, weights)
    ref_out, ref_w = ref.multi_head_attention(x, w_q, w_k, w_v, w_o, h,
                                              biases=(None, None, b_v, None))
    d_v = d // h
    expected = np.array(ref_out, dtype=float)
    for head in range(h):
        cols = slice(head * d_v, (head + 1) * d_v)
        for j in np.flatnonzero(~keep[head]):
            value = [sum(x[j, a] * w_v[a, c] for a in range(d)) + b_v[c]
                     for c in range(cols.start, cols.stop)]
            through = [sum(value[c] * w_o[cols.start + c, o] for c in range(d_v))
                       for o in range(d)]
            for i in range(n):
                expected[i] -= ref_w[head][i][j] * np.array(through)
    np.testing.assert_allclose(cut, expected, rtol=1e-10, atol=1e-10)
    same, _ = multi_head_attention(x, w_q, w_k, w_v, w_o, h, value_mask=np.ones((h, n), bool))
    np.testing.assert_allclose(same, multi_head_attention(x, w_q, w_k, w_v, w_o, h)[0],
                               rtol=0, atol=0)
    with pytest.raises(ValueError, match="value_mask"):
        multi_head_attention(x, w_q, w_k, w_v, w_o, h, value_mask=np.ones((h, n + 1), bool))
    with pytest.raises(ValueError, match="value_mask"):
        multi_head_attention(x, w_q, w_k, w_v, w_o, h, value_mask=np.ones((h, n)))


def test_the_encoder_passes_value_mask_to_each_layer_and_names_a_bad_one():
    from attn_core.model.encoder import _tiny_weights, encoder_forward

    w = _tiny_weights(layers=2)
    ids = [1, 2, 3, 4]
    plain = encoder_forward(w, ids)
    keep = np.ones((2, w.heads, 4), dtype=bool)
    same = encoder_forward(w, ids, value_mask=keep)
    np.testing.assert_array_equal(same.hidden_states, plain.hidden_states)
    keep[1, 0, 0] = False  # layer 2, head 1 reads zeros for key 1: only layer 2 changes
    cut = encoder_forward(w, ids, value_mask=keep)
    np.testing.assert_array_equal(cut.hidden_states[:2], plain.hidden_states[:2])
    np.testing.assert_array_equal(cut.attentions, plain.attentions)
    assert not np.allclose(cut.hidden_states[2], plain.hidden_states[2])
    with pytest.raises(ValueError, match="value_mask"):
        encoder_forward(w, ids, value_mask=np.ones((1, w.heads, 4), dtype=bool))
