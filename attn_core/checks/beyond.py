"""Exercise checks for notebook 18, beyond the quadratic: linear attention, sparse patterns,
latent caches.

Each expected answer is computed here with attn_core's maths from the exercise's inputs
(never typed in); a wrong answer gets a hint in words, and the usual slips (the state read
before the token is folded in, the normaliser left out, every key seen; the latent counted
twice or per head; the window's steps for the stride's) are named.
"""

import math

import numpy as np

from .._validate import check_positive_int
from ..cost import kv_cache_bytes
from ..cost_beyond import mla_cache_bytes
from ..linear_attention import elu_feature_map, linear_attention
from ..masks import window_mask
from ..sparse import fixed_mask, layers_to_connect, local_global_mask, strided_mask
from ._base import check_number, not_yet, progressive, read_number
from ._practice import Case, Mistake, judge

__all__ = ["check_layers_to_connect", "check_linear_recurrence", "check_mla_cache_bytes"]


def _exclusive(q, k, v):
    """The slip of reading the state before the token's own key and value are folded in."""
    fq, fk = elu_feature_map(q), elu_feature_map(k)
    sim = np.tril(fq @ fk.T, -1)
    den = sim.sum(axis=-1, keepdims=True)
    return np.divide(sim @ v, den, out=np.zeros((len(q), v.shape[1])), where=den > 0)


def _unnormalised(q, k, v):
    fq, fk = elu_feature_map(q), elu_feature_map(k)
    return np.tril(fq @ fk.T) @ v


def _no_feature_map(q, k, v):
    sim = np.tril(q @ k.T)
    return sim @ v / sim.sum(axis=-1, keepdims=True)


def _with_feature_map(phi):
    """Causal linear attention with another feature map ``phi`` (the slips of the map)."""
    def fn(q, k, v):
        sim = np.tril(phi(q) @ phi(k).T)
        return sim @ v / sim.sum(axis=-1, keepdims=True)
    return fn


def _elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


@progressive
def check_linear_recurrence(fn, seed=18):
    """Code exercise: ``fn(q, k, v)`` is causal linear attention written as a recurrence,
    ``(n, d_k), (n, d_k), (n, d_v) -> (n, d_v)``."""
    hint = ("keep two running sums: a d_k x d_v matrix that adds phi(key) times value (an outer "
            "product) at each token, and a d_k vector that adds phi(key). Fold the token in "
            "first, then its output is phi(query) times the matrix, divided by phi(query) "
            "dotted with the vector.")
    g = np.random.default_rng(seed)
    cases = []
    for n, d_k, d_v in ((5, 3, 2), (1, 2, 4), (9, 4, 3)):
        q, k, v = g.standard_normal((n, d_k)), g.standard_normal((n, d_k)), \
            g.standard_normal((n, d_v))
        cases.append(Case(f"n = {n}, d_k = {d_k}, d_v = {d_v}", (q, k, v),
                          linear_attention(q, k, v, causal=True)))
    mistakes = [
        Mistake("the state is read before the token's own key and value are added: each token "
                "must also see itself (the first has nothing else to see).", _exclusive),
        Mistake("every query sees every key: under the causal mask the sums may only hold the "
                "tokens up to the current one.",
                lambda q, k, v: linear_attention(q, k, v, causal=False)),
        Mistake("the output is not divided by the normaliser: without it the weights of a row "
                "do not sum to 1 and the output grows with the number of tokens.",
                _unnormalised),
        Mistake("the feature map is missing: phi (elu + 1) keeps every similarity positive, "
                "the raw dot products can be negative.", _no_feature_map),
        Mistake("the feature map is exp, not elu + 1: both are positive, but exp grows "
                "exponentially for positive inputs where elu + 1 grows linearly.",
                _with_feature_map(np.exp)),
        Mistake("the feature map is elu without the + 1: elu is negative for negative inputs "
                "(down to -1), so similarities and the normaliser can be negative or 0; adding "
                "1 makes the map positive everywhere.", _with_feature_map(_elu)),
    ]
    return judge(fn, cases, mistakes, what="output", stub_hint=hint,
                 shape_rule="(n, d_v), one output row per token",
                 why="the same numbers as the chunked linear form, with a state whose size "
                     "does not depend on n.")


