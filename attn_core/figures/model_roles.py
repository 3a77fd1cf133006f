"""Head-role scores of every head of the real model, as a layers x heads heatmap."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .heatmaps import heatmap
from .model_base import AXIS_LABEL_FONTSIZE, BASELINE_COLOR, BASELINE_LABEL, WEIGHT_RANGE, _as_array

__all__ = [
    "RoleScoresArtists",
    "role_scores",
]

#: Outlines of high-scoring heads are drawn this far (a share of a cell) inside their cell,
#: so that a low cell among outlined ones is not framed by its neighbours' outlines.
ROLE_OUTLINE_INSET = 0.12

@dataclass(repr=False)
class RoleScoresArtists:
    """What :func:`role_scores` drew.

    Attributes
    ----------
    heatmap : HeatmapArtists
        The grid, its numbers (``heatmap.texts``) and colour bar.
    baseline_line : Line2D or None
        The baseline marked across the colour bar.
    found : list of (int, int)
        The outlined heads (score >= threshold), 1-based ``(layer, head)``, best first.
    """

    heatmap: object
    baseline_line: object
    found: list

    @property
    def ax(self):
        return self.heatmap.ax

    def __repr__(self):
        shape = self.heatmap.image.get_array().shape
        return f"RoleScoresArtists(shape={shape}, found={self.found})"


# --- head-role scores ---------------------------------------------------------------------


def role_scores(scores, title, *, ax=None, baseline=None, threshold=None):
    """A layers x heads grid of one head-role score, each value written in its cell.

    Parameters
    ----------
    scores : (layers, heads) array_like
        One score per head in [0, 1], e.g. ``previous_token_score(run.attentions)``.
    title : str
    ax : Axes, optional
        A figure sized to the grid when None.
    baseline : float, optional
        The score of a head that spreads evenly (``1 / n``): marked on the colour bar and
        named in the title.
    threshold : float, optional
        Heads scoring at least this are outlined and listed in ``.found``.

    Returns
    -------
    RoleScoresArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> art = role_scores([[0.1, 0.9], [0.6, 0.2]], "made up", baseline=0.25, threshold=0.5)
    >>> art.found, art.heatmap.texts[0, 1].get_text()
    ([(1, 2), (2, 1)], '0.90')
    >>> plt.close(art.ax.figure)
    """
    s = _as_array(scores, "scores", 2, "(layers, heads)")
    if not isinstance(title, str):
        raise TypeError(f"title must be a str, got {type(title).__name__}")
    layers, heads = s.shape
    found = []
    if threshold is not None:
        cells = sorted(zip(*np.nonzero(s >= threshold)), key=lambda lh: -s[lh])
        found = [(int(l) + 1, int(h) + 1) for l, h in cells]
    notes = []
    if baseline is not None:
        notes.append(f"uniform baseline 1/n = {baseline:.2f}")
    if threshold is not None:
        notes.append(f"outlined: score ≥ {threshold:.2f}")
    full_title = title + ("\n(" + "; ".join(notes) + ")" if notes else "")
    art = heatmap(
        s, [str(l + 1) for l in range(layers)], [str(h + 1) for h in range(heads)], ax=ax,
        vmin=WEIGHT_RANGE[0], vmax=WEIGHT_RANGE[1], annotate=True, fmt="{:.2f}",
        highlight=[(l - 1, h - 1) for l, h in found], title=full_title, xlabel="head",
        ylabel="layer")
    for rect in art.highlights:  # inside its own cell: a neighbour never looks outlined
        x, y = rect.get_xy()
        rect.set_bounds(x + ROLE_OUTLINE_INSET, y + ROLE_OUTLINE_INSET,
                        1 - 2 * ROLE_OUTLINE_INSET, 1 - 2 * ROLE_OUTLINE_INSET)
    line = None
    if baseline is not None:
        cax = art.colorbar.ax
        line = cax.axhline(baseline, color=BASELINE_COLOR, linewidth=2.5)
        cax.text(-0.15, baseline, BASELINE_LABEL, transform=cax.get_yaxis_transform(),
                 ha="right", va="center", fontsize=AXIS_LABEL_FONTSIZE, clip_on=False)
    return RoleScoresArtists(art, line, found)
