"""The position embeddings' similarity structure: a heatmap and its mean by distance."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from .base import _as_1d, _as_2d
from .heatmaps import heatmap

__all__ = [
    "PositionSimilarityArtists",
    "position_similarity",
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
