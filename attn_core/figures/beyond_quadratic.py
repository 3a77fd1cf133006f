"""Beyond the quadratic: one method's attention pattern, its FLOPs against n beside full
attention's, and the memory a decoder keeps beside a full KV cache (notebook 18)."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import LinearSegmentedColormap

from .base import (
    ALLOWED_COLOR,
    LABEL_FONTSIZE,
    LINE_WIDTH,
    MARKER_COLOR,
    MARKER_SIZE,
    MASKED_FACE_COLOR,
    OKABE_ITO,
    TICK_FONTSIZE,
    TITLE_FONTSIZE,
)

__all__ = ["BeyondArtists", "beyond_figure", "update_beyond_figure"]

FIGSIZE = (9.8, 3.4)
#: Largest side of the pattern image: a longer sequence is shown as the share of allowed
#: cells in each of DISPLAY x DISPLAY blocks.
DISPLAY = 128
_DENSITY_CMAP = LinearSegmentedColormap.from_list("allowed_share",
                                                  [MASKED_FACE_COLOR, ALLOWED_COLOR])
FULL_STYLE = dict(color=OKABE_ITO["black"], linestyle="--", linewidth=LINE_WIDTH,
                  zorder=3)  # over the method's line where they coincide
#: The pattern's tick labels: transparent placeholders of the widest labels (n = 2048) that
#: hold the room of the position labels drawn over them (``BeyondArtists.positions``).
_WIDEST = ["0", "0000", "0000"]
METHOD_STYLE = dict(color=OKABE_ITO["blue"], linestyle="-", linewidth=LINE_WIDTH)


@dataclass(repr=False)
class BeyondArtists:
    """What :func:`beyond_figure` drew: three axes, the pattern image, two cost lines and a
    marker, two memory lines, and the pattern's six position labels (``0``, ``n/2``, ``n`` on
    each axis: texts that change with the image, over the axes' own tick labels, which are
    transparent placeholders of the widest label that hold the layout)."""

    axes: tuple
    pattern: object
    cost_full: object
    cost_method: object
    marker: object
    memory_full: object
    memory_method: object
    positions: tuple = ()

    @property
    def dynamic(self):
        """The artists an update changes, in drawing order: the image, its position labels,
        the lines and the marker (the rest is the same for every method and length)."""
        return [self.pattern, *self.positions, self.cost_full, self.cost_method, self.marker,
                self.memory_full, self.memory_method]


def block_density(mask, side=DISPLAY):
    """``mask`` as floats, or, when longer than ``side``, the share of allowed cells in each
    of ``side x side`` blocks (``n`` a multiple of ``side``)."""
    m = np.asarray(mask)
    n = m.shape[0]
    if n <= side:
        return m.astype(float)
    f = n // side
    counts = m.reshape(side, f, side, f).sum(axis=(1, 3))  # (n, n) -> (side, side)
    return counts / float(f * f)


def beyond_figure(ns, max_tokens, max_mib, flops_range, fig=None):
    """Draw the three panels empty; fill them with :func:`update_beyond_figure`.

    Parameters
    ----------
    ns : (m,) array_like of int
        The sequence lengths of the cost panel (log axis).
    max_tokens : int
        The longest decoding shown in the memory panel.
    max_mib : float
        Top of the memory axis, in MiB.
    flops_range : (float, float)
        Bottom and top of the FLOPs axis (log).
    fig : Figure, optional

    Returns
    -------
    BeyondArtists
    """
    if fig is None:
        fig = plt.figure(figsize=FIGSIZE, layout="constrained")
    ax_pat, ax_cost, ax_mem = fig.subplots(1, 3, width_ratios=[0.9, 1.1, 1.1])
    pattern = ax_pat.imshow(np.zeros((DISPLAY, DISPLAY)), cmap=_DENSITY_CMAP, vmin=0, vmax=1,
                            interpolation="nearest", aspect="equal")
    ax_pat.set_xlabel("key position", fontsize=LABEL_FONTSIZE)
    ax_pat.set_ylabel("query position", fontsize=LABEL_FONTSIZE)
    ax_pat.set_title("cells computed (blue)", fontsize=TITLE_FONTSIZE)
    edges = np.array([0, DISPLAY / 2, DISPLAY]) - 0.5
    ax_pat.set_xticks(edges, _WIDEST)
    ax_pat.set_yticks(edges, _WIDEST)
    ns = np.asarray(ns, dtype=float)
    (cost_full,) = ax_cost.plot(ns, np.full(len(ns), np.nan), label="full causal", **FULL_STYLE)
    (cost_method,) = ax_cost.plot(ns, np.full(len(ns), np.nan), label="this method",
                                  **METHOD_STYLE)
    (marker,) = ax_cost.plot([np.nan], [np.nan], "o", color=MARKER_COLOR,
                             markersize=MARKER_SIZE)
    ax_cost.set_xscale("log", base=2)
    ax_cost.set_yscale("log")
    ax_cost.set_xlim(ns[0] / 1.3, ns[-1] * 1.3)
    ax_cost.set_ylim(*flops_range)
    ax_cost.set_xlabel("sequence length n", fontsize=LABEL_FONTSIZE)
    ax_cost.set_ylabel("FLOPs of attention, one layer", fontsize=LABEL_FONTSIZE)
    ax_cost.set_title("cost against n", fontsize=TITLE_FONTSIZE)
    ax_cost.legend(loc="upper left", fontsize=TICK_FONTSIZE, frameon=False)
    steps = np.arange(1, max_tokens + 1)
    (memory_full,) = ax_mem.plot(steps, np.full(max_tokens, np.nan), label="full KV cache",
                                 **FULL_STYLE)
    (memory_method,) = ax_mem.plot(steps, np.full(max_tokens, np.nan), label="this method",
                                   **METHOD_STYLE)
    ax_mem.set_xlim(0, max_tokens * 1.02)
    ax_mem.set_ylim(0, max_mib * 1.05)
    ax_mem.set_xlabel("tokens decoded", fontsize=LABEL_FONTSIZE)
    ax_mem.set_ylabel("MiB kept, all layers", fontsize=LABEL_FONTSIZE)
    ax_mem.set_title("memory while decoding", fontsize=TITLE_FONTSIZE)
    ax_mem.legend(loc="upper left", fontsize=TICK_FONTSIZE, frameon=False)
    for ax in (ax_pat, ax_cost, ax_mem):
        ax.tick_params(labelsize=TICK_FONTSIZE)
    positions = _position_labels(ax_pat, edges, _WIDEST)  # the tick labels' final font
    return BeyondArtists((ax_pat, ax_cost, ax_mem), pattern, cost_full, cost_method, marker,
                         memory_full, memory_method, positions)


def _position_labels(ax, edges, labels):
    """Six texts ``labels`` where ``ax``'s tick labels are, at the tick positions ``edges``
    (the same transform, font and colour; the tick labels themselves made transparent): the
    labels of positions 0, n/2 and n change with n, and as texts of their own they are
    redrawn with the image, not with the axes."""
    texts = []
    for axis in (ax.xaxis, ax.yaxis):
        for tick, at, text in zip(axis.get_major_ticks(), edges, labels):
            label = tick.label1
            texts.append(ax.text(*((at, 0) if axis is ax.xaxis else (0, at)), text,
                                 transform=label.get_transform(), ha=label.get_ha(),
                                 va=label.get_va(), fontproperties=label.get_fontproperties(),
                                 color=label.get_color(), clip_on=False, in_layout=False))
    ax.tick_params(labelcolor="none")  # the placeholders still hold the labels' room
    return tuple(texts)


def update_beyond_figure(art, mask, flops_full, flops_method, n_index, bytes_full,
                         bytes_method, n=None):
    """Show one method at one length, in place.

    Parameters
    ----------
    art : BeyondArtists
    mask : (n, n) bool array_like
        The cells the method computes (shown as block shares past ``DISPLAY``), or the
        picture :func:`block_density` made of it (then pass ``n``).
    flops_full, flops_method : (m,) array_like
        FLOPs at each length of the cost panel.
    n_index : int
        Which of those lengths is the current one (the marker).
    bytes_full, bytes_method : (t,) array_like
        Bytes kept after each token decoded, ``t <= max_tokens``.
    """
    shown = block_density(mask)
    art.pattern.set_data(shown)
    side = shown.shape[0]
    art.pattern.set_extent((-0.5, side - 0.5, side - 0.5, -0.5))
    n = np.asarray(mask).shape[0] if n is None else n
    ticks = np.array([0, side / 2, side]) - 0.5  # cell edges: positions 0, n/2 and n
    labels = ["0", f"{n // 2}", f"{n}"]
    art.axes[0].set_xticks(ticks, _WIDEST)  # the same places on screen for every n, and the
    art.axes[0].set_yticks(ticks, _WIDEST)  # same (transparent) room for the labels
    for x_text, y_text, label, at in zip(art.positions[:3], art.positions[3:], labels, ticks):
        x_text.set_text(label)
        x_text.set_x(at)
        y_text.set_text(label)
        y_text.set_y(at)
    art.cost_full.set_ydata(np.asarray(flops_full, dtype=float))
    art.cost_method.set_ydata(np.asarray(flops_method, dtype=float))
    art.marker.set_data([art.cost_method.get_xdata()[n_index]],
                        [float(np.asarray(flops_method)[n_index])])
    size = len(art.memory_full.get_xdata())
    for line, y in ((art.memory_full, bytes_full), (art.memory_method, bytes_method)):
        full = np.full(size, np.nan)
        y = np.asarray(y, dtype=float) / 2**20
        full[:len(y)] = y
        line.set_ydata(full)
    return art
