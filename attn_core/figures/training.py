"""Figures of training runs: loss curves over seeds, attention maps through training.

The runs are computed by :mod:`attn_core.training`; these functions only draw the arrays
they are given (loss curves, stored attention maps) and return their artists.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from .base import (
    LABEL_FONTSIZE,
    LINE_WIDTH,
    OKABE_ITO,
    TICK_FONTSIZE,
    TITLE_FONTSIZE,
    _as_1d,
    _as_array,
)
from .heatmaps import heatmap, update_heatmap
from .lines import line_with_marker, update_marker

__all__ = [
    "TrainingFigureArtists",
    "attention_through_training",
    "loss_curves",
    "training_figure",
    "update_training_figure",
]

#: Colour of each setting in the loss curves (Okabe-Ito, told apart without colour vision
#: too: the second setting is also dashed).
SETTING_COLORS = (OKABE_ITO["blue"], OKABE_ITO["vermillion"], OKABE_ITO["bluish_green"],
                  OKABE_ITO["reddish_purple"])
SETTING_STYLES = ("-", "--", "-.", ":")
SEED_ALPHA = 0.3
#: Log-scale loss axes are labelled at 1, 2 and 5 times each power of ten, written plainly.
LOG_TICK_SUBS = (1.0, 2.0, 5.0)
SEED_WIDTH = 0.8


def _plain_log_axis(ax):
    """A log y axis with ticks at 1, 2, 5 x 10^k written as plain numbers (0.05, 1, 2)."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=LOG_TICK_SUBS))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def loss_curves(panels, *, fig=None, logy=True, xlabel="training step", ylabel="loss",
                ylim=None, suptitle=None):
    """Loss curves side by side: each panel a few settings, each setting a few seeds.

    Parameters
    ----------
    panels : sequence of (title, dict)
        One panel per item; the dict maps a setting's label to its curves, an
        ``(n_seeds, steps)`` array (already smoothed if wanted). Each seed is a thin line,
        the mean over seeds a thick one.
    fig : Figure, optional
    logy : bool, optional
    xlabel, ylabel, suptitle : str, optional
    ylim : (float, float), optional
        Shared y limits; from the data when None.

    Returns
    -------
    axes : list of Axes
    """
    if fig is None:
        fig = plt.figure(figsize=(2.6 * len(panels) + 0.6, 3.2), layout="constrained")
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    for ax, (title, settings) in zip(axes, panels):
        for i, (label, curves) in enumerate(settings.items()):
            curves = np.atleast_2d(_as_array(curves, label))
            steps = np.arange(curves.shape[1])
            color, style = SETTING_COLORS[i % 4], SETTING_STYLES[i % 4]
            ax.plot(steps, curves.T, color=color, linestyle=style, linewidth=SEED_WIDTH,
                    alpha=SEED_ALPHA)
            ax.plot(steps, curves.mean(axis=0), color=color, linestyle=style,
                    linewidth=LINE_WIDTH, label=label)
        ax.set_title(title, fontsize=TITLE_FONTSIZE)
        ax.set_xlabel(xlabel, fontsize=LABEL_FONTSIZE)
        ax.tick_params(labelsize=TICK_FONTSIZE)
        ax.spines[["top", "right"]].set_visible(False)
        if logy:
            _plain_log_axis(ax)
        if ylim is not None:
            ax.set_ylim(*ylim)
    axes[0].set_ylabel(ylabel, fontsize=LABEL_FONTSIZE)
    axes[0].legend(frameon=False, fontsize=LABEL_FONTSIZE - 1)
    if suptitle:
        fig.suptitle(suptitle, fontsize=TITLE_FONTSIZE)
    return list(axes)


