"""A grid drawn at the largest size, showing only its first n tokens (the rest faded),
so that an explorer can change the length without rebuilding its figure.

Used by notebook 07's ``mask_explorer`` (:mod:`attn_core.explorers.masks`), for its
sequence-length slider; "beyond" is the tokens beyond the length, not notebook 18.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.colors import to_rgba
from matplotlib.patches import PathPatch, Rectangle

from .base import _check_index
from .cells import cell_squares_path

__all__ = [
    "BeyondLengthArtists",
    "fade_beyond_length",
    "update_fade_beyond_length",
]

# --- a grid of the largest size, showing only its first n tokens ------------------------

BEYOND_FACE_COLOR = "white"  # cells of tokens beyond the length: blank
BEYOND_LABEL_ALPHA = 0.75  # their labels: faded by a white veil this opaque


@dataclass(repr=False)
class BeyondLengthArtists:
    """What :func:`fade_beyond_length` added.

    Attributes
    ----------
    ax : Axes
    cells : PathPatch
        White squares over every cell of a token beyond the length.
    row_veil, col_veil : Rectangle
        Half-transparent white boxes over the tick labels of those tokens.
    """

    ax: object
    cells: object
    row_veil: object
    col_veil: object
    shape: tuple
    label_boxes: dict

    @property
    def artists(self):
        """The three patches, to draw again after each update."""
        return [self.cells, self.row_veil, self.col_veil]

    def __repr__(self):
        return f"BeyondLengthArtists(shape={self.shape})"


def fade_beyond_length(ax, shape):
    """Prepare a token grid drawn at its largest size to show only its first tokens.

    An explorer whose sequence-length slider must not change the axes (new tick labels
    mean a full redraw) draws the grid once at the largest size, with every token's
    label, and calls :func:`update_fade_beyond_length` to blank the cells of the tokens
    beyond the length and fade their labels. Column labels are turned upright so each
    stays within its column.

    Parameters
    ----------
    ax : Axes
        A :func:`heatmap` or :func:`mask_grid` axes of the largest ``shape``.
    shape : (int, int)

    Returns
    -------
    BeyondLengthArtists
        Nothing is hidden until :func:`update_fade_beyond_length` is called.
    """
    ax.tick_params(axis="x", labelrotation=90)  # ticks made later inherit it
    for label in ax.get_xticklabels():
        label.set(rotation=90, ha="center", rotation_mode="default")
    cells = PathPatch(cell_squares_path(np.zeros(shape, dtype=bool)),
                      facecolor=BEYOND_FACE_COLOR, edgecolor="none", zorder=2.5,
                      visible=False)
    cells.set_in_layout(False)
    ax.add_patch(cells)
    veils = []
    for _ in range(2):
        veil = Rectangle((0, 0), 0, 0, transform=ax.transAxes, clip_on=False, zorder=5,
                         facecolor=to_rgba(BEYOND_FACE_COLOR, BEYOND_LABEL_ALPHA),
                         edgecolor="none", visible=False)
        veil.set_in_layout(False)
        ax.add_patch(veil)
        veils.append(veil)
    return BeyondLengthArtists(ax, cells, veils[0], veils[1], tuple(shape), {})


def _label_boxes(art, axis):
    """Tick label boxes in axes coordinates, measured once (the layout must be final)."""
    if axis not in art.label_boxes:
        ax = art.ax
        renderer = ax.figure.canvas.get_renderer()
        ax.get_tightbbox(renderer)  # brings the ticks and their labels up to date
        labels = ax.get_yticklabels() if axis == "y" else ax.get_xticklabels()
        to_axes = ax.transAxes.inverted()
        art.label_boxes[axis] = [
            to_axes.transform(label.get_window_extent(renderer).get_points()) for label in labels]
    return art.label_boxes[axis]


def _veil(veil, boxes):
    if not boxes:
        veil.set_visible(False)
        return
    pts = np.concatenate(boxes)
    (x0, y0), (x1, y1) = pts.min(axis=0), pts.max(axis=0)
    veil.set_bounds(x0, y0, x1 - x0, y1 - y0)
    veil.set_visible(True)


def update_fade_beyond_length(artists, n_rows, n_cols):
    """Show only the first ``n_rows`` rows and ``n_cols`` columns of the grid, in place.

    Call it after the figure's layout is final (the label boxes are measured once).

    Parameters
    ----------
    artists : BeyondLengthArtists
    n_rows, n_cols : int
        From 1 to the grid's shape.

    Returns
    -------
    BeyondLengthArtists
        The same object, updated.
    """
    rows, cols = artists.shape
    _check_index(n_rows - 1, rows, "n_rows")
    _check_index(n_cols - 1, cols, "n_cols")
    beyond = np.zeros(artists.shape, dtype=bool)
    beyond[n_rows:, :] = True
    beyond[:, n_cols:] = True
    artists.cells.set_path(cell_squares_path(beyond))
    artists.cells.set_visible(bool(beyond.any()))
    _veil(artists.row_veil, _label_boxes(artists, "y")[n_rows:])
    _veil(artists.col_veil, _label_boxes(artists, "x")[n_cols:])
    return artists
