"""Tests of attn_core.figures: read the drawn artists back and compare with the inputs.

Each test recomputes what a figure should show (formatted numbers, the arithmetic of a
highlighted cell) independently, with plain Python loops, and reads the artists, never
the helpers' own intermediate values.
"""


import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.colors import to_rgba

from attn_core import figures
from attn_core.figures import (
    cell_squares_path,
    fade_beyond_length,
    head_grid,
    head_mosaic,
    head_mosaic_layout,
    head_mosaic_panels,
    heatmap,
    line_with_marker,
    mask_grid,
    matrix_block,
    matrix_product_diagram,
    sum_of_products_text,
    token_labels,
    update_fade_beyond_length,
    update_head_grid,
    update_head_mosaic,
    update_heatmap,
    update_marker,
    update_mask_grid,
    update_weight_bars,
    weight_bars,
)

# tests/conftest.py selects the Agg backend before matplotlib is imported.

# The article's worked example.
Q = [[1.0, 0.5], [0.2, 1.4], [0.9, 0.1], [0.3, 0.8]]
K_T = [[1.1, 0.3, 0.8, 0.2], [0.4, 1.2, 0.1, 0.9]]
V = [[2.0, 1.0], [0.5, 3.0], [1.5, 0.5], [0.0, 2.0]]
TOKENS = "The animal crossed the road because it was tired .".split()
TOK4 = TOKENS[:4]


def matmul_loop(a, b):
    """a @ b with three plain loops (float64), independent of numpy's matmul."""
    n, k, m = len(a), len(b), len(b[0])
    return [[sum(a[i][t] * b[t][j] for t in range(k)) for j in range(m)] for i in range(n)]


def expected_line(a, b, name, i, j):
    """The caption line for cell (i, j), rebuilt with a loop from a and b."""
    terms, total = [], 0.0
    for t in range(len(b)):
        x, y = a[i][t], b[t][j]
        fx = f"{x:.2f}" if x >= 0 else f"({x:.2f})"
        fy = f"{y:.2f}" if y >= 0 else f"({y:.2f})"
        terms.append(f"{fx}×{fy}")
        total += x * y
    return f"{name}[{i}, {j}] = " + " + ".join(terms) + f" = {total:.2f}"


