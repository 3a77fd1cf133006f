"""The tiny GPT's fast decoding path (:class:`attn_core.nn.gpt_decoder.GPTDecoder`, what
``generate`` and the GPT explorer run) against the references (issue 47).

* small random GPTs (float64; with an MLP and attention-only): the window's last logits and
  every decoded step equal the formulas' loop (``reference.ref_gpt``) and the course's
  readable cached path (``prefill``/``forward_cached``);
* the stored checkpoint (float32): the same to float32 rounding, and the sampling loop draws
  the same characters with either engine, for several seeds, temperatures and top-k, through
  windows cropped on every character;
* only the blocks it serves take the fast path; the others keep the readable one;
* an overflow inside it still raises (the logits are checked on every step), a full buffer
  is a clear error.
"""

import numpy as np
import pytest

from attn_core.nn import GPTConfig, forward_cached, init_gpt, prefill
from attn_core.nn.checkpoint import load_checkpoint
from attn_core.nn.generate import generate, sample_loop
from attn_core.nn.gpt import check_params
from attn_core.nn.gpt_decoder import GPTDecoder, fast_engine, supports

from reference import assert_clear_error, ref_gpt

CONFIG = GPTConfig(vocab_size=13, n_ctx=9, d_model=16, n_heads=4, n_layers=2)
ATTENTION_ONLY = GPTConfig(vocab_size=13, n_ctx=9, d_model=16, n_heads=4, n_layers=2,
                           mlp=False)


def _params(config, seed=1, spread=0.3):
    """float64 parameters with every entry moved off its initial value (gains, biases too),
    so that every term of the forward pass matters."""
    p = init_gpt(config, np.random.default_rng(seed), dtype="float64")
    rng = np.random.default_rng(seed + 100)
    return {k: v + rng.normal(0.0, spread, v.shape) for k, v in p.items()}


def _decode_all(decoder, ids, n_prompt):
    """The fast path's logits after each of ids[n_prompt - 1:], (n - n_prompt + 1, vocab)."""
    rows = [decoder.start(ids[:n_prompt])]
    rows += [decoder.step(int(t)) for t in ids[n_prompt:]]
    return np.array(rows)


def _cached_all(params, config, ids, n_prompt):
    """The same from the readable cached path (prefill, then forward_cached per token)."""
    logits, caches = prefill(params, config, ids[:n_prompt])
    rows = [logits[-1]]
    for t in ids[n_prompt:]:
        logits, caches = forward_cached(params, config, np.array([t]), caches)
        rows.append(logits[-1])
    return np.array(rows)


@pytest.mark.parametrize("config", [CONFIG, ATTENTION_ONLY], ids=["with MLP", "attention-only"])
@pytest.mark.parametrize("n_prompt", [1, 4, 9])
def test_random_gpts_match_the_formulas_and_the_cached_path(config, n_prompt):
    params = _params(config, seed=n_prompt)
    ids = np.random.default_rng(n_prompt).integers(0, config.vocab_size, config.n_ctx)
    got = _decode_all(GPTDecoder(params, config, config.n_ctx), ids, n_prompt)
    want = np.array(ref_gpt(params, config, ids)[0])[n_prompt - 1:]  # (n - n_prompt + 1, V)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, _cached_all(params, config, ids, n_prompt), rtol=1e-12,
                               atol=1e-12)


def test_a_restart_forgets_the_last_window():
    """start() after steps (the sampling loop's crop): the new window alone counts."""
    params = _params(CONFIG)
    decoder = GPTDecoder(params, CONFIG, CONFIG.n_ctx)
    _decode_all(decoder, np.array([5, 1, 2, 3, 4, 6]), 2)
    window = np.array([7, 8, 0])
    np.testing.assert_allclose(decoder.start(window), ref_gpt(params, CONFIG, window)[0][-1],
                               rtol=1e-12, atol=1e-12)
    assert decoder.length == 3


