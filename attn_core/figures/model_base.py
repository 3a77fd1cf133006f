"""What the real model's figures share: their constants and the checks of their inputs.

The model's figures (``model_head_maps``, ``model_every_head``, ``model_roles``,
``model_panels``) are pure figures in the style of the others: every function draws arrays
the caller has computed (nothing here runs the model or scores a head), takes ``ax=None``
(or ``fig=None``), returns its artists in a small dataclass, and has an ``update_*``
partner that changes those artists in place, so an explorer never rebuilds a figure on a
slider move.

Counting: ``layer`` and ``head`` are 1-based, as every label a learner reads (and as
:class:`attn_core.model.head_roles.HeadScore`); ``query`` is a 0-based piece position,
as ``run.index(piece)`` returns it, or a piece string (its first occurrence).

Labels never overlap, from 3 to 40-odd word pieces: a figure made here is sized to the
sentence, and the tick font is fitted to the room each label has
(:mod:`attn_core.figures.model_axes`); where even the smallest font does not fit, only
every second (third, ...) label is written.
"""

from __future__ import annotations

from numbers import Integral

from .._validate import as_float_array
from .base import HIGHLIGHT_EDGE_COLOR, OKABE_ITO, SEQUENTIAL_CMAP

__all__ = [
    "check_layer_head",
    "query_position",
]

# --- constants ----------------------------------------------------------------------------

CMAP = SEQUENTIAL_CMAP  # viridis: weights are unsigned, 0 to 1
WEIGHT_RANGE = (0.0, 1.0)  # every weight figure shares this fixed scale
EXPLORER_DPI = 80  # explorers.base.DPI, the explorer's resolution; explorer_figure's too
#: The explorer's device pixels per inch (explorers.base.DPI * SCALE): the explorer's figure
#: puts its axes on whole pixels, so that a label sits at the same place within a pixel in
#: every sentence's figure and its pixels are drawn once (figures.fast_draw.SpriteText).
EXPLORER_PIXELS_PER_IN = 2 * EXPLORER_DPI
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
OUTLINE_COLOR = HIGHLIGHT_EDGE_COLOR  # vermillion, with a white halo
OUTLINE_WIDTH = 2.0
OUTLINE_HALO = 1.5
MARKER_SIZE = 6  # the triangle pointing at the selected head's row (points)
MARKER_OFFSET_IN = 0.08  # its centre's distance right of the every-head image (inches)
SEPARATOR_COLOR = "white"  # between the layer blocks of the every-head image
SEPARATOR_WIDTH = 1.5
BASELINE_COLOR = OKABE_ITO["orange"]
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
