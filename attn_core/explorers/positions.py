"""Positions: how the score of a query and a key changes with their offset, four schemes.

The query sits at position ``m``, the key at ``n = m - k`` (``k`` the offset slider). Each
panel shows, for every offset ``0 .. m``, what the scheme makes of the pair:

* sinusoidal and learned positions (added to the input): the cosine similarity of the two
  position vectors (:func:`attn_core.positions.sinusoidal_positions`; the tiny GPT's learned
  ``wpe`` table from its stored checkpoint);
* RoPE: the cosine similarity of one content vector rotated to ``m`` and to ``n``
  (:func:`attn_core.positions.rope`): the same token at two places;
* ALiBi: the bias added to the score, ``-slope * k``, for each of 8 heads
  (:func:`attn_core.positions.alibi_slopes`).

Moving ``m`` changes only the learned curve: the others depend on the offset alone. The
left panel shows one feature pair of the rotated query and key: the angle between them is
``k theta_c``.
"""

from __future__ import annotations

import ipywidgets as W
import numpy as np

from .. import examples, figures
from ..nn.checkpoint import load_checkpoint
from ..positions import alibi_slopes, cosine_by_offset, frequencies, rope, sinusoidal_positions
from .arguments import check_int, check_number
from .base import Explorer, _Canvas, _slider, _table, read_tables

__all__ = ["PositionsExplorer", "positions_explorer", "scheme_curves", "scheme_ylims"]

#: ALiBi's head count in the picture (Press et al. 2022's 8-head slopes: 1/2 ... 1/256).
ALIBI_HEADS = 8
#: Seed of the content vector that RoPE rotates (the same token at both positions).
CONTENT_SEED = 8
BASE_EXPONENTS = (1.0, 5.0)  # the base slider: 10 to 100000


def scheme_curves(wpe, content, m, k, pair, base, slopes):
    """What :func:`~attn_core.figures.position_schemes` draws, for a query at ``m``.

    Parameters
    ----------
    wpe : (n_ctx, d) ndarray
        A learned position table.
    content : (d,) ndarray
        The vector RoPE rotates to ``m`` and to ``m - offset``.
    m, k, pair : int
        Query position, current offset, feature pair.
    base : float
    slopes : (h,) ndarray
        ALiBi's slopes.

    Returns
    -------
    curves : dict
        ``"sinusoidal"``, ``"learned"``, ``"rope"``: ``(n_ctx,)``; ``"alibi"``: ``(h, n_ctx)``;
        entry ``j`` is offset ``j``, NaN beyond ``m``.
    pair_q, pair_k : (2,) ndarrays
        Pair ``pair`` of the content rotated to ``m`` and to ``m - k``.
    """
    n_ctx, d = wpe.shape
    offsets = np.arange(n_ctx)
    nan = np.full(n_ctx - m - 1, np.nan)  # offsets beyond m: no key there
    rotated = rope(np.broadcast_to(content, (n_ctx, d)), offsets, base)  # (n_ctx, d)
    curves = {
        "sinusoidal": np.concatenate([cosine_by_offset(sinusoidal_positions(n_ctx, d, base), m),
                                      nan]),
        "learned": np.concatenate([cosine_by_offset(wpe, m), nan]),
        "rope": np.concatenate([cosine_by_offset(rotated, m), nan]),
        "alibi": np.where(offsets <= m, -slopes[:, None] * offsets, np.nan),  # (h, n_ctx)
    }
    return curves, rotated[m, 2 * pair:2 * pair + 2], rotated[m - k, 2 * pair:2 * pair + 2]


def scheme_ylims(slopes, n_ctx):
    """Fixed y ranges of the four panels: cosines in [-1, 1]; ALiBi down to its steepest
    head's bias at the longest offset (fixed, so that no slider move redraws the axes)."""
    steepest = float(np.max(slopes))
    return {"sinusoidal": (-1.05, 1.05), "learned": (-1.05, 1.05), "rope": (-1.05, 1.05),
            "alibi": (-1.05 * steepest * (n_ctx - 1), 0.05 * steepest * n_ctx)}


