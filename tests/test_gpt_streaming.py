"""The tiny GPT through rolling KV caches (prefill with window / n_sink) against the same
model written out with the public layers and notebook 07's masks; attention-sink measures."""

import numpy as np
import pytest

from attn_core import multi_head_attention
from attn_core.masks import causal_mask, window_mask
from attn_core.nn import (
    GPTConfig,
    block_params,
    embed,
    first_token_weight,
    gpt_forward,
    init_gpt,
    layer_norm,
    mlp,
    prefill,
    token_losses,
)
from attn_core.nn.gpt import LN_EPS
from attn_core.nn.streaming import (
    SINK_CONDITIONS,
    SINK_LOSS_FROM,
    held_out_windows,
    kept_mask,
    load_sink_measurements,
    sink_measures,
)

import reference as ref

CFG = GPTConfig(vocab_size=11, n_ctx=12, d_model=8, n_heads=2, n_layers=2)


@pytest.fixture(scope="module")
def params():
    return init_gpt(CFG, np.random.default_rng(4), dtype="float64")


def masked_forward(params, ids, mask):
    """Logits of the GPT with ``mask`` (n, n) in every layer, from the public layers."""
    x = embed(ids, params["wte"], params["wpe"])
    for i in range(CFG.n_layers):
        p = block_params(params, i)
        a = layer_norm(x, p["ln1.g"], p["ln1.b"], LN_EPS)
        x = x + multi_head_attention(a, *(p[f"attn.w_{c}"] for c in "qkvo"), CFG.n_heads,
                                     mask=mask, biases=[p[f"attn.b_{c}"] for c in "qkvo"])[0]
        x = x + mlp(layer_norm(x, p["ln2.g"], p["ln2.b"], LN_EPS), p["mlp.w_in"], p["mlp.b_in"],
                    p["mlp.w_out"], p["mlp.b_out"])
    return layer_norm(x, params["ln_f.g"], params["ln_f.b"], LN_EPS) @ params["w_unembed"]


@pytest.mark.parametrize("window, n_sink", [(1, 0), (3, 0), (3, 1), (4, 2), (12, 0), (2, 5)])
def test_rolling_caches_equal_the_model_under_the_sink_window_mask(params, window, n_sink):
    ids = np.random.default_rng(window + 10 * n_sink).integers(0, CFG.vocab_size, (3, 12))
    n = ids.shape[-1]
    mask = window_mask(n, window) | (causal_mask(n) & (np.arange(n) < n_sink))  # by hand
    logits, caches = prefill(params, CFG, ids, window=window, n_sink=n_sink)
    np.testing.assert_allclose(logits, masked_forward(params, ids, mask), rtol=1e-12,
                               atol=1e-12)
    assert caches[0].keys.shape == (3, CFG.n_heads, min(n, window + n_sink), 4)
    assert caches[0].seen == n


def test_batched_full_prefill_equals_gpt_forward(params):
    ids = np.random.default_rng(1).integers(0, CFG.vocab_size, (2, 3, 7))
    logits, _ = prefill(params, CFG, ids)
    np.testing.assert_allclose(logits, gpt_forward(params, CFG, ids)[0], rtol=1e-12, atol=1e-12)


def test_token_losses_are_the_next_token_negative_log_likelihoods(params):
    ids = np.random.default_rng(2).integers(0, CFG.vocab_size, (2, 9))
    logits = gpt_forward(params, CFG, ids[:, :-1])[0]
    expect = np.array([[-np.log(np.exp(row[t]) / np.exp(row).sum())
                        for row, t in zip(lg, nxt)] for lg, nxt in zip(logits, ids[:, 1:])])
    np.testing.assert_allclose(token_losses(params, CFG, ids), expect, rtol=1e-12)
    windowed = token_losses(params, CFG, ids, window=3)
    assert np.allclose(windowed[:, :3], expect[:, :3], rtol=1e-12)  # the window not yet full
    assert not np.allclose(windowed[:, 3:], expect[:, 3:])


def test_first_token_weight_on_hand_made_weights():
    n = 4
    uniform = causal_mask(n) / np.arange(1, n + 1)[:, None]  # row i: 1/(i+1) on 0..i
    sink = np.zeros((n, n))
    sink[:, 0] = 1.0
    w = np.stack([uniform, sink])  # (2 heads, n, n)
    share = first_token_weight(w)
    np.testing.assert_allclose(share, [np.mean([1 / 2, 1 / 3, 1 / 4]), 1.0])
    np.testing.assert_allclose(first_token_weight(w, n_first=2), [np.mean([2 / 3, 2 / 4]), 1.0])


def _hand_losses(params, ids, mask):
    """Next-token losses of the public layers' model under ``mask``, a loop over texts and
    positions."""
    out = []
    for text in ids:
        logits = masked_forward(params, text[:-1], mask)  # (n - 1, vocab)
        out.append([np.log(np.exp(row - row.max()).sum()) + row.max() - row[t]
                    for row, t in zip(logits, text[1:])])
    return np.array(out)


