"""Figures of a real model's attention: one head's map, one query in every head, head roles.

Pure figures, in the style of :mod:`attn_core.plots`: every function draws arrays the
caller has computed (nothing here runs the model or scores a head), takes ``ax=None``
(or ``fig=None``), returns its artists in a small dataclass, and has an ``update_*``
partner that changes those artists in place, so an explorer never rebuilds a figure on a
slider move.

Counting: ``layer`` and ``head`` are 1-based, as every label a learner reads (and as
:class:`attn_core.head_roles.HeadScore`); ``query`` is a 0-based piece position, as
``run.index(piece)`` returns it, or a piece string (its first occurrence).

Labels never overlap, from 3 to 40-odd word pieces: a figure made here is sized to the
sentence, and the tick font is fitted to the room each label has (``_fit_font``); where
even the smallest font does not fit, only every second (third, ...) label is written.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from numbers import Integral

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import patheffects
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.patches import Rectangle
from matplotlib.textpath import text_to_path
from matplotlib.transforms import ScaledTranslation, blended_transform_factory

from . import plots
from ._validate import as_float_array

__all__ = [
    "EveryHeadArtists",
    "ExplorerPanelsArtists",
    "HeadMapArtists",
    "PanelsLayout",
    "RoleScoresArtists",
    "every_head_rows",
    "explorer_figure",
    "explorer_panels",
    "head_map",
    "image_values",
    "outlined_query",
    "panels_layout",
    "query_in_every_head",
    "query_position",
    "role_scores",
    "selected_head",
    "update_explorer_panels",
    "update_head_map",
    "update_query_in_every_head",
]

# --- constants ----------------------------------------------------------------------------

CMAP = plots.SEQUENTIAL_CMAP  # viridis: weights are unsigned, 0 to 1
WEIGHT_RANGE = (0.0, 1.0)  # every weight figure shares this fixed scale
EXPLORER_DPI = 80  # the explorer's resolution (attn_core.widgets.DPI); explorer_figure's too
FONT_MAX = 9.0  # tick labels (points): largest ...
FONT_MIN = 7.0  # ... and smallest; 7 pt is about 8 px at EXPLORER_DPI, still readable
LINE_EM = 1.15  # a one-line label's box is this many font sizes high (DejaVu Sans, measured)
LABEL_GAP_PT = 0.5  # clear space between neighbouring labels
WIDTH_SAFETY = 1.05  # measured text widths are rounded up by this factor ...
HINTING_PT_PER_CHAR = 0.5  # ... and this per glyph (hinting widens glyphs at 72 to 80 dpi)
TICK_LEN_PT = 2.0  # tick marks beside the cells
TICK_PAD_PT = 3.5  # between a tick mark and its label (clear of an outline's halo)
AXIS_TITLE_PAD_PT = 3.0  # between the labels and "key" / "query"
LAYER_GAP_PT = 3.0  # between the head numbers and the layer names
EDGE_PT = 5.0  # blank border of a figure
TITLE_PAD_PT = 4.0
TOP_IN = 0.4  # room above the axes for a title
MAP_GAP_IN = 0.25  # between the head map and the every-head labels
TITLE_FONTSIZE = 10
AXIS_LABEL_FONTSIZE = 9
HEAD_NUMBER_FONTSIZE = 7.0
LAYER_LABEL_FONTSIZE = 8.0
OUTLINE_COLOR = plots.HIGHLIGHT_EDGE_COLOR  # vermillion, with a white halo
OUTLINE_WIDTH = 2.0
OUTLINE_HALO = 1.5
MARKER_SIZE = 6  # the triangle pointing at the selected head's row (points)
MARKER_OFFSET_IN = 0.08  # its centre's distance right of the every-head image (inches)
SEPARATOR_COLOR = "white"  # between the layer blocks of the every-head image
SEPARATOR_WIDTH = 1.5
BASELINE_COLOR = plots.OKABE_ITO["orange"]
BASELINE_LABEL = "1/n"  # beside the baseline's mark on the colour bar
CELL_MAX_IN = 0.28  # largest side of one cell of a head map (inches)
MAP_TARGET_IN = 3.4  # a head map's side when the tokens fit at a large font
MAP_MIN_IN = 1.5
COLORBAR_GAP_IN = 0.2  # between an image and its colour bar (room for the row marker)
COLORBAR_WIDTH_IN = 0.12
COLORBAR_LABELS_IN = 0.45  # its tick labels and "weight"
MAP_MAX_IN = 5.0  # beyond this, labels are thinned out rather than the figure widened
EVERY_MIN_WIDTH_IN = 3.0  # room for the title
EVERY_MIN_HEIGHT_IN = 4.6  # 72 rows: 4.6 pt each, room for every second head's number
LAYER_NAME = "layer {}"
SHORT_LAYER_NAME = "L{}"
MAP_TITLE = "layer {layer}, head {head}"
#: The every-head title names the query (in the explorer too: a title is cheap to redraw).
EVERY_TITLE = "row of {piece!r} (piece {position}) in every head"


# --- artists returned ---------------------------------------------------------------------


@dataclass(repr=False)
class HeadMapArtists:
    """What :func:`head_map` drew.

    Attributes
    ----------
    ax : Axes
    image : AxesImage
        The (n, n) weights; rows are queries, columns keys.
    row_box : Rectangle
        The outline of the query's row (hidden when no query is chosen).
    title : Text
    colorbar : Colorbar or None
    row_labels, col_labels : list of Text
        The piece labels written beside the rows and under the columns.
    pieces : list of str
        The pieces as given (the tick labels are shortened by
        :func:`attn_core.plots.token_labels`).
    query : int or None
        0-based row outlined.
    """

    ax: object
    image: object
    row_box: object
    title: object
    colorbar: object
    row_labels: list
    col_labels: list
    pieces: list
    query: int | None

    @property
    def dynamic(self):
        """The artists an update changes (an explorer redraws only these)."""
        return [self.image, self.row_box, self.title]

    def __repr__(self):
        return f"HeadMapArtists(n={len(self.pieces)}, query={self.query})"


@dataclass(repr=False)
class EveryHeadArtists:
    """What :func:`query_in_every_head` drew.

    Attributes
    ----------
    ax : Axes
    image : AxesImage
        ``(layers * heads, n)``: row ``(l - 1) * heads + (h - 1)`` is layer l, head h.
    outline : Rectangle
        Around the selected head's row (hidden when none is selected).
    marker : Line2D
        A triangle right of the image pointing at that row.
    separators : LineCollection
        Thin white lines between the layer blocks.
    layer_labels, head_labels : list of Text
        ``"layer 1"`` ... beside each block; head numbers (1-based) beside their rows.
    col_labels : list of Text
        The key pieces under the columns.
    title : Text
    colorbar : Colorbar or None
    layers, heads : int
    pieces : list of str
    query : int
    selected : (int, int) or None
        The outlined ``(layer, head)``, 1-based.
    fixed_title : str or None
        The title given; None when the title names the query (and changes with it).
    """

    ax: object
    image: object
    outline: object
    marker: object
    separators: object
    layer_labels: list
    head_labels: list
    col_labels: list
    title: object
    colorbar: object
    layers: int
    heads: int
    pieces: list
    query: int
    selected: tuple | None
    fixed_title: str | None = None

    @property
    def dynamic(self):
        """The artists an update changes, in drawing order (separators over the image);
        the title only when it follows the query (no fixed title)."""
        return [self.image, self.separators, self.outline, self.marker,
                *([] if self.fixed_title else [self.title])]

    def __repr__(self):
        return (f"EveryHeadArtists(layers={self.layers}, heads={self.heads}, "
                f"n={len(self.pieces)}, query={self.query}, selected={self.selected})")


@dataclass(repr=False)
class RoleScoresArtists:
    """What :func:`role_scores` drew.

    Attributes
    ----------
    heatmap : plots.HeatmapArtists
        The grid, its numbers (``heatmap.texts``) and colour bar.
    baseline_line : Line2D or None
        The baseline marked across the colour bar.
    found : list of (int, int)
        The outlined heads (score >= threshold), 1-based ``(layer, head)``, best first.
    """

    heatmap: object
    baseline_line: object
    found: list

    @property
    def ax(self):
        return self.heatmap.ax

    def __repr__(self):
        shape = self.heatmap.image.get_array().shape
        return f"RoleScoresArtists(shape={shape}, found={self.found})"


@dataclass(frozen=True)
class PanelsLayout:
    """Where :func:`explorer_panels` puts its axes, in inches and figure fractions.

    Attributes
    ----------
    figsize : (float, float)
        Width and height in inches.
    map_rect, every_rect, colorbar_rect : (left, bottom, width, height)
        Figure fractions of the head map, the every-head image and the colour bar.
    """

    figsize: tuple
    map_rect: tuple
    every_rect: tuple
    colorbar_rect: tuple


@dataclass(repr=False)
class ExplorerPanelsArtists:
    """What :func:`explorer_panels` drew: a head map beside one query in every head.

    Attributes
    ----------
    fig : Figure
    head_map : HeadMapArtists
    every_head : EveryHeadArtists
    colorbar : Colorbar
        One 0-1 scale for both pictures.
    layout : PanelsLayout
    layer, head, query : int
        The state shown: 1-based layer and head, 0-based query position.
    """

    fig: object
    head_map: HeadMapArtists
    every_head: EveryHeadArtists
    colorbar: object
    layout: PanelsLayout
    layer: int
    head: int
    query: int

    @property
    def dynamic(self):
        """Every artist a slider move changes."""
        return [*self.head_map.dynamic, *self.every_head.dynamic]

    def __repr__(self):
        return (f"ExplorerPanelsArtists(n={len(self.head_map.pieces)}, layer={self.layer}, "
                f"head={self.head}, query={self.query})")


# --- checks -------------------------------------------------------------------------------


def _as_array(x, name, ndim, layout):
    """``x`` checked by the package's validator (numbers, finite, non-empty), rank ``ndim``."""
    arr = as_float_array(x, name, layout=layout)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have shape {layout}, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {arr.shape}")
    return arr


