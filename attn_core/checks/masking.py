"""Exercise checks for notebook 07: causal, padding and sliding-window masks.

Every expected answer is computed here from the exercise's inputs with attn_core; the
hints name the mistake, never the answer.
"""

import numpy as np

from .. import examples
from ..attention import scores
from ..masks import causal_mask, padding_mask, window_mask
from ..softmax import softmax
from ._base import check_array, is_unanswered, not_yet, progressive, right, unanswered

__all__ = ["check_window_mask", "check_zeroed_row_sums", "check_visible_positions"]


def _as_bool_mask(answer):
    """The answer as a bool array if it is one, or 0/1 numbers; else None."""
    try:
        arr = np.asarray(answer)
    except (TypeError, ValueError):
        return None
    if arr.dtype == np.bool_:
        return arr
    if arr.dtype.kind in "iuf" and np.isin(arr, (0, 1)).all():
        return arr.astype(bool)
    return None


@progressive
def check_window_mask(answer, n=5, window=2):
    """Check a causal sliding-window mask of size ``(n, n)`` (True or 1 = may attend)."""
    expected = window_mask(n, window)
    hint = (f"row i allows column j when j is at most i and fewer than {window} steps back "
            f"(the token itself counts as one of the {window}).")
    if is_unanswered(answer):
        return unanswered(hint)
    got = _as_bool_mask(answer)
    if got is None:
        return not_yet("the mask should be an array of True/False (or 1/0).", hint)
    if got.shape != expected.shape:
        return not_yet(f"your mask has shape {got.shape}, the mask has shape "
                       f"{expected.shape}.", hint)
    if np.array_equal(got, expected):
        return right("Each row allows at most the window's width of keys, so the cost grows "
                     "like n times the window instead of n squared.")
    offset = np.arange(n)[:, None] - np.arange(n)[None, :]  # i - j
    if np.array_equal(got, np.abs(offset) < window):
        return not_yet("your window also looks ahead: a causal window allows only the "
                       "token itself and positions before it.")
    if np.array_equal(got, (offset >= 0) & (offset <= window)):
        return not_yet(f"your window is one too wide: it counts the token itself, so it "
                       f"reaches back {window - 1} position(s) only.")
    if window > 1 and np.array_equal(got, (offset >= 0) & (offset < window - 1)):
        return not_yet("your window is one too narrow: the token itself is one of the "
                       "positions it may see.")
    if np.array_equal(got, causal_mask(n)):
        return not_yet("that is the plain causal mask: the window also cuts off positions "
                       "too far back.")
    if np.array_equal(got, expected.T):
        return not_yet("your mask is transposed: rows are queries, columns are keys, and "
                       "a query may see only the past.")
    wrong = int((got != expected).sum())
    return not_yet(f"{wrong} of {expected.size} cells are off.", hint)


@progressive
def check_zeroed_row_sums(answer, q=None, k=None):
    """Check the row sums of the weights when the causal mask is applied AFTER the softmax.

    The weights are ``softmax(q k^T / sqrt(d_k))`` of the worked example (unless ``q``
    and ``k`` are given), with the cells above the diagonal then set to 0.
    """
    q = examples.Q if q is None else np.asarray(q, dtype=float)
    k = examples.K if k is None else np.asarray(k, dtype=float)
    unmasked = softmax(scores(q, k))
    n = unmasked.shape[-1]
    expected = np.where(causal_mask(n), unmasked, 0.0).sum(axis=-1)
    hint = ("take the unmasked weights, keep in each row only the columns the causal mask "
            "allows, and add what is left.")
    if not is_unanswered(answer):
        try:
            got = np.asarray(answer, dtype=float)
        except (TypeError, ValueError):
            got = None
        if got is not None and got.shape == expected.shape and np.all(np.isfinite(got)):
            if np.allclose(got, 1.0, atol=1e-2) and not np.allclose(expected, 1.0, atol=1e-2):
                return not_yet("every row summing to 1 is what masking BEFORE the softmax "
                               "gives; zeroing afterwards removes weight and nothing hands "
                               "it back.")
            flipped = np.where(causal_mask(n).T, unmasked, 0.0).sum(axis=-1)
            if np.allclose(got, flipped, atol=1e-2) and not np.allclose(got, expected, atol=1e-2):
                return not_yet("you kept the future columns: the causal mask keeps column j "
                               "of row i only when j <= i.")
    return check_array(answer, expected, hint=hint,
                       why="The early rows lose the most weight, so their outputs shrink the "
                           "most: the scaling differs from position to position.")


@progressive
def check_visible_positions(answer, query=3, length=2, n=4, causal=True, window=None):
    """Check which key positions (counted from 1) query ``query`` (from 1) may attend to.

    The sequence has ``length`` real tokens padded to ``n``. The mask is the padding mask,
    combined with the causal mask when ``causal``, or with the sliding-window mask of
    width ``window`` when given (which is causal itself).
    """
    pad = np.broadcast_to(padding_mask(length, n)[0], (n, n))  # (1, n) -> (n, n): keys only
    if window is not None:
        order = window_mask(n, window)
    elif causal:
        order = causal_mask(n)
    else:
        order = np.ones((n, n), dtype=bool)
    mask = order & pad

    def positions(m):
        return [int(j) + 1 for j in np.flatnonzero(m[query - 1])]

    expected = positions(mask)
    which = ("the sliding window" if window is not None
             else "the causal mask" if causal else None)
    hint = ("a key is visible when the padding mask allows it (it is a real token)"
            + (f" and {which} allows it" if which else "")
            + ". Count positions from 1.")
    if is_unanswered(answer):
        return unanswered(hint)
    try:
        got = sorted({int(p) for p in np.asarray(answer).ravel()})
    except (TypeError, ValueError):
        return not_yet("the answer should be a list of positions counted from 1.", hint)
    if got == expected:
        why = "Both masks must allow a key; combined with & they do exactly that."
        if query > length:
            why += (" The padding mask hides keys, not queries: a padded query still gets "
                    "a row of weights (its output is simply ignored later).")
        return right(why)
    if got == [p - 1 for p in expected]:
        return not_yet("those look like 0-based indices: count positions from 1, as the "
                       "article does.")
    if which and got == positions(order) and got != expected:
        return not_yet(f"you applied {which} but not the padding: keys beyond the "
                       "sequence's real length are padding and must be hidden.")
    if which and got == positions(pad) and got != expected:
        return not_yet(f"you applied the padding but not {which}: it also hides some "
                       "keys from this query.")
    if not got and expected:
        return not_yet("some key survives both masks: the padding mask hides keys, not "
                       "queries, so even a query at a padded position may see real keys.")
    return not_yet(hint)