@pytest.fixture(scope="module")
def checkpoint():
    ck = load_checkpoint()
    return ck, check_params(ck.params, ck.config)


def test_the_stored_model_matches_the_cached_path_to_float32_rounding(checkpoint):
    ck, params = checkpoint
    ids = np.asarray(ck.vocab.encode("Sampling through the cache, one character at a time: "
                                     "the window"))[:ck.config.n_ctx]
    assert params["wte"].dtype == np.float32
    got = _decode_all(GPTDecoder(params, ck.config, len(ids)), ids, 20)
    want = _cached_all(params, ck.config, ids, 20)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("temperature, top_k, seed", [(1.0, None, 0), (1.0, None, 1),
                                                     (0.6, 5, 2), (1.7, 40, 3), (0.1, None, 4)])
def test_the_stored_model_draws_the_same_text_with_either_engine(checkpoint, temperature,
                                                                  top_k, seed):
    """200 characters after a short prompt: the window fills after 50 and is cropped and
    recomputed for every character after that (the explorer's sample)."""
    ck, params = checkpoint
    prompt = np.asarray(ck.vocab.encode("The attention "))
    runs = [sample_loop(params, ck.config, prompt, 200, temperature, top_k,
                        np.random.default_rng(seed), ck.config.n_ctx, engine=engine)
            for engine in (None, fast_engine(params, ck.config))]  # None: CachedEngine
    readable, fast = runs
    assert fast.cropped and np.array_equal(fast.starts, readable.starts)
    assert np.array_equal(fast.ids, readable.ids), ck.vocab.decode(fast.new_ids)
    np.testing.assert_allclose(fast.logits, readable.logits, rtol=1e-5, atol=2e-5)


def test_generate_takes_the_fast_path_for_the_blocks_it_serves(monkeypatch):
    started = []
    monkeypatch.setattr(GPTDecoder, "start", lambda self, ids, _start=GPTDecoder.start: (
        started.append(len(ids)), _start(self, ids))[1])
    params = _params(CONFIG)
    g = generate(params, CONFIG, np.array([3, 4]), 12, seed=5)
    assert started[0] == 2 and len(started) == 1 + (2 + 12 - 1 - CONFIG.n_ctx)  # one per crop
    started.clear()
    g_readable = sample_loop(params, CONFIG, np.array([3, 4]), 12, 1.0, None,
                             np.random.default_rng(5), CONFIG.n_ctx)
    assert started == [] and np.array_equal(g.ids, g_readable.ids)


def test_only_the_tiny_gpts_blocks_take_the_fast_path():
    assert supports(CONFIG) and supports(ATTENTION_ONLY)
    linear = GPTConfig(vocab_size=13, n_ctx=9, d_model=16, n_heads=4, n_layers=2,
                       attention="linear")
    assert not supports(linear) and fast_engine(_params(linear), linear) is None
    # a mixer per layer: served only when every layer is softmax, whatever the first is
    for layers in (("softmax", "gated_delta"), ("gated_delta", "softmax"), ("softmax", "linear")):
        mixed = GPTConfig(vocab_size=13, n_ctx=9, d_model=16, n_heads=4, n_layers=2,
                          attention=layers)
        assert not supports(mixed) and fast_engine(_params(mixed), mixed) is None, layers
    both = GPTConfig(vocab_size=13, n_ctx=9, d_model=16, n_heads=4, n_layers=2,
                     attention=("softmax", "softmax"))
    assert supports(both)
    assert not supports(object())
    # learned positions are part of what it serves: without wpe, the readable path
    params = _params(CONFIG)
    del params["wpe"]
    assert fast_engine(params, CONFIG) is None