def _square(weights, name="weights"):
    w = _as_array(weights, name, 2, "(n, n)")
    if w.shape[0] != w.shape[1]:
        raise ValueError(f"{name} must be square (n, n): queries x keys, got {w.shape}")
    return w


def _attentions(attentions):
    a = _as_array(attentions, "attentions", 4, "(layers, heads, n, n)")
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(f"attentions must be square in its last two axes "
                         f"(layers, heads, n, n), got {a.shape}")
    return a


def _pieces(pieces, n):
    if isinstance(pieces, str):
        raise TypeError("pieces must be a sequence of word pieces, not one string")
    pieces = [str(p) for p in pieces]
    if len(pieces) != n:
        raise ValueError(f"pieces must have {n} entries (one per row of the weights), "
                         f"got {len(pieces)}")
    return pieces


def query_position(query, pieces):
    """The 0-based position of ``query``: an int position, or a piece (first occurrence).

    Parameters
    ----------
    query : int or str
        A 0-based position (negative counts from the end), or a piece such as ``"it"``
        (compared case-insensitively, since the model's pieces are lower case).
    pieces : sequence of str

    Returns
    -------
    int

    Examples
    --------
    >>> query_position("it", ["[CLS]", "it", "was", "[SEP]"]), query_position(-1, "abc")
    (1, 2)
    """
    pieces = [str(p) for p in pieces]
    n = len(pieces)
    if isinstance(query, str):
        lowered = [p.lower() for p in pieces]
        if query.lower() not in lowered:
            raise ValueError(f"query {query!r} is not one of the pieces {pieces}")
        return lowered.index(query.lower())
    if isinstance(query, bool) or not isinstance(query, Integral):
        raise TypeError(f"query must be an int position or a piece (str), got "
                        f"{type(query).__name__}")
    if not -n <= query < n:
        raise ValueError(f"query must be a position from 0 to {n - 1}, got {query}")
    return int(query) % n