def softmax_rows(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def cell_texts(texts):
    return [[t.get_text() for t in row] for row in texts]


# --- heatmap ----------------------------------------------------------------------------


def test_heatmap_image_data_equals_input():
    m = np.array(matmul_loop(Q, K_T))
    art = heatmap(m, TOK4, TOK4)
    np.testing.assert_array_equal(np.ma.getdata(art.image.get_array()), m)
    assert art.image.get_array().shape == (4, 4)


def test_heatmap_annotations_are_the_formatted_values():
    m = np.array([[0.123, 1.5], [-2.25, 10.0], [0.0, 3.14159]])
    art = heatmap(m, fmt="{:.3f}")
    expected = [["0.123", "1.500"], ["-2.250", "10.000"], ["0.000", "3.142"]]
    assert cell_texts(art.texts) == expected
    for i in range(3):
        for j in range(2):
            assert art.texts[i, j].get_position() == (j, i)


def test_heatmap_text_contrasts_with_its_cell():
    # viridis runs from dark purple (vmin) to bright yellow (vmax).
    art = heatmap([[0.0, 1.0]], vmin=0, vmax=1)
    assert to_rgba(art.texts[0, 0].get_color()) == to_rgba("white")
    assert to_rgba(art.texts[0, 1].get_color()) == to_rgba("black")


def test_heatmap_highlight_patches_outline_the_cells():
    art = heatmap(np.zeros((4, 5)), highlight=[(0, 0), (2, 3)])
    assert len(art.highlights) == 2
    for patch, (i, j) in zip(art.highlights, [(0, 0), (2, 3)], strict=True):
        assert patch.get_xy() == (j - 0.5, i - 0.5)
        assert (patch.get_width(), patch.get_height()) == (1, 1)
        assert patch.axes is art.ax
        assert not patch.get_fill()


def test_heatmap_single_pair_highlight():
    art = heatmap(np.zeros((3, 3)), highlight=(1, 2))
    assert [p.get_xy() for p in art.highlights] == [(1.5, 0.5)]


def test_heatmap_tick_labels_and_axis_names():
    art = heatmap(np.eye(4), TOK4, TOK4)
    assert [t.get_text() for t in art.ax.get_xticklabels()] == TOK4
    assert [t.get_text() for t in art.ax.get_yticklabels()] == TOK4
    assert art.ax.get_xlabel() == "key"
    assert art.ax.get_ylabel() == "query"


def test_heatmap_long_tokens_are_shortened_and_rotated():
    toks = ["Supercalifragilistic", "ok"]
    art = heatmap(np.eye(2), toks, toks)
    labels = [t.get_text() for t in art.ax.get_xticklabels()]
    assert labels == ["Superca…", "ok"]
    assert all(t.get_rotation() == 45 for t in art.ax.get_xticklabels())


def test_heatmap_draws_on_the_given_axes_without_a_new_figure():
    fig, ax = plt.subplots()
    before = plt.get_fignums()
    art = heatmap(np.eye(3), ax=ax)
    assert plt.get_fignums() == before
    assert art.ax is ax and art.image.axes is ax
    assert art.colorbar is not None and art.colorbar.ax.figure is fig


def test_heatmap_auto_annotation_and_no_colorbar():
    assert heatmap(np.zeros((20, 20))).texts is None
    art = heatmap(np.zeros((2, 2)), annotate=False, colorbar=False)
    assert art.texts is None and art.colorbar is None


def test_heatmap_masked_cells_are_hatched_and_written_minus_infinity():
    allowed = np.tril(np.ones((4, 4), dtype=bool))
    s = np.where(allowed, np.array(matmul_loop(Q, K_T)), -np.inf)
    art = heatmap(s, mask=allowed)
    patch = art.mask_patch
    assert patch.get_hatch() and patch.get_visible()
    path = patch.get_path()
    for i in range(4):
        for j in range(4):
            assert path.contains_point((j, i)) == (not allowed[i, j])
            if not allowed[i, j]:
                assert art.texts[i, j].get_text() == "−∞"
    lo, hi = art.image.get_clim()
    finite = s[np.isfinite(s)]
    assert (lo, hi) == (finite.min(), finite.max())


def test_heatmap_colour_limits_ignore_masked_cells():
    allowed = np.array([[True, False], [True, True]])
    art = heatmap([[0.2, 50.0], [0.4, 0.6]], mask=allowed)
    assert art.image.get_clim() == (0.2, 0.6)


def test_heatmap_wraps_a_title_wider_than_the_axes():
    title = "the identity matrix, where every query attends only to itself"
    art = heatmap(np.eye(2), title=title)
    shown = art.ax.get_title()
    assert "\n" in shown and shown.replace("\n", " ") == title


def test_heatmap_nan_cell_is_blank():
    art = heatmap([[np.nan, 1.0]])
    assert art.texts[0, 0].get_text() == ""


def test_heatmap_negative_zero_is_written_without_sign():
    art = heatmap([[-0.001, -0.5]], fmt="{:.1f}")
    assert cell_texts(art.texts) == [["0.0", "-0.5"]]


def test_heatmap_centered_uses_symmetric_limits_and_diverging_map():
    art = heatmap([[-1.0, 3.0]], centered=True)
    assert art.image.get_clim() == (-3.0, 3.0)
    assert art.image.get_cmap().name.startswith(figures.DIVERGING_CMAP)
    assert heatmap([[0.0, 1.0]]).image.get_cmap().name.startswith(figures.SEQUENTIAL_CMAP)


def test_heatmap_rejects_non_2d_matrix():
    with pytest.raises(ValueError, match=r"^matrix must be 2-D, got shape \(3,\)$"):
        heatmap([1.0, 2.0, 3.0])


def test_heatmap_rejects_wrong_label_lengths():
    with pytest.raises(ValueError, match=r"row_labels must have 2 entries .* got 3"):
        heatmap(np.zeros((2, 4)), row_labels=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"col_labels must have 4 entries .* got 2"):
        heatmap(np.zeros((2, 4)), col_labels=["a", "b"])


def test_heatmap_rejects_bad_mask_and_highlight():
    with pytest.raises(ValueError, match=r"mask must have the matrix's shape \(2, 2\)"):
        heatmap(np.zeros((2, 2)), mask=np.ones((3, 3), dtype=bool))
    with pytest.raises(TypeError, match="mask must be a boolean array"):
        heatmap(np.zeros((2, 2)), mask=np.ones((2, 2)))
    with pytest.raises(ValueError, match="highlight index 5 is out of range"):
        heatmap(np.zeros((2, 2)), highlight=[(0, 5)])


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda n: st.integers(1, 6).flatmap(
            lambda m: st.lists(
                st.lists(st.floats(-100, 100, allow_nan=False), min_size=m, max_size=m),
                min_size=n, max_size=n,
            )
        )
    )
)
def test_heatmap_property_data_and_texts_match_any_matrix(rows):
    art = heatmap(rows, fmt="{:.1f}")
    np.testing.assert_array_equal(np.ma.getdata(art.image.get_array()), np.array(rows))
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            text = f"{v:.1f}"
            if text in ("-0.0",):
                text = "0.0"
            assert art.texts[i, j].get_text() == text
    plt.close(art.ax.figure)


# --- update_heatmap ---------------------------------------------------------------------


