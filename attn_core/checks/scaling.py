"""Exercise checks for the course notebook on scaling (04 · Step 2: scaling by sqrt(d_k))."""

import numpy as np

from ..softmax import softmax
from ._base import is_unanswered, not_yet, progressive, right, unanswered

__all__ = ["check_raw_std", "check_restoring_scale", "check_saturation"]


def _cap(hint):
    """The hint as a sentence of its own, after another sentence."""
    return hint[:1].upper() + hint[1:]


#: A softmax row counts as saturated when its largest weight exceeds this.
SATURATED = 0.99


def _number(answer):
    try:
        return float(answer)
    except (TypeError, ValueError):
        return None


def _near(got, value, rtol):
    return bool(np.isclose(got, value, rtol=rtol, atol=0.0))


@progressive
def check_raw_std(answer, d_k=256):
    """Check a prediction of the standard deviation of raw scores ``q . k`` at width ``d_k``.

    The components of ``q`` and ``k`` are independent with mean 0 and variance 1. A measured
    value within 5% of the theory counts as right.
    """
    variance = float(d_k)  # d_k independent products, each of variance 1 * 1: variances add
    expected = np.sqrt(variance)
    hint = ("a raw score adds up d_k products q_c k_c, each of variance 1, and variances of "
            "independent terms add; the standard deviation is the square root of the "
            "variance.")
    if is_unanswered(answer):
        return unanswered(hint)
    got = _number(answer)
    if got is None:
        return not_yet("the answer should be a single number.", hint)
    if _near(got, expected, 0.05):
        return right("The spread of raw scores grows like the square root of d_k.")
    if _near(got, variance, 0.05):
        return not_yet("that is the variance, not the standard deviation.", hint)
    if _near(got, 1.0, 0.05):
        return not_yet("that is the spread after dividing by sqrt(d_k); the question is "
                       "about the raw scores.", hint)
    return not_yet(hint)


@progressive
def check_restoring_scale(answer, variance=36.0):
    """Check the factor ``scale`` (scores are multiplied by it) that turns ``variance`` into 1."""
    expected = 1.0 / np.sqrt(variance)  # Var(a X) = a^2 Var(X) = 1  =>  a = 1 / sqrt(Var X)
    hint = ("multiplying scores by a number multiplies their variance by the square of that "
            "number. Which positive number, squared and multiplied by the variance, gives 1?")
    if is_unanswered(answer):
        return unanswered(hint)
    got = _number(answer)
    if got is None:
        return not_yet("the answer should be a single number.", hint)
    if _near(got, expected, 0.01):
        return right("Dividing by the standard deviation leaves variance 1.")
    if _near(got, 1.0 / expected, 0.01):
        return not_yet("that is the number to divide by; the question asks for the factor "
                       "to multiply by (like scale= in scores).", hint)
    if _near(got, 1.0 / variance, 0.01):
        return not_yet("that factor shrinks the variance far below 1, because the factor "
                       "is squared.", hint)
    if got < 0:
        return not_yet("a negative factor would flip the order of the scores; take a > 0. "
                       "", hint)
    return not_yet(hint)


@progressive
def check_saturation(answer, row, d_k):
    """Check ``(raw_saturated, scaled_saturated)`` for a row of raw scores at width ``d_k``.

    A row is saturated when the largest softmax weight exceeds :data:`SATURATED`; the
    scaled row is ``row / sqrt(d_k)``.
    """
    row = np.asarray(row, dtype=float)
    largest = (softmax(row).max(), softmax(row / np.sqrt(d_k)).max())
    expected = tuple(bool(w > SATURATED) for w in largest)
    hint = (f"apply softmax to the raw row and to the row divided by sqrt(d_k), and compare "
            f"the largest weight of each with {SATURATED}.")
    if is_unanswered(answer):
        return unanswered(hint)
    try:
        got = tuple(answer)
    except TypeError:
        return not_yet("the answer should be a pair (raw_saturated, scaled_saturated) of "
                       "True/False values.", hint)
    if len(got) != 2 or not all(isinstance(g, (bool, np.bool_)) for g in got):
        return not_yet("the answer should be a pair (raw_saturated, scaled_saturated) of "
                       "True/False values.", hint)
    got = tuple(bool(g) for g in got)
    if got == expected:
        return right("Scaling decides whether one key takes (almost) all the weight.")
    if expected[0] != expected[1] and got == expected[::-1]:
        return not_yet("the two are swapped: the first says whether the raw row saturates, "
                       "the second the scaled row.", hint)
    if expected[0] != expected[1] and got[0] == got[1]:
        return not_yet("you say the scaling changes nothing here: it does; compare the "
                       "largest weight of the raw row with that of the scaled row.", hint)
    return not_yet("at least one of the two is off.", hint)
