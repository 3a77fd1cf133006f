"""errata: the rule that decides which printed cells are wrong, checked against a loop."""

import numpy as np
import pytest

from attn_core import examples as ex
from attn_core.errata import differing_cells, side_by_side


def loop_differs(computed, printed):
    """A printed cell is right iff formatting the computed value to 2 decimals gives it."""
    return [[f"{c:.2f}" != f"{p:.2f}" for c, p in zip(crow, prow)]
            for crow, prow in zip(computed, printed)]


def test_differing_cells_agrees_with_string_formatting_on_random_matrices():
    rng = np.random.default_rng(5)
    for _ in range(100):
        computed = rng.normal(size=(3, 4))
        printed = np.round(computed, 2)
        flip = rng.random((3, 4)) < 0.3
        printed[flip] += rng.choice([-0.01, 0.01, 0.5], size=int(flip.sum()))
        # exact halves are where formatting and rounding may legitimately disagree
        assert differing_cells(computed, printed).tolist() == loop_differs(computed, printed)


def test_an_exact_halfway_value_may_be_printed_either_way():
    computed = np.array([[0.5 * 2.0 + 0.25 * 0.5, 1.795]])  # 1.125 exactly; 1.795 in float
    assert not differing_cells(computed, [[1.13, 1.79]]).any()
    assert not differing_cells(computed, [[1.12, 1.80]]).any()
    assert differing_cells(computed, [[1.14, 1.78]]).all()


def test_the_article_score_erratum_is_the_one_cell_found():
    computed = ex.Q @ ex.K_T
    assert np.argwhere(differing_cells(computed, ex.PRINTED_SCORES)).tolist() == [[1, 0]]


def test_side_by_side_stars_exactly_the_differing_cells():
    computed = ex.Q @ ex.K_T
    table = side_by_side(computed, ex.PRINTED_SCORES)
    lines = table.splitlines()
    assert lines[0].split() == ["computed", "|", "article"]
    assert lines[2].split("|")[1].split() == ["1.78*", "1.74", "0.30", "1.30"]
    assert lines[-1] == "1 of 16 printed cells differ (* marks them)"
    assert table.count("*") == 1 + 1  # the starred cell and the legend


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match=r"computed and printed must have the same shape"):
        differing_cells(np.zeros((2, 2)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"labels must have 2 entries"):
        side_by_side(np.zeros((2, 2)), np.zeros((2, 2)), labels=["a"])