def test_update_heatmap_changes_data_in_place():
    art = heatmap(np.array([[0.1, 0.9], [0.5, 0.5]]), ["a", "b"], ["a", "b"],
                  highlight=[(0, 0)])
    ids = (id(art.image), [id(t) for t in art.texts.ravel()], id(art.colorbar),
           [id(p) for p in art.highlights])
    n_children = len(art.ax.get_children())
    new = np.array([[2.0, -1.0], [0.25, 4.0]])
    same = update_heatmap(art, new, highlight=[(1, 1)])
    assert same is art
    assert (id(art.image), [id(t) for t in art.texts.ravel()], id(art.colorbar),
            [id(p) for p in art.highlights]) == ids
    assert len(art.ax.get_children()) == n_children
    np.testing.assert_array_equal(np.ma.getdata(art.image.get_array()), new)
    assert cell_texts(art.texts) == [["2.00", "-1.00"], ["0.25", "4.00"]]
    assert art.image.get_clim() == (-1.0, 4.0)
    assert art.highlights[0].get_xy() == (0.5, 0.5)


def test_update_heatmap_keeps_fixed_limits_and_updates_mask():
    allowed = np.tril(np.ones((3, 3), dtype=bool))
    art = heatmap(np.zeros((3, 3)), vmin=0, vmax=1, mask=allowed)
    patch = art.mask_patch
    update_heatmap(art, np.full((3, 3), 0.5), mask=np.ones((3, 3), dtype=bool))
    assert art.image.get_clim() == (0, 1)
    assert art.mask_patch is patch and not patch.get_visible()
    update_heatmap(art, np.full((3, 3), 0.5), mask=allowed.T)
    assert patch.get_visible() and patch.get_path().contains_point((0, 2))
    # mask=None keeps the current mask; a masked cell's text keeps its one box
    box = art.texts[2, 0].get_bbox_patch()  # row 2, column 0: masked by allowed.T
    assert box is not None and art.texts[0, 2].get_bbox_patch() is None
    update_heatmap(art, np.full((3, 3), 0.25))
    assert patch.get_visible() and patch.get_path().contains_point((0, 2))
    assert art.texts[2, 0].get_bbox_patch() is box


def test_update_heatmap_builds_the_mask_path_only_for_new_masked_cells():
    """A new head over the same conversation keeps its masked cells: their path (a square a
    cell, thousands at 64 tokens) is not built again; other cells give a new path."""
    allowed = np.tril(np.ones((4, 4), dtype=bool))
    art = heatmap(np.zeros((4, 4)), vmin=0, vmax=1, mask=allowed, annotate=False)
    path = art.mask_patch.get_path()
    update_heatmap(art, np.full((4, 4), 0.5), mask=allowed.copy())
    assert art.mask_patch.get_path() is path and art.mask_patch.get_visible()
    update_heatmap(art, np.full((4, 4), 0.5), mask=allowed.T)
    assert art.mask_patch.get_path() is not path
    assert art.mask_patch.get_path().contains_point((0, 3))  # row 3, column 0: masked now
    plt.close(art.ax.figure)


def test_update_heatmap_new_shape_rebuilds_texts_and_ticks():
    art = heatmap(np.zeros((2, 2)), ["a", "b"], ["a", "b"])
    update_heatmap(art, np.ones((3, 3)), row_labels=list("xyz"), col_labels=list("xyz"))
    assert art.texts.shape == (3, 3)
    assert all(t.axes is art.ax for t in art.texts.ravel())
    assert [t.get_text() for t in art.ax.get_xticklabels()] == list("xyz")
    assert art.ax.get_xlim() == (-0.5, 2.5)
    assert art.image.get_array().shape == (3, 3)
    # the 4 old texts were removed from the axes
    assert sum(1 for t in art.ax.texts if t.get_text() in ("0.00",)) == 0


def test_update_heatmap_new_shape_with_mask_and_no_texts():
    art = heatmap(np.zeros((3, 3)), list("abc"), list("abc"), annotate=False,
                  mask=np.ones((3, 3), dtype=bool), highlight=[(2, 2)])
    allowed = np.tril(np.ones((5, 5), dtype=bool))
    update_heatmap(art, np.full((5, 5), 0.2), mask=allowed, row_labels=list("vwxyz"),
                   col_labels=list("vwxyz"), highlight=[(4, 0)])
    assert art.texts is None
    assert art.image.get_array().shape == (5, 5)
    assert art.mask_patch.get_path().contains_point((4, 0))  # row 0, column 4: masked
    assert [p.get_xy() for p in art.highlights] == [(-0.5, 3.5)]
    assert [t.get_text() for t in art.ax.get_yticklabels()] == list("vwxyz")


# --- matrix_block and matrix_product_diagram --------------------------------------------


