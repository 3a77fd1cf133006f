"""The language model's loss: cross-entropy of the next token, averaged over positions."""

import numpy as np

from .._validate import as_float_array

__all__ = ["cross_entropy", "log_softmax", "next_token_losses"]


def log_softmax(logits):
    """``log softmax(logits)`` along the last axis, computed stably.

    Parameters
    ----------
    logits : (..., v) ndarray

    Returns
    -------
    log_p : (..., v) ndarray

    Notes
    -----
    .. math:: \\log p_j = (z_j - m) - \\log \\sum_k e^{z_k - m}, \\quad m = \\max_k z_k

    Subtracting the row maximum keeps every exponent <= 0, so nothing overflows.

    Examples
    --------
    >>> np.exp(log_softmax(np.array([1000.0, 1000.0])))
    array([0.5, 0.5])
    """
    if not isinstance(logits, np.ndarray) or logits.dtype.kind != "f" or logits.ndim < 1 \
            or logits.shape[-1] == 0:
        raise TypeError(f"logits must be a float ndarray (..., v) with v >= 1, got "
                        f"{type(logits).__name__} {getattr(logits, 'shape', '')}")
    shifted = logits - logits.max(axis=-1, keepdims=True)  # (..., v)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))  # (..., v)


def next_token_losses(logits, ids):
    """The loss of each next-token prediction: ``-log softmax(logits[..., i])[ids[..., i + 1]]``.

    Parameters
    ----------
    logits : (..., n - 1, v) array_like
        The model's scores after reading ``ids[..., : i + 1]``, for ``i = 0 .. n - 2``.
    ids : (..., n) int array_like
        The text; ``ids[..., 1:]`` are the targets.

    Returns
    -------
    losses : (..., n - 1) float64 ndarray
        In nats, one per prediction (accumulated in float64).

    Examples
    --------
    >>> next_token_losses(np.zeros((2, 4)), [0, 3, 1]).round(4).tolist()  # log 4 each
    [1.3863, 1.3863]
    """
    logits = as_float_array(logits, "logits", min_ndim=2, layout="(..., n - 1, v)")
    ids = np.asarray(ids)
    if ids.shape[:-1] != logits.shape[:-2] or ids.shape[-1] != logits.shape[-2] + 1:
        want = (*logits.shape[:-2], logits.shape[-2] + 1)
        raise ValueError(f"ids must be one token longer than logits' positions: logits "
                         f"{logits.shape} needs ids of shape {want}, got {ids.shape}")
    log_p = log_softmax(logits.astype(np.float64))  # (..., n - 1, v)
    return -np.take_along_axis(log_p, ids[..., 1:, None], axis=-1)[..., 0]  # (..., n - 1)


def cross_entropy(logits, targets):
    """Mean cross-entropy of ``targets`` under ``softmax(logits)``, and its gradient.

    Parameters
    ----------
    logits : (..., n, v) array_like
        Unnormalised scores of the ``v`` classes at each position.
    targets : (..., n) int array_like
        The right class at each position, in ``0..v - 1``.

    Returns
    -------
    loss : float
        ``-mean log p[target]`` over every position (accumulated in float64), in nats.
    grad_logits : (..., n, v) ndarray, logits' dtype
        Derivative of ``loss`` with respect to ``logits``.

    Notes
    -----
    .. math:: L = -\\frac{1}{N}\\sum_i \\log \\mathrm{softmax}(z_i)_{y_i}, \\quad
              \\frac{\\partial L}{\\partial z_i} = \\frac{\\mathrm{softmax}(z_i) - e_{y_i}}{N}

    Uniform logits give :math:`L = \\log v`: a model that knows nothing.

    Examples
    --------
    >>> loss, grad = cross_entropy(np.zeros((2, 4)), [0, 3])
    >>> bool(np.isclose(loss, np.log(4))), grad[0].tolist()
    (True, [-0.375, 0.125, 0.125, 0.125])
    """
    logits = as_float_array(logits, "logits", min_ndim=1, layout="(..., n, v)")
    targets = np.asarray(targets)
    if targets.dtype.kind not in "iu":
        raise TypeError(f"targets must be integer class ids, got dtype {targets.dtype}")
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets must have the shape of logits without its last axis "
                         f"{logits.shape[:-1]}, got shape {targets.shape}")
    v = logits.shape[-1]
    bad = (targets < 0) | (targets >= v)
    if bad.any():
        raise ValueError(f"targets must be class ids in 0..{v - 1}, got "
                         f"{int(targets[bad].ravel()[0])} ({int(bad.sum())} out of range)")
    return _cross_entropy(logits, targets)


def _cross_entropy(logits, targets):
    t = targets[..., None]  # (..., n, 1)
    log_p = log_softmax(logits)  # (..., n, v)
    picked = np.take_along_axis(log_p, t, axis=-1)  # (..., n, 1)
    count = targets.size
    loss = -float(picked.sum(dtype=np.float64)) / count
    grad = np.exp(log_p)  # (..., n, v): the softmax
    np.put_along_axis(grad, t, np.take_along_axis(grad, t, axis=-1) - 1, axis=-1)  # p - onehot
    grad *= grad.dtype.type(1.0 / count)
    return loss, grad
