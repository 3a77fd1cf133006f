"""The exercise checks of 07 · Causal masking, and the masked numbers the notebook shows.

Each check must accept the right answer, refuse typical wrong ones with a hint, say so when
the placeholder is still there, and never show the answer in its message. The right
answers here are built with plain Python loops and comparisons, not taken from attn_core.
"""

import math

import numpy as np
import pytest

from attn_core import MASKED_SCORE, attention, causal_mask, examples, softmax, window_mask
from attn_core.checks import check_visible_positions, check_window_mask, check_zeroed_row_sums
from attn_core.checks._base import NO_ANSWER, NOT_YET, RIGHT

from reference import carries_hint


def loop_softmax(row):
    """Softmax of a list that may hold -inf; all -inf gives all zeros."""
    finite = [x for x in row if x != -math.inf]
    if not finite:
        return [0.0] * len(row)
    m = max(finite)
    e = [0.0 if x == -math.inf else math.exp(x - m) for x in row]
    return [x / sum(e) for x in e]


def loop_scaled_scores():
    q, k = examples.Q.tolist(), examples.K.tolist()
    return [[sum(a * b for a, b in zip(qi, kj, strict=True)) / math.sqrt(2) for kj in k]
            for qi in q]


SCALED = loop_scaled_scores()
N = len(SCALED)
CAUSAL = [[j <= i for j in range(N)] for i in range(N)]
MASKED_WEIGHTS = [loop_softmax([s if ok else -math.inf for s, ok in zip(r, m, strict=True)])
                  for r, m in zip(SCALED, CAUSAL, strict=True)]
UNMASKED = [loop_softmax(r) for r in SCALED]
ZEROED = [[w if ok else 0.0 for w, ok in zip(r, m, strict=True)]
          for r, m in zip(UNMASKED, CAUSAL, strict=True)]
ZEROED_SUMS = [sum(r) for r in ZEROED]


def loop_window(n, w):
    return [[0 <= i - j < w for j in range(n)] for i in range(n)]


def shows(message, number):
    return any(f"{number:.{d}f}" in message for d in (2, 3, 4))


def assert_hint(fb):
    assert not fb and fb.message.startswith(NOT_YET) and carries_hint(fb)


# --- the worked numbers the notebook shows ---------------------------------------------

def test_masked_weights_match_the_loop_reference():
    _, w = attention(examples.Q, examples.K, examples.V, mask=causal_mask(4))
    np.testing.assert_allclose(w, MASKED_WEIGHTS, rtol=0, atol=1e-12)
    assert all(math.isclose(sum(r), 1.0) for r in MASKED_WEIGHTS)
    assert MASKED_SCORE == -math.inf and math.exp(MASKED_SCORE) == 0.0


def test_printed_causal_row_2_comes_from_the_erroneous_score():
    """Guards notebook 07's erratum on attn_core/examples.py's PRINTED_* data, with the
    weights attn_core computes."""
    printed = examples.PRINTED_CAUSAL_WEIGHTS
    wrong_row = examples.PRINTED_SCORES[1, :2].tolist()  # 1.78 and 1.74, as printed
    from_printed = loop_softmax([x / math.sqrt(2) for x in wrong_row])
    assert np.round(from_printed, 2).tolist() == printed[1, :2].tolist()
    assert np.round(MASKED_WEIGHTS[1][:2], 2).tolist() != printed[1, :2].tolist()
    _, w = attention(examples.Q, examples.K, examples.V, mask=causal_mask(4))
    assert np.round(w[1, :2], 2).tolist() != printed[1, :2].tolist()


def test_printed_causal_row_4_contradicts_the_printed_unmasked_row_4():
    """Nothing is masked in the last row, so both printed rows should be the same (they are
    not: attn_core/examples.py's PRINTED_* data), and attn_core's rows are."""
    assert not np.allclose(examples.PRINTED_CAUSAL_WEIGHTS[3], examples.PRINTED_WEIGHTS[3])
    np.testing.assert_allclose(MASKED_WEIGHTS[3], UNMASKED[3], atol=1e-12)
    _, masked = attention(examples.Q, examples.K, examples.V, mask=causal_mask(4))
    _, unmasked = attention(examples.Q, examples.K, examples.V)
    np.testing.assert_allclose(masked[3], unmasked[3], rtol=0, atol=1e-15)


def test_zeroing_after_softmax_and_renormalising_equals_masking_before():
    """Notebook 07's argument, with the reference and with attn_core's attention."""
    assert not all(math.isclose(s, 1.0) for s in ZEROED_SUMS[:-1])
    renormed = [[w / s for w in r] for r, s in zip(ZEROED, ZEROED_SUMS, strict=True)]
    np.testing.assert_allclose(renormed, MASKED_WEIGHTS, atol=1e-12)
    _, unmasked = attention(examples.Q, examples.K, examples.V)
    zeroed = np.where(causal_mask(4), unmasked, 0.0)
    _, masked = attention(examples.Q, examples.K, examples.V, mask=causal_mask(4))
    np.testing.assert_allclose(zeroed / zeroed.sum(axis=-1, keepdims=True), masked, atol=1e-15)