def check_layer_head(layer, head, layers, heads):
    """``(layer, head)`` as ints after checking each is from 1 to ``layers`` / ``heads``."""
    for name, value, top in (("layer", layer, layers), ("head", head, heads)):
        if isinstance(value, bool) or not isinstance(value, Integral):
            raise TypeError(f"{name} must be an int (1-based), got {type(value).__name__}")
        if not 1 <= value <= top:
            raise ValueError(f"{name} must be from 1 to {top} (counted from 1), got {value}")
    return int(layer), int(head)


# --- labels: plain texts beside the cells, fitted so that they never overlap ----------------
#
# Matplotlib's tick machinery costs several milliseconds per tick (each tick is two lines
# and two texts); a sentence needs about 3n + 72 of them, so the labels here are plain
# Text artists placed beside the cells, with one LineCollection of short tick marks.


def _pitch_pt(fontsize):
    """Room one label needs across the reading direction, in points."""
    return LINE_EM * fontsize + LABEL_GAP_PT


def _fit_font(room_pt, largest=None):
    """The largest font (half points, FONT_MIN to ``largest``) whose label fits in
    ``room_pt``, and the stride (1 = every label) that makes even FONT_MIN fit.

    Examples
    --------
    >>> _fit_font(20.0), _fit_font(4.0)
    ((9.0, 1), (7.0, 3))
    """
    largest = FONT_MAX if largest is None else largest
    size = math.floor(2 * (room_pt - LABEL_GAP_PT) / LINE_EM) / 2
    size = float(np.clip(size, FONT_MIN, largest))
    stride = max(1, math.ceil(_pitch_pt(size) / room_pt - 1e-9))
    return size, stride


@functools.lru_cache(maxsize=4096)
def _char_width_pt(char, fontsize):
    width, _, _ = text_to_path.get_text_width_height_descent(
        char, FontProperties(size=fontsize), ismath=False)
    return float(width)


def _text_width_pt(text, fontsize):
    """Width of one line of text in points, from the font's glyph widths (no figure
    needed), rounded up a little for kerning and hinting.

    Examples
    --------
    >>> 18 < _text_width_pt("[CLS]", 7.0) < 25
    True
    """
    if not text:
        return 0.0
    glyphs = sum(_char_width_pt(ch, float(fontsize)) for ch in text)
    return WIDTH_SAFETY * glyphs + HINTING_PT_PER_CHAR * len(text) + 1.0


def _widest_pt(labels, fontsize):
    return max((_text_width_pt(t, fontsize) for t in labels), default=0.0)


def _axes_points(ax):
    """Width and height of the axes' box in points (the figure layout must be final)."""
    box = ax.get_position()
    fig = ax.figure
    return box.width * fig.get_figwidth() * 72, box.height * fig.get_figheight() * 72


def _offset(ax, dx_pt, dy_pt):
    return ScaledTranslation(dx_pt / 72, dy_pt / 72, ax.figure.dpi_scale_trans)


def _beside_rows(ax, dx_pt=0.0):
    """x in axes fraction (shifted by ``dx_pt`` points), y in data: a row's label."""
    return blended_transform_factory(ax.transAxes + _offset(ax, dx_pt, 0), ax.transData)


def _below_cols(ax, dy_pt=0.0):
    """x in data, y in axes fraction (shifted by ``dy_pt`` points): a column's label."""
    return blended_transform_factory(ax.transData, ax.transAxes + _offset(ax, 0, dy_pt))


def _tick_marks(ax, positions, axis):
    """Short tick marks outside the axes at ``positions`` (data), one artist for all."""
    if axis == "x":
        transform = _below_cols(ax, 0.0)
        length = TICK_LEN_PT / _axes_points(ax)[1]
        segs = [((p, -length), (p, 0.0)) for p in positions]
    else:
        length = TICK_LEN_PT / _axes_points(ax)[0]
        transform = _beside_rows(ax, 0.0)
        segs = [((-length, p), (0.0, p)) for p in positions]
    marks = LineCollection(segs, colors="black", linewidths=0.6, transform=transform,
                           clip_on=False)
    marks.set_in_layout(False)
    return ax.add_collection(marks, autolim=False)


