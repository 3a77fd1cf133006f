"""attn_core.figures.model_*: the real model's figures show exactly the weights given, label
every piece once, outline the chosen query and head, and never overlap their labels.

The weights come from the real model (load_model, cached) and from seeded random arrays;
what is drawn is read back from the artists and compared with plain indexing and loops
written here. Overlap is checked on the drawn text boxes (renderer extents), for 3, 12
and about 40 word pieces.
"""

import itertools
import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from attn_core import figures  # noqa: E402
from attn_core.figures import model_axes, model_base, model_head_maps  # noqa: E402
from attn_core.model.pretrained import load_model  # noqa: E402

SENTENCE = "The animal crossed the road because it was tired."
LONG_SENTENCE = ("When the quick brown fox finally jumped over the extraordinarily lazy dog, "
                 "everyone watching from the riverbank cheered loudly, and then they all went "
                 "home together for a warm supper tonight.")  # 40 word pieces
SHORT_SENTENCE = "Hi"  # [CLS] hi [SEP]


@pytest.fixture(scope="module")
def runs():
    model = load_model()
    return {name: model.run(text) for name, text in
            (("short", SHORT_SENTENCE), ("default", SENTENCE), ("long", LONG_SENTENCE))}


def _random_attentions(layers, heads, n, seed=0):
    x = np.random.default_rng(seed).random((layers, heads, n, n))
    return x / x.sum(axis=-1, keepdims=True)


def _visible_texts(artist):
    """Texts that a draw shows: visible, not empty, inside no hidden parent (an axis)."""
    if not artist.get_visible():
        return
    if isinstance(artist, Text) and artist.get_text().strip():
        yield artist
    for child in artist.get_children():
        yield from _visible_texts(child)


