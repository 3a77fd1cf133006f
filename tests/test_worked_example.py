"""The article's worked example, number by number, against an independent reference.

The reference below is plain Python (lists, loops, ``math``): it shares no code with
attn_core, so a mistake in either shows up as a disagreement. This file is the home of the
worked numbers of notebooks 03 to 07 (scores, scaling, softmax, weighted sum, causal mask).

The last tests record the article's errata: for every ``PRINTED_*`` array, the set of cells
that differ from the computed values by more than rounding. The sets are found by
computing, and compared with the sets recorded here, so the test fails if the article's
data (attn_core.examples) or the maths changes. Cells are numbered from 1, as the article
numbers rows and columns: (2, 1) is row 2, column 1.
"""

import math

import numpy as np
import pytest

from attn_core import (
    attention,
    causal_mask,
    examples,
    score_matrix_cells,
    scores,
    softmax,
    softmax_jacobian,
)

#: A printed number rounded to 2 decimals is at most this far from the true value.
ROUNDING = 0.005

# --- the independent reference: plain Python ------------------------------------------


def as_lists(a):
    return [[float(x) for x in row] for row in a]


def transpose(m):
    return [list(col) for col in zip(*m, strict=True)]


def matmul(a, b):
    """(n, m) x (m, p) -> (n, p): every entry a sum of products, written out."""
    bt = transpose(b)
    return [[sum(x * y for x, y in zip(row, col, strict=True)) for col in bt] for row in a]


def ref_softmax(row):
    finite = [x for x in row if x != -math.inf]
    m = max(finite)
    e = [math.exp(x - m) if x != -math.inf else 0.0 for x in row]
    total = sum(e)
    return [x / total for x in e]


def ref_attention(q, k_t, v, causal=False):
    d_k = len(k_t)
    s = [[x / math.sqrt(d_k) for x in row] for row in matmul(q, k_t)]
    if causal:
        s = [[x if j <= i else -math.inf for j, x in enumerate(row)] for i, row in enumerate(s)]
    w = [ref_softmax(row) for row in s]
    return matmul(w, v), w


Q, K_T, V = as_lists(examples.Q), as_lists(examples.K_T), as_lists(examples.V)
REF_SCORES = matmul(Q, K_T)
REF_OUT, REF_WEIGHTS = ref_attention(Q, K_T, V)
REF_CAUSAL_OUT, REF_CAUSAL_WEIGHTS = ref_attention(Q, K_T, V, causal=True)


def close(a, b, tol=1e-12):
    return np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=0, atol=tol)


# --- the inputs ------------------------------------------------------------------------

def test_inputs_have_the_article_shapes():
    """Guards the data in attn_core/examples.py (Q, K_T, V and K as the keys' rows)."""
    assert examples.Q.shape == (4, 2) and examples.K_T.shape == (2, 4)
    assert examples.V.shape == (4, 2)
    assert close(examples.K, transpose(K_T))  # K holds the keys as rows


# --- step 1: scores ----------------------------------------------------------------------

def test_score_matrix_matches_the_loop():
    assert close(scores(examples.Q, examples.K, scale=1.0), REF_SCORES)
    assert close(examples.Q @ examples.K_T, REF_SCORES)


def test_highlighted_cell_is_q1_dot_k1():
    # The article's highlighted cell: 1.0 * 1.1 + 0.5 * 0.4
    by_hand = Q[0][0] * K_T[0][0] + Q[0][1] * K_T[1][0]
    assert math.isclose(by_hand, 1.30, abs_tol=1e-12)
    assert math.isclose(scores(examples.Q, examples.K, scale=1.0)[0, 0], by_hand)


def test_cell_2_1_is_0_78_not_1_78():
    s = scores(examples.Q, examples.K, scale=1.0)
    assert math.isclose(s[1, 0], 0.2 * 1.1 + 1.4 * 0.4, abs_tol=1e-12)
    assert abs(s[1, 0] - 0.78) < 1e-12
    assert abs(examples.PRINTED_SCORES[1, 0] - s[1, 0]) > 0.99  # a slip of exactly 1


