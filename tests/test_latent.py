"""Multi-head latent attention: the explicit, absorbed and decoded forms against a float64
loop that rebuilds every key and value, and the cache's size against its formula."""

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from attn_core.cost_beyond import mla_cache_bytes
from attn_core.latent import (
    init_mla,
    latent_kv,
    mla_attention,
    mla_attention_absorbed,
    mla_decode_sequence,
)
from attn_core.masks import causal_mask

import reference as ref
from tolerances import assert_rounding_close


def rotate(x, pos, base=10000.0):
    """RoPE on adjacent pairs (2c, 2c+1), angle pos * base**(-2c/d), written out."""
    out = list(x)
    d = len(x)
    for c in range(d // 2):
        a = pos * base ** (-2 * c / d)
        out[2 * c] = x[2 * c] * math.cos(a) - x[2 * c + 1] * math.sin(a)
        out[2 * c + 1] = x[2 * c] * math.sin(a) + x[2 * c + 1] * math.cos(a)
    return out


def loop_mla(x, w, causal):
    """DeepSeek-V2's equations (section 2.1), per token and head, in float64 (2-D x)."""
    x = np.asarray(x, np.float64)
    W = {k: np.asarray(getattr(w, k), np.float64) for k in
         ("w_dkv", "w_uk", "w_uv", "w_q", "w_qr", "w_kr", "w_o")}
    h, d_h, d_r = w.h, w.d_head, w.d_rope
    n = len(x)
    c = [x[t] @ W["w_dkv"] for t in range(n)]
    k_r = [rotate(list(x[t] @ W["w_kr"]), t) for t in range(n)]
    heads_out = np.zeros((n, h * d_h))
    for i in range(h):
        cols = slice(i * d_h, (i + 1) * d_h)
        for t in range(n):
            q_c = x[t] @ W["w_q"][:, cols]
            q_r = rotate(list(x[t] @ W["w_qr"][:, i * d_r:(i + 1) * d_r]), t)
            keys = range(t + 1) if causal else range(n)
            s = [(q_c @ (c[j] @ W["w_uk"][:, cols]) + np.dot(q_r, k_r[j])) / math.sqrt(d_h + d_r)
                 for j in keys]
            top = max(s)
            e = [math.exp(v - top) for v in s]
            heads_out[t, cols] = sum(ej / sum(e) * (c[j] @ W["w_uv"][:, cols])
                                     for ej, j in zip(e, keys))
    return heads_out @ W["w_o"]


@st.composite
def mla_problems(draw):
    h = draw(st.integers(1, 3))
    d_h, d_c = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    d_r = 2 * draw(st.integers(1, 2))
    d_model = draw(st.integers(2, 8))
    n = draw(st.integers(1, 6))
    dtype = draw(st.sampled_from(ref.DTYPES))
    g = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    w = init_mla(d_model, h, d_h, d_c, d_r, g, dtype=dtype)
    batch = draw(ref.batch_shapes(max_dims=1))
    x = g.standard_normal((*batch, n, d_model)).astype(dtype)
    return x, w


@ref.PROPERTY
@given(mla_problems(), st.booleans())
def test_explicit_absorbed_and_decoded_equal_the_loop(problem, causal):
    x, w = problem
    n, d_model = x.shape[-2:]
    mask = causal_mask(n) if causal else None
    want = np.stack([loop_mla(xb, w, causal) for xb in x.reshape(-1, n, d_model)])
    want = want.reshape(x.shape)
    explicit, weights = mla_attention(x, w, mask=mask)
    absorbed, weights_abs = mla_attention_absorbed(x, w, mask=mask)
    forms = [explicit, absorbed]
    if causal:
        decoded, cache = mla_decode_sequence(x, w)
        forms.append(decoded)
        assert cache.values.shape == (*x.shape[:-1], w.d_c)  # the latents
        assert cache.keys.shape == (*x.shape[:-1], w.d_rope)  # the shared RoPE keys
    # longest sums: d_model (projections), d_c (up-projection or folded query), n (weights
    # times values), h * d_h (output); three products deep
    inner = max(d_model, w.d_c, n, w.h * w.d_head, w.d_head + w.d_rope)
    for got in forms:
        assert got.dtype == x.dtype
        assert_rounding_close(got, want.astype(x.dtype), inner, depth=4)
    np.testing.assert_allclose(weights, weights_abs, **ref.tol(x.dtype))


def test_float64_absorbed_equals_explicit_to_1e_12():
    g = np.random.default_rng(34)
    w = init_mla(32, 4, 8, 12, 4, g)
    x = g.standard_normal((2, 20, 32))
    a, _ = mla_attention(x, w, mask=causal_mask(20))
    b, _ = mla_attention_absorbed(x, w, mask=causal_mask(20))
    c, cache = mla_decode_sequence(x, w)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a, c, rtol=0, atol=1e-12)
    c_all, k_r = latent_kv(x, w)
    np.testing.assert_allclose(cache.values, c_all, rtol=0, atol=1e-13)  # BLAS blocks by size
    np.testing.assert_allclose(cache.keys, k_r, rtol=0, atol=1e-13)
    assert cache.nbytes == 2 * 20 * (12 + 4) * 8 == mla_cache_bytes(20, 1, 12, 4, "float64",
                                                                      batch=2)


def test_rope_key_makes_scores_depend_on_offsets_only():
    g = np.random.default_rng(1)
    w = init_mla(8, 1, 2, 3, 2, g)
    x = np.tile(g.standard_normal((1, 8)), (6, 1))  # the same token six times
    _, weights = mla_attention(x, w)
    logits = np.log(weights[0])  # scores, each row shifted by its own constant
    for off in range(1, 4):  # the score at offset i - j = off, measured from the diagonal's
        d = [logits[i, i - off] - logits[i, i] for i in range(off, 6)]
        np.testing.assert_allclose(d, d[0], rtol=0, atol=1e-12)
    assert np.ptp(logits[5]) > 1e-3  # and the offsets do change it

def test_bad_input_is_named():
    w = init_mla(8, 2, 2, 3, 2, np.random.default_rng(0))
    ref.assert_clear_error(lambda: mla_attention(np.ones((3, 5)), w), ValueError, "d_model")
    ref.assert_clear_error(lambda: mla_attention(np.ones((3, 8)), "w"), TypeError, "MLAWeights")
    ref.assert_clear_error(lambda: init_mla(8, 2, 2, 3, 3, np.random.default_rng(0)),
                           ValueError, "d_rope")


def test_init_mla_refuses_a_dtype_that_would_round_every_weight_to_zero():
    import pytest
    with pytest.raises(ValueError, match="dtype"):
        init_mla(16, 4, 4, 6, 2, np.random.default_rng(0), dtype="int32")


def test_mla_weights_of_mismatched_widths_are_refused_by_name():
    import dataclasses

    import pytest
    w = init_mla(16, 4, 4, 6, 2, np.random.default_rng(0))
    for name, shape in (("w_uv", (5, 16)), ("w_uk", (6, 15)), ("w_o", (16, 15)),
                        ("w_qr", (16, 6)), ("w_q", (15, 16))):
        with pytest.raises(ValueError, match=name):
            dataclasses.replace(w, **{name: np.zeros(shape)})
    with pytest.raises(ValueError, match="w_kr"):
        dataclasses.replace(w, w_kr=np.zeros((16, 3)), w_qr=np.zeros((16, 12)))
