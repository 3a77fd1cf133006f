"""Figures of the course: heatmaps, matrix blocks, A x B = C diagrams, bars, masks, heads.

Every helper draws arrays that the caller has already computed (a plot never computes
attention), takes ``ax=None`` (or ``fig=None`` when it needs several axes) and creates a
figure sized to the data when none is given, and returns its artists in a small
dataclass. An explorer keeps those artists and changes them in place with the
``update_*`` functions (``image.set_data``, ``text.set_text``), so a slider move never
rebuilds the figure. Nothing here prints.

Colours are chosen to stay readable under the common colour-vision deficiencies:
``viridis`` for sequential data (weights, scores); the diverging ``PuOr`` only for signed
data centred on zero (``heatmap(..., centered=True)``); the Okabe-Ito palette for
categories, bars, lines and highlights.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from numbers import Integral

import re

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import patheffects
from matplotlib.colors import ListedColormap, to_rgba
from matplotlib.patches import Patch, PathPatch, Rectangle
from matplotlib.path import Path

__all__ = [
    "HeadGridArtists",
    "HeatmapArtists",
    "LineMarkerArtists",
    "MaskGridArtists",
    "MatrixBlockArtists",
    "ProductDiagramArtists",
    "BeyondLengthArtists",
    "HeadMosaicArtists",
    "WeightBarsArtists",
    "cell_squares_path",
    "fade_beyond_length",
    "head_grid",
    "head_mosaic",
    "head_mosaic_layout",
    "head_mosaic_panels",
    "heatmap",
    "line_with_marker",
    "mask_grid",
    "matrix_block",
    "matrix_product_diagram",
    "sum_of_products_text",
    "token_labels",
    "update_fade_beyond_length",
    "update_head_grid",
    "update_head_mosaic",
    "update_heatmap",
    "update_marker",
    "update_mask_grid",
    "update_weight_bars",
    "weight_bars",
]

# --- colours ----------------------------------------------------------------------------

#: The Okabe-Ito palette (Okabe & Ito, 2008): eight colours told apart by readers with
#: any common colour-vision deficiency.
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}
SEQUENTIAL_CMAP = "viridis"  # weights, unsigned scores: perceptually uniform, CVD-safe
DIVERGING_CMAP = "PuOr"  # signed data centred on 0 only (raw scores can be negative)
HIGHLIGHT_EDGE_COLOR = OKABE_ITO["vermillion"]  # outline of a highlighted cell
HIGHLIGHT_FILL_COLOR = OKABE_ITO["orange"]  # shading of highlighted rows/cols/cells
HIGHLIGHT_FILL_ALPHA = 0.35
HIGHLIGHT_LINEWIDTH = 2.5
HIGHLIGHT_HALO_COLOR = "white"  # a thin halo under the outline keeps it visible on dark cells
HIGHLIGHT_HALO_WIDTH = 1.5
MASKED_FACE_COLOR = "#DADADA"  # a masked-out cell: light grey ...
MASK_HATCH = "//"  # ... hatched, so it reads as "no value" without colour
MASK_HATCH_COLOR = "#7F7F7F"
MASKED_TEXT_BOX = dict(boxstyle="square,pad=0.15", facecolor=MASKED_FACE_COLOR,
                       edgecolor="none")  # hides the hatching behind a masked cell's text
ALLOWED_COLOR = OKABE_ITO["blue"]  # mask_grid: a cell where the query may attend
BAR_COLOR = OKABE_ITO["sky_blue"]
BAR_HIGHLIGHT_COLOR = OKABE_ITO["vermillion"]
LINE_COLOR = OKABE_ITO["blue"]
MARKER_COLOR = OKABE_ITO["vermillion"]
TEXT_DARK = "black"
TEXT_LIGHT = "white"
#: Relative luminance above which black text has more contrast than white (WCAG 2).
LUMINANCE_CROSSOVER = 0.179

# --- text -------------------------------------------------------------------------------

ANNOTATION_FONTSIZE = 10  # numbers inside heatmap cells (largest size used)
MIN_ANNOTATION_FONTSIZE = 6  # never smaller: below this, annotate=False is better
TICK_FONTSIZE = 9  # largest tick label size; smaller cells get smaller labels ...
MIN_TICK_FONTSIZE = 6  # ... down to this
TICK_FONT_PER_CELL = 0.7  # tick font size at most this share of a cell's side (points),
#                           so neighbouring labels (rotated 45°) never touch
LABEL_FONTSIZE = 10
TITLE_FONTSIZE = 11
MATRIX_FONTSIZE = 11  # numbers in a textbook-style matrix block
OPERATOR_FONTSIZE = 20  # the "×" and "=" between blocks
CAPTION_FONTSIZE = 11
TICK_ROTATION = 45  # degrees, for column labels longer than ROTATE_LABELS_LONGER_THAN
ROTATE_LABELS_LONGER_THAN = 2  # characters
TOKEN_MAX_LEN = 8  # longer tokens are cut and end in ELLIPSIS
ELLIPSIS = "…"
NEG_INF_TEXT = "−∞"  # how a masked score (-inf) is written in a cell
POS_INF_TEXT = "∞"
NAN_TEXT = ""
MASK_SYMBOLS = {True: "✓", False: "✗"}  # mask_grid: may attend / masked
MASK_LEGEND = {True: "may attend", False: "masked"}
MASK_SYMBOL_FONTSIZE = 14  # largest ✓/✗ ...
MASK_SYMBOL_PER_CELL = 0.4  # ... and at most this share of the cell's side (points)
QUERY_AXIS_LABEL = "query"  # rows of an attention matrix
KEY_AXIS_LABEL = "key"  # columns of an attention matrix
TIMES = "×"

# --- sizes (inches) and layout ---------------------------------------------------------

GRID_LAYOUT = "compressed"  # for square-cell images: constrained layout that also removes
#                             the white space the fixed aspect ratio leaves

HEATMAP_CELL_INCHES = 0.55  # preferred side of one heatmap cell
HEATMAP_MARGIN_INCHES = (1.5, 1.4)  # room for tick labels and axis labels (w, h)
COLORBAR_INCHES = 1.0
TITLE_INCHES = 0.4
FIG_MIN_SIZE = (3.5, 2.5)
FIG_MAX_SIZE = (9.0, 8.0)
ANNOTATE_MAX_SIDE = 16  # annotate="auto" writes numbers up to 16 x 16 cells
MATRIX_CELL_INCHES = (0.62, 0.36)  # one cell of a matrix block (w, h)
MATRIX_PAD = 0.35  # space around a block's brackets, in cells
BRACKET_ARM = 0.18  # length of a bracket's serif, in cells
BRACKET_LINEWIDTH = 1.6
BRACKET_GAP = 0.08  # between the outer cells and the brackets, in cells
OPERATOR_INCHES = 0.5  # width of the column holding "×" or "="
CAPTION_LINE_INCHES = 0.32
BAR_WIDTH = 0.7
BAR_EDGE_WIDTH = 0.6
BAR_SLOT_INCHES = 0.62
BAR_TEXT_OFFSET = 0.015  # gap between a bar's top and its value, as a share of the y-range
BAR_TEXT_INSIDE_ABOVE = 0.88  # a bar taller than this share of the y-range gets its
#                               value written inside, so it never leaves the axes
READOUT_GAP = 0.02  # the readout text sits this far (axes fraction) above the axes
READOUT_SPARE_CHARS = 6  # room for a readout to grow while a slider moves
CHAR_WIDTH_EM = 0.6  # average character width in DejaVu Sans, in em (for fitting text)
MIN_WRAP_CHARS = 12  # titles are wrapped to the axes width, but never narrower than this
LINE_WIDTH = 2.0
MARKER_SIZE = 9
HEAD_GRID_MAX_COLS = 4
HEAD_PANEL_INCHES = (1.6, 2.6)  # smallest and largest side of one head's panel
HEAD_GRID_MARGIN_INCHES = (1.3, 1.0)  # tick and axis labels of the outer panels (w, h)
HEAD_TITLE_INCHES = 0.3
HEAD_TITLE = "head {}"  # numbered from 1, as in "head 1 ... head 8"


# --- artists returned -------------------------------------------------------------------


@dataclass(repr=False)
class HeatmapArtists:
    """What :func:`heatmap` drew.

    Attributes
    ----------
    ax : Axes
    image : AxesImage
        Its array is the matrix (NaN and +-inf masked out).
    texts : (n_rows, n_cols) object ndarray of Text, or None when not annotated
    colorbar : Colorbar or None
    highlights : list of Rectangle
        One outline per highlighted cell, in the order given.
    mask_patch : PathPatch or None
        One hatched patch covering every masked-out cell.
    allowed : (n_rows, n_cols) bool ndarray or None
        The mask shown (True = may attend), None when there is none.
    """

    ax: object
    image: object
    texts: np.ndarray | None
    colorbar: object
    highlights: list
    mask_patch: object
    fmt: str
    annotate: bool | str
    vlim: tuple  # the (vmin, vmax) asked for; None entries follow the data
    centered: bool
    row_labels: list | None
    col_labels: list | None
    allowed: np.ndarray | None

    def __repr__(self):
        shape = self.image.get_array().shape
        return f"HeatmapArtists(shape={shape}, annotated={self.texts is not None})"


@dataclass(repr=False)
class MatrixBlockArtists:
    """What :func:`matrix_block` drew.

    Attributes
    ----------
    ax : Axes
    texts : (n_rows, n_cols) object ndarray of Text
    title : Text
        Name and shape, e.g. ``"Q  (4 × 2)"``.
    brackets : tuple of two Line2D
    row_patches, col_patches, cell_patches : list of Rectangle
        Shading of the highlighted rows, columns and cells (in the order given).
    """

    ax: object
    texts: np.ndarray
    title: object
    brackets: tuple
    row_patches: list
    col_patches: list
    cell_patches: list

    def __repr__(self):
        return f"MatrixBlockArtists(shape={self.texts.shape}, title={self.title.get_text()!r})"


@dataclass(repr=False)
class ProductDiagramArtists:
    """What :func:`matrix_product_diagram` drew.

    Attributes
    ----------
    fig : Figure
    blocks : tuple of three MatrixBlockArtists
        A, B and C, left to right.
    operators : tuple of two Text
        The ``"×"`` and the ``"="``.
    caption : Text or None
        The highlighted arithmetic, one line per highlighted cell of C.
    """

    fig: object
    blocks: tuple
    operators: tuple
    caption: object

    def __repr__(self):
        shapes = tuple(b.texts.shape for b in self.blocks)
        return f"ProductDiagramArtists(shapes={shapes})"


@dataclass(repr=False)
class WeightBarsArtists:
    """What :func:`weight_bars` drew.

    Attributes
    ----------
    ax : Axes
    bars : BarContainer
    value_texts : list of Text
        The value written on each bar.
    sum_text : Text
        ``"row sum = 1.00"``, above the axes on the right.
    """

    ax: object
    bars: object
    value_texts: list
    sum_text: object
    fmt: str

    def __repr__(self):
        return f"WeightBarsArtists(n={len(self.value_texts)})"


@dataclass(repr=False)
class MaskGridArtists:
    """What :func:`mask_grid` drew.

    Attributes
    ----------
    ax : Axes
    image : AxesImage
        Its array is the mask as 0/1 (1 = may attend).
    texts : (n_rows, n_cols) object ndarray of Text
        ``"✓"`` or ``"✗"`` in each cell.
    legend : Legend
    """

    ax: object
    image: object
    texts: np.ndarray
    legend: object

    def __repr__(self):
        return f"MaskGridArtists(shape={self.texts.shape})"


@dataclass(repr=False)
class LineMarkerArtists:
    """What :func:`line_with_marker` drew.

    Attributes
    ----------
    ax : Axes
    line : Line2D
        The curve.
    marker : Line2D
        One point: the current value.
    guide : Line2D
        A dashed vertical line through the current x.
    text : Text
        ``"x = ...,  y = ..."`` above the axes on the right.
    """

    ax: object
    line: object
    marker: object
    guide: object
    text: object
    fmt: str
    names: tuple
    logx: bool

    def __repr__(self):
        return f"LineMarkerArtists(points={len(self.line.get_xdata())})"


@dataclass(repr=False)
class HeadGridArtists:
    """What :func:`head_grid` drew.

    Attributes
    ----------
    fig : Figure
    axes : list of Axes
        One per head (unused grid slots are removed).
    heatmaps : list of HeatmapArtists
        One per head.
    colorbar : Colorbar
        The one colour bar all heads share (0 to 1).
    """

    fig: object
    axes: list
    heatmaps: list
    colorbar: object

    def __repr__(self):
        return f"HeadGridArtists(heads={len(self.heatmaps)})"


# --- small helpers ----------------------------------------------------------------------


def token_labels(tokens, max_len=TOKEN_MAX_LEN):
    """Shorten tokens for axis labels: longer than ``max_len`` ends in an ellipsis.

    Parameters
    ----------
    tokens : sequence of str (or anything with a ``str``), length n
    max_len : int, optional
        Longest label kept whole; at least 2.

    Returns
    -------
    list of str, length n

    Examples
    --------
    >>> token_labels(["The", "transformer", "it"], max_len=6)
    ['The', 'trans…', 'it']
    """
    if isinstance(max_len, bool) or not isinstance(max_len, Integral) or max_len < 2:
        raise ValueError(f"max_len must be an integer >= 2, got {max_len!r}")
    labels = [str(t) for t in tokens]
    return [t if len(t) <= max_len else t[: max_len - 1] + ELLIPSIS for t in labels]


def sum_of_products_text(row, col, fmt="{:.2f}"):
    """Write a dot product out with its numbers: ``"1.00×1.10 + 0.50×0.40 = 1.30"``.

    The total is computed here from ``row`` and ``col`` (in float64, left to right).
    Negative factors are put in brackets: ``"1.00×(-0.40)"``. With a fixed-point ``fmt``
    (``"{:.2f}"``) the factors get as many more decimals as it takes (up to 4 more) for the
    written terms to add up, by hand, to the written total: a reader who checks the
    arithmetic on paper must not find a slip that is only rounding.

    Parameters
    ----------
    row, col : (k,) array_like
    fmt : str, optional
        Format for the total, and the least precise format for the factors.

    Returns
    -------
    str

    Examples
    --------
    >>> sum_of_products_text([1.0, 0.5], [1.1, 0.4])
    '1.00×1.10 + 0.50×0.40 = 1.30'
    >>> sum_of_products_text([0.3214, 0.2417, 0.2337, 0.2032], [1.0, 3.0, 0.5, 2.0])
    '0.321×1.00 + 0.242×3.00 + 0.234×0.50 + 0.203×2.00 = 1.57'
    """
    row = _as_1d(row, "row")
    col = _as_1d(col, "col")
    if row.shape != col.shape:
        raise ValueError(f"row and col must have the same length, got {row.size} and {col.size}")
    total = float(np.dot(row, col))
    factor_fmt = _fmt_adding_up(row, col, total, fmt)
    terms = [f"{_factor(x, factor_fmt(x))}{TIMES}{_factor(y, factor_fmt(y))}"
             for x, y in zip(row.tolist(), col.tolist(), strict=True)]
    return " + ".join(terms) + " = " + _format(total, fmt)


_FIXED_POINT = re.compile(r"^\{:\.(\d+)f\}$")


def _fmt_adding_up(row, col, total, fmt, extra=4):
    """A per-factor format, with the fewest decimals whose products add up to ``total``.

    Factors that are already exact at ``fmt``'s precision (2.0, 0.5) keep it; the others
    get more decimals until the sum of the written products rounds to the written total.
    """
    match = _FIXED_POINT.match(fmt)
    if match is None:
        return lambda _: fmt
    base = int(match.group(1))
    target = round(total, base)
    for decimals in range(base, base + extra + 1):
        def shown(x, d=decimals):
            return round(x, base) if round(x, base) == round(x, d) else round(x, d)
        if round(sum(shown(x) * shown(y) for x, y in zip(row, col)), base) == target:
            break

    def factor_fmt(x, d=decimals):
        return fmt if round(x, base) == round(x, d) else f"{{:.{d}f}}"
    return factor_fmt


def _factor(value, fmt):
    text = _format(value, fmt)
    return f"({text})" if text.startswith("-") else text


def _format(value, fmt):
    """One cell's text: ``fmt`` for finite numbers, a symbol for +-inf, blank for NaN."""
    if np.isnan(value):
        return NAN_TEXT
    if np.isinf(value):
        return NEG_INF_TEXT if value < 0 else POS_INF_TEXT
    text = fmt.format(value)
    if text.startswith("-") and not any(ch in "123456789" for ch in text):
        text = text[1:]  # -0.003 is written 0.00, not -0.00
    return text