def test_matrix_block_numbers_title_and_shading():
    art = matrix_block(Q, name="Q", highlight_rows=[1], highlight_cols=[0],
                       highlight_cells=[(2, 1)])
    assert cell_texts(art.texts) == [[f"{v:.2f}" for v in row] for row in Q]
    assert art.title.get_text() == "Q  (4 × 2)"
    (row,) = art.row_patches
    assert row.get_xy() == (-0.5, 0.5) and (row.get_width(), row.get_height()) == (2, 1)
    (col,) = art.col_patches
    assert col.get_xy() == (-0.5, -0.5) and (col.get_width(), col.get_height()) == (1, 4)
    (cell,) = art.cell_patches
    assert cell.get_xy() == (0.5, 1.5)
    assert len(art.brackets) == 2
    assert not art.ax.axison


def test_matrix_block_on_given_axes():
    fig, ax = plt.subplots()
    before = plt.get_fignums()
    art = matrix_block([[1.0]], ax=ax)
    assert plt.get_fignums() == before and art.ax is ax
    assert art.title.get_text() == "(1 × 1)"


def test_product_diagram_caption_is_the_sum_of_products_of_a_and_b():
    c = matmul_loop(Q, K_T)
    for i, j in [(0, 0), (1, 3), (3, 2)]:
        art = matrix_product_diagram(Q, K_T, c, highlight=(i, j))
        assert art.caption.get_text() == expected_line(Q, K_T, "scores", i, j)
        a_blk, b_blk, c_blk = art.blocks
        assert [p.get_xy() for p in a_blk.row_patches] == [(-0.5, i - 0.5)]
        assert [p.get_xy() for p in b_blk.col_patches] == [(j - 0.5, -0.5)]
        assert [p.get_xy() for p in c_blk.cell_patches] == [(j - 0.5, i - 0.5)]
        plt.close(art.fig)
    assert expected_line(Q, K_T, "scores", 0, 0) == (
        "scores[0, 0] = 1.00×1.10 + 0.50×0.40 = 1.30"
    )


def test_product_diagram_shows_c_but_captions_from_a_and_b():
    wrong_c = np.array(matmul_loop(Q, K_T))
    wrong_c[0, 0] = 9.99  # a "printed" matrix with a mistake
    art = matrix_product_diagram(Q, K_T, wrong_c, highlight=(0, 0))
    assert art.blocks[2].texts[0, 0].get_text() == "9.99"
    assert art.caption.get_text().endswith("= 1.30")
    assert [art.operators[0].get_text(), art.operators[1].get_text()] == ["×", "="]


def test_product_diagram_whole_row_for_the_weighted_sum():
    s = np.array(matmul_loop(Q, K_T)) / np.sqrt(2)
    w = softmax_rows(s).tolist()
    out = matmul_loop(w, V)
    art = matrix_product_diagram(w, V, out, names=("weights", "V", "output"),
                                 highlight=(1, None))
    lines = art.caption.get_text().split("\n")
    for j, line in enumerate(lines):
        assert_caption_adds_up(line, [w[1][t] for t in range(4)], [V[t][j] for t in range(4)],
                               f"output[1, {j}]")
    assert len(lines) == 2
    a_blk, b_blk, c_blk = art.blocks
    assert [p.get_xy() for p in a_blk.row_patches] == [(-0.5, 0.5)]
    assert b_blk.col_patches == [] and c_blk.cell_patches == []
    assert [p.get_xy() for p in c_blk.row_patches] == [(-0.5, 0.5)]


def assert_caption_adds_up(line, row, col, label):
    """The written factors are the true ones rounded, and add up by hand to the written total."""
    head, _, rest = line.partition(" = ")
    terms, _, total = rest.rpartition(" = ")
    assert head == label
    exact = 0.0
    by_hand = 0.0
    for term, x, y in zip(terms.split(" + "), row, col, strict=True):
        fx, fy = (t.strip("()") for t in term.split("×"))
        for shown, true in ((fx, x), (fy, y)):
            decimals = len(shown.split(".")[1])
            assert decimals >= 2 and float(shown) == round(true, decimals)
        by_hand += float(fx) * float(fy)
        exact += x * y
    assert total == f"{exact:.2f}"
    assert f"{by_hand:.2f}" == total, f"{terms} does not add up to {total} by hand"


def test_sum_of_products_text_adds_up_by_hand_on_random_rows():
    rng = np.random.default_rng(3)
    for _ in range(200):
        row, col = rng.random(4), rng.normal(size=4) * 3
        text = sum_of_products_text(row, col)
        assert_caption_adds_up(f"c = {text}", row.tolist(), col.tolist(), "c")


def test_product_diagram_one_based_labels():
    art = matrix_product_diagram(Q, K_T, matmul_loop(Q, K_T), highlight=(1, 2), index_base=1)
    assert art.caption.get_text().startswith("scores (row 2, column 3) = ")
    with pytest.raises(ValueError, match="index_base must be 0 or 1"):
        matrix_product_diagram(Q, K_T, matmul_loop(Q, K_T), index_base=2)


