"""Induction scores, previous-token scores and the repeated-token data (attn_core.induction).

The scores are checked on hand-made attention maps whose answer is known by construction
(a perfect previous-token head, a perfect induction head, a uniform causal head) and, on
random maps and ids with many repeats, against a brute-force double loop over queries and
keys written here from the definition.
"""

import math

import numpy as np
import pytest

from attn_core.induction import (
    FIRST,
    OUTSIDE,
    SECOND,
    diagonal_score,
    icl_score,
    induction_score,
    induction_targets,
    previous_token_score,
    repeated_tokens,
)

from reference import assert_clear_error

L = 5
#: "0 1 2 3 4 0 1 2 3 4": no token repeats inside a copy, so the only targets are the copy's.
CLASSIC = np.concatenate([np.arange(L), np.arange(L)])


def uniform_causal(n):
    return np.tri(n) / np.arange(1, n + 1)[:, None]


def previous_token_map(n):
    w = np.eye(n, k=-1)
    w[0, 0] = 1.0
    return w


def induction_map(n, segment):
    """Queries of the second copy look at ``i - segment + 1``; the others uniformly back."""
    w = uniform_causal(n)
    for i in range(segment, n):
        w[i] = 0.0
        w[i, i - segment + 1] = 1.0
    return w


def brute_induction(w, ids):
    """The definition, as loops: for each query with an earlier occurrence of its token,
    the weight on the keys right after those occurrences; mean over such queries."""
    total, count = 0.0, 0
    for i in range(len(ids)):
        keys = {j + 1 for j in range(i) if ids[j] == ids[i]}
        if keys:
            total += math.fsum(w[i, k] for k in keys)
            count += 1
    return total / count


def brute_diagonal(w, offset):
    return math.fsum(w[i, i - offset] for i in range(offset, len(w))) / (len(w) - offset)


def test_a_previous_token_head_scores_1_and_no_induction():
    w = previous_token_map(2 * L)
    assert previous_token_score(w) == pytest.approx(1.0)
    assert induction_score(w, CLASSIC) == pytest.approx(0.0)


def test_an_induction_head_scores_1_and_little_previous_token():
    w = induction_map(2 * L, L)
    assert induction_score(w, CLASSIC) == pytest.approx(1.0)
    # only the uniform first-copy rows put weight on i - 1: 1/(i + 1) for i = 1..L - 1
    expected = sum(1 / (i + 1) for i in range(1, L)) / (2 * L - 1)
    assert previous_token_score(w) == pytest.approx(expected)


def test_a_uniform_head_scores_what_it_spreads():
    w = uniform_causal(2 * L)
    # query i >= L has one target among i + 1 keys
    expected = np.mean([1 / (i + 1) for i in range(L, 2 * L)])
    assert induction_score(w, CLASSIC) == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(6))
def test_scores_match_a_brute_force_loop_on_random_maps(seed):
    g = np.random.default_rng(seed)
    n = int(g.integers(4, 12))
    ids = g.integers(0, 3, n)  # 3 tokens: many repeats, some queries with several targets
    ids[1] = ids[0]  # a token right after itself: its target is the query itself
    w = g.random((n, n)) * np.tri(n)
    w /= w.sum(-1, keepdims=True)
    assert induction_score(w, ids) == pytest.approx(brute_induction(w, ids), rel=1e-12)
    for offset in range(1, n):
        assert diagonal_score(w, offset) == pytest.approx(brute_diagonal(w, offset), rel=1e-12)


def test_targets_are_the_keys_after_earlier_occurrences():
    t = induction_targets([7, 8, 7, 7])
    assert np.argwhere(t).tolist() == [[2, 1], [3, 1], [3, 3]]


def test_leading_dims_are_independent_maps():
    g = np.random.default_rng(3)
    ids = g.integers(0, 4, (3, 9))
    w = g.random((3, 2, 9, 9)) * np.tri(9)
    w /= w.sum(-1, keepdims=True)
    scores = induction_score(w, ids[:, None])  # (3, 2)
    assert scores.shape == (3, 2)
    for b in range(3):
        for h in range(2):
            assert scores[b, h] == pytest.approx(brute_induction(w[b, h], ids[b]))
    assert previous_token_score(w).shape == (3, 2)


