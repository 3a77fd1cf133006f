"""Notebook 19's gate on softmax attention: the weight each head puts on the first position,
without and with the output gate, one dot per seed, beside an even spread's share.

The numbers come from the stored runs (``attn_core/data/gate-trace.json``, read by
:func:`attn_core.nn.load_gate_runs`); this module only draws them.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .alt import set_alt_text
from .base import LABEL_FONTSIZE, OKABE_ITO, TICK_FONTSIZE, TITLE_FONTSIZE

__all__ = ["first_weight_bars"]

#: Colours of the two variants (without, with the gate).
VARIANT_COLORS = (OKABE_ITO["blue"], OKABE_ITO["vermillion"])
FIGSIZE_PER_HEAD = 0.95
HEIGHT = 3.2
BAR_WIDTH = 0.36


def first_weight_bars(weights, uniform, head_labels, *, variants=("no gate", "gate"),
                      ax=None, title=None):
    """Bars of the mean weight on the first position per head, one bar per variant, each
    seed a dot, and a dashed line at the share an even spread would give.

    Parameters
    ----------
    weights : (variants, seeds, heads) array_like
        The weight on position 0 (averaged over texts and queries) of each run and head.
    uniform : float
        An even spread's share (:func:`attn_core.nn.uniform_share`).
    head_labels : sequence of str
        One per head, e.g. ``"layer 2, head 1"``.
    variants : sequence of str
        The legend entry of each variant.
    ax : Axes, optional
    title : str, optional

    Returns
    -------
    list of BarContainer
        One per variant.
    """
    w = np.asarray(weights, dtype=float)
    if w.ndim != 3 or w.shape[0] != len(variants) or w.shape[2] != len(head_labels):
        raise ValueError(f"weights must be (variants, seeds, heads) = ({len(variants)}, seeds, "
                         f"{len(head_labels)}), got shape {w.shape}")
    if not np.isfinite(w).all() or not np.isfinite(uniform):
        raise ValueError("weights and uniform must be finite")
    if ax is None:
        width = max(4.0, FIGSIZE_PER_HEAD * w.shape[2] + 2.0)
        ax = plt.figure(figsize=(width, HEIGHT), layout="constrained").subplots()
    x = np.arange(w.shape[2])
    bars = []
    for i, (label, color) in enumerate(zip(variants, VARIANT_COLORS)):
        offset = (i - (len(variants) - 1) / 2) * BAR_WIDTH
        bars.append(ax.bar(x + offset, w[i].mean(axis=0), BAR_WIDTH, color=color, alpha=0.75,
                           label=f"{label} (mean of {w.shape[1]} seeds)"))
        for seed_row in w[i]:  # one dot per seed
            ax.plot(x + offset, seed_row, "o", color="black", markersize=3, linestyle="none")
    ax.axhline(uniform, color="black", linestyle="--", linewidth=1,
               label="even spread over the keys")
    ax.set_xticks(x, head_labels, fontsize=TICK_FONTSIZE)
    ax.set_ylim(0, max(1.0, float(w.max()) * 1.05))
    ax.set_ylabel("weight on position 0", fontsize=LABEL_FONTSIZE)
    ax.tick_params(labelsize=TICK_FONTSIZE)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(fontsize=TICK_FONTSIZE, frameon=False, loc="upper left")
    if title:
        ax.set_title(title, fontsize=TITLE_FONTSIZE, loc="left")
    set_alt_text(ax.figure, "Bar chart: for each head, the mean attention weight on the first "
                            "position without and with the output gate, one dot per seed, and "
                            "a dashed line at the weight an even spread over the keys gives.")
    return bars
