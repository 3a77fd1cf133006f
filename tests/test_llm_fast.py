"""SmolLM2's fast decoding path (:class:`attn_core.model.llm_fast.LLMDecoder`, what ``chat``
runs) against the references, and the checks it keeps at the public boundary.

* small random Llama-style decoders (hypothesis; float64): the prompt's last logits and
  every decoded step equal the float64 loop of ``test_llm_layers`` (query by query, head by
  head, key by key) and the course's readable cached path (``prefill``/``forward_cached``),
  with both RoPE pairings;
* the sampling loop with the fast engine draws the same tokens as with the default engine,
  through cropped windows;
* the real model (float32): the fast path's logits equal ``prefill``/``forward_cached``'s
  to float32 rounding, and greedy answers are the same tokens;
* the top-k of ``next_token_probs`` (a partition) keeps what a stable sort keeps;
* bad input still fails at the boundary with a clear error; an overflow inside the fast
  path still raises (the logits are checked on every step).
"""

import importlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_llm_layers import random_llm, reference_llm, small_llms

from attn_core import rope
from attn_core.model import llm_fast as llm_fast_module
from attn_core.model.llm import LLMConfig
from attn_core.model.llm_fast import LLMDecoder, stack_matrices
from attn_core.nn import forward_cached, next_token_probs, prefill
from attn_core.nn.generate import CachedEngine, sample_loop
from attn_core.nn.swiglu import silu

from reference import FAST, assert_clear_error

llm_generate_module = importlib.import_module("attn_core.model.llm_generate")


def _decode_all(decoder, ids, n_prompt):
    """The fast path's logits after each of ids[n_prompt - 1:], (n - n_prompt + 1, vocab)."""
    rows = [decoder.start(ids[:n_prompt])]
    rows += [decoder.step(int(t)) for t in ids[n_prompt:]]
    return np.array(rows)


