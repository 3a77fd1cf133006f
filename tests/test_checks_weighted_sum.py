"""The exercise checks of 06 · Step 4: the weighted sum, and the worked outputs they rely on.

Each check must accept the right answer, refuse typical wrong ones with a hint, say so when
the placeholder is still there, and never show the answer's numbers in its message. The
right answers here are recomputed with plain Python loops (math.exp), not taken from
attn_core.
"""

import math

import numpy as np
import pytest

from attn_core import attention, examples
from attn_core.checks import check_output_entry, check_uniform_output, check_uniform_query
from attn_core.checks._base import NO_ANSWER, NOT_YET, RIGHT

from reference import carries_hint


def loop_softmax(row):
    m = max(row)
    e = [math.exp(x - m) for x in row]
    return [x / sum(e) for x in e]


def loop_attention(q, k, v):
    """Scaled dot-product attention of lists of rows, by loops."""
    d_k = len(q[0])
    weights = [loop_softmax([sum(a * b for a, b in zip(qi, kj, strict=True)) / math.sqrt(d_k)
                             for kj in k]) for qi in q]
    out = [[sum(w[t] * v[t][c] for t in range(len(v))) for c in range(len(v[0]))]
           for w in weights]
    return out, weights


Q, K, V = examples.Q.tolist(), examples.K.tolist(), examples.V.tolist()
OUT, WEIGHTS = loop_attention(Q, K, V)


def shows(message, number):
    """True if ``number`` appears in ``message`` written with 2, 3 or 4 decimals."""
    return any(f"{number:.{d}f}" in message for d in (2, 3, 4))


def assert_hint(fb):
    assert not fb and fb.message.startswith(NOT_YET) and carries_hint(fb)


# --- the worked numbers the notebook shows ---------------------------------------------

def test_worked_output_matches_the_loop_reference():
    out, w = attention(examples.Q, examples.K, examples.V)
    np.testing.assert_allclose(out, OUT, rtol=0, atol=1e-12)
    np.testing.assert_allclose(w, WEIGHTS, rtol=0, atol=1e-12)


def test_output_rows_lie_within_the_range_of_v():
    out, _ = attention(examples.Q, examples.K, examples.V)
    for row in (*OUT, *out.tolist()):
        for c, x in enumerate(row):
            column = [v[c] for v in V]
            assert min(column) <= x <= max(column)


def test_printed_output_does_not_follow_from_the_printed_weights():
    """Guards notebook 06's erratum on attn_core/examples.py's PRINTED_* data, against the
    reference and attn_core's output."""
    printed_w = examples.PRINTED_WEIGHTS.tolist()
    from_printed = [[sum(w[t] * V[t][c] for t in range(4)) for c in range(2)] for w in printed_w]
    # the article's own worked sum for output row 1, column 1 does follow ...
    assert abs(from_printed[0][0] - examples.PRINTED_OUTPUT[0, 0]) <= 0.005 + 1e-9
    # ... but the printed matrix as a whole does not
    assert np.abs(np.round(from_printed, 2) - examples.PRINTED_OUTPUT).max() > 0.05
    assert np.abs(np.round(OUT, 2) - examples.PRINTED_OUTPUT).max() > 0.05
    out, _ = attention(examples.Q, examples.K, examples.V)
    assert np.abs(np.round(out, 2) - examples.PRINTED_OUTPUT).max() > 0.05


def test_attention_matches_the_loop_on_random_batched_input():
    q, k, v = examples.random_qkv(5, 3, 2, batch=(2,), seed=7)
    out, _ = attention(q, k, v)
    for b in range(2):
        ref, _ = loop_attention(q[b].tolist(), k[b].tolist(), v[b].tolist())
        np.testing.assert_allclose(out[b], ref, rtol=1e-12, atol=1e-12)


# --- check_output_entry ------------------------------------------------------------------

@pytest.mark.parametrize("row, col", [(1, 1), (1, 2), (2, 1), (4, 2)])
def test_output_entry_accepts_the_loop_value(row, col):
    expected = OUT[row - 1][col - 1]
    assert check_output_entry(expected, row, col)
    assert check_output_entry(round(expected, 2), row, col).message.startswith(RIGHT)