def test_product_diagram_negative_factors_are_bracketed():
    a, b = [[1.0, -0.5]], [[2.0], [-4.0]]
    art = matrix_product_diagram(a, b, matmul_loop(a, b), names=("A", "B", "C"))
    assert art.caption.get_text() == "C[0, 0] = 1.00×2.00 + (-0.50)×(-4.00) = 4.00"


def test_product_diagram_without_highlight_and_on_given_figure():
    fig = plt.figure()
    before = plt.get_fignums()
    art = matrix_product_diagram(Q, K_T, matmul_loop(Q, K_T), highlight=None, fig=fig)
    assert plt.get_fignums() == before and art.fig is fig
    assert art.caption is None
    assert all(not b.row_patches and not b.col_patches for b in art.blocks)


def test_product_diagram_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"a's columns must match b's rows"):
        matrix_product_diagram(Q, Q, np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"c must have shape \(4, 4\)"):
        matrix_product_diagram(Q, K_T, np.zeros((4, 2)))
    with pytest.raises(ValueError, match="highlight index 7"):
        matrix_product_diagram(Q, K_T, np.zeros((4, 4)), highlight=(0, 7))


def test_sum_of_products_text_matches_loop():
    row, col = [0.31, 0.26, 0.25, 0.18], [2.0, 0.5, 1.5, 0.0]
    total = 0.0
    for x, y in zip(row, col, strict=True):
        total += x * y
    assert sum_of_products_text(row, col) == (
        f"0.31×2.00 + 0.26×0.50 + 0.25×1.50 + 0.18×0.00 = {total:.2f}"
    )


# --- weight_bars ------------------------------------------------------------------------


def test_weight_bars_heights_texts_labels_and_sum():
    w = [0.31, 0.26, 0.25, 0.18]
    art = weight_bars(w, TOK4, highlight=1, title="row 1")
    assert [b.get_height() for b in art.bars] == w
    assert [t.get_text() for t in art.value_texts] == ["0.31", "0.26", "0.25", "0.18"]
    assert art.sum_text.get_text() == "row sum = 1.00"
    assert [t.get_text() for t in art.ax.get_xticklabels()] == TOK4
    assert art.bars[1].get_facecolor() == to_rgba(figures.BAR_HIGHLIGHT_COLOR)
    assert art.bars[0].get_facecolor() == to_rgba(figures.BAR_COLOR)
    assert art.ax.get_ylim() == (0, 1)
    for bar, text in zip(art.bars, art.value_texts, strict=True):
        assert text.get_position()[0] == pytest.approx(bar.get_x() + bar.get_width() / 2)
        assert text.get_position()[1] > bar.get_height()  # above the bar


def test_weight_bars_tall_bar_value_stays_inside_axes():
    art = weight_bars([0.97, 0.03])
    y = art.value_texts[0].get_position()[1]
    assert y < 0.97 and art.value_texts[0].get_va() == "top"


def test_update_weight_bars_in_place():
    art = weight_bars([0.5, 0.5], ["a", "b"])
    ids = [id(b) for b in art.bars] + [id(t) for t in art.value_texts] + [id(art.sum_text)]
    update_weight_bars(art, [0.2, 0.7])
    assert [id(b) for b in art.bars] + [id(t) for t in art.value_texts] + [
        id(art.sum_text)] == ids
    assert [b.get_height() for b in art.bars] == [0.2, 0.7]
    assert [t.get_text() for t in art.value_texts] == ["0.20", "0.70"]
    assert art.sum_text.get_text() == "row sum = 0.90"
    with pytest.raises(ValueError, match="weights must have 2 entries"):
        update_weight_bars(art, [1.0])


def test_weight_bars_given_axes_and_bad_labels():
    fig, ax = plt.subplots()
    before = plt.get_fignums()
    assert weight_bars([1.0], ax=ax).ax is ax
    assert plt.get_fignums() == before
    with pytest.raises(ValueError, match=r"labels must have 2 entries .* got 1"):
        weight_bars([0.5, 0.5], ["a"])
    with pytest.raises(ValueError, match=r"weights must be 1-D, got shape \(1, 2\)"):
        weight_bars([[0.5, 0.5]])


# --- mask_grid --------------------------------------------------------------------------


def test_mask_grid_colours_and_symbols_follow_the_mask():
    allowed = np.tril(np.ones((4, 4), dtype=bool))
    art = mask_grid(allowed, TOK4, TOK4)
    rgba = art.image.to_rgba(art.image.get_array())
    for i in range(4):
        for j in range(4):
            colour = figures.ALLOWED_COLOR if allowed[i, j] else figures.MASKED_FACE_COLOR
            assert tuple(rgba[i, j]) == pytest.approx(to_rgba(colour))
            assert art.texts[i, j].get_text() == ("✓" if allowed[i, j] else "✗")
    labels = [t.get_text() for t in art.legend.get_texts()]
    assert labels == ["✓ may attend", "✗ masked"]
    assert [t.get_text() for t in art.ax.get_yticklabels()] == TOK4


