"""What every figure shares: the palette, font sizes and figure sizes, the checks of
the arrays drawn, and the small axes helpers (ticks, limits, wrapped titles).

Colours stay readable under the common colour-vision deficiencies: ``viridis`` for
sequential data (weights, scores); the diverging ``PuOr`` only for signed data centred
on zero; the Okabe-Ito palette for categories, bars, lines and highlights.
"""

from __future__ import annotations

import math
import textwrap
from numbers import Integral

import matplotlib.pyplot as plt
import numpy as np

__all__ = [
    "ALLOWED_COLOR",
    "BAR_COLOR",
    "BAR_HIGHLIGHT_COLOR",
    "DIVERGING_CMAP",
    "HIGHLIGHT_EDGE_COLOR",
    "HIGHLIGHT_LINEWIDTH",
    "KEY_AXIS_LABEL",
    "LINE_COLOR",
    "MARKER_COLOR",
    "MASKED_FACE_COLOR",
    "THEMED_IMAGE",
    "MASK_SYMBOLS",
    "NEG_INF_TEXT",
    "OKABE_ITO",
    "QUERY_AXIS_LABEL",
    "SEQUENTIAL_CMAP",
    "token_labels",
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
#: The gid of an image drawn only in paper, masked grey and plain colours (no numbers on its
#: cells): the explorers' dark frame turns it dark like the rest of the figure instead of
#: keeping it as in the light one (attn_core.explorers.notes.image_boxes).
THEMED_IMAGE = "attn-themed-image"
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


def _check_heads(weights):
    w = _as_array(weights, "weights")
    if w.ndim != 3:
        raise ValueError(f"weights must be 3-D (heads, n_q, n_k), got shape {w.shape}")
    if w.size == 0:
        raise ValueError(f"weights must not be empty, got shape {w.shape}")
    return w
