"""Exercise checks for the course notebook on the problem (01 · The problem attention solves).

The notebook invents small vectors for the tokens of the sentence (what each token looks
for, how it can be found, what it hands over) and passes them in; every check
computes its expected answer from those inputs with :func:`attn_core.attention`.
"""

import numpy as np

from .. import examples
from ..attention import attention
from ._base import check_array, is_unanswered, not_yet, progressive, right, unanswered

__all__ = ["check_focus_query", "check_mixture", "check_top_token"]


def _row_weights(query, keys):
    """Attention weights of one query over all keys: shape (n_k,)."""
    q = np.asarray(query, dtype=float)[None, :]  # (1, d_k)
    keys = np.asarray(keys, dtype=float)  # (n_k, d_k)
    dummy_values = np.zeros((keys.shape[0], 1))  # the weights do not depend on the values
    _, w = attention(q, keys, dummy_values)  # (1, n_k)
    return w[0]


@progressive
def check_top_token(answer, queries, keys, query_token="it", tokens=examples.TOKENS):
    """Check which token gets the largest weight in the row of ``query_token``."""
    tokens = list(tokens)
    row = tokens.index(query_token)
    w = _row_weights(np.asarray(queries, dtype=float)[row], keys)
    expected = tokens[int(np.argmax(w))]
    hint = (f"The weights of {query_token!r} follow its scores: take its query and compute "
            "the dot product with each token's key. The largest score gets the largest "
            "weight, whatever the token means in English.")
    if is_unanswered(answer):
        return unanswered(hint)
    if not isinstance(answer, str):
        return not_yet("answer with one token of the sentence, as a string in quotes. "
                       "", hint)
    got = answer.strip()
    matches = [t for t in tokens if t == got] or [t for t in tokens if t.lower() == got.lower()]
    if not matches:
        return not_yet(f"{got!r} is not one of the tokens {tokens}.", hint)
    if expected in matches:
        return right(f"{expected!r} now has the largest dot product with the query of "
                     f"{query_token!r}, so it wins the largest weight.")
    if got == query_token:
        return not_yet("a token does not automatically attend most to itself here.", hint)
    return not_yet(f"{got!r} does not have the largest dot product with the query of "
                   f"{query_token!r}: the weights follow the dot products, not what the words "
                   "mean.", hint)


@progressive
def check_mixture(answer, weights, values):
    """Check the output of one query: the weights times the value rows, added up."""
    w = np.asarray(weights, dtype=float)  # (n,)
    v = np.asarray(values, dtype=float)  # (n, d_v)
    expected = w @ v  # (n,) @ (n, d_v) -> (d_v,)
    hint = ("The output has one entry per value column: for each column, multiply each "
            "value's entry by that value's weight and add the products.")
    if not is_unanswered(answer):
        try:
            got = np.asarray(answer, dtype=float)
        except (TypeError, ValueError):
            got = None
        if got is not None and got.shape == v.sum(axis=0).shape and not np.allclose(
                got, expected, atol=1e-2) and np.allclose(got, v.sum(axis=0), atol=1e-2):
            return not_yet("that is the plain sum of the values; each must be multiplied "
                           "by its weight first.", hint)
        if got is not None and got.shape == w.shape and got.shape != expected.shape:
            return not_yet("your answer has one entry per token; the output has one entry "
                           "per value column.", hint)
    return check_array(answer, expected, hint=hint,
                       why="The output is a weighted average of the values.")


@progressive
def check_focus_query(answer, keys, target="animal", tokens=examples.TOKENS, threshold=0.9):
    """Check that a query puts at least ``threshold`` of its weight on ``target``."""
    tokens = list(tokens)
    keys = np.asarray(keys, dtype=float)
    col = tokens.index(target)
    hint = (f"The query must have a much larger dot product with the key of {target!r} "
            "than with any other key. Point it the way that key points, and try making "
            "it longer: a longer query spreads the scores further apart.")
    if is_unanswered(answer):
        return unanswered(hint)
    try:
        q = np.asarray(answer, dtype=float)
    except (TypeError, ValueError):
        return not_yet("the answer should be a vector of numbers.", hint)
    if q.shape != keys.shape[-1:]:
        return not_yet(f"a query must have {keys.shape[-1]} numbers, like the keys; yours "
                       f"has shape {q.shape}.", hint)
    if not np.all(np.isfinite(q)):
        return not_yet("your query contains NaN or infinite values.", hint)
    share = float(_row_weights(q, keys)[col])
    if share >= threshold:
        return right(f"This query puts {share:.0%} of its weight on {target!r}.")
    key = keys[col]
    along = float(q @ key) / (np.linalg.norm(q) * np.linalg.norm(key) + 1e-300)
    if along > 0.99:
        return not_yet(f"this query points the way the key of {target!r} points, but puts only "
                       f"{share:.0%} of its weight there: it is too short to decide. A longer "
                       f"query spreads the scores further apart (the goal is at least "
                       f"{threshold:.0%}).", hint)
    return not_yet(f"this query puts {share:.0%} of its weight on {target!r}; the goal is "
                   f"at least {threshold:.0%}.", hint)
