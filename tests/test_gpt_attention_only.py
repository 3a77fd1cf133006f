"""The attention-only GPT (``GPTConfig(mlp=False)``) and head ablation in its forward pass.

* the attention-only model's parameters, its forward pass against the float64 loop of
  tests/test_gpt.py (which skips the MLP when a block has none), and every entry of every
  gradient against central finite differences;
* ablation against independent references: zeroing a head's output is the model with that
  head's rows of ``w_o`` zeroed; replacing it by a constant vector ``m`` is that model with
  ``m @ w_o[rows]`` added to ``b_o``; ablating a last-layer head leaves the earlier layers'
  attention as it was, ablating a first-layer head changes the later layers'; a mean over a
  reference batch of one sequence changes nothing on that sequence.
"""

import numpy as np
import pytest
from test_gpt import assert_every_entry_is_the_finite_difference, problem, ref_gpt_logits

from attn_core.nn import (
    GPTConfig,
    block_backward,
    block_forward,
    block_shapes,
    gpt_forward,
    init_gpt,
    param_shapes,
)
from attn_core.nn.gpt import head_outputs, mean_ablation

from reference import assert_clear_error
from reference import multi_head_attention as ref_mha

CONFIG = GPTConfig(vocab_size=6, n_ctx=5, d_model=4, n_heads=2, n_layers=2, mlp=False)


def test_attention_only_has_no_mlp_and_a_smaller_residual_scale():
    shapes = param_shapes(CONFIG)
    assert not any(".mlp." in k or ".ln2." in k for k in shapes)
    assert len(shapes) == 2 + 10 * CONFIG.n_layers + 3 and CONFIG.d_ff is None
    with_mlp = param_shapes(GPTConfig(6, 5, 4, 2, 2))
    assert set(shapes) < set(with_mlp)
    big = GPTConfig(vocab_size=50, n_ctx=64, d_model=64, n_heads=2, n_layers=4, mlp=False)
    p = init_gpt(big, np.random.default_rng(0), dtype="float64", std=0.1)
    # one sub-layer per block adds into the stream: w_o scaled by 1/sqrt(n_layers)
    assert np.std(p["h0.attn.w_o"]) == pytest.approx(0.1 / 2, rel=0.05)
    assert np.std(p["h0.attn.w_q"]) == pytest.approx(0.1, rel=0.05)


def test_attention_only_forward_is_the_formula():
    params, ids, _ = problem(CONFIG, 3, batch=(2,), n=5)
    logits, weights = gpt_forward(params, CONFIG, ids)
    for b in range(2):
        np.testing.assert_allclose(logits[b], ref_gpt_logits(params, CONFIG, ids[b].tolist()),
                                   rtol=1e-12, atol=1e-12)
    assert len(weights) == 2 and weights[1].shape == (2, 2, 5, 5)


def test_attention_only_block_is_x_plus_attention():
    g = np.random.default_rng(1)
    p = {k: 0.4 * g.standard_normal(s) for k, s in block_shapes(4, None).items()}
    x = g.standard_normal((3, 4))
    y, w = block_forward(x, p, 2)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    ln = (x - mu) / np.sqrt(var + 1e-5) * p["ln1.g"] + p["ln1.b"]
    attended, ref_w = ref_mha(ln, *(p[f"attn.w_{c}"] for c in "qkvo"), 2,
                              mask=np.tri(3, dtype=bool),
                              biases=tuple(p[f"attn.b_{c}"] for c in "qkvo"))
    np.testing.assert_allclose(y, x + attended, rtol=1e-12, atol=1e-12)
    grad_x, grads = block_backward(x, p, 2, np.ones_like(x))
    assert set(grads) == set(p)


def test_every_entry_of_every_attention_only_gradient_is_the_finite_difference():
    assert_every_entry_is_the_finite_difference(CONFIG, *problem(CONFIG, 11, batch=(2,), n=4))


# --- ablation ---------------------------------------------------------------------------------


def rows(head, d_head=CONFIG.d_head):
    return slice(head * d_head, (head + 1) * d_head)


@pytest.mark.parametrize("config", [CONFIG, GPTConfig(6, 5, 4, 2, 2, d_ff=3)],
                         ids=["attention-only", "with-mlp"])
