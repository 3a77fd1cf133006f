"""The KV cache of today's models: which key/value head each query head reads, the attention
pattern of a sliding window with sinks, and the cache's bytes against tokens decoded."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap

from .base import (
    ALLOWED_COLOR,
    LABEL_FONTSIZE,
    LINE_WIDTH,
    MASKED_FACE_COLOR,
    OKABE_ITO,
    THEMED_IMAGE,
    TICK_FONTSIZE,
    TITLE_FONTSIZE,
)
from .fast_draw import fast_redraws

__all__ = [
    "KVCacheArtists",
    "SINK_COLOR",
    "kv_cache_figure",
    "update_kv_cache_figure",
]

SINK_COLOR = OKABE_ITO["orange"]
FIGSIZE = (8.6, 3.1)
#: masked (0), in the window (1), a kept sink (2); NaN cells (beyond the length) are blank
_BLANK = (1.0, 1.0, 1.0, 0.0)
_PATTERN_CMAP = ListedColormap([MASKED_FACE_COLOR, ALLOWED_COLOR, SINK_COLOR]).with_extremes(
    bad=_BLANK)
_SHARING_CMAP = ListedColormap([MASKED_FACE_COLOR, ALLOWED_COLOR]).with_extremes(bad=_BLANK)
#: (label, colour, style, width factor, z-order): when curves coincide (equal head counts, a
#: window as long as the context) each stays visible: a wide blue line under a thinner
#: vermillion one under a dashed black one.
CURVES = (("multi-head, full cache", OKABE_ITO["black"], "--", 1.0, 4),
          ("this model, full cache", OKABE_ITO["blue"], "-", 3.0, 2),
          ("this model, rolling cache", OKABE_ITO["vermillion"], "-", 1.4, 3))


@dataclass(repr=False)
class KVCacheArtists:
    """What :func:`kv_cache_figure` drew: three axes, two images and three lines."""

    axes: tuple
    sharing: object
    pattern: object
    lines: tuple


def kv_cache_figure(max_heads, max_ctx, max_bytes, fig=None):
    """Draw the three panels empty, at their largest size; fill them with the update.

    Parameters
    ----------
    max_heads, max_ctx : int
        The largest query-head count and context length the panels will show.
    max_bytes : float
        The top of the memory axis (MiB are shown).
    fig : Figure, optional

    Returns
    -------
    KVCacheArtists
    """
    if fig is None:
        fig = plt.figure(figsize=FIGSIZE, layout="constrained")
    ax_share, ax_pat, ax_mem = fig.subplots(1, 3, width_ratios=[0.8, 1.0, 1.2])
    sharing = ax_share.imshow(np.full((max_heads, max_heads), np.nan), cmap=_SHARING_CMAP,
                              vmin=0, vmax=1, interpolation="nearest", aspect="auto")
    ax_share.set_title("which key/value head\neach query head reads", fontsize=TITLE_FONTSIZE)
    ax_share.set_xlabel("key/value head", fontsize=LABEL_FONTSIZE)
    ax_share.set_ylabel("query head", fontsize=LABEL_FONTSIZE)
    pattern = ax_pat.imshow(np.full((max_ctx, max_ctx), np.nan), cmap=_PATTERN_CMAP, vmin=0,
                            vmax=2, interpolation="nearest", aspect="equal")
    for image in fast_redraws(sharing, pattern):  # cells without numbers: they follow the theme
        image.set_gid(THEMED_IMAGE)
    ax_pat.set_title("what each token attends to\n(blue window, orange sinks)",
                     fontsize=TITLE_FONTSIZE)
    ax_pat.set_xlabel("key position", fontsize=LABEL_FONTSIZE)
    ax_pat.set_ylabel("query position", fontsize=LABEL_FONTSIZE)
    steps = np.arange(1, max_ctx + 1)
    lines = tuple(ax_mem.plot(steps, np.full(max_ctx, np.nan), color=color, linestyle=style,
                              linewidth=LINE_WIDTH * width, label=label, zorder=z)[0]
                  for label, color, style, width, z in CURVES)
    ax_mem.set_xlim(0, max_ctx + 1)
    ax_mem.set_ylim(0, max_bytes / 2**20 * 1.05)
    ax_mem.set_title("KV cache, all layers", fontsize=TITLE_FONTSIZE)
    ax_mem.set_xlabel("tokens decoded", fontsize=LABEL_FONTSIZE)
    ax_mem.set_ylabel("MiB", fontsize=LABEL_FONTSIZE)
    ax_mem.legend(loc="upper left", fontsize=TICK_FONTSIZE, frameon=False)
    for ax in (ax_share, ax_pat, ax_mem):
        ax.tick_params(labelsize=TICK_FONTSIZE)
    return KVCacheArtists((ax_share, ax_pat, ax_mem), sharing, pattern, lines)


def update_kv_cache_figure(art, sharing, pattern, curves):
    """Show new data in place.

    Parameters
    ----------
    art : KVCacheArtists
    sharing : (h, n_kv) bool array_like
        ``sharing[i, j]``: query head ``i`` reads key/value head ``j``.
    pattern : (n, n) int array_like
        0 masked, 1 in the window, 2 a kept sink (see :func:`kv_cache_figure`).
    curves : three (n,) array_like
        Bytes after each of the ``n`` tokens: multi-head full, this model full, rolling.
    """
    share = np.full(art.sharing.get_array().shape, np.nan)
    s = np.asarray(sharing, dtype=float)
    share[:s.shape[0], :s.shape[1]] = s
    art.sharing.set_data(share)
    pat = np.full(art.pattern.get_array().shape, np.nan)
    p = np.asarray(pattern, dtype=float)
    pat[:p.shape[0], :p.shape[1]] = p
    art.pattern.set_data(pat)
    size = len(art.lines[0].get_xdata())
    for line, y in zip(art.lines, curves):
        full = np.full(size, np.nan)
        y = np.asarray(y, dtype=float) / 2**20
        full[:len(y)] = y
        line.set_ydata(full)
    return art