def _as_array(x, name):
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a rectangular array of numbers ({exc})") from None
    return arr


def _as_2d(x, name):
    arr = _as_array(x, name)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {arr.shape}")
    return arr


def _as_1d(x, name):
    arr = _as_array(x, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {arr.shape}")
    return arr


def _as_bool_2d(mask, name, shape=None):
    arr = np.asarray(mask)
    if arr.dtype != np.bool_:
        raise TypeError(
            f"{name} must be a boolean array (True where a query may attend), "
            f"got dtype {arr.dtype}; build one with causal_mask(n) or compare, e.g. m != 0"
        )
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
    if shape is not None and arr.shape != tuple(shape):
        raise ValueError(f"{name} must have the matrix's shape {tuple(shape)}, got {arr.shape}")
    return arr


def _check_labels(labels, expected, name, what):
    if labels is None:
        return None
    if isinstance(labels, str):
        raise TypeError(f"{name} must be a sequence of labels, not one string")
    labels = list(labels)
    if len(labels) != expected:
        raise ValueError(
            f"{name} must have {expected} entries (one per {what}), got {len(labels)}"
        )
    return labels


def _check_index(i, size, name):
    if isinstance(i, bool) or not isinstance(i, Integral):
        raise TypeError(f"{name} must hold integer indices, got {i!r}")
    if not 0 <= i < size:
        raise ValueError(f"{name} index {i} is out of range for size {size}")
    return int(i)


def _check_cells(cells, shape, name):
    """Return a list of (i, j); a single pair like (1, 2) is accepted as one cell."""
    if cells is None:
        return []
    cells = list(cells)
    if len(cells) == 2 and all(isinstance(c, Integral) for c in cells):
        cells = [tuple(cells)]
    out = []
    for cell in cells:
        if len(cell) != 2:
            raise ValueError(f"{name} must be a list of (row, column) pairs, got {cell!r}")
        out.append((_check_index(cell[0], shape[0], name), _check_index(cell[1], shape[1], name)))
    return out


def _text_colors(rgba):
    """Black or white text for each background colour in ``rgba`` (..., 4)."""
    rgb = np.asarray(rgba)[..., :3]
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    luminance = linear @ np.array([0.2126, 0.7152, 0.0722])
    return np.where(luminance > LUMINANCE_CROSSOVER, TEXT_DARK, TEXT_LIGHT)


def _clip_size(width, height):
    return (
        float(np.clip(width, FIG_MIN_SIZE[0], FIG_MAX_SIZE[0])),
        float(np.clip(height, FIG_MIN_SIZE[1], FIG_MAX_SIZE[1])),
    )


def _new_axes(figsize, layout="constrained"):
    """A new figure of ``figsize`` inches with one axes, laid out by matplotlib."""
    fig, ax = plt.subplots(figsize=figsize, layout=layout)
    return ax


def _rotate_if_long(labels):
    return labels is not None and max((len(t) for t in labels), default=0) > (
        ROTATE_LABELS_LONGER_THAN
    )


def _set_xticklabels(ax, labels, fontsize=TICK_FONTSIZE):
    ax.set_xticks(np.arange(len(labels)))
    if _rotate_if_long(labels):
        ax.set_xticklabels(
            labels, rotation=TICK_ROTATION, ha="right", rotation_mode="anchor",
            fontsize=fontsize,
        )
    else:
        ax.set_xticklabels(labels, fontsize=fontsize)


def _cell_points(ax, shape):
    """Side of one square cell in points, from the axes' current place in its figure."""
    fig = ax.figure
    box = ax.get_position()
    return min(box.width * fig.get_figwidth() / shape[1],
               box.height * fig.get_figheight() / shape[0]) * 72


def _grid_tick_fontsize(ax, shape):
    size = math.floor(TICK_FONT_PER_CELL * _cell_points(ax, shape))
    return int(np.clip(size, MIN_TICK_FONTSIZE, TICK_FONTSIZE))


def _set_grid_ticks(ax, row_labels, col_labels, shape):
    """Token labels on a cell grid; integer index ticks where no labels are given."""
    size = _grid_tick_fontsize(ax, shape)
    if col_labels is None:
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    else:
        _set_xticklabels(ax, col_labels, size)
    if row_labels is None:
        ax.yaxis.set_major_locator(plt.MaxNLocator(integer=True))
    else:
        ax.set_yticks(np.arange(len(row_labels)))
        ax.set_yticklabels(row_labels, fontsize=size)
    ax.tick_params(labelsize=size)


def _axes_width_points(ax):
    return ax.get_position().width * ax.figure.get_figwidth() * 72


def _wrap_to_axes(ax, text, fontsize):
    """Break ``text`` into lines no wider than the axes (estimated from its length)."""
    chars = max(MIN_WRAP_CHARS, int(_axes_width_points(ax) / (CHAR_WIDTH_EM * fontsize)))
    return "\n".join(textwrap.wrap(text, chars)) if len(text) > chars else text


def _set_grid_limits(ax, shape):
    ax.set_xlim(-0.5, shape[1] - 0.5)
    ax.set_ylim(shape[0] - 0.5, -0.5)


# --- heatmap ----------------------------------------------------------------------------


def _colormap(cmap, centered):
    base = plt.get_cmap(cmap if cmap is not None else
                        (DIVERGING_CMAP if centered else SEQUENTIAL_CMAP))
    return base.with_extremes(bad=MASKED_FACE_COLOR)


def _color_limits(values, vlim, centered, allowed=None):
    """Colour limits: those given, else from the finite values that are not masked out
    (symmetric about 0 if centered)."""
    shown = np.isfinite(values) if allowed is None else np.isfinite(values) & allowed
    finite = values[shown]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if centered:
        half = max(abs(lo), abs(hi)) or 1.0
        lo, hi = -half, half
    lo = lo if vlim[0] is None else vlim[0]
    hi = hi if vlim[1] is None else vlim[1]
    if lo == hi:  # a constant matrix still gets a valid colour scale
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def _heatmap_figsize(shape, colorbar, title):
    n_rows, n_cols = shape
    extra_w = HEATMAP_MARGIN_INCHES[0] + (COLORBAR_INCHES if colorbar else 0.0)
    extra_h = HEATMAP_MARGIN_INCHES[1] + (TITLE_INCHES if title else 0.0)
    cell = min(
        HEATMAP_CELL_INCHES,
        (FIG_MAX_SIZE[0] - extra_w) / n_cols,
        (FIG_MAX_SIZE[1] - extra_h) / n_rows,
    )
    return _clip_size(n_cols * cell + extra_w, n_rows * cell + extra_h)


def _annotation_fontsize(ax, shape, strings):
    """Largest size up to ANNOTATION_FONTSIZE at which the widest number fits its cell."""
    cell = _cell_points(ax, shape)
    widest = max((len(s) for s in strings.ravel()), default=1) or 1
    size = min(cell / (0.62 * widest + 0.6), cell / 1.6, ANNOTATION_FONTSIZE)
    return max(MIN_ANNOTATION_FONTSIZE, math.floor(size))


def _resolve_annotate(annotate, shape):
    if annotate == "auto":
        return max(shape) <= ANNOTATE_MAX_SIDE
    return bool(annotate)


def _cell_text_colors(image, values):
    return _text_colors(image.cmap(image.norm(np.ma.masked_invalid(values))))


def _make_texts(ax, image, values, fmt, allowed):
    strings = np.vectorize(lambda v: _format(v, fmt), otypes=[object])(values)
    size = _annotation_fontsize(ax, values.shape, strings)
    texts = np.empty(values.shape, dtype=object)
    for (i, j), s in np.ndenumerate(strings):
        texts[i, j] = ax.text(j, i, s, ha="center", va="center", fontsize=size, zorder=3,
                              in_layout=False)  # inside its cell: the layout can skip it
    _update_texts(texts, image, values, fmt, allowed)
    return texts


def _update_texts(texts, image, values, fmt, allowed):
    colors = _cell_text_colors(image, values)
    masked = np.zeros(values.shape, dtype=bool) if allowed is None else ~allowed
    colors[masked] = _text_colors(to_rgba(MASKED_FACE_COLOR))
    for (i, j), v in np.ndenumerate(values):
        text = texts[i, j]
        text.set_text(_format(v, fmt))
        text.set_color(colors[i, j])
        has_box = text.get_bbox_patch() is not None
        if masked[i, j] and not has_box:
            text.set_bbox(MASKED_TEXT_BOX)
        elif has_box and not masked[i, j]:
            text.set_bbox(None)


def cell_squares_path(cells):
    """One compound path made of a unit square around every True cell of a grid.

    Cell ``(i, j)`` is the square from ``(j - 0.5, i - 0.5)`` to ``(j + 0.5, i + 0.5)`` in
    data coordinates, as ``imshow`` and :func:`heatmap` place it. One ``PathPatch`` of
    this path shades any set of cells (masked-out cells, pending tiles) in one draw.

    Parameters
    ----------
    cells : (n_rows, n_cols) bool array_like
        True where a square is wanted.

    Returns
    -------
    Path
        Empty (a single ``MOVETO``) when no cell is True.

    Examples
    --------
    >>> import numpy as np
    >>> path = cell_squares_path(np.array([[True, False], [False, False]]))
    >>> [float(v) for v in path.get_extents().bounds]
    [-0.5, -0.5, 1.0, 1.0]
    """
    cells = _as_bool_2d(cells, "cells")
    verts, codes = [], []
    for i, j in np.argwhere(cells):
        x, y = j - 0.5, i - 0.5
        verts += [(x, y), (x + 1, y), (x + 1, y + 1), (x, y + 1), (x, y)]
        codes += [Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY]
    if not verts:  # nothing masked: an empty path (the patch is hidden too)
        return Path(np.zeros((1, 2)), [Path.MOVETO])
    return Path(verts, codes)


def _add_mask_patch(ax, allowed):
    patch = PathPatch(
        cell_squares_path(~allowed), facecolor=MASKED_FACE_COLOR, edgecolor=MASK_HATCH_COLOR,
        hatch=MASK_HATCH, linewidth=0, zorder=1.5,  # the hatch takes the edge colour
    )
    patch.set_visible(bool((~allowed).any()))
    patch.set_in_layout(False)
    ax.add_patch(patch)
    return patch


def _highlight_rect(i, j):
    halo = patheffects.withStroke(
        linewidth=HIGHLIGHT_LINEWIDTH + 2 * HIGHLIGHT_HALO_WIDTH, foreground=HIGHLIGHT_HALO_COLOR
    )
    rect = Rectangle(
        (j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor=HIGHLIGHT_EDGE_COLOR,
        linewidth=HIGHLIGHT_LINEWIDTH, zorder=4,
    )
    rect.set_path_effects([halo, patheffects.Normal()])
    rect.set_in_layout(False)
    return rect


def heatmap(
    matrix, row_labels=None, col_labels=None, *, ax=None, cmap=None, vmin=None, vmax=None,
    centered=False, annotate="auto", fmt="{:.2f}", colorbar=True, highlight=None, mask=None,
    title=None, xlabel=KEY_AXIS_LABEL, ylabel=QUERY_AXIS_LABEL, max_label_len=TOKEN_MAX_LEN,
):
    """Draw a matrix as coloured cells with its numbers written in them.

    Rows are queries and columns are keys (the axis labels say so by default), so row
    ``i`` reads as "how much token ``i`` attends to each token".

    Parameters
    ----------
    matrix : (n_rows, n_cols) array_like
        NaN and +-inf are allowed: drawn grey, written ``"−∞"``/``"∞"``/blank.
    row_labels : sequence of n_rows str, optional
        Query tokens; cut to ``max_label_len`` characters. Integer ticks when None.
    col_labels : sequence of n_cols str, optional
        Key tokens; rotated when longer than two characters.
    ax : Axes, optional
        Where to draw; a new figure sized to the matrix when None.
    cmap : str or Colormap, optional
        ``SEQUENTIAL_CMAP`` (viridis) by default, ``DIVERGING_CMAP`` (PuOr) if centered.
    vmin, vmax : float, optional
        Colour limits; from the finite, not masked-out values when None.
    centered : bool, optional
        For signed data: limits symmetric about 0 and a diverging map.
    annotate : bool or "auto", optional
        Write the numbers; "auto" does so up to ``ANNOTATE_MAX_SIDE`` cells a side.
        Text is black or white, whichever contrasts more with the cell.
    fmt : str, optional
        Format of each number.
    colorbar : bool, optional
    highlight : sequence of (i, j), optional
        Cells to outline (a single ``(i, j)`` pair is accepted too).
    mask : (n_rows, n_cols) bool array_like, optional
        True where a query may attend (as in ``causal_mask``); False cells are hatched
        grey as masked out.
    title, xlabel, ylabel : str, optional
    max_label_len : int, optional

    Returns
    -------
    HeatmapArtists

    Raises
    ------
    ValueError
        If ``matrix`` is not 2-D, a label list or the mask does not fit its shape, or a
        highlighted cell is outside it.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> art = heatmap([[0.7, 0.3], [0.4, 0.6]], ["it", "was"], ["it", "was"],
    ...               highlight=[(0, 1)])
    >>> art.texts[0, 1].get_text(), art.highlights[0].get_xy()
    ('0.30', (0.5, -0.5))
    >>> plt.close(art.ax.figure)
    """
    values = _as_2d(matrix, "matrix")
    rows = _check_labels(row_labels, values.shape[0], "row_labels", "row")
    cols = _check_labels(col_labels, values.shape[1], "col_labels", "column")
    allowed = None if mask is None else _as_bool_2d(mask, "mask", values.shape)
    cells = _check_cells(highlight, values.shape, "highlight")
    rows = None if rows is None else token_labels(rows, max_label_len)
    cols = None if cols is None else token_labels(cols, max_label_len)
    if ax is None:
        ax = _new_axes(_heatmap_figsize(values.shape, colorbar, title), GRID_LAYOUT)
    lo, hi = _color_limits(values, (vmin, vmax), centered, allowed)
    image = ax.imshow(
        np.ma.masked_invalid(values), cmap=_colormap(cmap, centered), vmin=lo, vmax=hi,
        interpolation="nearest", aspect="equal",
    )
    _set_grid_ticks(ax, rows, cols, values.shape)
    ax.set_xlabel(xlabel or "", fontsize=LABEL_FONTSIZE)
    ax.set_ylabel(ylabel or "", fontsize=LABEL_FONTSIZE)
    if title:
        ax.set_title(_wrap_to_axes(ax, title, TITLE_FONTSIZE), fontsize=TITLE_FONTSIZE)
    mask_patch = None if allowed is None else _add_mask_patch(ax, allowed)
    texts = None
    if _resolve_annotate(annotate, values.shape):
        texts = _make_texts(ax, image, values, fmt, allowed)
    patches = [ax.add_patch(_highlight_rect(i, j)) for i, j in cells]
    cbar = None
    if colorbar:
        cbar = ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        cbar.ax.tick_params(labelsize=TICK_FONTSIZE)
    return HeatmapArtists(
        ax, image, texts, cbar, patches, mask_patch, fmt, annotate, (vmin, vmax), centered,
        rows, cols, allowed,
    )


def update_heatmap(
    artists, matrix, *, mask=None, highlight=None, vmin=None, vmax=None, row_labels=None,
    col_labels=None,
):
    """Change a heatmap's numbers in place (for explorers).

    With the shape unchanged no artist is created: the image data, the colour limits,
    the annotation texts (and their black/white colour), the mask and the highlight
    outlines are updated. A new shape (for example a sequence-length slider) replaces
    the annotation texts and the ticks, since the number of cells changed.

    Parameters
    ----------
    artists : HeatmapArtists
        From :func:`heatmap`.
    matrix : (n_rows, n_cols) array_like
    mask : (n_rows, n_cols) bool array_like, optional
        New mask (True = may attend); None keeps the current one (or, on a new shape,
        shows none).
    highlight : sequence of (i, j), optional
        New highlighted cells; None keeps the current ones, ``[]`` clears them. The
        outlines are moved; only a different number of cells adds or removes some.
    vmin, vmax : float, optional
        New colour limits; None keeps what :func:`heatmap` was given (data-driven
        limits follow the new data).
    row_labels, col_labels : sequence of str, optional
        New tick labels (needed when the shape changes and labels are wanted).

    Returns
    -------
    HeatmapArtists
        The same object, updated.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> art = heatmap([[0.7, 0.3], [0.4, 0.6]])
    >>> image = art.image
    >>> art = update_heatmap(art, [[0.1, 0.9], [0.5, 0.5]])
    >>> art.image is image, art.texts[0, 1].get_text()
    (True, '0.90')
    >>> plt.close(art.ax.figure)
    """
    values = _as_2d(matrix, "matrix")
    ax, image = artists.ax, artists.image
    old_shape = image.get_array().shape
    reshaped = values.shape != old_shape
    rows = _check_labels(row_labels, values.shape[0], "row_labels", "row")
    cols = _check_labels(col_labels, values.shape[1], "col_labels", "column")
    allowed = None if mask is None else _as_bool_2d(mask, "mask", values.shape)
    if allowed is None and not reshaped:
        allowed = artists.allowed
    if vmin is not None:
        artists.vlim = (vmin, artists.vlim[1])
    if vmax is not None:
        artists.vlim = (artists.vlim[0], vmax)
    image.set_data(np.ma.masked_invalid(values))
    image.set_clim(*_color_limits(values, artists.vlim, artists.centered, allowed))
    if reshaped:
        _reshape_heatmap(artists, values, rows, cols)
    elif rows is not None or cols is not None:
        _set_grid_ticks(ax, rows or artists.row_labels, cols or artists.col_labels, values.shape)
    _update_mask(artists, allowed)
    if artists.texts is not None:
        _update_texts(artists.texts, image, values, artists.fmt, allowed)
    elif reshaped and _resolve_annotate(artists.annotate, values.shape):
        artists.texts = _make_texts(ax, image, values, artists.fmt, allowed)
    if highlight is not None:
        _update_highlights(artists, _check_cells(highlight, values.shape, "highlight"))
    return artists


def _update_mask(artists, allowed):
    artists.allowed = allowed
    if allowed is None:
        if artists.mask_patch is not None:
            artists.mask_patch.set_visible(False)
        return
    if artists.mask_patch is None:  # first mask ever given: one patch, created once
        artists.mask_patch = _add_mask_patch(artists.ax, allowed)
        return
    artists.mask_patch.set_path(cell_squares_path(~allowed))
    artists.mask_patch.set_visible(bool((~allowed).any()))


def _update_highlights(artists, cells):
    patches = artists.highlights
    while len(patches) > len(cells):
        patches.pop().remove()
    for k, (i, j) in enumerate(cells):
        if k < len(patches):
            patches[k].set_xy((j - 0.5, i - 0.5))
        else:
            patches.append(artists.ax.add_patch(_highlight_rect(i, j)))


def _reshape_heatmap(artists, values, rows, cols):
    ax = artists.ax
    n_rows, n_cols = values.shape
    artists.image.set_extent((-0.5, n_cols - 0.5, n_rows - 0.5, -0.5))
    _set_grid_limits(ax, values.shape)
    artists.row_labels = None if rows is None else token_labels(rows)
    artists.col_labels = None if cols is None else token_labels(cols)
    _set_grid_ticks(ax, artists.row_labels, artists.col_labels, values.shape)
    if artists.texts is not None:
        for text in artists.texts.ravel():
            text.remove()
        artists.texts = _make_texts(ax, artists.image, values, artists.fmt, None)
    _update_highlights(artists, [
        (i, j) for i, j in ((int(round(p.get_y() + 0.5)), int(round(p.get_x() + 0.5)))
                            for p in artists.highlights)
        if i < n_rows and j < n_cols
    ])


# --- matrix blocks and the A x B = C diagram --------------------------------------------


def _shade(ax, x, y, width, height, *, outline=False):
    """A highlight rectangle in data coordinates; ``outline`` adds a strong edge."""
    return ax.add_patch(Rectangle(
        (x, y), width, height, facecolor=to_rgba(HIGHLIGHT_FILL_COLOR, HIGHLIGHT_FILL_ALPHA),
        edgecolor=HIGHLIGHT_EDGE_COLOR if outline else "none",
        linewidth=HIGHLIGHT_LINEWIDTH if outline else 0, zorder=2 if outline else 1,
    ))


def _brackets(ax, n_rows, n_cols):
    top, bottom = -0.5, n_rows - 0.5
    left, right = -0.5 - BRACKET_GAP, n_cols - 0.5 + BRACKET_GAP
    style = dict(color=TEXT_DARK, linewidth=BRACKET_LINEWIDTH, solid_capstyle="butt")
    (lb,) = ax.plot([left + BRACKET_ARM, left, left, left + BRACKET_ARM],
                    [top, top, bottom, bottom], **style)
    (rb,) = ax.plot([right - BRACKET_ARM, right, right, right - BRACKET_ARM],
                    [top, top, bottom, bottom], **style)
    return lb, rb


def _block_title(name, shape):
    size = f"({shape[0]} {TIMES} {shape[1]})"
    return f"{name}  {size}" if name else size


def _block_ylim(n_rows, total_rows):
    """Vertical limits that centre n_rows inside total_rows, with room for the title."""
    centre = (n_rows - 1) / 2
    half = total_rows / 2 + MATRIX_PAD
    return centre + half, centre - half - 1.0  # one extra row on top for the title


def matrix_block(
    matrix, *, ax=None, name=None, fmt="{:.2f}", highlight_rows=(), highlight_cols=(),
    highlight_cells=(),
):
    """Draw a small matrix as a textbook would: numbers in brackets, name and shape above.

    Parameters
    ----------
    matrix : (n_rows, n_cols) array_like
    ax : Axes, optional
        Where to draw (its frame is turned off); a new figure when None.
    name : str, optional
        Written above, before the shape: ``"Q  (4 × 2)"``.
    fmt : str, optional
        Format of each number.
    highlight_rows, highlight_cols : sequence of int, optional
        Rows and columns to shade.
    highlight_cells : sequence of (i, j), optional
        Cells to shade and outline.

    Returns
    -------
    MatrixBlockArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> art = matrix_block([[1.0, 0.5], [0.2, 1.4]], name="Q", highlight_rows=[0])
    >>> art.title.get_text(), art.texts[1, 1].get_text()
    ('Q  (2 × 2)', '1.40')
    >>> plt.close(art.ax.figure)
    """
    values = _as_2d(matrix, "matrix")
    n_rows, n_cols = values.shape
    rows = [_check_index(i, n_rows, "highlight_rows") for i in highlight_rows]
    cols = [_check_index(j, n_cols, "highlight_cols") for j in highlight_cols]
    cells = _check_cells(highlight_cells, values.shape, "highlight_cells")
    if ax is None:
        w, h = MATRIX_CELL_INCHES
        ax = _new_axes(_clip_size((n_cols + 2 * MATRIX_PAD) * w + 0.4,
                                  (n_rows + 1 + 2 * MATRIX_PAD) * h + 0.4))
    ax.set_axis_off()
    row_patches = [_shade(ax, -0.5, i - 0.5, n_cols, 1) for i in rows]
    col_patches = [_shade(ax, j - 0.5, -0.5, 1, n_rows) for j in cols]
    cell_patches = [_shade(ax, j - 0.5, i - 0.5, 1, 1, outline=True) for i, j in cells]
    texts = np.empty(values.shape, dtype=object)
    for (i, j), v in np.ndenumerate(values):
        texts[i, j] = ax.text(j, i, _format(v, fmt), ha="center", va="center",
                              fontsize=MATRIX_FONTSIZE, color=TEXT_DARK, zorder=3)
    brackets = _brackets(ax, n_rows, n_cols)
    title = ax.text((n_cols - 1) / 2, -0.5 - MATRIX_PAD, _block_title(name, values.shape),
                    ha="center", va="bottom", fontsize=MATRIX_FONTSIZE, color=TEXT_DARK)
    ax.set_xlim(-0.5 - MATRIX_PAD, n_cols - 0.5 + MATRIX_PAD)
    ax.set_ylim(*_block_ylim(n_rows, n_rows))
    return MatrixBlockArtists(ax, texts, title, brackets, row_patches, col_patches,
                              cell_patches)


def _product_highlight(highlight, n, m):
    """(i, j) with j an int (one cell) or None (the whole row i of the result)."""
    if highlight is None:
        return None
    if len(highlight) != 2:
        raise ValueError(f"highlight must be (i, j), (i, None) or None, got {highlight!r}")
    i = _check_index(highlight[0], n, "highlight")
    j = None if highlight[1] is None else _check_index(highlight[1], m, "highlight")
    return i, j


def _product_caption(a, b, name, i, j, fmt, index_base=0):
    columns = range(b.shape[1]) if j is None else [j]

    def label(col):
        if index_base == 0:
            return f"{name}[{i}, {col}]"
        return f"{name} (row {i + index_base}, column {col + index_base})"
    return "\n".join(
        f"{label(col)} = {sum_of_products_text(a[i], b[:, col], fmt)}" for col in columns
    )


def matrix_product_diagram(
    a, b, c, *, names=("Q", "Kᵀ", "scores"), highlight=(0, 0), fmt="{:.2f}", fig=None,
    index_base=0,
):
    """Draw ``A × B = C`` as three matrix blocks, with one cell's arithmetic spelled out.

    Row ``i`` of A, column ``j`` of B and cell ``(i, j)`` of C are shaded, and a caption
    underneath writes that cell as a sum of products with the actual numbers, e.g.
    ``scores[0, 0] = 1.00×1.10 + 0.50×0.40 = 1.30``. With ``highlight=(i, None)`` the
    whole row ``i`` of C is shaded and the caption has one line per column of C (the
    weighted-sum figure: output row = weights row × V).

    The caption is computed from ``a`` and ``b`` at full precision, its factors written
    with enough decimals to add up by hand (see :func:`sum_of_products_text`); the cells
    of C show ``c`` as given.
    If ``c`` is not ``a @ b`` (a printed matrix with a mistake), the two disagree, which
    is what a notebook pointing out that mistake wants to show.

    Parameters
    ----------
    a : (n, k) array_like
    b : (k, m) array_like
    c : (n, m) array_like
    names : tuple of three str, optional
    highlight : (i, j) or (i, None) or None, optional
        The cell (or row) of C to explain; None shades nothing and has no caption.
    fmt : str, optional
        Format of every number, in the blocks and the caption.
    fig : Figure, optional
        An empty figure to draw in; a new one sized to the matrices when None.
    index_base : {0, 1}, optional
        How the caption names the cell: ``scores[0, 0]`` (numpy's indices, the default)
        or, with 1, ``scores (row 1, column 1)`` as the course's prose counts.

    Returns
    -------
    ProductDiagramArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> q = [[1.0, 0.5], [0.2, 1.4]]
    >>> kt = [[1.1, 0.3], [0.4, 1.2]]
    >>> art = matrix_product_diagram(q, kt, [[1.3, 0.9], [0.78, 1.74]])
    >>> art.caption.get_text()
    'scores[0, 0] = 1.00×1.10 + 0.50×0.40 = 1.30'
    >>> plt.close(art.fig)
    """
    a = _as_2d(a, "a")
    b = _as_2d(b, "b")
    c = _as_2d(c, "c")
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"a's columns must match b's rows, got a {a.shape} and b {b.shape}"
        )
    if c.shape != (a.shape[0], b.shape[1]):
        raise ValueError(
            f"c must have shape {(a.shape[0], b.shape[1])} (rows of a, columns of b), "
            f"got {c.shape}"
        )
    if len(names) != 3:
        raise ValueError(f"names must hold three names (A, B, C), got {len(names)}")
    cell = _product_highlight(highlight, a.shape[0], b.shape[1])
    if index_base not in (0, 1):
        raise ValueError(f"index_base must be 0 or 1, got {index_base!r}")
    caption_text = (None if cell is None
                    else _product_caption(a, b, names[2], *cell, fmt, index_base))
    n_lines = 0 if caption_text is None else caption_text.count("\n") + 1
    widths = [m.shape[1] + 2 * MATRIX_PAD for m in (a, b, c)]
    cell_w, cell_h = MATRIX_CELL_INCHES
    total_rows = max(m.shape[0] for m in (a, b, c))
    block_h = (total_rows + 1 + 2 * MATRIX_PAD) * cell_h
    caption_h = n_lines * CAPTION_LINE_INCHES + (0.2 if n_lines else 0.0)
    if fig is None:
        width = sum(widths) * cell_w + 2 * OPERATOR_INCHES + 0.4
        fig = plt.figure(figsize=_clip_size(width, block_h + caption_h + 0.3))
    fig_w, fig_h = fig.get_size_inches()
    op_ratio = OPERATOR_INCHES / cell_w
    grid = fig.add_gridspec(
        1, 5, width_ratios=[widths[0], op_ratio, widths[1], op_ratio, widths[2]],
        left=0.02, right=0.98, top=1 - 0.15 / fig_h,
        bottom=min(0.6, (caption_h + 0.1) / fig_h), wspace=0.0,
    )
    axes = [fig.add_subplot(grid[0, k]) for k in range(5)]
    i, j = (None, None) if cell is None else cell
    row_a = () if i is None else (i,)
    blocks = (
        matrix_block(a, ax=axes[0], name=names[0], fmt=fmt, highlight_rows=row_a),
        matrix_block(b, ax=axes[2], name=names[1], fmt=fmt,
                     highlight_cols=() if j is None else (j,)),
        matrix_block(c, ax=axes[4], name=names[2], fmt=fmt,
                     highlight_cells=() if j is None or i is None else ((i, j),),
                     highlight_rows=row_a if j is None else ()),
    )
    for block, m in zip(blocks, (a, b, c), strict=True):
        block.ax.set_ylim(*_block_ylim(m.shape[0], total_rows))
    operators = []
    for ax, symbol in ((axes[1], TIMES), (axes[3], "=")):
        ax.set_axis_off()
        ax.set_xlim(-0.5, 0.5)
        ax.set_ylim(*_block_ylim(total_rows, total_rows))
        operators.append(ax.text(0, (total_rows - 1) / 2, symbol, ha="center", va="center",
                                 fontsize=OPERATOR_FONTSIZE, color=TEXT_DARK))
    caption = None
    if caption_text is not None:
        caption = fig.text(0.5, 0.1 / fig_h, caption_text, ha="center", va="bottom",
                           fontsize=CAPTION_FONTSIZE, color=TEXT_DARK, linespacing=1.5)
    return ProductDiagramArtists(fig, blocks, tuple(operators), caption)


# --- one row of weights as bars ---------------------------------------------------------


def _place_bar_text(ax, text, x, height, fmt):
    """Value above the bar, or inside it (white on dark) when the bar nearly fills the axes."""
    lo, hi = ax.get_ylim()
    inside = height > lo + BAR_TEXT_INSIDE_ABOVE * (hi - lo)
    offset = BAR_TEXT_OFFSET * (hi - lo) * (-1 if inside or height < 0 else 1)
    text.set_position((x, height + offset))
    text.set_text(_format(height, fmt))
    text.set_va("top" if inside or height < 0 else "bottom")
    color = _text_colors(to_rgba(BAR_COLOR)) if inside else TEXT_DARK
    text.set_color(str(color))


def _title_and_readout(ax, title, readout):
    """Title on the left above the axes, a changing readout on the right (a Text).

    A title wider than the axes is wrapped; when its last line and the readout would not
    fit side by side, the title moves up a line.
    """
    text = ax.text(1.0, 1.0 + READOUT_GAP, readout, transform=ax.transAxes, ha="right",
                   va="bottom", fontsize=LABEL_FONTSIZE)
    if title:
        width = _axes_width_points(ax)
        lines = _wrap_to_axes(ax, title, TITLE_FONTSIZE).split("\n")
        needed = CHAR_WIDTH_EM * (TITLE_FONTSIZE * len(lines[-1])
                                  + LABEL_FONTSIZE * (len(readout) + READOUT_SPARE_CHARS))
        pad = 6.0 if needed < width else 6.0 + 1.6 * LABEL_FONTSIZE
        ax.set_title("\n".join(lines), loc="left", fontsize=TITLE_FONTSIZE, pad=pad)
    return text


def _sum_label(weights, fmt):
    return f"row sum = {fmt.format(float(np.sum(weights)))}"


def weight_bars(
    weights, labels=None, *, ax=None, highlight=None, title=None, ylim=(0, 1), fmt="{:.2f}",
    xlabel=KEY_AXIS_LABEL, ylabel="weight", max_label_len=TOKEN_MAX_LEN,
):
    """Draw one row of attention weights as bars, each with its value, and the row's sum.

    Parameters
    ----------
    weights : (n,) array_like
        One row of the weight matrix (a probability distribution over the keys).
    labels : sequence of n str, optional
        Key tokens under the bars.
    ax : Axes, optional
    highlight : int, optional
        Index of a bar to colour differently (e.g. the query's own token).
    title : str, optional
        Left-aligned; the row sum is written on the right, above the axes.
    ylim : (float, float) or None, optional
        Fixed y-range (0 to 1 for probabilities); None follows the data.
    fmt : str, optional
    xlabel, ylabel : str, optional
    max_label_len : int, optional

    Returns
    -------
    WeightBarsArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> art = weight_bars([0.31, 0.26, 0.25, 0.18], ["The", "animal", "crossed", "the"])
    >>> [float(b.get_height()) for b in art.bars], art.sum_text.get_text()
    ([0.31, 0.26, 0.25, 0.18], 'row sum = 1.00')
    >>> plt.close(art.ax.figure)
    """
    w = _as_1d(weights, "weights")
    names = _check_labels(labels, w.size, "labels", "weight")
    names = None if names is None else token_labels(names, max_label_len)
    hi = None if highlight is None else _check_index(highlight, w.size, "highlight")
    if ax is None:
        ax = _new_axes(_clip_size(w.size * BAR_SLOT_INCHES + 1.4, 3.4))
    x = np.arange(w.size)
    bars = ax.bar(x, w.tolist(), width=BAR_WIDTH, color=BAR_COLOR, edgecolor=TEXT_DARK,
                  linewidth=BAR_EDGE_WIDTH)
    if hi is not None:
        bars[hi].set_facecolor(BAR_HIGHLIGHT_COLOR)
    if ylim is not None:
        ax.set_ylim(*ylim)
    else:
        ax.margins(y=0.15)
    if names is not None:
        _set_xticklabels(ax, names)
    else:
        ax.set_xticks(x)
    ax.tick_params(labelsize=TICK_FONTSIZE)
    ax.set_xlabel(xlabel or "", fontsize=LABEL_FONTSIZE)
    ax.set_ylabel(ylabel or "", fontsize=LABEL_FONTSIZE)
    ax.spines[["top", "right"]].set_visible(False)
    size = TICK_FONTSIZE if w.size <= 12 else MIN_ANNOTATION_FONTSIZE + 1
    texts = []
    for xi, h in zip(x, w, strict=True):
        text = ax.text(xi, h, "", ha="center", fontsize=size)
        _place_bar_text(ax, text, xi, float(h), fmt)
        texts.append(text)
    sum_text = _title_and_readout(ax, title, _sum_label(w, fmt))
    return WeightBarsArtists(ax, bars, texts, sum_text, fmt)


def update_weight_bars(artists, weights):
    """Set new bar heights, values and row sum in place (same number of bars).

    Parameters
    ----------
    artists : WeightBarsArtists
    weights : (n,) array_like

    Returns
    -------
    WeightBarsArtists
        The same object, updated.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> art = weight_bars([0.5, 0.5])
    >>> art = update_weight_bars(art, [0.9, 0.1])
    >>> art.value_texts[0].get_text()
    '0.90'
    >>> plt.close(art.ax.figure)
    """
    w = _as_1d(weights, "weights")
    if w.size != len(artists.value_texts):
        raise ValueError(
            f"weights must have {len(artists.value_texts)} entries (one per bar), got {w.size}"
        )
    for bar, text, h in zip(artists.bars, artists.value_texts, w.tolist(), strict=True):
        bar.set_height(h)
        _place_bar_text(artists.ax, text, bar.get_x() + bar.get_width() / 2, h, artists.fmt)
    artists.sum_text.set_text(_sum_label(w, artists.fmt))
    return artists


# --- masks ------------------------------------------------------------------------------


def _mask_cmap():
    return ListedColormap([MASKED_FACE_COLOR, ALLOWED_COLOR])


def _mask_text_colors():
    return {flag: str(_text_colors(to_rgba(c)))
            for flag, c in ((True, ALLOWED_COLOR), (False, MASKED_FACE_COLOR))}


def mask_grid(
    mask, row_labels=None, col_labels=None, *, ax=None, title=None, xlabel=KEY_AXIS_LABEL,
    ylabel=QUERY_AXIS_LABEL, max_label_len=TOKEN_MAX_LEN,
):
    """Draw a boolean attention mask as a two-colour grid with ✓ and ✗ in the cells.

    Parameters
    ----------
    mask : (n_rows, n_cols) bool array_like
        True where the query (row) may attend to the key (column), as ``causal_mask``.
    row_labels, col_labels : sequence of str, optional
    ax : Axes, optional
    title, xlabel, ylabel : str, optional
    max_label_len : int, optional

    Returns
    -------
    MaskGridArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> art = mask_grid(np.tril(np.ones((3, 3), dtype=bool)))
    >>> art.texts[0, 0].get_text(), art.texts[0, 2].get_text()
    ('✓', '✗')
    >>> plt.close(art.ax.figure)
    """
    allowed = _as_bool_2d(mask, "mask")
    rows = _check_labels(row_labels, allowed.shape[0], "row_labels", "row")
    cols = _check_labels(col_labels, allowed.shape[1], "col_labels", "column")
    rows = None if rows is None else token_labels(rows, max_label_len)
    cols = None if cols is None else token_labels(cols, max_label_len)
    if ax is None:
        size = _heatmap_figsize(allowed.shape, True, title)  # legend takes the bar's room
        ax = _new_axes((size[0] + 0.4, size[1]), GRID_LAYOUT)
    image = ax.imshow(allowed.astype(float), cmap=_mask_cmap(), vmin=0, vmax=1,
                      interpolation="nearest", aspect="equal")
    _set_grid_ticks(ax, rows, cols, allowed.shape)
    n_rows, n_cols = allowed.shape
    ax.set_xticks(np.arange(-0.5, n_cols), minor=True)
    ax.set_yticks(np.arange(-0.5, n_rows), minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel(xlabel or "", fontsize=LABEL_FONTSIZE)
    ax.set_ylabel(ylabel or "", fontsize=LABEL_FONTSIZE)
    if title:
        ax.set_title(_wrap_to_axes(ax, title, TITLE_FONTSIZE), fontsize=TITLE_FONTSIZE)
    colors = _mask_text_colors()
    size = np.clip(math.floor(MASK_SYMBOL_PER_CELL * _cell_points(ax, allowed.shape)),
                   MIN_ANNOTATION_FONTSIZE, MASK_SYMBOL_FONTSIZE)
    texts = np.empty(allowed.shape, dtype=object)
    for (i, j), flag in np.ndenumerate(allowed):
        texts[i, j] = ax.text(j, i, MASK_SYMBOLS[bool(flag)], ha="center", va="center",
                              color=colors[bool(flag)], fontsize=int(size), in_layout=False)
    handles = [Patch(facecolor=c, edgecolor="none", label=f"{MASK_SYMBOLS[f]} {MASK_LEGEND[f]}")
               for f, c in ((True, ALLOWED_COLOR), (False, MASKED_FACE_COLOR))]
    legend = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       borderaxespad=0.0, frameon=False, fontsize=LABEL_FONTSIZE)
    return MaskGridArtists(ax, image, texts, legend)


def update_mask_grid(artists, mask):
    """Show a new mask of the same shape in place.

    Parameters
    ----------
    artists : MaskGridArtists
    mask : (n_rows, n_cols) bool array_like

    Returns
    -------
    MaskGridArtists
        The same object, updated.
    """
    allowed = _as_bool_2d(mask, "mask", artists.texts.shape)
    artists.image.set_data(allowed.astype(float))
    colors = _mask_text_colors()
    for (i, j), flag in np.ndenumerate(allowed):
        artists.texts[i, j].set_text(MASK_SYMBOLS[bool(flag)])
        artists.texts[i, j].set_color(colors[bool(flag)])
    return artists


# --- a curve with the current point marked ----------------------------------------------


def _interp(x, y, current_x, logx):
    order = np.argsort(x)
    xs, ys = x[order], y[order]
    if logx:
        return float(np.interp(np.log(current_x), np.log(xs), ys))
    return float(np.interp(current_x, xs, ys))


def _marker_label(names, fmt, cx, cy):
    xname, yname = names
    return f"{xname} = {fmt.format(cx)},  {yname} = {fmt.format(cy)}"


def line_with_marker(
    x, y, current_x, *, current_y=None, ax=None, logx=False, logy=False, label=None,
    xlabel=None, ylabel=None, title=None, fmt="{:.3g}",
):
    """Draw a curve y(x) and mark the current point on it (e.g. "std of scores vs d_k").

    Parameters
    ----------
    x, y : (n,) array_like
    current_x : float
        Where the marker and the dashed guide are.
    current_y : float, optional
        The marker's height; interpolated on the curve (in log x if ``logx``) when None.
    ax : Axes, optional
    logx, logy : bool, optional
        Logarithmic axes.
    label : str, optional
        Legend entry of the curve.
    xlabel, ylabel : str, optional
        Axis labels, also used to name the values in the corner text.
    title : str, optional
    fmt : str, optional
        Format of the values in the corner text.

    Returns
    -------
    LineMarkerArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> d_k = [1, 4, 16, 64]
    >>> art = line_with_marker(d_k, [1, 2, 4, 8], 16, logx=True, xlabel="d_k", ylabel="std")
    >>> art.text.get_text()
    'd_k = 16,  std = 4'
    >>> plt.close(art.ax.figure)
    """
    xs = _as_1d(x, "x")
    ys = _as_1d(y, "y")
    if xs.shape != ys.shape:
        raise ValueError(f"x and y must have the same length, got {xs.size} and {ys.size}")
    if logx and (xs <= 0).any():
        raise ValueError("x must be positive when logx=True")
    current_x = float(current_x)
    cy = _interp(xs, ys, current_x, logx) if current_y is None else float(current_y)
    if ax is None:
        ax = _new_axes((6.5, 4.0))
    (line,) = ax.plot(xs, ys, color=LINE_COLOR, linewidth=LINE_WIDTH, label=label)
    guide = ax.axvline(current_x, color=MARKER_COLOR, linestyle="--", linewidth=1, alpha=0.8)
    (marker,) = ax.plot([current_x], [cy], "o", color=MARKER_COLOR, markersize=MARKER_SIZE,
                        markeredgecolor="white", zorder=3)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel or "", fontsize=LABEL_FONTSIZE)
    ax.set_ylabel(ylabel or "", fontsize=LABEL_FONTSIZE)
    ax.tick_params(labelsize=TICK_FONTSIZE)
    ax.spines[["top", "right"]].set_visible(False)
    if label:
        ax.legend(loc="best", frameon=False, fontsize=LABEL_FONTSIZE)
    names = (xlabel or "x", ylabel or "y")
    text = _title_and_readout(ax, title, _marker_label(names, fmt, current_x, cy))
    return LineMarkerArtists(ax, line, marker, guide, text, fmt, names, logx)


