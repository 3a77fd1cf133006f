"""Sampling from the tiny GPT (issue 21): the KV-cached logits equal a full causal recompute
by gpt_forward (1e-12 in float64, also after the window is cropped), temperature and top-k
do what they say, and the draws follow the distribution."""

import numpy as np
import pytest

from attn_core.nn import GPTConfig, gpt_forward, init_gpt
from attn_core.nn.generate import (
    forward_cached,
    generate,
    next_token_probs,
    prefill,
)

CONFIG = GPTConfig(vocab_size=13, n_ctx=8, d_model=16, n_heads=4, n_layers=2)


def _params(config=CONFIG, seed=1, spread=0.3):
    """float64 parameters with every entry moved off its initial value (gains, biases too),
    so that every term of the forward pass matters."""
    p = init_gpt(config, np.random.default_rng(seed), dtype="float64")
    rng = np.random.default_rng(seed + 100)
    return {k: v + rng.normal(0.0, spread, v.shape) for k, v in p.items()}


def _window_logits(params, config, ids, length):
    """The reference: a full causal forward of the window that ends at ``length``."""
    window = ids[max(0, length - config.n_ctx):length]
    logits, _ = gpt_forward(params, config, window)
    return logits[-1]


ATTENTION_ONLY = GPTConfig(vocab_size=13, n_ctx=8, d_model=16, n_heads=4, n_layers=2, mlp=False)


@pytest.mark.parametrize("config", [CONFIG, ATTENTION_ONLY], ids=["with MLP", "attention-only"])
@pytest.mark.parametrize("n_prompt, n_new", [(1, 7), (3, 20), (8, 5), (12, 10)])
def test_every_step_equals_a_full_causal_recompute(n_prompt, n_new, config):
    params = _params(config)
    prompt = np.random.default_rng(n_prompt).integers(0, config.vocab_size, n_prompt)
    g = generate(params, config, prompt, n_new, temperature=1.3, seed=2)
    assert g.ids.shape == (n_prompt + n_new,) and np.array_equal(g.ids[:n_prompt], prompt)
    assert np.array_equal(g.ids[n_prompt:], g.new_ids)
    assert g.probs.shape == g.logits.shape == (n_new, config.vocab_size)
    assert g.cropped == (n_prompt + n_new - 1 > config.n_ctx)
    assert np.array_equal(g.starts, np.maximum(0, n_prompt + np.arange(n_new) - config.n_ctx))
    for j in range(n_new):
        ref = _window_logits(params, config, g.ids, n_prompt + j)
        np.testing.assert_allclose(g.logits[j], ref, rtol=0, atol=1e-12)
        np.testing.assert_allclose(g.probs[j], next_token_probs(ref, 1.3), rtol=0, atol=1e-12)


@pytest.mark.parametrize("keep", [1, 3, 8])
def test_a_smaller_keep_also_equals_a_full_recompute_of_its_windows(keep):
    params = _params()
    g = generate(params, CONFIG, np.array([2, 7]), 25, temperature=0.9, seed=4, keep=keep)
    assert g.cropped and g.starts.shape == (25,)
    lengths = 2 + np.arange(25)
    assert np.all(lengths - g.starts <= CONFIG.n_ctx) and np.all(lengths - g.starts >= 1)
    if keep == CONFIG.n_ctx:
        assert np.array_equal(g.starts, np.maximum(0, lengths - CONFIG.n_ctx))
    else:  # after each crop the window holds the last `keep` tokens, then grows again
        assert np.all(lengths - g.starts >= np.minimum(keep, lengths))
        assert (np.diff(g.starts) > 0).sum() == len(np.unique(g.starts)) - 1
    for j in range(25):
        ref, _ = gpt_forward(params, CONFIG, g.ids[g.starts[j]:lengths[j]])
        np.testing.assert_allclose(g.logits[j], ref[-1], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="keep must lie in 1..n_ctx = 8, got 9"):
        generate(params, CONFIG, np.array([2]), 3, keep=9)


def test_prefill_and_one_step_at_a_time_give_the_same_logits():
    params = _params()
    ids = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    full, caches_full = prefill(params, CONFIG, ids)
    logits, caches = prefill(params, CONFIG, ids[:1])
    rows = [logits[-1]]
    for token in ids[1:]:
        logits, caches = forward_cached(params, CONFIG, np.array([token]), caches)
        rows.append(logits[-1])
    np.testing.assert_allclose(np.array(rows), full, rtol=0, atol=1e-12)
    ref, _ = gpt_forward(params, CONFIG, ids)
    np.testing.assert_allclose(full, ref, rtol=0, atol=1e-12)
    assert caches[0].keys.shape == (CONFIG.n_heads, 8, CONFIG.d_head)
    np.testing.assert_allclose(caches[1].values, caches_full[1].values, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="exceed n_ctx = 8"):
        forward_cached(params, CONFIG, np.array([0]), caches)


