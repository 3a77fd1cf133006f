"""The explorers: one call in a notebook gives controls wired to the maths and a figure.

Every explorer here is a small class whose constructor is wrapped by a function of the
same idea (``scaling_explorer()``, ``mask_explorer()``, ...). The object holds

* ``.controls`` -- a dict, name -> ipywidget (sliders, dropdowns, number boxes, buttons);
* ``.figure`` -- the matplotlib Figure (Agg, no pyplot manager), changed in place;
* ``.image`` -- the ``ipywidgets.Image`` whose value is the PNG the learner sees;
* ``.widget`` -- the container to display (the object also displays itself);
* ``.errors`` -- every exception raised while updating (also shown in a red box);
* ``.shown()`` -- what is on screen, read back from the artists and the HTML tables.

Speed. A slider move must answer within about 50 ms. Re-drawing a figure from scratch
costs hundreds of milliseconds on a small machine (most of it text layout), so:

* the figure is built once, its layout is fixed after the first draw, and every update
  changes artists in place (``plots.update_*``);
* only the artists that change (images, bars, lines, outlines) are drawn again, over a
  cached copy of the static background (axes, ticks, labels): "blitting";
* the PNG is encoded from the Agg buffer by Pillow, as RGB with a fast zlib level;
* numbers are shown in HTML tables (crisp, and nearly free), not as matplotlib text;
* sliders send their value when released (``continuous_update=False``), so a drag never
  queues stale redraws, and an update whose inputs did not change draws nothing.

Maths comes only from :mod:`attn_core`; pictures only from :mod:`attn_core.plots`.
This module and :mod:`attn_core.model_explorer` (the pretrained model's explorer, built on
the base class here) are the only ones that import ipywidgets.
"""

from __future__ import annotations

import html
import io
import math
import re
import traceback

import ipywidgets as W
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import PathPatch, Rectangle
from PIL import Image

from . import examples, plots
from .attention import MASKED_SCORE, attention, scores
from .cost import attention_flops, median_time, score_matrix_bytes, score_matrix_cells
from .flash import flash_attention_steps
from .masks import causal_mask, padding_mask, window_mask
from .multihead import multi_head_attention
from .softmax import softmax, softmax_jacobian

__all__ = [
    "Explorer",
    "cost_explorer",
    "heads_explorer",
    "mask_explorer",
    "scaling_explorer",
    "softmax_explorer",
    "tiling_explorer",
    "worked_example_lab",
]

#: Resolution of the explorer images: small figures at a modest dpi encode quickly.
DPI = 80
#: zlib level of the PNG (Pillow): 1 is several times faster than 6; files barely larger.
PNG_COMPRESS_LEVEL = 1
#: Labels of controls are never cut off.
STYLE = {"description_width": "initial"}
SLIDER_WIDTH = "420px"
#: Format of the numbers in the HTML tables.
TABLE_FMT = "{:.3f}"
HIDDEN_TEXT = "?"

_TABLE_CSS = (
    "border-collapse:collapse;font-family:monospace;font-size:12px;margin:2px 10px 2px 0"
)
_CELL_CSS = "padding:1px 6px;text-align:right;border:1px solid #ddd"
_HEAD_CSS = "padding:1px 6px;text-align:right;color:#555;font-weight:normal"
_HIGHLIGHT_CSS = "background:#F5C97A;outline:2px solid #D55E00"
_ERROR_CSS = (
    "border:2px solid #D55E00;background:#FDEDE4;padding:6px 10px;font-family:monospace;"
    "white-space:pre-wrap"
)


# --- fast figures: a fixed layout, a cached background, only changed artists drawn -------


def _png(canvas):
    """PNG bytes of the Agg canvas' current pixels, encoded by Pillow.

    RGB (the figures are opaque: the alpha channel would only make the file larger and
    slower to encode), zlib level ``PNG_COMPRESS_LEVEL``, no optimisation pass.
    """
    rgba = canvas.buffer_rgba()  # a (h, w, 4) uint8 memoryview of the Agg buffer
    height, width = rgba.shape[:2]
    image = Image.frombuffer("RGBA", (width, height), rgba, "raw", "RGBA", 0, 1).convert("RGB")
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=PNG_COMPRESS_LEVEL, optimize=False)
    return out.getvalue()


class _Canvas:
    """A Figure on an Agg canvas that re-renders only its changing ("dynamic") artists.

    The first render lets constrained layout place everything, then fixes the layout, so
    nothing moves afterwards. The static part (axes, ticks, labels, colour bars) is drawn
    once per ``static_key`` and kept as a pixel buffer; each frame restores it and draws
    only the dynamic artists on top. A caller that changes static content (limits, tick
    labels) must pass a new ``static_key``.
    """

    def __init__(self, figsize, dpi=DPI, layout="constrained"):
        self.figure = Figure(figsize=figsize, dpi=dpi, layout=layout)
        FigureCanvasAgg(self.figure)
        self._backgrounds = {}
        self._layout_fixed = layout is None  # None: the caller places the axes itself
        self.full_draws = 0

    def invalidate(self):
        """Forget every cached background (after a change to static artists)."""
        self._backgrounds.clear()

    def fix_layout(self):
        """Let constrained layout place everything once, then keep it (idempotent)."""
        if not self._layout_fixed:
            self.figure.get_layout_engine().execute(self.figure)
            self.figure.set_layout_engine("none")
            self._layout_fixed = True

    def ensure_background(self, dynamic, static_key=None):
        """Draw and keep the static part for ``static_key`` unless it is cached already.

        Returns True when it had to draw (a full draw, the slow path).
        """
        self.fix_layout()
        if static_key in self._backgrounds:
            return False
        shown = [a for a in dynamic if a.get_visible()]
        for a in shown:
            a.set_visible(False)
        try:
            self.figure.canvas.draw()
        finally:
            for a in shown:
                a.set_visible(True)
        self._backgrounds[static_key] = self.figure.canvas.copy_from_bbox(self.figure.bbox)
        self.full_draws += 1
        return True

    def render(self, dynamic, static_key=None):
        """Draw and return the PNG bytes; ``dynamic`` is a list of artists to draw on top."""
        canvas = self.figure.canvas
        if not self.ensure_background(dynamic, static_key):
            canvas.restore_region(self._backgrounds[static_key])
        renderer = canvas.get_renderer()
        for a in dynamic:
            if a.get_visible():
                a.draw(renderer)
        return _png(canvas)

    def naive_png(self):
        """What the inline backend does on every change: a full draw with a tight box."""
        out = io.BytesIO()
        self.figure.savefig(out, format="png", dpi=self.figure.dpi, bbox_inches="tight")
        return out.getvalue()


