"""Today's KV cache: query heads, key/value heads, window, sinks and context length; the head
sharing, the attention pattern and the cache's memory (notebook 16)."""

from __future__ import annotations

import re

import ipywidgets as W
import numpy as np

from .. import figures
from .._validate import divisors
from ..cost import kv_cache_bytes
from ..masks import window_mask
from .arguments import check_int, check_option
from .base import Explorer, _Canvas, _row, _slider, _text_of

__all__ = [
    "KVCacheExplorer",
    "kv_cache_explorer",
]

QUERY_HEADS = (1, 2, 4, 6, 8, 12, 16)
MAX_CTX = 24
MAX_SINKS = 4
#: The layer stack whose memory is drawn: Mistral 7B's (Jiang et al. 2023, Table 1):
#: 32 layers, head dimension 128, 16-bit cache.
LAYERS, D_HEAD, DTYPE = 32, 128, "float16"


def sharing_matrix(n_heads, n_kv_heads):
    """(n_heads, n_kv_heads) bool: query head ``i`` reads key/value head ``i // groups``."""
    groups = n_heads // n_kv_heads
    return (np.arange(n_heads)[:, None] // groups) == np.arange(n_kv_heads)[None, :]


def pattern_codes(n, window, n_sink):
    """(n, n) int: 0 masked, 1 in the sliding window, 2 seen only as a sink."""
    in_window = window_mask(n, window)
    return np.where(in_window, 1, np.where(window_mask(n, window, n_sink), 2, 0))


def memory_curves(n, n_heads, n_kv_heads, window, n_sink):
    """Bytes after each of ``n`` tokens: multi-head full, this model full, this model rolling."""
    t = np.arange(1, n + 1)
    kept = np.minimum(t, window + n_sink)  # a rolling cache stops at window + sinks
    return tuple(np.array([kv_cache_bytes(int(x), LAYERS, heads, D_HEAD, DTYPE) for x in xs],
                          dtype=float)
                 for heads, xs in ((n_heads, t), (n_kv_heads, t), (n_kv_heads, kept)))


def _count(n, noun):
    """'1 sink', '0 sinks', '4 sinks'."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def attention_kind(n_heads, n_kv_heads):
    """The name of attention with these head counts: one head of each is single-head
    attention, not multi-head; all query heads sharing one key/value head is multi-query."""
    if n_heads == 1:
        return "single-head"
    if n_kv_heads == n_heads:
        return "multi-head"
    if n_kv_heads == 1:
        return "multi-query"
    per = _count(n_heads // n_kv_heads, "query head")
    return f"grouped-query ({per} per key/value head)"


class KVCacheExplorer(Explorer):
    """Query heads, key/value heads, window, sinks, context length: sharing, pattern, bytes."""

    title = "KV cache"

    def __init__(self, n_heads=8, n_kv_heads=2, window=6, n_sink=0, n_ctx=16):
        n_heads = check_option(n_heads, "n_heads", QUERY_HEADS)
        n_kv_heads = check_option(n_kv_heads, "n_kv_heads", tuple(divisors(n_heads)))
        n_ctx = check_int(n_ctx, "n_ctx", 2, MAX_CTX)
        window = check_int(window, "window", 1, MAX_CTX)
        n_sink = check_int(n_sink, "n_sink", 0, MAX_SINKS)
        super().__init__()
        c = self.controls
        c["n_heads"] = _slider(W.SelectionSlider, "query heads", options=QUERY_HEADS,
                               value=n_heads)
        c["n_kv_heads"] = _slider(W.SelectionSlider, "key/value heads",
                                  options=tuple(divisors(n_heads)), value=n_kv_heads)
        c["window"] = _slider(W.IntSlider, "window", min=1, max=MAX_CTX, value=window)
        c["n_sink"] = _slider(W.IntSlider, "sinks kept", min=0, max=MAX_SINKS, value=n_sink)
        c["n_ctx"] = _slider(W.IntSlider, "context length", min=2, max=MAX_CTX, value=n_ctx)
        self._watch("n_kv_heads", "window", "n_sink", "n_ctx")
        c["n_heads"].observe(self._on_heads, names="value")
        self.readout = W.HTML()
        self.canvas = _Canvas(figures.kv_cache.FIGSIZE)
        top = kv_cache_bytes(MAX_CTX, LAYERS, max(QUERY_HEADS), D_HEAD, DTYPE)
        self.art = figures.kv_cache_figure(max(QUERY_HEADS), MAX_CTX, top,
                                           fig=self.canvas.figure)
        self._start(_row(c["n_heads"], c["n_kv_heads"]), _row(c["window"], c["n_sink"]),
                    _row(c["n_ctx"]), self.image, self.readout)

    def _on_heads(self, change):
        def regroup():
            kv = self.controls["n_kv_heads"]
            options = tuple(divisors(change["new"]))
            keep = max(d for d in options if d <= kv.value)  # the nearest count that divides
            self._busy = True
            try:
                kv.options = options
                kv.value = keep
            finally:
                self._busy = False
            self._update()
        self._guard(regroup)

    def _update(self):
        c = self.controls
        h, kv = c["n_heads"].value, c["n_kv_heads"].value
        n, window, n_sink = c["n_ctx"].value, c["window"].value, c["n_sink"].value
        key = (h, kv, n, window, n_sink)
        if key == self._last_key:
            return
        curves = memory_curves(n, h, kv, window, n_sink)
        figures.update_kv_cache_figure(self.art, sharing_matrix(h, kv),
                                       pattern_codes(n, window, n_sink), curves)
        long = 32768
        full_long = kv_cache_bytes(long, LAYERS, kv, D_HEAD, DTYPE)
        rolling_long = kv_cache_bytes(min(long, window + n_sink), LAYERS, kv, D_HEAD, DTYPE)
        mha_long = kv_cache_bytes(long, LAYERS, h, D_HEAD, DTYPE)
        self.readout.value = (
            '<div data-name="kv" style="font-family:monospace;font-size:13px">'
            f"{attention_kind(h, kv)}: {_count(h, 'query head')}, "
            f"{_count(kv, 'key/value head')}; {LAYERS} layers, d_head "
            f"{D_HEAD}, {DTYPE}<br>after <span data-k=\"n\">{n}</span> tokens: full cache "
            f'<span data-k="full">{int(curves[1][-1]):,}</span> bytes, rolling '
            f'<span data-k="rolling">{int(curves[2][-1]):,}</span> bytes (window {window}'
            f" + {_count(n_sink, 'sink')}), multi-head "
            f'<span data-k="mha">{int(curves[0][-1]):,}</span> bytes<br>'
            f"at {long:,} tokens: multi-head {mha_long / 2**30:.2f} GiB, this model "
            f"{full_long / 2**30:.2f} GiB, rolling {rolling_long / 2**20:.1f} MiB</div>")
        lines = sorted(self.art.lines, key=lambda line: line.get_zorder())  # drawn in order
        self._show(self.canvas, [self.art.sharing, self.art.pattern, *lines])
        self._last_key = key

    def shown(self):
        fields = dict(re.findall(r'data-k="(\w+)">([\d,]+)<', self.readout.value))
        share = np.asarray(self.art.sharing.get_array().filled(np.nan), dtype=float)
        pattern = np.asarray(self.art.pattern.get_array().filled(np.nan), dtype=float)
        h, kv = self.controls["n_heads"].value, self.controls["n_kv_heads"].value
        n = self.controls["n_ctx"].value
        return {"sharing": share[:h, :kv] > 0.5, "pattern": pattern[:n, :n].astype(int),
                "blank_beyond": bool(np.isnan(pattern[n:, :]).all()
                                     and np.isnan(pattern[:, n:]).all()),
                "curves": tuple(np.asarray(line.get_ydata(), dtype=float)[:n]
                                for line in self.art.lines),
                **{k: int(v.replace(",", "")) for k, v in fields.items()},
                "readout": _text_of(self.readout.value)}


def kv_cache_explorer(n_heads=8, n_kv_heads=2, window=6, n_sink=0, n_ctx=16):
    """Grouped-query heads and a rolling cache: what each head reads, each token sees, and
    what the cache holds.

    Returns
    -------
    KVCacheExplorer
        Controls ``"n_heads"`` (query heads), ``"n_kv_heads"`` (its divisors), ``"window"``,
        ``"n_sink"`` and ``"n_ctx"`` (context length, up to 24).
    """
    return KVCacheExplorer(n_heads, n_kv_heads, window, n_sink, n_ctx)
