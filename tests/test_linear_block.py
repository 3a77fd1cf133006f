"""attention="linear", one more option of the one decoder block: the tiny GPT with linear
attention's weights, its gradients against finite differences, and its heads against the maths
module's linear attention."""

import numpy as np
import pytest

from attn_core.linear_attention import linear_attention
from attn_core.multihead import split_heads
from attn_core.nn import BlockOptions, GPTConfig, init_gpt
from attn_core.nn.block import block_forward, block_shapes
from attn_core.nn.gpt import gpt_forward, gpt_loss_and_grads

import reference as ref

CFG = GPTConfig(vocab_size=11, n_ctx=6, d_model=8, n_heads=2, n_layers=2, attention="linear")


def test_gradients_of_the_linear_gpt_match_finite_differences():
    p = init_gpt(CFG, np.random.default_rng(0), dtype="float64", std=0.3)
    ids = np.random.default_rng(1).integers(0, 11, (2, 6))
    targets = np.random.default_rng(2).integers(0, 11, (2, 6))
    _, grads = gpt_loss_and_grads(p, CFG, ids, targets)
    for name in ("h0.attn.w_q", "h1.attn.w_k", "h0.attn.w_v", "h1.attn.b_q", "h0.attn.b_k",
                 "wte"):
        def loss(w, name=name):
            q = dict(p)
            q[name] = w
            return float(gpt_loss_and_grads(q, CFG, ids, targets)[0])
        np.testing.assert_allclose(grads[name], ref.numeric_grad(loss, p[name]), rtol=1e-5,
                                   atol=1e-8, err_msg=name)


def test_a_linear_block_runs_linear_attention_in_each_head():
    g = np.random.default_rng(3)
    o = BlockOptions(2, mlp=None, attention="linear")
    p = {k: 0.5 * g.standard_normal(s) for k, s in block_shapes(8, None, o).items()}
    x = g.standard_normal((5, 8))
    y, weights = block_forward(x, p, options=o)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    ln = (x - mu) / np.sqrt(var + 1e-5) * p["ln1.g"] + p["ln1.b"]
    q, k, v = (split_heads(ln @ p[f"attn.w_{c}"] + p[f"attn.b_{c}"], 2) for c in "qkv")
    heads = linear_attention(q, k, v, causal=True)  # (2, 5, 4): the maths module, chunked
    merged = heads.swapaxes(0, 1).reshape(5, 8)
    np.testing.assert_allclose(y, x + merged @ p["attn.w_o"] + p["attn.b_o"], rtol=1e-12,
                               atol=1e-12)
    assert np.all(np.triu(weights, 1) == 0) and np.allclose(weights.sum(-1), 1)


def test_softmax_stays_the_default_and_bad_kinds_are_named():
    assert GPTConfig(11, 6, 8, 2, 1).block_options.attention == "softmax"
    assert "attention='linear'" in repr(CFG)
    with pytest.raises(ValueError, match="attention"):
        GPTConfig(11, 6, 8, 2, 1, attention="sparse")
    p = init_gpt(CFG, np.random.default_rng(0))
    _, w = gpt_forward(p, CFG, np.zeros((1, 4), dtype=int))
    assert w[0].shape == (1, 2, 4, 4)
