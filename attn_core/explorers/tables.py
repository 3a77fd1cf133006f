"""The explorers' HTML number tables: written by :func:`_table`, read back by
:func:`read_tables` (tests and the static edition compare them with the maths)."""

import html
import math
import re

import numpy as np

from .. import figures
from .colors import _CELL_CSS, _HEAD_CSS, _HIGHLIGHT_CSS, _TABLE_CSS

#: How a table prints its numbers; a hidden cell shows HIDDEN_TEXT.
TABLE_FMT = "{:.3f}"
HIDDEN_TEXT = "?"


def _fmt(value, fmt=TABLE_FMT):
    if np.isneginf(value):
        return figures.NEG_INF_TEXT
    if np.isnan(value):
        return ""
    text = fmt.format(value)
    # a value that rounds to zero prints without a sign: -0.000 reads as a negative number
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def _table(name, matrix, *, row_labels=None, col_labels=None, highlight=(), hidden=(),
           title=None, fmt=TABLE_FMT, bold_rows=()):
    """An HTML table of numbers; ``highlight`` cells are shaded, ``hidden`` show ``?``."""
    m = np.atleast_2d(np.asarray(matrix, dtype=float))
    highlight, hidden = set(highlight), set(hidden)
    head = ""
    if col_labels is not None:
        head = "<tr><th></th>" + "".join(
            f'<th style="{_HEAD_CSS}">{html.escape(str(c))}</th>' for c in col_labels) + "</tr>"
    rows = []
    for i in range(m.shape[0]):
        label = "" if row_labels is None else html.escape(str(row_labels[i]))
        weight = "font-weight:bold;" if i in bold_rows else ""
        cells = []
        for j in range(m.shape[1]):
            text = HIDDEN_TEXT if (i, j) in hidden else _fmt(m[i, j], fmt)
            css = _CELL_CSS + (";" + _HIGHLIGHT_CSS if (i, j) in highlight else "")
            cells.append(f'<td class="v" style="{weight}{css}">{text}</td>')
        rows.append(f'<tr><th style="{_HEAD_CSS}">{label}</th>{"".join(cells)}</tr>')
    caption = "" if title is None else (
        f'<caption style="text-align:left;font-family:sans-serif;font-size:12px">'
        f"{html.escape(title)}</caption>")
    return (f'<table data-name="{name}" style="{_TABLE_CSS}">{caption}{head}'
            f'{"".join(rows)}</table>')


_TABLE_RE = re.compile(r'<table data-name="([^"]+)".*?</table>', re.S)
_ROW_RE = re.compile(r"<tr>(.*?)</tr>", re.S)
_CELL_RE = re.compile(r'<td class="v"[^>]*>(.*?)</td>', re.S)


def _cell_value(text):
    text = html.unescape(text).strip()
    if text == figures.NEG_INF_TEXT:
        return -math.inf
    if text in ("", HIDDEN_TEXT):
        return math.nan
    return float(text.replace(",", ""))


def read_tables(markup):
    """Parse the number tables out of an explorer's HTML: ``{name: 2-D float array}``.

    Hidden cells (``?``) read as NaN, ``−∞`` as ``-inf``.

    Examples
    --------
    >>> read_tables(_table("w", [[0.25, 0.75]]))["w"]
    array([[0.25, 0.75]])
    """
    found = {}
    for match in _TABLE_RE.finditer(markup):
        rows = [[_cell_value(c) for c in _CELL_RE.findall(r)]
                for r in _ROW_RE.findall(match.group(0))]
        found[match.group(1)] = np.array([r for r in rows if r], dtype=float)
    return found


def _text_of(markup):
    """The visible text of a bit of HTML (tags dropped, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))
