"""Exercise checks for notebook 05, step 3: softmax turns scores into weights.

Tokens are numbered from 1, as in the article and the notebooks.

Every expected answer is computed here from the exercise's inputs with attn_core; the
hints name the mistake, never the number.
"""

import numpy as np

from .. import examples
from ..attention import scores
from ..errata import differing_cells
from ..softmax import softmax
from ._base import (
    check_array,
    check_choice,
    is_close,
    is_unanswered,
    not_yet,
    progressive,
    read_number,
    right,
    rounding_tolerance,
)

__all__ = ["check_weight_by_hand", "check_temperature_weights", "check_temperature_limit"]


@progressive
def check_weight_by_hand(answer, row=2, col=3, q=None, k=None, decimals=2):
    """Check the attention weight of query ``row`` on key ``col`` (both counted from 1).

    The answer is right when it rounds to the same ``decimals`` digits as the weight: it may
    be off by at most half a unit of the last asked digit (0.14 and 0.1389 pass for 0.1389 at
    two decimals, 0.13 does not).

    The weights are the softmax of the scaled scores ``q k^T / sqrt(d_k)`` of the worked
    example (``examples.Q`` and ``examples.K`` unless given): the entry
    ``weights[row - 1, col - 1]``.
    """
    i, j = row - 1, col - 1
    q = examples.Q if q is None else np.asarray(q, dtype=float)
    k = examples.K if k is None else np.asarray(k, dtype=float)
    row = scores(q, k)[i]
    expected = softmax(row)[j]
    hint = (f"take row {i + 1} of the scaled scores, exponentiate every entry, and divide "
            f"the exponential of entry {j + 1} by the sum of all of them.")
    got, feedback = read_number(answer, hint, "a single number")
    if feedback is not None:
        return feedback
    atol = rounding_tolerance(decimals)
    if is_close(got, expected, atol):
        return right("Every weight is exp(score) over the sum of its row's exp(score).")
    raw = scores(q, k, scale=1.0)[i]
    if is_close(got, softmax(raw)[j], atol):
        return not_yet("that is the softmax of the unscaled scores: divide the dot products "
                       "by sqrt(d_k) before exponentiating.")
    if row.sum() != 0 and is_close(got, row[j] / row.sum(), atol):
        return not_yet("you divided the score by the sum of the scores: exponentiate each "
                       "score first, then normalise.")
    if is_close(got, np.exp(row[j]), atol):
        return not_yet("that is the exponential alone: divide it by the sum of the "
                       "exponentials of the whole row.")
    if is_close(got, softmax(scores(q, k)[:, j])[i], atol):
        return not_yet("softmax runs along a row (one query against every key), not down "
                       "a column.")
    printed = examples.PRINTED_WEIGHTS
    if (q is examples.Q and k is examples.K and printed.shape[-2:] == (q.shape[0], k.shape[0])
            and differing_cells(softmax(scores(q, k)), printed)[i, j]
            and is_close(got, printed[i, j], atol)):
        return not_yet("that is the weight the article prints, one of its errata: its printed "
                       "weight matrix does not follow from its own Q and K (see the Erratum "
                       "above and the appendix). Compute the weight from the scaled scores.",
                       hint)
    if 0.0 < got < 1.0 and is_close(got, expected, atol=max(0.03, 3 * atol)):
        return not_yet(f"close, but it does not round to the weight at {decimals} decimals: "
                       f"keep more decimals in the scores and round only at the end.", hint)
    return not_yet(hint)


@progressive
def check_temperature_weights(answer, row=None, temperature=0.5):
    """Check ``softmax(row / temperature)`` computed by the reader.

    ``row`` defaults to the article's small score row ``examples.SMALL_SCORES``.
    """
    row = examples.SMALL_SCORES if row is None else np.asarray(row, dtype=float)
    expected = softmax(row / temperature)
    hint = "divide every score of the row by the temperature, then take the softmax."
    if not is_unanswered(answer):
        try:
            got = np.asarray(answer, dtype=float)
        except (TypeError, ValueError):
            got = None
        if got is not None and got.shape == expected.shape and np.all(np.isfinite(got)):
            if (not np.allclose(got, expected, atol=1e-2)
                    and np.allclose(got, softmax(row * temperature), atol=1e-2)):
                return not_yet("you multiplied by the temperature: a temperature divides "
                               "the scores.")
            if (not np.allclose(got, expected, atol=1e-2)
                    and np.allclose(got, softmax(row), atol=1e-2)):
                return not_yet("these are the weights at temperature 1: the temperature "
                               "has not been applied.")
    return check_array(answer, expected, hint=hint,
                       why="A temperature below 1 spreads the scores apart and sharpens the "
                           "weights; above 1 it squeezes them together and flattens them.")


#: The options of :func:`check_temperature_limit`.
TEMPERATURE_LIMIT_OPTIONS = ("one-hot", "uniform", "unchanged")


@progressive
def check_temperature_limit(answer, row=None):
    """What do the weights of ``row`` tend to as the temperature grows without bound?

    The expected option is found by computing ``softmax(row / T)`` at a huge ``T`` and
    seeing which description it matches.
    """
    row = examples.SMALL_SCORES if row is None else np.asarray(row, dtype=float)
    far = softmax(row / 1e9)
    n = row.shape[-1]
    if np.allclose(far, 1.0 / n, atol=1e-6):
        expected = "uniform"
    elif np.isclose(far.max(), 1.0, atol=1e-6):
        expected = "one-hot"
    else:
        expected = "unchanged"
    hint = ("dividing by a huge temperature sends every score towards the same value; "
            "what does softmax do with equal scores?")
    wrong = {"one-hot": "one-hot is the opposite limit, T -> 0: a small temperature spreads "
                        "the scores apart; a huge one squeezes them together.",
             "unchanged": "the weights do change with T: dividing by a larger and larger T "
                          "moves every score towards 0."}
    wrong.pop(expected, None)
    return check_choice(answer, expected, TEMPERATURE_LIMIT_OPTIONS, hint=hint, wrong=wrong,
                        why="Equal scores give equal weights; the opposite limit, T -> 0, "
                            "puts all the weight on the largest score.")

