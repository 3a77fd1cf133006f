"""The exercise checks of 05 · Step 3: softmax, and the worked weights they rely on.

Each check must accept the right answer, refuse typical wrong ones with a hint, say so when
the placeholder is still there, and never show the answer's numbers in its message. The
right answers here are recomputed with plain Python loops (math.exp), not taken from
attn_core.
"""

import math

import numpy as np
import pytest

from attn_core import attention, examples, softmax
from attn_core.checks import (
    check_temperature_limit,
    check_temperature_weights,
    check_weight_by_hand,
)
from attn_core.checks._base import NO_ANSWER, NOT_YET, RIGHT

from reference import carries_hint


def loop_scores(scale):
    """Q K^T * scale of the worked example, by loops (rows = queries)."""
    q = examples.Q.tolist()
    kt = examples.K_T.tolist()
    return [[scale * sum(q[i][c] * kt[c][j] for c in range(len(kt))) for j in range(len(kt[0]))]
            for i in range(len(q))]


def loop_softmax(row):
    m = max(row)
    e = [math.exp(x - m) for x in row]
    return [x / sum(e) for x in e]


SCALED = loop_scores(1 / math.sqrt(2))
RAW = loop_scores(1.0)
WEIGHTS = [loop_softmax(r) for r in SCALED]


def shows(message, number):
    """True if ``number`` appears in ``message`` written with 2, 3 or 4 decimals."""
    return any(f"{number:.{d}f}" in message for d in (2, 3, 4))


def assert_hint(fb):
    assert not fb and fb.message.startswith(NOT_YET) and carries_hint(fb)


# --- the worked numbers the notebook shows ---------------------------------------------

def test_worked_weights_match_the_loop_reference():
    _, w = attention(examples.Q, examples.K, examples.V)
    np.testing.assert_allclose(w, WEIGHTS, rtol=0, atol=1e-12)
    for row in WEIGHTS:
        assert math.isclose(sum(row), 1.0, abs_tol=1e-12)


def test_printed_weights_follow_neither_from_the_inputs_nor_from_the_printed_scores():
    """Guards notebook 05's erratum on attn_core/examples.py's PRINTED_* data; the candidate
    weights come from the reference and from attn_core's softmax and attention."""
    printed = examples.PRINTED_WEIGHTS
    from_printed_scaled = [loop_softmax([x / math.sqrt(2) for x in r])
                           for r in examples.PRINTED_SCORES.tolist()]
    from_printed_raw = [loop_softmax(r) for r in examples.PRINTED_SCORES.tolist()]
    from_raw = [loop_softmax(r) for r in RAW]
    package = [attention(examples.Q, examples.K, examples.V)[1],
               softmax(examples.PRINTED_SCORES / math.sqrt(2)), softmax(examples.PRINTED_SCORES)]
    for candidate in (WEIGHTS, from_printed_scaled, from_printed_raw, from_raw, *package):
        assert np.abs(np.round(candidate, 2) - printed).max() > 0.015


def test_naive_softmax_overflows_and_stable_does_not():
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.array([1000.0, 1000.0]))
        naive = e / e.sum()
    assert np.isinf(e).all() and np.isnan(naive).all()
    np.testing.assert_allclose(softmax([1000.0, 1000.0]), [0.5, 0.5])


# --- check_weight_by_hand ----------------------------------------------------------------

@pytest.mark.parametrize("row, col", [(2, 4), (1, 1), (3, 2), (4, 4)])
def test_weight_by_hand_accepts_the_loop_value(row, col):
    expected = WEIGHTS[row - 1][col - 1]
    assert check_weight_by_hand(expected, row, col)
    assert check_weight_by_hand(round(expected, 2), row, col).message.startswith(RIGHT)


def test_weight_by_hand_flags_unscaled_scores():
    fb = check_weight_by_hand(loop_softmax(RAW[1])[2], 2, 3)
    assert_hint(fb)
    assert "sqrt(d_k)" in fb.message


def test_weight_by_hand_flags_no_exponential():
    row = SCALED[1]
    fb = check_weight_by_hand(row[2] / sum(row), 2, 3)
    assert_hint(fb)
    assert "exponentiate" in fb.message


def test_weight_by_hand_flags_a_column_softmax():
    col = [SCALED[i][2] for i in range(4)]
    fb = check_weight_by_hand(loop_softmax(col)[1], 2, 3)
    assert_hint(fb)
    assert "row" in fb.message


