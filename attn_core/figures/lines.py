"""A curve with the current point marked and read out (the explorers' sliders move it)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import (
    LABEL_FONTSIZE,
    LINE_COLOR,
    LINE_WIDTH,
    MARKER_COLOR,
    MARKER_SIZE,
    TICK_FONTSIZE,
    _as_1d,
    _new_axes,
    _title_and_readout,
)

__all__ = [
    "LineMarkerArtists",
    "line_with_marker",
    "update_marker",
]

@dataclass(repr=False)
class LineMarkerArtists:
    """What :func:`line_with_marker` drew.

    Attributes
    ----------
    ax : Axes
    line : Line2D
        The curve.
    marker : Line2D
        One point: the current value.
    guide : Line2D
        A dashed vertical line through the current x.
    text : Text
        ``"x = ...,  y = ..."`` above the axes on the right.
    """

    ax: object
    line: object
    marker: object
    guide: object
    text: object
    fmt: str
    names: tuple
    logx: bool

    def __repr__(self):
        return f"LineMarkerArtists(points={len(self.line.get_xdata())})"


# --- a curve with the current point marked ----------------------------------------------


def _interp(x, y, current_x, logx):
    order = np.argsort(x)
    xs, ys = x[order], y[order]
    if logx:
        return float(np.interp(np.log(current_x), np.log(xs), ys))
    return float(np.interp(current_x, xs, ys))


def _marker_label(names, fmt, cx, cy):
    xname, yname = names
    return f"{xname} = {fmt.format(cx)},  {yname} = {fmt.format(cy)}"


def line_with_marker(
    x, y, current_x, *, current_y=None, ax=None, logx=False, logy=False, label=None,
    xlabel=None, ylabel=None, title=None, fmt="{:.3g}",
):
    """Draw a curve y(x) and mark the current point on it (e.g. "std of scores vs d_k").

    Parameters
    ----------
    x, y : (n,) array_like
    current_x : float
        Where the marker and the dashed guide are.
    current_y : float, optional
        The marker's height; interpolated on the curve (in log x if ``logx``) when None.
    ax : Axes, optional
    logx, logy : bool, optional
        Logarithmic axes.
    label : str, optional
        Legend entry of the curve.
    xlabel, ylabel : str, optional
        Axis labels, also used to name the values in the corner text.
    title : str, optional
    fmt : str, optional
        Format of the values in the corner text.

    Returns
    -------
    LineMarkerArtists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> d_k = [1, 4, 16, 64]
    >>> art = line_with_marker(d_k, [1, 2, 4, 8], 16, logx=True, xlabel="d_k", ylabel="std")
    >>> art.text.get_text()
    'd_k = 16,  std = 4'
    >>> plt.close(art.ax.figure)
    """
    xs = _as_1d(x, "x")
    ys = _as_1d(y, "y")
    if xs.shape != ys.shape:
        raise ValueError(f"x and y must have the same length, got {xs.size} and {ys.size}")
    if logx and (xs <= 0).any():
        raise ValueError("x must be positive when logx=True")
    current_x = float(current_x)
    cy = _interp(xs, ys, current_x, logx) if current_y is None else float(current_y)
    if ax is None:
        ax = _new_axes((6.5, 4.0))
    (line,) = ax.plot(xs, ys, color=LINE_COLOR, linewidth=LINE_WIDTH, label=label)
    guide = ax.axvline(current_x, color=MARKER_COLOR, linestyle="--", linewidth=1, alpha=0.8)
    (marker,) = ax.plot([current_x], [cy], "o", color=MARKER_COLOR, markersize=MARKER_SIZE,
                        markeredgecolor="white", zorder=3)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel or "", fontsize=LABEL_FONTSIZE)
    ax.set_ylabel(ylabel or "", fontsize=LABEL_FONTSIZE)
    ax.tick_params(labelsize=TICK_FONTSIZE)
    ax.spines[["top", "right"]].set_visible(False)
    if label:
        ax.legend(loc="best", frameon=False, fontsize=LABEL_FONTSIZE)
    names = (xlabel or "x", ylabel or "y")
    text = _title_and_readout(ax, title, _marker_label(names, fmt, current_x, cy))
    return LineMarkerArtists(ax, line, marker, guide, text, fmt, names, logx)


def update_marker(artists, current_x, current_y=None):
    """Move the marker, the guide and the corner text to a new current point in place.

    Parameters
    ----------
    artists : LineMarkerArtists
    current_x : float
    current_y : float, optional
        Interpolated on the drawn curve when None.

    Returns
    -------
    LineMarkerArtists
        The same object, updated.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> art = line_with_marker([1, 2, 3], [1, 4, 9], 1)
    >>> art = update_marker(art, 3)
    >>> float(art.marker.get_ydata()[0])
    9.0
    >>> plt.close(art.ax.figure)
    """
    current_x = float(current_x)
    if current_y is None:
        current_y = _interp(np.asarray(artists.line.get_xdata(), dtype=float),
                            np.asarray(artists.line.get_ydata(), dtype=float),
                            current_x, artists.logx)
    current_y = float(current_y)
    artists.marker.set_data([current_x], [current_y])
    artists.guide.set_xdata([current_x, current_x])
    artists.text.set_text(_marker_label(artists.names, artists.fmt, current_x, current_y))
    return artists