def _text(ax, x, y, s, transform, **style):
    return ax.text(x, y, s, transform=transform, clip_on=False, parse_math=False, **style)


def _piece_labels(ax, labels, axis):
    """Write ``labels`` beside the rows (``axis="y"``) or under the columns (``"x"``,
    vertical text), at the largest font that fits the cells; thinned if none fits.

    Returns the Text artists (one per label written) and the font size used.
    """
    n = len(labels)
    width, height = _axes_points(ax)
    size, stride = _fit_font((width if axis == "x" else height) / n)
    shown = range(0, n, stride)
    _tick_marks(ax, shown, axis)
    pad = TICK_LEN_PT + TICK_PAD_PT
    if axis == "x":
        texts = [_text(ax, j, 0.0, labels[j], _below_cols(ax, -pad), rotation=90,
                       ha="center", va="top", fontsize=size) for j in shown]
    else:
        texts = [_text(ax, 0.0, i, labels[i], _beside_rows(ax, -pad), ha="right",
                       va="center", fontsize=size) for i in shown]
    return texts, size


def _axis_title(ax, text, axis, labels_pt):
    """"key" under the column labels or "query" left of the row labels."""
    away = TICK_LEN_PT + TICK_PAD_PT + labels_pt + AXIS_TITLE_PAD_PT
    if axis == "x":
        return _text(ax, 0.5, 0.0, text, ax.transAxes + _offset(ax, 0, -away), ha="center",
                     va="top", fontsize=AXIS_LABEL_FONTSIZE)
    return _text(ax, 0.0, 0.5, text, ax.transAxes + _offset(ax, -away, 0), ha="right",
                 va="center", rotation=90, fontsize=AXIS_LABEL_FONTSIZE)


def _label_margin_in(labels, fontsize):
    """Room beside a grid for its piece labels and the axis title, in inches."""
    return (TICK_LEN_PT + TICK_PAD_PT + _widest_pt(labels, fontsize) + AXIS_TITLE_PAD_PT
            + LINE_EM * AXIS_LABEL_FONTSIZE + EDGE_PT) / 72


def _bare(ax):
    """No matplotlib ticks (the labels here are plain texts) and no frame: the image's
    edge is the edge (a frame drawn under a redrawn image would be half covered)."""
    ax.set_xticks([])
    ax.set_yticks([])
    ax.xaxis.set_visible(False)  # an invisible axis is not even drawn: a faster first draw
    ax.yaxis.set_visible(False)
    for spine in ax.spines.values():
        spine.set_visible(False)


def _title(ax):
    """A title above the axes at a fixed place (``ax.title`` moves itself at each full
    draw, which a redrawn-only title would not follow)."""
    return _text(ax, 0.5, 1.0, "", ax.transAxes + _offset(ax, 0, TITLE_PAD_PT), ha="center",
                 va="bottom", fontsize=TITLE_FONTSIZE)


# --- the query's outline ------------------------------------------------------------------


def _outline(ax, n_rows, n_cols, halo=True):
    """An outline around one row of an ``n_rows`` x ``n_cols`` grid, drawn just outside
    the row (grown by half its stroke), so the row's own colours stay visible.

    Move it with ``_place_outline``; the axes' size must be final.
    """
    width = OUTLINE_WIDTH + (2 * OUTLINE_HALO if halo else 0.0)
    col_pt, row_pt = (side / count for side, count in zip(_axes_points(ax), (n_cols, n_rows)))
    grow = (width / 2 / col_pt, width / 2 / row_pt)  # half the stroke, in cells
    rect = Rectangle((-0.5 - grow[0], -0.5 - grow[1]), n_cols + 2 * grow[0], 1 + 2 * grow[1],
                     fill=False, edgecolor=OUTLINE_COLOR, linewidth=OUTLINE_WIDTH, zorder=4,
                     clip_on=False)
    effects = [patheffects.Normal()]
    if halo:
        effects.insert(0, patheffects.withStroke(linewidth=width, foreground="white"))
    rect.set_path_effects(effects)
    rect.set_in_layout(False)
    return ax.add_patch(rect)


def _place_outline(rect, row):
    grow = (rect.get_height() - 1) / 2  # as _outline grew it (_outlined_row reads it back)
    rect.set_y(row - 0.5 - grow)


def _weights_image(ax, values):
    return ax.imshow(values, cmap=CMAP, vmin=WEIGHT_RANGE[0], vmax=WEIGHT_RANGE[1],
                     interpolation="nearest", aspect="auto")


def _colorbar(fig, image, cax=None, ax=None):
    cbar = fig.colorbar(image, cax=cax, ax=ax, fraction=0.05, pad=0.03)
    cbar.set_label("weight", fontsize=AXIS_LABEL_FONTSIZE)
    cbar.ax.tick_params(labelsize=AXIS_LABEL_FONTSIZE)
    return cbar


# --- one head's map -----------------------------------------------------------------------


