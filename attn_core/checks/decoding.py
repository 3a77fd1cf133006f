"""Exercise checks for notebook 13, decoding with a key/value cache.

Each expected answer is computed here with attn_core's maths from the exercise's inputs
(never typed in); a wrong answer gets a hint that points the way without giving it.
"""

import numpy as np

from ..attention import attention
from ..cost import _dtype_size, kv_cache_bytes
from ..masks import causal_mask
from ._base import _as_sentence, is_unanswered, not_yet, progressive, read_number, right, unanswered
from ._practice import LearnerTimeout, run_learner

__all__ = ["check_decode_row", "check_kv_cache_bytes", "check_longest_context"]


@progressive
def check_kv_cache_bytes(answer, n, layers, heads, d_head, dtype="float16"):
    """Exercise: bytes of the key/value cache of a model shape at ``n`` tokens."""
    hint = ("every layer keeps, for every token and every head, one key row and one value row "
            f"of d_head numbers, each {_dtype_size(dtype)} bytes.")
    got, feedback = read_number(answer, hint, "a single whole number of bytes")
    if feedback is not None:
        return feedback
    expected = kv_cache_bytes(n, layers, heads, d_head, dtype)
    if np.isclose(got, expected / 2):
        return not_yet("that is the keys or the values alone.", hint)
    if np.isclose(got, expected / layers):
        return not_yet(f"that is one layer's cache; each of the {layers} layers has one.", hint)
    if np.isclose(got, expected / _dtype_size(dtype)):
        return not_yet("that counts numbers, not bytes.", hint)
    if np.isclose(got, expected / 2**30) or np.isclose(got, expected / 2**20):
        return not_yet("give the answer in bytes, not GiB or MiB.", hint)
    if not np.isclose(got, expected, rtol=1e-9, atol=0.5):
        return not_yet(hint)
    return right("2 x layers x heads x tokens x d_head x bytes per number.")


@progressive
def check_longest_context(answer, budget_bytes, layers, heads, d_head, dtype="float16"):
    """Exercise: the most tokens whose key/value cache fits in ``budget_bytes``."""
    per_token = kv_cache_bytes(1, layers, heads, d_head, dtype)
    hint = ("work out the bytes one token adds to the cache (all layers, keys and values), "
            "then how many whole tokens fit in the budget.")
    got, feedback = read_number(answer, hint, "a whole number of tokens")
    if feedback is not None:
        return feedback
    expected = budget_bytes // per_token
    if np.isclose(got, budget_bytes / per_token) and got != expected:
        return not_yet("a token is cached whole or not at all: round down.", hint)
    if np.isclose(got, 2 * expected, atol=2):
        return not_yet("the cache holds keys and values.", hint)
    if got == expected + 1:
        return not_yet("one token too many: round down.", hint)
    if got != expected:
        return not_yet(hint)
    return right("the cache grows by the same number of bytes with every token.")


@progressive
def check_decode_row(fn, n=6, d_k=4, d_v=3, seed=13):
    """Code exercise: ``fn(q_t, K, V)`` returns the output row of the newest token.

    ``q_t`` is ``(d_k,)``, ``K`` ``(t, d_k)`` and ``V`` ``(t, d_v)`` hold the cached keys
    and values of tokens ``0..t-1`` (the newest last). The check runs ``fn`` for every
    ``t`` and compares with row ``t - 1`` of full causal attention, on a random sequence and
    on one whose scores reach thousands (where a softmax without the max shift overflows).
    """
    hint = ("one cached step is one row of the attention of notebook 06, for the newest "
            "query alone; the cache holds only the past, so no mask is needed.")
    if is_unanswered(fn):
        return unanswered(hint)
    if not callable(fn):
        return not_yet("pass your function itself (its name, no brackets).", hint)
    g = np.random.default_rng(seed)
    q, k, v = g.standard_normal((n, d_k)), g.standard_normal((n, d_k)), g.standard_normal((n, d_v))
    runs = [("a random sequence", q, k), ("a sequence whose scores reach thousands",
                                          80.0 * q, 80.0 * k)]
    for label, qs, ks in runs:
        full, _ = attention(qs, ks, v, mask=causal_mask(n))
        for t in range(1, n + 1):
            try:
                result = run_learner(fn, qs[t - 1].copy(), ks[:t].copy(), v[:t].copy())
                if result is None or result is Ellipsis:
                    return unanswered(f"your function returns None: write its body. "
                                      f"{_as_sentence(hint)}")
                got = np.asarray(result, dtype=float)
            except LearnerTimeout as exc:
                return not_yet(f"on {label}, with {t} cached token(s), {exc}")
            except Exception as exc:  # the learner's code may fail in any way: say how
                return not_yet(f"your function raised {type(exc).__name__}: {exc}", hint)
            if got.shape != (d_v,):
                return not_yet(f"with {t} cached tokens your function returned shape "
                               f"{got.shape}; one output row has shape ({d_v},).", hint)
            if np.allclose(got, full[t - 1], atol=1e-9, rtol=1e-9):
                continue
            if not np.all(np.isfinite(got)):
                return not_yet(f"on {label}, with {t} cached token(s), your row holds NaN or "
                               "infinite values: exp overflows for scores this large. "
                               "Subtract the largest score before exponentiating; it cancels "
                               "in the division.", hint)
            unscaled, _ = attention(qs, ks, v, mask=causal_mask(n), scale=1.0)
            if np.allclose(got, unscaled[t - 1], atol=1e-9):
                return not_yet("the scores are not scaled.", hint)
            return not_yet(f"on {label}, with {t} cached token(s), the row differs from "
                           "causal attention.", hint)
    return right(f"For every t from 1 to {n}, one query against the cache gives the causal "
                 "row, even for scores in the thousands.")