def update_marker(artists, current_x, current_y=None):
    """Move the marker, the guide and the corner text to a new current point in place.

    Parameters
    ----------
    artists : LineMarkerArtists
    current_x : float
    current_y : float, optional
        Interpolated on the drawn curve when None.

    Returns
    -------
    LineMarkerArtists
        The same object, updated.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> art = line_with_marker([1, 2, 3], [1, 4, 9], 1)
    >>> art = update_marker(art, 3)
    >>> float(art.marker.get_ydata()[0])
    9.0
    >>> plt.close(art.ax.figure)
    """
    current_x = float(current_x)
    if current_y is None:
        current_y = _interp(np.asarray(artists.line.get_xdata(), dtype=float),
                            np.asarray(artists.line.get_ydata(), dtype=float),
                            current_x, artists.logx)
    current_y = float(current_y)
    artists.marker.set_data([current_x], [current_y])
    artists.guide.set_xdata([current_x, current_x])
    artists.text.set_text(_marker_label(artists.names, artists.fmt, current_x, current_y))
    return artists


# --- one small heatmap per head ---------------------------------------------------------


def _check_heads(weights):
    w = _as_array(weights, "weights")
    if w.ndim != 3:
        raise ValueError(f"weights must be 3-D (heads, n_q, n_k), got shape {w.shape}")
    if w.size == 0:
        raise ValueError(f"weights must not be empty, got shape {w.shape}")
    return w


