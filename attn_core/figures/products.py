"""Textbook matrices: one bracketed block of numbers, and the A x B = C diagram with
one row times one column highlighted and written out as a sum of products.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import to_rgba
from matplotlib.patches import Rectangle

from .alt import set_alt_text
from .base import (
    BRACKET_ARM,
    BRACKET_GAP,
    BRACKET_LINEWIDTH,
    CAPTION_FONTSIZE,
    CAPTION_LINE_INCHES,
    HIGHLIGHT_EDGE_COLOR,
    HIGHLIGHT_FILL_ALPHA,
    HIGHLIGHT_FILL_COLOR,
    HIGHLIGHT_LINEWIDTH,
    MATRIX_CELL_INCHES,
    MATRIX_FONTSIZE,
    MATRIX_PAD,
    OPERATOR_FONTSIZE,
    OPERATOR_INCHES,
    TEXT_DARK,
    TIMES,
    _as_1d,
    _as_2d,
    _check_cells,
    _check_index,
    _clip_size,
    _format,
    _new_axes,
)

__all__ = [
    "MatrixBlockArtists",
    "ProductDiagramArtists",
    "matrix_block",
    "matrix_product_diagram",
    "sum_of_products_text",
]

@dataclass(repr=False)
class MatrixBlockArtists:
    """What :func:`matrix_block` drew.

    Attributes
    ----------
    ax : Axes
    texts : (n_rows, n_cols) object ndarray of Text
    title : Text
        Name and shape, e.g. ``"Q  (4 × 2)"``.
    brackets : tuple of two Line2D
    row_patches, col_patches, cell_patches : list of Rectangle
        Shading of the highlighted rows, columns and cells (in the order given).
    """

    ax: object
    texts: np.ndarray
    title: object
    brackets: tuple
    row_patches: list
    col_patches: list
    cell_patches: list

    def __repr__(self):
        return f"MatrixBlockArtists(shape={self.texts.shape}, title={self.title.get_text()!r})"


@dataclass(repr=False)
class ProductDiagramArtists:
    """What :func:`matrix_product_diagram` drew.

    Attributes
    ----------
    fig : Figure
    blocks : tuple of three MatrixBlockArtists
        A, B and C, left to right.
    operators : tuple of two Text
        The ``"×"`` and the ``"="``.
    caption : Text or None
        The highlighted arithmetic, one line per highlighted cell of C.
    """

    fig: object
    blocks: tuple
    operators: tuple
    caption: object

    def __repr__(self):
        shapes = tuple(b.texts.shape for b in self.blocks)
        return f"ProductDiagramArtists(shapes={shapes})"


def sum_of_products_text(row, col, fmt="{:.2f}"):
    """Write a dot product out with its numbers: ``"1.00×1.10 + 0.50×0.40 = 1.30"``.

    The total is computed here from ``row`` and ``col`` (in float64, left to right).
    Negative factors are put in brackets: ``"1.00×(-0.40)"``. With a fixed-point ``fmt``
    (``"{:.2f}"``) the factors get as many more decimals as it takes (up to 4 more) for the
    written terms to add up, by hand, to the written total: a reader who checks the
    arithmetic on paper must not find a slip that is only rounding.

    Parameters
    ----------
    row, col : (k,) array_like
    fmt : str, optional
        Format for the total, and the least precise format for the factors.

    Returns
    -------
    str

    Examples
    --------
    >>> sum_of_products_text([1.0, 0.5], [1.1, 0.4])
    '1.00×1.10 + 0.50×0.40 = 1.30'
    >>> sum_of_products_text([0.3214, 0.2417, 0.2337, 0.2032], [1.0, 3.0, 0.5, 2.0])
    '0.321×1.00 + 0.242×3.00 + 0.234×0.50 + 0.203×2.00 = 1.57'
    """
    row = _as_1d(row, "row")
    col = _as_1d(col, "col")
    if row.shape != col.shape:
        raise ValueError(f"row and col must have the same length, got {row.size} and {col.size}")
    total = float(np.dot(row, col))
    factor_fmt = _fmt_adding_up(row, col, total, fmt)
    terms = [f"{_factor(x, factor_fmt(x))}{TIMES}{_factor(y, factor_fmt(y))}"
             for x, y in zip(row.tolist(), col.tolist(), strict=True)]
    return " + ".join(terms) + " = " + _format(total, fmt)


_FIXED_POINT = re.compile(r"^\{:\.(\d+)f\}$")


def _fmt_adding_up(row, col, total, fmt, extra=4):
    """A per-factor format, with the fewest decimals whose products add up to ``total``.

    Factors that are already exact at ``fmt``'s precision (2.0, 0.5) keep it; the others
    get more decimals until the sum of the written products rounds to the written total.
    """
    match = _FIXED_POINT.match(fmt)
    if match is None:
        return lambda _: fmt
    base = int(match.group(1))
    target = round(total, base)
    for decimals in range(base, base + extra + 1):
        def shown(x, d=decimals):
            return round(x, base) if round(x, base) == round(x, d) else round(x, d)
        if round(sum(shown(x) * shown(y) for x, y in zip(row, col)), base) == target:
            break

    def factor_fmt(x, d=decimals):
        return fmt if round(x, base) == round(x, d) else f"{{:.{d}f}}"
    return factor_fmt


def _factor(value, fmt):
    text = _format(value, fmt)
    return f"({text})" if text.startswith("-") else text


# --- matrix blocks and the A x B = C diagram --------------------------------------------


def _shade(ax, x, y, width, height, *, outline=False):
    """A highlight rectangle in data coordinates; ``outline`` adds a strong edge."""
    return ax.add_patch(Rectangle(
        (x, y), width, height, facecolor=to_rgba(HIGHLIGHT_FILL_COLOR, HIGHLIGHT_FILL_ALPHA),
        edgecolor=HIGHLIGHT_EDGE_COLOR if outline else "none",
        linewidth=HIGHLIGHT_LINEWIDTH if outline else 0, zorder=2 if outline else 1,
    ))


def _brackets(ax, n_rows, n_cols):
    top, bottom = -0.5, n_rows - 0.5
    left, right = -0.5 - BRACKET_GAP, n_cols - 0.5 + BRACKET_GAP
    style = dict(color=TEXT_DARK, linewidth=BRACKET_LINEWIDTH, solid_capstyle="butt")
    (lb,) = ax.plot([left + BRACKET_ARM, left, left, left + BRACKET_ARM],
                    [top, top, bottom, bottom], **style)
    (rb,) = ax.plot([right - BRACKET_ARM, right, right, right - BRACKET_ARM],
                    [top, top, bottom, bottom], **style)
    return lb, rb


def _block_title(name, shape):
    size = f"({shape[0]} {TIMES} {shape[1]})"
    return f"{name}  {size}" if name else size


def _block_ylim(n_rows, total_rows):
    """Vertical limits that centre n_rows inside total_rows, with room for the title."""
    centre = (n_rows - 1) / 2
    half = total_rows / 2 + MATRIX_PAD
    return centre + half, centre - half - 1.0  # one extra row on top for the title


def matrix_block(
    matrix, *, ax=None, name=None, fmt="{:.2f}", highlight_rows=(), highlight_cols=(),
    highlight_cells=(),
):
    """Draw a small matrix as a textbook would: numbers in brackets, name and shape above.

    Parameters
    ----------
    matrix : (n_rows, n_cols) array_like
    ax : Axes, optional
        Where to draw (its frame is turned off); a new figure when None.
    name : str, optional
        Written above, before the shape: ``"Q  (4 × 2)"``.
    fmt : str, optional
        Format of each number.
    highlight_rows, highlight_cols : sequence of int, optional
        Rows and columns to shade.
    highlight_cells : sequence of (i, j), optional
        Cells to shade and outline.

    Returns
    -------
    MatrixBlockArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> art = matrix_block([[1.0, 0.5], [0.2, 1.4]], name="Q", highlight_rows=[0])
    >>> art.title.get_text(), art.texts[1, 1].get_text()
    ('Q  (2 × 2)', '1.40')
    >>> plt.close(art.ax.figure)
    """
    values = _as_2d(matrix, "matrix")
    n_rows, n_cols = values.shape
    rows = [_check_index(i, n_rows, "highlight_rows") for i in highlight_rows]
    cols = [_check_index(j, n_cols, "highlight_cols") for j in highlight_cols]
    cells = _check_cells(highlight_cells, values.shape, "highlight_cells")
    if ax is None:
        w, h = MATRIX_CELL_INCHES
        ax = _new_axes(_clip_size((n_cols + 2 * MATRIX_PAD) * w + 0.4,
                                  (n_rows + 1 + 2 * MATRIX_PAD) * h + 0.4))
    ax.set_axis_off()
    row_patches = [_shade(ax, -0.5, i - 0.5, n_cols, 1) for i in rows]
    col_patches = [_shade(ax, j - 0.5, -0.5, 1, n_rows) for j in cols]
    cell_patches = [_shade(ax, j - 0.5, i - 0.5, 1, 1, outline=True) for i, j in cells]
    texts = np.empty(values.shape, dtype=object)
    for (i, j), v in np.ndenumerate(values):
        texts[i, j] = ax.text(j, i, _format(v, fmt), ha="center", va="center",
                              fontsize=MATRIX_FONTSIZE, color=TEXT_DARK, zorder=3)
    brackets = _brackets(ax, n_rows, n_cols)
    title = ax.text((n_cols - 1) / 2, -0.5 - MATRIX_PAD, _block_title(name, values.shape),
                    ha="center", va="bottom", fontsize=MATRIX_FONTSIZE, color=TEXT_DARK)
    ax.set_xlim(-0.5 - MATRIX_PAD, n_cols - 0.5 + MATRIX_PAD)
    ax.set_ylim(*_block_ylim(n_rows, n_rows))
    return MatrixBlockArtists(ax, texts, title, brackets, row_patches, col_patches,
                              cell_patches)


def _product_highlight(highlight, n, m):
    """(i, j) with j an int (one cell) or None (the whole row i of the result)."""
    if highlight is None:
        return None
    if len(highlight) != 2:
        raise ValueError(f"highlight must be (i, j), (i, None) or None, got {highlight!r}")
    i = _check_index(highlight[0], n, "highlight")
    j = None if highlight[1] is None else _check_index(highlight[1], m, "highlight")
    return i, j


def _product_caption(a, b, name, i, j, fmt, index_base=0):
    columns = range(b.shape[1]) if j is None else [j]

    def label(col):
        if index_base == 0:
            return f"{name}[{i}, {col}]"
        return f"{name} (row {i + index_base}, column {col + index_base})"
    return "\n".join(
        f"{label(col)} = {sum_of_products_text(a[i], b[:, col], fmt)}" for col in columns
    )


def matrix_product_diagram(
    a, b, c, *, names=("Q", "Kᵀ", "scores"), highlight=(0, 0), fmt="{:.2f}", fig=None,
    index_base=0,
):
    """Draw ``A × B = C`` as three matrix blocks, with one cell's arithmetic spelled out.

    Row ``i`` of A, column ``j`` of B and cell ``(i, j)`` of C are shaded, and a caption
    underneath writes that cell as a sum of products with the actual numbers, e.g.
    ``scores[0, 0] = 1.00×1.10 + 0.50×0.40 = 1.30``. With ``highlight=(i, None)`` the
    whole row ``i`` of C is shaded and the caption has one line per column of C (the
    weighted-sum figure: output row = weights row × V).

    The caption is computed from ``a`` and ``b`` at full precision, its factors written
    with enough decimals to add up by hand (see :func:`sum_of_products_text`); the cells
    of C show ``c`` as given.
    If ``c`` is not ``a @ b`` (a printed matrix with a mistake), the two disagree, which
    is what a notebook pointing out that mistake wants to show.

    Parameters
    ----------
    a : (n, k) array_like
    b : (k, m) array_like
    c : (n, m) array_like
    names : tuple of three str, optional
    highlight : (i, j) or (i, None) or None, optional
        The cell (or row) of C to explain; None shades nothing and has no caption.
    fmt : str, optional
        Format of every number, in the blocks and the caption.
    fig : Figure, optional
        An empty figure to draw in; a new one sized to the matrices when None.
    index_base : {0, 1}, optional
        How the caption names the cell: ``scores[0, 0]`` (numpy's indices, the default)
        or, with 1, ``scores (row 1, column 1)`` as the course's prose counts.

    Returns
    -------
    ProductDiagramArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> q = [[1.0, 0.5], [0.2, 1.4]]
    >>> kt = [[1.1, 0.3], [0.4, 1.2]]
    >>> art = matrix_product_diagram(q, kt, [[1.3, 0.9], [0.78, 1.74]])
    >>> art.caption.get_text()
    'scores[0, 0] = 1.00×1.10 + 0.50×0.40 = 1.30'
    >>> plt.close(art.fig)
    """
    a = _as_2d(a, "a")
    b = _as_2d(b, "b")
    c = _as_2d(c, "c")
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"a's columns must match b's rows, got a {a.shape} and b {b.shape}"
        )
    if c.shape != (a.shape[0], b.shape[1]):
        raise ValueError(
            f"c must have shape {(a.shape[0], b.shape[1])} (rows of a, columns of b), "
            f"got {c.shape}"
        )
    if len(names) != 3:
        raise ValueError(f"names must hold three names (A, B, C), got {len(names)}")
    cell = _product_highlight(highlight, a.shape[0], b.shape[1])
    if index_base not in (0, 1):
        raise ValueError(f"index_base must be 0 or 1, got {index_base!r}")
    caption_text = (None if cell is None
                    else _product_caption(a, b, names[2], *cell, fmt, index_base))
    n_lines = 0 if caption_text is None else caption_text.count("\n") + 1
    widths = [m.shape[1] + 2 * MATRIX_PAD for m in (a, b, c)]
    cell_w, cell_h = MATRIX_CELL_INCHES
    total_rows = max(m.shape[0] for m in (a, b, c))
    block_h = (total_rows + 1 + 2 * MATRIX_PAD) * cell_h
    caption_h = n_lines * CAPTION_LINE_INCHES + (0.2 if n_lines else 0.0)
    if fig is None:
        width = sum(widths) * cell_w + 2 * OPERATOR_INCHES + 0.4
        fig = plt.figure(figsize=_clip_size(width, block_h + caption_h + 0.3))
    fig_w, fig_h = fig.get_size_inches()
    op_ratio = OPERATOR_INCHES / cell_w
    grid = fig.add_gridspec(
        1, 5, width_ratios=[widths[0], op_ratio, widths[1], op_ratio, widths[2]],
        left=0.02, right=0.98, top=1 - 0.15 / fig_h,
        bottom=min(0.6, (caption_h + 0.1) / fig_h), wspace=0.0,
    )
    axes = [fig.add_subplot(grid[0, k]) for k in range(5)]
    i, j = (None, None) if cell is None else cell
    row_a = () if i is None else (i,)
    blocks = (
        matrix_block(a, ax=axes[0], name=names[0], fmt=fmt, highlight_rows=row_a),
        matrix_block(b, ax=axes[2], name=names[1], fmt=fmt,
                     highlight_cols=() if j is None else (j,)),
        matrix_block(c, ax=axes[4], name=names[2], fmt=fmt,
                     highlight_cells=() if j is None or i is None else ((i, j),),
                     highlight_rows=row_a if j is None else ()),
    )
    for block, m in zip(blocks, (a, b, c), strict=True):
        block.ax.set_ylim(*_block_ylim(m.shape[0], total_rows))
    operators = []
    for ax, symbol in ((axes[1], TIMES), (axes[3], "=")):
        ax.set_axis_off()
        ax.set_xlim(-0.5, 0.5)
        ax.set_ylim(*_block_ylim(total_rows, total_rows))
        operators.append(ax.text(0, (total_rows - 1) / 2, symbol, ha="center", va="center",
                                 fontsize=OPERATOR_FONTSIZE, color=TEXT_DARK))
    caption = None
    if caption_text is not None:
        caption = fig.text(0.5, 0.1 / fig_h, caption_text, ha="center", va="bottom",
                           fontsize=CAPTION_FONTSIZE, color=TEXT_DARK, linespacing=1.5)
    set_alt_text(fig, f"A matrix product: {names[0]} ({a.shape[0]}×{a.shape[1]}) times "
                      f"{names[1]} ({b.shape[0]}×{b.shape[1]}) equals {names[2]} "
                      f"({c.shape[0]}×{c.shape[1]}), every entry written in its cell."
                      + ("" if caption_text is None else
                         " " + " ".join(caption_text.split())))
    return ProductDiagramArtists(fig, blocks, tuple(operators), caption)
