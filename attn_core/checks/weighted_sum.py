"""Exercise checks for notebook 06, step 4: the output is a weighted sum of the values.

Tokens are numbered from 1, as in the article and the notebooks.

Every expected answer is computed here from the exercise's inputs with attn_core; the
hints name the mistake, never the number.
"""

import numpy as np

from .. import examples
from ..attention import attention
from ._base import (
    check_array,
    is_close,
    is_unanswered,
    not_yet,
    progressive,
    read_number,
    right,
    rounding_tolerance,
    unanswered,
)

__all__ = ["check_output_entry", "check_uniform_output", "check_uniform_query"]


@progressive
def check_output_entry(answer, row=1, col=1, q=None, k=None, v=None, decimals=2):
    """Check entry ``(row, col)`` (both counted from 1) of the worked example's output.

    Right when it rounds like the entry at ``decimals`` digits (off by at most half a unit of
    the last asked digit).

    ``output = weights @ v`` with the weights of ``attention(q, k, v)`` (``examples.Q``,
    ``examples.K``, ``examples.V`` unless given): the entry ``output[row - 1, col - 1]``.
    """
    i, j = row - 1, col - 1
    q = examples.Q if q is None else np.asarray(q, dtype=float)
    k = examples.K if k is None else np.asarray(k, dtype=float)
    v = examples.V if v is None else np.asarray(v, dtype=float)
    out, weights = attention(q, k, v)
    expected = out[i, j]
    hint = (f"multiply each weight of row {i + 1} by the matching entry of column {j + 1} "
            f"of V (weight of token 1 times V's row 1, and so on) and add the products.")
    got, feedback = read_number(answer, hint, "a single number")
    if feedback is not None:
        return feedback
    atol = rounding_tolerance(decimals)
    if is_close(got, expected, atol):
        return right("An output entry is the weights of its row dotted with one column of V.")
    others = [c for c in range(v.shape[-1]) if c != j]
    if any(is_close(got, out[i, c], atol) and not is_close(expected, out[i, c]) for c in others):
        return not_yet(f"that is the entry for another column of V: use column {j + 1}.")
    if is_close(got, v[:, j].mean(), atol):
        return not_yet("that is the plain mean of the column, as if every weight were "
                       "equal: weight each value by its attention weight.")
    if is_close(got, v[:, j].sum(), atol):
        return not_yet("you added the column without weighting it: multiply each value "
                       "by its weight first.")
    if weights.shape[-1] == v.shape[-1] and j < v.shape[-2]:
        if is_close(got, weights[i] @ v[j], atol) and not is_close(expected, weights[i] @ v[j]):
            return not_yet("you multiplied the weights by a row of V: the weights of row "
                           f"{i + 1} go with a column of V.")
    if is_close(got, expected, atol=max(0.03, 3 * atol)):
        return not_yet(f"close, but it does not round to the entry at {decimals} decimals: "
                       f"keep more decimals in the weights and round only at the end.", hint)
    return not_yet(hint)


@progressive
def check_uniform_output(answer, v=None):
    """Check the output row of a query whose weights are all equal (1/n each)."""
    v = examples.V if v is None else np.asarray(v, dtype=float)
    n = v.shape[-2]
    equal = np.full((1, n), 1.0 / n)
    expected = (equal @ v)[0]  # (1, n) @ (n, d_v) -> (1, d_v)
    hint = "with n equal weights, each is 1/n: multiply each row of V by it and add the rows."
    if not is_unanswered(answer):
        try:
            got = np.asarray(answer, dtype=float)
        except (TypeError, ValueError):
            got = None
        if got is not None and got.shape == expected.shape and np.all(np.isfinite(got)):
            if not np.allclose(got, expected, atol=1e-2):
                if np.allclose(got, v.sum(axis=-2), atol=1e-2):
                    return not_yet("that is the sum of V's rows: the weights sum to 1, so "
                                   "each row counts 1/n, not 1.")
        elif got is not None and got.shape == (n,) and got.shape != expected.shape:
            return not_yet("your answer has one entry per token (did you average along "
                           "each row of V?); an output row has one entry per column of V. "
                           "", hint)
    return check_array(answer, expected, hint=hint,
                       why="Equal weights make the output the mean of the value rows: the "
                           "query learns nothing about which token matters.")


@progressive
def check_uniform_query(answer, k=None, v=None):
    """Check a query vector that gives equal weight to every key of ``k``.

    Any query whose dot products with all keys are equal is right (the zero vector is
    one); the check runs ``attention`` with it and looks at the weights.
    """
    k = examples.K if k is None else np.asarray(k, dtype=float)
    v = examples.V if v is None else np.asarray(v, dtype=float)
    d_k = k.shape[-1]
    hint = ("the weights are equal when every score in the row is equal; which query "
            "has the same dot product with every key?")
    if is_unanswered(answer):
        return unanswered(hint)
    try:
        q = np.asarray(answer, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        return not_yet(f"the answer should be a vector of {d_k} numbers.", hint)
    if q.shape != (d_k,):
        return not_yet(f"a query has d_k = {d_k} entries, your answer has {q.size}.", hint)
    if not np.all(np.isfinite(q)):
        return not_yet("your query contains NaN or infinite values.", hint)
    _, weights = attention(q[None, :], k, v)  # (1, d_k) query -> (1, n) weights
    n = k.shape[-2]
    if np.allclose(weights, 1.0 / n, atol=1e-3):
        return right("Equal scores give equal weights, whatever the scale.")
    return not_yet(f"with this query the weights run from {weights.min():.2f} to "
                   f"{weights.max():.2f}, not all equal;", hint)
