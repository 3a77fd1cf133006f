"""Scaling: how the scores' spread and the softmax's saturation grow with d_k, and how
dividing by sqrt(d_k) undoes it.
"""

from __future__ import annotations

import ipywidgets as W
import numpy as np

from .. import examples, figures
from ..attention import scores
from ..softmax import softmax, softmax_jacobian
from .arguments import check_int, check_option, check_seed
from .base import (
    STYLE,
    Explorer,
    _bars_dynamic,
    _Canvas,
    _hide,
    _marker_dynamic,
    _row,
    _slider,
    _text_of,
)

__all__ = [
    "ScalingExplorer",
    "scaling_explorer",
]

D_K_STEPS = tuple(2 ** p for p in range(11))  # 1, 2, 4, ..., 1024
N_RANGE = (2, 128)  # tokens: at least a pair to spread, at most a readable row of bars


class ScalingExplorer(Explorer):
    """Why divide by √d_k: spread of scores, softmax of a row, and its gradient, vs d_k."""

    title = "scaling"

    def __init__(self, n=16, seed=examples.SEED, d_k=64):
        n = check_int(n, "n", *N_RANGE)
        seed = check_seed(seed)
        d_k = check_option(d_k, "d_k", D_K_STEPS)
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
            "spread": figures.line_with_marker(x, curves["spread"], d_k, ax=axs[0, 0], logx=True,
                                               logy=True, xlabel="d_k", ylabel="std of scores",
                                               title="spread of the scores"),
            "max_weight": figures.line_with_marker(x, curves["max_weight"], d_k, ax=axs[1, 0],
                                                   logx=True, xlabel="d_k", ylabel="largest weight",
                                                   title="largest weight in the row"),
            "gradient": figures.line_with_marker(x, curves["gradient"], d_k, ax=axs[1, 1],
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
            else:  # log axes: down to the smallest positive value, so every marker is on them
                positive = both[name][both[name] > 0]
                lo = positive.min() if positive.size else 1e-12
                art.ax.set_ylim(lo / 3, hi * 3)
        self.bars = figures.weight_bars(self.stats[True, d_k]["row"], ax=axs[0, 1],
                                        title="softmax of row 1", xlabel="key")
        ticks = range(0, n, 3)  # counted from 1, as the title's row and the course's prose
        axs[0, 1].set_xticks(ticks, [str(j + 1) for j in ticks])
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
            figures.update_marker(art, d_k, st[name])
        figures.update_weight_bars(self.bars, st["row"])
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
                      "marker": (float(art.marker.get_xdata()[0]),
                                 float(art.marker.get_ydata()[0]))}
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