@FAST
@given(case=small_llms(), split=st.integers(1, 9))
def test_random_llms_match_the_float64_loop_and_the_cached_path(case, split):
    config, ids, _, _, seed = case
    params = random_llm(config, seed)
    n_prompt = min(split, len(ids))
    got = _decode_all(LLMDecoder(params, config, len(ids)), ids, n_prompt)
    want = reference_llm(params, config, ids, lambda i, j: j <= i)[n_prompt - 1:]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    stacked = stack_matrices(dict(params), config.n_layers)  # the loader's: fewer products
    decoder = LLMDecoder(stacked, config, len(ids))
    assert all(w is not None for pair in decoder.stacked for w in pair)
    np.testing.assert_allclose(_decode_all(decoder, ids, n_prompt), want, rtol=1e-10,
                               atol=1e-10)
    logits, caches = prefill(params, config, ids[:n_prompt])
    cached = [logits[-1]]
    for t in ids[n_prompt:]:
        logits, caches = forward_cached(params, config, np.array([t]), caches)
        cached.append(logits[-1])
    np.testing.assert_allclose(got, cached, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("pairing", ["interleaved", "halves"])
def test_both_rope_pairings_match_the_cached_path(pairing):
    config = LLMConfig(vocab_size=11, n_ctx=32, d_model=12, n_heads=6, n_kv_heads=2,
                       n_layers=2, d_ff=7, rope_base=50.0, pairing=pairing)
    params = random_llm(config, 3)
    ids = np.random.default_rng(4).integers(0, 11, size=20)
    got = _decode_all(LLMDecoder(params, config, 20), ids, 13)
    want = prefill(params, config, ids)[0][12:]  # rows 12..19: after tokens 13..20
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_stack_matrices_keeps_every_value_and_layout():
    config = LLMConfig(vocab_size=5, n_ctx=8, d_model=6, n_heads=3, n_kv_heads=1, n_layers=2,
                       d_ff=4, rope_base=100.0)
    params = {k: v if v.ndim == 1 or k in ("wte", "w_unembed") else np.ascontiguousarray(v.T).T
              for k, v in random_llm(config, 1).items()}  # (in, out) views of (out, in)
    stacked = stack_matrices(dict(params), config.n_layers)
    assert set(stacked) == set(params)
    for name, value in params.items():
        np.testing.assert_array_equal(stacked[name], value)
        assert stacked[name].strides == value.strides
    w_q, w_v = stacked["h1.attn.w_q"], stacked["h1.attn.w_v"]
    assert w_q.base is w_v.base and w_q.base.shape == (6 + 2 + 2, 6)
    decoder = LLMDecoder(params, config, 2)  # separate arrays: the separate products
    assert decoder.stacked[0] == (None, None)


def test_the_buffers_refuse_a_token_past_their_capacity():
    config = LLMConfig(vocab_size=5, n_ctx=8, d_model=4, n_heads=2, n_kv_heads=1, n_layers=1,
                       d_ff=3, rope_base=100.0)
    decoder = LLMDecoder(random_llm(config, 0), config, 3)
    decoder.start(np.array([1, 2, 3]))
    assert_clear_error(lambda: decoder.step(4), ValueError, r"hold 3 tokens and are full")


@pytest.mark.parametrize("greedy", [True, False])
def test_the_loop_draws_the_same_tokens_with_either_engine_through_crops(greedy):
    config = LLMConfig(vocab_size=13, n_ctx=12, d_model=8, n_heads=4, n_kv_heads=2,
                       n_layers=2, d_ff=6, rope_base=100.0)
    params = random_llm(config, 7)
    prompt = np.random.default_rng(1).integers(0, 13, size=15)  # longer than the context
    runs = []
    for engine in (None, lambda capacity: LLMDecoder(params, config, capacity)):
        runs.append(sample_loop(params, config, prompt, 20, 1.0, 1 if greedy else 5,
                                np.random.default_rng(0), 9, n_ctx=10, engine=engine))
    fast, slow = runs
    assert fast.cropped and slow.cropped and len(set(fast.starts.tolist())) > 2
    np.testing.assert_array_equal(fast.ids, slow.ids)
    np.testing.assert_array_equal(fast.starts, slow.starts)
    np.testing.assert_allclose(fast.logits, slow.logits, rtol=1e-10, atol=1e-10)


def test_cached_engine_is_prefill_and_forward_cached():
    config = LLMConfig(vocab_size=9, n_ctx=10, d_model=4, n_heads=2, n_kv_heads=1, n_layers=1,
                       d_ff=3, rope_base=100.0)
    params, ids = random_llm(config, 2), np.array([1, 5, 2, 8])
    engine = CachedEngine(params, config)
    first = engine.start(ids[:3])
    after = engine.step(int(ids[3]))
    full = prefill(params, config, ids)[0]
    assert engine.length == 4
    np.testing.assert_allclose([first, after], full[2:], rtol=1e-12, atol=1e-12)


def test_an_overflow_inside_the_fast_path_is_an_error_not_nan():
    config = LLMConfig(vocab_size=5, n_ctx=8, d_model=4, n_heads=2, n_kv_heads=1, n_layers=1,
                       d_ff=3, rope_base=100.0)
    params = {k: v.astype(np.float32) for k, v in random_llm(config, 0).items()}
    params["w_unembed"] = params["wte"].T
    decoder = LLMDecoder(params, config, 4)
    assert np.isfinite(decoder.start(np.array([1, 2]))).all()
    for name in ("h0.attn.w_q", "h0.attn.w_k"):  # scores ~1e60: inf in float32
        params[name] *= np.float32(1e30)  # in place: the decoder reads the same arrays
    assert_clear_error(lambda: decoder.step(3), ValueError, r"the logits overflowed")
    assert_clear_error(lambda: LLMDecoder(params, config, 4).start(np.array([1, 2])),
                       ValueError, r"overflow")


@pytest.mark.parametrize("call, error, match", [
    (lambda m: llm_generate_module.llm_generate([1, 99], 2, model=m), ValueError,
     r"prompt_ids"),
    (lambda m: llm_generate_module.llm_generate([[1, 2]], 2, model=m), ValueError,
     r"prompt_ids must be a 1-D array"),
    (lambda m: llm_generate_module.llm_generate([1], 2, model=({}, m[1])), ValueError,
     r"params is missing"),
    (lambda m: llm_generate_module.llm_generate([1], 2, model=(m[0], "config")), TypeError,
     r"config must be an LLMConfig"),
    (lambda m: llm_generate_module.llm_generate([1], 2, temperature=0, model=m), ValueError,
     r"temperature"),
    (lambda m: llm_generate_module.llm_generate([1], 2, context=99, model=m), ValueError,
     r"context must be at most"),
])
def test_the_public_boundary_still_refuses_bad_input(call, error, match):
    config = LLMConfig(vocab_size=7, n_ctx=16, d_model=4, n_heads=2, n_kv_heads=1, n_layers=1,
                       d_ff=3, rope_base=100.0)
    assert_clear_error(lambda: call((random_llm(config, 0), config)), error, match)


def _top_k_by_stable_sort(z, k):
    """The kept entries of a top-k, written independently: a stable sort, largest first."""
    keep = np.zeros(z.shape, dtype=bool)
    for idx in np.ndindex(z.shape[:-1]):
        order = sorted(range(z.shape[-1]), key=lambda j: -z[idx][j])  # stable: lower id first
        keep[idx][order[:k]] = True
    return keep


@FAST
@given(data=st.data())
def test_top_k_keeps_what_a_stable_sort_keeps(data):
    shape = data.draw(st.sampled_from([(6,), (2, 5), (3, 1), (2, 2, 4)]))
    z = np.array(data.draw(st.lists(st.integers(-2, 2), min_size=int(np.prod(shape)),
                                    max_size=int(np.prod(shape))))).reshape(shape) * 0.5
    k = data.draw(st.integers(1, shape[-1]))
    kept = next_token_probs(z, top_k=k) > 0
    np.testing.assert_array_equal(kept, _top_k_by_stable_sort(z, k))


# --- the real model (skipped without its package) ---------------------------------------------


@pytest.fixture(scope="module")
def llm():
    from attn_core.model.llm_file import LLMFileError, load_llm
    try:
        return load_llm()
    except LLMFileError as exc:  # pragma: no cover - make setup installs it
        pytest.skip(str(exc))


def test_real_model_fast_path_equals_the_cached_path(llm):
    from attn_core.model.llm_tokenizer import llm_tokenizer
    from attn_core.threads import blas_threads
    params, config = llm
    ids = np.array(llm_tokenizer().encode(
        "Attention lets every word of a sentence look at the other words.").ids)
    with blas_threads():
        got = _decode_all(LLMDecoder(params, config, len(ids)), ids, len(ids) - 3)
        logits, caches = prefill(params, config, ids[:-3])
        want = [logits[-1]]
        for t in ids[-3:]:
            logits, caches = forward_cached(params, config, np.array([t]), caches)
            want.append(logits[-1])
    want = np.array(want)
    assert got.dtype == np.float32
    # float32: the products run in another order; the logits are ~20 in size
    assert np.max(np.abs(got - want)) < 1e-3 * np.max(np.abs(want))
    np.testing.assert_array_equal(got.argmax(axis=-1), want.argmax(axis=-1))


def test_real_model_greedy_answer_is_the_same_with_either_engine(llm, monkeypatch):
    fast = llm_generate_module.chat("Name a colour.", max_new=8, greedy=True)
    loop = llm_generate_module.sample_loop
    monkeypatch.setattr(llm_generate_module, "sample_loop",
                        lambda *a, engine=None, **k: loop(*a, **k))  # the default engine
    slow = llm_generate_module.chat("Name a colour.", max_new=8, greedy=True)
    np.testing.assert_array_equal(fast.new_ids, slow.new_ids)
    assert fast.text == slow.text


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pairing", ["interleaved", "halves"])
def test_the_rope_table_turns_exactly_as_rope(pairing, dtype):
    """The decoder's RoPE (``x * cos + x[partner] * sin``, in place, q's and k's heads in one
    call) is bit for bit attn_core.rope: the same two rounded products and one rounded sum."""
    n, heads, d = 37, 5, 16
    x = np.random.default_rng(5).standard_normal((n, heads, d)).astype(dtype) * 3
    cos, sin, partner = llm_fast_module._rope_table(n, d, 500.0, np.dtype(dtype), pairing)
    got = llm_fast_module._turn(x.copy(), cos[:, None], sin[:, None], partner)  # (n, h, d)
    want = rope(x.swapaxes(0, 1), np.arange(n), base=500.0, pairing=pairing)  # (h, n, d)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want.swapaxes(0, 1))
    one = llm_fast_module._turn(x[30].copy(), cos[30], sin[30], partner)  # a step's (h, d)
    np.testing.assert_array_equal(one, want[:, 30])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_silu_times_in_place_equals_the_readable_swiglu(dtype):
    """Written over ``up`` (the half of the decoder's own product), equal to silu(g) * u,
    including gates far below exp's range (silu's limit 0, no NaN)."""
    g = np.random.default_rng(6)
    gu = (g.standard_normal((9, 2 * 13)) * 4).astype(dtype)
    gu[0, :3] = [-1e4, -200.0, 1e4]
    gate, up = gu[:, :13], gu[:, 13:]
    want = silu(gate.astype(np.float64)) * up.astype(np.float64)
    with np.errstate(over="ignore"):
        got = llm_fast_module._silu_times(gate, up)
    assert got.base is gu.base or got.base is gu  # the result is ``up``'s memory
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-14,
                               atol=1e-30)
