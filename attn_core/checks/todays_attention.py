"""Exercise checks for notebook 16, attention in today's models.

Each expected answer is computed here with attn_core's maths from the exercise's inputs
(never typed in); a wrong answer gets a hint that points the way without giving it, and the
usual slips (the query heads counted instead of the key/value heads, the window alone, the
heads tiled instead of repeated) are named.
"""

import numpy as np

from ..cost import kv_cache_bytes
from ..masks import receptive_field, window_mask
from ..multihead import repeat_kv
from ._base import check_number, not_yet, progressive, read_number
from ._practice import Case, Mistake, judge

__all__ = ["check_gqa_cache_bytes", "check_receptive_field", "check_repeat_kv"]


@progressive
def check_gqa_cache_bytes(answer, n, layers, n_heads, n_kv_heads, d_head, dtype="float16"):
    """Exercise: bytes of a grouped-query model's KV cache at ``n`` tokens."""
    hint = ("the cache stores keys and values of the key/value heads only: every layer, every "
            "token, every key/value head, a key row and a value row of d_head numbers.")
    got, feedback = read_number(answer, hint, "a single whole number of bytes")
    if feedback is not None:
        return feedback
    expected = kv_cache_bytes(n, layers, n_kv_heads, d_head, dtype)
    if n_heads != n_kv_heads and np.isclose(got, kv_cache_bytes(n, layers, n_heads, d_head,
                                                                 dtype)):
        return not_yet(f"that is the multi-head cache: {n_heads} query heads share "
                       f"{n_kv_heads} key/value heads, and only those are cached.", hint)
    size = np.dtype(dtype).itemsize
    numbers = f"a count of numbers, not of bytes (each {dtype} number takes {size} bytes)"
    if np.isclose(got, expected / 2):  # in 16-bit numbers both slips give half: name both
        return not_yet("that is the keys or the values alone"
                       + (f", or {numbers}." if size == 2 else "."), hint)
    if size > 2 and np.isclose(got, expected / size):
        return not_yet(f"that is {numbers}.", hint)
    for other in (4, 8):  # the bytes of a 32- or 64-bit number where the cache's are smaller
        if other > size and np.isclose(got, expected / size * other):
            return not_yet(f"that counts {other} bytes per number; the cache holds {dtype} "
                           f"numbers, {size} bytes each.", hint)
    if np.isclose(got, expected / layers):
        return not_yet(f"that is one layer's cache; each of the {layers} layers has one.", hint)
    if np.isclose(got, expected / n):
        return not_yet("that is the cache of one token; it holds all the tokens.", hint)
    if np.isclose(got, expected / 2**30) or np.isclose(got, expected / 2**20):
        return not_yet("give the answer in bytes, not GiB or MiB.", hint)
    return check_number(got, expected, hint=hint, rtol=1e-9, atol=0.5,
                        why=f"{n_heads // n_kv_heads} times less than multi-head attention "
                            f"with {n_heads} key/value heads.")


@progressive
def check_receptive_field(answer, window, layers):
    """Exercise: how many input positions the last token can depend on after ``layers``
    sliding-window layers of width ``window`` (itself included), in a long text."""
    hint = ("one layer lets a token read the window - 1 positions before it; the next layer "
            "reads tokens that have already read their own windows. Count the positions "
            "reached, the token's own included.")
    got, feedback = read_number(answer, hint, "a whole number of positions")
    if feedback is not None:
        return feedback
    n = layers * window + 2  # long enough that the reach never hits position 0
    expected = int(receptive_field(window_mask(n, window), layers)[-1].sum())
    slips = [(window, f"that is one layer's window; {layers} layers are stacked."),
             (window * layers, "neighbouring windows overlap by one position (the token they "
                               "share)."),
             (expected - 1, "one short: count the token itself."),
             (window**layers, "the windows of different tokens overlap: positions reached twice "
                              "count once, so each layer adds the same number of positions "
                              "to the reach: it grows in steps, not by a factor.")]
    for value, wrong in slips:
        if got == value != expected:
            return not_yet(wrong, hint)
    return check_number(got, expected, hint=hint, atol=0.5,
                        why="the last token reaches layers x (window - 1) positions back, plus "
                            "itself.")


@progressive
def check_repeat_kv(fn, seed=16):
    """Code exercise: ``fn(k, groups)`` turns ``(n_kv, n, d)`` key heads into ``(n_kv * groups,
    n, d)``, query head ``i`` getting key/value head ``i // groups``."""
    hint = ("query heads 0 to groups - 1 share key/value head 0, the next groups of them share "
            "head 1, and so on: each key/value head is repeated groups times in a row, along "
            "the head axis.")
    g = np.random.default_rng(seed)
    cases = []
    for n_kv, groups in ((2, 3), (1, 4), (3, 1), (4, 2)):
        k = g.standard_normal((n_kv, 5, 3))
        cases.append(Case(f"{n_kv} key/value heads with groups = {groups}", (k, groups),
                          repeat_kv(k, groups)))
    mistakes = [
        Mistake("the heads come out as head 0, head 1 and so on, then head 0 again: that "
                "tiles the key/value heads, so query head 1 reads head 1 instead of head 0.",
                lambda k, groups: np.tile(k, (groups, 1, 1))),
        Mistake("the tokens are repeated, not the heads: repeat along the head axis (0).",
                lambda k, groups: np.repeat(k, groups, axis=1)),
        Mistake("nothing is repeated: there must be one key head per query head.",
                lambda k, groups: k),
    ]
    return judge(fn, cases, mistakes, what="key heads", stub_hint=hint,
                 shape_rule="one key head per query head, the key/value heads times groups, each "
                            "of shape (n, d)",
                 why="each key/value head serves a run of neighbouring query heads, as in "
                     "PyTorch's repeat_interleave and attn_core.multihead.repeat_kv.")
