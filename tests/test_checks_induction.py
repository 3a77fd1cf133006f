"""The checks of notebook 15: right answers pass, typical slips get their hint, none leaks."""

import numpy as np
import pytest

from attn_core.checks import induction as C

import reference as ref


def loop_induction_score(w, ids):
    """An independent reference: the definition as two loops."""
    total, count = 0.0, 0
    for i in range(len(ids)):
        keys = {j + 1 for j in range(i) if ids[j] == ids[i]}
        if keys:
            total += sum(w[i, k] for k in keys)
            count += 1
    return total / count


def all_queries(w, ids):  # slip: averages over every query
    return np.mean([sum(w[i, j + 1] for j in range(i) if ids[j] == ids[i])
                    for i in range(len(ids))])


def same_token(w, ids):  # slip: the earlier occurrence itself
    vals = [sum(w[i, j] for j in range(i) if ids[j] == ids[i]) for i in range(len(ids))]
    has = [any(ids[j] == ids[i] for j in range(i)) for i in range(len(ids))]
    return np.mean([v for v, h in zip(vals, has) if h])


def one_target(w, ids):  # slip: only the largest target
    vals = [max([w[i, j + 1] for j in range(i) if ids[j] == ids[i]], default=None)
            for i in range(len(ids))]
    return np.mean([v for v in vals if v is not None])


def test_a_right_induction_score_passes():
    assert C.check_my_induction_score(loop_induction_score)


@pytest.mark.parametrize(("fn", "words"), [
    (all_queries, "averaged over every query"),
    (same_token, "earlier occurrence itself"),
    (one_target, "only one target"),
    (lambda w, ids: 1 / 0, "raised ZeroDivisionError"),
    (lambda w, ids: 0.5, "differs from the induction score"),
    (3.0, "function itself"),
])
def test_induction_slips_get_their_hint(fn, words):
    feedback = C.check_my_induction_score(fn)
    ref.assert_not_yet(feedback)
    assert words in feedback.message


def test_the_hint_follows_on_request():
    first = C.check_my_induction_score(lambda w, ids: 0.5)
    assert "Hint:" not in first.message and "For each query i" in first.more
    assert "For each query i" in C.check_my_induction_score(lambda w, ids: 0.5).message
    assert "Average, over the queries" in C.check_prev_score(0.9, hint=True).message


def test_the_cases_tell_the_slips_apart():
    """Each slip differs from the right score on at least one case (else its hint could
    never be reached and a wrong function could pass)."""
    for slip in (all_queries, same_token, one_target):
        assert any(not np.isclose(slip(w, ids), loop_induction_score(w, ids))
                   for _, w, ids in C._score_cases()), slip.__name__


def test_prev_score_against_a_loop_and_its_slips():
    w = C.prev_score_map()
    n = len(w)
    right = sum(w[i, i - 1] for i in range(1, n)) / (n - 1)
    assert C.check_prev_score(round(right, 2))
    assert C.check_prev_score(right)
    for wrong, words in ((sum(w[i, i - 1] for i in range(1, n)) / n, "all n rows"),
                         (np.trace(w) / n, "the diagonal")):
        feedback = C.check_prev_score(round(wrong, 3))
        ref.assert_not_yet(feedback)
        assert words in feedback.message
        for number in ref.numbers_in(feedback.message):
            assert not np.isclose(number, right, atol=1e-3)
    ref.assert_unanswered(C.check_prev_score(None))


@pytest.mark.parametrize(("table", "expected"), [
    ({"none": (0.3, 0.9), "prev": (3.0, 0.1), "control": (0.35, 0.9)}, "a"),
    ({"none": (0.3, 0.9), "prev": (0.4, 0.8), "control": (3.0, 0.1)}, "b"),
    ({"none": (0.3, 0.9), "prev": (0.4, 0.8), "control": (0.35, 0.9)}, "c"),
    ({"none": (0.3, 0.9), "prev": (3.0, 0.1), "control": (2.8, 0.1)}, "d"),
])
def test_which_ablation_reads_the_table(table, expected):
    assert C.check_which_ablation(expected, table)
    for other in set(C.ABLATION_OPTIONS) - {expected}:
        ref.assert_not_yet(C.check_which_ablation(other, table))
    ref.assert_unanswered(C.check_which_ablation(None, table))