@pytest.mark.parametrize("window, keep", [(3, [1]), (3, [0, 5]), (2, [4]), (12, [2])])
def test_kept_positions_equal_the_model_under_a_mask_made_by_hand(params, window, keep):
    ids = np.random.default_rng(window + sum(keep)).integers(0, CFG.vocab_size, (2, 12))
    n = ids.shape[-1] - 1
    mask = np.array([[i - window < j <= i or (j in keep and j <= i) for j in range(n)]
                     for i in range(n)])
    np.testing.assert_array_equal(kept_mask(n, window, keep), mask)
    np.testing.assert_allclose(token_losses(params, CFG, ids, window=window, keep=keep),
                               _hand_losses(params, ids, mask), rtol=1e-12, atol=1e-12)


def test_keeping_the_first_positions_is_the_rolling_cache_with_sinks(params):
    """Two paths: one forward pass under the kept mask, and the rolling caches of prefill."""
    ids = np.random.default_rng(7).integers(0, CFG.vocab_size, (3, 12))
    for n_sink in (1, 2):
        np.testing.assert_allclose(
            token_losses(params, CFG, ids, window=3, keep=list(range(n_sink))),
            token_losses(params, CFG, ids, window=3, n_sink=n_sink), rtol=1e-12, atol=1e-12)


def test_sink_measures_against_a_loop(params):
    ids = np.random.default_rng(8).integers(0, CFG.vocab_size, (3, 12))
    conditions = {"full": {}, "w3": {"window": 3}, "w3 + 2": {"window": 3, "keep": [2]}}
    found = sink_measures(params, CFG, ids, conditions, start=4, parts=2)
    weights = gpt_forward(params, CFG, ids)[1]
    share = [[[weights[layer][t, h, 1:, 0].mean() for h in range(CFG.n_heads)]
              for layer in range(CFG.n_layers)] for t in range(len(ids))]
    np.testing.assert_allclose(found["first_token_weight"], share, rtol=1e-12)
    n = ids.shape[-1] - 1
    for name, mask in (("full", causal_mask(n)), ("w3", window_mask(n, 3)),
                       ("w3 + 2", kept_mask(n, 3, [2]))):
        np.testing.assert_allclose(found["losses"][name], _hand_losses(params, ids, mask)[:, 4:]
                                   .mean(axis=1), rtol=1e-12)


@pytest.mark.slow
def test_stored_sink_measurements_recomputed_on_windows_the_notebook_does_not_recompute():
    """The stored file (tools/measure_sinks.py) against a fresh measurement of two windows
    from the middle of the held-out text (notebook 16 recomputes the first ones)."""
    from attn_core.nn import load_checkpoint

    stored = load_sink_measurements()
    assert stored["settings"]["conditions"] == {k: dict(v) for k, v in SINK_CONDITIONS.items()}
    assert stored["settings"]["loss_from"] == SINK_LOSS_FROM
    assert not stored["made_by"]["commit"].endswith("+dirty")
    ck = load_checkpoint()
    texts = held_out_windows(ck)
    assert stored["first_token_weight"].shape == (len(texts), ck.config.n_layers,
                                                  ck.config.n_heads)
    params64 = {k: a.astype(np.float64) for k, a in ck.params.items()}
    picked = [len(texts) // 2, len(texts) - 1]
    found = sink_measures(params64, ck.config, texts[picked], parts=1)
    np.testing.assert_allclose(found["first_token_weight"],
                               stored["first_token_weight"][picked], atol=1e-7)
    for name, values in found["losses"].items():
        np.testing.assert_allclose(values, stored["losses"][name][picked], atol=1e-7)


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda p: token_losses(p, CFG, [3]), ValueError, r"^ids must hold 2\.\.n_ctx"),
    (lambda p: token_losses(p, CFG, [1, 2, 3], keep=[0]), ValueError, r"^keep needs a window"),
    (lambda p: token_losses(p, CFG, [1, 2, 3], window=2, n_sink=1, keep=[0]), ValueError,
     r"^keep takes the place of n_sink"),
    (lambda p: token_losses(p, CFG, [1, 2, 3], window=2, keep=[5]), ValueError,
     r"^keep must be a sequence of positions in 0\.\.1"),
    (lambda p: token_losses(p, CFG, [1, 2, 3], window=2, keep="a"), ValueError,
     r"^keep must be a sequence of positions"),
    (lambda p: token_losses(p, "cfg", [1, 2]), TypeError, r"^config must be a GPTConfig"),
    (lambda p: token_losses(p, CFG, [1, 2], n_sink=1), ValueError, r"^n_sink = 1 needs a window"),
    (lambda p: first_token_weight(np.ones((2, 3, 3)), n_first=3), ValueError,
     r"^n_first and start must leave"),
])
def test_bad_arguments_get_a_clear_error(params, call, exc, pattern):
    with pytest.raises(exc, match=pattern) as excinfo:
        call(params)
    ref.assert_raised_by_attn_core(excinfo)
