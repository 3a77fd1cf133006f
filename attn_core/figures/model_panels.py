"""The model explorer's figure: one head's map beside the query in every head,
laid out once per sentence (``panels_layout``), and its static edition
(``explorer_figure``) for notebooks read without a kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .alt import set_alt_text
from .base import token_labels
from .model_axes import _colorbar, _label_margin_in
from .model_base import (
    COLORBAR_GAP_IN,
    COLORBAR_LABELS_IN,
    COLORBAR_WIDTH_IN,
    EDGE_PT,
    EVERY_MIN_HEIGHT_IN,
    EVERY_MIN_WIDTH_IN,
    EXPLORER_DPI,
    EXPLORER_PIXELS_PER_IN,
    MAP_GAP_IN,
    MAP_TITLE,
    TOP_IN,
    _attentions,
    _pieces,
    check_layer_head,
    query_position,
)
from .model_every_head import (
    EveryHeadArtists,
    _every_labels_in,
    query_in_every_head,
    update_query_in_every_head,
)
from .model_head_maps import HeadMapArtists, _labels_font, _map_side_in, head_map, update_head_map

__all__ = [
    "ExplorerPanelsArtists",
    "PanelsLayout",
    "explorer_figure",
    "explorer_panels",
    "panels_layout",
    "update_explorer_panels",
]

@dataclass(frozen=True)
class PanelsLayout:
    """Where :func:`explorer_panels` puts its axes, in inches and figure fractions.

    Attributes
    ----------
    figsize : (float, float)
        Width and height in inches.
    map_rect, every_rect, colorbar_rect : (left, bottom, width, height)
        Figure fractions of the head map, the every-head image and the colour bar.
    """

    figsize: tuple
    map_rect: tuple
    every_rect: tuple
    colorbar_rect: tuple


@dataclass(repr=False)
class ExplorerPanelsArtists:
    """What :func:`explorer_panels` drew: a head map beside one query in every head.

    Attributes
    ----------
    fig : Figure
    head_map : HeadMapArtists
    every_head : EveryHeadArtists
    colorbar : Colorbar
        One 0-1 scale for both pictures.
    layout : PanelsLayout
    layer, head, query : int
        The state shown: 1-based layer and head, 0-based query position.
    """

    fig: object
    head_map: HeadMapArtists
    every_head: EveryHeadArtists
    colorbar: object
    layout: PanelsLayout
    layer: int
    head: int
    query: int

    @property
    def dynamic(self):
        """Every artist a slider move changes."""
        return [*self.head_map.dynamic, *self.every_head.dynamic]

    def __repr__(self):
        return (f"ExplorerPanelsArtists(n={len(self.head_map.pieces)}, layer={self.layer}, "
                f"head={self.head}, query={self.query})")


# --- the explorer's figure ----------------------------------------------------------------


def _whole_pixels(inches):
    """``inches`` rounded up to whole pixels of the explorer (``EXPLORER_PIXELS_PER_IN``)."""
    return math.ceil(inches * EXPLORER_PIXELS_PER_IN - 1e-9) / EXPLORER_PIXELS_PER_IN


def panels_layout(pieces, layers=6, heads=12):
    """Figure size and axes places for :func:`explorer_panels`, fitted to the sentence.

    Parameters
    ----------
    pieces : sequence of n str
    layers, heads : int

    Returns
    -------
    PanelsLayout

    Examples
    --------
    >>> lay = panels_layout(["[CLS]", "hi", "[SEP]"])
    >>> [round(v, 1) for v in lay.figsize]
    [6.7, 5.7]
    """
    labels = token_labels([str(p) for p in pieces])
    side = _whole_pixels(_map_side_in(len(labels)))
    every_w = max(side, EVERY_MIN_WIDTH_IN)
    every_h = max(side, EVERY_MIN_HEIGHT_IN)
    left = _whole_pixels(_label_margin_in(labels, _labels_font(labels, side)))
    gap = _whole_pixels(MAP_GAP_IN + _every_labels_in(layers))
    right = _whole_pixels(COLORBAR_GAP_IN + COLORBAR_WIDTH_IN + COLORBAR_LABELS_IN
                          + EDGE_PT / 72)
    bottom = _whole_pixels(max(
        _label_margin_in(labels, _labels_font(labels, every_w)),
        _label_margin_in(labels, _labels_font(labels, side)) - (every_h - side)))
    width = left + side + gap + every_w + right
    height = bottom + every_h + TOP_IN
    y_top = (bottom + every_h) / height

    def rect(x, w, h):
        return (x / width, y_top - h / height, w / width, h / height)

    every_x = left + side + gap
    return PanelsLayout((width, height), rect(left, side, side), rect(every_x, every_w, every_h),
                        rect(every_x + every_w + _whole_pixels(COLORBAR_GAP_IN),
                             _whole_pixels(COLORBAR_WIDTH_IN), every_h))


def explorer_panels(attentions, pieces, layer=1, head=1, query=1, *, fig=None):
    """The model explorer's picture: one head's map beside one query in every head.

    Left, the map of head ``(layer, head)`` with the query's row outlined; right, that
    query's row in every head, the same head outlined; one 0-1 colour bar.

    Parameters
    ----------
    attentions : (layers, heads, n, n) array_like
    pieces : sequence of n str
    layer, head : int
        1-based.
    query : int or str
        0-based position, or a piece (first occurrence).
    fig : Figure, optional
        An empty figure to draw in (it is resized to :func:`panels_layout`); a new
        pyplot figure when None.

    Returns
    -------
    ExplorerPanelsArtists
    """
    a = _attentions(attentions)
    layers, heads, n, _ = a.shape
    labels = _pieces(pieces, n)
    layer, head = check_layer_head(layer, head, layers, heads)
    q = query_position(query, labels)
    lay = panels_layout(labels, layers, heads)
    if fig is None:
        fig = plt.figure(figsize=lay.figsize)
    else:
        fig.set_size_inches(*lay.figsize)
    map_ax = fig.add_axes(lay.map_rect)
    every_ax = fig.add_axes(lay.every_rect)
    cax = fig.add_axes(lay.colorbar_rect)
    hm = head_map(a[layer - 1, head - 1], labels, q, ax=map_ax, colorbar=False,
                  title=MAP_TITLE.format(layer=layer, head=head))
    every = query_in_every_head(a, q, labels, selected=(layer, head), ax=every_ax,
                                colorbar=False)  # the title names the query and follows it
    cbar = _colorbar(fig, every.image, cax=cax)
    return ExplorerPanelsArtists(fig, hm, every, cbar, lay, layer, head, q)


def update_explorer_panels(artists, attentions, layer, head, query):
    """Show another head, query (or sentence of the same pieces) in place.

    Returns
    -------
    ExplorerPanelsArtists
        The same object, updated.
    """
    a = _attentions(attentions)
    layer, head = check_layer_head(layer, head, a.shape[0], a.shape[1])
    q = query_position(query, artists.head_map.pieces)
    update_head_map(artists.head_map, a[layer - 1, head - 1], q,
                    title=MAP_TITLE.format(layer=layer, head=head))
    update_query_in_every_head(artists.every_head, a, q, selected=(layer, head))
    artists.layer, artists.head, artists.query = layer, head, q
    return artists


def explorer_figure(run, layer=1, head=1, query="it", *, dpi=EXPLORER_DPI):
    """The explorer's default picture as a plain Figure, for a notebook's static "Try it".

    Parameters
    ----------
    run : SentenceRun
        Anything with ``.attentions (layers, heads, n, n)`` and ``.pieces``.
    layer, head : int
        1-based.
    query : int or str
        0-based position, or a piece (first occurrence), as in the explorer.
    dpi : float, optional

    Returns
    -------
    matplotlib.figure.Figure
        On an Agg canvas (no pyplot: nothing is shown or kept open by pyplot).
    """
    fig = Figure(dpi=dpi)
    FigureCanvasAgg(fig)
    art = explorer_panels(run.attentions, run.pieces, layer, head, query, fig=fig)
    piece = run.pieces[art.query]
    set_alt_text(fig, f"Layer {layer}, head {head} of the model on the sentence: its attention "
                      f"map (rows: query pieces, columns: key pieces, colour: weight 0 to 1), "
                      f"and beside it the row of the query piece '{piece}' in every head of "
                      f"every layer, grouped by layer, with this head's row outlined.")
    return fig