def _texts(fig):
    """Every text a draw shows, with its box in pixels."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [(t.get_text(), t.get_window_extent(renderer)) for t in _visible_texts(fig)]


def assert_readable(fig, tolerance=0.5):
    """No two texts overlap (boxes may touch within ``tolerance`` px); all inside the figure."""
    boxes = _texts(fig)
    assert boxes
    frame = fig.bbox
    for text, box in boxes:
        assert box.x0 >= frame.x0 - 1 and box.x1 <= frame.x1 + 1, f"{text!r} leaves the figure"
        assert box.y0 >= frame.y0 - 1 and box.y1 <= frame.y1 + 1, f"{text!r} leaves the figure"
    for (ta, a), (tb, b) in itertools.combinations(boxes, 2):
        dx = min(a.x1, b.x1) - max(a.x0, b.x0)
        dy = min(a.y1, b.y1) - max(a.y0, b.y0)
        assert dx <= tolerance or dy <= tolerance, (
            f"{ta!r} overlaps {tb!r} ({dx:.1f} x {dy:.1f} px)")


def _labels(texts):
    return [t.get_text() for t in texts]


# --- head_map -------------------------------------------------------------------------------


def test_head_map_shows_the_heads_weights_and_every_piece(runs):
    run = runs["default"]
    it = run.index("it")
    for layer, head in ((1, 3), (4, 2), (6, 12)):
        w = run.attentions[layer - 1, head - 1]
        art = figures.head_map(w, run.pieces, query=it, title=f"layer {layer}, head {head}")
        np.testing.assert_array_equal(figures.image_values(art), w)
        assert _labels(art.row_labels) == run.pieces == _labels(art.col_labels)
        assert figures.outlined_query(art) == it == art.query
        assert art.title.get_text() == f"layer {layer}, head {head}"
        assert art.image.get_clim() == (0.0, 1.0) and art.image.cmap.name == "viridis"
        assert all(t.get_rotation() == 90 for t in art.col_labels)  # vertical key labels
        row_labels_y = [t.get_position()[1] for t in art.row_labels]
        assert row_labels_y == list(range(run.n))  # label i beside row i


def test_update_head_map_changes_in_place(runs):
    run = runs["default"]
    art = figures.head_map(run.attentions[0, 0], run.pieces)
    assert figures.outlined_query(art) is None and not art.row_box.get_visible()
    image, n_texts = art.image, len(art.ax.texts)
    figures.update_head_map(art, run.attentions[3, 1], "animal", title="L4 H2")
    assert art.image is image and len(art.ax.texts) == n_texts  # nothing new was made
    np.testing.assert_array_equal(figures.image_values(art), run.attentions[3, 1])
    assert figures.outlined_query(art) == 2 and art.title.get_text() == "L4 H2"
    figures.update_head_map(art, run.attentions[5, 11])  # None keeps the query and the title
    assert figures.outlined_query(art) == 2 and art.title.get_text() == "L4 H2"
    with pytest.raises(ValueError, match=r"weights must be \(12, 12\)"):
        figures.update_head_map(art, np.eye(3))


def test_head_map_refuses_bad_input():
    with pytest.raises(ValueError, match="weights must be square"):
        figures.head_map(np.ones((2, 3)), ["a", "b"])
    with pytest.raises(ValueError, match="pieces must have 2 entries"):
        figures.head_map(np.eye(2), ["a", "b", "c"])
    with pytest.raises(TypeError, match="pieces must be a sequence"):
        figures.head_map(np.eye(2), "ab")
    with pytest.raises(ValueError, match="query 'x' is not one of the pieces"):
        figures.head_map(np.eye(2), ["a", "b"], query="x")
    with pytest.raises(ValueError, match="query must be a position from 0 to 1"):
        figures.head_map(np.eye(2), ["a", "b"], query=2)
    with pytest.raises(TypeError, match="query must be an int position or a piece"):
        figures.head_map(np.eye(2), ["a", "b"], query=1.0)


def test_long_pieces_are_shortened_on_the_labels_only():
    pieces = ["[CLS]", "antidisestablishment", "[SEP]"]
    art = figures.head_map(np.eye(3), pieces, query="antidisestablishment")
    assert _labels(art.row_labels)[1] == figures.token_labels(pieces)[1] == "antidis…"
    assert art.pieces == pieces and art.query == 1


# --- query_in_every_head --------------------------------------------------------------------


def test_every_head_row_r_is_that_heads_row_for_the_query(runs):
    run = runs["default"]
    for query in (run.index("it"), 0, run.n - 1):
        art = figures.query_in_every_head(run.attentions, query, run.pieces, selected=(4, 2))
        rows = figures.every_head_rows(art)
        assert rows.shape == (6 * 12, run.n)
        for layer, head in itertools.product(range(6), range(12)):
            np.testing.assert_array_equal(rows[layer * 12 + head],
                                          run.attentions[layer, head, query])
        assert figures.selected_head(art) == (4, 2)
        assert _labels(art.col_labels) == run.pieces
        plt.close(art.ax.figure)


def test_every_head_labels_count_from_one(runs):
    run = runs["default"]
    art = figures.query_in_every_head(run.attentions, "it", run.pieces)
    assert _labels(art.layer_labels) == [f"layer {k}" for k in range(1, 7)]
    numbers = [int(t.get_text()) for t in art.head_labels]
    rows = [int(round(t.get_position()[1])) for t in art.head_labels]
    assert all(num == row % 12 + 1 for num, row in zip(numbers, rows))  # beside its own row
    assert min(numbers) == 1 and max(numbers) <= 12
    assert set(numbers) >= {1, 3, 5, 7, 9, 11}  # at least every second head is numbered
    assert art.title.get_text() == "row of 'it' (piece 8) in every head"
    assert figures.selected_head(art) is None and not art.outline.get_visible()


def test_update_every_head_moves_the_outline_and_follows_the_query(runs):
    run = runs["default"]
    art = figures.query_in_every_head(run.attentions, 1, run.pieces, selected=(1, 1))
    image = art.image
    for (layer, head), query in zip([(6, 12), (3, 7), (1, 1)], [7, 2, 11]):
        figures.update_query_in_every_head(art, run.attentions, query, selected=(layer, head))
        assert art.image is image
        assert figures.selected_head(art) == (layer, head)
        np.testing.assert_array_equal(figures.every_head_rows(art)[(layer - 1) * 12 + head - 1],
                                      run.attentions[layer - 1, head - 1, query])
        title = f"row of {run.pieces[query]!r} (piece {query + 1}) in every head"
        assert art.title.get_text() == title
    for bad, match in (((0, 1), "layer must be from 1 to 6"),
                       ((1, 13), "head must be from 1 to 12")):
        with pytest.raises(ValueError, match=match):
            figures.update_query_in_every_head(art, run.attentions, 1, selected=bad)
    with pytest.raises(ValueError, match="attentions must have the shape drawn"):
        figures.update_query_in_every_head(art, run.attentions[:, :, :3, :3], 1)


def test_a_fixed_title_stays_and_is_not_redrawn():
    a = _random_attentions(2, 3, 4)
    art = figures.query_in_every_head(a, 1, list("abcd"), title="fixed")
    figures.update_query_in_every_head(art, a, 2)
    assert art.title.get_text() == "fixed" and art.title not in art.dynamic


# --- role_scores ----------------------------------------------------------------------------


def _contrast(c1, c2):
    def lum(c):
        lin = [x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in c[:3]]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    hi, lo = sorted((lum(c1), lum(c2)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_role_scores_writes_every_value_readably():
    from matplotlib.colors import to_rgba

    scores = np.random.default_rng(3).random((6, 12))  # spread over 0..1
    scores[0, 2] = 1.0
    art = figures.role_scores(scores, "a score", baseline=1 / 12, threshold=0.5)
    hm = art.heatmap
    for (l, h), value in np.ndenumerate(scores):
        text = hm.texts[l, h]
        assert text.get_text() == f"{value:.2f}"
        cell = hm.image.cmap(hm.image.norm(value))
        other = "black" if to_rgba(text.get_color())[:3] == (1.0, 1.0, 1.0) else "white"
        # the colour chosen contrasts with the cell at least as much as the other would
        assert _contrast(cell, to_rgba(text.get_color())) >= _contrast(cell, to_rgba(other))
    assert _labels(hm.ax.get_yticklabels()) == [str(k) for k in range(1, 7)]
    assert _labels(hm.ax.get_xticklabels()) == [str(k) for k in range(1, 13)]
    expected = sorted(((l + 1, h + 1) for l in range(6) for h in range(12)
                       if scores[l, h] >= 0.5), key=lambda lh: -scores[lh[0] - 1, lh[1] - 1])
    assert art.found == expected and len(hm.highlights) == len(expected)
    assert {(int(round(p.get_y() + 0.5)) + 1, int(round(p.get_x() + 0.5)) + 1)
            for p in hm.highlights} == set(expected)
    assert art.baseline_line.get_ydata()[0] == pytest.approx(1 / 12)
    assert "1/n = 0.08" in hm.ax.get_title() and "≥ 0.50" in hm.ax.get_title()
    assert_readable(hm.ax.figure)


def test_role_scores_without_baseline_or_threshold():
    art = figures.role_scores([[0.2, 0.4]], "plain")
    assert art.found == [] and art.baseline_line is None and art.heatmap.ax.get_title() == "plain"
    with pytest.raises(ValueError, match=r"scores must have shape \(layers, heads\)"):
        figures.role_scores([0.1, 0.2], "x")
    with pytest.raises(TypeError, match="title must be a str"):
        figures.role_scores([[0.1]], None)


# --- the explorer's figure ------------------------------------------------------------------


def test_explorer_figure_is_a_plain_figure_of_the_chosen_head(runs):
    run = runs["default"]
    before = plt.get_fignums()
    fig = figures.explorer_figure(run, 4, 2, "it")
    assert plt.get_fignums() == before  # not registered with pyplot
    assert isinstance(fig, Figure) and isinstance(fig.canvas, FigureCanvasAgg)
    map_ax, every_ax = fig.axes[0], fig.axes[1]
    np.testing.assert_array_equal(map_ax.images[0].get_array(), run.attentions[3, 1])
    it = run.index("it")
    np.testing.assert_array_equal(every_ax.images[0].get_array(),
                                  run.attentions[:, :, it, :].reshape(72, run.n))
    assert "layer 4, head 2" in [t.get_text() for t in map_ax.texts]
    assert "row of 'it' (piece 8) in every head" in [t.get_text() for t in every_ax.texts]
    width, height = fig.get_size_inches() * fig.dpi
    assert 450 < width <= 800 and 350 < height <= 560  # the explorer's size, 12 pieces


def test_explorer_panels_update_in_place(runs):
    run = runs["default"]
    art = figures.explorer_panels(run.attentions, run.pieces, 1, 1, "it")
    images = [art.head_map.image, art.every_head.image]
    for layer, head, query in ((2, 5, 3), (6, 12, 0), (1, 1, 11)):
        figures.update_explorer_panels(art, run.attentions, layer, head, query)
        assert [art.head_map.image, art.every_head.image] == images
        np.testing.assert_array_equal(figures.image_values(art.head_map),
                                      run.attentions[layer - 1, head - 1])
        assert figures.outlined_query(art.head_map) == query
        assert figures.selected_head(art.every_head) == (layer, head)
        assert art.head_map.title.get_text() == f"layer {layer}, head {head}"
    with pytest.raises(ValueError, match="head must be from 1 to 12"):
        figures.update_explorer_panels(art, run.attentions, 1, 13, 0)
    with pytest.raises(TypeError, match="layer must be an int"):
        figures.update_explorer_panels(art, run.attentions, 1.5, 1, 0)


# --- labels never overlap ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["short", "default", "long"])
def test_no_label_overlaps_in_any_figure(runs, name):
    run = runs[name]
    q = run.n // 2
    assert_readable(figures.explorer_figure(run, 3, 7, q))
    assert_readable(figures.head_map(run.attentions[0, 0], run.pieces, q, title="t").ax.figure)
    assert_readable(figures.query_in_every_head(run.attentions, q, run.pieces,
                                                selected=(1, 1)).ax.figure)


def test_forty_pieces_keep_every_label_at_a_readable_size(runs):
    run = runs["long"]
    assert run.n == 40
    fig = figures.explorer_figure(run, 1, 1, 5)
    art_texts = [t for t in fig.findobj(Text) if t.get_text() in run.pieces]
    assert len(art_texts) >= 3 * run.n  # every piece on both map axes and the image's keys
    assert min(t.get_fontsize() for t in art_texts) >= model_base.FONT_MIN
    width = fig.get_size_inches()[0] * fig.dpi
    assert width <= 960  # still fits a laptop screen


@pytest.mark.parametrize("n, longest", [(12, 8), (25, 8), (40, 8), (48, 8), (64, 5)])
def test_worst_case_labels_never_overlap(n, longest):
    """Wide letters, the longest label kept whole, up to the explorer's 64 pieces."""
    pieces = ["[CLS]"] + [("W" * longest)[: 1 + k % longest] for k in range(n - 2)] + ["[SEP]"]
    a = _random_attentions(6, 12, n, seed=n)
    fig = Figure(dpi=model_base.EXPLORER_DPI)
    FigureCanvasAgg(fig)
    art = figures.explorer_panels(a, pieces, 6, 12, n - 1, fig=fig)
    assert_readable(fig)
    shown = _labels(art.head_map.row_labels)
    smallest_row_pt = model_base.LINE_EM * model_base.FONT_MIN + model_base.LABEL_GAP_PT
    if n * smallest_row_pt / 72 <= model_base.MAP_MAX_IN:
        assert shown == figures.token_labels(pieces)  # every label written
    else:  # too many for the largest map: every second one, still in order
        assert shown == figures.token_labels(pieces)[::2]


