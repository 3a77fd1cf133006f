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
from ._base import not_yet, read_number, right
from ._practice import Case, Mistake, judge

__all__ = ["check_gqa_cache_bytes", "check_receptive_field", "check_repeat_kv"]


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
                       f"{n_kv_heads} key/value heads, and only those are cached. {hint}")
    if np.isclose(got, expected / 2):
        return not_yet(f"that is the keys or the values alone. {hint}")
    if np.isclose(got, expected / layers):
        return not_yet(f"that is one layer's cache; each of the {layers} layers has one. {hint}")
    if np.isclose(got, expected / 2**30) or np.isclose(got, expected / 2**20):
        return not_yet(f"give the answer in bytes, not GiB or MiB. {hint}")
    if not np.isclose(got, expected, rtol=1e-9, atol=0.5):
        return not_yet(hint)
    return right(f"{n_heads // n_kv_heads} times less than multi-head attention with "
                 f"{n_heads} key/value heads.")


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
    if got == window and layers > 1:
        return not_yet(f"that is one layer's window; {layers} layers are stacked. {hint}")
    if got == window * layers:
        return not_yet(f"neighbouring windows overlap by one position (the token they share). "
                       f"{hint}")
    if got == expected - 1:
        return not_yet(f"one short: count the token itself. {hint}")
    if got != expected:
        return not_yet(hint)
    return right("layers x (window - 1) positions back, plus the token itself.")


def check_repeat_kv(fn, seed=16):
    """Code exercise: ``fn(k, groups)`` turns ``(n_kv, n, d)`` key heads into ``(n_kv * groups,
    n, d)``, query head ``i`` getting key/value head ``i // groups``."""
    hint = ("query heads 0 .. groups-1 share key/value head 0, the next groups share head 1, and "
            "so on: each head is repeated groups times in a row (np.repeat along axis 0).")
    g = np.random.default_rng(seed)
    cases = []
    for n_kv, groups in ((2, 3), (1, 4), (3, 1), (4, 2)):
        k = g.standard_normal((n_kv, 5, 3))
        cases.append(Case(f"{n_kv} key/value heads with groups = {groups}", (k, groups),
                          repeat_kv(k, groups)))
    mistakes = [
        Mistake("the heads come out in the order 0, 1, .., 0, 1, ..: that tiles the key/value "
                "heads, so query head 1 reads head 1 instead of head 0.",
                lambda k, groups: np.tile(k, (groups, 1, 1))),
        Mistake("the tokens are repeated, not the heads: repeat along the head axis (0).",
                lambda k, groups: np.repeat(k, groups, axis=1)),
        Mistake("nothing is repeated: there must be one key head per query head.",
                lambda k, groups: k),
    ]
    return judge(fn, cases, mistakes, what="key heads", stub_hint=hint,
                 shape_rule="n_kv * groups heads of (n, d)",
                 why="each key/value head serves a run of neighbouring query heads, as in "
                     "PyTorch's repeat_interleave and attn_core.multihead.repeat_kv.")
