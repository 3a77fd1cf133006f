"""The encoder's building blocks: layer norm, GELU, mean pooling, L2 normalisation.

The layer norm and GELU are :mod:`attn_core.nn`'s (one implementation of each in the
package): ``layer_norm`` here is :func:`attn_core.nn.layer_norm` with BERT's default eps,
``gelu`` is the exact (erf) GELU BERT uses, :func:`attn_core.nn.gelu_erf`.

Pure maths on rows ``(..., d)`` (no weights files, no printing), used by
:mod:`attn_core.model.encoder`'s forward pass and by :mod:`attn_core.model.pretrained`'s
sentence embeddings.
"""

from __future__ import annotations

import math

import numpy as np

from .._validate import as_float_array
from ..nn.gelu import gelu_erf as gelu
from ..nn.layer_norm import check_eps
from ..nn.layer_norm import layer_norm as _layer_norm

__all__ = ["BERT_EPS", "check_eps", "gelu", "l2_normalize", "layer_norm", "mean_pool"]


#: BERT's layer-norm eps (all-MiniLM-L6-v2's config says the same).
BERT_EPS = 1e-12


def layer_norm(x, gamma, beta, eps=BERT_EPS):
    """:func:`attn_core.nn.layer_norm` (the package's one layer norm) with BERT's eps, 1e-12,
    as the default.

    Examples
    --------
    >>> y = layer_norm(np.array([[1.0, 2.0, 3.0]]), np.ones(3), np.zeros(3))
    >>> np.round(y, 4)
    array([[-1.2247,  0.    ,  1.2247]])
    """
    return _layer_norm(x, gamma, beta, eps)


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