def test_update_mask_grid_in_place():
    art = mask_grid(np.ones((2, 2), dtype=bool))
    texts = [id(t) for t in art.texts.ravel()]
    update_mask_grid(art, np.array([[True, False], [False, True]]))
    assert [id(t) for t in art.texts.ravel()] == texts
    assert cell_texts(art.texts) == [["✓", "✗"], ["✗", "✓"]]
    np.testing.assert_array_equal(art.image.get_array(), [[1.0, 0.0], [0.0, 1.0]])


def test_mask_grid_rejects_non_boolean():
    with pytest.raises(TypeError, match="mask must be a boolean array"):
        mask_grid(np.ones((2, 2)))


# --- line_with_marker -------------------------------------------------------------------


def test_line_with_marker_marks_and_moves_the_current_point():
    d = np.array([1.0, 4.0, 16.0, 64.0])
    art = line_with_marker(d, np.sqrt(d), 16, logx=True, xlabel="d_k", ylabel="std")
    np.testing.assert_array_equal(art.line.get_xdata(), d)
    assert (art.marker.get_xdata()[0], art.marker.get_ydata()[0]) == (16.0, 4.0)
    assert art.ax.get_xscale() == "log"
    assert art.text.get_text() == "d_k = 16,  std = 4"
    marker = art.marker
    update_marker(art, 64)
    assert art.marker is marker
    assert (art.marker.get_xdata()[0], art.marker.get_ydata()[0]) == (64.0, 8.0)
    assert list(art.guide.get_xdata()) == [64.0, 64.0]
    update_marker(art, 2.0, 1.5)
    assert art.marker.get_ydata()[0] == 1.5


def test_line_with_marker_interpolates_in_log_x():
    art = line_with_marker([1, 100], [0.0, 2.0], 10, logx=True)
    assert art.marker.get_ydata()[0] == pytest.approx(1.0)


def test_line_with_marker_rejects_bad_input():
    with pytest.raises(ValueError, match="x and y must have the same length"):
        line_with_marker([1, 2], [1, 2, 3], 1)
    with pytest.raises(ValueError, match="x must be positive when logx=True"):
        line_with_marker([0, 1], [1, 2], 1, logx=True)


# --- head_grid --------------------------------------------------------------------------


def test_head_grid_shared_scale_outer_labels_and_update():
    rng = np.random.default_rng(0)
    w = softmax_rows(rng.normal(size=(8, 10, 10)))
    art = head_grid(w, TOKENS)
    assert len(art.heatmaps) == len(art.axes) == 8
    assert len(art.fig.axes) == 9  # 8 heads and one colour bar
    for k, hm in enumerate(art.heatmaps):
        np.testing.assert_array_equal(np.ma.getdata(hm.image.get_array()), w[k])
        assert hm.image.get_clim() == (0.0, 1.0)
        assert hm.colorbar is None
        assert hm.ax.get_title() == f"head {k + 1}"
    # 2 rows of 4: tick labels on the bottom row and the left column only
    art.fig.canvas.draw()
    for k, ax in enumerate(art.axes):
        shown_x = [t.get_text() for t in ax.get_xticklabels() if t.get_visible()]
        shown_y = [t.get_text() for t in ax.get_yticklabels() if t.get_visible()]
        assert ax.xaxis.get_tick_params()["labelbottom"] == (k >= 4)
        assert ax.yaxis.get_tick_params()["labelleft"] == (k % 4 == 0)
        assert shown_x == (TOKENS if k >= 4 else [])
        assert shown_y == (TOKENS if k % 4 == 0 else [])
    images = [id(hm.image) for hm in art.heatmaps]
    w2 = softmax_rows(rng.normal(size=(8, 10, 10)))
    update_head_grid(art, w2)
    assert [id(hm.image) for hm in art.heatmaps] == images
    np.testing.assert_array_equal(np.ma.getdata(art.heatmaps[7].image.get_array()), w2[7])
    with pytest.raises(ValueError, match=r"keep the drawn shape \(8, 10, 10\)"):
        update_head_grid(art, w2[:4])


def test_head_grid_uneven_grid_and_errors():
    art = head_grid(np.full((3, 2, 2), 0.5), ["a", "b"], ncols=2, titles=list("xyz"))
    assert len(art.fig.axes) == 4  # 3 heads (the 4th slot removed) and the colour bar
    assert [hm.ax.get_title() for hm in art.heatmaps] == list("xyz")
    # head 2 (index 1) has no panel below it, so it is an outer (bottom) panel
    assert art.axes[1].xaxis.get_tick_params()["labelbottom"]
    with pytest.raises(ValueError, match=r"weights must be 3-D \(heads, n_q, n_k\)"):
        head_grid(np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"tokens must have 2 entries .* got 3"):
        head_grid(np.zeros((1, 2, 2)), ["a", "b", "c"])


