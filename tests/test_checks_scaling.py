"""The exercise checks of 04 · Step 2: scaling by sqrt(d_k).

Right answers pass, typical wrong answers fail with a hint, the placeholder is reported as
unanswered, and no message shows the answer. Expected values are recomputed here with the
standard library (math), independently of attn_core.
"""

import math

import numpy as np
import pytest

from attn_core import examples
from attn_core.checks import check_raw_std, check_restoring_scale, check_saturation
from attn_core.checks._base import ASK_FOR_MORE, NO_ANSWER, NOT_YET, RIGHT

from reference import carries_hint


def assert_hint(fb):
    assert not fb and fb.message.startswith(NOT_YET) and carries_hint(fb)


def shows(message, number):
    return any(f"{number:.{d}f}" in message for d in (1, 2, 3)) or f"{number:g}" in message


def largest_softmax_weight(row):
    m = max(row)
    e = [math.exp(x - m) for x in row]
    return max(e) / sum(e)


# --- check_raw_std -------------------------------------------------------------------

@pytest.mark.parametrize("d_k", [1, 16, 64, 256, 1024])
def test_raw_std_accepts_sqrt_dk_and_a_measured_value(d_k):
    assert check_raw_std(math.sqrt(d_k), d_k).message.startswith(RIGHT)
    assert check_raw_std(math.sqrt(d_k) * 1.03, d_k)


def test_raw_std_flags_variance_and_scaled_std():
    fb = check_raw_std(256, 256)
    assert_hint(fb)
    assert "variance" in fb.message
    fb = check_raw_std(1.0, 256)
    assert_hint(fb)
    assert "after dividing" in fb.message


@pytest.mark.parametrize("wrong", [8.0, 32.0, 0.0, -16.0, "sixteen", [16]])
def test_raw_std_refuses_wrong_answers(wrong):
    assert_hint(check_raw_std(wrong, 256))


def test_raw_std_unanswered_and_silent_about_the_answer():
    assert check_raw_std(None).message.startswith(NO_ANSWER)
    for given in (None, 256, 1.0, 8.0):
        assert not shows(check_raw_std(given, 256).message, math.sqrt(256))


# --- check_restoring_scale -----------------------------------------------------------

@pytest.mark.parametrize("variance", [36.0, 64.0, 4.0, 2.0])
def test_restoring_scale_right(variance):
    a = 1 / math.sqrt(variance)
    assert check_restoring_scale(a, variance)
    # and the factor really restores unit variance on samples
    x = examples.rng(1).standard_normal(50_000) * math.sqrt(variance)
    assert abs((a * x).var() - 1.0) < 0.05


def test_restoring_scale_flags_divisor_and_squared_factor():
    fb = check_restoring_scale(6.0, 36.0)
    assert_hint(fb)
    assert "divide" in fb.message
    fb = check_restoring_scale(1 / 36, 36.0)
    assert_hint(fb)
    assert "squared" in fb.message
    fb = check_restoring_scale(-1 / 6, 36.0)
    assert_hint(fb)
    assert "negative" in fb.message


@pytest.mark.parametrize("wrong", [1.0, 36.0, 0.2, "1/6"])
def test_restoring_scale_refuses_wrong_answers(wrong):
    assert_hint(check_restoring_scale(wrong, 36.0))


def test_restoring_scale_unanswered_and_silent_about_the_answer():
    assert check_restoring_scale(...).message.startswith(NO_ANSWER)
    for given in (None, 6.0, 1 / 36, 1.0):
        msg = check_restoring_scale(given, 36.0).message
        assert not shows(msg, 1 / 6) and "1/6" not in msg and "6" not in msg


# --- check_saturation ----------------------------------------------------------------

def exercise_row(seed=0, d_k=256, n=6):
    g = examples.rng(seed)
    q = g.standard_normal(d_k)
    k = g.standard_normal((n, d_k))
    return [float(sum(a * b for a, b in zip(q, key, strict=True))) for key in k]


@pytest.mark.parametrize("seed", range(6))
def test_saturation_right_answer_from_a_loop(seed):
    d_k = 256
    row = exercise_row(seed, d_k)
    expected = (largest_softmax_weight(row) > 0.99,
                largest_softmax_weight([x / math.sqrt(d_k) for x in row]) > 0.99)
    assert check_saturation(expected, row, d_k)
    assert check_saturation(tuple(np.bool_(e) for e in expected), row, d_k)
    for wrong in {(not expected[0], expected[1]), (expected[0], not expected[1]),
                  (not expected[0], not expected[1])}:
        assert_hint(check_saturation(wrong, row, d_k))


@pytest.mark.parametrize("wrong", [True, (1, 0), ("yes", "no"), (True,), (True, False, True)])
def test_saturation_refuses_malformed(wrong):
    fb = check_saturation(wrong, exercise_row(), 256)
    assert_hint(fb)
    assert "pair" in fb.message


def test_saturation_unanswered_and_silent_about_the_answer():
    row = exercise_row()
    assert check_saturation(None, row, 256).message.startswith(NO_ANSWER)
    for given in (None, (False, False), (True, True)):
        msg = check_saturation(given, row, 256).message.replace(ASK_FOR_MORE, "")
        assert "True" not in msg.replace("True/False", "") and "False" not in msg.replace(
            "True/False", "")