def test_a_prompt_longer_than_n_ctx_is_cropped_and_said():
    params = _params()
    long_prompt = np.arange(20) % CONFIG.vocab_size
    g = generate(params, CONFIG, long_prompt, 3, temperature=0.7, seed=0)
    assert g.cropped and np.array_equal(g.ids[:20], long_prompt)
    short = generate(params, CONFIG, long_prompt[-CONFIG.n_ctx:], 3, temperature=0.7, seed=0)
    assert np.array_equal(short.new_ids, g.new_ids)
    np.testing.assert_allclose(short.logits, g.logits, rtol=0, atol=1e-12)
    assert short.cropped  # its second new token no longer fits the window of 8
    assert not generate(params, CONFIG, long_prompt[-CONFIG.n_ctx:], 1).cropped


def test_float32_generation_runs_in_float32_and_matches_float64_loosely():
    p64 = _params(spread=0.05)
    p32 = {k: v.astype(np.float32) for k, v in p64.items()}
    g32 = generate(p32, CONFIG, np.array([1, 2]), 10, temperature=1e-3, seed=0)
    assert g32.logits.dtype == np.float32
    g64 = generate(p64, CONFIG, np.array([1, 2]), 10, temperature=1e-3, seed=0)
    np.testing.assert_allclose(g32.logits[0], g64.logits[0], atol=1e-4)


# --- temperature, top-k, the draws ----------------------------------------------------------

def test_temperature_to_zero_is_argmax_and_top_k_1_is_greedy():
    params = _params()
    prompt = np.array([5, 0, 7])
    cold = generate(params, CONFIG, prompt, 15, temperature=1e-8, seed=0)
    greedy = generate(params, CONFIG, prompt, 15, top_k=1, seed=123)
    assert np.array_equal(cold.new_ids, np.argmax(cold.logits, axis=-1))
    assert np.array_equal(greedy.new_ids, np.argmax(greedy.logits, axis=-1))
    assert np.array_equal(cold.new_ids, greedy.new_ids)
    assert np.allclose(cold.probs.max(axis=-1), 1.0)
    assert np.array_equal(greedy.probs, np.eye(CONFIG.vocab_size)[greedy.new_ids])


def test_next_token_probs_against_the_formula():
    z = np.array([0.5, -1.0, 2.0, 2.0, 0.0])
    for t in (0.3, 1.0, 4.0):
        e = np.exp(z / t)
        np.testing.assert_allclose(next_token_probs(z, t), e / e.sum(), rtol=1e-14)
    p = next_token_probs(z, 1.0, top_k=3)  # keeps 2.0, 2.0, 0.5
    e = np.exp(np.array([0.5, 2.0, 2.0]))
    np.testing.assert_allclose(p, np.array([e[0], 0, e[1], e[2], 0]) / e.sum(), rtol=1e-14)
    assert next_token_probs(z, 1.0, top_k=5).tolist() == next_token_probs(z).tolist()
    np.testing.assert_allclose(next_token_probs(np.stack([z, -z]), 2.0)[1],
                               next_token_probs(-z, 2.0))  # leading dims
    with np.errstate(all="raise"):  # no overflow warnings for a tiny temperature
        assert next_token_probs(z, 1e-300).tolist() == [0, 0, 0.5, 0.5, 0]  # a tie stays one
        assert next_token_probs(z[:3], 1e-300).tolist() == [0, 0, 1]


#: Pearson's chi-square bound for 12 degrees of freedom: a correct sampler exceeds it with
#: probability below 1e-4.
CHI2_BOUND = 40
DRAWS = 1500