def test_head_grid_on_given_figure():
    fig = plt.figure()
    before = plt.get_fignums()
    art = head_grid(np.full((2, 3, 3), 1 / 3), fig=fig)
    assert art.fig is fig and plt.get_fignums() == before


# --- token_labels -----------------------------------------------------------------------


def test_token_labels():
    assert token_labels(["The", "transformer", "it"], max_len=6) == ["The", "trans…", "it"]
    assert token_labels(["abcdefgh", "abcdefghi"]) == ["abcdefgh", "abcdefg…"]
    assert all(len(t) <= 8 for t in token_labels(["x" * 50]))
    with pytest.raises(ValueError, match="max_len must be an integer >= 2"):
        token_labels(["a"], max_len=1)


# --- cell squares, head mosaic, grids shown up to a length -------------------------------


def test_cell_squares_path_has_one_unit_square_per_true_cell():
    cells = np.zeros((3, 4), dtype=bool)
    cells[0, 1] = cells[2, 3] = True
    path = cell_squares_path(cells)
    squares = [poly for poly in path.to_polygons(closed_only=False)]
    corners = sorted(tuple(np.round(sq.min(axis=0), 6)) for sq in squares)
    assert corners == [(0.5, -0.5), (2.5, 1.5)]  # (j - 0.5, i - 0.5) for (0, 1) and (2, 3)
    assert all(np.allclose(sq.max(axis=0) - sq.min(axis=0), 1.0) for sq in squares)
    assert len(cell_squares_path(np.zeros((2, 2), dtype=bool)).vertices) == 1  # empty
    with pytest.raises(TypeError, match="boolean"):
        cell_squares_path(np.zeros((2, 2)))


@pytest.mark.parametrize("heads", [1, 2, 3, 4, 6, 8, 12, 16])
def test_head_mosaic_layout_fits_every_map_without_overlap(heads):
    lay = head_mosaic_layout(heads, 10, (460.0, 400.0))
    assert lay.heads == heads and len(lay.origins) == heads
    assert lay.nrows * lay.ncols >= heads > (lay.nrows - 1) * lay.ncols
    taken = np.zeros(lay.shape, dtype=int)
    for r, c in lay.origins:
        taken[r:r + 10, c:c + 10] += 1
    assert taken.max() == 1 and taken.sum() == heads * 100  # inside, never overlapping
    assert lay.title_rows * lay.cell_points >= figures.head_mosaics.HEAD_MOSAIC_TITLE_POINTS
    w, h = lay.shape[1] * lay.cell_points, lay.shape[0] * lay.cell_points
    assert w <= 460.0 + 1e-6 and h <= 400.0 + 1e-6


def test_head_mosaic_shows_every_head_and_changes_head_count_in_place():
    rng = np.random.default_rng(3)
    tokens = list("abcdefgh")
    art = head_mosaic(rng.random((2, 8, 8)), tokens)
    fig = art.ax.figure
    for h in (16, 1, 3, 12, 2, 16):
        w = rng.random((h, 8, 8))
        assert update_head_mosaic(art, w) is art
        np.testing.assert_array_equal(head_mosaic_panels(art), w)
        titles = [t.get_text() for t in art.titles if t.get_visible()]
        assert titles == [f"head {k + 1}" for k in range(h)]
        rows = [t.get_text() for t in art.row_labels if t.get_visible()]
        cols = [t.get_text() for t in art.col_labels if t.get_visible()]
        if figures.head_mosaics.mosaic_labels_shown(art.layout):
            assert rows == tokens * art.layout.nrows and cols == tokens * art.layout.ncols
        else:  # too small to read: no labels, and the caption says so
            assert rows == cols == [] and "token labels left out" in art.caption.get_text()
        assert np.isnan(np.ma.filled(art.image.get_array(), np.nan)).sum() == (
            art.layout.shape[0] * art.layout.shape[1] - h * 64)  # the gaps are empty
    assert len(fig.axes) == 2 and len(art.ax.images) == 1  # one axes + colour bar, always
    assert len(art.titles) == 16  # the pool grew to the largest count and stayed
    assert art.image.cmap.name == "viridis"
    with pytest.raises(ValueError, match="8 tokens"):
        update_head_mosaic(art, np.zeros((2, 3, 3)))
    with pytest.raises(ValueError, match="square"):
        head_mosaic(np.zeros((2, 3, 4)))
    plt.close(fig)


def test_head_mosaic_labels_do_not_leave_the_figure():
    art = head_mosaic(np.full((16, 10, 10), 0.1), [f"token{k}" for k in range(10)])
    fig = art.ax.figure
    for h in (1, 16):
        update_head_mosaic(art, np.full((h, 10, 10), 0.1))
        fig.canvas.draw()
        box = fig.bbox
        for text in [*art.titles, *art.row_labels, *art.col_labels]:
            if text.get_visible():
                ext = text.get_window_extent()
                assert ext.x0 >= box.x0 - 1 and ext.y0 >= box.y0 - 1, text.get_text()
                assert ext.x1 <= box.x1 + 1 and ext.y1 <= box.y1 + 1, text.get_text()
    plt.close(fig)


