"""Recall against state size: each mixer's accuracy on multi-query associative recall as the
number of pairs grows, and the numbers a decoder keeps (notebook 19)."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from .base import (
    LABEL_FONTSIZE,
    LINE_WIDTH,
    MARKER_COLOR,
    MARKER_SIZE,
    OKABE_ITO,
    TICK_FONTSIZE,
    TITLE_FONTSIZE,
)

__all__ = ["RecallArtists", "recall_figure", "update_recall_figure"]

FIGSIZE = (7.2, 2.8)
#: One colour per mixer, in the order of ``attn_core.nn.recall_model.MIXERS``.
COLORS = (OKABE_ITO["black"], OKABE_ITO["orange"], OKABE_ITO["sky_blue"], OKABE_ITO["blue"],
          OKABE_ITO["vermillion"])
FAINT, STRONG = 0.35, 1.0


@dataclass(repr=False)
class RecallArtists:
    """What :func:`recall_figure` drew: two axes, one accuracy line per mixer, the marker,
    and the two memory lines (softmax's cache, the chosen mixer's)."""

    axes: tuple
    lines: dict
    marker: object
    memory_softmax: object
    memory_method: object


def recall_figure(mixers, pairs, max_tokens, max_floats, fig=None):
    """Draw both panels empty; fill them with :func:`update_recall_figure`.

    Parameters
    ----------
    mixers : sequence of str
        The mixers, one line each.
    pairs : (p,) array_like of int
        The numbers of pairs (log axis).
    max_tokens : int
        The longest sequence of the memory panel.
    max_floats : float
        Top of the memory axis (numbers kept, one head).
    fig : Figure, optional

    Returns
    -------
    RecallArtists
    """
    if fig is None:
        fig = plt.figure(figsize=FIGSIZE, layout="constrained")
    ax_acc, ax_mem = fig.subplots(1, 2)
    pairs = np.asarray(pairs, dtype=float)
    lines = {}
    for mixer, color in zip(mixers, COLORS):
        (lines[mixer],) = ax_acc.plot(pairs, np.full(len(pairs), np.nan), "o-", color=color,
                                      linewidth=LINE_WIDTH, markersize=3, label=mixer)
    (marker,) = ax_acc.plot([np.nan], [np.nan], "o", color=MARKER_COLOR,
                            markersize=MARKER_SIZE * 1.6, fillstyle="none", zorder=5)
    ax_acc.set_xscale("log", base=2)
    ax_acc.set_xticks(pairs, [str(int(p)) for p in pairs])
    ax_acc.set_xlim(pairs[0] / 1.3, pairs[-1] * 1.3)
    ax_acc.set_ylim(0, 1.05)
    ax_acc.set_xlabel("key-value pairs in the sequence", fontsize=LABEL_FONTSIZE)
    ax_acc.set_ylabel("recall accuracy", fontsize=LABEL_FONTSIZE)
    ax_acc.set_title("recall (one layer, trained)", fontsize=TITLE_FONTSIZE)
    ax_acc.legend(loc="lower left", fontsize=TICK_FONTSIZE, frameon=False)
    steps = np.arange(1, max_tokens + 1)
    (memory_softmax,) = ax_mem.plot(steps, np.full(max_tokens, np.nan),
                                    label="softmax: keys and values", color=COLORS[0],
                                    linestyle="--", linewidth=LINE_WIDTH)
    (memory_method,) = ax_mem.plot(steps, np.full(max_tokens, np.nan), label="this mixer",
                                   color=OKABE_ITO["blue"], linewidth=LINE_WIDTH)
    ax_mem.set_xlim(0, max_tokens * 1.02)
    ax_mem.set_ylim(0, max_floats * 1.05)
    ax_mem.set_xlabel("tokens read", fontsize=LABEL_FONTSIZE)
    ax_mem.set_ylabel("numbers kept, one layer", fontsize=LABEL_FONTSIZE)
    ax_mem.set_title("memory while reading", fontsize=TITLE_FONTSIZE)
    ax_mem.legend(loc="upper left", fontsize=TICK_FONTSIZE, frameon=False)
    for ax in (ax_acc, ax_mem):
        ax.tick_params(labelsize=TICK_FONTSIZE)
    return RecallArtists((ax_acc, ax_mem), lines, marker, memory_softmax, memory_method)


def update_recall_figure(art, accuracy, chosen, pair_index, floats_softmax, floats_method):
    """Show one state size and one mixer, in place.

    Parameters
    ----------
    art : RecallArtists
    accuracy : dict
        Mixer -> (p,) accuracies at each number of pairs.
    chosen : str
        The mixer drawn strong (the others faint) and marked at ``pair_index``.
    floats_softmax, floats_method : (t,) array_like
        Numbers kept after each token read.
    """
    for mixer, line in art.lines.items():
        line.set_ydata(accuracy[mixer])
        line.set_alpha(STRONG if mixer == chosen else FAINT)
        line.set_linewidth(LINE_WIDTH * (2 if mixer == chosen else 1))
    x = art.lines[chosen].get_xdata()[pair_index]
    art.marker.set_data([x], [accuracy[chosen][pair_index]])
    t = len(floats_softmax)
    art.memory_softmax.set_data(np.arange(1, t + 1), floats_softmax)
    art.memory_method.set_data(np.arange(1, t + 1), floats_method)
