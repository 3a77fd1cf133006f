"""Heads: the same input split into h heads of d_model / h dimensions each."""

from __future__ import annotations

import math

import ipywidgets as W
import numpy as np

from .. import examples, figures
from ..cost import attention_flops
from ..multihead import multi_head_attention
from .arguments import check_option, check_seed
from .base import STYLE, Explorer, _Canvas, _row, _slider, _table, read_tables

__all__ = [
    "HeadsExplorer",
    "heads_explorer",
]

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

    All maps are one mosaic image on one axes (``figures.head_mosaic``); a new head count
    re-tiles it and moves a fixed pool of labels. The static part of each head count's
    layout (titles, labels, colour bar) is drawn once, when the explorer is built, so no
    change ever draws the whole figure.
    """

    title = "heads"

    def __init__(self, d_model=64, h=4, seed=examples.SEED):
        d_model = check_option(d_model, "d_model", D_MODELS)
        h = check_option(h, "h", head_counts(d_model),
                         f" (the divisors of d_model = {d_model}, up to {MAX_HEADS})")
        seed = check_seed(seed)
        super().__init__()
        self.seed = seed
        self.tokens = list(examples.TOKENS)
        self.n = len(self.tokens)
        self._params = {}
        c = self.controls
        c["d_model"] = W.Dropdown(options=D_MODELS, value=d_model, description="d_model",
                                  style=STYLE,
                                  layout=W.Layout(width="180px", margin="0 32px 0 0"))
        # A slider over the divisors only: moves with the arrow keys, offers no invalid h.
        c["h"] = _slider(W.SelectionSlider, "heads h (divisors of d_model)",
                         options=head_counts(d_model), value=h)
        self._watch("h")
        c["d_model"].observe(self._on_d_model, names="value")
        self.readout = W.HTML()
        self.canvas = _Canvas(HEADS_FIGSIZE, layout=None)
        ax = self.canvas.figure.add_axes(HEADS_AXES_RECT)
        self.mosaic = figures.head_mosaic(np.zeros((1, self.n, self.n)), self.tokens, ax=ax)
        for hh in ALL_HEAD_COUNTS:  # the slow full draws happen here, once
            figures.update_head_mosaic(self.mosaic, np.zeros((hh, self.n, self.n)))
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
        figures.update_head_mosaic(self.mosaic, weights)
        rows = []
        options = self.controls["h"].options
        for hh in options:
            f = attention_flops(self.n, d_model, hh)
            rows.append([hh, d_model // hh, f["scores"], f["softmax"], f["weighted_sum"],
                         f["total"]])
        self.readout.value = (
            f'<div style="font-family:sans-serif;font-size:12px">{h} heads × d_k {d_model // h}'
            f" = d_model {d_model}. Attention FLOPs for n = {self.n} tokens "
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
        return {"weights": figures.head_mosaic_panels(self.mosaic),
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
