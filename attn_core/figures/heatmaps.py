"""A matrix as a heatmap: numbers in the cells, masked cells hatched, cells outlined."""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import to_rgba

from .base import (
    ANNOTATE_MAX_SIDE,
    ANNOTATION_FONTSIZE,
    DIVERGING_CMAP,
    GRID_LAYOUT,
    KEY_AXIS_LABEL,
    LABEL_FONTSIZE,
    MASKED_FACE_COLOR,
    MASKED_TEXT_BOX,
    MIN_ANNOTATION_FONTSIZE,
    QUERY_AXIS_LABEL,
    SEQUENTIAL_CMAP,
    TICK_FONTSIZE,
    TITLE_FONTSIZE,
    TOKEN_MAX_LEN,
    _as_2d,
    _as_bool_2d,
    _cell_points,
    _check_cells,
    _check_labels,
    _format,
    _heatmap_figsize,
    _new_axes,
    _set_grid_limits,
    _set_grid_ticks,
    _text_colors,
    _wrap_to_axes,
    token_labels,
)
from .cells import _add_mask_patch, _highlight_rect, cell_squares_path
from .fast_draw import fast_redraws

__all__ = [
    "HeatmapArtists",
    "heatmap",
    "update_heatmap",
]

@dataclass(repr=False)
class HeatmapArtists:
    """What :func:`heatmap` drew.

    Attributes
    ----------
    ax : Axes
    image : AxesImage
        Its array is the matrix (NaN and +-inf masked out).
    texts : (n_rows, n_cols) object ndarray of Text, or None when not annotated
    colorbar : Colorbar or None
    highlights : list of Rectangle
        One outline per highlighted cell, in the order given.
    mask_patch : PathPatch or None
        One hatched patch covering every masked-out cell.
    allowed : (n_rows, n_cols) bool ndarray or None
        The mask shown (True = may attend), None when there is none.
    """

    ax: object
    image: object
    texts: np.ndarray | None
    colorbar: object
    highlights: list
    mask_patch: object
    fmt: str
    annotate: bool | str
    vlim: tuple  # the (vmin, vmax) asked for; None entries follow the data
    centered: bool
    row_labels: list | None
    col_labels: list | None
    allowed: np.ndarray | None

    def __repr__(self):
        shape = self.image.get_array().shape
        return f"HeatmapArtists(shape={shape}, annotated={self.texts is not None})"


# --- heatmap ----------------------------------------------------------------------------


def _colormap(cmap, centered):
    base = plt.get_cmap(cmap if cmap is not None else
                        (DIVERGING_CMAP if centered else SEQUENTIAL_CMAP))
    return base.with_extremes(bad=MASKED_FACE_COLOR)


def _color_limits(values, vlim, centered, allowed=None):
    """Colour limits: those given, else from the finite values that are not masked out
    (symmetric about 0 if centered)."""
    shown = np.isfinite(values) if allowed is None else np.isfinite(values) & allowed
    finite = values[shown]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if centered:
        half = max(abs(lo), abs(hi)) or 1.0
        lo, hi = -half, half
    lo = lo if vlim[0] is None else vlim[0]
    hi = hi if vlim[1] is None else vlim[1]
    if lo == hi:  # a constant matrix still gets a valid colour scale
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def _annotation_fontsize(ax, shape, strings):
    """Largest size up to ANNOTATION_FONTSIZE at which the widest number fits its cell."""
    cell = _cell_points(ax, shape)
    widest = max((len(s) for s in strings.ravel()), default=1) or 1
    size = min(cell / (0.62 * widest + 0.6), cell / 1.6, ANNOTATION_FONTSIZE)
    return max(MIN_ANNOTATION_FONTSIZE, math.floor(size))


def _resolve_annotate(annotate, shape):
    if annotate == "auto":
        return max(shape) <= ANNOTATE_MAX_SIDE
    return bool(annotate)


def _cell_text_colors(image, values):
    return _text_colors(image.cmap(image.norm(np.ma.masked_invalid(values))))


def _make_texts(ax, image, values, fmt, allowed):
    strings = np.vectorize(lambda v: _format(v, fmt), otypes=[object])(values)
    size = _annotation_fontsize(ax, values.shape, strings)
    texts = np.empty(values.shape, dtype=object)
    for (i, j), s in np.ndenumerate(strings):
        texts[i, j] = ax.text(j, i, s, ha="center", va="center", fontsize=size, zorder=3,
                              in_layout=False)  # inside its cell: the layout can skip it
    _update_texts(texts, image, values, fmt, allowed)
    return texts


def _update_texts(texts, image, values, fmt, allowed):
    colors = _cell_text_colors(image, values)
    masked = np.zeros(values.shape, dtype=bool) if allowed is None else ~allowed
    colors[masked] = _text_colors(to_rgba(MASKED_FACE_COLOR))
    for (i, j), v in np.ndenumerate(values):
        text = texts[i, j]
        text.set_text(_format(v, fmt))
        text.set_color(colors[i, j])
        has_box = text.get_bbox_patch() is not None
        if masked[i, j] and not has_box:
            text.set_bbox(MASKED_TEXT_BOX)
        elif has_box and not masked[i, j]:
            text.set_bbox(None)


