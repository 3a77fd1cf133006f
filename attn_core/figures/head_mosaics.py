"""Every head's map in one image on one axes: a mosaic that redraws as one artist."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral

import matplotlib.pyplot as plt
import numpy as np

from .base import (
    HEAD_TITLE,
    LABEL_FONTSIZE,
    MIN_TICK_FONTSIZE,
    SEQUENTIAL_CMAP,
    THEMED_IMAGE,
    TICK_FONTSIZE,
    _check_heads,
    _check_labels,
    token_labels,
)
from .fast_draw import fast_redraws

__all__ = [
    "HeadMosaicArtists",
    "head_mosaic",
    "head_mosaic_layout",
    "head_mosaic_panels",
    "update_head_mosaic",
]

# --- all heads in one image: a mosaic on one axes ---------------------------------------

HEAD_MOSAIC_GAP = 1  # empty cells between two maps side by side
HEAD_MOSAIC_TITLE_POINTS = 9.0  # the band above each row of maps holds "head k"
HEAD_MOSAIC_MAX_TITLE_ROWS = 4  # that band is a whole number of cells, at most this many
HEAD_MOSAIC_LABEL_PER_CELL = 0.8  # token labels: at most this share of a cell (points)
HEAD_MOSAIC_LABEL_PAD = 3.0  # points between a map and its token labels
HEAD_MOSAIC_CAPTION = "each map: rows = queries, columns = keys"
#: Token labels smaller than this (points) are not drawn; the caption says so.
HEAD_MOSAIC_MIN_LABEL_POINTS = 7
HEAD_MOSAIC_TOKENS_NOTE = " (token labels left out at this size: tokens in sentence order)"


def mosaic_labels_shown(layout):
    """True if the token labels of ``layout``'s cells are large enough to be drawn."""
    return math.floor(HEAD_MOSAIC_LABEL_PER_CELL * layout.cell_points) >= (
        HEAD_MOSAIC_MIN_LABEL_POINTS)


@dataclass(frozen=True)
class HeadMosaicLayout:
    """Where each head's map sits in the mosaic (array rows and columns).

    Attributes
    ----------
    heads, n : int
        Number of maps and their side (tokens).
    nrows, ncols : int
        Maps per column and per row of the grid, filled row by row.
    title_rows : int
        Empty rows above each row of maps, where the titles go.
    shape : (int, int)
        Shape of the whole mosaic array.
    origins : tuple of (int, int)
        Top-left array index of each head's map.
    cell_points : float
        Side of one cell in points, in the box the layout was made for.
    """

    heads: int
    n: int
    nrows: int
    ncols: int
    title_rows: int
    shape: tuple
    origins: tuple
    cell_points: float