def test_row_2_largest_columns():
    # The article says row 2 is largest in columns 1 and 2; that holds for the printed
    # row (with its 1.78) but the computed row is largest in columns 2 and 4.
    def top2(row):
        return {j + 1 for j in sorted(range(len(row)), key=lambda j: row[j])[-2:]}

    assert top2(REF_SCORES[1]) == {2, 4}
    assert top2(list(examples.PRINTED_SCORES[1])) == {1, 2}
    assert {int(j) + 1 for j in np.argsort(scores(examples.Q, examples.K, scale=1.0)[1])[-2:]} \
        == {2, 4}


def test_score_shape_is_queries_by_keys():
    for n_q, n_k, d_k in [(1, 1, 1), (5, 7, 3), (16, 16, 8)]:
        g = examples.rng(n_q + n_k)
        assert scores(g.standard_normal((n_q, d_k)), g.standard_normal((n_k, d_k))).shape \
            == (n_q, n_k)


# --- step 2: scaling ---------------------------------------------------------------------

def test_scaled_scores_divide_by_sqrt_dk():
    d_k = len(K_T)
    expected = [[x / math.sqrt(d_k) for x in row] for row in REF_SCORES]
    assert close(scores(examples.Q, examples.K), expected)
    assert close(scores(examples.Q, examples.K, scale=1 / math.sqrt(d_k)), expected)


def test_softmax_demo_rows():
    small = [float(x) for x in examples.SMALL_SCORES]
    large = [examples.SATURATION_FACTOR * x for x in small]
    assert close(softmax(examples.SMALL_SCORES), ref_softmax(small))
    assert close(softmax(examples.SMALL_SCORES * examples.SATURATION_FACTOR), ref_softmax(large))
    assert max(ref_softmax(small)) < 0.7 < 0.99 < max(ref_softmax(large))
    assert examples.SATURATION_FACTOR == math.sqrt(64)  # stands for d_k = 64


# --- step 3: weights ----------------------------------------------------------------------

def test_weights_match_the_loop_and_rows_sum_to_one():
    out, w = attention(examples.Q, examples.K, examples.V)
    assert close(w, REF_WEIGHTS)
    assert close(w.sum(axis=-1), [1.0] * 4)


# --- step 4: the weighted sum -------------------------------------------------------------

def test_output_matches_the_loop():
    out, w = attention(examples.Q, examples.K, examples.V)
    assert close(out, REF_OUT)
    # output row 1, written as the article writes it: a weighted sum of the value rows
    row1 = [sum(REF_WEIGHTS[0][j] * V[j][c] for j in range(4)) for c in range(2)]
    assert close(out[0], row1)


# --- causal masking ---------------------------------------------------------------------

def test_causal_weights_match_the_loop():
    out, w = attention(examples.Q, examples.K, examples.V, mask=causal_mask(4))
    assert close(w, REF_CAUSAL_WEIGHTS)
    assert close(out, REF_CAUSAL_OUT)
    assert np.all(w[np.triu_indices(4, 1)] == 0.0)  # exactly zero, not just small
    assert close(w.sum(axis=-1), [1.0] * 4)
    assert close(w[0], [1.0, 0.0, 0.0, 0.0])
    assert close(w[-1], REF_WEIGHTS[-1])  # the last token sees everything: unmasked row


# --- the article's errata -----------------------------------------------------------------

def differing_cells(printed, computed, tol=ROUNDING):
    """Cells (counted from 1) where ``printed`` is further than ``tol`` from ``computed``."""
    printed = np.atleast_2d(np.asarray(printed, dtype=float))
    computed = np.atleast_2d(np.asarray(computed, dtype=float))
    assert printed.shape == computed.shape
    return {(int(i) + 1, int(j) + 1) for i, j in np.argwhere(np.abs(printed - computed) > tol)}


ALL_4x4 = {(i, j) for i in range(1, 5) for j in range(1, 5)}

