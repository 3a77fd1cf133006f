"""Exercise checks for notebook 08, multi-head attention.

Each expected answer is computed here from the exercise's inputs with attn_core's maths
(never typed in); a wrong answer gets a hint that points the way without giving it.
"""

import numpy as np

from ..multihead import multi_head_attention, split_heads
from ._base import check_array, is_unanswered, not_yet, progressive, right, unanswered

__all__ = ["check_head_dim", "check_valid_head_counts", "check_weights_shape",
           "check_head_queries"]


def _head_dim(d_model, h):
    """d_k as split_heads produces it: the width of one head's slice."""
    return split_heads(np.zeros((1, d_model)), h).shape[-1]


def _is_valid(d_model, h):
    try:
        split_heads(np.zeros((1, d_model)), h)
    except ValueError:
        return False
    return True


@progressive
def check_head_dim(answer, d_model=768, h=12):
    """Exercise: the per-head width d_k for ``d_model`` split into ``h`` heads."""
    hint = (f"The {h} heads share the {d_model} dimensions equally, so each head gets "
            "d_model / h of them.")
    if is_unanswered(answer):
        return unanswered(hint)
    expected = _head_dim(d_model, h)
    try:
        got = float(answer)
    except (TypeError, ValueError):
        return not_yet("the answer should be a single whole number.", hint)
    if got == expected:
        return right(f"Each head works in d_k = d_model / h dimensions: {h} heads fill "
                     f"the {d_model} columns exactly.")
    if got in (d_model * h, d_model + h, d_model - h):
        return not_yet("the heads split d_model, they do not add to it or multiply it.", hint)
    if got == d_model:
        return not_yet("that is the whole model width; one head gets a slice of it.", hint)
    return not_yet(hint)


@progressive
def check_valid_head_counts(answer, d_model=12):
    """Exercise: every head count h (1 <= h <= d_model) that split_heads accepts."""
    hint = ("A head count h is valid when d_model / h is a whole number (no remainder); try "
            "each h from 1 up to d_model.")
    if is_unanswered(answer):
        return unanswered(hint)
    try:
        got = sorted({int(h) for h in answer})
    except (TypeError, ValueError):
        return not_yet("the answer should be a list of whole numbers.", hint)
    expected = [h for h in range(1, d_model + 1) if _is_valid(d_model, h)]
    extra = [h for h in got if h not in expected]
    if extra:
        return not_yet("some of your head counts do not divide d_model evenly, so the columns "
                       "could not be shared equally.", hint)
    if got != expected:
        return not_yet("every count you listed works, but some valid ones are missing "
                       "(do not forget the two extremes, one head and one column per head). "
                       "", hint)
    return right("These are exactly the divisors of d_model: each gives every head the "
                 "same whole number of columns.")


@progressive
def check_weights_shape(answer, batch=2, h=4, n=10):
    """Exercise: the shape of ``multi_head_attention``'s weights for a batch of sequences."""
    hint = ("Every head has its own n x n weight matrix, for every sequence in the batch; "
            "the head axis comes right after the batch axis.")
    if is_unanswered(answer):
        return unanswered(hint)
    d_model = 2 * h
    x = np.zeros((batch, n, d_model))
    w = np.eye(d_model)
    _, weights = multi_head_attention(x, w, w, w, w, h=h)
    expected = weights.shape
    try:
        got = tuple(int(s) for s in answer)
    except (TypeError, ValueError):
        return not_yet("the answer should be a tuple of whole numbers, like (3, 5).", hint)
    if got == expected:
        return right("One n x n map per head per sequence: (batch, heads, queries, keys).")
    if len(got) == len(expected) - 1:
        return not_yet("one axis is missing: a weight matrix has a row per query and a "
                       "column per key.", hint)
    if len(got) == len(expected) and sorted(got) == sorted(expected):
        return not_yet("the right sizes in the wrong order.", hint)
    return not_yet(hint)


@progressive
def check_head_queries(answer, x, w_q, h, head):
    """Exercise: the queries of head number ``head`` (from 1), from a column slice of ``w_q``.

    Head 1 is the first head (numpy's index 0), as the course's prose counts.
    """
    d_k = _head_dim(np.shape(w_q)[1], h)
    if isinstance(head, bool) or not isinstance(head, (int, np.integer)) or not 1 <= head <= h:
        raise ValueError(f"head must be a head number from 1 to {h}, got {head!r}")
    hint = (f"Head {head} owns {d_k} consecutive columns of W_q, after the d_k columns of each "
            f"of the {head - 1} heads before it (numpy counts from 0); multiply the embeddings "
            "by that slice.")
    all_heads = split_heads(np.asarray(x, dtype=float) @ np.asarray(w_q, dtype=float), h)
    expected = all_heads[head - 1]
    if is_unanswered(answer):
        return unanswered(hint)
    try:
        got = np.asarray(answer, dtype=float)
    except (TypeError, ValueError):
        got = None
    if got is not None and got.shape == expected.shape:
        for other, why in ((head, "the head after it: head 1 is numpy's index 0"),
                           (head - 2, "the head before it")):
            if 0 <= other < h and np.allclose(got, all_heads[other], atol=1e-6):
                return not_yet(f"those are the queries of {why}.", hint)
    return check_array(answer, expected, hint=hint, atol=1e-6,
                       why="A slice of the big projection is a head's own projection.")
