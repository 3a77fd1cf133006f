"""Cross-checks against PyTorch: attention vs scaled_dot_product_attention, and
multi_head_attention vs torch.nn.MultiheadAttention with the same weights copied in.

torch is optional. Every test here takes the ``requires_torch`` fixture of
tests/conftest.py (which also marks it ``torch``): without torch the test is skipped with
the reason and the pip command; under CI (``CI=true``) a missing torch fails it instead,
because CI installs torch==2.13.0 and the cross-checks must really run there.

Tolerances. Both sides round differently (BLAS blocking, torch's fused kernels), so they
agree up to rounding: ``tests/tolerances.py`` turns the float32 (or float64) error model
``c L sqrt(K) u (|theirs| + s)`` into the relative and absolute parts of each comparison, with
``K`` the longest inner dimension of the products (``d_k``, ``n_k`` or ``d_model``) and ``L``
the number of chained products (2 for attention: scores, then weights times values; 4 for
multi-head attention: projection, scores, weighted sum, output projection).
"""

import numpy as np
import pytest

from attn_core import attention, causal_mask, multi_head_attention, padding_mask

from tolerances import assert_rounding_close

SEED = 20240608


def to_torch(torch, x):
    return torch.from_numpy(np.ascontiguousarray(x))


def random(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def random_mask(shape, seed):
    """A random boolean mask where every query may attend at least to itself.

    (Torch gives NaN for a row with nothing allowed; attn_core gives 0. That difference is
    a documented choice, not something to cross-check.)
    """
    m = np.random.default_rng(seed).random(shape) < 0.5
    n = min(shape[-2:])
    m[..., np.arange(n), np.arange(n)] = True
    return m


# --- attention vs F.scaled_dot_product_attention ----------------------------------------------

SHAPES = [  # (batch dims, n_q, n_k, d_k, d_v)
    ((), 5, 5, 4, 4),
    ((3,), 7, 7, 8, 5),
    ((2, 3), 6, 6, 16, 16),
    ((2,), 4, 9, 3, 6),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("batch", "n_q", "n_k", "d_k", "d_v"), SHAPES)
def test_attention_matches_sdpa_without_mask(requires_torch, batch, n_q, n_k, d_k, d_v, dtype):
    torch = requires_torch
    F = torch.nn.functional
    q = random((*batch, n_q, d_k), dtype, SEED)
    k = random((*batch, n_k, d_k), dtype, SEED + 1)
    v = random((*batch, n_k, d_v), dtype, SEED + 2)
    out, _ = attention(q, k, v)
    expected = F.scaled_dot_product_attention(to_torch(torch, q), to_torch(torch, k),
                                              to_torch(torch, v)).numpy()
    assert out.dtype == expected.dtype == dtype
    assert_rounding_close(out, expected, inner=max(n_k, d_k), depth=2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch", [(), (4,), (2, 3)])
def test_causal_attention_matches_sdpa_is_causal(requires_torch, batch, dtype):
    torch = requires_torch
    F = torch.nn.functional
    n, d = 6, 8
    q, k, v = (random((*batch, n, d), dtype, SEED + i) for i in range(3))
    out, _ = attention(q, k, v, mask=causal_mask(n))
    t = [to_torch(torch, x) for x in (q, k, v)]
    via_is_causal = F.scaled_dot_product_attention(*t, is_causal=True).numpy()
    # SDPA's boolean attn_mask means the same as ours: True = may attend
    via_mask = F.scaled_dot_product_attention(
        *t, attn_mask=torch.from_numpy(causal_mask(n))).numpy()
    assert_rounding_close(out, via_is_causal, inner=max(n, d), depth=2)
    assert_rounding_close(out, via_mask, inner=max(n, d), depth=2)


@pytest.mark.parametrize("mask_shape", [(6, 6), (3, 6, 6), (3, 1, 6)])
def test_batched_explicit_boolean_mask_matches_sdpa(requires_torch, mask_shape):
    torch = requires_torch
    F = torch.nn.functional
    q, k, v = (random((3, 6, 4), np.float32, SEED + i) for i in range(3))
    if mask_shape == (3, 1, 6):  # padding: every query sees at least key 0
        mask = padding_mask([6, 2, 4], 6)
    else:
        mask = random_mask(mask_shape, SEED)
    out, weights = attention(q, k, v, mask=mask)
    expected = F.scaled_dot_product_attention(
        *(to_torch(torch, x) for x in (q, k, v)), attn_mask=torch.from_numpy(mask)).numpy()
    assert_rounding_close(out, expected, inner=6, depth=2)
    assert (weights[~np.broadcast_to(mask, weights.shape)] == 0).all()


def test_explicit_scale_matches_sdpa(requires_torch):
    torch = requires_torch
    F = torch.nn.functional
    q, k, v = (random((2, 5, 4), np.float64, SEED + i) for i in range(3))
    out, _ = attention(q, k, v, scale=0.3)
    expected = F.scaled_dot_product_attention(*(to_torch(torch, x) for x in (q, k, v)),
                                              scale=0.3).numpy()
    assert_rounding_close(out, expected, inner=5, depth=2)


# --- multi_head_attention vs nn.MultiheadAttention --------------------------------------------


def torch_mha_with_our_weights(torch, w_q, w_k, w_v, w_o, biases, h, dtype):
    """An nn.MultiheadAttention holding our weights.

    Torch applies ``x @ W.T``: its in_proj_weight is the three (E, E) matrices
    ``[w_q.T; w_k.T; w_v.T]`` stacked to (3E, E), and out_proj.weight is ``w_o.T``.
    """
    e = w_q.shape[0]
    mha = torch.nn.MultiheadAttention(e, h, bias=True, batch_first=True,
                                      dtype=torch.float32 if dtype == np.float32 else torch.float64)
    mha.eval()
    b_q, b_k, b_v, b_o = biases
    with torch.no_grad():
        mha.in_proj_weight.copy_(to_torch(torch, np.concatenate([w_q.T, w_k.T, w_v.T])))
        mha.in_proj_bias.copy_(to_torch(torch, np.concatenate([b_q, b_k, b_v])))
        mha.out_proj.weight.copy_(to_torch(torch, w_o.T))
        mha.out_proj.bias.copy_(to_torch(torch, b_o))
    return mha


def mha_inputs(b, n, e, dtype, seed):
    g = np.random.default_rng(seed)
    x = g.standard_normal((b, n, e)).astype(dtype)
    ws = [(g.standard_normal((e, e)) / np.sqrt(e)).astype(dtype) for _ in range(4)]
    biases = tuple(g.standard_normal(e).astype(dtype) for _ in range(4))
    return x, ws, biases


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True], ids=["no-mask", "causal"])
@pytest.mark.parametrize(("b", "n", "e", "h"), [(1, 4, 8, 2), (3, 6, 12, 3), (2, 7, 16, 4),
                                                (2, 5, 8, 1), (2, 5, 8, 8)])
