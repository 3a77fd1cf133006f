"""attention="gated_delta" and a mixer per layer (issue 48, part 4): the Gated DeltaNet block
against a float64 loop of the papers' recurrence, its backward and the hybrid GPT's against
finite differences, the per-layer config through a checkpoint, the decoder's cache counted by
hand, and bad input refused by name."""

import numpy as np
import pytest

from attn_core.cost import kv_cache_bytes
from attn_core.hybrid_cost import cache_parts, decoder_cache_bytes, hybrid_layers
from attn_core.nn import BlockOptions, GPTConfig, init_gpt
from attn_core.nn.block import block_backward, block_forward, block_shapes
from attn_core.nn.checkpoint import load_checkpoint, save_checkpoint
from attn_core.nn.data import CharVocab
from attn_core.nn.decoder import decoder_forward
from attn_core.nn.generate import generate
from attn_core.nn.gpt import gpt_forward, gpt_loss_and_grads

import reference as ref
from reference import assert_clear_error

HYBRID = ("gated_delta", "gated_delta", "gated_delta", "softmax")
OPTS = BlockOptions(2, mlp=None, attention="gated_delta")


def _block(seed=3, d=8, opts=OPTS, scale=0.5):
    g = np.random.default_rng(seed)
    return {k: scale * g.standard_normal(s) for k, s in block_shapes(d, None, opts).items()}


def _loop(x, p, h):
    """The attention-only gated-delta block written from the paper's formulas, float64, one
    token and one head at a time, state (d_v, d_k) as Yang et al. write it:
    S_t = a_t S_{t-1} (I - b_t k_t k_t^T) + b_t v_t k_t^T, o_t = S_t q_t."""
    n, d = x.shape
    dh = d // h
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    ln = (x - mu) / np.sqrt(var + 1e-5) * p["ln1.g"] + p["ln1.b"]
    merged = np.zeros((n, d))
    for head in range(h):
        cols = slice(head * dh, (head + 1) * dh)
        s = np.zeros((dh, dh))
        for t in range(n):
            q, k, v = ((ln[t] @ p[f"attn.w_{c}"] + p[f"attn.b_{c}"])[cols] for c in "qkv")
            q, k = q / np.linalg.norm(q), k / np.linalg.norm(k)
            a = 1 / (1 + np.exp(-(ln[t] @ p["attn.w_a"][:, head] + p["attn.b_a"][head])))
            b = 1 / (1 + np.exp(-(ln[t] @ p["attn.w_beta"][:, head] + p["attn.b_beta"][head])))
            s = a * s @ (np.eye(dh) - b * np.outer(k, k)) + b * np.outer(v, k)
            merged[t, cols] = s @ q
    return x + merged @ p["attn.w_o"] + p["attn.b_o"]


def test_the_block_is_the_recurrence_of_the_paper():
    p = _block()
    x = np.random.default_rng(4).standard_normal((7, 8))
    y, weights = block_forward(x, p, options=OPTS)
    np.testing.assert_allclose(y, _loop(x, p, 2), rtol=1e-12, atol=1e-12)
    assert weights.shape == (2, 7, 7) and np.all(np.triu(weights, 1) == 0)  # causal
    # a later token never changes an earlier output
    x2 = x.copy()
    x2[-1] += 1.0
    np.testing.assert_array_equal(block_forward(x2, p, options=OPTS)[0][:-1], y[:-1])


def test_the_block_backward_is_the_finite_difference():
    p = _block(5)
    x = np.random.default_rng(6).standard_normal((2, 5, 8))
    up = np.random.default_rng(7).standard_normal((2, 5, 8))
    grad_x, grads = block_backward(x, p, None, up, options=OPTS)
    assert set(grads) == set(p)

    def loss(xx, pp):
        return float((block_forward(xx, pp, options=OPTS)[0] * up).sum())

    np.testing.assert_allclose(grad_x, ref.numeric_grad(lambda w: loss(w, p), x), rtol=1e-6,
                               atol=1e-8)
    for name in p:
        def of(w, name=name):
            return loss(x, {**p, name: w})
        np.testing.assert_allclose(grads[name], ref.numeric_grad(of, p[name]), rtol=1e-6,
                                   atol=1e-8, err_msg=name)


