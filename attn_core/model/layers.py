"""The encoder's building blocks: layer norm, GELU, mean pooling, L2 normalisation.

Pure maths on rows ``(..., d)`` (no weights files, no printing), used by
:mod:`attn_core.model.encoder`'s forward pass and by :mod:`attn_core.model.pretrained`'s
sentence embeddings.
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np
from scipy.special import erf

from .._validate import as_float_array

__all__ = ["check_eps", "gelu", "l2_normalize", "layer_norm", "mean_pool"]


def layer_norm(x, gamma, beta, eps=1e-12):
    """Normalise each row to mean 0 and variance 1, then scale and shift it.

    Parameters
    ----------
    x : (..., d) array_like
        Rows to normalise.
    gamma, beta : (d,) array_like
        Learned scale and shift.
    eps : float
        Added to the variance before the square root (BERT uses 1e-12); finite and > 0.

    Returns
    -------
    y : (..., d) ndarray, same float dtype as ``x``

    Notes
    -----
    .. math:: y = \\gamma \\odot \\frac{x - \\mu}{\\sqrt{\\sigma^2 + \\epsilon}} + \\beta

    with the mean and (biased) variance taken over the last axis. A row whose squared
    deviations overflow (values near the end of the float range) is divided by its largest
    ``|x|`` first: ``y`` is the same for ``x / s`` with ``eps / s²``.

    Examples
    --------
    >>> y = layer_norm(np.array([[1.0, 2.0, 3.0]]), np.ones(3), np.zeros(3))
    >>> np.round(y, 4)
    array([[-1.2247,  0.    ,  1.2247]])
    """
    x = as_float_array(x, "x", min_ndim=1, layout="(..., d)")
    d = x.shape[-1]
    gamma = _vector(gamma, "gamma", d)
    beta = _vector(beta, "beta", d)
    eps = check_eps(eps)
    with np.errstate(over="ignore", invalid="ignore"):
        mu = x.mean(axis=-1, keepdims=True)  # (..., 1)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)  # (..., 1)
    if np.isfinite(mu).all() and np.isfinite(var).all():
        z = (x - mu) / np.sqrt(var + eps)
    else:
        z = _standardise_scaled(x, eps)
    return (z * gamma + beta).astype(x.dtype, copy=False)


def _standardise_scaled(x, eps):
    """(x - mu) / sqrt(var + eps) for rows so large that their squares overflow."""
    s = np.max(np.abs(x), axis=-1, keepdims=True)  # (..., 1)
    s = np.where(s > 0, s, 1)
    u = x / s  # (..., d), every |entry| <= 1
    mu = u.mean(axis=-1, keepdims=True)  # (..., 1)
    var = ((u - mu) ** 2).mean(axis=-1, keepdims=True)  # (..., 1)
    with np.errstate(under="ignore"):
        denom = np.sqrt(var + eps / s / s)  # eps / s² is 0 when s is huge
    safe = np.where(denom > 0, denom, 1)
    return np.where(denom > 0, (u - mu) / safe, 0)  # a constant row: 0, as for small rows


def check_eps(eps):
    """``eps`` as a float: a real number, finite and > 0 (else a clear error)."""
    if isinstance(eps, bool) or not isinstance(eps, Real):
        raise TypeError(f"eps must be a number, got {type(eps).__name__}")
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}")
    return float(eps)


def gelu(x):
    """The Gaussian error linear unit, exact form (with the error function).

    Parameters
    ----------
    x : (...) array_like

    Returns
    -------
    y : (...) ndarray, same float dtype as ``x``

    Notes
    -----
    .. math:: \\mathrm{GELU}(x) = x \\, \\Phi(x) = \\frac{x}{2}\\left(1 +
              \\mathrm{erf}\\!\\left(\\frac{x}{\\sqrt 2}\\right)\\right)

    numpy has no ``erf``; :func:`scipy.special.erf` supplies it, vectorised (Python's
    :func:`math.erf` element by element was the slowest part of the forward pass).

    Examples
    --------
    >>> np.round(gelu(np.array([-1.0, 0.0, 1.0])), 4)
    array([-0.1587,  0.    ,  0.8413])
    """
    x = as_float_array(x, "x")
    return x * (0.5 * (1.0 + erf(x / x.dtype.type(math.sqrt(2.0)))))


def _vector(v, name, d):
    v = as_float_array(v, name, min_ndim=1, layout=f"({d},)")
    if v.shape != (d,):
        raise ValueError(f"{name} must have shape ({d},), got shape {v.shape}")
    return v


def _attention_mask(attention_mask, shape):
    arr = np.asarray(attention_mask)
    if arr.dtype == object:
        raise TypeError("attention_mask must hold 0/1 or booleans, got objects "
                        f"({attention_mask!r})")
    if arr.shape != shape:
        raise ValueError(f"attention_mask must have the shape of ids {shape}, got {arr.shape}")
    if arr.dtype != bool:
        if arr.dtype.kind not in "iuf" or not np.isin(arr, (0, 1)).all():
            raise ValueError("attention_mask must hold only 0 and 1 (or False and True), "
                             f"got values {np.unique(arr)[:5]}")
        arr = arr.astype(bool)
    if not arr.any(axis=-1).all():
        raise ValueError("attention_mask must keep at least one token in every sentence, "
                         "got a row of zeros")
    return arr


def mean_pool(hidden, attention_mask=None):
    """Average the rows of real tokens (padding excluded): one vector per sentence.

    Parameters
    ----------
    hidden : (..., n, d) array_like
    attention_mask : (..., n) array_like of 0/1 or bool, optional

    Returns
    -------
    pooled : (..., d) ndarray

    Notes
    -----
    .. math:: e = \\frac{\\sum_i m_i h_i}{\\sum_i m_i}

    Examples
    --------
    >>> mean_pool(np.array([[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]), [1, 1, 0])
    array([2., 3.])
    """
    hidden = as_float_array(hidden, "hidden", min_ndim=2)
    if attention_mask is None:
        return hidden.mean(axis=-2)
    keep = _attention_mask(attention_mask, hidden.shape[:-1]).astype(hidden.dtype)
    total = (hidden * keep[..., None]).sum(axis=-2)  # (..., d)
    return total / keep.sum(axis=-1, keepdims=True)


def l2_normalize(x):
    """Scale each vector to length 1.

    Parameters
    ----------
    x : (..., d) array_like, no all-zero vector

    Returns
    -------
    (..., d) ndarray, same float dtype as ``x``

    Notes
    -----
    .. math:: y = x / \\lVert x \\rVert_2

    A vector whose squares would overflow or underflow (float32 entries of 1e20 or 1e-30)
    is divided by its largest ``|x_j|`` first, which changes its length, not its direction.

    Examples
    --------
    >>> l2_normalize(np.array([3.0, 4.0]))
    array([0.6, 0.8])
    """
    x = as_float_array(x, "x", min_ndim=1, layout="(..., d)")
    s = np.max(np.abs(x), axis=-1, keepdims=True)  # (..., 1)
    if (s == 0).any():
        raise ValueError("x must not contain an all-zero vector (it has no direction)")
    with np.errstate(over="ignore", under="ignore"):
        norm = np.linalg.norm(x, axis=-1, keepdims=True)  # (..., 1)
    info = np.finfo(x.dtype)
    plain = np.isfinite(norm) & (s >= math.sqrt(info.tiny / info.eps))  # squares are exact
    if plain.all():
        return x / norm
    u = x / s  # (..., d), largest |entry| 1
    with np.errstate(under="ignore"):
        u_norm = np.linalg.norm(u, axis=-1, keepdims=True)  # (..., 1), >= 1
    return np.where(plain, x / np.where(plain, norm, 1), u / u_norm).astype(x.dtype, copy=False)