def _heatmap_dynamic(art):
    items = [art.image, *art.highlights]
    if art.mask_patch is not None:
        items.append(art.mask_patch)
    if art.texts is not None:
        items.extend(t for t in art.texts.ravel() if t.get_visible())
    return items


def _bars_dynamic(art):
    return [*art.bars.patches, *(t for t in art.value_texts if t.get_visible()),
            *([art.sum_text] if art.sum_text.get_visible() else [])]


def _marker_dynamic(art):
    return [art.line, art.guide, art.marker, *([art.text] if art.text.get_visible() else [])]


def _hide(*artists):
    for a in artists:
        a.set_visible(False)


def _image_array(art):
    """The values an image shows (masked cells keep their value, e.g. -inf)."""
    return np.array(np.ma.getdata(art.image.get_array()), dtype=float)


# --- HTML number tables ------------------------------------------------------------------


def _fmt(value, fmt=TABLE_FMT):
    if np.isneginf(value):
        return plots.NEG_INF_TEXT
    if np.isnan(value):
        return ""
    return fmt.format(value)


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
    if text == plots.NEG_INF_TEXT:
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
        rows = [[_cell_value(c) for c in _CELL_RE.findall(r)] for r in _ROW_RE.findall(match.group(0))]
        found[match.group(1)] = np.array([r for r in rows if r], dtype=float)
    return found


