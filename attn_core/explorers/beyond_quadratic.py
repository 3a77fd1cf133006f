"""Beyond the quadratic: a method (full, window, sparse patterns, linear, latent cache), the
sequence length and the pattern's size; the cells computed, the cost against n and the memory
a decoder keeps (notebook 18)."""

from __future__ import annotations

import functools
import re
import threading

import ipywidgets as W
import numpy as np

from .. import figures
from ..cost import kv_cache_bytes
from ..cost_beyond import (
    linear_attention_flops,
    linear_state_bytes,
    masked_attention_flops,
    mla_cache_bytes,
)
from ..masks import causal_mask, window_mask
from ..sparse import bigbird_mask, fixed_mask, hops_from, keys_kept, local_global_mask, strided_mask
from .arguments import check_option
from .base import Explorer, _Canvas, _in_kernel, _row, _slider, _text_of

__all__ = ["BeyondExplorer", "beyond_explorer"]

METHODS = ("full", "sliding window", "strided", "fixed", "local + global", "BigBird",
           "linear", "latent cache (MLA)")
NS = tuple(2**k for k in range(4, 11))  # 16 .. 1024
SIZES = (4, 8, 16, 32, 64)
#: The methods that have no window, stride or block: the size slider is disabled for them.
SIZELESS = ("full", "linear", "latent cache (MLA)")
#: The model whose cost and memory are drawn: Llama 2 7B's attention shape (32 layers, 32
#: heads of 128, a 16-bit cache); the latent cache uses DeepSeek-V2's widths (d_c 512,
#: RoPE key 64).
LAYERS, HEADS, D_HEAD, DTYPE = 32, 32, 128, "float16"
D_MODEL = HEADS * D_HEAD
D_C, D_ROPE = 512, 64
MAX_TOKENS = 2048
#: Queries past the last token decoded, so that keys_kept sees who still reads each key.
HORIZON = 2 * max(SIZES)


def pattern_mask(method, n, size):
    """The (n, n) bool cells ``method`` computes (causal); linear and MLA: the causal triangle
    (all of it, though linear attention never builds it)."""
    if method == "sliding window":
        return window_mask(n, size)
    if method == "strided":
        return strided_mask(n, size)
    if method == "fixed":
        return fixed_mask(n, size)
    if method == "local + global":
        return local_global_mask(n, size, n_global=1, causal=True)
    if method == "BigBird":
        return bigbird_mask(n, size, n_random=1, n_global=1) & causal_mask(n)
    return causal_mask(n)