def head_grid(weights, tokens=None, *, fig=None, ncols=None, titles=None, annotate=False,
              fmt="{:.2f}"):
    """Draw each head's attention weights as a small heatmap, on one shared 0-1 scale.

    Token labels appear only on the outer panels (bottom row, left column) and one
    colour bar serves all heads, so the grid stays uncluttered.

    Parameters
    ----------
    weights : (h, n_q, n_k) array_like
        Attention weights per head (rows sum to 1).
    tokens : sequence of str, optional
        Token labels for both axes (self-attention: n_q == n_k == len(tokens)).
    fig : Figure, optional
        An empty figure to draw in; a new one when None.
    ncols : int, optional
        Panels per row; ``min(h, HEAD_GRID_MAX_COLS)`` when None.
    titles : sequence of h str, optional
        ``"head 1"``, ``"head 2"``, ... when None.
    annotate : bool or "auto", optional
        Write the numbers in the cells (off by default: the panels are small).
    fmt : str, optional

    Returns
    -------
    HeadGridArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> art = head_grid(np.full((2, 3, 3), 1 / 3), ["a", "b", "c"])
    >>> len(art.heatmaps), art.heatmaps[1].ax.get_title()
    (2, 'head 2')
    >>> plt.close(art.fig)
    """
    w = _check_heads(weights)
    h, n_q, n_k = w.shape
    rows = _check_labels(tokens, n_q, "tokens", "query row")
    cols = _check_labels(tokens, n_k, "tokens", "key column")
    titles = [HEAD_TITLE.format(k + 1) for k in range(h)] if titles is None else list(titles)
    if len(titles) != h:
        raise ValueError(f"titles must have {h} entries (one per head), got {len(titles)}")
    if ncols is None:
        ncols = min(h, HEAD_GRID_MAX_COLS)
    elif isinstance(ncols, bool) or not isinstance(ncols, Integral) or not 1 <= ncols <= h:
        raise ValueError(f"ncols must be an integer from 1 to the head count {h}, got {ncols!r}")
    nrows = math.ceil(h / ncols)
    if fig is None:
        margin_w, margin_h = HEAD_GRID_MARGIN_INCHES
        panel = np.clip(
            min((FIG_MAX_SIZE[0] - margin_w - COLORBAR_INCHES) / ncols,
                (FIG_MAX_SIZE[1] - margin_h) / nrows - HEAD_TITLE_INCHES),
            *HEAD_PANEL_INCHES,
        )
        panel = min(panel, max(HEAD_PANEL_INCHES[0], 0.3 * max(n_q, n_k)))
        fig = plt.figure(figsize=_clip_size(ncols * panel + margin_w + COLORBAR_INCHES,
                                            nrows * (panel + HEAD_TITLE_INCHES) + margin_h),
                         layout=GRID_LAYOUT)
    grid = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
    for ax in grid.ravel()[h:]:
        ax.remove()
    axes = list(grid.ravel()[:h])
    heatmaps = []
    for k, ax in enumerate(axes):
        row, col = divmod(k, ncols)
        bottom = k + ncols >= h  # no panel below this one
        left = col == 0
        heatmaps.append(heatmap(
            w[k], rows, cols, ax=ax, vmin=0.0, vmax=1.0, annotate=annotate, fmt=fmt,
            colorbar=False, title=titles[k], xlabel=KEY_AXIS_LABEL if bottom else None,
            ylabel=QUERY_AXIS_LABEL if left else None,
        ))
        ax.title.set_fontsize(LABEL_FONTSIZE)
        ax.tick_params(labelbottom=bottom, labelleft=left)
    cbar = fig.colorbar(heatmaps[0].image, ax=axes, shrink=0.9)
    cbar.set_label("weight", fontsize=LABEL_FONTSIZE)
    cbar.ax.tick_params(labelsize=TICK_FONTSIZE)
    return HeadGridArtists(fig, axes, heatmaps, cbar)


