"""Training: step through stored snapshots of a run; d_k and the scaling pick the run.

Every run is trained once, when the explorer is built (or before, and passed in); the
controls only choose which stored loss curve and attention map to show, so a slider move
never trains anything.
"""

from __future__ import annotations

import ipywidgets as W
import numpy as np

from .. import figures
from ..training import Run, running_mean, scaling_runs
from .arguments import check_bool, check_int, check_option
from .base import (
    STYLE,
    Explorer,
    _Canvas,
    _heatmap_dynamic,
    _hide,
    _marker_dynamic,
    _row,
    _slider,
    _table,
    _text_of,
    read_tables,
)

__all__ = [
    "TrainingExplorer",
    "training_explorer",
]

SMOOTH_WINDOW = 10


class TrainingExplorer(Explorer):
    """A training run's loss curve with the current step, and the head's map at that step."""

    title = "training"

    def __init__(self, runs=None, d_k=None, scaled=True, seed_index=0):
        super().__init__()
        scaled = check_bool(scaled, "scaled")
        self.runs = scaling_runs(seeds=(0,), steps=120) if runs is None else _check_runs(runs)
        d_ks = sorted({key[0] for key in self.runs})
        d_k = d_ks[-1] if d_k is None else check_option(d_k, "d_k", d_ks, " (the runs' widths)")
        if (d_k, scaled) not in self.runs:
            raise ValueError(f"runs has no entry for d_k = {d_k}, scaled = {scaled}; it has "
                             f"{sorted(self.runs)}")
        shortest = min(len(rs) for rs in self.runs.values())
        seed_index = check_int(seed_index, "seed_index", 0, shortest - 1)
        first = self.runs[d_k, scaled][seed_index]
        self.seed_index = seed_index
        self.steps = [int(s) for s in first.snapshot_steps]
        self.curves = {key: running_mean(rs[seed_index].losses, SMOOTH_WINDOW)
                       for key, rs in self.runs.items()}
        lo = min(c.min() for c in self.curves.values())
        hi = max(c.max() for c in self.curves.values())
        c = self.controls
        c["step"] = _slider(W.SelectionSlider, "training step", options=self.steps,
                            value=self.steps[-1])
        c["d_k"] = _slider(W.SelectionSlider, "d_k (width of q and k)", options=d_ks, value=d_k)
        c["scaled"] = W.Checkbox(value=scaled, description="divide scores by √d_k",
                                 style=STYLE, indent=False)
        self._watch("step", "d_k", "scaled")
        self.readout = W.HTML()
        self.canvas = _Canvas((8.4, 3.4))
        n = first.probe_pattern.shape[0]
        labels = [f"p{i + 1}" for i in range(n - 1)] + ["query"]  # the look-up task's rows
        self.art = figures.training_figure(
            self.curves[d_k, scaled], self.steps[-1], first.snapshot_weights[-1],
            pattern=first.probe_pattern, fig=self.canvas.figure, labels=labels,
            title="loss (mean of 10 steps)", ylim=(lo / 1.5, hi * 1.5), annotate=False)
        self.labels = labels
        _hide(self.art.curve.text)  # the numbers are in the read-out: text is slow to draw
        self._start(c["step"], _row(c["d_k"], c["scaled"]), self.image, self.readout)

    def _run(self):
        return self.runs[self.controls["d_k"].value, self.controls["scaled"].value][
            self.seed_index]

    def _update(self):
        step, d_k, scaled = (self.controls[n].value for n in ("step", "d_k", "scaled"))
        if (step, d_k, scaled) == self._last_key:
            return
        run = self._run()
        i = self.steps.index(step)
        weights = run.snapshot_weights[i]
        curve = self.curves[d_k, scaled]
        figures.update_training_figure(self.art, curve, step, weights)
        query = int(np.argmax(run.probe_pattern.sum(axis=1)))
        on_right = float(weights[query] @ run.probe_pattern[query])
        how = "scaled by 1/√d_k" if scaled else "unscaled"
        loss = float(curve[min(step, curve.size - 1)])
        self.readout.value = (
            f'<div data-name="readout" style="font-family:monospace;font-size:13px">'
            f"d_k = {d_k} ({how}), step {step}: loss {loss:.3f} · the query's weight on the "
            f"matching pair {on_right:.3f}</div>"
            + _table("query_row", weights[query][None, :], row_labels=["query"],
                     col_labels=self.labels,
                     title="the query's attention weights"))
        # the run's curve is part of the background (one cached per run); a step moves only
        # the marker and the map
        dynamic = [*_marker_dynamic(self.art.curve), *_heatmap_dynamic(self.art.map)]
        self._show(self.canvas, dynamic, static_key=(d_k, scaled))
        self._last_key = (step, d_k, scaled)

    def shown(self):
        curve = self.art.curve
        return {"loss": np.asarray(curve.line.get_ydata(), dtype=float),
                "marker": (float(curve.marker.get_xdata()[0]),
                           float(curve.marker.get_ydata()[0])),
                "map": np.array(np.ma.getdata(self.art.map.image.get_array()), dtype=float),
                "query_row": read_tables(self.readout.value)["query_row"][0],
                "readout": _text_of(self.readout.value)}


def _check_runs(runs):
    """``runs`` if it maps ``(d_k, scaled)`` to non-empty lists of Run, as scaling_runs does."""
    if not isinstance(runs, dict) or not runs:
        raise TypeError("runs must be a non-empty dict {(d_k, scaled): [Run, ...]} as returned "
                        f"by attn_core.training.scaling_runs, got {type(runs).__name__}")
    for key, rs in runs.items():
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(rs, (list, tuple))
                and rs and all(isinstance(r, Run) for r in rs)):
            raise TypeError("runs must map (d_k, scaled) to a non-empty list of Run, as "
                            f"scaling_runs returns; got {key!r}: {type(rs).__name__}")
    return runs


def training_explorer(runs=None, d_k=None, scaled=True, seed_index=0):
    """Step through a training run on the look-up task; d_k and scaling choose the run.

    Parameters
    ----------
    runs : dict, optional
        ``runs[d_k, scaled]`` a list of :class:`~attn_core.training.Run` (one per seed), as
        returned by :func:`~attn_core.training.scaling_runs`; trained once here (one seed,
        120 steps) when None.
    d_k : int, optional
        Starting width (default: the largest in ``runs``).
    scaled : bool, optional
    seed_index : int, optional
        Which seed's run to show.

    Returns
    -------
    TrainingExplorer
        Controls ``"step"`` (the stored snapshot steps), ``"d_k"`` and ``"scaled"``.
    """
    return TrainingExplorer(runs, d_k, scaled, seed_index)