def _map_side_in(n):
    """Side of a head map of ``n`` pieces (inches): large cells for a short sentence,
    FONT_MIN labels for a long one, never more than MAP_MAX_IN.

    Examples
    --------
    >>> round(_map_side_in(12), 2), round(_map_side_in(40), 2)
    (3.36, 4.75)
    """
    size = FONT_MAX
    while size > FONT_MIN and n * _pitch_pt(size) / 72 > MAP_TARGET_IN:
        size -= 0.5
    side = max(n * _pitch_pt(size) / 72, min(n * CELL_MAX_IN, MAP_TARGET_IN))
    return float(np.clip(side, MAP_MIN_IN, MAP_MAX_IN))


def _labels_font(labels, side_in):
    """The font :func:`_piece_labels` will use on a side of ``side_in`` inches."""
    return _fit_font(side_in * 72 / len(labels))[0]


def _new_figure(left, bottom, width, height, top, colorbar):
    """A pyplot figure with one axes of ``width`` x ``height`` inches at (left, bottom),
    and a colour-bar axes right of it (or None): ``(ax, cax)``."""
    right = EDGE_PT / 72 + (COLORBAR_GAP_IN + COLORBAR_WIDTH_IN + COLORBAR_LABELS_IN
                            if colorbar else 0.0)
    fig_w, fig_h = left + width + right, bottom + height + top
    fig = plt.figure(figsize=(fig_w, fig_h))
    ax = fig.add_axes((left / fig_w, bottom / fig_h, width / fig_w, height / fig_h))
    cax = None
    if colorbar:
        cax = fig.add_axes(((left + width + COLORBAR_GAP_IN) / fig_w, bottom / fig_h,
                            COLORBAR_WIDTH_IN / fig_w, height / fig_h))
    return ax, cax


def _standalone_map_axes(labels, title, colorbar):
    side = _map_side_in(len(labels))
    margin = _label_margin_in(labels, _labels_font(labels, side))
    return _new_figure(margin, margin, side, side, TOP_IN if title else EDGE_PT / 72,
                       colorbar)


def _set_title(text, value):
    text.set_text(value or "")
    text.set_visible(bool(value))


def head_map(weights, pieces, query=None, *, ax=None, title=None, colorbar=True):
    """Draw one head's attention map with the word pieces on both axes.

    Rows are queries (each row sums to 1: where that piece looks), columns are keys. The
    colour scale is fixed at 0 to 1 (viridis), so maps of different heads compare. Column
    labels are written vertically and the font is fitted to the cells, so labels never
    overlap (a sentence too long for the smallest font gets every second label).

    Parameters
    ----------
    weights : (n, n) array_like
        One head's weights, e.g. ``run.attentions[layer - 1, head - 1]``.
    pieces : sequence of n str
        The word pieces, ``[CLS]`` first; written shortened to 8 characters.
    query : int or str, optional
        The query whose row is outlined (0-based position, or a piece); none when None.
    ax : Axes, optional
        Where to draw; a figure sized to the sentence when None. Labels are fitted to the
        axes' size when drawn here, so fix the figure's layout first.
    title : str, optional
    colorbar : bool, optional

    Returns
    -------
    HeadMapArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> w = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
    >>> art = head_map(w, ["[CLS]", "hi", "[SEP]"], query=1, title="layer 1, head 1")
    >>> [t.get_text() for t in art.row_labels], art.query
    (['[CLS]', 'hi', '[SEP]'], 1)
    >>> plt.close(art.ax.figure)
    """
    w = _square(weights)
    n = w.shape[0]
    pieces = _pieces(pieces, n)
    labels = plots.token_labels(pieces)
    q = None if query is None else query_position(query, pieces)
    cax = None
    if ax is None:
        ax, cax = _standalone_map_axes(labels, title, colorbar)
    image = _weights_image(ax, w)
    # the colour bar first: taking its room from ax would change the size that the
    # labels and the outline are fitted to
    cbar = _colorbar(ax.figure, image, cax=cax, ax=None if cax else ax) if colorbar else None
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(n - 0.5, -0.5)
    _bare(ax)
    rows, row_size = _piece_labels(ax, labels, "y")
    cols, col_size = _piece_labels(ax, labels, "x")
    _axis_title(ax, plots.QUERY_AXIS_LABEL, "y", _widest_pt(labels, row_size))
    _axis_title(ax, plots.KEY_AXIS_LABEL, "x", _widest_pt(labels, col_size))
    box = _outline(ax, n, n)
    title_text = _title(ax)
    art = HeadMapArtists(ax, image, box, title_text, cbar, rows, cols, pieces, None)
    return update_head_map(art, w, q, title=title)


def update_head_map(artists, weights, query=None, *, title=None):
    """Show another head's weights (same pieces), another query row, a new title.

    Parameters
    ----------
    artists : HeadMapArtists
    weights : (n, n) array_like
    query : int or str, optional
        The row to outline; None keeps the current one.
    title : str, optional
        None keeps the current title.

    Returns
    -------
    HeadMapArtists
        The same object, updated.
    """
    w = _square(weights)
    n = len(artists.pieces)
    if w.shape != (n, n):
        raise ValueError(f"weights must be ({n}, {n}), one row and column per piece "
                         f"labelled, got {w.shape}")
    artists.image.set_data(w)
    if query is not None:
        artists.query = query_position(query, artists.pieces)
    artists.row_box.set_visible(artists.query is not None)
    if artists.query is not None:
        _place_outline(artists.row_box, artists.query)
    if title is not None:
        _set_title(artists.title, title)
    return artists


