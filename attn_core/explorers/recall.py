"""Recall and state size: a mixer, the number of key-value pairs and the state size; the stored
runs' recall accuracy and the memory a decoder keeps, and the chosen mixer's result when keys
are written again with a new value (notebook 19). Reads stored runs only:
nothing is trained or computed on a change but a few lines."""

from __future__ import annotations

import functools
import re

import ipywidgets as W
import numpy as np

from .. import figures
from ..nn.recall_model import MIXERS, RecallConfig, load_recall_runs, recall_state_floats
from .arguments import check_option
from .base import Explorer, _Canvas, _row, _slider, _text_of

__all__ = ["RecallExplorer", "recall_explorer"]

PAIRS = (4, 8, 16, 32)
STATES = (8, 16)
#: The memory panel runs to the longest sequence of the sweep: 32 pairs, 32 queries.
MAX_TOKENS = 3 * PAIRS[-1]


def _read_only(a):
    a.flags.writeable = False
    return a


@functools.lru_cache(maxsize=len(STATES))
def accuracies(d_state, n_heads=1):
    """Mixer -> (len(PAIRS),) stored accuracies at ``d_state`` (cached: read-only arrays)."""
    _, runs = load_recall_runs()
    return {mx: _read_only(np.array([runs[(mx, m, d_state, n_heads)]["accuracy"]
                                     for m in PAIRS]))
            for mx in MIXERS}


@functools.lru_cache(maxsize=len(MIXERS))
def rewrites(mixer):
    """The stored rewrite test for ``mixer``, means over its seeds: ``(setting, accuracy on
    the rewritten keys, accuracy on all queries, the same with fresh keys instead)``;
    ``setting`` a dict of ``pairs``, ``n_updates``, ``d_state``, ``seeds`` (cached: do not
    change it)."""
    _, runs = load_recall_runs(group="updates")
    over = [r for (mx, kind, _), r in runs.items() if mx == mixer and kind == "overwrite"]
    fresh = [r for (mx, kind, _), r in runs.items() if mx == mixer and kind == "new_keys"]
    setting = {f: over[0][f] for f in ("pairs", "n_updates", "d_state")} | {"seeds": len(over)}
    return (setting, float(np.mean([r["accuracy_updated"] for r in over])),
            float(np.mean([r["accuracy"] for r in over])),
            float(np.mean([r["accuracy"] for r in fresh])))


@functools.lru_cache(maxsize=len(MIXERS) * len(STATES))
def memory(mixer, d_state):
    """Numbers kept after each of ``MAX_TOKENS`` tokens: ``(softmax, mixer)``, each
    ``(MAX_TOKENS,)`` float (one call of ``recall_state_floats`` each, on every length at
    once; cached: read-only arrays)."""
    t = np.arange(1, MAX_TOKENS + 1)
    soft = recall_state_floats(RecallConfig("softmax", d_state), t).astype(float)
    mine = np.broadcast_to(recall_state_floats(RecallConfig(mixer, d_state), t), t.shape)
    return _read_only(soft), _read_only(mine.astype(float))


class RecallExplorer(Explorer):
    """Mixer, pairs and state size: recall accuracy against pairs, memory against tokens."""

    title = "recall and state size"
    updates_use_blas = False  # a change reads stored runs and draws

    def __init__(self, mixer="linear", pairs=16, d_state=8):
        mixer = check_option(mixer, "mixer", MIXERS)
        pairs = check_option(pairs, "pairs", PAIRS)
        d_state = check_option(d_state, "d_state", STATES)
        super().__init__()
        c = self.controls
        c["mixer"] = W.Dropdown(description="mixer", options=MIXERS, value=mixer,
                                style={"description_width": "initial"})
        c["pairs"] = _slider(W.SelectionSlider, "key-value pairs", options=PAIRS, value=pairs)
        c["d_state"] = _slider(W.SelectionSlider, "d_k = d_v", options=STATES, value=d_state)
        self._watch("mixer", "pairs", "d_state")
        self.readout = W.HTML()
        self.canvas = _Canvas(figures.recall.FIGSIZE)
        top = 2 * max(STATES) * MAX_TOKENS
        self.art = figures.recall_figure(MIXERS, PAIRS, MAX_TOKENS, top, fig=self.canvas.figure)
        self.canvas.fix_layout()
        self._start(_row(c["mixer"], c["pairs"]), _row(c["d_state"]), self.image,
                    self.readout)

    def _update(self):
        c = self.controls
        mixer, pairs, d_state = c["mixer"].value, c["pairs"].value, c["d_state"].value
        key = (mixer, pairs, d_state)
        if key == self._last_key:
            return
        _, runs = load_recall_runs()
        run = runs[(mixer, pairs, d_state, 1)]
        soft, mine = memory(mixer, d_state)
        figures.update_recall_figure(self.art, accuracies(d_state), mixer, PAIRS.index(pairs),
                                     soft, mine)
        n = 3 * pairs
        kept = int(mine[n - 1])
        setting, rewritten, with_rewrites, fresh = rewrites(mixer)
        self.readout.value = (
            '<div data-name="recall" style="font-family:monospace;font-size:13px">'
            f"{mixer}, {pairs} pairs, d_k = d_v = {d_state}: recall accuracy "
            f'<span data-k="accuracy">{run["accuracy"]:.2f}</span>, weight of the read on '
            f'the right pair <span data-k="weight">{run["right_weight"]:.2f}</span><br>'
            f"after the {n} tokens of a sequence the layer keeps "
            f'<span data-k="kept">{kept:,}</span> numbers (softmax: '
            f'<span data-k="softmax_kept">{int(soft[n - 1]):,}</span>)<br>'
            f"keys written again ({setting['n_updates']} of {setting['pairs']}, d_k = d_v = "
            f"{setting['d_state']}, mean of {setting['seeds']} seeds): accuracy on the rewritten "
            f'keys <span data-k="rewritten">{rewritten:.2f}</span>, on all queries '
            f'<span data-k="with_rewrites">{with_rewrites:.2f}</span>; fresh keys in their place '
            f'<span data-k="fresh_keys">{fresh:.2f}</span></div>')
        # the lines change with the mixer and the state size only: a new number of pairs
        # moves the marker over the frame's last lines (one layer kept by the canvas)
        self._show(self.canvas, [*self.art.lines.values(), self.art.memory_softmax,
                                 self.art.memory_method],
                   over=[self.art.marker], layer_key=(mixer, d_state))
        self._last_key = key

    def shown(self):
        fields = dict(re.findall(r'data-k="(\w+)">([\d.,]+)<', self.readout.value))
        return {"lines": {mx: np.asarray(line.get_ydata(), dtype=float)
                          for mx, line in self.art.lines.items()},
                "memory": (np.asarray(self.art.memory_softmax.get_ydata(), dtype=float),
                           np.asarray(self.art.memory_method.get_ydata(), dtype=float)),
                **{k: float(v.replace(",", "")) for k, v in fields.items()},
                "readout": _text_of(self.readout.value)}


def recall_explorer(mixer="linear", pairs=16, d_state=8):
    """Recall accuracy of the stored one-layer models against the number of pairs, and the
    memory each keeps.

    Returns
    -------
    RecallExplorer
        Controls ``"mixer"`` (one of ``MIXERS``), ``"pairs"`` (4 to 32) and ``"d_state"``
        (8 or 16).
    """
    return RecallExplorer(mixer, pairs, d_state)