@pytest.mark.parametrize("layer, head", [(0, 0), (0, 1), (1, 1)])
def test_zero_ablation_is_the_head_removed_from_w_o(config, layer, head):
    params, ids, _ = problem(config, 5, batch=(3,), n=5)
    logits, weights = gpt_forward(params, config, ids, ablate={(layer, head): None})
    edited = dict(params)
    w_o = params[f"h{layer}.attn.w_o"].copy()
    w_o[rows(head)] = 0.0
    edited[f"h{layer}.attn.w_o"] = w_o
    ref_logits, ref_weights = gpt_forward(edited, config, ids)
    np.testing.assert_allclose(logits, ref_logits, rtol=1e-12, atol=1e-12)
    for w, r in zip(weights, ref_weights):
        np.testing.assert_allclose(w, r, rtol=1e-12, atol=1e-14)
    plain_logits, plain_weights = gpt_forward(params, config, ids)
    np.testing.assert_array_equal(weights[0], plain_weights[0])  # layer 0 reads no ablation
    if layer == 0:
        assert not np.allclose(weights[1], plain_weights[1])  # layer 1 reads layer 0's output
    assert not np.allclose(logits, plain_logits)


def test_a_constant_replacement_is_a_bias():
    params, ids, _ = problem(CONFIG, 6, batch=(2,), n=5)
    m = np.random.default_rng(0).standard_normal(CONFIG.d_head)
    logits, _ = gpt_forward(params, CONFIG, ids, ablate={(0, 1): np.tile(m, (5, 1))})
    edited = dict(params)
    w_o = params["h0.attn.w_o"].copy()
    edited["h0.attn.b_o"] = params["h0.attn.b_o"] + m @ w_o[rows(1)]
    w_o[rows(1)] = 0.0
    edited["h0.attn.w_o"] = w_o
    np.testing.assert_allclose(logits, gpt_forward(edited, CONFIG, ids)[0], rtol=1e-12,
                               atol=1e-12)


def test_mean_ablation_over_the_sequence_itself_changes_nothing():
    params, ids, _ = problem(CONFIG, 7, batch=(1,), n=5)
    means = mean_ablation(params, CONFIG, ids, [(0, 0), (1, 1)])
    outs = head_outputs(params, CONFIG, ids)
    np.testing.assert_allclose(means[(0, 0)], outs[0][0, 0])
    np.testing.assert_allclose(gpt_forward(params, CONFIG, ids, ablate=means)[0],
                               gpt_forward(params, CONFIG, ids)[0], rtol=1e-12, atol=1e-12)


def test_head_outputs_are_weights_times_values():
    params, ids, _ = problem(CONFIG, 8, batch=(2,), n=4)
    _, weights = gpt_forward(params, CONFIG, ids)
    outs = head_outputs(params, CONFIG, ids)
    x = params["wte"][ids] + params["wpe"][:4]
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    ln = (x - mu) / np.sqrt(var + 1e-5) * params["h0.ln1.g"] + params["h0.ln1.b"]
    v = ln @ params["h0.attn.w_v"] + params["h0.attn.b_v"]  # (2, 4, d)
    for h in range(2):
        np.testing.assert_allclose(outs[0][:, h], weights[0][:, h] @ v[..., rows(h)],
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("ablate, exc, pattern", [
    ({(2, 0): None}, ValueError, r"0 <= layer < 2"),
    ({(0, 2): None}, ValueError, r"0 <= head < 2"),
    ({0: None}, ValueError, r"\(layer, head\)"),
    ({(0, 0): np.zeros((4, 3))}, ValueError, r"shape \(\.\.\., 4, 2\) \(\.\.\., n, d_head\)"),
    ([(0, 0)], TypeError, r"ablate must be a dict"),
    ({(0, 0): np.full((4, 2), np.nan)}, ValueError, r"ablate\[\(0, 0\)\]"),
])
def test_bad_ablation_names_the_argument(ablate, exc, pattern):
    params, ids, _ = problem(CONFIG, 9, batch=(1,), n=4)
    assert_clear_error(lambda: gpt_forward(params, CONFIG, ids, ablate=ablate), exc, pattern)


@pytest.mark.parametrize("change, exc, pattern", [
    (dict(mlp=False, d_ff=8), ValueError, r"mlp=False has no MLP"),
    (dict(mlp="no"), TypeError, r"mlp must be True or False"),
])
def test_a_bad_attention_only_config_names_the_field(change, exc, pattern):
    assert_clear_error(lambda: GPTConfig(**{**dict(vocab_size=5, n_ctx=4, d_model=4,
                                                   n_heads=2, n_layers=1), **change}),
                       exc, pattern)


def test_init_std_is_checked():
    assert_clear_error(lambda: init_gpt(CONFIG, np.random.default_rng(0), std=0), ValueError,
                       r"std must be a finite number > 0")
