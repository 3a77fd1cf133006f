"""One row of attention weights as bars, with their values and their sum."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.colors import to_rgba

from .base import (
    BAR_COLOR,
    BAR_EDGE_WIDTH,
    BAR_HIGHLIGHT_COLOR,
    BAR_SLOT_INCHES,
    BAR_TEXT_INSIDE_ABOVE,
    BAR_TEXT_OFFSET,
    BAR_WIDTH,
    KEY_AXIS_LABEL,
    LABEL_FONTSIZE,
    MIN_ANNOTATION_FONTSIZE,
    TEXT_DARK,
    TICK_FONTSIZE,
    TOKEN_MAX_LEN,
    _as_1d,
    _check_index,
    _check_labels,
    _clip_size,
    _format,
    _new_axes,
    _set_xticklabels,
    _text_colors,
    _title_and_readout,
    token_labels,
)

__all__ = [
    "WeightBarsArtists",
    "update_weight_bars",
    "weight_bars",
]

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
