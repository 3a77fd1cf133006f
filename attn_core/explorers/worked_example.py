"""The worked example's lab: edit Q, K, V and see scores, weights and output change."""

from __future__ import annotations

import html
import math

import ipywidgets as W
import numpy as np

from .. import examples, figures
from ..attention import attention, scores
from .arguments import check_matrix
from .base import (
    HIDDEN_TEXT,
    STYLE,
    Explorer,
    _Canvas,
    _heatmap_dynamic,
    _image_array,
    _row,
    _table,
    _text_of,
    read_tables,
)

__all__ = [
    "WorkedExampleLab",
    "worked_example_lab",
]


class WorkedExampleLab(Explorer):
    """The article's Q, K and V as editable grids, every intermediate, one cell explained."""

    title = "worked example"
    RESULTS = (("scores = Q Kᵀ", "scores"), ("scaled scores = Q Kᵀ / √d_k", "scaled"),
               ("weights = softmax(scaled scores)", "weights"), ("output = weights · V", "output"))
    INPUT_RANGE = (-10.0, 10.0)
    MAX_SIZE = 8  # rows and columns of each input: a grid of number boxes to read

    def __init__(self, q=None, k=None, v=None):
        self.inputs = self.check_inputs(q, k, v)  # before anything is built
        super().__init__()
        self.n, self.d_k = self.inputs["Q"].shape
        self.d_v = self.inputs["V"].shape[1]
        self.tokens = list(examples.WORKED_TOKENS[: self.n]) if self.n <= 4 else [
            f"token {i + 1}" for i in range(self.n)]
        grids = []
        for name, m in self.inputs.items():
            boxes = []
            for (i, j), value in np.ndenumerate(m):
                box = W.BoundedFloatText(value=float(value), min=self.INPUT_RANGE[0],
                                         max=self.INPUT_RANGE[1], step=0.1,
                                         layout=W.Layout(width="70px"),
                                         description_allow_html=False)
                self.controls[f"{name}[{i},{j}]"] = box
                boxes.append(box)
            label = W.HTML(f"<b>{name}</b> ({m.shape[0]} × {m.shape[1]})")
            grid = W.GridBox(boxes, layout=W.Layout(
                grid_template_columns=f"repeat({m.shape[1]}, 74px)", grid_gap="2px"))
            grids.append(W.VBox([label, grid], layout=W.Layout(margin="0 16px 0 0")))
        c = self.controls
        c["matrix"] = W.Dropdown(options=self.RESULTS, value="scores",
                                 description="explain a cell of", style=STYLE,
                                 layout=W.Layout(width="330px"))
        c["row"] = W.Dropdown(options=[(t, i) for i, t in enumerate(self.tokens)], value=0,
                              description="row", style=STYLE, layout=W.Layout(width="160px"))
        c["col"] = W.Dropdown(options=self._col_options("scores"), value=0, description="column",
                              style=STYLE, layout=W.Layout(width="170px"))
        c["predict"] = W.ToggleButton(value=False, description="predict first",
                                      tooltip="hide the chosen result until you reveal it")
        c["reveal"] = W.Button(description="reveal", disabled=True)
        self._revealed = False
        self.tables = W.HTML()
        self.arithmetic = W.HTML()
        self._watch(*(n for n in c if n not in ("reveal", "matrix")))
        c["matrix"].observe(self._on_matrix, names="value")
        c["reveal"].on_click(lambda _button: self._guard(self._reveal))
        self.canvas = _Canvas((3.9, 3.0))
        ax = self.canvas.figure.add_subplot()
        self.heat = figures.heatmap(np.zeros((self.n, self.n)), self.tokens, self.tokens, ax=ax,
                                    vmin=0.0, vmax=1.0, annotate=False, title="weights",
                                    highlight=[(0, 0)])
        picker = _row(c["matrix"], c["row"], c["col"], c["predict"], c["reveal"])
        self._start(_row(*grids), picker, self.arithmetic, self.tables, self.image)

    @classmethod
    def check_inputs(cls, q, k, v):
        """Q, K, V as float64 copies (None: the article's), or a clear error.

        The lab shows one token per row of Q and of K (its weights are ``n x n``), so Q
        and K have the same number of rows, and V one row per key; every entry fits the
        number boxes (``INPUT_RANGE``), every size the grid (``MAX_SIZE``).
        """
        given = {"q": (examples.Q if q is None else q, "(n, d_k)"),
                 "k": (examples.K if k is None else k, "(n, d_k)"),
                 "v": (examples.V if v is None else v, "(n, d_v)")}
        m = {name: check_matrix(x, name, layout, cls.INPUT_RANGE, "the lab",
                                max_rows=cls.MAX_SIZE, max_cols=cls.MAX_SIZE)
             for name, (x, layout) in given.items()}
        if m["q"].shape[0] != m["k"].shape[0]:
            raise ValueError(
                "q and k must have the same number of rows (the lab shows one token per "
                f"row, its weights n x n), got {m['q'].shape[0]} (q) and {m['k'].shape[0]} (k)")
        if m["q"].shape[1] != m["k"].shape[1]:
            raise ValueError(f"q and k must have the same width d_k, got {m['q'].shape[1]} (q) "
                             f"and {m['k'].shape[1]} (k)")
        if m["v"].shape[0] != m["k"].shape[0]:
            raise ValueError(f"v must have one row per key ({m['k'].shape[0]}), got "
                             f"{m['v'].shape[0]}")
        return {"Q": m["q"], "K": m["k"], "V": m["v"]}

    def _col_options(self, matrix):
        if matrix == "output":
            return [(f"dim {j + 1}", j) for j in range(self.d_v)]
        return [(t, j) for j, t in enumerate(self.tokens)]

    def _on_matrix(self, change):
        def switch():
            col = self.controls["col"]
            old = col.value
            self._busy = True
            try:
                col.options = self._col_options(change["new"])
                col.value = old if old < len(col.options) else 0
            finally:
                self._busy = False
            self._update()
        self._guard(switch)

    def _reveal(self):
        self._revealed = True
        self._update()

    def _read_inputs(self):
        for name, m in self.inputs.items():
            for (i, j), _ in np.ndenumerate(m):
                m[i, j] = self.controls[f"{name}[{i},{j}]"].value

    def _update(self):
        c = self.controls
        key_inputs = (c["matrix"].value, c["row"].value, c["col"].value)
        self._read_inputs()
        state = (key_inputs, tuple(m.tobytes() for m in self.inputs.values()))
        if state != self._last_key:  # a new question: a pending prediction hides again
            self._revealed = False
        q, k, v = (self.inputs[n] for n in "QKV")
        raw = scores(q, k, scale=1.0)
        scaled = scores(q, k)
        out, weights = attention(q, k, v)
        self.results = {"scores": raw, "scaled": scaled, "weights": weights, "output": out}
        matrix, i, j = key_inputs
        pending = c["predict"].value and not self._revealed
        c["reveal"].disabled = not pending
        cell = {(i, j)}
        hidden = cell if pending else set()
        toks = self.tokens
        outcols = [f"dim {d + 1}" for d in range(self.d_v)]
        parts = []
        for title, name in self.RESULTS:
            cols = outcols if name == "output" else toks
            parts.append(_table(name, self.results[name], row_labels=toks, col_labels=cols,
                                highlight=cell if name == matrix else (),
                                hidden=hidden if name == matrix else (), title=title))
        self.tables.value = '<div style="display:flex;flex-wrap:wrap">' + "".join(parts) + "</div>"
        self.arithmetic.value = self._explain(matrix, i, j, pending)
        highlight = [(i, jj) for jj in range(self.n)] if matrix == "output" else [(i, j)]
        figures.update_heatmap(self.heat, weights, highlight=highlight)
        self.image.layout.visibility = "hidden" if pending else "visible"
        self._show(self.canvas, _heatmap_dynamic(self.heat))
        self._last_key = state

    def _explain(self, matrix, i, j, pending):
        q, k, v = (self.inputs[n] for n in "QKV")
        r = self.results
        value = HIDDEN_TEXT if pending else f"{r[matrix][i, j]:.3f}"
        f = "{:.2f}".format

        def products(a, b):
            return " + ".join(f"{f(x)}×{f(y)}" if y >= 0 else f"{f(x)}×({f(y)})"
                              for x, y in zip(a, b, strict=True))

        if matrix == "scores":
            text = (f"scores[{i},{j}] = Q[{i},:] · K[{j},:] = {products(q[i], k[j])} = {value}")
        elif matrix == "scaled":
            text = (f"scaled[{i},{j}] = scores[{i},{j}] / √d_k = {r['scores'][i, j]:.3f} / "
                    f"√{self.d_k} = {r['scores'][i, j]:.3f} / {math.sqrt(self.d_k):.3f} = {value}")
        elif matrix == "weights":
            terms = " + ".join(f"e^{r['scaled'][i, kk]:.3f}" for kk in range(self.n))
            text = (f"weights[{i},{j}] = exp(scaled[{i},{j}]) / Σₖ exp(scaled[{i},k]) = "
                    f"e^{r['scaled'][i, j]:.3f} / ({terms}) = {value}")
        else:
            text = (f"output[{i},{j}] = Σₖ weights[{i},k] · V[k,{j}] = "
                    f"{products(r['weights'][i], v[:, j])} = {value}")
        return (f'<div style="font-family:monospace;font-size:13px;padding:4px 0" '
                f'data-name="arithmetic">{html.escape(text)}</div>')

    def shown(self):
        tables = read_tables(self.tables.value)
        return {
            **tables,
            "inputs": {n: np.array([[self.controls[f"{n}[{i},{j}]"].value
                                     for j in range(m.shape[1])] for i in range(m.shape[0])])
                       for n, m in self.inputs.items()},
            "figure_weights": _image_array(self.heat),
            "highlight": [(int(round(p.get_y() + 0.5)), int(round(p.get_x() + 0.5)))
                          for p in self.heat.highlights],
            "arithmetic": _text_of(self.arithmetic.value),
            "figure_hidden": self.image.layout.visibility == "hidden",
        }


def worked_example_lab(q=None, k=None, v=None):
    """The article's worked example, editable: every intermediate updates as you type.

    Parameters
    ----------
    q, k : (n, d_k) array_like, optional
    v : (n, d_v) array_like, optional
        Default: the article's ``examples.Q``, ``examples.K`` and ``examples.V``. The same
        number of rows n in all three (one token per row), n, d_k, d_v at most 8, every
        entry from -10 to 10 (the range of the number boxes); anything else is refused
        with a ``ValueError``/``TypeError`` naming the argument.

    Returns
    -------
    WorkedExampleLab
        Controls ``"Q[i,j]"``, ``"K[i,j]"``, ``"V[i,j]"`` (number boxes), ``"matrix"``,
        ``"row"``, ``"col"`` (which cell to explain), ``"predict"`` and ``"reveal"``.
    """
    return WorkedExampleLab(q, k, v)