def head_mosaic_layout(heads, n, box_points):
    """Arrange ``heads`` maps of ``n`` x ``n`` cells in a box, with the largest cells.

    Every grid of 1 to ``heads`` columns is tried; the band above each row of maps is the
    fewest whole cells that hold a title of ``HEAD_MOSAIC_TITLE_POINTS``.

    Parameters
    ----------
    heads, n : int
    box_points : (float, float)
        Width and height available for the mosaic, in points.

    Returns
    -------
    HeadMosaicLayout

    Examples
    --------
    >>> layout = head_mosaic_layout(4, 10, (400, 400))
    >>> layout.nrows, layout.ncols, layout.shape
    (2, 2, (22, 21))
    """
    for name, value in (("heads", heads), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    box_w, box_h = (float(v) for v in box_points)
    best = None
    for ncols in range(1, heads + 1):
        nrows = math.ceil(heads / ncols)
        if math.ceil(heads / nrows) != ncols:  # a whole empty column: never the best
            continue
        width = ncols * n + (ncols - 1) * HEAD_MOSAIC_GAP
        for title_rows in range(1, HEAD_MOSAIC_MAX_TITLE_ROWS + 1):
            cell = min(box_w / width, box_h / (nrows * (n + title_rows)))
            if title_rows * cell >= HEAD_MOSAIC_TITLE_POINTS:
                break
        if best is None or cell > best[0] + 1e-9:
            best = (cell, nrows, ncols, title_rows)
    cell, nrows, ncols, title_rows = best
    origins = tuple((r * (n + title_rows) + title_rows, c * (n + HEAD_MOSAIC_GAP))
                    for r, c in (divmod(k, ncols) for k in range(heads)))
    shape = (nrows * (n + title_rows), ncols * n + (ncols - 1) * HEAD_MOSAIC_GAP)
    return HeadMosaicLayout(heads, n, nrows, ncols, title_rows, shape, origins, cell)


def _tile_heads(w, layout):
    mosaic = np.full(layout.shape, np.nan)  # the gaps are NaN: drawn transparent
    n = layout.n
    for wk, (r, c) in zip(w, layout.origins, strict=True):
        mosaic[r:r + n, c:c + n] = wk
    return mosaic


@dataclass(repr=False)
class HeadMosaicArtists:
    """What :func:`head_mosaic` drew: every head's map in ONE image on one axes.

    A new head count re-tiles the same image and re-uses a fixed pool of Text artists
    (shown, hidden, moved), so no axes or figure is ever built again.

    Attributes
    ----------
    ax : Axes
    image : AxesImage
        The mosaic: every map, NaN in the gaps.
    titles : list of Text
        ``"head 1"``, ``"head 2"``, ...; the pool, only the first ``heads`` shown.
    row_labels, col_labels : list of Text
        Token labels left of the first column of maps and under the last map of each
        column; a pool too.
    colorbar : Colorbar
    caption : Text
    layout : HeadMosaicLayout
        The current arrangement.
    """

    ax: object
    image: object
    titles: list
    row_labels: list
    col_labels: list
    colorbar: object
    caption: object
    layout: HeadMosaicLayout
    tokens: list | None
    box_points: tuple

    def __repr__(self):
        return f"HeadMosaicArtists(heads={self.layout.heads}, n={self.layout.n})"


def _pool(pool, count, ax, **style):
    while len(pool) < count:
        pool.append(ax.text(0, 0, "", visible=False, **style))
    for k, text in enumerate(pool):
        text.set_visible(k < count)
    return pool[:count]


def _place_mosaic_texts(art):
    lay, ax = art.layout, art.ax
    n = lay.n
    names = [str(k) for k in range(n)] if art.tokens is None else art.tokens
    label_size = int(np.clip(math.floor(HEAD_MOSAIC_LABEL_PER_CELL * lay.cell_points),
                             MIN_TICK_FONTSIZE, TICK_FONTSIZE))
    title_size = int(np.clip(math.floor(lay.title_rows * lay.cell_points * 0.8),
                             MIN_TICK_FONTSIZE + 1, LABEL_FONTSIZE))
    for k, (text, (r, c)) in enumerate(zip(
            _pool(art.titles, lay.heads, ax, ha="center", va="bottom"), lay.origins,
            strict=True)):
        text.set_text(HEAD_TITLE.format(k + 1))
        text.set_position((c + (n - 1) / 2, r - 0.5 - 0.1))
        text.set_fontsize(title_size)
    pad = HEAD_MOSAIC_LABEL_PAD / lay.cell_points  # in cells
    shown = mosaic_labels_shown(lay)
    caption = art.caption.get_text().replace(HEAD_MOSAIC_TOKENS_NOTE, "")
    if caption and not shown:
        caption += HEAD_MOSAIC_TOKENS_NOTE
    art.caption.set_text(caption)
    rows = [(r + i, names[i]) for r, c in lay.origins if c == 0 for i in range(n) if shown]
    for text, (y, name) in zip(_pool(art.row_labels, len(rows), ax, ha="right", va="center"),
                               rows, strict=True):
        text.set_text(name)
        text.set_position((-0.5 - pad, y))
        text.set_fontsize(label_size)
    bottoms = {}  # column of maps -> the array row under its last map
    for r, c in lay.origins:
        bottoms[c] = max(bottoms.get(c, 0), r + n)
    cols = [(c + j, bottom, names[j]) for c, bottom in sorted(bottoms.items())
            for j in range(n) if shown]
    for text, (x, y, name) in zip(
            _pool(art.col_labels, len(cols), ax, ha="center", va="top", rotation=90),
            cols, strict=True):
        text.set_text(name)
        text.set_position((x, y - 0.5 + pad))
        text.set_fontsize(label_size)


def _set_mosaic(art, w):
    h, n, _ = w.shape
    if (h, n) != (art.layout.heads, art.layout.n):
        art.layout = head_mosaic_layout(h, n, art.box_points)
        rows, cols = art.layout.shape
        art.image.set_extent((-0.5, cols - 0.5, rows - 0.5, -0.5))
        art.ax.set_xlim(-0.5, cols - 0.5)
        art.ax.set_ylim(rows - 0.5, -0.5)
        art.ax.apply_aspect()  # the axes box fits the new mosaic now, not at the next full
        #                        draw: an explorer that redraws only the image needs it
        _place_mosaic_texts(art)
    art.image.set_data(np.ma.masked_invalid(_tile_heads(w, art.layout)))


def head_mosaic(weights, tokens=None, *, ax=None, caption=HEAD_MOSAIC_CAPTION):
    """Draw every head's attention weights as one mosaic image on a single axes.

    The maps share one 0-1 colour scale and one colour bar; each has a title above it,
    token labels sit left of the first column of maps and under the last map of each
    column. Unlike :func:`head_grid`, a different head count is shown in place by
    :func:`update_head_mosaic` (one image re-tiled, a pool of texts moved), which is what
    an explorer needs to stay fast.

    Parameters
    ----------
    weights : (h, n, n) array_like
        Attention weights per head (self-attention: square maps).
    tokens : sequence of n str, optional
        Token labels; indices when None.
    ax : Axes, optional
        Where to draw (its frame is turned off; a colour bar is taken from its room). The
        maps are as large as the axes' current box allows: fix the figure layout first.
    caption : str or None, optional
        A line at the top left of the figure saying how to read a map.

    Returns
    -------
    HeadMosaicArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> art = head_mosaic(np.full((2, 3, 3), 1 / 3), ["a", "b", "c"])
    >>> [t.get_text() for t in art.titles], art.image.get_array().shape
    (['head 1', 'head 2'], (4, 7))
    >>> plt.close(art.ax.figure)
    """
    w = _check_heads(weights)
    h, n_q, n_k = w.shape
    if n_q != n_k:
        raise ValueError(f"each head's map must be square (self-attention), got {w.shape}")
    names = _check_labels(tokens, n_q, "tokens", "token")
    names = None if names is None else token_labels(names)
    if ax is None:
        fig = plt.figure(figsize=(8.0, 6.6))
        ax = fig.add_axes((0.1, 0.1, 0.8, 0.84))
    fig = ax.figure
    ax.set_axis_off()
    # redrawn by one gather of the cells' colours (fast_draw.NearestImage): the same pixels
    # as matplotlib's resampling, which was most of a change of the heads explorer
    (image,) = fast_redraws(ax.imshow(
        np.zeros((1, 1)), cmap=plt.get_cmap(SEQUENTIAL_CMAP).with_extremes(bad=(0, 0, 0, 0)),
        vmin=0.0, vmax=1.0, interpolation="nearest", aspect="equal"))
    # Its cells are viridis colours (none a grey) and paper, with no numbers on them; the
    # titles and labels are written on its paper: it follows the dark theme as the rest of
    # the figure does (as an image kept as it is, the text stayed dark on the dark page,
    # ringed by paper too thin to be found).
    image.set_gid(THEMED_IMAGE)
    cbar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    cbar.set_label("weight", fontsize=LABEL_FONTSIZE)
    cbar.ax.tick_params(labelsize=TICK_FONTSIZE)
    box = ax.get_position()
    box_points = (box.width * fig.get_figwidth() * 72, box.height * fig.get_figheight() * 72)
    text = fig.text(0.01, 0.99, caption or "", ha="left", va="top", fontsize=LABEL_FONTSIZE)
    art = HeadMosaicArtists(ax, image, [], [], [], cbar, text,
                            HeadMosaicLayout(0, 0, 0, 0, 0, (1, 1), (), 0.0), names, box_points)
    _set_mosaic(art, w)
    return art


def update_head_mosaic(artists, weights):
    """Show new weights, for any head count (same tokens), in place.

    Parameters
    ----------
    artists : HeadMosaicArtists
    weights : (h, n, n) array_like
        ``n`` must match the tokens given to :func:`head_mosaic` (if any).

    Returns
    -------
    HeadMosaicArtists
        The same object, updated; ``artists.layout`` changes when ``h`` does.
    """
    w = _check_heads(weights)
    if w.shape[1] != w.shape[2]:
        raise ValueError(f"each head's map must be square (self-attention), got {w.shape}")
    if artists.tokens is not None and w.shape[1] != len(artists.tokens):
        raise ValueError(
            f"weights must have {len(artists.tokens)} tokens, as labelled, got {w.shape}")
    _set_mosaic(artists, w)
    return artists


def head_mosaic_panels(artists):
    """Read the maps back out of the mosaic image: ``(h, n, n)`` float array.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> w = np.random.default_rng(0).random((3, 4, 4))
    >>> art = head_mosaic(w)
    >>> bool((head_mosaic_panels(art) == w).all())
    True
    >>> plt.close(art.ax.figure)
    """
    data = np.ma.getdata(artists.image.get_array()).astype(float)
    n = artists.layout.n
    return np.stack([data[r:r + n, c:c + n] for r, c in artists.layout.origins])