class PositionsExplorer(Explorer):
    """Offset, query position, feature pair and base: the score under each scheme."""

    title = "positions"

    def __init__(self, checkpoint=None, offset=8, query=63, pair=0, base=10000.0):
        self.checkpoint = load_checkpoint() if checkpoint is None else checkpoint
        self.wpe = np.asarray(self.checkpoint.params["wpe"], dtype=np.float64)  # (n_ctx, d)
        n_ctx, d = self.wpe.shape
        query = check_int(query, "query", 0, n_ctx - 1)
        offset = check_int(offset, "offset", 0, query)
        pair = check_int(pair, "pair", 0, d // 2 - 1)
        lo, hi = BASE_EXPONENTS
        base = check_number(base, "base", 10 ** lo, 10 ** hi, " (the slider's range)")
        super().__init__()
        self.n_ctx, self.d = n_ctx, d
        self.content = examples.rng(CONTENT_SEED).standard_normal(d)  # (d,)
        self.slopes = alibi_slopes(ALIBI_HEADS)
        c = self.controls
        c["offset"] = _slider(W.IntSlider, "offset k = m - n", value=offset, min=0, max=query)
        c["query"] = _slider(W.IntSlider, "query position m", value=query, min=0,
                             max=n_ctx - 1)
        c["pair"] = _slider(W.IntSlider, "feature pair c", value=pair, min=0, max=d // 2 - 1)
        c["base"] = _slider(W.FloatLogSlider, "base", value=base, base=10, min=lo, max=hi,
                            step=0.25, readout_format=".3g")
        self._watch(*c)
        self.readout = W.HTML()
        self.offsets = np.arange(n_ctx)
        self.canvas = _Canvas(figures.POSITION_SCHEMES_SIZE)
        curves, pq, pk = self._curves()
        self.art = figures.position_schemes(self.offsets, curves, offset, pq, pk,
                                            ylims=scheme_ylims(self.slopes, n_ctx),
                                            fig=self.canvas.figure)
        self._start(c["offset"], c["query"], c["pair"], c["base"], self.image, self.readout)

    def _curves(self):
        """The curves of the four panels and the pair's two arrows, for the controls' values."""
        c = self.controls
        return scheme_curves(self.wpe, self.content, c["query"].value, c["offset"].value,
                             c["pair"].value, c["base"].value, self.slopes)

    def _update(self):
        c = self.controls
        if c["offset"].max != c["query"].value:  # a key at most m positions back
            self._busy = True
            try:
                c["offset"].max = c["query"].value
            finally:
                self._busy = False
        key = tuple(c[name].value for name in ("offset", "query", "pair", "base"))
        if key == self._last_key:
            return
        k, _, pair, base = key
        curves, pq, pk = self._curves()
        figures.update_position_schemes(self.art, self.offsets, curves, k, pq, pk)
        theta = frequencies(self.d, base)[pair]
        angle = np.degrees(k * theta) % 360.0
        row = [[curves[s][k] for s in ("sinusoidal", "learned", "rope")]
               + [curves["alibi"][0, k], curves["alibi"][-1, k]]]
        self.readout.value = (
            _table("scores", row, row_labels=[f"k = {k}"],
                   col_labels=["sinusoidal", "learned", "RoPE", "ALiBi head 1",
                               f"ALiBi head {ALIBI_HEADS}"], title="at the marked offset")
            + _table("pair", [[theta, angle]], row_labels=[f"pair {pair}"],
                     col_labels=["theta_c (rad/position)", "angle k theta_c (degrees)"],
                     fmt="{:.4g}"))
        self._show(self.canvas, self.art.dynamic)
        self._last_key = key

    def shown(self):
        tables = read_tables(self.readout.value)
        marked = {s: float(self.art.markers[s].get_ydata()[0]) for s in self.art.markers}
        arrows = [np.array([a.get_xdata()[1], a.get_ydata()[1]]) for a in self.art.arrows]
        return {"scores": tables["scores"][0], "pair": tables["pair"][0], "marked": marked,
                "arrows": arrows,
                "curves": {s: [np.asarray(line.get_ydata(), float) for line in lines]
                           for s, lines in self.art.lines.items()}}


def positions_explorer(checkpoint=None, offset=8, query=63, pair=0, base=10000.0):
    """Move the offset between a query and a key; see the score under four position schemes.

    Parameters
    ----------
    checkpoint : attn_core.nn.checkpoint.Checkpoint, optional
        Whose learned position table ``wpe`` to show (default: the stored tiny GPT).
    offset : int, optional
        ``k = m - n``, from 0 to ``query``.
    query : int, optional
        The query's position ``m``, from 0 to ``n_ctx - 1`` (63 for the tiny GPT).
    pair : int, optional
        The feature pair ``c`` drawn on the left, from 0 to ``d / 2 - 1``.
    base : float, optional
        RoPE's and the sinusoids' base, from 10 to 100000.

    Returns
    -------
    PositionsExplorer
        Controls ``"offset"``, ``"query"``, ``"pair"`` and ``"base"``.
    """
    return PositionsExplorer(checkpoint, offset, query, pair, base)
