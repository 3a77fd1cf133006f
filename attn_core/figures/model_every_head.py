"""One query's row of weights in every head of the real model, one head outlined."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.collections import LineCollection

from .base import KEY_AXIS_LABEL, token_labels
from .model_axes import (
    _axes_points,
    _axis_title,
    _bare,
    _beside_rows,
    _colorbar,
    _label_margin_in,
    _outline,
    _piece_labels,
    _pitch_pt,
    _place_outline,
    _text,
    _text_width_pt,
    _tick_marks,
    _title,
    _weights_image,
    _widest_pt,
)
from .model_base import (
    EDGE_PT,
    EVERY_MIN_HEIGHT_IN,
    EVERY_MIN_WIDTH_IN,
    EVERY_TITLE,
    HEAD_NUMBER_FONTSIZE,
    LAYER_GAP_PT,
    LAYER_LABEL_FONTSIZE,
    LAYER_NAME,
    LINE_EM,
    MARKER_OFFSET_IN,
    MARKER_SIZE,
    OUTLINE_COLOR,
    SEPARATOR_COLOR,
    SEPARATOR_WIDTH,
    SHORT_LAYER_NAME,
    TICK_LEN_PT,
    TICK_PAD_PT,
    TOP_IN,
    _attentions,
    _pieces,
    check_layer_head,
    query_position,
)
from .model_head_maps import _labels_font, _map_side_in, _new_figure, _set_title

__all__ = [
    "EveryHeadArtists",
    "every_head_rows",
    "image_values",
    "outlined_query",
    "query_in_every_head",
    "selected_head",
    "update_query_in_every_head",
]

@dataclass(repr=False)
class EveryHeadArtists:
    """What :func:`query_in_every_head` drew.

    Attributes
    ----------
    ax : Axes
    image : AxesImage
        ``(layers * heads, n)``: row ``(l - 1) * heads + (h - 1)`` is layer l, head h.
    outline : Rectangle
        Around the selected head's row (hidden when none is selected).
    marker : Line2D
        A triangle right of the image pointing at that row.
    separators : LineCollection
        Thin white lines between the layer blocks.
    layer_labels, head_labels : list of Text
        ``"layer 1"`` ... beside each block; head numbers (1-based) beside their rows.
    col_labels : list of Text
        The key pieces under the columns.
    title : Text
    colorbar : Colorbar or None
    layers, heads : int
    pieces : list of str
    query : int
    selected : (int, int) or None
        The outlined ``(layer, head)``, 1-based.
    fixed_title : str or None
        The title given; None when the title names the query (and changes with it).
    """

    ax: object
    image: object
    outline: object
    marker: object
    separators: object
    layer_labels: list
    head_labels: list
    col_labels: list
    title: object
    colorbar: object
    layers: int
    heads: int
    pieces: list
    query: int
    selected: tuple | None
    fixed_title: str | None = None

    @property
    def dynamic(self):
        """The artists an update changes, in drawing order (separators over the image);
        the title only when it follows the query (no fixed title)."""
        return [self.image, self.separators, self.outline, self.marker,
                *([] if self.fixed_title else [self.title])]

    def __repr__(self):
        return (f"EveryHeadArtists(layers={self.layers}, heads={self.heads}, "
                f"n={len(self.pieces)}, query={self.query}, selected={self.selected})")


# --- one query in every head --------------------------------------------------------------


def _every_labels_in(layers):
    """Room left of the every-head image: head numbers and rotated layer names."""
    return (TICK_LEN_PT + TICK_PAD_PT + _text_width_pt("12", HEAD_NUMBER_FONTSIZE)
            + LAYER_GAP_PT + LINE_EM * LAYER_LABEL_FONTSIZE + EDGE_PT) / 72


def _standalone_every_axes(labels, layers, colorbar):
    width = max(_map_side_in(len(labels)), EVERY_MIN_WIDTH_IN)
    bottom = _label_margin_in(labels, _labels_font(labels, width))
    return _new_figure(_every_labels_in(layers), bottom, width, EVERY_MIN_HEIGHT_IN, TOP_IN,
                       colorbar)


def _every_title(pieces, query):
    return EVERY_TITLE.format(piece=pieces[query], position=query + 1)


def _head_label_stride(row_pt):
    """Write every head's number if they fit, else every second (third, ...)."""
    for stride in (1, 2, 3, 4, 6):
        if stride * row_pt >= _pitch_pt(HEAD_NUMBER_FONTSIZE):
            return stride
    return 12


