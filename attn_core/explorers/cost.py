"""Cost: cells, FLOPs, bytes and measured time of attention as the length n grows."""

from __future__ import annotations

import re
from functools import partial

import ipywidgets as W
import numpy as np

from .. import examples, figures
from ..attention import attention
from ..cost import interleaved_times, score_matrix_bytes, score_matrix_cells
from ..threads import blas_threads
from .arguments import check_option, check_seed
from .base import (
    STYLE,
    Explorer,
    _Canvas,
    _hide,
    _marker_dynamic,
    _row,
    _slider,
    _text_of,
    clocked,
)

__all__ = [
    "CostExplorer",
    "cost_explorer",
]

COST_LENGTHS = tuple(2 ** p for p in range(4, 18))  # 16 ... 131072
COST_DTYPES = ("float16", "float32", "float64")
#: Seconds slept before each timed run (a process that has just slept is scheduled at once).
TIME_PAUSE = 0.002
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
        n = check_option(n, "n", COST_LENGTHS)
        if not isinstance(dtype, str) and dtype in (np.float16, np.float32, np.float64):
            dtype = np.dtype(dtype).name  # np.float32 -> "float32"
        dtype = check_option(dtype, "dtype", COST_DTYPES)
        seed = check_seed(seed)
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
        self.memory = figures.line_with_marker(x, self._bytes_curve(dtype), n, ax=ax_mem,
                                               logx=True, logy=True, xlabel="n",
                                               ylabel="bytes of the score matrix",
                                               title="memory grows as n²")
        every = [score_matrix_bytes(int(v), dtype=d) for v in x for d in COST_DTYPES]
        ax_mem.set_ylim(min(every) / 4, max(every) * 4)
        t0 = self._time(min(COST_LENGTHS), "float32")
        self.timing = figures.line_with_marker([min(COST_LENGTHS)], [t0], n, ax=ax_time,
                                               logx=True, logy=True, xlabel="n", ylabel="seconds",
                                               title="measured time (numpy, d = 64)")
        self.timing.line.set_marker("o")
        ax_time.set_xlim(x[0] / 1.5, x[-1] * 1.5)
        ax_time.set_ylim(1e-6, 10.0)
        _hide(self.memory.text, self.timing.text)
        self._start(_row(c["n"], c["dtype"]), self.image, self.readout)

    def _bytes_curve(self, dtype):
        return np.array([score_matrix_bytes(v, dtype=dtype) for v in COST_LENGTHS], dtype=float)

    def _time(self, n, dtype):
        """Fastest seconds of one attention call at length n over a few runs, each after a
        short pause, on one BLAS thread (measured once, then cached): on a busy machine a
        single run, or two threads waiting for a second core, made the curve dip (notebook
        09 times its curve the same way)."""
        if dtype not in TIMED_DTYPES or n > TIME_MAX_N:
            return None
        if (n, dtype) not in self.times:
            q, k, v = examples.random_qkv(n, COST_HEAD_DIM, seed=self.seed, dtype=dtype)
            rounds = 5 if n <= 256 else 3
            with blas_threads():  # the learner rule; the timing needs it too
                runs, _ = interleaved_times({n: partial(attention, q, k, v)}, rounds=rounds,
                                            pause=TIME_PAUSE)
            self.times[n, dtype] = min(runs[n])
        return self.times[n, dtype]

    def _update(self):
        n, dtype = self.controls["n"].value, self.controls["dtype"].value
        if (n, dtype) == self._last_key:
            return
        cells = score_matrix_cells(n)
        nbytes = score_matrix_bytes(n, dtype=dtype)
        seconds = self._time(n, dtype)
        self.memory.line.set_ydata(self._bytes_curve(dtype))
        figures.update_marker(self.memory, n, nbytes)
        timed = sorted((nn, t) for (nn, d), t in self.times.items() if d == dtype)
        self.timing.line.set_data([p[0] for p in timed], [p[1] for p in timed])
        if seconds is None:
            self.timing.marker.set_visible(False)
            if dtype not in TIMED_DTYPES:
                why = f"not timed: numpy has no fast {dtype} matrix product (a GPU has)"
            else:
                why = f"too large to time here (timing stops at n = {TIME_MAX_N:,})"
            figures.update_marker(self.timing, n, 1e-6)
        else:
            self.timing.marker.set_visible(True)
            figures.update_marker(self.timing, n, seconds)
            why = clocked("span", f"{seconds * 1e3:.3g} ms per attention call (d = "
                                  f"{COST_HEAD_DIM}, measured once)",
                          instead="measured when a kernel runs this explorer (the curve shows "
                                  "the times of the machine that built this page)")
        ratio = cells / score_matrix_cells(512)
        self.readout.value = (
            f'<div data-name="cost" style="font-family:monospace;font-size:13px">'
            f'n = <span data-k="n">{n:,}</span> · cells n² = <span data-k="cells">{cells:,}'
            f'</span> ({ratio:g} × n = 512) · {dtype}: <span data-k="bytes">{nbytes:,}</span> '
            f"bytes = {_human_bytes(nbytes)} · time: {why}</div>")
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