def update_head_grid(artists, weights):
    """Show new weights with the same number of heads and tokens, in place.

    Parameters
    ----------
    artists : HeadGridArtists
    weights : (h, n_q, n_k) array_like
        Same shape as the weights first drawn.

    Returns
    -------
    HeadGridArtists
        The same object, updated.
    """
    w = _check_heads(weights)
    old = (len(artists.heatmaps), *artists.heatmaps[0].image.get_array().shape)
    if w.shape != old:
        raise ValueError(
            f"weights must keep the drawn shape {old} (heads, n_q, n_k), got {w.shape}; "
            "draw a new head_grid for a different head count or length"
        )
    for hm, wk in zip(artists.heatmaps, w, strict=True):
        update_heatmap(hm, wk)
    return artists


# --- all heads in one image: a mosaic on one axes ---------------------------------------

HEAD_MOSAIC_GAP = 1  # empty cells between two maps side by side
HEAD_MOSAIC_TITLE_POINTS = 9.0  # the band above each row of maps holds "head k"
HEAD_MOSAIC_MAX_TITLE_ROWS = 4  # that band is a whole number of cells, at most this many
HEAD_MOSAIC_LABEL_PER_CELL = 0.8  # token labels: at most this share of a cell (points)
HEAD_MOSAIC_LABEL_PAD = 3.0  # points between a map and its token labels
HEAD_MOSAIC_CAPTION = "each map: rows = queries, columns = keys"


