"""Grouped-query and multi-query attention (``n_kv_heads``) against multi-head attention
with the key/value heads repeated, forward and backward, float64 and float32; the backward
also against finite differences and (where installed) PyTorch.

The reference for "repeated heads" is built from the weights, not from attn_core's
``repeat_kv``: the key and value projections' columns of head ``j`` are copied into the
slots of query heads ``j*g .. j*g + g - 1``, and the result goes through plain multi-head
attention (itself tested against the loop reference in tests/test_multihead.py).
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_core import multi_head_attention
from attn_core.gradients import multi_head_attention_backward

import reference as ref
from tolerances import assert_rounding_close


def repeat_columns(w, n_kv, groups):
    """(d_model, n_kv * d) -> (d_model, n_kv * groups * d): head j's columns ``groups`` times."""
    d = w.shape[1] // n_kv
    blocks = [w[:, j * d:(j + 1) * d] for j in range(n_kv) for _ in range(groups)]
    return np.concatenate(blocks, axis=1)


def group_sum_columns(g, n_kv, groups):
    """The gradient of :func:`repeat_columns`: sum the copies of each head's columns."""
    d = g.shape[1] // (n_kv * groups)
    return np.concatenate([sum(g[:, (j * groups + r) * d:(j * groups + r + 1) * d]
                               for r in range(groups)) for j in range(n_kv)], axis=1)


@st.composite
def gqa_problems(draw):
    batch = draw(ref.batch_shapes())
    n = draw(st.integers(1, 5))
    n_kv = draw(st.integers(1, 3))
    groups = draw(st.integers(1, 3))
    h = n_kv * groups
    d_k, d_v = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    d_model, d_out = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(ref.DTYPES))
    g = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def weight(rows, cols):
        return (g.standard_normal((rows, cols)) / np.sqrt(rows)).astype(dtype)

    x = g.standard_normal((*batch, n, d_model)).astype(dtype)
    w = (weight(d_model, h * d_k), weight(d_model, n_kv * d_k), weight(d_model, n_kv * d_v),
         weight(h * d_v, d_out))
    biases = None
    if draw(st.booleans()):
        biases = tuple(g.standard_normal(width).astype(dtype)
                       for width in (h * d_k, n_kv * d_k, n_kv * d_v, d_out))
    mask = draw(st.sampled_from([None, "causal", "random"]))
    if mask == "causal":
        mask = np.tri(n, dtype=bool)
    elif mask == "random":
        mask = g.random((h, n, n)) < 0.6
    return {"x": x, "w": w, "h": h, "n_kv": n_kv, "groups": groups, "biases": biases,
            "mask": mask, "dtype": np.dtype(dtype), "inner": max(d_model, n, d_k, h * d_v)}


def repeated(p):
    """The same problem as plain multi-head attention with the key/value heads repeated."""
    w_q, w_k, w_v, w_o = p["w"]
    w_k, w_v = (repeat_columns(w, p["n_kv"], p["groups"]) for w in (w_k, w_v))
    biases = p["biases"]
    if biases is not None:
        b_q, b_k, b_v, b_o = biases
        b_k, b_v = (repeat_columns(b[None, :], p["n_kv"], p["groups"])[0] for b in (b_k, b_v))
        biases = (b_q, b_k, b_v, b_o)
    return (w_q, w_k, w_v, w_o), biases


@ref.PROPERTY
@given(gqa_problems())
def test_grouped_query_attention_equals_multi_head_with_repeated_kv_heads(p):
    out, weights = multi_head_attention(p["x"], *p["w"], p["h"], mask=p["mask"],
                                        biases=p["biases"], n_kv_heads=p["n_kv"])
    ws, bs = repeated(p)
    ref_out, ref_weights = multi_head_attention(p["x"], *ws, p["h"], mask=p["mask"], biases=bs)
    assert out.dtype == p["dtype"] and weights.shape == ref_weights.shape
    assert_rounding_close(weights, ref_weights, p["inner"], depth=2)
    assert_rounding_close(out, ref_out, p["inner"], depth=3)


@ref.PROPERTY
@given(gqa_problems())
def test_grouped_query_backward_equals_the_repeated_heads_backward_summed(p):
    g = np.random.default_rng(1)
    n_out = p["w"][3].shape[1]
    grad_out = g.standard_normal((*p["x"].shape[:-1], n_out)).astype(p["dtype"])
    grads = multi_head_attention_backward(p["x"], *p["w"], p["h"], grad_out, mask=p["mask"],
                                          biases=p["biases"], n_kv_heads=p["n_kv"])
    ws, bs = repeated(p)
    full = multi_head_attention_backward(p["x"], *ws, p["h"], grad_out, mask=p["mask"],
                                         biases=bs)
    # a repeated column's gradient is the sum of its copies' gradients
    expect = dict(full)
    for name in ("w_k", "w_v"):
        expect[name] = group_sum_columns(full[name], p["n_kv"], p["groups"])
    for name in ("b_k", "b_v"):
        expect[name] = group_sum_columns(full[name][None, :], p["n_kv"], p["groups"])[0]
    scale = max(float(np.sqrt(np.mean(np.asarray(v, np.float64) ** 2))) for v in full.values())
    for name, value in expect.items():
        assert grads[name].shape == value.shape, name
        assert_rounding_close(grads[name], value, p["inner"] * p["groups"], depth=4,
                              err_msg=name, scale=scale)