# --- one query in every head --------------------------------------------------------------


def _every_labels_in(layers):
    """Room left of the every-head image: head numbers and rotated layer names."""
    return (TICK_LEN_PT + TICK_PAD_PT + _text_width_pt("12", HEAD_NUMBER_FONTSIZE)
            + LAYER_GAP_PT + LINE_EM * LAYER_LABEL_FONTSIZE + EDGE_PT) / 72


def _standalone_every_axes(labels, layers, colorbar):
    width = max(_map_side_in(len(labels)), EVERY_MIN_WIDTH_IN)
    bottom = _label_margin_in(labels, _labels_font(labels, width))
    return _new_figure(_every_labels_in(layers), bottom, width, EVERY_MIN_HEIGHT_IN, TOP_IN,
                       colorbar)


def _every_title(pieces, query):
    return EVERY_TITLE.format(piece=pieces[query], position=query + 1)


def _head_label_stride(row_pt):
    """Write every head's number if they fit, else every second (third, ...)."""
    for stride in (1, 2, 3, 4, 6):
        if stride * row_pt >= _pitch_pt(HEAD_NUMBER_FONTSIZE):
            return stride
    return 12


def _every_head_labels(ax, layers, heads):
    """Layer names beside each block, head numbers (1-based) beside their rows."""
    _, height = _axes_points(ax)
    row_pt = height / (layers * heads)
    stride = _head_label_stride(row_pt)
    rows = np.arange(layers * heads)
    _tick_marks(ax, rows, "y")
    pad = TICK_LEN_PT + TICK_PAD_PT
    numbered = [r for r in rows if (r % heads) % stride == 0]
    head_labels = [_text(ax, 0.0, r, str(r % heads + 1), _beside_rows(ax, -pad), ha="right",
                         va="center", fontsize=HEAD_NUMBER_FONTSIZE) for r in numbered]
    block_pt = heads * row_pt
    long_name = _text_width_pt(LAYER_NAME.format(layers), LAYER_LABEL_FONTSIZE) + 4
    name = LAYER_NAME if block_pt >= long_name else SHORT_LAYER_NAME
    away = pad + _text_width_pt("12", HEAD_NUMBER_FONTSIZE) + LAYER_GAP_PT
    layer_labels = [_text(ax, 0.0, l * heads + (heads - 1) / 2, name.format(l + 1),
                          _beside_rows(ax, -away), rotation=90, ha="right", va="center",
                          fontsize=LAYER_LABEL_FONTSIZE) for l in range(layers)]
    return layer_labels, head_labels


def query_in_every_head(attentions, query, pieces, *, selected=None, ax=None, title=None,
                        colorbar=True):
    """Where one query piece looks in every head at once: one row per head.

    The image has ``layers * heads`` rows, layer by layer (``"layer 1"`` written beside
    its block of ``heads`` rows, thin white lines between blocks, head numbers from 1),
    and one column per key piece. Row ``(layer, head)`` is that head's weights for the
    query, ``attentions[layer - 1, head - 1, query]``; it sums to 1.

    Parameters
    ----------
    attentions : (layers, heads, n, n) array_like
        Every head's weights, e.g. ``run.attentions``.
    query : int or str
        0-based position of the query piece, or the piece (first occurrence).
    pieces : sequence of n str
    selected : (int, int), optional
        The ``(layer, head)`` to outline, 1-based; none when None.
    ax : Axes, optional
        Where to draw; a figure sized to the sentence when None (fix the layout first).
    title : str, optional
        Default: ``query 'it' (piece 8) in every head``.
    colorbar : bool, optional

    Returns
    -------
    EveryHeadArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> a = np.full((2, 3, 4, 4), 0.25)
    >>> art = query_in_every_head(a, 1, ["[CLS]", "a", "b", "[SEP]"], selected=(2, 1))
    >>> every_head_rows(art).shape, [t.get_text() for t in art.layer_labels]
    ((6, 4), ['layer 1', 'layer 2'])
    >>> plt.close(art.ax.figure)
    """
    a = _attentions(attentions)
    layers, heads, n, _ = a.shape
    pieces = _pieces(pieces, n)
    labels = plots.token_labels(pieces)
    q = query_position(query, pieces)
    cax = None
    if ax is None:
        ax, cax = _standalone_every_axes(labels, layers, colorbar)
    image = _weights_image(ax, a[:, :, q, :].reshape(layers * heads, n))
    cbar = _colorbar(ax.figure, image, cax=cax, ax=None if cax else ax) if colorbar else None
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(layers * heads - 0.5, -0.5)
    _bare(ax)
    cols, col_size = _piece_labels(ax, labels, "x")
    _axis_title(ax, plots.KEY_AXIS_LABEL, "x", _widest_pt(labels, col_size))
    layer_labels, head_labels = _every_head_labels(ax, layers, heads)
    lines = [((-0.5, l * heads - 0.5), (n - 0.5, l * heads - 0.5)) for l in range(1, layers)]
    separators = ax.add_collection(LineCollection(lines, colors=SEPARATOR_COLOR,
                                                  linewidths=SEPARATOR_WIDTH, zorder=3),
                                   autolim=False)
    outline = _outline(ax, layers * heads, n, halo=False)
    (marker,) = ax.plot([1.0], [0.0], marker="<", markersize=MARKER_SIZE, color=OUTLINE_COLOR,
                        linestyle="none", clip_on=False, zorder=4,
                        transform=_beside_rows(ax, MARKER_OFFSET_IN * 72))
    marker.set_in_layout(False)
    title_text = _title(ax)
    art = EveryHeadArtists(ax, image, outline, marker, separators, layer_labels, head_labels,
                           cols, title_text, cbar, layers, heads, pieces, q, None)
    return update_query_in_every_head(art, a, q, selected=selected, title=title)


