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


def window_mask(n, window, n_sink=0):
    """Causal sliding-window mask: position ``i`` sees itself and the ``window - 1`` before it.

    Parameters
    ----------
    n : int
        Sequence length, >= 1.
    window : int
        How many positions each query sees (itself included), >= 1. ``window >= n`` gives
        the plain causal mask; ``window = 1`` lets each token see only itself.
    n_sink : int, optional
        Also let every position see the first ``n_sink`` positions (causally): the attention
        sinks a streaming model keeps (Xiao et al. 2023). Default 0.

    Returns
    -------
    mask : (n, n) bool ndarray
        ``mask[i, j]`` is ``i - window < j <= i``, or ``j < n_sink`` and ``j <= i``.

    Notes
    -----
    .. math:: M_{ij} = [\\, 0 \\le i - j < w \\,] \\vee [\\, j < s, \\ j \\le i \\,]

    Each row allows at most ``w + s`` keys, so attention costs ``O(n (w + s))`` instead of
    ``O(n^2)``; this is the mask a rolling KV cache (:mod:`attn_core.decoding`) decodes under.

    Examples
    --------
    >>> window_mask(4, 2).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    >>> window_mask(4, 2, n_sink=1).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [1, 1, 1, 0],
           [1, 0, 1, 1]])
    """
    n = check_positive_int(n, "n")
    window = check_positive_int(window, "window")
    n_sink = check_positive_int(n_sink, "n_sink", minimum=0)
    offset = np.arange(n)[:, None] - np.arange(n)[None, :]  # (n, 1) - (1, n) -> (n, n): i - j
    sink = np.arange(n)[None, :] < n_sink  # (1, n): the first n_sink keys
    return (offset >= 0) & ((offset < window) | sink)


def receptive_field(mask, layers):
    """Which inputs each position can depend on after ``layers`` layers that share ``mask``.

    Parameters
    ----------
    mask : (n, n) bool array_like
        One layer's mask (True where query ``i`` may attend to key ``j``), e.g.
        :func:`window_mask`. Every position must allow itself (the residual path keeps a
        position's own input in every layer).
    layers : int
        Number of stacked layers, >= 1.

    Returns
    -------
    reach : (n, n) bool ndarray
        ``reach[i, j]``: position ``i``'s output after ``layers`` layers depends on input
        ``j`` through some path of attention steps.

    Notes
    -----
    A path ``j -> i`` through ``L`` layers is a chain of allowed steps, so ``reach`` is the
    ``L``-th Boolean power of the mask:

    .. math:: R^{(1)} = M, \\qquad R^{(L)}_{ij} = \\bigvee_k R^{(L-1)}_{ik} \\wedge M_{kj}

    With a sliding window of ``w`` each layer reaches ``w - 1`` positions further back, so
    ``L`` layers reach ``L (w - 1)`` back (Beltagy et al. 2020; Jiang et al. 2023).

    Examples
    --------
    >>> reach = receptive_field(window_mask(6, 2), layers=3)
    >>> reach[5].astype(int)  # the last position sees 3 * (2 - 1) = 3 positions back
    array([0, 0, 1, 1, 1, 1])
    """
    m = np.asarray(mask)
    if m.dtype != bool or m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"mask must be a square (n, n) bool array, got dtype {m.dtype} and "
                         f"shape {m.shape}")
    if not m.diagonal().all():
        raise ValueError("mask must let every position attend to itself (its diagonal all "
                         f"True), got False at position {int(np.argmin(m.diagonal()))}")
    layers = check_positive_int(layers, "layers")
    reach, step = m.copy(), m.astype(np.int64)
    for _ in range(layers - 1):
        reach = (reach.astype(np.int64) @ step) > 0  # (n, n) @ (n, n): a path one step longer
    return reach
