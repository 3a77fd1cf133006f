"""Checks of the explorer factories' arguments: refuse, never clamp or guess.

An ipywidget given a value outside its range clamps it silently (a slider), or fails with
a traitlets message that names no argument ("Invalid selection: value not found"). Every
factory therefore checks its arguments first, with these helpers: the error names the
argument, the values or the range allowed, and what was given.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from .._validate import as_float_array, check_bool, check_option, check_seed

__all__ = ["check_bool", "check_int", "check_matrix", "check_number", "check_option",
           "check_seed"]


def _is_int(value):
    return isinstance(value, Integral) and not isinstance(value, (bool, np.bool_))


def check_int(value, name, low, high):
    """``value`` as an int from ``low`` to ``high`` (inclusive)."""
    if not _is_int(value):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be from {low} to {high}, got {value}")
    return int(value)


def check_number(value, name, low, high, why=""):
    """``value`` as a float from ``low`` to ``high`` (inclusive; NaN is refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    value = float(value)
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{name} must be from {low:.3g} to {high:.3g}{why}, got {value:g}")
    return value


def check_matrix(x, name, layout, value_range, what, max_rows=None, max_cols=None):
    """``x`` as a finite float64 matrix whose entries lie in ``value_range`` (inclusive).

    ``layout`` names its shape (``"(n, d_k)"``), ``what`` the explorer (``"the lab"``).
    """
    x = as_float_array(x, name, layout=layout)
    if x.ndim != 2 or 0 in x.shape:
        raise ValueError(f"{name} must be a matrix {layout}, got shape {x.shape}")
    for size, limit, noun in ((x.shape[0], max_rows, "rows"), (x.shape[1], max_cols,
                                                               "columns")):
        if limit is not None and size > limit:
            raise ValueError(f"{name} has {size} {noun}; {what} shows at most {limit}")
    return np.array(check_in_range(x, name, value_range, what), dtype=np.float64)


def check_in_range(x, name, value_range, what):
    """``x`` unchanged if every entry lies in ``value_range``; else the first one outside."""
    low, high = value_range
    outside = np.argwhere((x < low) | (x > high))
    if outside.size:
        where = tuple(int(i) for i in outside[0])
        index = ", ".join(map(str, where))
        raise ValueError(f"{name}[{index}] = {x[where]:g} is outside {what}'s range "
                         f"{low:g} to {high:g} (its number boxes hold no more)")
    return x
