"""Softmax: one row of scores, its weights as bars, and a temperature."""

from __future__ import annotations

import ipywidgets as W
import numpy as np

from .. import examples, figures
from .._validate import as_float_array
from ..softmax import softmax
from .arguments import check_in_range, check_number
from .base import (
    STYLE,
    Explorer,
    _bars_dynamic,
    _Canvas,
    _hide,
    _row,
    _slider,
    _table,
    _text_of,
    read_tables,
)

__all__ = [
    "SoftmaxExplorer",
    "softmax_explorer",
]


TEMPERATURE_NOTE = "weights = softmax(x / T): a small T sharpens them, a large T evens them"


class SoftmaxExplorer(Explorer):
    """A row of scores and a temperature: the weights as bars, and their sum."""

    title = "softmax"
    SCORE_RANGE = (-20.0, 20.0)
    MAX_SCORES = 16
    TEMPERATURE_EXPONENTS = (-1.5, 1.5)  # the slider: T from 10^-1.5 to 10^1.5

    def __init__(self, row=None, temperature=1.0):
        row = self.check_row(examples.SMALL_SCORES if row is None else row)
        lo, hi = self.TEMPERATURE_EXPONENTS
        temperature = check_number(temperature, "temperature", 10 ** lo, 10 ** hi,
                                   " (the slider's range)")
        super().__init__()
        self.n = len(row)
        c = self.controls
        boxes = []
        for i, value in enumerate(row):
            c[f"score {i}"] = W.BoundedFloatText(
                value=float(value), min=self.SCORE_RANGE[0], max=self.SCORE_RANGE[1], step=0.5,
                description=f"x{i + 1}", style=STYLE, layout=W.Layout(width="110px"))
            boxes.append(c[f"score {i}"])
        # A short label (the formula is on its own line): the slider keeps its length.
        c["temperature"] = _slider(W.FloatLogSlider, "temperature T", value=temperature,
                                   base=10, min=lo, max=hi, step=0.05, readout_format=".3g")
        self._watch(*c)
        self.readout = W.HTML()
        self.canvas = _Canvas((4.6, 2.8))
        ax = self.canvas.figure.add_subplot()
        self.labels = [f"x{i + 1}" for i in range(self.n)]
        self.bars = figures.weight_bars(softmax(row), self.labels, ax=ax,
                                        xlabel="entry x_j of the score row", title="weights")
        _hide(*self.bars.value_texts)  # the numbers are in the table: text is slow to draw
        self._start(_row(*boxes), W.HTML(TEMPERATURE_NOTE), c["temperature"], self.image,
                    self.readout)

    @classmethod
    def check_row(cls, row):
        """``row`` as a float64 vector of 1 to ``MAX_SCORES`` entries in ``SCORE_RANGE``."""
        row = as_float_array(row, "row", layout="(n,)")
        if row.ndim != 1:
            raise ValueError(f"row must be one row of scores, shape (n,), got shape {row.shape}")
        if not 1 <= row.size <= cls.MAX_SCORES:
            raise ValueError(f"row must hold 1 to {cls.MAX_SCORES} scores, got {row.size}")
        return np.array(check_in_range(row, "row", cls.SCORE_RANGE, "the explorer"))

    def _update(self):
        row = np.array([self.controls[f"score {i}"].value for i in range(self.n)])
        t = self.controls["temperature"].value
        key = (row.tobytes(), t)
        if key == self._last_key:
            return
        weights = softmax(row / t)
        figures.update_weight_bars(self.bars, weights)
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

    Parameters
    ----------
    row : (n,) array_like, optional
        1 to 16 scores from -20 to 20 (default: ``examples.SMALL_SCORES``).
    temperature : float, optional
        From 10^-1.5 (about 0.0316) to 10^1.5 (about 31.6), the slider's range.

    Returns
    -------
    SoftmaxExplorer
        Controls ``"score 0"``, ``"score 1"``, ... and ``"temperature"`` (0.03 to 30).
    """
    return SoftmaxExplorer(row, temperature)