@dataclass(frozen=True)
class HeadMosaicLayout:
    """Where each head's map sits in the mosaic (array rows and columns).

    Attributes
    ----------
    heads, n : int
        Number of maps and their side (tokens).
    nrows, ncols : int
        Maps per column and per row of the grid, filled row by row.
    title_rows : int
        Empty rows above each row of maps, where the titles go.
    shape : (int, int)
        Shape of the whole mosaic array.
    origins : tuple of (int, int)
        Top-left array index of each head's map.
    cell_points : float
        Side of one cell in points, in the box the layout was made for.
    """

    heads: int
    n: int
    nrows: int
    ncols: int
    title_rows: int
    shape: tuple
    origins: tuple
    cell_points: float


def head_mosaic_layout(heads, n, box_points):
    """Arrange ``heads`` maps of ``n`` x ``n`` cells in a box, with the largest cells.

    Every grid of 1 to ``heads`` columns is tried; the band above each row of maps is the
    fewest whole cells that hold a title of ``HEAD_MOSAIC_TITLE_POINTS``.

    Parameters
    ----------
    heads, n : int
    box_points : (float, float)
        Width and height available for the mosaic, in points.

    Returns
    -------
    HeadMosaicLayout

    Examples
    --------
    >>> layout = head_mosaic_layout(4, 10, (400, 400))
    >>> layout.nrows, layout.ncols, layout.shape
    (2, 2, (22, 21))
    """
    for name, value in (("heads", heads), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    box_w, box_h = (float(v) for v in box_points)
    best = None
    for ncols in range(1, heads + 1):
        nrows = math.ceil(heads / ncols)
        if math.ceil(heads / nrows) != ncols:  # a whole empty column: never the best
            continue
        width = ncols * n + (ncols - 1) * HEAD_MOSAIC_GAP
        for title_rows in range(1, HEAD_MOSAIC_MAX_TITLE_ROWS + 1):
            cell = min(box_w / width, box_h / (nrows * (n + title_rows)))
            if title_rows * cell >= HEAD_MOSAIC_TITLE_POINTS:
                break
        if best is None or cell > best[0] + 1e-9:
            best = (cell, nrows, ncols, title_rows)
    cell, nrows, ncols, title_rows = best
    origins = tuple((r * (n + title_rows) + title_rows, c * (n + HEAD_MOSAIC_GAP))
                    for r, c in (divmod(k, ncols) for k in range(heads)))
    shape = (nrows * (n + title_rows), ncols * n + (ncols - 1) * HEAD_MOSAIC_GAP)
    return HeadMosaicLayout(heads, n, nrows, ncols, title_rows, shape, origins, cell)


def _tile_heads(w, layout):
    mosaic = np.full(layout.shape, np.nan)  # the gaps are NaN: drawn transparent
    n = layout.n
    for wk, (r, c) in zip(w, layout.origins, strict=True):
        mosaic[r:r + n, c:c + n] = wk
    return mosaic


@dataclass(repr=False)
class HeadMosaicArtists:
    """What :func:`head_mosaic` drew: every head's map in ONE image on one axes.

    A new head count re-tiles the same image and re-uses a fixed pool of Text artists
    (shown, hidden, moved), so no axes or figure is ever built again.

    Attributes
    ----------
    ax : Axes
    image : AxesImage
        The mosaic: every map, NaN in the gaps.
    titles : list of Text
        ``"head 1"``, ``"head 2"``, ...; the pool, only the first ``heads`` shown.
    row_labels, col_labels : list of Text
        Token labels left of the first column of maps and under the last map of each
        column; a pool too.
    colorbar : Colorbar
    caption : Text
    layout : HeadMosaicLayout
        The current arrangement.
    """

    ax: object
    image: object
    titles: list
    row_labels: list
    col_labels: list
    colorbar: object
    caption: object
    layout: HeadMosaicLayout
    tokens: list | None
    box_points: tuple

    def __repr__(self):
        return f"HeadMosaicArtists(heads={self.layout.heads}, n={self.layout.n})"


def _pool(pool, count, ax, **style):
    while len(pool) < count:
        pool.append(ax.text(0, 0, "", visible=False, **style))
    for k, text in enumerate(pool):
        text.set_visible(k < count)
    return pool[:count]


def _place_mosaic_texts(art):
    lay, ax = art.layout, art.ax
    n = lay.n
    names = [str(k) for k in range(n)] if art.tokens is None else art.tokens
    label_size = int(np.clip(math.floor(HEAD_MOSAIC_LABEL_PER_CELL * lay.cell_points),
                             MIN_TICK_FONTSIZE, TICK_FONTSIZE))
    title_size = int(np.clip(math.floor(lay.title_rows * lay.cell_points * 0.8),
                             MIN_TICK_FONTSIZE + 1, LABEL_FONTSIZE))
    for k, (text, (r, c)) in enumerate(zip(
            _pool(art.titles, lay.heads, ax, ha="center", va="bottom"), lay.origins,
            strict=True)):
        text.set_text(HEAD_TITLE.format(k + 1))
        text.set_position((c + (n - 1) / 2, r - 0.5 - 0.1))
        text.set_fontsize(title_size)
    pad = HEAD_MOSAIC_LABEL_PAD / lay.cell_points  # in cells
    rows = [(r + i, names[i]) for r, c in lay.origins if c == 0 for i in range(n)]
    for text, (y, name) in zip(_pool(art.row_labels, len(rows), ax, ha="right", va="center"),
                               rows, strict=True):
        text.set_text(name)
        text.set_position((-0.5 - pad, y))
        text.set_fontsize(label_size)
    bottoms = {}  # column of maps -> the array row under its last map
    for r, c in lay.origins:
        bottoms[c] = max(bottoms.get(c, 0), r + n)
    cols = [(c + j, bottom, names[j]) for c, bottom in sorted(bottoms.items())
            for j in range(n)]
    for text, (x, y, name) in zip(
            _pool(art.col_labels, len(cols), ax, ha="center", va="top", rotation=90),
            cols, strict=True):
        text.set_text(name)
        text.set_position((x, y - 0.5 + pad))
        text.set_fontsize(label_size)


def _set_mosaic(art, w):
    h, n, _ = w.shape
    if (h, n) != (art.layout.heads, art.layout.n):
        art.layout = head_mosaic_layout(h, n, art.box_points)
        rows, cols = art.layout.shape
        art.image.set_extent((-0.5, cols - 0.5, rows - 0.5, -0.5))
        art.ax.set_xlim(-0.5, cols - 0.5)
        art.ax.set_ylim(rows - 0.5, -0.5)
        art.ax.apply_aspect()  # the axes box fits the new mosaic now, not at the next full
        #                        draw: an explorer that redraws only the image needs it
        _place_mosaic_texts(art)
    art.image.set_data(np.ma.masked_invalid(_tile_heads(w, art.layout)))


def head_mosaic(weights, tokens=None, *, ax=None, caption=HEAD_MOSAIC_CAPTION):
    """Draw every head's attention weights as one mosaic image on a single axes.

    The maps share one 0-1 colour scale and one colour bar; each has a title above it,
    token labels sit left of the first column of maps and under the last map of each
    column. Unlike :func:`head_grid`, a different head count is shown in place by
    :func:`update_head_mosaic` (one image re-tiled, a pool of texts moved), which is what
    an explorer needs to stay fast.

    Parameters
    ----------
    weights : (h, n, n) array_like
        Attention weights per head (self-attention: square maps).
    tokens : sequence of n str, optional
        Token labels; indices when None.
    ax : Axes, optional
        Where to draw (its frame is turned off; a colour bar is taken from its room). The
        maps are as large as the axes' current box allows: fix the figure layout first.
    caption : str or None, optional
        A line at the top left of the figure saying how to read a map.

    Returns
    -------
    HeadMosaicArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> art = head_mosaic(np.full((2, 3, 3), 1 / 3), ["a", "b", "c"])
    >>> [t.get_text() for t in art.titles], art.image.get_array().shape
    (['head 1', 'head 2'], (4, 7))
    >>> plt.close(art.ax.figure)
    """
    w = _check_heads(weights)
    h, n_q, n_k = w.shape
    if n_q != n_k:
        raise ValueError(f"each head's map must be square (self-attention), got {w.shape}")
    names = _check_labels(tokens, n_q, "tokens", "token")
    names = None if names is None else token_labels(names)
    if ax is None:
        fig = plt.figure(figsize=(8.0, 6.6))
        ax = fig.add_axes((0.1, 0.1, 0.8, 0.84))
    fig = ax.figure
    ax.set_axis_off()
    image = ax.imshow(np.zeros((1, 1)), cmap=plt.get_cmap(SEQUENTIAL_CMAP).with_extremes(
        bad=(0, 0, 0, 0)), vmin=0.0, vmax=1.0, interpolation="nearest", aspect="equal")
    cbar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    cbar.set_label("weight", fontsize=LABEL_FONTSIZE)
    cbar.ax.tick_params(labelsize=TICK_FONTSIZE)
    box = ax.get_position()
    box_points = (box.width * fig.get_figwidth() * 72, box.height * fig.get_figheight() * 72)
    text = fig.text(0.01, 0.99, caption or "", ha="left", va="top", fontsize=LABEL_FONTSIZE)
    art = HeadMosaicArtists(ax, image, [], [], [], cbar, text,
                            HeadMosaicLayout(0, 0, 0, 0, 0, (1, 1), (), 0.0), names, box_points)
    _set_mosaic(art, w)
    return art


def update_head_mosaic(artists, weights):
    """Show new weights, for any head count (same tokens), in place.

    Parameters
    ----------
    artists : HeadMosaicArtists
    weights : (h, n, n) array_like
        ``n`` must match the tokens given to :func:`head_mosaic` (if any).

    Returns
    -------
    HeadMosaicArtists
        The same object, updated; ``artists.layout`` changes when ``h`` does.
    """
    w = _check_heads(weights)
    if w.shape[1] != w.shape[2]:
        raise ValueError(f"each head's map must be square (self-attention), got {w.shape}")
    if artists.tokens is not None and w.shape[1] != len(artists.tokens):
        raise ValueError(
            f"weights must have {len(artists.tokens)} tokens, as labelled, got {w.shape}")
    _set_mosaic(artists, w)
    return artists


def head_mosaic_panels(artists):
    """Read the maps back out of the mosaic image: ``(h, n, n)`` float array.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> w = np.random.default_rng(0).random((3, 4, 4))
    >>> art = head_mosaic(w)
    >>> bool((head_mosaic_panels(art) == w).all())
    True
    >>> plt.close(art.ax.figure)
    """
    data = np.ma.getdata(artists.image.get_array()).astype(float)
    n = artists.layout.n
    return np.stack([data[r:r + n, c:c + n] for r, c in artists.layout.origins])


# --- a grid of the largest size, showing only its first n tokens ------------------------

BEYOND_FACE_COLOR = "white"  # cells of tokens beyond the length: blank
BEYOND_LABEL_ALPHA = 0.75  # their labels: faded by a white veil this opaque


@dataclass(repr=False)
class BeyondLengthArtists:
    """What :func:`fade_beyond_length` added.

    Attributes
    ----------
    ax : Axes
    cells : PathPatch
        White squares over every cell of a token beyond the length.
    row_veil, col_veil : Rectangle
        Half-transparent white boxes over the tick labels of those tokens.
    """

    ax: object
    cells: object
    row_veil: object
    col_veil: object
    shape: tuple
    label_boxes: dict

    @property
    def artists(self):
        """The three patches, to draw again after each update."""
        return [self.cells, self.row_veil, self.col_veil]

    def __repr__(self):
        return f"BeyondLengthArtists(shape={self.shape})"


def fade_beyond_length(ax, shape):
    """Prepare a token grid drawn at its largest size to show only its first tokens.

    An explorer whose sequence-length slider must not change the axes (new tick labels
    mean a full redraw) draws the grid once at the largest size, with every token's
    label, and calls :func:`update_fade_beyond_length` to blank the cells of the tokens
    beyond the length and fade their labels. Column labels are turned upright so each
    stays within its column.

    Parameters
    ----------
    ax : Axes
        A :func:`heatmap` or :func:`mask_grid` axes of the largest ``shape``.
    shape : (int, int)

    Returns
    -------
    BeyondLengthArtists
        Nothing is hidden until :func:`update_fade_beyond_length` is called.
    """
    ax.tick_params(axis="x", labelrotation=90)  # ticks made later inherit it
    for label in ax.get_xticklabels():
        label.set(rotation=90, ha="center", rotation_mode="default")
    cells = PathPatch(cell_squares_path(np.zeros(shape, dtype=bool)),
                      facecolor=BEYOND_FACE_COLOR, edgecolor="none", zorder=2.5,
                      visible=False)
    cells.set_in_layout(False)
    ax.add_patch(cells)
    veils = []
    for _ in range(2):
        veil = Rectangle((0, 0), 0, 0, transform=ax.transAxes, clip_on=False, zorder=5,
                         facecolor=to_rgba(BEYOND_FACE_COLOR, BEYOND_LABEL_ALPHA),
                         edgecolor="none", visible=False)
        veil.set_in_layout(False)
        ax.add_patch(veil)
        veils.append(veil)
    return BeyondLengthArtists(ax, cells, veils[0], veils[1], tuple(shape), {})


def _label_boxes(art, axis):
    """Tick label boxes in axes coordinates, measured once (the layout must be final)."""
    if axis not in art.label_boxes:
        ax = art.ax
        renderer = ax.figure.canvas.get_renderer()
        ax.get_tightbbox(renderer)  # brings the ticks and their labels up to date
        labels = ax.get_yticklabels() if axis == "y" else ax.get_xticklabels()
        to_axes = ax.transAxes.inverted()
        art.label_boxes[axis] = [
            to_axes.transform(label.get_window_extent(renderer).get_points()) for label in labels]
    return art.label_boxes[axis]


def _veil(veil, boxes):
    if not boxes:
        veil.set_visible(False)
        return
    pts = np.concatenate(boxes)
    (x0, y0), (x1, y1) = pts.min(axis=0), pts.max(axis=0)
    veil.set_bounds(x0, y0, x1 - x0, y1 - y0)
    veil.set_visible(True)


def update_fade_beyond_length(artists, n_rows, n_cols):
    """Show only the first ``n_rows`` rows and ``n_cols`` columns of the grid, in place.

    Call it after the figure's layout is final (the label boxes are measured once).

    Parameters
    ----------
    artists : BeyondLengthArtists
    n_rows, n_cols : int
        From 1 to the grid's shape.

    Returns
    -------
    BeyondLengthArtists
        The same object, updated.
    """
    rows, cols = artists.shape
    _check_index(n_rows - 1, rows, "n_rows")
    _check_index(n_cols - 1, cols, "n_cols")
    beyond = np.zeros(artists.shape, dtype=bool)
    beyond[n_rows:, :] = True
    beyond[:, n_cols:] = True
    artists.cells.set_path(cell_squares_path(beyond))
    artists.cells.set_visible(bool(beyond.any()))
    _veil(artists.row_veil, _label_boxes(artists, "y")[n_rows:])
    _veil(artists.col_veil, _label_boxes(artists, "x")[n_cols:])
    return artists
