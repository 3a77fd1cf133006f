"""The axes furniture of the model's figures: labels beside the cells, their font
fitted to the room each label has so that they never overlap (every second one where
even the smallest font does not fit); the outline around the query's row; the weights'
image and its colour bar.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from matplotlib import patheffects
from matplotlib.collections import LineCollection
from matplotlib.font_manager import FontProperties
from matplotlib.patches import Rectangle
from matplotlib.textpath import text_to_path
from matplotlib.transforms import ScaledTranslation, blended_transform_factory

from .fast_draw import fast_redraws
from .model_base import (
    AXIS_LABEL_FONTSIZE,
    AXIS_TITLE_PAD_PT,
    CMAP,
    EDGE_PT,
    FONT_MAX,
    FONT_MIN,
    HINTING_PT_PER_CHAR,
    LABEL_GAP_PT,
    LINE_EM,
    OUTLINE_COLOR,
    OUTLINE_HALO,
    OUTLINE_WIDTH,
    TICK_LEN_PT,
    TICK_PAD_PT,
    TITLE_FONTSIZE,
    TITLE_PAD_PT,
    WEIGHT_RANGE,
    WIDTH_SAFETY,
)

__all__ = [
]

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
    """A plain text (no mathtext) that keeps its pixels (:class:`.fast_draw.SpriteText`):
    a new sentence writes "[CLS]", "the" and the heads' numbers again."""
    (text,) = fast_redraws(ax.text(x, y, s, transform=transform, clip_on=False,
                                   parse_math=False, **style))
    return text


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
    draw, which a redrawn-only title would not follow); it keeps the pixels of the titles it
    drew (:class:`~attn_core.figures.fast_draw.SpriteText`)."""
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
    """The weights as cells, redrawn by one gather (:class:`.fast_draw.NearestImage`)."""
    (image,) = fast_redraws(ax.imshow(values, cmap=CMAP, vmin=WEIGHT_RANGE[0],
                                      vmax=WEIGHT_RANGE[1], interpolation="nearest",
                                      aspect="auto"))
    return image


def _colorbar(fig, image, cax=None, ax=None):
    cbar = fig.colorbar(image, cax=cax, ax=ax, fraction=0.05, pad=0.03)
    cbar.set_label("weight", fontsize=AXIS_LABEL_FONTSIZE)
    cbar.ax.tick_params(labelsize=AXIS_LABEL_FONTSIZE)
    return cbar