@pytest.mark.slow
def test_draws_follow_the_distribution():
    """Pearson's chi-square of 1500 seeded draws against the probabilities generate reports.
    The distribution is far from flat (1.6% to 20%) with every cell still filled (>= 20
    expected draws): a sampler that ignored the probabilities (uniform draws) or shifted them
    by one token would exceed the bound many times over; a correct one stays under it (it
    once ran at a near-flat 7-8% per token, where a uniform sampler passed too)."""
    params = _params()
    counts = np.zeros(CONFIG.vocab_size)
    probs = None
    for seed in range(DRAWS):
        g = generate(params, CONFIG, np.array([4]), 1, temperature=2.0, seed=seed)
        counts[g.new_ids[0]] += 1
        probs = g.probs[0] if probs is None else probs
        np.testing.assert_array_equal(g.probs[0], probs)
    expected = DRAWS * probs

    def chi2(observed):
        return float(((observed - expected) ** 2 / expected).sum())

    assert expected.min() >= 20
    # the misconceptions this test must tell apart, at their expected counts
    assert chi2(np.full_like(expected, DRAWS / expected.size)) > 10 * CHI2_BOUND  # uniform
    assert chi2(np.roll(expected, 1)) > 10 * CHI2_BOUND  # off by one token
    assert chi2(counts) < CHI2_BOUND, (chi2(counts), counts, expected)


def test_generation_is_seeded():
    params = _params()
    a = generate(params, CONFIG, np.array([1]), 12, seed=7)
    b = generate(params, CONFIG, np.array([1]), 12, seed=7)
    c = generate(params, CONFIG, np.array([1]), 12, seed=8)
    assert np.array_equal(a.ids, b.ids) and not np.array_equal(a.ids, c.ids)


# --- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("temperature, error, match", [
    (0.0, ValueError, "temperature must be a finite number > 0"),
    (-1.0, ValueError, "temperature must be a finite number > 0"),
    (float("nan"), ValueError, "temperature must be a finite number > 0.*got nan"),
    (float("inf"), ValueError, "temperature"),
    ("hot", TypeError, "temperature must be a number"),
])
def test_bad_temperature(temperature, error, match):
    with pytest.raises(error, match=match):
        next_token_probs(np.zeros(3), temperature)
    with pytest.raises(error, match=match):
        generate(_params(), CONFIG, np.array([1]), 2, temperature=temperature)


@pytest.mark.parametrize("top_k, error", [(0, ValueError), (14, ValueError), (-1, ValueError),
                                          (2.0, TypeError), (True, TypeError)])
def test_bad_top_k(top_k, error):
    with pytest.raises(error, match="top_k must"):
        generate(_params(), CONFIG, np.array([1]), 2, top_k=top_k)
    with pytest.raises(error, match=r"top_k must .*1\.\.13"):
        next_token_probs(np.zeros(13), top_k=top_k)


def test_bad_prompt_and_params():
    params = _params()
    with pytest.raises(ValueError, match="prompt_ids must be token ids in 0..12"):
        generate(params, CONFIG, np.array([1, 13]), 2)
    with pytest.raises(ValueError, match="prompt_ids must have shape"):
        generate(params, CONFIG, np.array([], dtype=int), 2)
    with pytest.raises(TypeError, match="prompt_ids must be integer"):
        generate(params, CONFIG, np.array([1.0]), 2)
    with pytest.raises(ValueError, match="n_new"):
        generate(params, CONFIG, np.array([1]), -1)
    bad = dict(params, wte=params["wte"][:5])
    with pytest.raises(ValueError, match=r"params\['wte'\] must have shape"):
        generate(bad, CONFIG, np.array([1]), 2)
    assert generate(params, CONFIG, np.array([1]), 0).new_ids.shape == (0,)


def test_a_tiny_temperature_with_far_apart_logits_is_the_argmax_without_warnings():
    z = np.array([0.0, -1e10, 30.0, -3e5])
    with np.errstate(all="raise"):  # an overflow (to -inf) would raise here
        assert next_token_probs(z, 1e-300).tolist() == [0, 0, 1, 0]
        assert next_token_probs(np.stack([z, z[::-1]]), 5e-324, top_k=2).tolist() == [
            [0, 0, 1, 0], [0, 1, 0, 0]]


def test_an_endless_length_and_a_bad_seed_are_refused_naming_them():
    from attn_core.nn.generate import MAX_NEW_TOKENS

    params = _params()
    with pytest.raises(ValueError, match=f"n_new must lie in 0..{MAX_NEW_TOKENS}.*got "
                                         f"{10**12}"):
        generate(params, CONFIG, np.array([1]), 10**12)
    with pytest.raises(ValueError, match="n_new must lie in"):
        generate(params, CONFIG, np.array([1]), MAX_NEW_TOKENS + 1)
    for seed, error in (("abc", TypeError), (1.5, TypeError), (True, TypeError), (-1, ValueError),
                        (None, TypeError)):
        with pytest.raises(error, match="seed must be an int >= 0"):
            generate(params, CONFIG, np.array([1]), 2, seed=seed)
    assert generate(params, CONFIG, np.array([1]), 2, seed=np.int64(3)).new_ids.shape == (2,)
