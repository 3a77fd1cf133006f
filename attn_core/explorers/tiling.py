"""Tiling: flash attention's blocks and online softmax, one tile at a time."""

from __future__ import annotations

import re

import ipywidgets as W
import numpy as np
from matplotlib.patches import PathPatch, Rectangle

from .. import examples, figures
from ..attention import MASKED_SCORE, attention, scores
from ..flash import flash_attention_steps
from ..masks import causal_mask
from .arguments import check_bool, check_option, check_seed
from .base import STYLE, Explorer, _Canvas, _image_array, _row, _slider, _table, read_tables

__all__ = [
    "TilingExplorer",
    "tiling_explorer",
]

BLOCK_SIZES = (1, 2, 3, 4, 5, 10)


class TilingExplorer(Explorer):
    """Step through the tiles of the online softmax: tile, running max and sum, output."""

    title = "tiling"

    def __init__(self, block_size=4, causal=False, seed=examples.SEED):
        block_size = check_option(block_size, "block_size", BLOCK_SIZES)
        causal = check_bool(causal, "causal")
        seed = check_seed(seed)
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
        self.score_map = figures.heatmap(finals[int(causal)][0], toks, toks, ax=axs[0],
                                         vmin=s_lo, vmax=s_hi, annotate=False, colorbar=False,
                                         title="scores, tile by tile")
        self.m_map = figures.heatmap(empty, toks, ["m"], ax=axs[1], vmin=s_lo, vmax=s_hi,
                                     annotate=False, colorbar=False, title="max", xlabel=None,
                                     ylabel=None)
        self.l_map = figures.heatmap(empty, toks, ["l"], ax=axs[2], vmin=0.0, vmax=l_hi,
                                     annotate=False, colorbar=False, title="sum", xlabel=None,
                                     ylabel=None)
        dims = ["1", "2"]
        self.partial_map = figures.heatmap(np.zeros((self.n, 2)), toks, dims, ax=axs[3],
                                           vmin=o_lo, vmax=o_hi, annotate=False, colorbar=False,
                                           title="partial", xlabel="dim", ylabel=None)
        self.final_map = figures.heatmap(finals[int(causal)][1], toks, dims, ax=axs[4],
                                         vmin=o_lo, vmax=o_hi, annotate=False, colorbar=False,
                                         title="final", xlabel="dim", ylabel=None)
        for art in (self.m_map, self.l_map, self.partial_map, self.final_map):
            art.ax.tick_params(labelleft=False)
        self.tile = axs[0].add_patch(Rectangle((-0.5, -0.5), 1, 1, fill=False, zorder=5,
                                               edgecolor=figures.HIGHLIGHT_EDGE_COLOR,
                                               linewidth=figures.HIGHLIGHT_LINEWIDTH))
        self.pending = PathPatch(
            figures.cell_squares_path(np.zeros((self.n, self.n), dtype=bool)),
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
            figures.update_heatmap(self.score_map, s)
            figures.update_heatmap(self.final_map, final)
        figures.update_heatmap(self.m_map, step.running_max[:, None])
        figures.update_heatmap(self.l_map, step.running_sum[:, None])
        figures.update_heatmap(self.partial_map, step.partial_output)
        r, cc = step.rows, step.cols
        self.tile.set_bounds(cc.start - 0.5, r.start - 0.5, cc.stop - cc.start, r.stop - r.start)
        self.tile.set_linestyle("--" if step.skipped else "-")
        done = np.zeros((self.n, self.n), dtype=bool)  # tiles processed so far (incl. this)
        for st in steps[: k + 1]:
            done[st.rows, st.cols] = True
        self.pending.set_path(figures.cell_squares_path(~done))
        full = self.n * self.n
        status = "skipped (above the diagonal)" if step.skipped else "computed"
        table = np.column_stack([step.running_max, step.running_sum, step.partial_output, final])
        self.readout.value = (
            f'<div data-name="memory" style="font-family:monospace;font-size:13px">'
            f"tile {k + 1} of {len(steps)}: rows {r.start + 1}–{r.stop}, keys "
            f"{cc.start + 1}–{cc.stop}, {status}. Scores in memory: "
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
