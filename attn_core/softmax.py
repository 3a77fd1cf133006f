"""Softmax: turning a row of scores into weights that are positive and sum to 1."""

import numpy as np

from ._validate import as_float_array, check_overflow, checked_later


def softmax(x, axis=-1):
    """Numerically stable softmax along ``axis``.

    Parameters
    ----------
    x : (..., n) array_like
        Scores. Entries may be ``-inf`` (a masked position, which gets weight exactly 0);
        NaN and ``+inf`` are refused with a ValueError.
    axis : int, optional
        The axis that sums to 1 (default: the last).

    Returns
    -------
    p : (..., n) ndarray, same dtype as ``x`` (float64 for integer input, float32 for
        float16: the dtype rule of ``attn_core._validate``)
        Weights in [0, 1] that sum to 1 along ``axis``. A slice that is entirely ``-inf``
        (a query that may attend to nothing) gives all zeros, never NaN: there is nothing
        to distribute, so no weight is handed out.

    Notes
    -----
    .. math:: \\mathrm{softmax}(x)_i = \\frac{e^{x_i - m}}{\\sum_j e^{x_j - m}},
              \\quad m = \\max_j x_j

    Subtracting the maximum changes nothing mathematically (it cancels between numerator
    and denominator) but keeps every exponent <= 0, so ``exp`` cannot overflow: inputs of
    1e4 give finite weights. ``x - m`` may still overflow to ``-inf`` for an entry far
    below the maximum (``-1e308 - 1e308``); its weight is then exactly 0, which is its
    true weight to the dtype's precision, and no warning is raised.

    Examples
    --------
    >>> softmax([1.0, 2.0, 3.0]).round(3)
    array([0.09 , 0.245, 0.665])
    >>> softmax([1e4, 1e4])
    array([0.5, 0.5])
    >>> softmax([-np.inf, -np.inf])
    array([0., 0.])
    """
    x = as_float_array(x, "x", min_ndim=1, allow_neg_inf=True)
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"axis must be an integer, got {axis!r}")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis must be in [{-x.ndim}, {x.ndim - 1}] for x of rank {x.ndim}, "
                         f"got {axis}")
    if x.shape[axis] == 0:
        raise ValueError(f"x must have at least one entry along axis {axis}, got shape {x.shape}")
    return stable_softmax(x, axis)


def stable_softmax(x, axis=-1, allowed=None):
    """Softmax of an already checked float ndarray (the unchecked core of :func:`softmax`).

    Used inside the package on scores that were built from validated input, so that the
    hot path does not check the same values twice. Same contract as :func:`softmax`, and:

    ``allowed`` (bool array broadcastable to ``x``, or True) says which entries a mask
    allowed (True: all). A slice that is all ``-inf`` although it has an allowed entry
    overflowed, and raises a ValueError. None (default): ``-inf`` is taken as masked.

    Examples
    --------
    >>> stable_softmax(np.array([0.0, np.log(3.0)]))
    array([0.25, 0.75])
    """
    shift = _shift(x, axis, allowed)
    with checked_later():  # far below the max: -inf, weight 0 (see softmax)
        e = np.subtract(x, shift)  # (..., n): the one new array; x is left as it is
    return _exp_normalise_(e, axis)


def softmax_inplace(x, axis=-1, allowed=None):
    """:func:`stable_softmax` that overwrites the checked float ndarray ``x`` and returns it.

    No array of ``x``'s size is allocated: the shift, ``exp`` and the normalisation all
    write into ``x``; only the ``(..., 1)`` row maxima and sums are new.
    """
    shift = _shift(x, axis, allowed)
    with checked_later():  # far below the max: -inf, weight 0 (see softmax)
        np.subtract(x, shift, out=x)
    return _exp_normalise_(x, axis)


def _shift(x, axis, allowed=None):
    """The row maxima (..., 1), checked for overflow; 0 for an all -inf slice."""
    row_max = x.max(axis=axis, keepdims=True)  # (..., n) -> (..., 1) along axis
    empty = np.isneginf(row_max)
    if allowed is not None and empty.any():
        # an all -inf slice with an allowed entry: its scores overflowed, not masked
        rows = allowed if allowed is True else np.any(allowed, axis=axis, keepdims=True)
        check_overflow(row_max, x.dtype, allowed_rows=rows)
    else:
        check_overflow(row_max, x.dtype)
    row_max[empty] = 0  # an all -inf slice: shift by 0, exp gives zeros
    return row_max


def _exp_normalise_(e, axis):
    """In place: ``e = exp(e) / sum(exp(e))`` along ``axis``; an all -inf slice stays 0."""
    with checked_later():  # tiny weights flush to 0, as they should
        np.exp(e, out=e)
        total = e.sum(axis=axis, keepdims=True)  # (..., 1); 0 for an all -inf slice
        # one division per row, then one multiplication per entry (not a division per entry)
        np.multiply(e, np.divide(1, total, out=np.zeros_like(total), where=total > 0), out=e)
    return e


def softmax_jacobian(p):
    """Jacobian of softmax, given its output ``p``.

    Parameters
    ----------
    p : (..., n) array_like
        Softmax weights (each slice along the last axis sums to 1).

    Returns
    -------
    jac : (..., n, n) ndarray, the dtype of ``p`` (the dtype rule of ``attn_core._validate``)
        ``jac[..., i, j]`` is the derivative of ``p_i`` with respect to the score ``x_j``.

    Notes
    -----
    .. math:: \\frac{\\partial p_i}{\\partial x_j} = p_i (\\delta_{ij} - p_j),
              \\quad J = \\mathrm{diag}(p) - p p^\\top

    When softmax saturates (one ``p_i`` near 1, the rest near 0) every entry of ``J`` is
    near 0: the gradient that reaches the scores vanishes and learning stalls.

    Examples
    --------
    >>> softmax_jacobian([0.5, 0.5])
    array([[ 0.25, -0.25],
           [-0.25,  0.25]])
    >>> float(abs(softmax_jacobian([1.0, 0.0])).max())
    0.0
    """
    p = as_float_array(p, "p", min_ndim=1)
    outer = p[..., :, None] * p[..., None, :]  # (..., n, 1) * (..., 1, n) -> (..., n, n)
    diag = np.zeros_like(outer)
    idx = np.arange(p.shape[-1])
    diag[..., idx, idx] = p
    return diag - outer