def test_text_widths_are_not_underestimated():
    """The margins are computed from _text_width_pt: it must cover the drawn width."""
    for dpi in (72, model_base.EXPLORER_DPI, 100):
        fig = Figure(dpi=dpi)
        FigureCanvasAgg(fig)
        renderer = fig.canvas.get_renderer()
        for text in ("[CLS]", "##ization", "WWWWWWWW", "iiiiiiii", "AVAVAVAV", "antidis…", "12",
                     "layer 6", "copenhag…"):
            for size in (6.5, 7.0, 8.0, 9.0):
                box = fig.text(0, 0, text, fontsize=size).get_window_extent(renderer)
                drawn = box.width * 72 / dpi  # points
                assert model_axes._text_width_pt(text, size) >= drawn - 0.01, (text, size, dpi)


def test_fit_font_gives_room_for_each_label():
    for room in np.linspace(2.0, 30.0, 57):
        size, stride = model_axes._fit_font(room)
        assert model_base.FONT_MIN <= size <= model_base.FONT_MAX
        assert stride * room >= model_base.LINE_EM * size + model_base.LABEL_GAP_PT - 1e-9
        needed = model_base.LINE_EM * size + model_base.LABEL_GAP_PT
        assert stride == 1 or (stride - 1) * room < needed
    assert math.isclose(model_head_maps._map_side_in(12), 12 * model_base.CELL_MAX_IN)


@pytest.mark.parametrize("pieces", [
    ["[CLS]", "hi", "[SEP]"],
    ["[CLS]", "the", "animal", "crossed", "the", "road", ".", "[SEP]"],
    ["[CLS]", *[f"w{i}" for i in range(30)], "[SEP]"],
    ["[CLS]", "extraordinarily", "long", "##ish", "pieces", "[SEP]"],
])
def test_the_explorers_axes_sit_on_whole_pixels(pieces):
    """Every edge of the explorer's axes falls on a whole pixel of its frame (so a label sits
    at the same place within a pixel in every sentence's figure and is drawn once)."""
    from attn_core.explorers.base import DPI, SCALE

    assert model_base.EXPLORER_PIXELS_PER_IN == DPI * SCALE
    lay = figures.panels_layout(pieces)
    width, height = (v * DPI * SCALE for v in lay.figsize)
    for v in (width, height):
        assert abs(v - round(v)) < 1e-6
    for left, bottom, w, h in (lay.map_rect, lay.every_rect, lay.colorbar_rect):
        for edge in (left * width, (left + w) * width, bottom * height, (bottom + h) * height):
            assert abs(edge - round(edge)) < 1e-6, (edge, lay)