ERRATA = {
    # name: (computed by the reference, cells where the printed numbers are off)
    "PRINTED_SCORES": (REF_SCORES, {(2, 1)}),
    "PRINTED_WEIGHTS": (REF_WEIGHTS, ALL_4x4 - {(4, 2), (4, 3)}),
    "PRINTED_OUTPUT": (REF_OUT, {(i, j) for i in range(1, 5) for j in (1, 2)}),
    "PRINTED_CAUSAL_WEIGHTS": (REF_CAUSAL_WEIGHTS,
                               {(2, 1), (2, 2), (3, 1), (3, 2), (3, 3), (4, 2), (4, 3), (4, 4)}),
    "PRINTED_SOFTMAX_SMALL": (ref_softmax([float(x) for x in examples.SMALL_SCORES]), set()),
    "PRINTED_SOFTMAX_LARGE": (ref_softmax([examples.SATURATION_FACTOR * float(x)
                                           for x in examples.SMALL_SCORES]), set()),
    # the cost table: n * n cells, and the cost relative to the first length
    "PRINTED_COST_CELLS": ([n * n for n in examples.COST_TABLE_LENGTHS], set()),
    "PRINTED_COST_RELATIVE": ([(n / examples.COST_TABLE_LENGTHS[0]) ** 2
                               for n in examples.COST_TABLE_LENGTHS], set()),
}


def package_values():
    """What the course computes for every PRINTED_* array, with attn_core's own functions."""
    q, k, v = examples.Q, examples.K, examples.V
    out, weights = attention(q, k, v)
    cells = [score_matrix_cells(n) for n in examples.COST_TABLE_LENGTHS]
    return {
        "PRINTED_SCORES": scores(q, k, scale=1.0),
        "PRINTED_WEIGHTS": weights,
        "PRINTED_OUTPUT": out,
        "PRINTED_CAUSAL_WEIGHTS": attention(q, k, v, mask=causal_mask(4))[1],
        "PRINTED_SOFTMAX_SMALL": softmax(examples.SMALL_SCORES),
        "PRINTED_SOFTMAX_LARGE": softmax(examples.SATURATION_FACTOR * examples.SMALL_SCORES),
        "PRINTED_COST_CELLS": cells,
        "PRINTED_COST_RELATIVE": [c / cells[0] for c in cells],
    }


@pytest.mark.parametrize("name", sorted(ERRATA))
def test_printed_matrices_differ_exactly_where_recorded(name):
    """The recorded errata hold for the reference and for what attn_core computes."""
    computed, recorded = ERRATA[name]
    assert differing_cells(getattr(examples, name), computed) == recorded
    assert differing_cells(getattr(examples, name), package_values()[name]) == recorded


def test_every_printed_matrix_is_covered():
    """Guards attn_core/examples.py: every PRINTED_* array has its errata recorded here."""
    printed = {n for n in dir(examples) if n.startswith("PRINTED_")}
    assert printed == set(ERRATA) == set(package_values())


def test_printed_causal_row_2_follows_the_printed_score_slip():
    """Guards the erratum notebooks 03 and 07 explain, on examples.PRINTED_* data.

    The printed causal row 2 (0.51, 0.49) is what the slipped score 1.78 would give:
    softmax([1.78, 1.74] / sqrt(2)). With the correct 0.78 it is not.
    """
    slipped = ref_softmax([x / math.sqrt(2) for x in examples.PRINTED_SCORES[1][:2]])
    assert differing_cells(examples.PRINTED_CAUSAL_WEIGHTS[1, :2], slipped) == set()
    from_package = softmax(examples.PRINTED_SCORES[1, :2] / math.sqrt(2))
    assert differing_cells(examples.PRINTED_CAUSAL_WEIGHTS[1, :2], from_package) == set()
    assert differing_cells(examples.PRINTED_CAUSAL_WEIGHTS[1, :2],
                           REF_CAUSAL_WEIGHTS[1][:2]) == {(1, 1), (1, 2)}


def test_the_course_errata_helper_finds_the_same_cells():
    # attn_core.errata.differing_cells (round the computed value, compare with the printed
    # digits) is what every notebook uses; on the article's data it must flag exactly the
    # cells recorded above, found here by the plain tolerance rule.
    from attn_core.errata import differing_cells as course_rule

    for name, (computed, recorded) in ERRATA.items():
        flagged = course_rule(np.atleast_2d(np.asarray(computed, dtype=float)),
                              np.atleast_2d(getattr(examples, name)))
        assert {(int(i) + 1, int(j) + 1) for i, j in np.argwhere(flagged)} == recorded, name