def test_every_gradient_of_the_hybrid_gpt_is_the_finite_difference():
    cfg = GPTConfig(vocab_size=7, n_ctx=5, d_model=6, n_heads=2, n_layers=4, d_ff=5,
                    attention=HYBRID)
    g = np.random.default_rng(8)
    p = {k: v + 0.2 * g.standard_normal(v.shape)
         for k, v in init_gpt(cfg, g, dtype="float64").items()}
    ids, targets = g.integers(0, 7, (2, 5)), g.integers(0, 7, (2, 5))
    _, grads = gpt_loss_and_grads(p, cfg, ids, targets)
    assert set(grads) == set(p) and "h0.attn.w_a" in p and "h3.attn.w_a" not in p
    h = 1e-6
    for name in p:  # along a random direction per parameter (every entry: the block's test)
        u = g.standard_normal(p[name].shape)
        up, down = ({**p, name: p[name] + s * h * u} for s in (1, -1))
        numeric = (gpt_loss_and_grads(up, cfg, ids, targets)[0]
                   - gpt_loss_and_grads(down, cfg, ids, targets)[0]) / (2 * h)
        assert np.sum(grads[name] * u) == pytest.approx(numeric, rel=1e-6, abs=1e-8), name


def test_each_layer_runs_its_own_mixer():
    """A hybrid's layer i is the block with layers[i]: its softmax layer's weights are a
    softmax's (rows sum to 1, all >= 0), a gated-delta layer's are not in general."""
    cfg = GPTConfig(vocab_size=9, n_ctx=8, d_model=8, n_heads=2, n_layers=4, attention=HYBRID)
    p = init_gpt(cfg, np.random.default_rng(0), dtype="float64", std=0.5)
    _, w = gpt_forward(p, cfg, np.arange(8)[None] % 9)
    np.testing.assert_allclose(w[3].sum(-1), 1.0, rtol=1e-12)
    assert not np.allclose(w[0].sum(-1), 1.0)
    assert p["h0.attn.b_a"][0] == 3.0 and p["h0.attn.b_beta"][0] == 0.0  # gate near 1 at init
    same = GPTConfig(vocab_size=9, n_ctx=8, d_model=8, n_heads=2, n_layers=4,
                     attention=("softmax",) * 4)
    assert same.layers == GPTConfig(9, 8, 8, 2, 4).layers  # a tuple of one kind is that kind
    assert init_gpt(same, np.random.default_rng(0)).keys() == init_gpt(
        GPTConfig(9, 8, 8, 2, 4), np.random.default_rng(0)).keys()


def test_the_per_layer_config_survives_a_checkpoint(tmp_path):
    cfg = GPTConfig(vocab_size=3, n_ctx=4, d_model=8, n_heads=2, n_layers=4, attention=HYBRID)
    p = init_gpt(cfg, np.random.default_rng(1))
    path = tmp_path / "hybrid.npz"
    save_checkpoint(path, p, cfg, CharVocab("abc"), {"note": "hybrid"})
    ck = load_checkpoint(path)
    assert ck.config == cfg and ck.config.layers == HYBRID
    assert all(np.array_equal(ck.params[k], p[k]) for k in p)
    ids = [[0, 1, 2, 1]]
    np.testing.assert_array_equal(gpt_forward(ck.params, ck.config, ids)[0],
                                  gpt_forward(p, cfg, ids)[0])


def test_the_cache_is_counted_by_hand():
    # the tiny hybrid: 4 heads of 16, float32; one softmax layer caches k and v per token
    assert cache_parts(hybrid_layers(4, 4), kv_heads=4, d_head=16) == (
        2 * 4 * 16 * 4, 3 * 4 * 16 * 16 * 4)
    for n in (1, 64, 32768):
        assert decoder_cache_bytes(n, ("softmax",) * 4, 4, 16) == kv_cache_bytes(
            n, 4, 4, 16, "float32")
        assert decoder_cache_bytes(n, ("linear",) * 4, 4, 16) == 4 * 4 * (16 * 16 + 16) * 4
    # Qwen3-Next's shape (exercise 3): 12 attention layers of 2 kv heads of 256, 36 states
    # of 32 heads of 128 x 128, in float16
    layers = hybrid_layers(48, 4)
    assert layers.count("softmax") == 12 and layers[3] == "softmax" and layers[0] != "softmax"
    assert decoder_cache_bytes(100, layers, 2, 256, 32, 128, 128, "float16") == (
        100 * 12 * 2 * 2 * 256 * 2 + 36 * 32 * 128 * 128 * 2)


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda: BlockOptions(2, attention="delta"), ValueError, "attention"),
    (lambda: BlockOptions(2, n_kv_heads=1, attention="gated_delta"), ValueError, "n_kv_heads"),
    (lambda: BlockOptions(2, rope_base=1e4, attention="gated_delta"), ValueError, "rope_base"),
    (lambda: GPTConfig(9, 8, 8, 2, 4, attention=HYBRID[:3]), ValueError, "n_layers = 4"),
    (lambda: GPTConfig(9, 8, 8, 2, 2, attention=("softmax", "gated")), ValueError,
     r"attention\[1\]"),
    (lambda: GPTConfig(9, 8, 8, 2, 2, attention=("softmax", 3)), TypeError, r"attention\[1\]"),
    (lambda: cache_parts("softmax", 4, 16), ValueError, "layers"),
    (lambda: cache_parts(("softmax", "mamba"), 4, 16), ValueError, r"layers\[1\]"),
    (lambda: cache_parts(HYBRID, 0, 16), ValueError, "kv_heads"),
    (lambda: decoder_cache_bytes(0, HYBRID, 4, 16), ValueError, "n"),
    (lambda: hybrid_layers(4, 0), ValueError, "every"),
])
def test_bad_input_is_refused_by_name(call, exc, pattern):
    assert_clear_error(call, exc, pattern)


