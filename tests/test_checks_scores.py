"""The exercise checks of 03 · Step 1: scores.

Each check must accept the right answer, refuse typical wrong ones with a hint, say so when
the placeholder is still there, and never show the answer's numbers in its message. The
right answers here are recomputed with plain Python loops, not taken from attn_core.
"""

import numpy as np
import pytest

from attn_core import examples
from attn_core.checks import check_best_key, check_score_cell, check_scores_shape
from attn_core.checks._base import NO_ANSWER, NOT_YET, RIGHT

from reference import carries_hint


def dot(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True))


def raw_score(i, j):
    """Score (i, j), counted from 1, from the article's Q and K^T by a plain loop."""
    q_row = [float(x) for x in examples.Q[i - 1]]
    k_col = [float(examples.K_T[c][j - 1]) for c in range(len(examples.K_T))]
    return dot(q_row, k_col)


def shows(message, number):
    """True if ``number`` appears in ``message`` written with 1, 2 or 3 decimals."""
    return any(f"{number:.{d}f}" in message for d in (1, 2, 3))


def assert_hint(fb):
    assert not fb and fb.message.startswith(NOT_YET) and carries_hint(fb)


# --- check_score_cell ----------------------------------------------------------------

@pytest.mark.parametrize("row, col", [(3, 2), (1, 1), (2, 1), (4, 3)])
def test_score_cell_accepts_the_loop_value(row, col):
    expected = raw_score(row, col)
    assert check_score_cell(expected, row, col)
    assert check_score_cell(round(expected, 2), row, col).message.startswith(RIGHT)


def test_score_cell_flags_swapped_indices():
    fb = check_score_cell(raw_score(2, 3), 3, 2)
    assert_hint(fb)
    assert "other way round" in fb.message


def test_score_cell_flags_a_scaled_score():
    fb = check_score_cell(raw_score(3, 2) / np.sqrt(2), 3, 2)
    assert_hint(fb)
    assert "sqrt(d_k)" in fb.message


@pytest.mark.parametrize("wrong", [0.0, 1.0, -raw_score(3, 2), raw_score(3, 2) + 0.1, "abc"])
def test_score_cell_refuses_wrong_answers(wrong):
    assert_hint(check_score_cell(wrong, 3, 2))


def test_score_cell_unanswered():
    fb = check_score_cell(None)
    assert not fb and fb.message.startswith(NO_ANSWER) and "Hint:" in fb.message
    assert check_score_cell(...).message.startswith(NO_ANSWER)


def test_score_cell_messages_never_show_the_answer():
    answer = raw_score(3, 2)
    for given in (None, 0.0, raw_score(2, 3), answer / np.sqrt(2), "x"):
        assert not shows(check_score_cell(given, 3, 2).message, answer)


# --- check_best_key ------------------------------------------------------------------

def best_key(query):
    row = [raw_score(query, j) for j in range(1, 5)]
    return max(range(1, 5), key=lambda j: row[j - 1])


@pytest.mark.parametrize("query", [1, 2, 3, 4])
def test_best_key_accepts_the_argmax(query):
    assert check_best_key(best_key(query), query)
    assert check_best_key(np.int64(best_key(query)), query)


def test_best_key_flags_counting_from_zero():
    fb = check_best_key(best_key(4) - 1, 4)
    assert_hint(fb)
    assert "counted from 0" in fb.message


@pytest.mark.parametrize("wrong", [0, 5, 2.0, "2", True])
def test_best_key_refuses_invalid_answers(wrong):
    assert_hint(check_best_key(wrong, 4))


def test_best_key_refuses_every_other_key():
    for j in range(1, 5):
        if j != best_key(4):
            assert_hint(check_best_key(j, 4))


def test_best_key_unanswered_and_no_answer_in_messages():
    assert check_best_key(None).message.startswith(NO_ANSWER)
    answer = str(best_key(4))
    for j in [None, 1, 3, 4]:
        # the only digits a message may show are the query's number and the key range 1..4
        msg = check_best_key(j, 4).message
        assert answer not in msg.replace("keys are numbered 1 to 4", "")


# --- check_scores_shape --------------------------------------------------------------

def test_scores_shape_right():
    assert check_scores_shape((5, 7), 5, 7, 3)
    assert check_scores_shape([5, 7], 5, 7, 3)
    assert check_scores_shape(np.array([5, 7]), 5, 7, 3)
    assert check_scores_shape((2, 9), 2, 9, 4)


@pytest.mark.parametrize("wrong, word", [((7, 5), "swapped"), ((5, 3), "d_k"),
                                         ((5, 7, 3), "axes"), ((5, 5), None),
                                         (35, None), ("5x7", None)])
def test_scores_shape_wrong(wrong, word):
    fb = check_scores_shape(wrong, 5, 7, 3)
    assert_hint(fb)
    if word:
        assert word in fb.message


def test_scores_shape_unanswered_and_no_answer_in_messages():
    assert check_scores_shape(None).message.startswith(NO_ANSWER)
    for given in (None, (7, 5), (5, 5), (3, 3)):
        msg = check_scores_shape(given, 5, 7, 3).message
        assert "(5, 7)" not in msg and "5" not in msg.replace("(7, 5)", "")


def test_score_cell_follows_a_changed_query():
    q_new = examples.Q.copy()
    q_new[2] = [0.5, 1.0]
    expected = dot([0.5, 1.0], [float(examples.K_T[c][1]) for c in range(2)])
    assert check_score_cell(expected, 3, 2, q=q_new)
    assert_hint(check_score_cell(raw_score(3, 2), 3, 2, q=q_new))  # the old query's score
