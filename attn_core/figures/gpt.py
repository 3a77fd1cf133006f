"""The tiny GPT's figure: its next-character distribution as bars, one head's map over the prompt.

The model's numbers come from :mod:`attn_core.nn` (the explorer or the notebook computes
them); these functions only draw the arrays and characters they are given and change the
artists in place. Characters are shown as they are, except the invisible ones, which get a
visible stand-in (:func:`char_label`): a space is ``␣``, a new line ``↵``, a tab ``⇥``.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.transforms import blended_transform_factory

from .alt import set_alt_text
from .base import (
    BAR_COLOR,
    BAR_EDGE_WIDTH,
    BAR_HIGHLIGHT_COLOR,
    BAR_WIDTH,
    LABEL_FONTSIZE,
    TEXT_DARK,
    TICK_FONTSIZE,
    TITLE_FONTSIZE,
    _as_1d,
    _as_2d,
)
from .heatmaps import heatmap, update_heatmap

__all__ = [
    "CHAR_STAND_INS",
    "GPTFigureArtists",
    "char_label",
    "gpt_figure",
    "update_gpt_bars",
    "update_gpt_map",
]

#: Visible stand-ins for the characters that print as nothing.
CHAR_STAND_INS = {" ": "␣", "\n": "↵", "\t": "⇥"}
#: Size of the characters written under the bars (one character each: large and plain).
BAR_CHAR_FONTSIZE = 12
#: Gap between the x axis and the characters under the bars, in axes fractions.
BAR_CHAR_GAP = 0.04
#: Height of the bar panel against the map panel.
HEIGHT_RATIOS = (1.0, 2.3)
FIGSIZE = (5.2, 6.0)


def char_label(char):
    """A character as an axis label: itself, or a visible stand-in for a blank one.

    Examples
    --------
    >>> [char_label(c) for c in "a \\n"]
    ['a', '␣', '↵']
    """
    return CHAR_STAND_INS.get(char, char)


@dataclass(repr=False)
class GPTFigureArtists:
    """What :func:`gpt_figure` drew.

    Attributes
    ----------
    figure : Figure
    bar_ax : Axes
    bars : BarContainer
        One bar per slot, heights the probabilities given.
    chars : list of Text
        The character under each bar (changed with the bars).
    bar_title : Text
    map : HeatmapArtists
        The head's (n, n) map over the prompt, masked (hatched) above the diagonal.
    """

    figure: object
    bar_ax: object
    bars: object
    chars: list
    bar_title: object
    map: object

    def __repr__(self):
        return f"GPTFigureArtists(slots={len(self.chars)}, map={self.map!r})"

    @property
    def bar_artists(self):
        """The artists a new distribution changes: the bars and their characters."""
        return [*self.bars.patches, *self.chars]

    @property
    def map_artists(self):
        """The artists drawn over the map's background: its image, then the hatched
        (masked) cells above it."""
        return [self.map.image, *([self.map.mask_patch] if self.map.mask_patch else [])]

    def split_y(self):
        """A height in display pixels (from the bottom) between the bar panel, with its
        characters and labels, and the map panel with its title: redrawing either half
        over the background leaves the other untouched."""
        renderer = self.figure.canvas.get_renderer()
        low = self.bar_ax.get_tightbbox(renderer).y0
        high = self.map.ax.get_tightbbox(renderer).y1
        return 0.5 * (low + high)


def _bar_chars(ax, n):
    where = blended_transform_factory(ax.transData, ax.transAxes)
    return [ax.text(i, -BAR_CHAR_GAP, "", transform=where, ha="center", va="top",
                    fontsize=BAR_CHAR_FONTSIZE, family="monospace", color=TEXT_DARK)
            for i in range(n)]


def _causal(n):
    return np.tril(np.ones((n, n), dtype=bool))  # True where a query may attend


def gpt_figure(probs, chars, weights, tokens, *, fig=None,
               bar_title="the next character: the most likely ones",
               map_title="the head's attention over the prompt", highlight=None):
    """The next-character distribution (bars) above one head's attention map over the prompt.

    Parameters
    ----------
    probs : (m,) array_like
        Probabilities of the ``m`` characters shown, in the order to show them (for
        example the most likely first); the y axis runs from 0 to 1.
    chars : sequence of m str
        The character of each bar (blank ones are shown by :func:`char_label`).
    weights : (n, n) array_like
        The head's causal attention weights over the prompt (rows: queries).
    tokens : sequence of n str
        The prompt's characters, the labels of both axes of the map.
    fig : Figure, optional
    bar_title, map_title : str, optional
    highlight : int, optional
        A bar drawn in the highlight colour (for example the character sampled next).

    Returns
    -------
    GPTFigureArtists

    Examples
    --------
    >>> art = gpt_figure([0.6, 0.3, 0.1], ["e", " ", "a"], np.tril(np.ones((2, 2))) / [[1], [2]],
    ...                  ["h", "i"])
    >>> [t.get_text() for t in art.chars]
    ['e', '␣', 'a']
    >>> plt.close(art.figure)
    """
    p = _as_1d(probs, "probs")
    if len(chars) != p.size:
        raise ValueError(f"chars must give one character per bar ({p.size}), got {len(chars)}")
    w = _as_2d(weights, "weights")
    if fig is None:
        fig = plt.figure(figsize=FIGSIZE, layout="compressed")
    bar_ax, map_ax = fig.subplots(2, 1, gridspec_kw={"height_ratios": HEIGHT_RATIOS})
    x = np.arange(p.size)
    bars = bar_ax.bar(x, p.tolist(), width=BAR_WIDTH, color=BAR_COLOR, edgecolor=TEXT_DARK,
                      linewidth=BAR_EDGE_WIDTH)
    bar_ax.set_ylim(0, 1)
    bar_ax.set_xlim(-0.6, p.size - 0.4)
    bar_ax.set_xticks(x, [""] * p.size)
    bar_ax.tick_params(labelsize=TICK_FONTSIZE)
    bar_ax.set_ylabel("probability", fontsize=LABEL_FONTSIZE)
    bar_ax.set_xlabel("next character", fontsize=LABEL_FONTSIZE, labelpad=BAR_CHAR_FONTSIZE + 6)
    bar_ax.spines[["top", "right"]].set_visible(False)
    title = bar_ax.set_title(bar_title, fontsize=TITLE_FONTSIZE, loc="left")
    art = GPTFigureArtists(fig, bar_ax, bars, _bar_chars(bar_ax, p.size), title, None)
    labels = [char_label(c) for c in tokens]
    art.map = heatmap(w, labels, labels, ax=map_ax, vmin=0.0, vmax=1.0,
                      annotate=False, mask=_causal(w.shape[0]),
                      title=map_title, xlabel="key (earlier character)",
                      ylabel="query (character)")
    update_gpt_bars(art, p, chars, highlight=highlight, title=bar_title)
    set_alt_text(fig, "A bar chart of the model's probabilities for the next character, above "
                      "a heatmap of one head's attention weights over the prompt's characters "
                      "(rows: queries, columns: earlier keys; the masked upper triangle is "
                      "hatched).")
    return art


def update_gpt_bars(artists, probs, chars, *, highlight=None, title=None):
    """New bar heights and characters in place (same number of bars)."""
    p = _as_1d(probs, "probs")
    if p.size != len(artists.chars) or len(chars) != p.size:
        raise ValueError(f"probs and chars must have {len(artists.chars)} entries (one per "
                         f"bar), got {p.size} and {len(chars)}")
    for i, (bar, text, h, c) in enumerate(zip(artists.bars, artists.chars, p.tolist(), chars)):
        bar.set_height(h)
        bar.set_facecolor(BAR_HIGHLIGHT_COLOR if i == highlight else BAR_COLOR)
        text.set_text(char_label(c))
    if title is not None:
        artists.bar_title.set_text(title)
    return artists


def update_gpt_map(artists, weights, tokens=None, *, title=None):
    """The map of another head (same prompt), or of a new prompt when ``tokens`` are given.

    A new prompt changes the tick labels: the caller must redraw the static background.
    """
    w = _as_2d(weights, "weights")
    if tokens is None:
        update_heatmap(artists.map, w, vmin=0.0, vmax=1.0)
    else:
        if len(tokens) != w.shape[0]:
            raise ValueError(f"tokens must label the {w.shape[0]} rows of weights, got "
                             f"{len(tokens)}")
        labels = [char_label(c) for c in tokens]
        update_heatmap(artists.map, w, mask=_causal(w.shape[0]), vmin=0.0, vmax=1.0,
                       row_labels=labels, col_labels=labels)
    if title is not None:
        artists.map.ax.set_title(title, fontsize=TITLE_FONTSIZE)
    return artists
