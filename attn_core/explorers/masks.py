"""Masks: none, causal, padding, sliding window or custom, and the weights they leave."""

from __future__ import annotations

import ipywidgets as W
import numpy as np

from .. import examples, figures
from ..attention import attention
from ..masks import causal_mask, padding_mask, window_mask
from .base import (
    STYLE,
    Explorer,
    _Canvas,
    _heatmap_dynamic,
    _hide,
    _image_array,
    _row,
    _slider,
    _table,
    read_tables,
)

__all__ = [
    "MaskExplorer",
    "mask_explorer",
]

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
        self.grid = figures.mask_grid(np.ones(size, dtype=bool), toks, toks, ax=ax_mask,
                                      title="mask")
        _hide(*self.grid.texts.ravel())  # ✓/✗ are slow to draw; the colours say it
        self.heat = figures.heatmap(np.zeros(size), toks, toks, ax=ax_w, vmin=0.0, vmax=1.0,
                                    annotate=False, title="weights", mask=np.ones(size, bool))
        self.beyond = [figures.fade_beyond_length(ax, size) for ax in (ax_mask, ax_w)]
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
        change["owner"].description = figures.MASK_SYMBOLS[bool(change["new"])]
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
        figures.update_mask_grid(self.grid, allowed)
        figures.update_heatmap(self.heat, padded, mask=allowed)
        self.canvas.fix_layout()  # the label boxes the fades cover are final from here on
        for beyond in self.beyond:
            figures.update_fade_beyond_length(beyond, n, n)
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
