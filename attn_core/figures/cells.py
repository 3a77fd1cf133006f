"""Shapes over the cells of a grid: one path of unit squares (masked cells, pending
tiles) and the outline that highlights one cell.
"""

from __future__ import annotations

import numpy as np
from matplotlib import patheffects
from matplotlib.patches import PathPatch, Rectangle
from matplotlib.path import Path

from .base import (
    HIGHLIGHT_EDGE_COLOR,
    HIGHLIGHT_HALO_COLOR,
    HIGHLIGHT_HALO_WIDTH,
    HIGHLIGHT_LINEWIDTH,
    MASK_HATCH,
    MASK_HATCH_COLOR,
    MASKED_FACE_COLOR,
    _as_bool_2d,
)

__all__ = [
    "cell_squares_path",
]

def cell_squares_path(cells):
    """One compound path made of a unit square around every True cell of a grid.

    Cell ``(i, j)`` is the square from ``(j - 0.5, i - 0.5)`` to ``(j + 0.5, i + 0.5)`` in
    data coordinates, as ``imshow`` and :func:`heatmap` place it. One ``PathPatch`` of
    this path shades any set of cells (masked-out cells, pending tiles) in one draw.

    Parameters
    ----------
    cells : (n_rows, n_cols) bool array_like
        True where a square is wanted.

    Returns
    -------
    Path
        Empty (a single ``MOVETO``) when no cell is True.

    Examples
    --------
    >>> import numpy as np
    >>> path = cell_squares_path(np.array([[True, False], [False, False]]))
    >>> [float(v) for v in path.get_extents().bounds]
    [-0.5, -0.5, 1.0, 1.0]
    """
    cells = _as_bool_2d(cells, "cells")
    verts, codes = [], []
    for i, j in np.argwhere(cells):
        x, y = j - 0.5, i - 0.5
        verts += [(x, y), (x + 1, y), (x + 1, y + 1), (x, y + 1), (x, y)]
        codes += [Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY]
    if not verts:  # nothing masked: an empty path (the patch is hidden too)
        return Path(np.zeros((1, 2)), [Path.MOVETO])
    return Path(verts, codes)


def _add_mask_patch(ax, allowed):
    patch = PathPatch(
        cell_squares_path(~allowed), facecolor=MASKED_FACE_COLOR, edgecolor=MASK_HATCH_COLOR,
        hatch=MASK_HATCH, linewidth=0, zorder=1.5,  # the hatch takes the edge colour
    )
    patch.set_visible(bool((~allowed).any()))
    patch.set_in_layout(False)
    ax.add_patch(patch)
    return patch


def _highlight_rect(i, j):
    halo = patheffects.withStroke(
        linewidth=HIGHLIGHT_LINEWIDTH + 2 * HIGHLIGHT_HALO_WIDTH, foreground=HIGHLIGHT_HALO_COLOR
    )
    rect = Rectangle(
        (j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor=HIGHLIGHT_EDGE_COLOR,
        linewidth=HIGHLIGHT_LINEWIDTH, zorder=4,
    )
    rect.set_path_effects([halo, patheffects.Normal()])
    rect.set_in_layout(False)
    return rect