def test_an_overflow_inside_raises_and_a_full_buffer_is_named():
    params = _params(CONFIG)
    params["ln_f.g"] = params["ln_f.g"] * 1e300  # finite weights, logits past float64's range
    params["w_unembed"] = params["w_unembed"] * 1e10
    assert all(np.isfinite(a).all() for a in params.values())
    decoder = GPTDecoder(params, CONFIG, 4)
    assert_clear_error(lambda: decoder.start(np.array([1, 2])), ValueError, "the logits")
    decoder = GPTDecoder(_params(CONFIG), CONFIG, 2)
    decoder.start(np.array([1, 2]))
    assert_clear_error(lambda: decoder.step(3), ValueError, "buffers hold 2 tokens")


def test_bad_input_still_fails_by_name_at_generates_boundary():
    params = _params(CONFIG)
    assert_clear_error(lambda: generate(params, CONFIG, np.array([1, 13]), 2), ValueError,
                       "prompt_ids")
    assert_clear_error(lambda: generate(params, CONFIG, np.array([1]), 2, temperature=0),
                       ValueError, "temperature")
    assert_clear_error(lambda: generate(params, CONFIG, np.array([1]), 2, top_k=14),
                       ValueError, "top_k")


def test_a_full_windows_first_block_rows_are_the_windows_own_product(checkpoint):
    """The rows kept per (token, position) (DecoderWeights.first_qkv) are, bit for bit, what
    the window's own product gives: the same logits as without them; a shorter window is
    computed as before (None)."""
    from attn_core.nn.gpt_decoder import DecoderWeights, _norm

    ck, params = checkpoint
    weights = DecoderWeights(params, ck.config)
    g1, b1, w_qkv, b_qkv = weights.layers[0][:4]
    n_ctx = ck.config.n_ctx
    for text in ("Sampling through the cache, one character at a time: the window is full",
                 "a" * n_ctx, "The attention " * 5):
        ids = np.asarray(ck.vocab.encode(text))[:n_ctx]
        own = _norm(params["wte"][ids] + params["wpe"][:n_ctx], g1, b1, weights.eps) @ w_qkv
        own += b_qkv
        assert np.array_equal(weights.first_qkv(ids), own), text
        assert weights.first_qkv(ids[:-1]) is None
    ids = np.asarray(ck.vocab.encode("The attention " * 5))[:n_ctx]
    kept = GPTDecoder(params, ck.config, n_ctx, weights=weights).start(ids)  # rows kept
    fresh = GPTDecoder(params, ck.config, n_ctx).start(ids)  # rows made for this window
    assert np.array_equal(kept, fresh)


def test_the_loops_row_probabilities_are_next_token_probs_bit_for_bit():
    """_row_probs (the sampling loop's) against _probs (next_token_probs'): the same numbers
    on random rows with -inf entries, ties, tiny and large temperatures and every top-k; NaN
    or +inf logits raise the same error."""
    import warnings

    from attn_core.nn.generate import _probs, _row_probs

    rng = np.random.default_rng(0)
    for _ in range(2000):
        v = int(rng.integers(2, 100))
        z = rng.standard_normal(v) * rng.choice([0.1, 1, 10, 300])
        if rng.random() < 0.3:
            z[rng.integers(0, v, size=int(rng.integers(1, v)))] = -np.inf
        if rng.random() < 0.2:
            z = np.round(z)  # ties at the k-th logit
        temperature = float(rng.choice([1e-3, 0.05, 0.7, 1.0, 2.0]))
        top_k = None if rng.random() < 0.3 else int(rng.integers(1, v + 1))
        assert np.array_equal(_row_probs(z, temperature, top_k),
                              _probs(z[None], temperature, top_k)[0]), (z, temperature, top_k)
    for bad in (np.array([1.0, np.nan]), np.array([1.0, np.inf])):
        with warnings.catch_warnings(), pytest.raises(ValueError, match="overflowed"):
            warnings.simplefilter("ignore", RuntimeWarning)  # _probs' (z - max) of a NaN
            _probs(bad[None], 1.0, None)
        assert_clear_error(lambda z=bad: _row_probs(z, 1.0, None), ValueError, "overflowed")