def test_a_gated_delta_layer_has_no_kv_cache_and_no_mask():
    cfg = GPTConfig(vocab_size=9, n_ctx=8, d_model=8, n_heads=2, n_layers=4, attention=HYBRID)
    p = init_gpt(cfg, np.random.default_rng(0))
    with pytest.raises(ValueError, match="fixed-size state"):
        generate(p, cfg, [1, 2], 2)
    with pytest.raises(ValueError, match="mask"):
        decoder_forward(p, cfg, np.array([[1, 2]]), mask=np.tri(2, dtype=bool))


def test_window_losses_and_recall_against_plain_loops():
    from attn_core.induction import repeated_tokens
    from attn_core.nn.hybrid import copy_recall, window_losses
    from attn_core.nn.train import text_loss

    cfg = GPTConfig(vocab_size=9, n_ctx=8, d_model=8, n_heads=2, n_layers=4, attention=HYBRID)
    p = init_gpt(cfg, np.random.default_rng(0), dtype="float64", std=0.5)
    text = np.random.default_rng(1).integers(0, 9, 3 * 8 + 1)  # three whole windows
    w = window_losses(p, cfg, text, batch=2)
    assert w.shape == (3,) and w.mean() == pytest.approx(text_loss(p, cfg, text), rel=1e-12)
    r = copy_recall(p, cfg, batch=5, seed=2, segment=4)
    ids, _ = repeated_tokens(np.random.default_rng(2), 5, 9, 8, 4)
    logits = gpt_forward(p, cfg, ids)[0]
    hits = {"first": [], "second": []}
    for b in range(5):  # copy 1 at 0..3, copy 2 at 4..7; scored: each copy's tokens 2..4
        for name, start in (("first", 0), ("second", 4)):
            hits[name].append(np.mean([logits[b, t - 1].argmax() == ids[b, t]
                                       for t in range(start + 1, start + 4)]))
    for name in hits:
        assert r[f"{name}_acc"] == pytest.approx(np.mean(hits[name]), abs=1e-12)
        assert r[f"{name}_acc_sem"] == pytest.approx(np.std(hits[name], ddof=1) / np.sqrt(5))
    assert r["gain"] == pytest.approx(r["first_loss"] - r["second_loss"], rel=1e-12)
    with pytest.raises(ValueError, match="segment"):
        copy_recall(p, cfg, segment=5)
    with pytest.raises(ValueError, match="n_ctx"):
        window_losses(p, cfg, text[:8])


def test_hybrid_paths_by_seed_and_the_copy_runs_refused_by_name():
    from attn_core.nn.hybrid import hybrid_copy_model, hybrid_paths

    ck, trace = hybrid_paths("linear")
    assert ck.name == "hybrid-linear-checkpoint.npz" and trace.name == "hybrid-linear-trace.json"
    ck, trace = hybrid_paths("linear", 2)
    assert ck is None and trace.name == "hybrid-linear-s2-trace.json"
    assert_clear_error(lambda: hybrid_paths("mamba"), ValueError, r"model.*mamba")
    assert_clear_error(lambda: hybrid_paths("linear", -1), ValueError, r"seed.*-1")
    assert_clear_error(lambda: hybrid_paths("linear", 1.5), TypeError, r"seed.*1.5")
    trace = {"seeds": [0, 1], "config": dict(vocab_size=5, n_ctx=4, d_model=4, n_heads=2,
                                             mlp=False, n_layers=4)}
    arrays = {"s1.hybrid/a": np.zeros(2), "s1.softmax/a": np.ones(2), "s0.hybrid/a": np.ones(3)}
    params, config = hybrid_copy_model(trace, arrays, 1, "hybrid")
    assert list(params) == ["a"] and params["a"].shape == (2,) and not params["a"].any()
    assert config.layers == HYBRID and not config.mlp
    assert_clear_error(lambda: hybrid_copy_model(trace, arrays, 2, "hybrid"), ValueError,
                       r"seed.*2")
    assert_clear_error(lambda: hybrid_copy_model(trace, arrays, 0, "gdn"), ValueError,
                       r"model.*gdn")