def test_fade_beyond_length_blanks_later_cells_and_veils_their_labels():
    tokens = list("abcdef")
    art = heatmap(np.full((6, 6), 0.5), tokens, tokens, annotate=False)
    fig = art.ax.figure
    beyond = fade_beyond_length(art.ax, (6, 6))
    assert all(lab.get_rotation() == 90 for lab in art.ax.get_xticklabels())
    assert not any(p.get_visible() for p in beyond.artists)  # nothing hidden yet
    fig.canvas.draw()
    for n in (6, 2, 5, 1):
        update_fade_beyond_length(beyond, n, n)
        cells = beyond.cells
        if n == 6:
            assert not cells.get_visible() and not beyond.row_veil.get_visible()
            continue
        assert cells.get_visible()
        squares = cells.get_path().to_polygons(closed_only=False)
        assert len(squares) == 36 - n * n
        # the row veil covers exactly the labels of rows n.. in axes coordinates
        to_axes = art.ax.transAxes.inverted()
        labels = art.ax.get_yticklabels()
        veil = beyond.row_veil.get_bbox()
        for i, lab in enumerate(labels):
            (x0, y0), (x1, y1) = to_axes.transform(lab.get_window_extent().get_points())
            inside = veil.x0 - 1e-9 <= x0 and x1 <= veil.x1 + 1e-9 and (
                veil.y0 - 1e-9 <= y0 and y1 <= veil.y1 + 1e-9)
            assert inside == (i >= n), (n, i)
    with pytest.raises(ValueError, match="out of range"):
        update_fade_beyond_length(beyond, 0, 3)
    plt.close(fig)


# --- module rules -----------------------------------------------------------------------


def test_every_public_function_returns_artists_and_prints_nothing(capsys):
    results = [
        heatmap(np.eye(2)),
        update_heatmap(heatmap(np.eye(2)), np.ones((2, 2))),
        matrix_block(Q),
        matrix_product_diagram(Q, K_T, matmul_loop(Q, K_T)),
        weight_bars([0.5, 0.5]),
        update_weight_bars(weight_bars([0.5, 0.5]), [0.1, 0.9]),
        mask_grid(np.eye(2, dtype=bool)),
        update_mask_grid(mask_grid(np.eye(2, dtype=bool)), np.ones((2, 2), dtype=bool)),
        line_with_marker([1, 2], [1, 2], 1),
        update_marker(line_with_marker([1, 2], [1, 2], 1), 2),
        head_grid(np.full((2, 2, 2), 0.5)),
        head_mosaic(np.full((2, 2, 2), 0.5)),
        cell_squares_path(np.eye(2, dtype=bool)),
        update_head_grid(head_grid(np.full((2, 2, 2), 0.5)), np.full((2, 2, 2), 0.5)),
    ]
    assert all(r is not None for r in results)
    assert all("0x" not in repr(r) for r in results)  # no memory addresses (nbval)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


@pytest.mark.parametrize("n", [12, 45, 64])
def test_the_real_llms_map_labels_are_legible_and_apart(n):
    """Issue 47: at 64 tokens 17's map labels were 4-5 pixels high. Now every label is at
    least 9 CSS pixels high (the explorers' 80 per inch), fewer of them when the cells are
    small, and no two labels of an axis overlap."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from attn_core.figures import real_llm

    g = np.random.default_rng(n)
    w = np.tril(g.random((n, n)))
    w /= w.sum(axis=1, keepdims=True)
    fig = Figure(figsize=real_llm.FIGSIZE, dpi=80, layout="constrained")
    FigureCanvasAgg(fig)
    art = real_llm.llm_figure(w, [f" tok{i}" for i in range(n)], [64, 128],
                              {0: [4.0, 3.5], 1: [3.2, 3.1]}, 3.0, fig=fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for axis in ("y", "x"):
        labels = [t for t in getattr(art.map.ax, f"get_{axis}ticklabels")() if t.get_text()]
        assert labels and len(labels) <= n
        if n <= 12:
            assert len(labels) == n
        boxes = [t.get_window_extent(renderer) for t in labels]
        heights = [t.get_fontsize() * 80 / 72 for t in labels]  # CSS pixels at 100% zoom
        assert min(heights) >= 9, (axis, min(heights))
        for a, b in zip(boxes, boxes[1:]):
            if axis == "y":  # rows: one above the other
                assert not a.overlaps(b), (axis, a, b)
            else:  # turned 45 degrees: their glyphs' boxes may cross, their lines not
                assert b.x0 - a.x0 >= 0.7 * heights[0] * 1.2, (a, b)