@functools.lru_cache(maxsize=64)
def cost_curve(method, size):
    """FLOPs of one layer's attention at each length of ``NS``: ``(full, method)``."""
    full = np.array([masked_attention_flops(n * (n + 1) // 2, D_MODEL, HEADS)["total"]
                     for n in NS], dtype=float)
    if method == "linear":
        return full, np.array([linear_attention_flops(n, D_MODEL, HEADS)["total"] for n in NS],
                              dtype=float)
    cells = [int(pattern_mask(method, n, size).sum()) for n in NS]
    return full, np.array([masked_attention_flops(c, D_MODEL, HEADS)["total"] for c in cells],
                          dtype=float)


@functools.lru_cache(maxsize=64)
def memory_curve(method, size):
    """Bytes a decoder keeps after each of ``MAX_TOKENS`` tokens: ``(full KV, method)``."""
    t = np.arange(1, MAX_TOKENS + 1)
    per_token = kv_cache_bytes(1, LAYERS, HEADS, D_HEAD, DTYPE)
    full = t * float(per_token)
    if method == "full":
        return full, full
    if method == "linear":
        return full, np.full(MAX_TOKENS, float(linear_state_bytes(LAYERS, HEADS, D_HEAD, DTYPE)))
    if method == "latent cache (MLA)":
        return full, t * float(mla_cache_bytes(1, LAYERS, D_C, D_ROPE, DTYPE))
    if method == "BigBird":  # a later block may draw any earlier block at random: keep all
        return full, full
    kept = keys_kept(pattern_mask(method, MAX_TOKENS + HORIZON, size))[:MAX_TOKENS]
    return full, kept * float(per_token)


@functools.lru_cache(maxsize=256)
def pattern_summary(method, n, size, cap=64):
    """``(picture, cells, hops)`` of one state: the pattern as the figure shows it (block
    shares past ``figures.beyond_quadratic.DISPLAY``), its cells, and the layers for token 1
    to reach token ``n - 1`` (0: more than ``cap``)."""
    mask = pattern_mask(method, n, size)
    full = method in ("full", "linear", "latent cache (MLA)")
    hops = 1 if full else int(hops_from(mask, 1, max_layers=cap)[-1])
    return figures.beyond_quadratic.block_density(mask), int(mask.sum()), hops


def warm_curves(first):
    """Compute (and keep: they are cached) the cost and memory curves of every method and
    size, ``first``'s method first. A first visit of a state computes its memory curve over
    2,176 positions (tens of ms, most of a slider's answer there); the explorer runs this in a
    thread in a kernel, so that the learner's first visits find them ready."""
    for method in sorted(METHODS, key=lambda m: m != first):
        for size in SIZES:
            cost_curve(method, size)
            memory_curve(method, size)


class _LengthCanvas(_Canvas):
    """A canvas whose background for each length ``n`` is the figure's one full background
    with that length's position labels drawn on it: a new ``n`` costs six texts (a few ms),
    not a full draw, and a frame at a known ``n`` draws no text at all."""

    def render_at(self, labels, dynamic, n):
        """PNG bytes: the background of length ``n`` (its ``labels``, texts, drawn once),
        then the ``dynamic`` artists."""
        if n not in self._backgrounds:
            canvas = self.figure.canvas
            self.ensure_background([*labels, *dynamic], None)  # once: no label, no data
            canvas.restore_region(self._backgrounds[None])
            renderer = canvas.get_renderer()
            for text in labels:
                text.draw(renderer)
            self._backgrounds[n] = canvas.copy_from_bbox(self.figure.bbox)
        return self.render(dynamic, n)


class BeyondExplorer(Explorer):
    """Method, n and size: the cells computed, the cost against n, the memory kept."""

    title = "beyond the quadratic"

    def __init__(self, method="strided", n=256, size=16):
        method = check_option(method, "method", METHODS)
        n = check_option(n, "n", NS)
        size = check_option(size, "size", SIZES)
        super().__init__()
        c = self.controls
        c["method"] = W.Dropdown(description="method", options=METHODS, value=method,
                                 style={"description_width": "initial"})
        c["n"] = _slider(W.SelectionSlider, "sequence length n", options=NS, value=n)
        c["size"] = _slider(W.SelectionSlider, "window / stride / block", options=SIZES,
                            value=size)
        self._watch("method", "n", "size")
        self.readout = W.HTML()
        self.canvas = _LengthCanvas(figures.beyond_quadratic.FIGSIZE)
        full_top, _ = cost_curve("full", SIZES[0])
        low = masked_attention_flops(NS[0], D_MODEL, HEADS)["total"] / 2  # a cell per row
        self.art = figures.beyond_figure(NS, MAX_TOKENS, kv_cache_bytes(
            MAX_TOKENS, LAYERS, HEADS, D_HEAD, DTYPE) / 2**20, (low, full_top[-1] * 4),
            fig=self.canvas.figure)
        self.canvas.fix_layout()  # now, while the tick labels are the widest placeholders
        self._start(_row(c["method"], c["n"]), _row(c["size"]), self.image, self.readout)
        if _in_kernel():  # the curves of the other states, while the learner reads
            threading.Thread(target=warm_curves, args=(method,), daemon=True,
                             name="beyond-curves").start()

    def _update(self):
        c = self.controls
        method, n, size = c["method"].value, c["n"].value, c["size"].value
        key = (method, n, size)
        if key == self._last_key:
            return
        c["size"].disabled = method in SIZELESS  # nothing for it to change: said below
        picture, cells, hops = pattern_summary(method, n, size)
        full_flops, flops = cost_curve(method, size)
        full_mem, mem = memory_curve(method, size)
        i = NS.index(n)
        figures.update_beyond_figure(self.art, picture, full_flops, flops, i, full_mem, mem,
                                     n=n)
        note = " (the weights are never built)" if method == "linear" else ""
        unused = ("<br>window / stride / block: off, this method has none (it reads every "
                  "earlier token)" if method in SIZELESS else "")
        self.readout.value = (
            '<div data-name="beyond" style="font-family:monospace;font-size:13px">'
            f"{method}, n = {n}: <span data-k=\"cells\">{cells:,}</span> of "
            f'<span data-k="full_cells">{n * (n + 1) // 2:,}</span> causal cells{note}; '
            f"FLOPs {flops[i] / full_flops[i]:.3f} of full attention's<br>"
            f"layers for token 1 to reach token {n - 1}: "
            f'<span data-k="hops">{hops}</span>{" (more than 64)" if hops == 0 else ""}'
            f"<br>after {MAX_TOKENS:,} tokens the decoder keeps "
            f'<span data-k="kept">{int(mem[-1]):,}</span> bytes, a full KV cache '
            f'<span data-k="full_kept">{int(full_mem[-1]):,}</span> ({LAYERS} layers, '
            f"{HEADS} heads of {D_HEAD}, {DTYPE}){unused}</div>")
        art = self.art
        self._set_png(self.canvas, self.canvas.render_at(
            art.positions, [a for a in art.dynamic if a not in art.positions], n))
        self._last_key = key

    def shown(self):
        fields = dict(re.findall(r'data-k="(\w+)">([\d,]+)<', self.readout.value))
        return {"pattern": np.asarray(self.art.pattern.get_array(), dtype=float),
                "cost": (np.asarray(self.art.cost_full.get_ydata(), dtype=float),
                         np.asarray(self.art.cost_method.get_ydata(), dtype=float)),
                "memory": (np.asarray(self.art.memory_full.get_ydata(), dtype=float),
                           np.asarray(self.art.memory_method.get_ydata(), dtype=float)),
                **{k: int(v.replace(",", "")) for k, v in fields.items()},
                "readout": _text_of(self.readout.value)}


def beyond_explorer(method="strided", n=256, size=16):
    """Full, windowed, sparse, linear and latent attention side by side.

    Returns
    -------
    BeyondExplorer
        Controls ``"method"`` (one of ``METHODS``), ``"n"`` (16 to 1,024: ``NS``) and
        ``"size"`` (the window, stride, radius or block: 4 to 64; disabled for the methods of
        ``SIZELESS``, which have none).
    """
    return BeyondExplorer(method, n, size)