def test_output_entry_flags_the_other_column():
    fb = check_output_entry(OUT[0][1], 1, 1)
    assert_hint(fb)
    assert "another column" in fb.message


def test_output_entry_flags_the_plain_mean_and_sum():
    fb = check_output_entry(sum(v[0] for v in V) / 4, 1, 1)
    assert_hint(fb)
    assert "mean" in fb.message
    fb = check_output_entry(sum(v[0] for v in V), 1, 1)
    assert_hint(fb)
    assert "without weighting" in fb.message


@pytest.mark.parametrize("wrong", [0.0, 2.0, -1.0, examples.PRINTED_OUTPUT[1, 0], "abc"])
def test_output_entry_refuses_wrong_answers(wrong):
    assert_hint(check_output_entry(wrong, 2, 1))


def test_output_entry_unanswered_and_no_answer_in_messages():
    fb = check_output_entry(None)
    assert not fb and fb.message.startswith(NO_ANSWER) and "Hint:" in fb.message
    answer = OUT[1][0]
    for given in (None, 0.0, OUT[1][1], OUT[1][0] + 0.02, "x"):
        assert not shows(check_output_entry(given, 2, 1).message, answer)


# --- check_uniform_output ----------------------------------------------------------------

def test_uniform_output_right():
    mean = [sum(v[c] for v in V) / len(V) for c in range(2)]
    assert check_uniform_output(mean)
    assert check_uniform_output(np.round(mean, 2))
    # the same thing through attention with a zero query
    out, _ = loop_attention([[0.0, 0.0]], K, V)
    assert check_uniform_output(out[0])


def test_uniform_output_flags_sum_and_wrong_axis():
    fb = check_uniform_output([sum(v[c] for v in V) for c in range(2)])
    assert_hint(fb)
    assert "sum of V's rows" in fb.message
    fb = check_uniform_output([sum(v) / 2 for v in V])
    assert_hint(fb)
    assert "one entry per token" in fb.message


@pytest.mark.parametrize("wrong", [[0, 0], [1, 1], V[0], "abc", 1.0])
def test_uniform_output_refuses_wrong(wrong):
    assert_hint(check_uniform_output(wrong))


def test_uniform_output_unanswered_and_no_answer_in_messages():
    assert check_uniform_output(None).message.startswith(NO_ANSWER)
    mean = [sum(v[c] for v in V) / len(V) for c in range(2)]
    for given in (None, [0, 0], [sum(v[c] for v in V) for c in range(2)], "x"):
        msg = check_uniform_output(given).message
        assert not any(shows(msg, x) for x in mean)


# --- check_uniform_query -----------------------------------------------------------------

def test_uniform_query_accepts_any_query_with_equal_scores():
    assert check_uniform_query([0.0, 0.0])
    assert check_uniform_query(np.zeros(2))
    # keys that differ only along one direction: a query orthogonal to it also works
    keys = [[1.0, 2.0], [1.0, -3.0], [1.0, 0.5]]
    assert check_uniform_query([5.0, 0.0], k=keys, v=[[1.0], [2.0], [3.0]])


@pytest.mark.parametrize("wrong", [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0, 0.0], "abc", [np.nan, 0.0]])
def test_uniform_query_refuses_wrong(wrong):
    assert_hint(check_uniform_query(wrong))


def test_uniform_query_unanswered():
    fb = check_uniform_query(None)
    assert not fb and fb.message.startswith(NO_ANSWER)


@pytest.mark.parametrize("decimals", [2, 3])
def test_output_entry_tolerance_follows_the_rounding_asked(decimals):
    """Rounded to the digits asked: right; one unit of the last digit off: not right."""
    exact = OUT[1][0]  # row 2, column 1 (from 1), by loops
    rounded = round(exact, decimals)
    assert check_output_entry(rounded, row=2, col=1, decimals=decimals).correct
    for wrong in (rounded - 10.0 ** -decimals, rounded + 10.0 ** -decimals):
        fb = check_output_entry(wrong, row=2, col=1, decimals=decimals)
        assert not fb.correct and f"at {decimals} decimals" in fb.message
