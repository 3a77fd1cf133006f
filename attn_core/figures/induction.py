"""Induction heads through training (notebook 15): the loss on both copies with the current
step marked, beside the previous-token head's and the induction head's maps at that step.

The runs and the maps are computed by :mod:`attn_core.nn.induction_run`; this only draws
the arrays it is given and returns its artists (updated in place by the explorer).
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from .base import LABEL_FONTSIZE, LINE_WIDTH, OKABE_ITO, TICK_FONTSIZE, TITLE_FONTSIZE, _as_1d
from .heatmaps import heatmap, update_heatmap

__all__ = ["InductionFigureArtists", "induction_figure", "update_induction_figure"]

FIGSIZE = (10.2, 3.5)
#: First copy blue and solid, second copy vermillion and dashed (told apart without colour).
COPY_STYLES = {"first copy": (OKABE_ITO["blue"], "-"),
               "second copy": (OKABE_ITO["vermillion"], "--")}
MARK_COLOR = OKABE_ITO["black"]
#: Tick every this many positions on the maps (27 labels would overlap).
TICK_EVERY = 5


@dataclass
class InductionFigureArtists:
    """``lines`` and ``markers`` (dict by copy), ``guide`` (the step's vertical line),
    ``maps`` (two HeatmapArtists: previous-token head, induction head), ``copy_lines`` (the
    thin lines on the maps where the second copy starts, drawn over the images)."""

    figure: object
    ax_loss: object
    lines: dict
    markers: dict
    guide: object
    maps: tuple
    copy_lines: tuple = ()


def _value_at(steps, values, step):
    return float(values[int(np.searchsorted(steps, step))])


def _position_ticks(art, n, segment):
    """Ticks every TICK_EVERY positions; lines where the second copy starts (returned)."""
    ticks = np.arange(0, n, TICK_EVERY)
    for set_ticks, set_labels in ((art.ax.set_xticks, art.ax.set_xticklabels),
                                  (art.ax.set_yticks, art.ax.set_yticklabels)):
        set_ticks(ticks)
        set_labels([str(t) for t in ticks], fontsize=TICK_FONTSIZE, rotation=0)
    if not segment:
        return []
    return [line(segment - 0.5, color="white", linewidth=0.8, alpha=0.7)
            for line in (art.ax.axvline, art.ax.axhline)]


def induction_figure(steps, losses, step, prev_map, induction_map, *, titles=None,
                     segment=None, fig=None):
    """Loss of both copies over training, the step marked, and two heads' maps then.

    Parameters
    ----------
    steps : (m,) array_like
        The measured training steps.
    losses : dict
        ``{"first copy": (m,), "second copy": (m,)}`` losses at those steps.
    step : int
        The current step (one of ``steps``).
    prev_map, induction_map : (n, n) array_like
        The layer-1 and layer-2 heads' attention maps on one sequence at ``step``.
    titles : (str, str), optional
        The maps' titles.
    segment : int, optional
        Where the second copy starts (a thin line on the maps).
    fig : Figure, optional

    Returns
    -------
    InductionFigureArtists
    """
    steps = _as_1d(steps, "steps")
    if fig is None:
        fig = plt.figure(figsize=FIGSIZE, layout="constrained")
    ax_loss, ax1, ax2 = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1.35, 1.0, 1.0]})
    lines, markers = {}, {}
    for name, (color, style) in COPY_STYLES.items():
        y = _as_1d(losses[name], f"losses[{name!r}]")
        (lines[name],) = ax_loss.plot(steps, y, style, color=color, linewidth=LINE_WIDTH,
                                      label=name)
        (markers[name],) = ax_loss.plot([step], [_value_at(steps, y, step)], "o",
                                        color=color, markersize=7, markeredgecolor="white",
                                        zorder=3)
    guide = ax_loss.axvline(step, color=MARK_COLOR, linestyle=":", linewidth=1)
    ax_loss.set_xlabel("training step", fontsize=LABEL_FONTSIZE)
    ax_loss.set_ylabel("loss (nats per token)", fontsize=LABEL_FONTSIZE)
    ax_loss.set_ylim(0, None)
    ax_loss.tick_params(labelsize=TICK_FONTSIZE)
    ax_loss.spines[["top", "right"]].set_visible(False)
    ax_loss.legend(loc="lower left", frameon=False, fontsize=LABEL_FONTSIZE)
    ax_loss.set_title("loss on each copy", fontsize=TITLE_FONTSIZE)
    titles = titles or ("previous-token head", "induction head")
    maps, copy_lines = [], []
    for ax, w, title, last in ((ax1, prev_map, titles[0], False),
                               (ax2, induction_map, titles[1], True)):
        art = heatmap(w, ax=ax, vmin=0.0, vmax=1.0, annotate=False, colorbar=last, title=title,
                      xlabel="key position", ylabel="query position" if not last else None)
        copy_lines += _position_ticks(art, np.shape(w)[-1], segment)
        maps.append(art)
    return InductionFigureArtists(fig, ax_loss, lines, markers, guide, tuple(maps),
                                  tuple(copy_lines))


def update_induction_figure(artists, step, prev_map, induction_map):
    """Move the step's marks and show the maps of another step in place."""
    for name, line in artists.lines.items():
        x = np.asarray(line.get_xdata(), dtype=float)
        y = np.asarray(line.get_ydata(), dtype=float)
        artists.markers[name].set_data([step], [_value_at(x, y, step)])
    artists.guide.set_xdata([step, step])
    for art, w in zip(artists.maps, (prev_map, induction_map)):
        update_heatmap(art, w, vmin=0.0, vmax=1.0)
    return artists