def heatmap(
    matrix, row_labels=None, col_labels=None, *, ax=None, cmap=None, vmin=None, vmax=None,
    centered=False, annotate="auto", fmt="{:.2f}", colorbar=True, highlight=None, mask=None,
    title=None, xlabel=KEY_AXIS_LABEL, ylabel=QUERY_AXIS_LABEL, max_label_len=TOKEN_MAX_LEN,
):
    """Draw a matrix as coloured cells with its numbers written in them.

    Rows are queries and columns are keys (the axis labels say so by default), so row
    ``i`` reads as "how much token ``i`` attends to each token".

    Parameters
    ----------
    matrix : (n_rows, n_cols) array_like
        NaN and +-inf are allowed: drawn grey, written ``"−∞"``/``"∞"``/blank.
    row_labels : sequence of n_rows str, optional
        Query tokens; cut to ``max_label_len`` characters. Integer ticks when None.
    col_labels : sequence of n_cols str, optional
        Key tokens; rotated when longer than two characters.
    ax : Axes, optional
        Where to draw; a new figure sized to the matrix when None.
    cmap : str or Colormap, optional
        ``SEQUENTIAL_CMAP`` (viridis) by default, ``DIVERGING_CMAP`` (PuOr) if centered.
    vmin, vmax : float, optional
        Colour limits; from the finite, not masked-out values when None.
    centered : bool, optional
        For signed data: limits symmetric about 0 and a diverging map.
    annotate : bool or "auto", optional
        Write the numbers; "auto" does so up to ``ANNOTATE_MAX_SIDE`` cells a side.
        Text is black or white, whichever contrasts more with the cell.
    fmt : str, optional
        Format of each number.
    colorbar : bool, optional
    highlight : sequence of (i, j), optional
        Cells to outline (a single ``(i, j)`` pair is accepted too).
    mask : (n_rows, n_cols) bool array_like, optional
        True where a query may attend (as in ``causal_mask``); False cells are hatched
        grey as masked out.
    title, xlabel, ylabel : str, optional
    max_label_len : int, optional

    Returns
    -------
    HeatmapArtists

    Raises
    ------
    ValueError
        If ``matrix`` is not 2-D, a label list or the mask does not fit its shape, or a
        highlighted cell is outside it.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> art = heatmap([[0.7, 0.3], [0.4, 0.6]], ["it", "was"], ["it", "was"],
    ...               highlight=[(0, 1)])
    >>> art.texts[0, 1].get_text(), art.highlights[0].get_xy()
    ('0.30', (0.5, -0.5))
    >>> plt.close(art.ax.figure)
    """
    values = _as_2d(matrix, "matrix")
    rows = _check_labels(row_labels, values.shape[0], "row_labels", "row")
    cols = _check_labels(col_labels, values.shape[1], "col_labels", "column")
    allowed = None if mask is None else _as_bool_2d(mask, "mask", values.shape)
    cells = _check_cells(highlight, values.shape, "highlight")
    rows = None if rows is None else token_labels(rows, max_label_len)
    cols = None if cols is None else token_labels(cols, max_label_len)
    if ax is None:
        ax = _new_axes(_heatmap_figsize(values.shape, colorbar, title), GRID_LAYOUT)
    lo, hi = _color_limits(values, (vmin, vmax), centered, allowed)
    (image,) = fast_redraws(ax.imshow(  # redrawn by one gather, the same pixels
        np.ma.masked_invalid(values), cmap=_colormap(cmap, centered), vmin=lo, vmax=hi,
        interpolation="nearest", aspect="equal",
    ))
    _set_grid_ticks(ax, rows, cols, values.shape)
    ax.set_xlabel(xlabel or "", fontsize=LABEL_FONTSIZE)
    ax.set_ylabel(ylabel or "", fontsize=LABEL_FONTSIZE)
    if title:
        ax.set_title(_wrap_to_axes(ax, title, TITLE_FONTSIZE), fontsize=TITLE_FONTSIZE)
    mask_patch = None if allowed is None else _add_mask_patch(ax, allowed)
    texts = None
    if _resolve_annotate(annotate, values.shape):
        texts = _make_texts(ax, image, values, fmt, allowed)
    patches = [ax.add_patch(_highlight_rect(i, j)) for i, j in cells]
    cbar = None
    if colorbar:
        cbar = ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        cbar.ax.tick_params(labelsize=TICK_FONTSIZE)
    return HeatmapArtists(
        ax, image, texts, cbar, patches, mask_patch, fmt, annotate, (vmin, vmax), centered,
        rows, cols, allowed,
    )