def _every_head_labels(ax, layers, heads):
    """Layer names beside each block, head numbers (1-based) beside their rows."""
    _, height = _axes_points(ax)
    row_pt = height / (layers * heads)
    stride = _head_label_stride(row_pt)
    rows = np.arange(layers * heads)
    _tick_marks(ax, rows, "y")
    pad = TICK_LEN_PT + TICK_PAD_PT
    numbered = [r for r in rows if (r % heads) % stride == 0]
    head_labels = [_text(ax, 0.0, r, str(r % heads + 1), _beside_rows(ax, -pad), ha="right",
                         va="center", fontsize=HEAD_NUMBER_FONTSIZE) for r in numbered]
    block_pt = heads * row_pt
    long_name = _text_width_pt(LAYER_NAME.format(layers), LAYER_LABEL_FONTSIZE) + 4
    name = LAYER_NAME if block_pt >= long_name else SHORT_LAYER_NAME
    away = pad + _text_width_pt("12", HEAD_NUMBER_FONTSIZE) + LAYER_GAP_PT
    layer_labels = [_text(ax, 0.0, l * heads + (heads - 1) / 2, name.format(l + 1),
                          _beside_rows(ax, -away), rotation=90, ha="right", va="center",
                          fontsize=LAYER_LABEL_FONTSIZE) for l in range(layers)]
    return layer_labels, head_labels


def query_in_every_head(attentions, query, pieces, *, selected=None, ax=None, title=None,
                        colorbar=True):
    """Where one query piece looks in every head at once: one row per head.

    The image has ``layers * heads`` rows, layer by layer (``"layer 1"`` written beside
    its block of ``heads`` rows, thin white lines between blocks, head numbers from 1),
    and one column per key piece. Row ``(layer, head)`` is that head's weights for the
    query, ``attentions[layer - 1, head - 1, query]``; it sums to 1.

    Parameters
    ----------
    attentions : (layers, heads, n, n) array_like
        Every head's weights, e.g. ``run.attentions``.
    query : int or str
        0-based position of the query piece, or the piece (first occurrence).
    pieces : sequence of n str
    selected : (int, int), optional
        The ``(layer, head)`` to outline, 1-based; none when None.
    ax : Axes, optional
        Where to draw; a figure sized to the sentence when None (fix the layout first).
    title : str, optional
        Default: ``query 'it' (piece 8) in every head``.
    colorbar : bool, optional

    Returns
    -------
    EveryHeadArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> a = np.full((2, 3, 4, 4), 0.25)
    >>> art = query_in_every_head(a, 1, ["[CLS]", "a", "b", "[SEP]"], selected=(2, 1))
    >>> every_head_rows(art).shape, [t.get_text() for t in art.layer_labels]
    ((6, 4), ['layer 1', 'layer 2'])
    >>> plt.close(art.ax.figure)
    """
    a = _attentions(attentions)
    layers, heads, n, _ = a.shape
    pieces = _pieces(pieces, n)
    labels = token_labels(pieces)
    q = query_position(query, pieces)
    cax = None
    if ax is None:
        ax, cax = _standalone_every_axes(labels, layers, colorbar)
    image = _weights_image(ax, a[:, :, q, :].reshape(layers * heads, n))
    cbar = _colorbar(ax.figure, image, cax=cax, ax=None if cax else ax) if colorbar else None
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(layers * heads - 0.5, -0.5)
    _bare(ax)
    cols, col_size = _piece_labels(ax, labels, "x")
    _axis_title(ax, KEY_AXIS_LABEL, "x", _widest_pt(labels, col_size))
    layer_labels, head_labels = _every_head_labels(ax, layers, heads)
    lines = [((-0.5, l * heads - 0.5), (n - 0.5, l * heads - 0.5)) for l in range(1, layers)]
    separators = ax.add_collection(LineCollection(lines, colors=SEPARATOR_COLOR,
                                                  linewidths=SEPARATOR_WIDTH, zorder=3),
                                   autolim=False)
    outline = _outline(ax, layers * heads, n, halo=False)
    (marker,) = ax.plot([1.0], [0.0], marker="<", markersize=MARKER_SIZE, color=OUTLINE_COLOR,
                        linestyle="none", clip_on=False, zorder=4,
                        transform=_beside_rows(ax, MARKER_OFFSET_IN * 72))
    marker.set_in_layout(False)
    title_text = _title(ax)
    art = EveryHeadArtists(ax, image, outline, marker, separators, layer_labels, head_labels,
                           cols, title_text, cbar, layers, heads, pieces, q, None)
    return update_query_in_every_head(art, a, q, selected=selected, title=title)