def update_query_in_every_head(artists, attentions, query, *, selected=None, title=None):
    """Show another query (or new weights), move the outline, in place.

    Parameters
    ----------
    artists : EveryHeadArtists
    attentions : (layers, heads, n, n) array_like
        Same shape as drawn.
    query : int or str
    selected : (int, int), optional
        1-based ``(layer, head)`` to outline; None keeps the current one.
    title : str, optional
        A new title; None keeps the title given to :func:`query_in_every_head`, or, if
        none was, writes the default one for the new query.

    Returns
    -------
    EveryHeadArtists
        The same object, updated.
    """
    a = _attentions(attentions)
    shape = (artists.layers, artists.heads, len(artists.pieces), len(artists.pieces))
    if a.shape != shape:
        raise ValueError(f"attentions must have the shape drawn, {shape}, got {a.shape}")
    q = query_position(query, artists.pieces)
    artists.image.set_data(a[:, :, q, :].reshape(shape[0] * shape[1], shape[2]))
    artists.query = q
    if selected is not None:
        artists.selected = check_layer_head(*selected, artists.layers, artists.heads)
    for a in (artists.outline, artists.marker):
        a.set_visible(artists.selected is not None)
    if artists.selected is not None:
        layer, head = artists.selected
        row = (layer - 1) * artists.heads + (head - 1)
        _place_outline(artists.outline, row)
        artists.marker.set_data([1.0], [row])
    if title is not None:
        artists.fixed_title = title
    _set_title(artists.title, artists.fixed_title or _every_title(artists.pieces, q))
    return artists


def every_head_rows(artists):
    """The every-head image read back: ``(layers * heads, n)`` float array.

    Row ``r`` is layer ``r // heads + 1``, head ``r % heads + 1``.
    """
    return np.array(np.ma.getdata(artists.image.get_array()), dtype=float)


def _outlined_row(rect):
    if not rect.get_visible():
        return None
    grow = (rect.get_height() - 1) / 2  # as _outline grew it
    return int(round(rect.get_y() + grow + 0.5))