def test_printed_output_fits_printed_weights_only_in_two_halfway_cells():
    """Guards the claim of notebooks/06-weighted-sum.ipynb on attn_core/examples.py's data.

    Printed weights @ V, in exact decimal arithmetic: six cells are further from the
    printed output than any rounding; (1, 1) = 1.125 and (2, 2) = 1.795 sit exactly halfway
    between two hundredths, so 1.13 and 1.79 are legitimate roundings. attn_core's errata
    rule (errata.differing_cells) must agree: it flags exactly the six.
    """
    from fractions import Fraction

    from attn_core.errata import differing_cells as course_rule

    def exact(a):
        return [[Fraction(str(float(x))) for x in row] for row in a]

    w, v, printed = exact(examples.PRINTED_WEIGHTS), exact(examples.V), exact(
        examples.PRINTED_OUTPUT)
    product = [[sum(w[i][j] * v[j][c] for j in range(4)) for c in range(2)] for i in range(4)]
    half = Fraction(1, 200)
    near = {(i + 1, c + 1) for i in range(4) for c in range(2)
            if abs(product[i][c] - printed[i][c]) <= half}
    assert near == {(1, 1), (2, 2)}
    assert all(abs(product[i - 1][c - 1] - printed[i - 1][c - 1]) == half for i, c in near)
    assert product[0][0] == Fraction(9, 8)  # the sum the article writes out: 1.125
    flagged = course_rule(examples.PRINTED_WEIGHTS @ examples.V, examples.PRINTED_OUTPUT)
    all_cells = {(i + 1, c + 1) for i in range(4) for c in range(2)}
    assert {(int(i) + 1, int(c) + 1) for i, c in np.argwhere(flagged)} == all_cells - near


def test_article_row_1_percentages():
    """Notebook 05: the article's "31% from itself, 26% from token 2" comes from its printed
    weights; the weights computed by attn_core (and by the reference) give 32% and 24%."""
    assert [round(100 * x) for x in examples.PRINTED_WEIGHTS[0, :2]] == [31, 26]
    assert [round(100 * x) for x in REF_WEIGHTS[0][:2]] == [32, 24]
    _, weights = attention(examples.Q, examples.K, examples.V)
    assert [round(100 * float(x)) for x in weights[0, :2]] == [32, 24]


def ref_jacobian_norm(p):
    """Frobenius norm of diag(p) - p p^T, entry by entry."""
    n = len(p)
    return math.sqrt(sum((p[i] * ((i == j) - p[j])) ** 2 for i in range(n) for j in range(n)))


def test_jacobian_norm_rises_then_falls_as_a_row_of_16_sharpens():
    # Notebook 04: a uniform row of 16 has small Jacobian entries (about 1/16), a row with
    # half its weight on one key has larger ones, and a near one-hot row almost none.
    uniform = [1 / 16] * 16
    peaked = [0.5] + [0.5 / 15] * 15
    one_hot = [1 - 15e-6] + [1e-6] * 15
    assert ref_jacobian_norm(one_hot) < 1e-4 < ref_jacobian_norm(uniform) \
        < ref_jacobian_norm(peaked)
    for p in (uniform, peaked, one_hot):
        assert math.isclose(float(np.linalg.norm(softmax_jacobian(np.array(p)))),
                            ref_jacobian_norm(p), rel_tol=1e-9)


def test_saturation_toy_row_gradient_is_hundreds_of_times_smaller():
    small = ref_softmax([float(x) for x in examples.SMALL_SCORES])
    large = ref_softmax([examples.SATURATION_FACTOR * float(x) for x in examples.SMALL_SCORES])
    assert 100 < ref_jacobian_norm(small) / ref_jacobian_norm(large) < 1000
    # the same with attn_core's softmax and Jacobian
    norms = [float(np.linalg.norm(softmax_jacobian(softmax(f * examples.SMALL_SCORES))))
             for f in (1.0, examples.SATURATION_FACTOR)]
    assert math.isclose(norms[0] / norms[1],
                        ref_jacobian_norm(small) / ref_jacobian_norm(large), rel_tol=1e-9)