def attention_through_training(snapshots, steps, *, pattern=None, fig=None, labels=None,
                               title=None, titles=None):
    """The head's attention map at several training steps, one small heatmap each.

    Parameters
    ----------
    snapshots : (m, n, n) array_like
        Attention maps (rows: queries, columns: keys).
    steps : (m,) array_like of int
        The training step of each map (panel titles).
    pattern : (n, n) array_like, optional
        The map a perfect head would have: its 1-cells are outlined in every panel.
    fig : Figure, optional
    labels : sequence of n str, optional
        Position labels for both axes.
    title : str, optional
    titles : sequence of m str, optional
        Panel titles instead of ``"step N"``.

    Returns
    -------
    list of HeatmapArtists
    """
    maps = _as_array(snapshots, "snapshots")
    if maps.ndim != 3:
        raise ValueError(f"snapshots must be 3-D (m, n, n), got shape {maps.shape}")
    steps = _as_1d(steps, "steps")
    if steps.size != maps.shape[0]:
        raise ValueError(f"steps must give one step per snapshot ({maps.shape[0]}), "
                         f"got {steps.size}")
    cells = [] if pattern is None else [tuple(int(i) for i in c)
                                        for c in np.argwhere(np.asarray(pattern) > 0)]
    m = maps.shape[0]
    if fig is None:
        fig = plt.figure(figsize=(2.2 * m + 0.8, 2.9), layout="compressed")
    axes = fig.subplots(1, m, squeeze=False)[0]
    arts = []
    for i, (ax, w) in enumerate(zip(axes, maps)):
        arts.append(heatmap(w, labels, labels, ax=ax, vmin=0.0, vmax=1.0, annotate=False,
                            colorbar=i == m - 1, highlight=cells or None,
                            title=f"step {int(steps[i])}" if titles is None else titles[i],
                            ylabel="query" if i == 0 else None))
    if title:
        fig.suptitle(title, fontsize=TITLE_FONTSIZE)
    return arts


@dataclass
class TrainingFigureArtists:
    """The explorer figure: ``curve`` (LineMarkerArtists) and ``map`` (HeatmapArtists)."""

    figure: object
    curve: object
    map: object


def training_figure(losses, step, weights, *, pattern=None, fig=None, labels=None,
                    title="loss while training", ylim=None, annotate=True):
    """Loss curve with the current step marked, beside the head's attention map then.

    Parameters
    ----------
    losses : (steps,) array_like
        The (smoothed) loss at each step.
    step : int
        The current step (marked on the curve).
    weights : (n, n) array_like
        The head's attention map at ``step``.
    pattern : (n, n) array_like, optional
        The right pattern; its 1-cells are outlined.
    fig : Figure, optional
    labels : sequence of n str, optional
    title : str, optional
    ylim : (float, float), optional
        Fixed y limits (log scale), so that switching runs keeps the axes.
    annotate : bool, optional
        Write the weights in the map's cells.

    Returns
    -------
    TrainingFigureArtists
    """
    losses = _as_1d(losses, "losses")
    if fig is None:
        fig = plt.figure(figsize=(8.4, 3.4), layout="constrained")
    ax_curve, ax_map = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.5, 1.0]})
    steps = np.arange(losses.size)
    curve = line_with_marker(steps, losses, step, ax=ax_curve, logy=True,
                             xlabel="training step", ylabel="loss", title=title)
    if ylim is not None:
        ax_curve.set_ylim(*ylim)
    _plain_log_axis(ax_curve)
    cells = [] if pattern is None else [tuple(int(i) for i in c)
                                        for c in np.argwhere(np.asarray(pattern) > 0)]
    amap = heatmap(weights, labels, labels, ax=ax_map, vmin=0.0, vmax=1.0, annotate=annotate,
                   colorbar=True, highlight=cells or None, title="the head's attention map")
    return TrainingFigureArtists(fig, curve, amap)


def update_training_figure(artists, losses, step, weights):
    """Show another run (``losses``) and/or step in place: curve, marker and map."""
    losses = _as_1d(losses, "losses")
    artists.curve.line.set_ydata(losses)
    update_marker(artists.curve, step, losses[min(int(step), losses.size - 1)])
    update_heatmap(artists.map, weights, vmin=0.0, vmax=1.0)
    return artists