def _text_of(markup):
    """The visible text of a bit of HTML (tags dropped, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def _row(*children, wrap=True):
    return W.HBox(list(children), layout=W.Layout(flex_flow="row wrap" if wrap else "row",
                                                  align_items="flex-start"))


# --- the base class ----------------------------------------------------------------------


class Explorer:
    """Controls, a figure shown as a PNG, HTML read-outs, and visible errors.

    Subclasses build their controls and figure, then call :meth:`_start`. Every change
    of a control runs :meth:`_update` through :meth:`_guard`, which records any exception
    in ``.errors``, shows it in a red box inside the widget (ipywidgets would only log
    it), and raises it again.
    """

    title = "explorer"

    def __init__(self):
        self.controls = {}
        self.errors = []
        self.updates = 0
        self.image = W.Image(format="png", layout=W.Layout(width="auto", height="auto"))
        self.error_box = W.HTML(layout=W.Layout(display="none"))
        self.widget = None
        self._busy = False
        self._last_key = None
        self.canvas = None

    # wiring
    def _watch(self, *names):
        for name in names:
            self.controls[name].observe(self._on_change, names="value")

    def _on_change(self, change=None):
        if self._busy:  # a control is being changed by the explorer itself
            return
        self._guard(self._update)

    def _guard(self, fn, *args):
        try:
            fn(*args)
        except Exception as exc:
            self._report(exc)
            raise
        if self.error_box.layout.display != "none":
            self.error_box.value = ""
            self.error_box.layout.display = "none"

    def _report(self, exc):
        self.errors.append(exc)
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        self.error_box.value = (
            f'<div style="{_ERROR_CSS}"><b>This explorer hit an error; the figure above may '
            f"be out of date.</b>\n{html.escape(detail)}</div>")
        self.error_box.layout.display = ""

    def _start(self, *rows):
        self.widget = W.VBox([*rows, self.error_box])
        self._guard(self._update)

    # drawing
    def _show(self, canvas, dynamic, static_key=None):
        png = canvas.render(dynamic, static_key)
        if png != self.image.value:
            self.image.value = png

    def _update(self):  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    # what tests and notebooks read
    @property
    def figure(self):
        """The matplotlib Figure currently shown."""
        return self.canvas.figure

    @property
    def png(self):
        """The PNG bytes the learner currently receives."""
        return bytes(self.image.value)

    def naive_png(self):
        """The same figure rendered the slow way (full draw, tight box), for benchmarks."""
        return self.canvas.naive_png()

    def shown(self):  # pragma: no cover - every subclass defines it
        """What is on screen, read back from the artists and the HTML."""
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self):
        return f"<{type(self).__name__}: {', '.join(self.controls)}>"


def _slider(cls, description, **kwargs):
    return cls(description=description, style=STYLE, layout=W.Layout(width=SLIDER_WIDTH),
               continuous_update=False,
               **kwargs)


# --- 1. the worked example ----------------------------------------------------------------


class WorkedExampleLab(Explorer):
    """The article's Q, K and V as editable grids, every intermediate, one cell explained."""

    title = "worked example"
    RESULTS = (("scores  Q Kᵀ", "scores"), ("scaled scores  Q Kᵀ / √d_k", "scaled"),
               ("weights  softmax(scaled)", "weights"), ("output  weights V", "output"))
    INPUT_RANGE = (-10.0, 10.0)

    def __init__(self, q=None, k=None, v=None):
        super().__init__()
        inputs = {"Q": examples.Q if q is None else q, "K": examples.K if k is None else k,
                  "V": examples.V if v is None else v}
        self.inputs = {name: np.array(m, dtype=float) for name, m in inputs.items()}
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
        c["matrix"] = W.Dropdown(options=self.RESULTS, value="scores", description="explain a cell of",
                                 style=STYLE, layout=W.Layout(width="330px"))
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
        self.heat = plots.heatmap(np.zeros((self.n, self.n)), self.tokens, self.tokens, ax=ax,
                                  vmin=0.0, vmax=1.0, annotate=False, title="weights",
                                  highlight=[(0, 0)])
        picker = _row(c["matrix"], c["row"], c["col"], c["predict"], c["reveal"])
        self._start(_row(*grids), picker, self.arithmetic, self.tables, self.image)

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
        plots.update_heatmap(self.heat, weights, highlight=highlight)
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
            "inputs": {n: np.array([[self.controls[f"{n}[{i},{j}]"].value for j in range(m.shape[1])]
                                    for i in range(m.shape[0])]) for n, m in self.inputs.items()},
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
    q, k, v : (n, d) array_like, optional
        Default: the article's ``examples.Q``, ``examples.K`` and ``examples.V``.

    Returns
    -------
    WorkedExampleLab
        Controls ``"Q[i,j]"``, ``"K[i,j]"``, ``"V[i,j]"`` (number boxes), ``"matrix"``,
        ``"row"``, ``"col"`` (which cell to explain), ``"predict"`` and ``"reveal"``.
    """
    return WorkedExampleLab(q, k, v)


# --- 2. scaling ---------------------------------------------------------------------------

D_K_STEPS = tuple(2 ** p for p in range(11))  # 1, 2, 4, ..., 1024


class ScalingExplorer(Explorer):
    """Why divide by √d_k: spread of scores, softmax of a row, and its gradient, vs d_k."""

    title = "scaling"

    def __init__(self, n=16, seed=examples.SEED, d_k=64):
        super().__init__()
        self.n = n
        self.stats = {}
        for scaled in (True, False):
            for dk in D_K_STEPS:
                q, k, _ = examples.random_qkv(n, dk, seed=seed)
                s = scores(q, k, scale=None if scaled else 1.0)  # (n, n)
                row = softmax(s[0])
                jac = softmax_jacobian(row)
                self.stats[scaled, dk] = {"spread": float(s.std()), "row": row,
                                          "max_weight": float(row.max()),
                                          "gradient": float(np.linalg.norm(jac))}
        c = self.controls
        c["d_k"] = _slider(W.SelectionSlider, "d_k (width of q and k)", options=D_K_STEPS,
                           value=d_k)
        c["scaled"] = W.Checkbox(value=True, description="divide scores by √d_k", style=STYLE,
                                 indent=False)
        self._watch("d_k", "scaled")
        self.readout = W.HTML()
        self.canvas = _Canvas((7.6, 4.6))
        axs = self.canvas.figure.subplots(2, 2)
        x = np.array(D_K_STEPS, dtype=float)
        curves = {name: self._curve(name, True) for name in ("spread", "max_weight", "gradient")}
        both = {name: np.concatenate([self._curve(name, True), self._curve(name, False)])
                for name in curves}
        self.lines = {
            "spread": plots.line_with_marker(x, curves["spread"], d_k, ax=axs[0, 0], logx=True,
                                             logy=True, xlabel="d_k", ylabel="std of scores",
                                             title="spread of the scores"),
            "max_weight": plots.line_with_marker(x, curves["max_weight"], d_k, ax=axs[1, 0],
                                                 logx=True, xlabel="d_k", ylabel="largest weight",
                                                 title="largest weight in the row"),
            "gradient": plots.line_with_marker(x, curves["gradient"], d_k, ax=axs[1, 1],
                                               logx=True, logy=True, xlabel="d_k",
                                               ylabel="‖Jacobian‖",
                                               title="softmax gradient size"),
        }
        for name, art in self.lines.items():
            _hide(art.text)  # the values are in the read-out below: text is slow to draw
            art.ax.set_xticks(x[::2], [str(int(v)) for v in x[::2]])
            art.ax.minorticks_off()
            lo, hi = both[name].min(), both[name].max()
            if name == "max_weight":
                art.ax.set_ylim(0.0, 1.05)
            else:
                lo = max(lo, 1e-12)
                art.ax.set_ylim(lo / 3, hi * 3)
        self.bars = plots.weight_bars(self.stats[True, d_k]["row"], ax=axs[0, 1],
                                      title="softmax of row 1", xlabel="key")
        axs[0, 1].set_xticks(range(0, n, 3))
        _hide(*self.bars.value_texts, self.bars.sum_text)
        self._start(_row(c["d_k"], c["scaled"]), self.image, self.readout)

    def _curve(self, name, scaled):
        return np.array([self.stats[scaled, dk][name] for dk in D_K_STEPS])

    def _update(self):
        d_k, scaled = self.controls["d_k"].value, self.controls["scaled"].value
        if (d_k, scaled) == self._last_key:
            return
        st = self.stats[scaled, d_k]
        for name, art in self.lines.items():
            art.line.set_ydata(self._curve(name, scaled))
            plots.update_marker(art, d_k, st[name])
        plots.update_weight_bars(self.bars, st["row"])
        how = "scaled by 1/√d_k" if scaled else "unscaled"
        self.readout.value = (
            f'<div data-name="readout" style="font-family:monospace;font-size:13px">'
            f"d_k = {d_k} ({how}): std of scores = {st['spread']:.3f} · largest weight = "
            f"{st['max_weight']:.3f} · ‖softmax Jacobian‖ = {st['gradient']:.3g} · "
            f"row sum = {float(st['row'].sum()):.3f}</div>")
        dynamic = [a for art in self.lines.values() for a in _marker_dynamic(art)]
        self._show(self.canvas, dynamic + _bars_dynamic(self.bars))
        self._last_key = (d_k, scaled)

    def shown(self):
        out = {name: {"x": np.asarray(art.line.get_xdata(), dtype=float),
                      "y": np.asarray(art.line.get_ydata(), dtype=float),
                      "marker": (float(art.marker.get_xdata()[0]), float(art.marker.get_ydata()[0]))}
               for name, art in self.lines.items()}
        out["row"] = np.array([b.get_height() for b in self.bars.bars.patches])
        out["readout"] = _text_of(self.readout.value)
        return out


def scaling_explorer(n=16, seed=examples.SEED, d_k=64):
    """d_k from 1 to 1024 and scaling on/off: spread, softmax of a row, gradient size.

    Queries and keys are seeded standard-normal (unit variance), ``n`` of each.

    Returns
    -------
    ScalingExplorer
        Controls ``"d_k"`` (1, 2, 4, ..., 1024) and ``"scaled"``.
    """
    return ScalingExplorer(n, seed, d_k)


# --- 3. softmax ---------------------------------------------------------------------------


class SoftmaxExplorer(Explorer):
    """A row of scores and a temperature: the weights as bars, and their sum."""

    title = "softmax"
    SCORE_RANGE = (-20.0, 20.0)

    def __init__(self, row=None, temperature=1.0):
        super().__init__()
        row = examples.SMALL_SCORES if row is None else np.asarray(row, dtype=float)
        self.n = len(row)
        c = self.controls
        boxes = []
        for i, value in enumerate(row):
            c[f"score {i}"] = W.BoundedFloatText(
                value=float(value), min=self.SCORE_RANGE[0], max=self.SCORE_RANGE[1], step=0.5,
                description=f"x{i + 1}", style=STYLE, layout=W.Layout(width="110px"))
            boxes.append(c[f"score {i}"])
        c["temperature"] = _slider(W.FloatLogSlider, "temperature T (weights = softmax(x / T))",
                                   value=temperature, base=10, min=-1.5, max=1.5, step=0.05,
                                   readout_format=".3g")
        self._watch(*c)
        self.readout = W.HTML()
        self.canvas = _Canvas((4.6, 2.8))
        ax = self.canvas.figure.add_subplot()
        self.labels = [f"x{i + 1}" for i in range(self.n)]
        self.bars = plots.weight_bars(softmax(row), self.labels, ax=ax,
                                      xlabel="entry x_j of the score row", title="weights")
        _hide(*self.bars.value_texts)  # the numbers are in the table: text is slow to draw
        self._start(_row(*boxes), c["temperature"], self.image, self.readout)

    def _update(self):
        row = np.array([self.controls[f"score {i}"].value for i in range(self.n)])
        t = self.controls["temperature"].value
        key = (row.tobytes(), t)
        if key == self._last_key:
            return
        weights = softmax(row / t)
        plots.update_weight_bars(self.bars, weights)
        self.readout.value = (
            _table("scaled", [row / t], col_labels=self.labels, row_labels=["x / T"])
            + _table("weights", [weights], col_labels=self.labels, row_labels=["weight"])
            + f'<div data-name="sum" style="font-family:monospace">sum of weights = '
              f"{float(weights.sum()):.6f}</div>")
        self._show(self.canvas, _bars_dynamic(self.bars))
        self._last_key = key

    def shown(self):
        tables = read_tables(self.readout.value)
        return {"bars": np.array([b.get_height() for b in self.bars.bars.patches]),
                "weights": tables["weights"][0], "scaled": tables["scaled"][0],
                "sum_text": self.bars.sum_text.get_text(),
                "sum": float(_text_of(self.readout.value).split("sum of weights =")[1])}


def softmax_explorer(row=None, temperature=1.0):
    """Edit a row of scores and the temperature; see the weights (bars) and that they sum to 1.

    Returns
    -------
    SoftmaxExplorer
        Controls ``"score 0"``, ``"score 1"``, ... and ``"temperature"`` (0.03 to 30).
    """
    return SoftmaxExplorer(row, temperature)


# --- 4. masks -----------------------------------------------------------------------------

MASK_KINDS = ("none", "causal", "padding", "sliding window", "custom")


class MaskExplorer(Explorer):
    """Sequence length, mask kind, before/after softmax: the mask, the weights, row sums."""

    title = "masks"
    MAX_N = len(examples.TOKENS)

    def __init__(self, n=MAX_N, kind="causal", seed=examples.SEED):
        super().__init__()
        self.q_all, self.k_all, self.v_all = examples.random_qkv(self.MAX_N, 4, seed=seed)
        c = self.controls
        c["n"] = _slider(W.IntSlider, "sequence length n", min=1, max=self.MAX_N, value=n)
        c["kind"] = W.Dropdown(options=MASK_KINDS, value=kind, description="mask",
                               style=STYLE, layout=W.Layout(width="260px"))
        c["length"] = _slider(W.IntSlider, "real length (keys after it are padding)", min=0,
                              max=n, value=max(n - 3, 1))
        c["window"] = _slider(W.IntSlider, "window width", min=1, max=n, value=min(3, n))
        c["apply"] = W.ToggleButtons(options=[("mask before softmax", "before"),
                                              ("zero after softmax", "after")],
                                     value="before",
                                     # buttons as wide as their labels: none is cut off
                                     style={**STYLE, "button_width": "auto"})
        c["custom"] = W.GridBox(layout=W.Layout(display="none"))
        self.cell_buttons = np.empty((0, 0), dtype=object)  # built when "custom" is chosen
        self._watch("kind", "length", "window", "apply")
        c["n"].observe(self._on_n, names="value")
        self.readout = W.HTML()
        # Drawn once at the largest length with every token's label; a shorter n blanks
        # the cells and fades the labels of the tokens beyond it, so no n redraws the axes.
        self.canvas = _Canvas((7.6, 3.6))
        ax_mask, ax_w = self.canvas.figure.subplots(1, 2)
        size, toks = (self.MAX_N, self.MAX_N), list(examples.TOKENS)
        self.grid = plots.mask_grid(np.ones(size, dtype=bool), toks, toks, ax=ax_mask,
                                    title="mask")
        _hide(*self.grid.texts.ravel())  # ✓/✗ are slow to draw; the colours say it
        self.heat = plots.heatmap(np.zeros(size), toks, toks, ax=ax_w, vmin=0.0, vmax=1.0,
                                  annotate=False, title="weights", mask=np.ones(size, bool))
        self.beyond = [plots.fade_beyond_length(ax, size) for ax in (ax_mask, ax_w)]
        self._start(_row(c["n"], c["kind"], c["apply"]), _row(c["length"], c["window"]),
                    c["custom"], self.image, self.readout)

    def _build_custom(self, n):
        """An n x n grid of toggle buttons (pressed = may attend), all allowed at first."""
        if self.cell_buttons.shape == (n, n):
            return
        buttons = np.empty((n, n), dtype=object)
        for i in range(n):
            for j in range(n):
                b = W.ToggleButton(value=True, description="✓", tooltip=f"query {i} → key {j}",
                                   layout=W.Layout(width="30px", height="26px", padding="0"))
                b.observe(self._on_cell, names="value")
                buttons[i, j] = b
        self.cell_buttons = buttons
        self.controls["custom"].children = list(buttons.ravel())
        self.controls["custom"].layout = W.Layout(
            grid_template_columns=f"repeat({n}, 32px)", grid_gap="1px",
            display="" if self.controls["kind"].value == "custom" else "none")

    def _on_cell(self, change):
        change["owner"].description = plots.MASK_SYMBOLS[bool(change["new"])]
        self._on_change(change)

    def _on_n(self, change):
        def resize():
            n = change["new"]
            c = self.controls
            self._busy = True
            try:
                c["length"].max = n  # a padding length beyond n cannot be chosen
                c["window"].max = n
                if c["kind"].value == "custom":
                    self._build_custom(n)
            finally:
                self._busy = False
            self._update()
        self._guard(resize)

    def mask(self):
        """The mask chosen by the controls, (n, n) bool, or None for "none"."""
        c = self.controls
        n, kind = c["n"].value, c["kind"].value
        if kind == "causal":
            return causal_mask(n)
        if kind == "padding":
            return np.broadcast_to(padding_mask(c["length"].value, n), (n, n))
        if kind == "sliding window":
            return window_mask(n, c["window"].value)
        if kind == "custom":
            self._build_custom(n)
            return np.array([[b.value for b in row] for row in self.cell_buttons], dtype=bool)
        return None

    def _update(self):
        c = self.controls
        n, kind = c["n"].value, c["kind"].value
        c["length"].layout.display = "" if kind == "padding" else "none"
        c["window"].layout.display = "" if kind == "sliding window" else "none"
        c["custom"].layout.display = "" if kind == "custom" else "none"
        mask = self.mask()
        q, k, v = self.q_all[:n], self.k_all[:n], self.v_all[:n]
        if c["apply"].value == "before":
            _, weights = attention(q, k, v, mask=mask)
        else:  # the wrong way round: softmax over every key, then zero the masked weights
            _, weights = attention(q, k, v)
            if mask is not None:
                weights = np.where(mask, weights, 0.0)
        shown_mask = np.ones((n, n), dtype=bool) if mask is None else np.array(mask)
        key = (n, shown_mask.tobytes(), c["apply"].value)
        if key == self._last_key:
            return
        toks = list(examples.TOKENS[:n])
        full = (self.MAX_N, self.MAX_N)
        allowed = np.ones(full, dtype=bool)  # cells beyond n: not masked, just blanked
        allowed[:n, :n] = shown_mask
        padded = np.full(full, np.nan)
        padded[:n, :n] = weights
        plots.update_mask_grid(self.grid, allowed)
        plots.update_heatmap(self.heat, padded, mask=allowed)
        self.canvas.fix_layout()  # the label boxes the fades cover are final from here on
        for beyond in self.beyond:
            plots.update_fade_beyond_length(beyond, n, n)
        sums = weights.sum(axis=-1)
        self.readout.value = (
            '<div style="display:flex;flex-wrap:wrap">'
            + _table("weights", weights, row_labels=toks, col_labels=toks,
                     title="weights (each row: one query)")
            + _table("row_sums", sums[:, None], row_labels=toks, col_labels=["row sum"],
                     title="row sums") + "</div>")
        dynamic = [self.grid.image, *_heatmap_dynamic(self.heat),
                   *(a for beyond in self.beyond for a in beyond.artists)]
        self._show(self.canvas, dynamic)
        self._last_key = key

    def shown(self):
        tables = read_tables(self.readout.value)
        n = self.controls["n"].value
        blank = [b.cells.get_visible() and b.cells.get_path().get_extents().bounds
                 for b in self.beyond]
        return {"mask": (_image_array(self.grid) > 0.5)[:n, :n],
                "weights": _image_array(self.heat)[:n, :n],
                "beyond_blanked": blank,  # the squares over the cells of tokens after n
                "labels_faded": [(b.row_veil.get_visible(), b.col_veil.get_visible())
                                 for b in self.beyond],
                "weights_table": tables["weights"], "row_sums": tables["row_sums"][:, 0],
                "hatched": self.heat.mask_patch.get_visible()}


def mask_explorer(n=10, kind="causal", seed=examples.SEED):
    """Mask kinds on the example sentence, applied before or (wrongly) after the softmax.

    Returns
    -------
    MaskExplorer
        Controls ``"n"``, ``"kind"`` (none, causal, padding, sliding window, custom),
        ``"length"`` (padding), ``"window"``, ``"apply"`` (before/after) and ``"custom"``
        (the grid; its buttons are ``.cell_buttons[i, j]``).
    """
    return MaskExplorer(n, kind, seed)


# --- 5. heads -----------------------------------------------------------------------------

D_MODELS = (8, 12, 16, 24, 32, 64, 512)
#: More heads than this would make each map too small to read; not offered.
MAX_HEADS = 16


def head_counts(d_model):
    """The head counts offered for ``d_model``: its divisors up to ``MAX_HEADS``.

    Examples
    --------
    >>> head_counts(12)
    [1, 2, 3, 4, 6, 12]
    """
    return [h for h in range(1, min(d_model, MAX_HEADS) + 1) if d_model % h == 0]


#: Every head count some d_model offers: the layouts whose backgrounds are drawn up front.
ALL_HEAD_COUNTS = tuple(sorted({h for d in D_MODELS for h in head_counts(d)}))
HEADS_FIGSIZE = (7.4, 6.0)  # inches at DPI: 592 x 480 pixels, room for 16 maps of 10 x 10
HEADS_AXES_RECT = (0.115, 0.1, 0.80, 0.85)  # left, bottom, width, height (figure share)


class HeadsExplorer(Explorer):
    """d_model and head count: every head's attention map, d_k per head, and the FLOPs.

    All maps are one mosaic image on one axes (``plots.head_mosaic``); a new head count
    re-tiles it and moves a fixed pool of labels. The static part of each head count's
    layout (titles, labels, colour bar) is drawn once, when the explorer is built, so no
    change ever draws the whole figure.
    """

    title = "heads"

    def __init__(self, d_model=64, h=4, seed=examples.SEED):
        super().__init__()
        self.seed = seed
        self.tokens = list(examples.TOKENS)
        self.n = len(self.tokens)
        self._params = {}
        c = self.controls
        c["d_model"] = W.Dropdown(options=D_MODELS, value=d_model, description="d_model",
                                  style=STYLE, layout=W.Layout(width="180px"))
        # A slider over the divisors only: moves with the arrow keys, offers no invalid h.
        c["h"] = _slider(W.SelectionSlider, "heads h (divisors of d_model)",
                         options=head_counts(d_model), value=h)
        self._watch("h")
        c["d_model"].observe(self._on_d_model, names="value")
        self.readout = W.HTML()
        self.canvas = _Canvas(HEADS_FIGSIZE, layout=None)
        ax = self.canvas.figure.add_axes(HEADS_AXES_RECT)
        self.mosaic = plots.head_mosaic(np.zeros((1, self.n, self.n)), self.tokens, ax=ax)
        for hh in ALL_HEAD_COUNTS:  # the slow full draws happen here, once
            plots.update_head_mosaic(self.mosaic, np.zeros((hh, self.n, self.n)))
            self.canvas.ensure_background([self.mosaic.image], static_key=hh)
        self._start(_row(c["d_model"], c["h"]), self.image, self.readout)

    def params(self, d_model):
        """Seeded token vectors and projections for ``d_model`` (cached)."""
        if d_model not in self._params:
            g = examples.rng(self.seed)
            x = g.standard_normal((self.n, d_model))
            w = g.standard_normal((4, d_model, d_model)) / math.sqrt(d_model)
            self._params[d_model] = (x, *w)
        return self._params[d_model]

    def _on_d_model(self, change):
        def switch():
            h_box = self.controls["h"]
            options = head_counts(change["new"])
            old = h_box.value
            self._busy = True
            try:
                h_box.options = options
                h_box.value = max(h for h in options if h <= old)
            finally:
                self._busy = False
            self._update()
        self._guard(switch)

    def _update(self):
        d_model, h = self.controls["d_model"].value, self.controls["h"].value
        if (d_model, h) == self._last_key:
            return
        _, weights = multi_head_attention(*self.params(d_model), h=h)  # (h, n, n)
        plots.update_head_mosaic(self.mosaic, weights)
        rows = []
        options = self.controls["h"].options
        for hh in options:
            f = attention_flops(self.n, d_model, hh)
            rows.append([hh, d_model // hh, f["scores"], f["softmax"], f["weighted_sum"],
                         f["total"]])
        self.readout.value = (
            f'<div style="font-family:sans-serif;font-size:12px">{h} heads × d_k = '
            f"{d_model // h} = d_model = {d_model}. Attention FLOPs for n = {self.n} tokens "
            f"(the products do not depend on h; only the small softmax term grows):</div>"
            + _table("flops", np.array(rows, dtype=float),
                     col_labels=["h", "d_k per head", "Q Kᵀ", "softmax", "weights V", "total"],
                     fmt="{:,.0f}", bold_rows=(options.index(h),)))
        self._show(self.canvas, [self.mosaic.image], static_key=self.mosaic.layout.heads)
        self._last_key = (d_model, h)

    def shown(self):
        table = read_tables(self.readout.value)["flops"]
        h = self.controls["h"].value
        current = table[list(table[:, 0]).index(h)]
        visible = [t.get_text() for t in self.mosaic.titles if t.get_visible()]
        return {"weights": plots.head_mosaic_panels(self.mosaic),
                "titles": visible,
                "row_labels": [t.get_text() for t in self.mosaic.row_labels if t.get_visible()],
                "col_labels": [t.get_text() for t in self.mosaic.col_labels if t.get_visible()],
                "flops_table": table, "d_k": int(current[1]),
                "flops": {"scores": current[2], "softmax": current[3],
                          "weighted_sum": current[4], "total": current[5]}}


def heads_explorer(d_model=64, h=4, seed=examples.SEED):
    """Multi-head attention on the example sentence: one map per head, the FLOP count.

    Returns
    -------
    HeadsExplorer
        Controls ``"d_model"`` and ``"h"`` (its options are the divisors of d_model, up to
        ``MAX_HEADS``, and change with it).
    """
    return HeadsExplorer(d_model, h, seed)


# --- 6. cost ------------------------------------------------------------------------------

COST_LENGTHS = tuple(2 ** p for p in range(4, 18))  # 16 ... 131072
COST_DTYPES = ("float16", "float32", "float64")
#: Longest sequence timed here: measuring it once takes well under a second.
TIME_MAX_N = 1024
TIMED_DTYPES = ("float32", "float64")  # numpy has no fast float16 matrix product
COST_HEAD_DIM = 64


def _human_bytes(nbytes):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:,.0f} {unit}" if unit == "B" else f"{nbytes:,.1f} {unit}"
        nbytes /= 1024


class CostExplorer(Explorer):
    """Sequence length and dtype: score-matrix cells and bytes, measured time, n² curve."""

    title = "cost"

    def __init__(self, n=512, dtype="float32", seed=examples.SEED):
        super().__init__()
        self.seed = seed
        self.times = {}  # (n, dtype) -> seconds, measured once
        c = self.controls
        c["n"] = _slider(W.SelectionSlider, "sequence length n", options=COST_LENGTHS, value=n)
        c["dtype"] = W.Dropdown(options=COST_DTYPES, value=dtype, description="dtype",
                                style=STYLE, layout=W.Layout(width="180px"))
        self._watch("n", "dtype")
        self.readout = W.HTML()
        self.canvas = _Canvas((7.6, 3.0))
        ax_mem, ax_time = self.canvas.figure.subplots(1, 2)
        x = np.array(COST_LENGTHS, dtype=float)
        self.memory = plots.line_with_marker(x, self._bytes_curve(dtype), n, ax=ax_mem,
                                             logx=True, logy=True, xlabel="n",
                                             ylabel="bytes of the score matrix",
                                             title="memory grows as n²")
        every = [score_matrix_bytes(int(v), dtype=d) for v in x for d in COST_DTYPES]
        ax_mem.set_ylim(min(every) / 4, max(every) * 4)
        t0 = self._time(min(COST_LENGTHS), "float32")
        self.timing = plots.line_with_marker([min(COST_LENGTHS)], [t0], n, ax=ax_time,
                                             logx=True, logy=True, xlabel="n",
                                             ylabel="seconds", title="measured time (numpy, d = 64)")
        self.timing.line.set_marker("o")
        ax_time.set_xlim(x[0] / 1.5, x[-1] * 1.5)
        ax_time.set_ylim(1e-6, 10.0)
        _hide(self.memory.text, self.timing.text)
        self._start(_row(c["n"], c["dtype"]), self.image, self.readout)

    def _bytes_curve(self, dtype):
        return np.array([score_matrix_bytes(v, dtype=dtype) for v in COST_LENGTHS], dtype=float)

    def _time(self, n, dtype):
        """Median seconds of one attention call at length n (measured once, then cached)."""
        if dtype not in TIMED_DTYPES or n > TIME_MAX_N:
            return None
        if (n, dtype) not in self.times:
            q, k, v = examples.random_qkv(n, COST_HEAD_DIM, seed=self.seed, dtype=dtype)
            repeat = 3 if n <= 256 else 1  # long ones are slow and steady: one run will do
            self.times[n, dtype] = median_time(attention, q, k, v, repeat=repeat)
        return self.times[n, dtype]

    def _update(self):
        n, dtype = self.controls["n"].value, self.controls["dtype"].value
        if (n, dtype) == self._last_key:
            return
        cells = score_matrix_cells(n)
        nbytes = score_matrix_bytes(n, dtype=dtype)
        seconds = self._time(n, dtype)
        self.memory.line.set_ydata(self._bytes_curve(dtype))
        plots.update_marker(self.memory, n, nbytes)
        timed = sorted((nn, t) for (nn, d), t in self.times.items() if d == dtype)
        self.timing.line.set_data([p[0] for p in timed], [p[1] for p in timed])
        if seconds is None:
            self.timing.marker.set_visible(False)
            if dtype not in TIMED_DTYPES:
                why = f"not timed: numpy has no fast {dtype} matrix product (a GPU has)"
            else:
                why = f"too large to time here (timing stops at n = {TIME_MAX_N:,})"
            plots.update_marker(self.timing, n, 1e-6)
        else:
            self.timing.marker.set_visible(True)
            plots.update_marker(self.timing, n, seconds)
            why = f"{seconds * 1e3:.3g} ms per attention call (d = {COST_HEAD_DIM}, measured once)"
        ratio = cells / score_matrix_cells(512)
        self.readout.value = (
            f'<div data-name="cost" style="font-family:monospace;font-size:13px">'
            f'n = <span data-k="n">{n:,}</span> · cells n² = <span data-k="cells">{cells:,}'
            f'</span> ({ratio:g} × n = 512) · {dtype}: <span data-k="bytes">{nbytes:,}</span> bytes '
            f"= {_human_bytes(nbytes)} · time: {why}</div>")
        dynamic = _marker_dynamic(self.memory) + _marker_dynamic(self.timing)
        self._show(self.canvas, dynamic)
        self._last_key = (n, dtype)

    def shown(self):
        fields = dict(re.findall(r'data-k="(\w+)">([\d,]+)<', self.readout.value))
        return {"n": int(fields["n"].replace(",", "")),
                "cells": int(fields["cells"].replace(",", "")),
                "bytes": int(fields["bytes"].replace(",", "")),
                "curve": (np.asarray(self.memory.line.get_xdata(), dtype=float),
                          np.asarray(self.memory.line.get_ydata(), dtype=float)),
                "marker": (float(self.memory.marker.get_xdata()[0]),
                           float(self.memory.marker.get_ydata()[0])),
                "timed_points": (np.asarray(self.timing.line.get_xdata(), dtype=float),
                                 np.asarray(self.timing.line.get_ydata(), dtype=float)),
                "time_marker_visible": self.timing.marker.get_visible(),
                "readout": _text_of(self.readout.value)}


def cost_explorer(n=512, dtype="float32", seed=examples.SEED):
    """Sequence length (log scale) and dtype: cells, bytes, measured time, the n² curve.

    Attention is timed once per (n, dtype) up to ``TIME_MAX_N`` and cached; longer
    sequences say that they are too large to time.

    Returns
    -------
    CostExplorer
        Controls ``"n"`` (16 to 131072, powers of 2) and ``"dtype"``.
    """
    return CostExplorer(n, dtype, seed)


# --- 7. tiling ----------------------------------------------------------------------------

BLOCK_SIZES = (1, 2, 3, 4, 5, 10)


class TilingExplorer(Explorer):
    """Step through the tiles of the online softmax: tile, running max and sum, output."""

    title = "tiling"

    def __init__(self, block_size=4, causal=False, seed=examples.SEED):
        super().__init__()
        self.tokens = list(examples.TOKENS)
        self.n = len(self.tokens)
        self.q, self.k, self.v = examples.random_qkv(self.n, 4, 2, seed=seed)
        self._steps = {}
        self._finals = {}
        c = self.controls
        c["block"] = W.Dropdown(options=BLOCK_SIZES, value=block_size, description="block size",
                                style=STYLE, layout=W.Layout(width="160px"))
        c["causal"] = W.Checkbox(value=causal, description="causal", style=STYLE, indent=False)
        c["step"] = _slider(W.IntSlider, "tile step", min=0,
                            max=len(self.steps(block_size, causal)) - 1, value=0)
        self._watch("step")
        c["block"].observe(self._on_tiling, names="value")
        c["causal"].observe(self._on_tiling, names="value")
        self.readout = W.HTML()
        self.canvas = _Canvas((6.6, 3.4))
        fig = self.canvas.figure
        axs = fig.subplots(1, 5, width_ratios=[10, 1, 1, 2, 2])
        finals = [self.finals(False), self.finals(True)]
        s_lo = min(float(np.min(f[0][np.isfinite(f[0])])) for f in finals)
        s_hi = max(float(np.max(f[0])) for f in finals)
        o_lo = min(float(f[1].min()) for f in finals)
        o_hi = max(float(f[1].max()) for f in finals)
        l_hi = max(float(st.running_sum.max()) for b in BLOCK_SIZES for cz in (False, True)
                   for st in self.steps(b, cz))
        toks = self.tokens
        empty = np.zeros((self.n, 1))
        self.score_map = plots.heatmap(finals[int(causal)][0], toks, toks, ax=axs[0],
                                       vmin=s_lo, vmax=s_hi, annotate=False, colorbar=False,
                                       title="scores, tile by tile")
        self.m_map = plots.heatmap(empty, toks, ["m"], ax=axs[1], vmin=s_lo, vmax=s_hi,
                                   annotate=False, colorbar=False, title="max", xlabel=None,
                                   ylabel=None)
        self.l_map = plots.heatmap(empty, toks, ["l"], ax=axs[2], vmin=0.0, vmax=l_hi,
                                   annotate=False, colorbar=False, title="sum", xlabel=None,
                                   ylabel=None)
        dims = ["1", "2"]
        self.partial_map = plots.heatmap(np.zeros((self.n, 2)), toks, dims, ax=axs[3],
                                         vmin=o_lo, vmax=o_hi, annotate=False, colorbar=False,
                                         title="partial", xlabel="dim", ylabel=None)
        self.final_map = plots.heatmap(finals[int(causal)][1], toks, dims, ax=axs[4],
                                       vmin=o_lo, vmax=o_hi, annotate=False, colorbar=False,
                                       title="final", xlabel="dim", ylabel=None)
        for art in (self.m_map, self.l_map, self.partial_map, self.final_map):
            art.ax.tick_params(labelleft=False)
        self.tile = axs[0].add_patch(Rectangle((-0.5, -0.5), 1, 1, fill=False, zorder=5,
                                               edgecolor=plots.HIGHLIGHT_EDGE_COLOR,
                                               linewidth=plots.HIGHLIGHT_LINEWIDTH))
        self.pending = PathPatch(
            plots.cell_squares_path(np.zeros((self.n, self.n), dtype=bool)),
            facecolor=(1, 1, 1, 0.55), edgecolor="none", zorder=4)
        axs[0].add_patch(self.pending)
        self._start(_row(c["block"], c["causal"], c["step"]), self.image, self.readout)

    def steps(self, block_size, causal):
        """The TileSteps of ``flash_attention_steps`` for these settings (cached)."""
        if (block_size, causal) not in self._steps:
            self._steps[block_size, causal] = flash_attention_steps(
                self.q, self.k, self.v, block_size=block_size, causal=causal)
        return self._steps[block_size, causal]

    def finals(self, causal):
        """(scores with masked cells at -inf, final output) for causal or not (cached)."""
        if causal not in self._finals:
            self._finals[causal] = self._compute_finals(causal)
        return self._finals[causal]

    def _compute_finals(self, causal):
        mask = causal_mask(self.n) if causal else None
        out, _ = attention(self.q, self.k, self.v, mask=mask)
        s = scores(self.q, self.k)
        if causal:
            s = np.where(mask, s, MASKED_SCORE)
        return s, out

    def _on_tiling(self, change):
        def retile():
            c = self.controls
            self._busy = True
            try:
                c["step"].value = 0
                c["step"].max = len(self.steps(c["block"].value, c["causal"].value)) - 1
            finally:
                self._busy = False
            self._update()
        self._guard(retile)

    def _update(self):
        c = self.controls
        block, causal, k = c["block"].value, c["causal"].value, c["step"].value
        if (block, causal, k) == self._last_key:
            return
        steps = self.steps(block, causal)
        step = steps[k]
        s, final = self.finals(causal)
        if self._last_key is None or self._last_key[1] != causal:
            plots.update_heatmap(self.score_map, s)
            plots.update_heatmap(self.final_map, final)
        plots.update_heatmap(self.m_map, step.running_max[:, None])
        plots.update_heatmap(self.l_map, step.running_sum[:, None])
        plots.update_heatmap(self.partial_map, step.partial_output)
        r, cc = step.rows, step.cols
        self.tile.set_bounds(cc.start - 0.5, r.start - 0.5, cc.stop - cc.start, r.stop - r.start)
        self.tile.set_linestyle("--" if step.skipped else "-")
        done = np.zeros((self.n, self.n), dtype=bool)  # tiles processed so far (incl. this)
        for st in steps[: k + 1]:
            done[st.rows, st.cols] = True
        self.pending.set_path(plots.cell_squares_path(~done))
        full = self.n * self.n
        status = "skipped (above the diagonal)" if step.skipped else "computed"
        table = np.column_stack([step.running_max, step.running_sum, step.partial_output, final])
        self.readout.value = (
            f'<div data-name="memory" style="font-family:monospace;font-size:13px">'
            f"tile {k + 1} of {len(steps)}: rows {r.start}–{r.stop - 1}, keys "
            f"{cc.start}–{cc.stop - 1}, {status}. Scores in memory: "
            f'<span data-k="tile">{step.tile_elements}</span> elements of the full matrix\'s '
            f'<span data-k="full">{full}</span> ({100 * step.tile_elements / full:.0f}%).</div>'
            + _table("rows", table, row_labels=self.tokens,
                     col_labels=["running max m", "running sum l", "partial 1", "partial 2",
                                 "final 1", "final 2"]))
        # The scores and the final output change only with "causal": they are part of the
        # cached background of each causal setting; only the running state is drawn.
        dynamic = [*(a.image for a in (self.m_map, self.l_map, self.partial_map)),
                   self.pending, self.tile]
        self._show(self.canvas, dynamic, static_key=causal)
        self._last_key = (block, causal, k)

    def shown(self):
        x, y = self.tile.get_xy()
        rows = (int(round(y + 0.5)), int(round(y + 0.5 + self.tile.get_height())))
        cols = (int(round(x + 0.5)), int(round(x + 0.5 + self.tile.get_width())))
        fields = dict(re.findall(r'data-k="(\w+)">(\d+)<', self.readout.value))
        table = read_tables(self.readout.value)["rows"]
        return {"tile": (rows, cols), "running_max": _image_array(self.m_map)[:, 0],
                "running_sum": _image_array(self.l_map)[:, 0],
                "partial": _image_array(self.partial_map), "final": _image_array(self.final_map),
                "scores": _image_array(self.score_map), "table": table,
                "tile_elements": int(fields["tile"]), "full_elements": int(fields["full"])}


def tiling_explorer(block_size=4, causal=False, seed=examples.SEED):
    """Step through tiled attention with an online softmax on the example sentence.

    Returns
    -------
    TilingExplorer
        Controls ``"block"`` (tile edge), ``"causal"`` and ``"step"`` (which tile).
    """
    return TilingExplorer(block_size, causal, seed)