def test_with_nothing_repeated_the_score_is_undefined():
    assert_clear_error(lambda: induction_score(uniform_causal(4), [0, 1, 2, 3]), ValueError,
                       r"no token occurs twice")


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda: previous_token_score(np.ones((3, 4))), ValueError, r"square attention maps"),
    (lambda: diagonal_score(np.eye(3), 3), ValueError, r"offset must be between -2 and 2"),
    (lambda: induction_score(np.eye(3), [0, 0]), ValueError, r"n = 3 tokens"),
    (lambda: induction_score(np.eye(3), [0.0, 0.0, 1.0]), TypeError, r"ids must be an integer"),
    (lambda: repeated_tokens(np.random.default_rng(0), 2, 10, 6, segment=4), ValueError,
     r"do not fit in n = 6"),
    (lambda: repeated_tokens(np.random.default_rng(0), 2, 5, 6, segment=3, distinct=True),
     ValueError, r"distinct=True needs n <= vocab_size"),
    (lambda: repeated_tokens(0, 2, 5, 6, segment=3), TypeError, r"rng must be"),
    (lambda: repeated_tokens(np.random.default_rng(0), 2, 9, 8, segment=1), ValueError,
     r"segment must be at least 2"),
])
def test_bad_input_names_the_argument(call, exc, pattern):
    assert_clear_error(call, exc, pattern)


def test_icl_score_is_late_minus_early():
    losses = np.array([[4.0, 3.0, 1.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    np.testing.assert_allclose(icl_score(losses, early=slice(0, 2), late=[2, 3]), [-3.0, 0.0])


# --- the data ---------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_the_second_copy_repeats_the_first(seed):
    ids, labels = repeated_tokens(np.random.default_rng(seed), 50, 20, 32, (4, 12), (0, 5))
    for row, lab in zip(ids, labels):
        first, second = np.flatnonzero(lab == FIRST), np.flatnonzero(lab == SECOND)
        assert len(first) == len(second) and 3 <= len(first) <= 11
        offset = second[0] - first[0]  # the copy's distance: segment + gap
        assert np.array_equal(row[second], row[second - offset])
        assert 4 <= offset <= 17 and second[-1] < 32
        # each second-copy token sits one after the earlier occurrence of the token before it
        targets = induction_targets(row)
        assert all(targets[t - 1, t - offset] for t in second)
    assert set(np.unique(labels)) <= {OUTSIDE, FIRST, SECOND}


def test_data_is_seeded_and_distinct_means_no_repeat():
    a = repeated_tokens(np.random.default_rng(5), 4, 30, 28, 14)
    b = repeated_tokens(np.random.default_rng(5), 4, 30, 28, 14)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert np.array_equal(a[0][:, :14], a[0][:, 14:])  # the classic layout
    ids, labels = repeated_tokens(np.random.default_rng(5), 4, 30, 28, 14, distinct=True)
    assert all(len(set(row)) == 28 for row in ids)
    assert not induction_targets(ids).any()
    assert np.array_equal(labels, a[1])


def test_a_map_that_is_not_an_attention_map_is_refused():
    """Raw scores (negative entries, rows not summing to 1) gave a score such as -0.346:
    induction_score must refuse them, naming the entry or row."""
    g = np.random.default_rng(5)
    raw = g.standard_normal((2 * L, 2 * L))  # scores before the softmax
    assert_clear_error(lambda: induction_score(raw, CLASSIC), ValueError,
                       r"weights must be attention maps .*entry \(\d+, \d+\) is -")
    unnormalised = np.tri(2 * L)  # non-negative, rows sum to 1..2L
    assert_clear_error(lambda: induction_score(unnormalised, CLASSIC), ValueError,
                       r"row \(1,\) sums to 2")
    almost = uniform_causal(2 * L)
    almost[3] *= 1 + 1e-9  # rounding: still a map
    assert induction_score(almost, CLASSIC) == pytest.approx(induction_score(
        uniform_causal(2 * L), CLASSIC))
    stacked = np.stack([uniform_causal(2 * L), uniform_causal(2 * L) * 1.01])
    assert_clear_error(lambda: induction_score(stacked, CLASSIC), ValueError,
                       r"row \(1, 0\) sums to 1\.01")
    low = uniform_causal(2 * L).astype(np.float16)  # a lower precision rounds more
    assert induction_score(low, CLASSIC) == pytest.approx(
        induction_score(uniform_causal(2 * L), CLASSIC), abs=1e-3)
