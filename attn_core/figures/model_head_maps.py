"""One head of the real model: its attention map, the query's row outlined."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from .base import KEY_AXIS_LABEL, QUERY_AXIS_LABEL, token_labels
from .model_axes import (
    _axis_title,
    _bare,
    _colorbar,
    _fit_font,
    _label_margin_in,
    _outline,
    _piece_labels,
    _pitch_pt,
    _place_outline,
    _title,
    _weights_image,
    _widest_pt,
)
from .model_base import (
    CELL_MAX_IN,
    COLORBAR_GAP_IN,
    COLORBAR_LABELS_IN,
    COLORBAR_WIDTH_IN,
    EDGE_PT,
    FONT_MAX,
    FONT_MIN,
    MAP_MAX_IN,
    MAP_MIN_IN,
    MAP_TARGET_IN,
    TOP_IN,
    _pieces,
    _square,
    query_position,
)

__all__ = [
    "HeadMapArtists",
    "head_map",
    "update_head_map",
]

@dataclass(repr=False)
class HeadMapArtists:
    """What :func:`head_map` drew.

    Attributes
    ----------
    ax : Axes
    image : AxesImage
        The (n, n) weights; rows are queries, columns keys.
    row_box : Rectangle
        The outline of the query's row (hidden when no query is chosen).
    title : Text
    colorbar : Colorbar or None
    row_labels, col_labels : list of Text
        The piece labels written beside the rows and under the columns.
    pieces : list of str
        The pieces as given (the tick labels are shortened by
        :func:`attn_core.figures.token_labels`).
    query : int or None
        0-based row outlined.
    """

    ax: object
    image: object
    row_box: object
    title: object
    colorbar: object
    row_labels: list
    col_labels: list
    pieces: list
    query: int | None

    @property
    def dynamic(self):
        """The artists an update changes (an explorer redraws only these)."""
        return [self.image, self.row_box, self.title]

    def __repr__(self):
        return f"HeadMapArtists(n={len(self.pieces)}, query={self.query})"


# --- one head's map -----------------------------------------------------------------------


def _map_side_in(n):
    """Side of a head map of ``n`` pieces (inches): large cells for a short sentence,
    FONT_MIN labels for a long one, never more than MAP_MAX_IN.

    Examples
    --------
    >>> round(_map_side_in(12), 2), round(_map_side_in(40), 2)
    (3.36, 4.75)
    """
    size = FONT_MAX
    while size > FONT_MIN and n * _pitch_pt(size) / 72 > MAP_TARGET_IN:
        size -= 0.5
    side = max(n * _pitch_pt(size) / 72, min(n * CELL_MAX_IN, MAP_TARGET_IN))
    return float(np.clip(side, MAP_MIN_IN, MAP_MAX_IN))


def _labels_font(labels, side_in):
    """The font :func:`_piece_labels` will use on a side of ``side_in`` inches."""
    return _fit_font(side_in * 72 / len(labels))[0]


def _new_figure(left, bottom, width, height, top, colorbar):
    """A pyplot figure with one axes of ``width`` x ``height`` inches at (left, bottom),
    and a colour-bar axes right of it (or None): ``(ax, cax)``."""
    right = EDGE_PT / 72 + (COLORBAR_GAP_IN + COLORBAR_WIDTH_IN + COLORBAR_LABELS_IN
                            if colorbar else 0.0)
    fig_w, fig_h = left + width + right, bottom + height + top
    fig = plt.figure(figsize=(fig_w, fig_h))
    ax = fig.add_axes((left / fig_w, bottom / fig_h, width / fig_w, height / fig_h))
    cax = None
    if colorbar:
        cax = fig.add_axes(((left + width + COLORBAR_GAP_IN) / fig_w, bottom / fig_h,
                            COLORBAR_WIDTH_IN / fig_w, height / fig_h))
    return ax, cax


def _standalone_map_axes(labels, title, colorbar):
    side = _map_side_in(len(labels))
    margin = _label_margin_in(labels, _labels_font(labels, side))
    return _new_figure(margin, margin, side, side, TOP_IN if title else EDGE_PT / 72,
                       colorbar)


def _set_title(text, value):
    text.set_text(value or "")
    text.set_visible(bool(value))


def head_map(weights, pieces, query=None, *, ax=None, title=None, colorbar=True):
    """Draw one head's attention map with the word pieces on both axes.

    Rows are queries (each row sums to 1: where that piece looks), columns are keys. The
    colour scale is fixed at 0 to 1 (viridis), so maps of different heads compare. Column
    labels are written vertically and the font is fitted to the cells, so labels never
    overlap (a sentence too long for the smallest font gets every second label).

    Parameters
    ----------
    weights : (n, n) array_like
        One head's weights, e.g. ``run.attentions[layer - 1, head - 1]``.
    pieces : sequence of n str
        The word pieces, ``[CLS]`` first; written shortened to 8 characters.
    query : int or str, optional
        The query whose row is outlined (0-based position, or a piece); none when None.
    ax : Axes, optional
        Where to draw; a figure sized to the sentence when None. Labels are fitted to the
        axes' size when drawn here, so fix the figure's layout first.
    title : str, optional
    colorbar : bool, optional

    Returns
    -------
    HeadMapArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> w = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
    >>> art = head_map(w, ["[CLS]", "hi", "[SEP]"], query=1, title="layer 1, head 1")
    >>> [t.get_text() for t in art.row_labels], art.query
    (['[CLS]', 'hi', '[SEP]'], 1)
    >>> plt.close(art.ax.figure)
    """
    w = _square(weights)
    n = w.shape[0]
    pieces = _pieces(pieces, n)
    labels = token_labels(pieces)
    q = None if query is None else query_position(query, pieces)
    cax = None
    if ax is None:
        ax, cax = _standalone_map_axes(labels, title, colorbar)
    image = _weights_image(ax, w)
    # the colour bar first: taking its room from ax would change the size that the
    # labels and the outline are fitted to
    cbar = _colorbar(ax.figure, image, cax=cax, ax=None if cax else ax) if colorbar else None
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(n - 0.5, -0.5)
    _bare(ax)
    rows, row_size = _piece_labels(ax, labels, "y")
    cols, col_size = _piece_labels(ax, labels, "x")
    _axis_title(ax, QUERY_AXIS_LABEL, "y", _widest_pt(labels, row_size))
    _axis_title(ax, KEY_AXIS_LABEL, "x", _widest_pt(labels, col_size))
    box = _outline(ax, n, n)
    title_text = _title(ax)
    art = HeadMapArtists(ax, image, box, title_text, cbar, rows, cols, pieces, None)
    return update_head_map(art, w, q, title=title)


def update_head_map(artists, weights, query=None, *, title=None):
    """Show another head's weights (same pieces), another query row, a new title.

    Parameters
    ----------
    artists : HeadMapArtists
    weights : (n, n) array_like
    query : int or str, optional
        The row to outline; None keeps the current one.
    title : str, optional
        None keeps the current title.

    Returns
    -------
    HeadMapArtists
        The same object, updated.
    """
    w = _square(weights)
    n = len(artists.pieces)
    if w.shape != (n, n):
        raise ValueError(f"weights must be ({n}, {n}), one row and column per piece "
                         f"labelled, got {w.shape}")
    artists.image.set_data(w)
    if query is not None:
        artists.query = query_position(query, artists.pieces)
    artists.row_box.set_visible(artists.query is not None)
    if artists.query is not None:
        _place_outline(artists.row_box, artists.query)
    if title is not None:
        _set_title(artists.title, title)
    return artists