def selected_head(artists):
    """The outlined ``(layer, head)`` of an :class:`EveryHeadArtists`, 1-based, read back
    from the outline's place (None when nothing is outlined)."""
    row = _outlined_row(artists.outline)
    return None if row is None else (row // artists.heads + 1, row % artists.heads + 1)


def outlined_query(artists):
    """The 0-based query row a :class:`HeadMapArtists` outlines, read back (or None)."""
    return _outlined_row(artists.row_box)


def image_values(artists):
    """The array a head map or every-head image shows, read back as floats."""
    return np.array(np.ma.getdata(artists.image.get_array()), dtype=float)


# --- head-role scores ---------------------------------------------------------------------


def role_scores(scores, title, *, ax=None, baseline=None, threshold=None):
    """A layers x heads grid of one head-role score, each value written in its cell.

    Parameters
    ----------
    scores : (layers, heads) array_like
        One score per head in [0, 1], e.g. ``previous_token_score(run.attentions)``.
    title : str
    ax : Axes, optional
        A figure sized to the grid when None.
    baseline : float, optional
        The score of a head that spreads evenly (``1 / n``): marked on the colour bar and
        named in the title.
    threshold : float, optional
        Heads scoring at least this are outlined and listed in ``.found``.

    Returns
    -------
    RoleScoresArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> art = role_scores([[0.1, 0.9], [0.6, 0.2]], "made up", baseline=0.25, threshold=0.5)
    >>> art.found, art.heatmap.texts[0, 1].get_text()
    ([(1, 2), (2, 1)], '0.90')
    >>> plt.close(art.ax.figure)
    """
    s = _as_array(scores, "scores", 2, "(layers, heads)")
    if not isinstance(title, str):
        raise TypeError(f"title must be a str, got {type(title).__name__}")
    layers, heads = s.shape
    found = []
    if threshold is not None:
        cells = sorted(zip(*np.nonzero(s >= threshold)), key=lambda lh: -s[lh])
        found = [(int(l) + 1, int(h) + 1) for l, h in cells]
    notes = []
    if baseline is not None:
        notes.append(f"uniform baseline 1/n = {baseline:.2f}")
    if threshold is not None:
        notes.append(f"outlined: score ≥ {threshold:.2f}")
    full_title = title + ("\n(" + "; ".join(notes) + ")" if notes else "")
    art = plots.heatmap(
        s, [str(l + 1) for l in range(layers)], [str(h + 1) for h in range(heads)], ax=ax,
        vmin=WEIGHT_RANGE[0], vmax=WEIGHT_RANGE[1], annotate=True, fmt="{:.2f}",
        highlight=[(l - 1, h - 1) for l, h in found], title=full_title, xlabel="head",
        ylabel="layer")
    line = None
    if baseline is not None:
        cax = art.colorbar.ax
        line = cax.axhline(baseline, color=BASELINE_COLOR, linewidth=2.5)
        cax.text(-0.15, baseline, BASELINE_LABEL, transform=cax.get_yaxis_transform(),
                 ha="right", va="center", fontsize=AXIS_LABEL_FONTSIZE, clip_on=False)
    return RoleScoresArtists(art, line, found)


# --- the explorer's figure ----------------------------------------------------------------


def panels_layout(pieces, layers=6, heads=12):
    """Figure size and axes places for :func:`explorer_panels`, fitted to the sentence.

    Parameters
    ----------
    pieces : sequence of n str
    layers, heads : int

    Returns
    -------
    PanelsLayout

    Examples
    --------
    >>> lay = panels_layout(["[CLS]", "hi", "[SEP]"])
    >>> [round(v, 1) for v in lay.figsize]
    [6.7, 5.7]
    """
    labels = plots.token_labels([str(p) for p in pieces])
    side = _map_side_in(len(labels))
    every_w = max(side, EVERY_MIN_WIDTH_IN)
    every_h = max(side, EVERY_MIN_HEIGHT_IN)
    left = _label_margin_in(labels, _labels_font(labels, side))
    gap = MAP_GAP_IN + _every_labels_in(layers)
    right = COLORBAR_GAP_IN + COLORBAR_WIDTH_IN + COLORBAR_LABELS_IN + EDGE_PT / 72
    bottom = max(_label_margin_in(labels, _labels_font(labels, every_w)),
                 _label_margin_in(labels, _labels_font(labels, side)) - (every_h - side))
    width = left + side + gap + every_w + right
    height = bottom + every_h + TOP_IN
    y_top = (bottom + every_h) / height

    def rect(x, w, h):
        return (x / width, y_top - h / height, w / width, h / height)

    every_x = left + side + gap
    return PanelsLayout((width, height), rect(left, side, side), rect(every_x, every_w, every_h),
                        rect(every_x + every_w + COLORBAR_GAP_IN, COLORBAR_WIDTH_IN, every_h))


def explorer_panels(attentions, pieces, layer=1, head=1, query=1, *, fig=None):
    """The model explorer's picture: one head's map beside one query in every head.

    Left, the map of head ``(layer, head)`` with the query's row outlined; right, that
    query's row in every head, the same head outlined; one 0-1 colour bar.

    Parameters
    ----------
    attentions : (layers, heads, n, n) array_like
    pieces : sequence of n str
    layer, head : int
        1-based.
    query : int or str
        0-based position, or a piece (first occurrence).
    fig : Figure, optional
        An empty figure to draw in (it is resized to :func:`panels_layout`); a new
        pyplot figure when None.

    Returns
    -------
    ExplorerPanelsArtists
    """
    a = _attentions(attentions)
    layers, heads, n, _ = a.shape
    labels = _pieces(pieces, n)
    layer, head = check_layer_head(layer, head, layers, heads)
    q = query_position(query, labels)
    lay = panels_layout(labels, layers, heads)
    if fig is None:
        fig = plt.figure(figsize=lay.figsize)
    else:
        fig.set_size_inches(*lay.figsize)
    map_ax = fig.add_axes(lay.map_rect)
    every_ax = fig.add_axes(lay.every_rect)
    cax = fig.add_axes(lay.colorbar_rect)
    hm = head_map(a[layer - 1, head - 1], labels, q, ax=map_ax, colorbar=False,
                  title=MAP_TITLE.format(layer=layer, head=head))
    every = query_in_every_head(a, q, labels, selected=(layer, head), ax=every_ax,
                                colorbar=False)  # the title names the query and follows it
    cbar = _colorbar(fig, every.image, cax=cax)
    return ExplorerPanelsArtists(fig, hm, every, cbar, lay, layer, head, q)


def update_explorer_panels(artists, attentions, layer, head, query):
    """Show another head, query (or sentence of the same pieces) in place.

    Returns
    -------
    ExplorerPanelsArtists
        The same object, updated.
    """
    a = _attentions(attentions)
    layer, head = check_layer_head(layer, head, a.shape[0], a.shape[1])
    q = query_position(query, artists.head_map.pieces)
    update_head_map(artists.head_map, a[layer - 1, head - 1], q,
                    title=MAP_TITLE.format(layer=layer, head=head))
    update_query_in_every_head(artists.every_head, a, q, selected=(layer, head))
    artists.layer, artists.head, artists.query = layer, head, q
    return artists


def explorer_figure(run, layer=1, head=1, query="it", *, dpi=EXPLORER_DPI):
    """The explorer's default picture as a plain Figure, for a notebook's static "Try it".

    Parameters
    ----------
    run : SentenceRun
        Anything with ``.attentions (layers, heads, n, n)`` and ``.pieces``.
    layer, head : int
        1-based.
    query : int or str
        0-based position, or a piece (first occurrence), as in the explorer.
    dpi : float, optional

    Returns
    -------
    matplotlib.figure.Figure
        On an Agg canvas (no pyplot: nothing is shown or kept open by pyplot).
    """
    fig = Figure(dpi=dpi)
    FigureCanvasAgg(fig)
    explorer_panels(run.attentions, run.pieces, layer, head, query, fig=fig)
    return fig