def test_multi_head_attention_matches_torch(requires_torch, b, n, e, h, causal, dtype):
    torch = requires_torch
    x, (w_q, w_k, w_v, w_o), biases = mha_inputs(b, n, e, dtype, SEED + n + h)
    mask = causal_mask(n) if causal else None
    out, weights = multi_head_attention(x, w_q, w_k, w_v, w_o, h, mask=mask, biases=biases)

    mha = torch_mha_with_our_weights(torch, w_q, w_k, w_v, w_o, biases, h, dtype)
    tx = to_torch(torch, x)
    # torch's MultiheadAttention attn_mask is the opposite of ours: True = NOT allowed
    torch_mask = None if mask is None else torch.from_numpy(~mask)
    with torch.no_grad():
        t_out, t_weights = mha(tx, tx, tx, attn_mask=torch_mask, need_weights=True,
                               average_attn_weights=False)
    assert out.shape == tuple(t_out.shape) and weights.shape == tuple(t_weights.shape)
    assert_rounding_close(out, t_out.numpy(), inner=max(n, e), depth=4)
    assert_rounding_close(weights, t_weights.numpy(), inner=e, depth=2)


def test_multi_head_attention_matches_torch_with_padding(requires_torch):
    """A key-padding mask: ours is (b, 1, n), given a head axis; torch's is (b, n), True = pad."""
    torch = requires_torch
    b, n, e, h = 3, 5, 8, 2
    x, (w_q, w_k, w_v, w_o), biases = mha_inputs(b, n, e, np.float32, SEED)
    lengths = [5, 2, 3]
    pad = padding_mask(lengths, n)  # (b, 1, n)
    out, _ = multi_head_attention(x, w_q, w_k, w_v, w_o, h, mask=pad[:, None], biases=biases)
    mha = torch_mha_with_our_weights(torch, w_q, w_k, w_v, w_o, biases, h, np.float32)
    tx = to_torch(torch, x)
    with torch.no_grad():
        t_out, _ = mha(tx, tx, tx, key_padding_mask=torch.from_numpy(~pad[:, 0, :]),
                       need_weights=False)
    assert_rounding_close(out, t_out.numpy(), inner=max(n, e), depth=4)


def test_torch_version_is_the_ci_pin(requires_torch):
    """The cross-checks were written against torch 2.13 (CI installs torch==2.13.0)."""
    assert requires_torch.__version__.split("+")[0] == "2.13.0"
