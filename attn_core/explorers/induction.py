"""Induction heads: step through the stored training run (notebook 15), with an ablation
switch.

Everything is computed when the explorer is built, from the stored snapshots
(:func:`attn_core.nn.induction_run.snapshot_states`: a few forward passes per snapshot);
the slider and the switch only choose what to show, so a control never trains or runs the
model.
"""

from __future__ import annotations

import ipywidgets as W
import numpy as np

from .. import figures
from ..nn.induction_run import ABLATIONS, load_runs, snapshot_states
from .arguments import check_int, check_option
from .base import (
    Explorer,
    _Canvas,
    _choice_slider,
    _heatmap_dynamic,
    _slider,
    _table,
    _text_of,
    read_tables,
)

__all__ = ["InductionExplorer", "induction_explorer"]

#: What the switch says for each ablation.
ABLATION_LABELS = {"none": "no ablation", "prev": "previous-token head ablated",
                   "control": "control head ablated"}


class InductionExplorer(Explorer):
    """Losses of both copies with the step marked, the found heads' maps at that step."""

    title = "induction heads"

    def __init__(self, runs=None, seed=0, step=None, ablation="none", sequence=0):
        super().__init__()
        self.runs = load_runs() if runs is None else runs
        seeds = sorted({r["seed"] for r in self.runs.trace["runs"] if r["n_layers"] == 2})
        seed = check_option(seed, "seed", seeds, " (the stored two-layer runs)")
        ablation = check_option(ablation, "ablation", ABLATIONS)
        n_seq = self.runs.trace["task"]["eval_batch"]
        sequence = check_int(sequence, "sequence", 0, n_seq - 1)
        self.state = snapshot_states(self.runs, seed, 2, sequence)
        steps = self.state["steps"]
        step = steps[-1] if step is None else check_option(step, "step", steps,
                                                           " (the stored snapshots)")
        run = self.runs.run(seed, 2)
        self.curve_steps = np.asarray(run["eval_steps"])
        losses = {"first copy": run["first"], "second copy": run["second"]}
        c = self.controls
        c["step"] = _slider(W.SelectionSlider, "training step", options=steps, value=step)
        # a slider, not buttons: it takes the arrow keys (JupyterLab moves cells on arrow
        # keys that no control takes)
        c["ablation"], ablation_row = _choice_slider(
            "ablation", [(ABLATION_LABELS[k], k) for k in ABLATIONS], ablation)
        self._watch("step", "ablation")
        self.readout = W.HTML()
        self.canvas = _Canvas(figures.induction.FIGSIZE)
        heads = self.state["heads"]
        (l1, h1), (l2, h2) = heads["prev"], heads["induction"]
        prev_map, ind_map = self.state["maps"][(step, ablation)]
        segment = self.runs.trace["task"]["eval_segment"]
        self.art = figures.induction_figure(
            self.curve_steps, losses, step, prev_map, ind_map, segment=segment,
            titles=(f"layer {l1 + 1} head {h1 + 1} (previous token)",
                    f"layer {l2 + 1} head {h2 + 1} (induction)"), fig=self.canvas.figure)
        self._start(c["step"], ablation_row, self.image, self.readout)

    def _update(self):
        step, ablation = self.controls["step"].value, self.controls["ablation"].value
        if (step, ablation) == self._last_key:
            return
        prev_map, ind_map = self.state["maps"][(step, ablation)]
        figures.update_induction_figure(self.art, step, prev_map, ind_map)
        first, second, ind = self.state["numbers"][(step, ablation)]  # this row's model
        c = self.state["heads"]["control"]
        self.readout.value = (
            f'<div data-name="readout" style="font-family:monospace;font-size:13px">'
            f"step {step}, {ABLATION_LABELS[ablation]} (control: layer {c[0] + 1} head "
            f"{c[1] + 1}; ablated = replaced by its mean over other sequences)</div>"
            + _table("numbers", np.array([[first, second, ind]]),
                     row_labels=[ABLATION_LABELS[ablation]],
                     col_labels=["first-copy loss", "second-copy loss", "induction score"],
                     title="the model as ablated, over the 64 evaluation sequences"))
        dynamic = [*self.art.markers.values(), self.art.guide,
                   *(a for m in self.art.maps for a in _heatmap_dynamic(m)),
                   *self.art.copy_lines]  # drawn over the maps again
        self._show(self.canvas, dynamic)
        self._last_key = (step, ablation)

    def shown(self):
        return {"step": float(self.art.guide.get_xdata()[0]),
                "markers": {k: float(m.get_ydata()[0]) for k, m in self.art.markers.items()},
                "maps": tuple(np.array(np.ma.getdata(m.image.get_array()), dtype=float)
                              for m in self.art.maps),
                "numbers": read_tables(self.readout.value)["numbers"][0],
                "readout": _text_of(self.readout.value)}


def induction_explorer(runs=None, seed=0, step=None, ablation="none", sequence=0):
    """Step through a stored two-layer run: losses on both copies, the previous-token and
    induction heads' maps, and what ablating a layer-1 head does.

    Parameters
    ----------
    runs : InductionRuns, optional
        Default: the stored runs (:func:`attn_core.nn.induction_run.load_runs`).
    seed : int, optional
        Which stored two-layer run (the snapshots are stored for seed 0).
    step : int, optional
        Starting step (default: the last stored one).
    ablation : "none", "prev" or "control", optional
    sequence : int, optional
        Which evaluation sequence the maps show.

    Returns
    -------
    InductionExplorer
        Controls ``"step"`` and ``"ablation"``.
    """
    return InductionExplorer(runs, seed, step, ablation, sequence)