@progressive
def check_mla_cache_bytes(answer, n, layers, n_heads, d_head, d_c, d_rope, dtype="float16"):
    """Exercise: bytes of a multi-head latent attention cache after ``n`` tokens."""
    hint = ("per token and per layer the cache keeps one latent vector of d_c numbers and one "
            "rotary key of d_rope numbers, shared by every head; multiply by the tokens, the "
            "layers and the bytes per number.")
    got, feedback = read_number(answer, hint, "a single whole number of bytes")
    if feedback is not None:
        return feedback
    expected = mla_cache_bytes(n, layers, d_c, d_rope, dtype)
    size = np.dtype(dtype).itemsize
    per = n * layers * size
    wide = mla_cache_bytes(n, layers, d_c, d_rope, "float32")
    if size != 4 and np.isclose(got, wide, rtol=1e-9, atol=0.5):
        also = (" (If you counted the latent twice: it is stored once, keys and values are "
                "both rebuilt from it.)" if wide == 2 * expected else "")
        return not_yet(f"that counts 4 bytes a number (float32); the cache here holds "
                       f"{dtype} numbers of {size} bytes each.{also}", hint)
    slips = [
        (kv_cache_bytes(n, layers, n_heads, d_head, dtype),
         "that is the multi-head cache, keys and values of every head: the latent replaces them"),
        (2 * expected, "the latent is stored once: keys and values are both rebuilt from it"),
        (per * d_c, "the rotary key part is cached too, beside the latent"),
        (per * n_heads * (d_c + d_rope), "one latent and one rotary key per token and layer, "
                                         "not per head"),
        (per * (d_c + n_heads * d_rope), "the rotary key is shared by all heads: one per token "
                                         "and layer"),
        (expected / size, f"that counts numbers, not bytes (each {dtype} number takes "
                          f"{size} bytes)"),
        (expected / layers, f"that is one layer's cache; each of the {layers} layers has one"),
    ]
    for value, wrong in slips:
        if value != expected and np.isclose(got, value, rtol=1e-9, atol=0.5):
            return not_yet(wrong + ".", hint)
    if np.isclose(got, expected / 2**20) or np.isclose(got, expected / 2**10):
        return not_yet("give the answer in bytes, not KiB or MiB.", hint)
    mha = kv_cache_bytes(n, layers, n_heads, d_head, dtype)
    return check_number(got, expected, hint=hint, rtol=1e-9, atol=0.5,
                        why=f"{mha / expected:.0f} times less than the multi-head cache of the "
                            "same model.")


PATTERNS = ("window", "strided", "fixed", "local+global")
#: Positions of check_layers_to_connect stay below this (the reference composes n x n masks).
MAX_POSITION = 1024

#: Each pattern's wrong counts: ``(distance, size, window count) -> [(value, message)]``.
_PATTERN_SLIPS = {
    "window": lambda d, s, w: [
        (math.ceil(d / s), "a window of w covers the position itself and the w - 1 before it: "
                           "each layer carries information w - 1 positions forward, not w.")],
    "strided": lambda d, s, w: [
        (w, "that would be a sliding window's count; the strided pattern also reads every "
            "stride-th position, a long jump."),
        (math.ceil(d / s), "a path can mix the pattern's long and short steps: it need not "
                           "hop one stride at a time.")],
    "fixed": lambda d, s, w: [
        (w, "that would be a sliding window's count; the fixed pattern also reads the summary "
            "position at the end of every earlier block."),
        (math.ceil(d / s), "information need not cross one block per layer: every later "
                           "position reads each earlier block's summary directly.")],
    "local+global": lambda d, s, w: [
        (w, "that would be the local band's count alone; the global token is a shortcut: "
            "every position reads it and it reads every position."),
        (math.ceil(d / s), "the band's steps are not the only way: a path through the global "
                           "token reaches any position.")],
}


def _pattern(name, n, size):
    return {"window": lambda: window_mask(n, size), "strided": lambda: strided_mask(n, size),
            "fixed": lambda: fixed_mask(n, size),
            "local+global": lambda: local_global_mask(n, size, 1)}[name]()


@progressive
def check_layers_to_connect(answer, pattern, size, i, j):
    """Exercise: how many stacked layers with ``pattern`` (window / stride / radius ``size``)
    before output ``i`` can depend on input ``j`` (``j <= i``)."""
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {PATTERNS}, got {pattern!r}")
    size = check_positive_int(size, "size")
    i = check_positive_int(i, "i", minimum=0)
    j = check_positive_int(j, "j", minimum=0)
    if j > i or i >= MAX_POSITION:
        raise ValueError(f"the positions must satisfy 0 <= j <= i < {MAX_POSITION} (an output "
                         f"depends on inputs at or before it), got i = {i} and j = {j}")
    hint = {"window": "each layer moves information at most window - 1 positions forward; "
                      "count how many such moves cover the distance.",
            "strided": "one layer reaches the last stride positions and every stride-th one "
                       "before them; a path may take a long jump first and short steps after "
                       "it: find the fewest steps that land on the input.",
            "fixed": "inside a block everything is one step; across blocks information must "
                     "go through a summary position at the end of a block.",
            "local+global": "the global token sees everyone and everyone sees it: a path "
                            "through it has two steps."}[pattern]
    got, feedback = read_number(answer, hint, "a whole number of layers")
    if feedback is not None:
        return feedback
    n = i + 1
    expected = int(layers_to_connect(_pattern(pattern, n, size), max_layers=n)[i, j])
    distance = i - j
    window = math.ceil(distance / max(size - 1, 1))
    slips = [(1, "one layer is not enough: the input is outside the output's own pattern."),
             *_PATTERN_SLIPS[pattern](distance, size, window)]
    for value, wrong in slips:
        if got == value != expected:
            return not_yet(wrong, hint)
    return check_number(got, expected, hint=hint, atol=0.5,
                        why=f"composing the pattern with itself {expected} time(s) is the "
                            "first that links the two positions.")
