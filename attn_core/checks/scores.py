"""Exercise checks for the course notebook on scores (03 · Step 1: scores).

Tokens are numbered from 1, as in the article and the notebook: score ``(i, j)`` is query
``i`` against key ``j``, the entry ``scores(q, k, scale=1.0)[i - 1, j - 1]``.
"""

import numpy as np

from .. import examples
from ..attention import scores
from ._base import (
    check_number,
    is_unanswered,
    not_yet,
    progressive,
    read_number,
    read_shape,
    right,
    unanswered,
)

__all__ = ["check_best_key", "check_score_cell", "check_scores_shape"]


def _cap(hint):
    """The hint as a sentence of its own, after another sentence."""
    return hint[:1].upper() + hint[1:]


def _raw(q, k):
    return scores(q, k, scale=1.0)  # (n_q, d_k) @ (d_k, n_k) -> (n_q, n_k)


@progressive
def check_score_cell(answer, row=3, col=2, q=examples.Q, k=examples.K):
    """Check the raw score of query ``row`` against key ``col`` (both counted from 1)."""
    s = _raw(q, k)
    expected = s[row - 1, col - 1]
    hint = (f"take row {row} of Q and column {col} of K^T (that is, key {col}), multiply "
            "the matching components and add the products.")
    got, feedback = read_number(answer, hint, "a single number")
    if feedback is not None:
        return feedback
    if row != col and np.isclose(got, s[col - 1, row - 1], atol=5e-3) and not np.isclose(
            got, expected, atol=5e-3):
        return not_yet(f"that is the score the other way round (query {col} against key "
                       f"{row}). Row = query, column = key.", hint)
    if np.isclose(got * np.sqrt(q.shape[-1]), expected, atol=5e-3) and not np.isclose(
            got, expected, atol=5e-3):
        return not_yet("that looks divided by sqrt(d_k); this exercise asks for the raw "
                       "score Q K^T, before any scaling.", hint)
    return check_number(got, expected, atol=5e-3, hint=hint,
                        why=f"Score ({row}, {col}) is the dot product of query {row} "
                            f"with key {col}.")


@progressive
def check_best_key(answer, query=4, q=examples.Q, k=examples.K):
    """Check which key (counted from 1) query ``query`` matches best: the row's argmax."""
    s = _raw(q, k)
    n_k = s.shape[-1]
    expected = int(np.argmax(s[query - 1])) + 1
    hint = (f"look along row {query} of the score matrix (query {query} against every key) "
            "and find the column with the largest score; count keys from 1.")
    if is_unanswered(answer):
        return unanswered(hint)
    if isinstance(answer, bool) or not isinstance(answer, (int, np.integer)):
        return not_yet(f"the answer should be a whole number, the key's position from 1 to "
                       f"{n_k}.", hint)
    got = int(answer)
    if not 1 <= got <= n_k:
        return not_yet(f"keys are numbered 1 to {n_k}.", hint)
    if got == expected:
        return right(f"Query {query}'s largest score is in that column, so it matches that "
                     "key best.")
    if got == expected - 1:
        return not_yet("check whether you counted from 0: the course numbers keys from 1. "
                       "", hint)
    if got == int(np.argmax(s[:, query - 1])) + 1:
        return not_yet(f"you looked down column {query} (which query key {query} suits "
                       f"best); the question is about row {query}.", hint)
    return not_yet(hint)


@progressive
def check_scores_shape(answer, n_q=5, n_k=7, d_k=3):
    """Check the shape of the score matrix for ``n_q`` queries and ``n_k`` keys of width ``d_k``."""
    expected = _raw(np.zeros((n_q, d_k)), np.zeros((n_k, d_k))).shape
    hint = ("every query is compared with every key: one row per query, one column per "
            "key. The shared width d_k is summed away by the dot product.")
    got, feedback = read_shape(answer, hint)
    if feedback is not None:
        return feedback
    if got == expected:
        return right("One score per (query, key) pair.")
    if len(got) != len(expected):
        return not_yet(f"the score matrix has {len(expected)} axes.", hint)
    if got == expected[::-1]:
        return not_yet("rows and columns are swapped: rows are queries.", hint)
    if d_k in got:
        return not_yet("d_k does not appear in the shape of the scores.", hint)
    return not_yet(hint)
