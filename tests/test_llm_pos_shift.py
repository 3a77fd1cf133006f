"""Xiao et al.'s rolling cache with positions numbered inside the cache (``pos_shift``),
computed over a whole text by :func:`attn_core.model.llm_pos_shift.pos_shift_losses`, against
a float64 loop that reads the text token by token the way their code does: each layer keeps
every token's key and value unturned, each step builds the cache (the sinks, then the window),
numbers it 0, 1, ... and puts the query last.
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_llm_layers import _rms, _rotate, random_llm

from attn_core.model.llm import LLMConfig, llm_losses
from attn_core.model.llm_pos_shift import pos_shift_losses

from reference import FAST


def streaming_losses(params, c, ids, window, n_sink, shift):
    """Per-token losses of the rolling cache, one token at a time, in float64."""
    d_head, group = c.d_head, c.n_heads // c.n_kv_heads
    keys = [[] for _ in range(c.n_layers)]  # unturned keys and values of every token so far
    values = [[] for _ in range(c.n_layers)]
    losses = []
    for i in range(len(ids) - 1):
        x = np.array(params["wte"][ids[i]], dtype=np.float64)
        for layer in range(c.n_layers):
            p = {k.split(".", 1)[1]: v for k, v in params.items() if k.startswith(f"h{layer}.")}
            a = _rms(x, p["ln1.g"], c.eps)
            keys[layer].append(a @ p["attn.w_k"])
            values[layer].append(a @ p["attn.w_v"])
            cache = [j for j in range(i + 1) if j < n_sink or i - j < window]
            where = range(len(cache)) if shift else cache  # positions: in the cache, or own
            q = a @ p["attn.w_q"]
            heads = np.zeros(c.n_heads * d_head)
            for h in range(c.n_heads):
                kv = slice((h // group) * d_head, (h // group + 1) * d_head)
                qh = _rotate(q[h * d_head:(h + 1) * d_head], where[-1], c.rope_base)
                s = [qh @ _rotate(keys[layer][j][kv], pj, c.rope_base) / math.sqrt(d_head)
                     for j, pj in zip(cache, where)]
                e = np.exp(np.array(s) - max(s))
                heads[h * d_head:(h + 1) * d_head] = sum(
                    w * values[layer][j][kv] for j, w in zip(cache, e / e.sum()))
            x = x + heads @ p["attn.w_o"]
            b = _rms(x, p["ln2.g"], c.eps)
            gate, up = b @ p["mlp.w_gate"], b @ p["mlp.w_up"]
            x = x + (gate / (1 + np.exp(-gate)) * up) @ p["mlp.w_down"]
        logits = _rms(x, params["ln_f.g"], c.eps) @ params["w_unembed"]
        top = logits.max()
        losses.append(top + math.log(np.exp(logits - top).sum()) - logits[ids[i + 1]])
    return np.array(losses)


@st.composite
def cases(draw):
    n_kv = draw(st.integers(1, 2))
    n_heads = n_kv * draw(st.integers(1, 2))
    config = LLMConfig(vocab_size=7, n_ctx=16, d_model=n_heads * 4, n_heads=n_heads,
                       n_kv_heads=n_kv, n_layers=draw(st.integers(1, 2)), d_ff=3,
                       rope_base=draw(st.sampled_from([3.0, 100.0])))
    n = draw(st.integers(3, 12))
    ids = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    return (config, np.array(ids), draw(st.integers(1, 5)), draw(st.integers(0, 3)),
            draw(st.integers(0, 2**16)))


@FAST
@given(case=cases())
def test_pos_shift_is_the_token_by_token_streaming_loop(case):
    config, ids, window, n_sink, seed = case
    params = random_llm(config, seed)
    for shift in (True, False):
        want = streaming_losses(params, config, ids, window, n_sink, shift)
        got = pos_shift_losses((params, config), ids, window, n_sink, shift=shift)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_kept_positions_are_the_course_rolling_cache_and_shifted_ones_differ():
    config = LLMConfig(vocab_size=7, n_ctx=32, d_model=8, n_heads=2, n_kv_heads=1,
                       n_layers=2, d_ff=5, rope_base=3.0)
    params = random_llm(config, 3)
    ids = np.random.default_rng(0).integers(0, 7, size=20)
    kept = pos_shift_losses((params, config), ids, 4, 2, shift=False)
    np.testing.assert_allclose(kept, llm_losses(params, config, ids, window=4, n_sink=2),
                               rtol=1e-10, atol=1e-10)
    shifted = pos_shift_losses((params, config), ids, 4, 2)
    # the same until the cache is full (query 5 = n_sink + window - 1), different after
    np.testing.assert_allclose(shifted[:6], kept[:6], rtol=1e-10, atol=1e-10)
    assert np.abs(shifted[6:] - kept[6:]).max() > 1e-3


@pytest.mark.parametrize("window", [0, 2.5, None])
def test_pos_shift_refuses_a_bad_window(window):
    config = LLMConfig(7, 16, 8, 2, 1, 1, 3, 100.0)
    with pytest.raises(ValueError, match="window must be a positive int"):
        pos_shift_losses((random_llm(config, 0), config), np.arange(5), window, 1)