def test_fully_masked_row_is_zeros_not_nan():
    with np.errstate(invalid="ignore"):
        row = np.array([-np.inf, -np.inf])
        naive = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
    assert np.isnan(naive).all()
    assert softmax([-np.inf, -np.inf]).tolist() == [0.0, 0.0]


# --- check_window_mask -------------------------------------------------------------------

@pytest.mark.parametrize("n, w", [(5, 2), (4, 1), (6, 3), (3, 5)])
def test_window_mask_right(n, w):
    ref = loop_window(n, w)
    assert np.array_equal(window_mask(n, w), ref)
    assert check_window_mask(ref, n, w)
    assert check_window_mask(np.array(ref, dtype=int), n, w).message.startswith(RIGHT)


@pytest.mark.parametrize("wrong, word", [
    ([[abs(i - j) < 2 for j in range(5)] for i in range(5)], "looks ahead"),
    (loop_window(5, 3), "too wide"),
    (loop_window(5, 1), "too narrow"),
    ([[j <= i for j in range(5)] for i in range(5)], "plain causal"),
    (np.array(loop_window(5, 2)).T, "transposed"),
    (np.ones((4, 4), dtype=bool), "shape"),
    ([[2] * 5] * 5, "True/False"),
])
def test_window_mask_wrong(wrong, word):
    fb = check_window_mask(wrong, 5, 2)
    assert_hint(fb)
    assert word in fb.message


def test_window_mask_unanswered():
    fb = check_window_mask(None)
    assert not fb and fb.message.startswith(NO_ANSWER) and "Hint:" in fb.message


# --- check_zeroed_row_sums ---------------------------------------------------------------

def test_zeroed_row_sums_right():
    assert check_zeroed_row_sums(ZEROED_SUMS)
    assert check_zeroed_row_sums(np.round(ZEROED_SUMS, 2))


def test_zeroed_row_sums_flags_all_ones_and_future_columns():
    fb = check_zeroed_row_sums([1.0] * 4)
    assert_hint(fb)
    assert "BEFORE" in fb.message
    flipped = [sum(w for j, w in enumerate(r) if j >= i) for i, r in enumerate(UNMASKED)]
    fb = check_zeroed_row_sums(flipped)
    assert_hint(fb)
    assert "future" in fb.message


@pytest.mark.parametrize("wrong", [[0, 0, 0, 0], [0.25, 0.5, 0.75, 1.0], [1.0] * 3, "abc"])
def test_zeroed_row_sums_refuses_wrong(wrong):
    assert_hint(check_zeroed_row_sums(wrong))


def test_zeroed_row_sums_unanswered_and_no_answer_in_messages():
    assert check_zeroed_row_sums(None).message.startswith(NO_ANSWER)
    for given in (None, [1.0] * 4, [0, 0, 0, 0]):
        msg = check_zeroed_row_sums(given).message
        assert not any(shows(msg, s) for s in ZEROED_SUMS[:-1])


# --- check_visible_positions -------------------------------------------------------------

def loop_visible(query, length, n, causal, window=None):
    def order(j):
        if window is not None:
            return 0 <= query - j < window
        return not causal or j <= query
    return [j for j in range(1, n + 1) if j <= length and order(j)]


@pytest.mark.parametrize("query, length, n, causal, window", [
    (3, 2, 4, True, None), (2, 4, 4, True, None), (4, 3, 5, False, None), (1, 1, 3, True, None),
    (3, 2, 5, True, 2), (4, 3, 6, True, 3), (5, 5, 6, True, 2)])
def test_visible_positions_right(query, length, n, causal, window):
    ref = loop_visible(query, length, n, causal, window)
    assert check_visible_positions(ref, query, length, n, causal, window)
    assert check_visible_positions(np.array(ref), query, length, n, causal, window)


def test_visible_positions_with_a_window():
    assert_hint(check_visible_positions([1, 2], 3, 2, 5, window=2))
    fb = check_visible_positions([2, 3], 3, 2, 5, window=2)
    assert_hint(fb)
    assert "not the padding" in fb.message
    fb = check_visible_positions([1], 3, 2, 5, window=2)  # 0-based version of the answer
    assert_hint(fb)
    assert "0-based" in fb.message


@pytest.mark.parametrize("wrong, word", [([0, 1], "0-based"), ([1, 2, 3], "not the padding"),
                                         ([], "keys, not queries"), ([1], None), ("x", None)])
def test_visible_positions_wrong(wrong, word):
    fb = check_visible_positions(wrong, 3, 2, 4)
    assert_hint(fb)
    if word:
        assert word in fb.message


def test_visible_positions_flags_missing_causal_mask():
    fb = check_visible_positions([1, 2, 3], 2, 3, 4)
    assert_hint(fb)
    assert "not the causal" in fb.message


def test_visible_positions_unanswered():
    fb = check_visible_positions(None)
    assert not fb and fb.message.startswith(NO_ANSWER)


def test_visible_positions_messages_never_show_the_answer():
    ref = loop_visible(4, 3, 6, True, 3)
    for given in (None, [1, 2, 3], [2, 3, 4], [1], [], "x"):
        msg = check_visible_positions(given, 4, 3, 6, window=3).message
        assert str(ref) not in msg and ", ".join(map(str, ref)) not in msg
