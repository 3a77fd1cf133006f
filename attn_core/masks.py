"""Masks say which keys each query may attend to: True = may attend, False = masked.

Every mask here is a boolean array, so masks combine with ``&`` (both must allow) and
``|`` (either allows), and go straight into ``attention(..., mask=...)``.
"""

import numpy as np

from ._validate import check_positive_int


def causal_mask(n):
    """Lower-triangular mask: position ``i`` may attend to positions ``0..i`` only.

    Parameters
    ----------
    n : int
        Sequence length, >= 1.

    Returns
    -------
    mask : (n, n) bool ndarray
        ``mask[i, j]`` is ``j <= i``.

    Notes
    -----
    .. math:: M_{ij} = [\\, j \\le i \\,]

    A language model predicting token ``i + 1`` must not see it, so every score above the
    diagonal is masked.

    Examples
    --------
    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    """
    n = check_positive_int(n, "n")
    return np.tri(n, n, dtype=bool)


def padding_mask(lengths, n):
    """Mask out padding keys: key ``j`` of sequence ``b`` is allowed iff ``j < lengths[b]``.

    Parameters
    ----------
    lengths : int or (...,) array_like of int
        The real (unpadded) length of each sequence in the batch, each in ``0..n``.
    n : int
        The padded sequence length, >= 1.

    Returns
    -------
    mask : (..., 1, n) bool ndarray
        One row per sequence, broadcast over every query: it masks keys, not queries.
        For per-head weights ``(b, h, n, n)``, insert the head axis: ``mask[:, None]``.

    Notes
    -----
    .. math:: M_{b, i, j} = [\\, j < \\ell_b \\,]

    Examples
    --------
    >>> padding_mask([3, 1], 4).astype(int)
    array([[[1, 1, 1, 0]],
    <BLANKLINE>
           [[1, 0, 0, 0]]])
    >>> (causal_mask(3) & padding_mask(2, 3)).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 0]])
    """
    n = check_positive_int(n, "n")
    arr = np.asarray(lengths)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"lengths must be integers, got dtype {arr.dtype} ({lengths!r})")
    if (arr < 0).any() or (arr > n).any():
        bad = arr[(arr < 0) | (arr > n)].ravel()[0]
        raise ValueError(f"lengths must be between 0 and n={n}, got a length of {bad}")
    keys = np.arange(n)
    return (keys < arr[..., None])[..., None, :]  # (..., n) -> (..., 1, n)


def window_mask(n, window):
    """Causal sliding-window mask: position ``i`` sees itself and the ``window - 1`` before it.

    Parameters
    ----------
    n : int
        Sequence length, >= 1.
    window : int
        How many positions each query sees (itself included), >= 1. ``window >= n`` gives
        the plain causal mask; ``window = 1`` lets each token see only itself.

    Returns
    -------
    mask : (n, n) bool ndarray
        ``mask[i, j]`` is ``i - window < j <= i``.

    Notes
    -----
    .. math:: M_{ij} = [\\, 0 \\le i - j < w \\,]

    Each row allows at most ``w`` keys, so attention costs ``O(n w)`` instead of ``O(n^2)``.

    Examples
    --------
    >>> window_mask(4, 2).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    """
    n = check_positive_int(n, "n")
    window = check_positive_int(window, "window")
    offset = np.arange(n)[:, None] - np.arange(n)[None, :]  # (n, 1) - (1, n) -> (n, n): i - j
    return (offset >= 0) & (offset < window)