@pytest.mark.parametrize("n_kv", [1, 2])
def test_grouped_query_backward_matches_finite_differences(n_kv):
    g = np.random.default_rng(23)
    h, d_head, d_model, n = 4, 2, 5, 4
    x = g.standard_normal((2, n, d_model))
    arrays = {"x": x, "w_q": g.standard_normal((d_model, h * d_head)) / 2,
              "w_k": g.standard_normal((d_model, n_kv * d_head)) / 2,
              "w_v": g.standard_normal((d_model, n_kv * d_head)) / 2,
              "w_o": g.standard_normal((h * d_head, 3)) / 2}
    biases = tuple(g.standard_normal(a.shape[1]) for a in
                   (arrays["w_q"], arrays["w_k"], arrays["w_v"], arrays["w_o"]))
    up = g.standard_normal((2, n, 3))
    mask = np.tri(n, dtype=bool)

    def loss(**changed):
        a = {**arrays, **changed}
        out, _ = multi_head_attention(a["x"], a["w_q"], a["w_k"], a["w_v"], a["w_o"], h,
                                      mask=mask, biases=biases, n_kv_heads=n_kv)
        return float(np.sum(out * up))

    grads = multi_head_attention_backward(*arrays.values(), h, up, mask=mask, biases=biases,
                                          n_kv_heads=n_kv)
    for name, value in arrays.items():
        numeric = ref.numeric_grad(lambda v, name=name: loss(**{name: v}), value)
        np.testing.assert_allclose(grads[name], numeric, rtol=1e-6, atol=1e-8, err_msg=name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_kv", [1, 2, 4])
def test_grouped_query_attention_matches_torch_enable_gqa(requires_torch, dtype, n_kv):
    torch = requires_torch
    g = np.random.default_rng(7)
    b, h, n, d = 2, 4, 5, 3
    q = g.standard_normal((b, h, n, d)).astype(dtype)
    k, v = g.standard_normal((2, b, n_kv, n, d)).astype(dtype)
    up = g.standard_normal((b, h, n, d)).astype(dtype)
    tq, tk, tv = (torch.from_numpy(a.copy()).requires_grad_(True) for a in (q, k, v))
    t_out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True,
                                                             enable_gqa=True)
    t_out.backward(torch.from_numpy(up))
    # the same through multi_head_attention: x = identity rows picking each position, so
    # that q, k, v are given directly: x (b, n, n) is the identity, w_q holds q's heads
    x = np.broadcast_to(np.eye(n, dtype=dtype), (b, n, n))
    # a per-batch projection is not possible, so run batch by batch
    for i in range(b):
        w_q = np.concatenate(list(q[i]), axis=1)  # (n, h * d): row t is position t's query
        w_k, w_v = (np.concatenate(list(a[i]), axis=1) for a in (k, v))
        w_o = np.eye(h * d, dtype=dtype)
        out, _ = multi_head_attention(x[i], w_q, w_k, w_v, w_o, h, mask=np.tri(n, dtype=bool),
                                      n_kv_heads=n_kv)
        t_heads = t_out[i].detach().numpy()  # (h, n, d)
        assert_rounding_close(out, np.concatenate(list(t_heads), axis=1), max(n, d), depth=2)
        grads = multi_head_attention_backward(x[i], w_q, w_k, w_v, w_o, h,
                                              np.concatenate(list(up[i]), axis=1),
                                              mask=np.tri(n, dtype=bool), n_kv_heads=n_kv)
        for name, t in (("w_q", tq), ("w_k", tk), ("w_v", tv)):
            t_grad = np.concatenate(list(t.grad[i].numpy()), axis=1)
            assert_rounding_close(grads[name], t_grad, max(n, d) * h, depth=3, err_msg=name)


@pytest.mark.parametrize("call, pattern", [
    (lambda x, w: multi_head_attention(x, w, w[:, :4], w[:, :4], w, 4, n_kv_heads=3),
     r"^n_kv_heads must divide the query head count h = 4 .*got n_kv_heads = 3; "
     r"divisors of 4: \[1, 2, 4\]$"),
    (lambda x, w: multi_head_attention(x, w, w, w[:, :4], w, 4, n_kv_heads=2),
     r"^w_k must have width n_kv_heads \* d_k = 2 \* 2 = 4 .*got shape \(8, 8\)$"),
    (lambda x, w: multi_head_attention(x, w, w[:, :4], w[:, :4], w, 4, n_kv_heads=0),
     r"n_kv_heads"),
    (lambda x, w: multi_head_attention_backward(x, w, w[:, :4], w[:, :4], w, 4,
                                                np.ones((3, 8)), n_kv_heads=3),
     r"^n_kv_heads must divide"),
])
def test_bad_kv_head_counts_get_a_clear_error(call, pattern):
    x, w = np.ones((3, 8)), np.ones((8, 8))
    with pytest.raises(ValueError, match=pattern) as excinfo:
        call(x, w)
    ref.assert_raised_by_attn_core(excinfo)


def test_n_kv_heads_equal_to_h_is_multi_head_attention_exactly():
    g = np.random.default_rng(3)
    x = g.standard_normal((4, 6))
    w = g.standard_normal((4, 6, 6))
    a = multi_head_attention(x, *w, 3)
    b = multi_head_attention(x, *w, 3, n_kv_heads=3)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
