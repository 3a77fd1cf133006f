"""Exercise checks for the course notebook on queries, keys and values (02).

Tokens are numbered from 1, as in the notebook: token ``i`` is row ``i - 1`` of ``X``.
Every expected answer is computed from the exercise's inputs (matrix products, or a small
experiment with :func:`attn_core.attention`), never typed in.
"""

import numpy as np

from .. import examples
from ..attention import attention
from ._base import check_array, check_choice, is_unanswered, not_yet, progressive, read_shape, right

__all__ = ["PROJECTION_OPTIONS", "check_product_shape", "check_projection_choice",
           "check_query_row"]


@progressive
def check_product_shape(answer, a_shape, b_shape, names=("A", "B")):
    """Check the shape of the matrix product of arrays shaped ``a_shape`` and ``b_shape``."""
    expected = np.matmul(np.zeros(a_shape), np.zeros(b_shape)).shape
    a, b = names
    hint = (f"In the product {a} {b}, each row of {a} meets each column of {b}: the result "
            f"keeps the rows of {a} and the columns of {b}, and the shared inner size is summed "
            "away.")
    got, feedback = read_shape(answer, hint)
    if feedback is not None:
        return feedback
    if got == expected:
        return right(f"One row per row of {a}, one column per column of {b}.")
    if len(got) != len(expected):
        return not_yet(f"the product has {len(expected)} axes.", hint)
    if got == expected[::-1]:
        return not_yet("rows and columns are swapped.", hint)
    inner = a_shape[-1]
    if inner in got and inner not in expected:
        return not_yet(f"the inner size {inner} does not survive the product.", hint)
    return not_yet(hint)


@progressive
def check_query_row(answer, x, w_q, row=1, w_k=None, w_v=None):
    """Check the query of token ``row`` (counted from 1): row ``row`` of ``X @ W_q``."""
    x = np.asarray(x, dtype=float)  # (n, d_model)
    w_q = np.asarray(w_q, dtype=float)  # (d_model, d_k)
    q = x @ w_q  # (n, d_model) @ (d_model, d_k) -> (n, d_k)
    expected = q[row - 1]
    hint = (f"Entry c of the query is the dot product of token {row}'s row of X with column "
            f"c of W_q: multiply the matching numbers and add them, once per column.")
    if not is_unanswered(answer):
        try:
            got = np.asarray(answer, dtype=float)
        except (TypeError, ValueError):
            got = None
        if got is not None and got.shape == expected.shape and not np.allclose(
                got, expected, atol=1e-2):
            others = {"the key (X times W_k)": w_k, "the value (X times W_v)": w_v}
            for what, w in others.items():
                if w is not None and np.allclose(got, (x @ np.asarray(w, float))[row - 1],
                                                 atol=1e-2):
                    return not_yet(f"that is {what} of the token, not its query.", hint)
            for other in range(q.shape[0]):
                if other != row - 1 and np.allclose(got, q[other], atol=1e-2):
                    return not_yet(f"that is the query of token {other + 1}; tokens are "
                                   f"counted from 1, row by row.", hint)
            if w_q.shape[0] == w_q.shape[1] and np.allclose(got, w_q @ x[row - 1], atol=1e-2):
                return not_yet("you used the rows of W_q instead of its columns.", hint)
    return check_array(answer, expected, hint=hint,
                       why=f"Token {row}'s row of X, times W_q, is its query.")


#: The choices of the "which projection" exercise, and the projections each one names.
PROJECTION_OPTIONS = {
    "W_v only": frozenset({"W_v"}),
    "W_q or W_k": frozenset({"W_q", "W_k"}),
    "W_k or W_v": frozenset({"W_k", "W_v"}),
    "any of the three": frozenset({"W_q", "W_k", "W_v"}),
}


def _projections_that_work(x, w_q, w_k, w_v, a, b, seed):
    """Change each projection in turn; keep those that move A's weight on B but not V[B]."""
    mats = {"W_q": np.asarray(w_q, float), "W_k": np.asarray(w_k, float),
            "W_v": np.asarray(w_v, float)}
    x = np.asarray(x, dtype=float)

    def run(m):
        q, k, v = x @ m["W_q"], x @ m["W_k"], x @ m["W_v"]  # (n, d_model) @ (d_model, d)
        _, w = attention(q, k, v)  # (n, n)
        return w[a - 1, b - 1], v[b - 1]

    base_weight, base_value = run(mats)
    g = examples.rng(seed)
    works = set()
    for name in mats:
        changed = dict(mats)
        changed[name] = mats[name] + g.standard_normal(mats[name].shape)
        weight, value = run(changed)
        if not np.isclose(weight, base_weight) and np.allclose(value, base_value):
            works.add(name)
    return frozenset(works)


@progressive
def check_projection_choice(answer, x, w_q, w_k, w_v, a=1, b=3, seed=examples.SEED):
    """Check which projections can change how much token ``a`` attends to token ``b``
    while leaving what ``b`` hands over (its value) unchanged."""
    works = _projections_that_work(x, w_q, w_k, w_v, a, b, seed)
    expected = next(opt for opt, names in PROJECTION_OPTIONS.items() if names == works)
    hint = (f"Ask of each matrix: does it enter the score of token {a} against token {b} "
            f"(a query times a key)? Does it enter what token {b} hands over (its value)?")
    if isinstance(answer, str) and "W_v" not in works:
        low = answer.strip().lower()
        if low in {o.lower() for o, names in PROJECTION_OPTIONS.items() if "W_v" in names}:
            return not_yet(f"changing W_v changes every value, including token {b}'s, and "
                           f"it never enters the weights.", hint)
    return check_choice(answer, expected, list(PROJECTION_OPTIONS), hint=hint,
                        why="The weights come from queries and keys only; the values only "
                            "ride along.")
