"""Multi-head attention as a grid of small heatmaps, one per head."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral

import matplotlib.pyplot as plt
import numpy as np

from .base import (
    COLORBAR_INCHES,
    FIG_MAX_SIZE,
    GRID_LAYOUT,
    HEAD_GRID_MARGIN_INCHES,
    HEAD_GRID_MAX_COLS,
    HEAD_PANEL_INCHES,
    HEAD_TITLE,
    HEAD_TITLE_INCHES,
    KEY_AXIS_LABEL,
    LABEL_FONTSIZE,
    QUERY_AXIS_LABEL,
    TICK_FONTSIZE,
    _check_heads,
    _check_labels,
    _clip_size,
)
from .heatmaps import heatmap, update_heatmap

__all__ = [
    "HeadGridArtists",
    "head_grid",
    "update_head_grid",
]

@dataclass(repr=False)
class HeadGridArtists:
    """What :func:`head_grid` drew.

    Attributes
    ----------
    fig : Figure
    axes : list of Axes
        One per head (unused grid slots are removed).
    heatmaps : list of HeatmapArtists
        One per head.
    colorbar : Colorbar
        The one colour bar all heads share (0 to 1).
    """

    fig: object
    axes: list
    heatmaps: list
    colorbar: object

    def __repr__(self):
        return f"HeadGridArtists(heads={len(self.heatmaps)})"


# --- one small heatmap per head ---------------------------------------------------------


def head_grid(weights, tokens=None, *, fig=None, ncols=None, titles=None, annotate=False,
              fmt="{:.2f}"):
    """Draw each head's attention weights as a small heatmap, on one shared 0-1 scale.

    Token labels appear only on the outer panels (bottom row, left column) and one
    colour bar serves all heads, so the grid stays uncluttered.

    Parameters
    ----------
    weights : (h, n_q, n_k) array_like
        Attention weights per head (rows sum to 1).
    tokens : sequence of str, optional
        Token labels for both axes (self-attention: n_q == n_k == len(tokens)).
    fig : Figure, optional
        An empty figure to draw in; a new one when None.
    ncols : int, optional
        Panels per row; ``min(h, HEAD_GRID_MAX_COLS)`` when None.
    titles : sequence of h str, optional
        ``"head 1"``, ``"head 2"``, ... when None.
    annotate : bool or "auto", optional
        Write the numbers in the cells (off by default: the panels are small).
    fmt : str, optional

    Returns
    -------
    HeadGridArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> art = head_grid(np.full((2, 3, 3), 1 / 3), ["a", "b", "c"])
    >>> len(art.heatmaps), art.heatmaps[1].ax.get_title()
    (2, 'head 2')
    >>> plt.close(art.fig)
    """
    w = _check_heads(weights)
    h, n_q, n_k = w.shape
    rows = _check_labels(tokens, n_q, "tokens", "query row")
    cols = _check_labels(tokens, n_k, "tokens", "key column")
    titles = [HEAD_TITLE.format(k + 1) for k in range(h)] if titles is None else list(titles)
    if len(titles) != h:
        raise ValueError(f"titles must have {h} entries (one per head), got {len(titles)}")
    if ncols is None:
        ncols = min(h, HEAD_GRID_MAX_COLS)
    elif isinstance(ncols, bool) or not isinstance(ncols, Integral) or not 1 <= ncols <= h:
        raise ValueError(f"ncols must be an integer from 1 to the head count {h}, got {ncols!r}")
    nrows = math.ceil(h / ncols)
    if fig is None:
        margin_w, margin_h = HEAD_GRID_MARGIN_INCHES
        panel = np.clip(
            min((FIG_MAX_SIZE[0] - margin_w - COLORBAR_INCHES) / ncols,
                (FIG_MAX_SIZE[1] - margin_h) / nrows - HEAD_TITLE_INCHES),
            *HEAD_PANEL_INCHES,
        )
        panel = min(panel, max(HEAD_PANEL_INCHES[0], 0.3 * max(n_q, n_k)))
        fig = plt.figure(figsize=_clip_size(ncols * panel + margin_w + COLORBAR_INCHES,
                                            nrows * (panel + HEAD_TITLE_INCHES) + margin_h),
                         layout=GRID_LAYOUT)
    grid = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
    for ax in grid.ravel()[h:]:
        ax.remove()
    axes = list(grid.ravel()[:h])
    heatmaps = []
    for k, ax in enumerate(axes):
        row, col = divmod(k, ncols)
        bottom = k + ncols >= h  # no panel below this one
        left = col == 0
        heatmaps.append(heatmap(
            w[k], rows, cols, ax=ax, vmin=0.0, vmax=1.0, annotate=annotate, fmt=fmt,
            colorbar=False, title=titles[k], xlabel=KEY_AXIS_LABEL if bottom else None,
            ylabel=QUERY_AXIS_LABEL if left else None,
        ))
        ax.title.set_fontsize(LABEL_FONTSIZE)
        ax.tick_params(labelbottom=bottom, labelleft=left)
    cbar = fig.colorbar(heatmaps[0].image, ax=axes, shrink=0.9)
    cbar.set_label("weight", fontsize=LABEL_FONTSIZE)
    cbar.ax.tick_params(labelsize=TICK_FONTSIZE)
    return HeadGridArtists(fig, axes, heatmaps, cbar)


def update_head_grid(artists, weights):
    """Show new weights with the same number of heads and tokens, in place.

    Parameters
    ----------
    artists : HeadGridArtists
    weights : (h, n_q, n_k) array_like
        Same shape as the weights first drawn.

    Returns
    -------
    HeadGridArtists
        The same object, updated.
    """
    w = _check_heads(weights)
    old = (len(artists.heatmaps), *artists.heatmaps[0].image.get_array().shape)
    if w.shape != old:
        raise ValueError(
            f"weights must keep the drawn shape {old} (heads, n_q, n_k), got {w.shape}; "
            "draw a new head_grid for a different head count or length"
        )
    for hm, wk in zip(artists.heatmaps, w, strict=True):
        update_heatmap(hm, wk)
    return artists