def update_heatmap(
    artists, matrix, *, mask=None, highlight=None, vmin=None, vmax=None, row_labels=None,
    col_labels=None,
):
    """Change a heatmap's numbers in place (for explorers).

    With the shape unchanged no artist is created: the image data, the colour limits,
    the annotation texts (and their black/white colour), the mask and the highlight
    outlines are updated. A new shape (for example a sequence-length slider) replaces
    the annotation texts and the ticks, since the number of cells changed.

    Parameters
    ----------
    artists : HeatmapArtists
        From :func:`heatmap`.
    matrix : (n_rows, n_cols) array_like
    mask : (n_rows, n_cols) bool array_like, optional
        New mask (True = may attend); None keeps the current one (or, on a new shape,
        shows none).
    highlight : sequence of (i, j), optional
        New highlighted cells; None keeps the current ones, ``[]`` clears them. The
        outlines are moved; only a different number of cells adds or removes some.
    vmin, vmax : float, optional
        New colour limits; None keeps what :func:`heatmap` was given (data-driven
        limits follow the new data).
    row_labels, col_labels : sequence of str, optional
        New tick labels (needed when the shape changes and labels are wanted).

    Returns
    -------
    HeatmapArtists
        The same object, updated.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> art = heatmap([[0.7, 0.3], [0.4, 0.6]])
    >>> image = art.image
    >>> art = update_heatmap(art, [[0.1, 0.9], [0.5, 0.5]])
    >>> art.image is image, art.texts[0, 1].get_text()
    (True, '0.90')
    >>> plt.close(art.ax.figure)
    """
    values = _as_2d(matrix, "matrix")
    ax, image = artists.ax, artists.image
    old_shape = image.get_array().shape
    reshaped = values.shape != old_shape
    rows = _check_labels(row_labels, values.shape[0], "row_labels", "row")
    cols = _check_labels(col_labels, values.shape[1], "col_labels", "column")
    allowed = None if mask is None else _as_bool_2d(mask, "mask", values.shape)
    if allowed is None and not reshaped:
        allowed = artists.allowed
    if vmin is not None:
        artists.vlim = (vmin, artists.vlim[1])
    if vmax is not None:
        artists.vlim = (artists.vlim[0], vmax)
    image.set_data(np.ma.masked_invalid(values))
    image.set_clim(*_color_limits(values, artists.vlim, artists.centered, allowed))
    if reshaped:
        _reshape_heatmap(artists, values, rows, cols)
    elif rows is not None or cols is not None:
        _set_grid_ticks(ax, rows or artists.row_labels, cols or artists.col_labels, values.shape)
    _update_mask(artists, allowed)
    if artists.texts is not None:
        _update_texts(artists.texts, image, values, artists.fmt, allowed)
    elif reshaped and _resolve_annotate(artists.annotate, values.shape):
        artists.texts = _make_texts(ax, image, values, artists.fmt, allowed)
    if highlight is not None:
        _update_highlights(artists, _check_cells(highlight, values.shape, "highlight"))
    return artists


def _update_mask(artists, allowed):
    same = (allowed is not None and artists.allowed is not None
            and np.array_equal(allowed, artists.allowed))
    artists.allowed = allowed
    if same and artists.mask_patch is not None:  # the same cells: the path is built already
        return
    if allowed is None:
        if artists.mask_patch is not None:
            artists.mask_patch.set_visible(False)
        return
    if artists.mask_patch is None:  # first mask ever given: one patch, created once
        artists.mask_patch = _add_mask_patch(artists.ax, allowed)
        return
    artists.mask_patch.set_path(cell_squares_path(~allowed))
    artists.mask_patch.set_visible(bool((~allowed).any()))


def _update_highlights(artists, cells):
    patches = artists.highlights
    while len(patches) > len(cells):
        patches.pop().remove()
    for k, (i, j) in enumerate(cells):
        if k < len(patches):
            patches[k].set_xy((j - 0.5, i - 0.5))
        else:
            patches.append(artists.ax.add_patch(_highlight_rect(i, j)))


def _reshape_heatmap(artists, values, rows, cols):
    ax = artists.ax
    n_rows, n_cols = values.shape
    artists.image.set_extent((-0.5, n_cols - 0.5, n_rows - 0.5, -0.5))
    _set_grid_limits(ax, values.shape)
    artists.row_labels = None if rows is None else token_labels(rows)
    artists.col_labels = None if cols is None else token_labels(cols)
    _set_grid_ticks(ax, artists.row_labels, artists.col_labels, values.shape)
    if artists.texts is not None:
        for text in artists.texts.ravel():
            text.remove()
        artists.texts = _make_texts(ax, artists.image, values, artists.fmt, None)
    _update_highlights(artists, [
        (i, j) for i, j in ((int(round(p.get_y() + 0.5)), int(round(p.get_x() + 0.5)))
                            for p in artists.highlights)
        if i < n_rows and j < n_cols
    ])
