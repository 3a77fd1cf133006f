"""The real LLM's figures (notebook 17): where the first token's weight goes, layer by layer,
and the explorer's panel of one head over the conversation beside the windowed losses.

The numbers come from the model (:mod:`attn_core.model`) or from the stored measurements
(``attn_core/data/llm-measurements.json``); these functions only draw them and change their
artists in place. Token pieces are shown with a visible stand-in for a leading space (``␣``)
and a new line (``↵``), cut to a few characters.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from .alt import set_alt_text
from .base import (
    LABEL_FONTSIZE,
    LINE_WIDTH,
    MARKER_COLOR,
    MARKER_SIZE,
    OKABE_ITO,
    TICK_FONTSIZE,
    TITLE_FONTSIZE,
    _as_1d,
    _as_2d,
    _cell_points,
    token_labels,
)
from .heatmaps import heatmap, update_heatmap

__all__ = [
    "LLMFigureArtists",
    "llm_figure",
    "piece_labels",
    "sink_profile",
    "update_llm_loss",
    "update_llm_map",
]

#: Colours of the curves of :func:`sink_profile` and of the sink counts in :func:`llm_figure`.
CURVE_COLORS = (OKABE_ITO["blue"], OKABE_ITO["vermillion"], OKABE_ITO["bluish_green"],
                OKABE_ITO["reddish_purple"], OKABE_ITO["orange"])
FIGSIZE = (9.8, 5.2)
SINK_FIGSIZE = (7.4, 3.4)
#: Longest token label on the map's axes.
PIECE_MAX_LEN = 6
#: Shade of the band of two standard errors around a curve.
BAND_ALPHA = 0.2


def piece_labels(pieces, max_len=PIECE_MAX_LEN):
    """Token pieces as axis labels: a leading space as ``␣``, new lines as ``↵``, cut short.

    Examples
    --------
    >>> piece_labels([" the", "\\n", "Paris"])
    ['␣the', '↵', 'Paris']
    """
    shown = []
    for p in pieces:
        p = str(p).replace("\n", "↵").replace("\t", "⇥")
        shown.append("␣" + p[1:] if p.startswith(" ") else p)
    return token_labels(shown, max_len=max_len)


def sink_profile(means, errors, labels, *, ax=None, title=None,
                 ylabel="weight on the first position"):
    """Curves of a per-layer quantity (for example the weight on the first token), each with
    a band of two standard errors.

    Parameters
    ----------
    means, errors : (curves, layers) array_like
        The mean over texts and its standard error, for each curve and layer.
    labels : sequence of str
        One legend entry per curve.
    ax : Axes, optional
    title, ylabel : str, optional

    Returns
    -------
    list of Line2D
        One per curve.
    """
    m, e = _as_2d(means, "means"), _as_2d(errors, "errors")
    if m.shape != e.shape or len(labels) != m.shape[0]:
        raise ValueError(f"means and errors must have the same shape (curves, layers) and "
                         f"labels one entry per curve; got {m.shape}, {e.shape} and "
                         f"{len(labels)} labels")
    if ax is None:
        ax = plt.figure(figsize=SINK_FIGSIZE, layout="constrained").subplots()
    layers = np.arange(1, m.shape[1] + 1)
    lines = []
    for i, (row, err, label) in enumerate(zip(m, e, labels)):
        color = CURVE_COLORS[i % len(CURVE_COLORS)]
        ax.fill_between(layers, row - 2 * err, row + 2 * err, color=color, alpha=BAND_ALPHA,
                        linewidth=0)
        lines.extend(ax.plot(layers, row, color=color, lw=LINE_WIDTH, marker="o",
                             markersize=3, label=label))
    ax.set_xlim(0.5, m.shape[1] + 0.5)
    ax.set_ylim(0, 1)
    ax.set_xlabel("layer", fontsize=LABEL_FONTSIZE)
    ax.set_ylabel(ylabel, fontsize=LABEL_FONTSIZE)
    ax.tick_params(labelsize=TICK_FONTSIZE)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(fontsize=TICK_FONTSIZE, frameon=False, loc="best")
    if title:
        ax.set_title(title, fontsize=TITLE_FONTSIZE, loc="left")
    set_alt_text(ax.figure, "Line plot: for each layer, the attention weight that queries put "
                            "on the first position, averaged over heads and texts, one line per "
                            "condition, with bands of two standard errors.")
    return lines


@dataclass(repr=False)
class LLMFigureArtists:
    """What :func:`llm_figure` drew.

    Attributes
    ----------
    figure : Figure
    map : HeatmapArtists
        One head's causal map over the conversation's last tokens.
    loss_ax : Axes
    marker : Line2D
        The chosen window and sink count, on its curve.
    """

    figure: object
    map: object
    loss_ax: object
    marker: object
    windows: tuple
    curves: dict

    def __repr__(self):
        return f"LLMFigureArtists(map={self.map!r}, windows={self.windows})"

    @property
    def dynamic(self):
        """The artists a control changes: the map's image and mask, the marker."""
        return [self.map.image, *([self.map.mask_patch] if self.map.mask_patch else []),
                self.marker]


#: The map's token labels are drawn at this size (points: 10 CSS pixels at the explorers'
#: 80 per inch); where the cells are smaller, only every k-th token is labelled (issue 47:
#: at 64 tokens every label was 4-5 pixels high).
MAP_LABEL_FONTSIZE = TICK_FONTSIZE
#: A label needs this many times its font size of cells along the axis: 1.2 lines apart
#: across the key labels, which are turned 45 degrees (1.2 / sin 45 degrees, about 1.7).
MAP_LABEL_SPACING = 1.7


