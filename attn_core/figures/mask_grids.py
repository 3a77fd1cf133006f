"""A boolean mask as a grid of ticks and crosses (may attend / masked)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from matplotlib.colors import ListedColormap, to_rgba
from matplotlib.patches import Patch

from .base import (
    ALLOWED_COLOR,
    GRID_LAYOUT,
    KEY_AXIS_LABEL,
    LABEL_FONTSIZE,
    MASK_LEGEND,
    MASK_SYMBOL_FONTSIZE,
    MASK_SYMBOL_PER_CELL,
    MASK_SYMBOLS,
    MASKED_FACE_COLOR,
    MIN_ANNOTATION_FONTSIZE,
    QUERY_AXIS_LABEL,
    TITLE_FONTSIZE,
    TOKEN_MAX_LEN,
    _as_bool_2d,
    _cell_points,
    _check_labels,
    _heatmap_figsize,
    _new_axes,
    _set_grid_ticks,
    _text_colors,
    _wrap_to_axes,
    token_labels,
)

__all__ = [
    "MaskGridArtists",
    "mask_grid",
    "update_mask_grid",
]

@dataclass(repr=False)
class MaskGridArtists:
    """What :func:`mask_grid` drew.

    Attributes
    ----------
    ax : Axes
    image : AxesImage
        Its array is the mask as 0/1 (1 = may attend).
    texts : (n_rows, n_cols) object ndarray of Text
        ``"✓"`` or ``"✗"`` in each cell.
    legend : Legend
    """

    ax: object
    image: object
    texts: np.ndarray
    legend: object

    def __repr__(self):
        return f"MaskGridArtists(shape={self.texts.shape})"


# --- masks ------------------------------------------------------------------------------


def _mask_cmap():
    return ListedColormap([MASKED_FACE_COLOR, ALLOWED_COLOR])


def _mask_text_colors():
    return {flag: str(_text_colors(to_rgba(c)))
            for flag, c in ((True, ALLOWED_COLOR), (False, MASKED_FACE_COLOR))}


def mask_grid(
    mask, row_labels=None, col_labels=None, *, ax=None, title=None, xlabel=KEY_AXIS_LABEL,
    ylabel=QUERY_AXIS_LABEL, max_label_len=TOKEN_MAX_LEN,
):
    """Draw a boolean attention mask as a two-colour grid with ✓ and ✗ in the cells.

    Parameters
    ----------
    mask : (n_rows, n_cols) bool array_like
        True where the query (row) may attend to the key (column), as ``causal_mask``.
    row_labels, col_labels : sequence of str, optional
    ax : Axes, optional
    title, xlabel, ylabel : str, optional
    max_label_len : int, optional

    Returns
    -------
    MaskGridArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> art = mask_grid(np.tril(np.ones((3, 3), dtype=bool)))
    >>> art.texts[0, 0].get_text(), art.texts[0, 2].get_text()
    ('✓', '✗')
    >>> plt.close(art.ax.figure)
    """
    allowed = _as_bool_2d(mask, "mask")
    rows = _check_labels(row_labels, allowed.shape[0], "row_labels", "row")
    cols = _check_labels(col_labels, allowed.shape[1], "col_labels", "column")
    rows = None if rows is None else token_labels(rows, max_label_len)
    cols = None if cols is None else token_labels(cols, max_label_len)
    if ax is None:
        size = _heatmap_figsize(allowed.shape, True, title)  # legend takes the bar's room
        ax = _new_axes((size[0] + 0.4, size[1]), GRID_LAYOUT)
    image = ax.imshow(allowed.astype(float), cmap=_mask_cmap(), vmin=0, vmax=1,
                      interpolation="nearest", aspect="equal")
    _set_grid_ticks(ax, rows, cols, allowed.shape)
    n_rows, n_cols = allowed.shape
    ax.set_xticks(np.arange(-0.5, n_cols), minor=True)
    ax.set_yticks(np.arange(-0.5, n_rows), minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel(xlabel or "", fontsize=LABEL_FONTSIZE)
    ax.set_ylabel(ylabel or "", fontsize=LABEL_FONTSIZE)
    if title:
        ax.set_title(_wrap_to_axes(ax, title, TITLE_FONTSIZE), fontsize=TITLE_FONTSIZE)
    colors = _mask_text_colors()
    size = np.clip(math.floor(MASK_SYMBOL_PER_CELL * _cell_points(ax, allowed.shape)),
                   MIN_ANNOTATION_FONTSIZE, MASK_SYMBOL_FONTSIZE)
    texts = np.empty(allowed.shape, dtype=object)
    for (i, j), flag in np.ndenumerate(allowed):
        texts[i, j] = ax.text(j, i, MASK_SYMBOLS[bool(flag)], ha="center", va="center",
                              color=colors[bool(flag)], fontsize=int(size), in_layout=False)
    handles = [Patch(facecolor=c, edgecolor="none", label=f"{MASK_SYMBOLS[f]} {MASK_LEGEND[f]}")
               for f, c in ((True, ALLOWED_COLOR), (False, MASKED_FACE_COLOR))]
    legend = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       borderaxespad=0.0, frameon=False, fontsize=LABEL_FONTSIZE)
    return MaskGridArtists(ax, image, texts, legend)


def update_mask_grid(artists, mask):
    """Show a new mask of the same shape in place.

    Parameters
    ----------
    artists : MaskGridArtists
    mask : (n_rows, n_cols) bool array_like

    Returns
    -------
    MaskGridArtists
        The same object, updated.
    """
    allowed = _as_bool_2d(mask, "mask", artists.texts.shape)
    artists.image.set_data(allowed.astype(float))
    colors = _mask_text_colors()
    for (i, j), flag in np.ndenumerate(allowed):
        artists.texts[i, j].set_text(MASK_SYMBOLS[bool(flag)])
        artists.texts[i, j].set_color(colors[bool(flag)])
    return artists