def update_query_in_every_head(artists, attentions, query, *, selected=None, title=None):
    """Show another query (or new weights), move the outline, in place.

    Parameters
    ----------
    artists : EveryHeadArtists
    attentions : (layers, heads, n, n) array_like
        Same shape as drawn.
    query : int or str
    selected : (int, int), optional
        1-based ``(layer, head)`` to outline; None keeps the current one.
    title : str, optional
        A new title; None keeps the title given to :func:`query_in_every_head`, or, if
        none was, writes the default one for the new query.

    Returns
    -------
    EveryHeadArtists
        The same object, updated.
    """
    a = _attentions(attentions)
    shape = (artists.layers, artists.heads, len(artists.pieces), len(artists.pieces))
    if a.shape != shape:
        raise ValueError(f"attentions must have the shape drawn, {shape}, got {a.shape}")
    q = query_position(query, artists.pieces)
    artists.image.set_data(a[:, :, q, :].reshape(shape[0] * shape[1], shape[2]))
    artists.query = q
    if selected is not None:
        artists.selected = check_layer_head(*selected, artists.layers, artists.heads)
    for a in (artists.outline, artists.marker):
        a.set_visible(artists.selected is not None)
    if artists.selected is not None:
        layer, head = artists.selected
        row = (layer - 1) * artists.heads + (head - 1)
        _place_outline(artists.outline, row)
        artists.marker.set_data([1.0], [row])
    if title is not None:
        artists.fixed_title = title
    _set_title(artists.title, artists.fixed_title or _every_title(artists.pieces, q))
    return artists


def every_head_rows(artists):
    """The every-head image read back: ``(layers * heads, n)`` float array.

    Row ``r`` is layer ``r // heads + 1``, head ``r % heads + 1``.
    """
    return np.array(np.ma.getdata(artists.image.get_array()), dtype=float)


def _outlined_row(rect):
    if not rect.get_visible():
        return None
    grow = (rect.get_height() - 1) / 2  # as _outline grew it
    return int(round(rect.get_y() + grow + 0.5))


def selected_head(artists):
    """The outlined ``(layer, head)`` of an :class:`EveryHeadArtists`, 1-based, read back
    from the outline's place (None when nothing is outlined)."""
    row = _outlined_row(artists.outline)
    return None if row is None else (row // artists.heads + 1, row % artists.heads + 1)


def outlined_query(artists):
    """The 0-based query row a :class:`HeadMapArtists` outlines, read back (or None)."""
    return _outlined_row(artists.row_box)


def image_values(artists):
    """The array a head map or every-head image shows, read back as floats."""
    return np.array(np.ma.getdata(artists.image.get_array()), dtype=float)