def _legible_token_ticks(ax, labels, shape):
    """Label every k-th row and column (k the smallest that gives each label
    ``MAP_LABEL_SPACING`` times ``MAP_LABEL_FONTSIZE`` of room), all at that size."""
    step = max(1, int(np.ceil(MAP_LABEL_SPACING * MAP_LABEL_FONTSIZE / _cell_points(ax, shape))))
    at = np.arange(0, len(labels), step)
    shown = [labels[i] for i in at]
    ax.set_yticks(at, shown, fontsize=MAP_LABEL_FONTSIZE)
    ax.set_xticks(at, shown, fontsize=MAP_LABEL_FONTSIZE, rotation=45, ha="right",
                  rotation_mode="anchor")
    return step


def llm_figure(weights, pieces, windows, losses, full_loss, *, fig=None, window=None,
               n_sink=0, map_title="the head's attention over the conversation"):
    """One head's map over the conversation (left) and the loss a window and sinks give (right).

    Parameters
    ----------
    weights : (n, n) array_like
        The head's causal weights over the last ``n`` tokens (rows: queries).
    pieces : sequence of n str
        Their token pieces.
    windows : sequence of int
        The window sizes measured.
    losses : dict int -> (len(windows),) array_like
        Mean loss (nats a token) for each number of sinks kept, by window size.
    full_loss : float
        The same text with full attention.
    window, n_sink : int, optional
        The chosen point (marked); the first window when None.

    Returns
    -------
    LLMFigureArtists
    """
    w = _as_2d(weights, "weights")
    windows = tuple(int(x) for x in windows)
    if fig is None:
        fig = plt.figure(figsize=FIGSIZE, layout="constrained")
    map_ax, loss_ax = fig.subplots(1, 2, gridspec_kw={"width_ratios": (1.35, 1.0)})
    labels = piece_labels(pieces)
    art_map = heatmap(w, labels, labels, ax=map_ax, vmin=0.0, vmax=1.0, annotate=False,
                      mask=np.tril(np.ones(w.shape, dtype=bool)), title=map_title,
                      xlabel="key (earlier token)", ylabel="query (token)")
    _legible_token_ticks(map_ax, labels, w.shape)
    curves = {}
    for i, (sinks, values) in enumerate(sorted(losses.items())):
        y = _as_1d(values, f"losses[{sinks}]")
        if y.size != len(windows):
            raise ValueError(f"losses[{sinks}] must give one loss per window ({len(windows)}), "
                             f"got {y.size}")
        label = "window alone (first tokens evicted)" if sinks == 0 else \
            f"window + {sinks} sink{'s' if sinks > 1 else ''}"
        curves[int(sinks)] = y
        loss_ax.plot(windows, y, color=CURVE_COLORS[i % len(CURVE_COLORS)], lw=LINE_WIDTH,
                     marker="o", label=label)
    loss_ax.axhline(float(full_loss), color="black", lw=1.2, ls="--", label="full attention")
    loss_ax.set_xscale("log", base=2)
    loss_ax.set_xticks(windows, [str(x) for x in windows])
    loss_ax.minorticks_off()
    loss_ax.set_xlabel("window (tokens kept besides the sinks)", fontsize=LABEL_FONTSIZE)
    loss_ax.set_ylabel("loss (nats a token)", fontsize=LABEL_FONTSIZE)
    loss_ax.tick_params(labelsize=TICK_FONTSIZE)
    loss_ax.spines[["top", "right"]].set_visible(False)
    loss_ax.legend(fontsize=TICK_FONTSIZE - 1, frameon=False, loc="upper right")
    loss_ax.set_title("a long text, read with a sliding window", fontsize=TITLE_FONTSIZE,
                      loc="left")
    marker, = loss_ax.plot([], [], "o", ms=MARKER_SIZE + 3, mfc="none", mec=MARKER_COLOR,
                           mew=2.5, zorder=5)
    art = LLMFigureArtists(fig, art_map, loss_ax, marker, windows, curves)
    update_llm_loss(art, windows[0] if window is None else window, n_sink)
    set_alt_text(fig, "Left: a heatmap of one attention head's weights over the conversation's "
                      "tokens (rows: queries, columns: earlier keys). Right: line plot of the "
                      "loss on a long text against the window size, one line per number of "
                      "sink tokens kept, with full attention dashed; a circle marks the "
                      "chosen setting.")
    return art


def update_llm_map(artists, weights, pieces=None, *, title=None):
    """A new head's map in place (new ``pieces``: new labels, for a new conversation)."""
    w = _as_2d(weights, "weights")
    labels = None if pieces is None else piece_labels(pieces)
    update_heatmap(artists.map, w, mask=np.tril(np.ones(w.shape, dtype=bool)),
                   row_labels=labels, col_labels=labels)
    if labels is not None:
        _legible_token_ticks(artists.map.ax, labels, w.shape)
    if title is not None:
        artists.map.ax.set_title(title, fontsize=TITLE_FONTSIZE)
    return artists


def update_llm_loss(artists, window, n_sink):
    """Move the marker to ``window`` on the curve of ``n_sink`` sinks."""
    if int(window) not in artists.windows:
        raise ValueError(f"window must be one of {artists.windows}, got {window!r}")
    if int(n_sink) not in artists.curves:
        raise ValueError(f"n_sink must be one of {sorted(artists.curves)}, got {n_sink!r}")
    i = artists.windows.index(int(window))
    artists.marker.set_data([artists.windows[i]], [artists.curves[int(n_sink)][i]])
    return artists
