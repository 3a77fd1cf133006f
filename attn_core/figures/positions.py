"""Positions: the embeddings' similarity structure (a heatmap and its mean by distance), and
the score against the query-key offset under four position schemes, side by side."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from .base import _as_1d, _as_2d
from .heatmaps import heatmap

__all__ = [
    "POSITION_SCHEMES_SIZE",
    "SCHEME_PANELS",
    "PositionSchemesArtists",
    "PositionSimilarityArtists",
    "position_schemes",
    "position_similarity",
    "update_position_schemes",
]


@dataclass(repr=False)
class PositionSimilarityArtists:
    """What :func:`position_similarity` drew: the ``heatmap`` (HeatmapArtists) of the
    first positions and the ``line`` (Line2D) of the mean similarity by offset."""

    fig: object
    heatmap: object
    line: object

    def __repr__(self):
        shape = self.heatmap.image.get_array().shape
        return f"PositionSimilarityArtists(shape={shape}, offsets={len(self.line.get_xdata())})"


def position_similarity(similarity, by_offset, *, shown=64, fig=None):
    """Cosine similarity of position embeddings (left) and its mean by distance (right).

    Parameters
    ----------
    similarity : (m, m) array_like
        Cosine similarity of every pair of position embeddings (computed by the caller,
        e.g. :func:`attn_core.model.probes.cosine_similarity`).
    by_offset : (k,) array_like
        Mean similarity of positions ``0 .. k - 1`` apart
        (:func:`attn_core.model.probes.mean_by_offset`).
    shown : int, optional
        How many of the first positions the heatmap shows, default 64.
    fig : Figure, optional
        A new one when None.

    Returns
    -------
    PositionSimilarityArtists
    """
    sim = _as_2d(similarity, "similarity")
    means = _as_1d(by_offset, "by_offset")
    if sim.shape[0] != sim.shape[1]:
        raise ValueError(f"similarity must be square (m, m), got shape {sim.shape}")
    if isinstance(shown, bool) or not isinstance(shown, (int, np.integer)) or shown < 2:
        raise ValueError(f"shown must be an int >= 2, got {shown!r}")
    shown = min(int(shown), sim.shape[0])
    if fig is None:
        fig = plt.figure(figsize=(11.0, 4.6), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1.15, 1.0])
    hm = heatmap(sim[:shown, :shown], ax=left, annotate=False, centered=True,
                 xlabel="position", ylabel="position",
                 title=f"cosine similarity, first {shown} positions")
    ticks = np.arange(0, shown, 8)
    left.set_xticks(ticks, [str(t) for t in ticks], rotation=0)
    left.set_yticks(ticks, [str(t) for t in ticks])
    left.tick_params(labelsize=9)
    (line,) = right.plot(np.arange(means.size), means, color="black", lw=1.5)
    right.axhline(0.0, color="grey", lw=0.8, ls="--")
    right.set(xlabel="offset k: positions apart", ylabel="mean cosine similarity",
              title="similarity of positions k apart, averaged", xlim=(0, means.size - 1))
    return PositionSimilarityArtists(fig, hm, line)


# --- the four schemes side by side: score against the query-key offset -------------------

#: Panel order, titles and y-axis labels of :func:`position_schemes`.
SCHEME_PANELS = (
    ("sinusoidal", "sinusoidal (added)", "cos(p_m, p_n)"),
    ("learned", "learned (tiny GPT's wpe)", "cos(p_m, p_n)"),
    ("rope", "RoPE (rotated q, k)", "cos(R_m q, R_n q)"),
    ("alibi", "ALiBi (bias of {h} heads)", "bias added"),
)
_SCHEME_COLORS = ("#0072B2", "#009E73", "#CC79A7", "#D55E00")
#: Figure size (inches) of :func:`position_schemes`: small enough to encode fast as a PNG.
POSITION_SCHEMES_SIZE = (8.4, 4.3)


@dataclass(repr=False)
class PositionSchemesArtists:
    """What :func:`position_schemes` drew: the pair's ``plane`` axes with the ``arrows``
    (query's and key's pair, Line2D each), and per scheme its ``axes``, ``lines`` (a list of
    Line2D: one per ALiBi head, one otherwise), ``markers`` and ``guides``."""

    fig: object
    plane: object
    arrows: list
    axes: dict
    lines: dict
    markers: dict
    guides: dict

    @property
    def dynamic(self):
        """The artists that change with the controls (drawn over the cached background)."""
        return [*self.arrows, *(a for v in self.lines.values() for a in v),
                *self.markers.values(), *self.guides.values()]

    def __repr__(self):
        return f"PositionSchemesArtists(schemes={list(self.axes)})"


def position_schemes(offsets, curves, offset, pair_q, pair_k, *, ylims=None, fig=None):
    """The score between a query and a key against their offset, under four schemes.

    Parameters
    ----------
    offsets : (k,) array_like
        Offsets ``m - n`` (query position minus key position), the x axis of each panel.
    curves : dict
        ``"sinusoidal"``, ``"learned"``, ``"rope"``: ``(k,)`` arrays; ``"alibi"``:
        ``(h, k)``, one row per head. NaN where a curve is not defined.
    offset : int
        The current offset, marked on each curve.
    pair_q, pair_k : (2,) array_like
        One feature pair of the rotated query and key, drawn as arrows in their plane.
    ylims : dict, optional
        Scheme -> (low, high); default from the curves.
    fig : Figure, optional

    Returns
    -------
    PositionSchemesArtists
    """
    xs = _as_1d(offsets, "offsets")
    if fig is None:
        fig = plt.figure(figsize=POSITION_SCHEMES_SIZE, layout="constrained")
    grid = fig.add_gridspec(2, 3, width_ratios=[1.0, 1.2, 1.2])
    plane = fig.add_subplot(grid[:, 0])
    circle = np.linspace(0, 2 * np.pi, 200)
    plane.plot(np.cos(circle), np.sin(circle), color="grey", lw=0.8, ls="--")
    plane.axhline(0, color="grey", lw=0.5)
    plane.axvline(0, color="grey", lw=0.5)
    plane.set(xlim=(-1.25, 1.25), ylim=(-1.25, 1.25), aspect="equal",
              title="RoPE: pair c", xlabel="feature 2c", ylabel="feature 2c + 1")
    arrows = [plane.plot([0, 0], [0, 0], color=c, lw=2.5, marker="o", markevery=[1],
                         label=name)[0]
              for c, name in ((_SCHEME_COLORS[2], "query at m"), ("black", "key at n = m - k"))]
    plane.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=9, frameon=False)
    axes, lines, markers, guides = {}, {}, {}, {}
    for (key, title, ylabel), color, cell in zip(SCHEME_PANELS, _SCHEME_COLORS,
                                                 [grid[0, 1], grid[0, 2], grid[1, 1], grid[1, 2]]):
        ax = fig.add_subplot(cell)
        ys = np.atleast_2d(np.asarray(curves[key], dtype=float))
        lines[key] = [ax.plot(xs, row, color=color, lw=1.4 if ys.shape[0] == 1 else 1.0)[0]
                      for row in ys]
        guides[key] = ax.axvline(offset, color="grey", lw=0.9, ls=":")
        (markers[key],) = ax.plot([offset], [ys[0, 0]], "o", color="black", ms=5)
        lo, hi = (ylims or {}).get(key, (np.nanmin(ys), np.nanmax(ys)))
        ax.set(xlim=(xs[0], xs[-1]), ylim=(lo, hi), title=title.format(h=ys.shape[0]),
               ylabel=ylabel)
        ax.axhline(0.0, color="grey", lw=0.5)
        if cell in (grid[1, 1], grid[1, 2]):
            ax.set_xlabel("offset k = m - n")
        axes[key] = ax
    art = PositionSchemesArtists(fig, plane, arrows, axes, lines, markers, guides)
    update_position_schemes(art, xs, curves, offset, pair_q, pair_k)
    return art


def update_position_schemes(art, offsets, curves, offset, pair_q, pair_k):
    """Move the curves, the markers (at ``offset``) and the pair's arrows in place."""
    xs = _as_1d(offsets, "offsets")
    where = int(np.argmin(np.abs(xs - offset)))
    for key, lines in art.lines.items():
        ys = np.atleast_2d(np.asarray(curves[key], dtype=float))
        for line, row in zip(lines, ys):
            line.set_data(xs, row)
        art.guides[key].set_xdata([offset, offset])
        art.markers[key].set_data([offset], [ys[0, where]])
    for arrow, pair in zip(art.arrows, (pair_q, pair_k)):
        p = np.asarray(pair, dtype=float)
        p = p / (np.linalg.norm(p) or 1.0)
        arrow.set_data([0.0, p[0]], [0.0, p[1]])
    return art
