"""The backward passes against torch.autograd, to rounding in float32 and in float64.

Tolerances from the error model of ``tests/tolerances.py`` (``c L sqrt(K) u (|theirs| + s)``,
``K`` the longest inner dimension, ``L`` the chained products: the backward of attention
recomputes the forward's two products and adds three of its own).

torch is optional: every test takes the ``requires_torch`` fixture of tests/conftest.py, so
without torch it is skipped with the reason, and under CI=true a missing torch fails it.
"""

import numpy as np
import pytest

from attn_core import attention_backward, multi_head_attention_backward, softmax_backward

from tolerances import assert_rounding_close

SHAPES = [((), 5, 5, 4, 4), ((3,), 6, 4, 8, 5), ((2, 2), 4, 4, 16, 3)]


def leaf(torch, x):
    return torch.from_numpy(np.ascontiguousarray(x)).requires_grad_(True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_backward_matches_autograd(requires_torch, dtype):
    torch = requires_torch
    g = np.random.default_rng(0)
    x, up = g.standard_normal((2, 3, 7)).astype(dtype), g.standard_normal((2, 3, 7)).astype(dtype)
    tx = leaf(torch, x)
    p = torch.softmax(tx, dim=-1)
    p.backward(torch.from_numpy(up))
    ours = softmax_backward(p.detach().numpy(), up)
    assert ours.dtype == dtype
    assert_rounding_close(ours, tx.grad.numpy(), inner=7, depth=2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize(("batch", "n_q", "n_k", "d_k", "d_v"), SHAPES)
def test_attention_backward_matches_autograd(requires_torch, batch, n_q, n_k, d_k, d_v,
                                             masked, dtype):
    torch = requires_torch
    g = np.random.default_rng(n_q * 100 + d_k)
    q = g.standard_normal((*batch, n_q, d_k)).astype(dtype)
    k = g.standard_normal((*batch, n_k, d_k)).astype(dtype)
    v = g.standard_normal((*batch, n_k, d_v)).astype(dtype)
    up = g.standard_normal((*batch, n_q, d_v)).astype(dtype)
    mask = None
    if masked:  # every query keeps at least key 0 (torch gives NaN for an empty row)
        mask = g.random((n_q, n_k)) < 0.5
        mask[:, 0] = True
    tq, tk, tv = leaf(torch, q), leaf(torch, k), leaf(torch, v)
    out = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=None if mask is None else torch.from_numpy(mask))
    out.backward(torch.from_numpy(up))
    ours = attention_backward(q, k, v, up, mask=mask)
    for mine, theirs in zip(ours, (tq.grad, tk.grad, tv.grad)):
        assert mine.dtype == dtype
        assert_rounding_close(mine, theirs.numpy(), inner=max(n_q, n_k, d_k, d_v), depth=5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_multi_head_attention_backward_matches_autograd(requires_torch, dtype):
    torch = requires_torch
    g = np.random.default_rng(7)
    n, d_model, h, d_out = 5, 8, 2, 6
    arrays = {"x": g.standard_normal((3, n, d_model)),
              "w_q": g.standard_normal((d_model, 8)) / np.sqrt(d_model),
              "w_k": g.standard_normal((d_model, 8)) / np.sqrt(d_model),
              "w_v": g.standard_normal((d_model, 4)) / np.sqrt(d_model),
              "w_o": g.standard_normal((4, d_out)) / 2,
              "b_q": g.standard_normal(8), "b_k": g.standard_normal(8),
              "b_v": g.standard_normal(4), "b_o": g.standard_normal(d_out)}
    arrays = {key: val.astype(dtype) for key, val in arrays.items()}
    up = g.standard_normal((3, n, d_out)).astype(dtype)
    mask = np.tri(n, dtype=bool)
    t = {key: leaf(torch, val) for key, val in arrays.items()}

    def heads(z):  # (b, n, h * d) -> (b, h, n, d)
        return z.reshape(3, n, h, -1).transpose(1, 2)

    q, k, v = (heads(t["x"] @ t[f"w_{c}"] + t[f"b_{c}"]) for c in "qkv")
    y = torch.nn.functional.scaled_dot_product_attention(q, k, v,
                                                         attn_mask=torch.from_numpy(mask))
    out = y.transpose(1, 2).reshape(3, n, -1) @ t["w_o"] + t["b_o"]
    out.backward(torch.from_numpy(up))
    biases = tuple(arrays[f"b_{c}"] for c in "qkvo")
    ours = multi_head_attention_backward(arrays["x"], arrays["w_q"], arrays["w_k"],
                                         arrays["w_v"], arrays["w_o"], h, up, mask=mask,
                                         biases=biases)
    # the key bias's gradient is 0 in exact arithmetic (a softmax ignores a constant added to
    # a row of scores): both sides give rounding noise, held to the other gradients' scale
    scale = float(np.sqrt(np.mean(np.concatenate([val.grad.numpy().ravel() ** 2
                                                  for val in t.values()]))))
    for key, val in t.items():
        assert ours[key].dtype == dtype
        assert_rounding_close(ours[key], val.grad.numpy(), inner=3 * n * d_model, depth=7,
                              err_msg=key, scale=scale if key == "b_k" else None)