@pytest.mark.parametrize("wrong", [0.0, 1.0, 0.25, "abc", WEIGHTS[1][3], math.exp(SCALED[1][2])])
def test_weight_by_hand_refuses_wrong_answers(wrong):
    assert_hint(check_weight_by_hand(wrong, 2, 3))


def test_weight_by_hand_unanswered_and_no_answer_in_messages():
    fb = check_weight_by_hand(None)
    assert not fb and fb.message.startswith(NO_ANSWER) and "Hint:" in fb.message
    assert check_weight_by_hand(...).message.startswith(NO_ANSWER)
    answer = WEIGHTS[1][2]
    for given in (None, 0.0, 0.5, loop_softmax(RAW[1])[2], answer + 0.02, "x"):
        assert not shows(check_weight_by_hand(given, 2, 3).message, answer)


# --- check_temperature_weights -----------------------------------------------------------

@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_temperature_weights_right(temperature):
    row = examples.SMALL_SCORES.tolist()
    expected = loop_softmax([x / temperature for x in row])
    assert check_temperature_weights(expected, row, temperature)
    assert check_temperature_weights(np.round(expected, 2), row, temperature)


def test_temperature_sharpens_below_one_and_flattens_above():
    row = examples.SMALL_SCORES.tolist()
    base = max(loop_softmax(row))
    sharp = max(loop_softmax([x / 0.5 for x in row]))
    flat = max(loop_softmax([x / 2 for x in row]))
    assert sharp > base > flat
    for temperature, expected in ((1.0, base), (0.5, sharp), (2.0, flat)):
        got = float(softmax(examples.SMALL_SCORES / temperature).max())
        assert math.isclose(got, expected, rel_tol=1e-12)


def test_temperature_weights_flags_multiplying_and_forgetting():
    row = examples.SMALL_SCORES.tolist()
    fb = check_temperature_weights(loop_softmax([x * 0.5 for x in row]), row, 0.5)
    assert_hint(fb)
    assert "divides" in fb.message
    fb = check_temperature_weights(loop_softmax(row), row, 0.5)
    assert_hint(fb)
    assert "temperature 1" in fb.message


@pytest.mark.parametrize("wrong", [[1, 0, 0], [0, 0, 1], [1 / 3] * 3, [0.1, 0.2], "abc"])
def test_temperature_weights_refuses_wrong(wrong):
    assert_hint(check_temperature_weights(wrong, examples.SMALL_SCORES, 0.5))


def test_temperature_weights_unanswered_and_no_answer_in_messages():
    assert check_temperature_weights(None).message.startswith(NO_ANSWER)
    row = examples.SMALL_SCORES.tolist()
    expected = loop_softmax([x / 0.5 for x in row])
    for given in (None, [1, 0, 0], loop_softmax(row), loop_softmax([x * 0.5 for x in row])):
        msg = check_temperature_weights(given, row, 0.5).message
        assert not any(shows(msg, x) for x in expected)


# --- check_temperature_limit -------------------------------------------------------------

def test_temperature_limit():
    assert check_temperature_limit("uniform")
    assert check_temperature_limit(" Uniform ")
    assert_hint(check_temperature_limit("one-hot"))
    assert_hint(check_temperature_limit("unchanged"))
    fb = check_temperature_limit("flat")
    assert_hint(fb)  # returns None: the message test must be its own assert
    assert "choose one of" in fb.message.lower() and "uniform" in fb.message
    assert check_temperature_limit(None).message.startswith(NO_ANSWER)
    assert "uniform" not in check_temperature_limit(None).message.split("Hint:")[1].lower()


@pytest.mark.parametrize("decimals", [2, 3])
def test_weight_by_hand_tolerance_follows_the_rounding_asked(decimals):
    """Rounded to the digits asked: right; one unit of the last digit off: not right."""
    exact = WEIGHTS[1][2]  # row 2, column 3 (from 1), by loops
    unit = 10.0 ** -decimals
    rounded = round(exact, decimals)
    assert check_weight_by_hand(rounded, row=2, col=3, decimals=decimals).correct
    assert check_weight_by_hand(exact, row=2, col=3, decimals=decimals).correct
    for wrong in (rounded - unit, rounded + unit):
        fb = check_weight_by_hand(wrong, row=2, col=3, decimals=decimals)
        printed = decimals == 2 and np.isclose(wrong, examples.PRINTED_WEIGHTS[1, 2])
        expect = "errata" if printed else f"at {decimals} decimals"  # the article's 0.13
        assert not fb.correct and expect in fb.message
