"""Layer normalisation, forward and backward: the one layer norm of the package.

The tiny GPT (:mod:`attn_core.nn.gpt`, eps 1e-5) and the pretrained BERT-style encoder
(:mod:`attn_core.model.encoder`, eps 1e-12) both normalise with :func:`layer_norm`.
"""

import math
from numbers import Real

import numpy as np

from .._validate import as_float_array, check_result, checked_later

__all__ = ["check_eps", "layer_norm", "layer_norm_backward"]


def check_eps(eps):
    """``eps`` as a float: a real number, finite and > 0 (else a clear error)."""
    if isinstance(eps, bool) or not isinstance(eps, Real):
        raise TypeError(f"eps must be a number, got {type(eps).__name__}")
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}")
    return float(eps)


def _vector(v, name, d):
    v = as_float_array(v, name, min_ndim=1, layout=f"({d},)")
    if v.shape != (d,):
        raise ValueError(f"{name} must have shape ({d},), got shape {v.shape}")
    return v


def layer_norm(x, gamma, beta, eps):
    """Normalise each row to mean 0 and variance 1, then scale and shift it.

    Parameters
    ----------
    x : (..., d) array_like
        Rows to normalise.
    gamma, beta : (d,) array_like
        Learned scale (gain) and shift.
    eps : float
        Added to the variance before the square root; finite and > 0 (GPT-2 uses 1e-5,
        BERT 1e-12).

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
    >>> y = layer_norm(np.array([[1.0, 2.0, 3.0]]), np.ones(3), np.zeros(3), eps=1e-5)
    >>> np.round(y, 4)
    array([[-1.2247,  0.    ,  1.2247]])
    """
    x = as_float_array(x, "x", min_ndim=1, layout="(..., d)")
    d = x.shape[-1]
    gamma = _vector(gamma, "gamma", d)
    beta = _vector(beta, "beta", d)
    eps = check_eps(eps)
    with np.errstate(over="ignore", invalid="ignore"):
        y, _, denom = _layer_norm_parts(x, gamma, beta, eps)
    if not np.isfinite(denom).all():  # the squared deviations overflowed
        y = _standardise_scaled(x, eps) * gamma + beta
    return y.astype(x.dtype, copy=False)


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


def _layer_norm_parts(x, gamma, beta, eps):
    """The forward without checks: ``(y, z, denom)`` with ``z`` the normalised rows and
    ``denom = sqrt(var + eps)`` (..., 1), which the backward reuses."""
    mu = x.mean(axis=-1, keepdims=True)  # (..., 1)
    xc = x - mu  # (..., d)
    denom = np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)  # (..., 1)
    z = xc / denom  # (..., d)
    return z * gamma + beta, z, denom


def _layer_norm_backward_parts(z, denom, gamma, grad_y):
    """Unchecked backward from the forward's ``z`` and ``denom``: ``(grad_x, grad_gamma,
    grad_beta)``."""
    d = z.shape[-1]
    g = grad_y * gamma  # (..., d): dL/dz
    g_mean = g.mean(axis=-1, keepdims=True)  # (..., 1)
    gz_mean = (g * z).mean(axis=-1, keepdims=True)  # (..., 1)
    grad_x = (g - g_mean - z * gz_mean) / denom  # (..., d)
    grad_gamma = (grad_y * z).reshape(-1, d).sum(axis=0)  # (..., d) -> (N, d) -> (d,)
    grad_beta = grad_y.reshape(-1, d).sum(axis=0)  # (..., d) -> (N, d) -> (d,)
    return grad_x, grad_gamma, grad_beta


def layer_norm_backward(x, gamma, eps, grad_y):
    """Gradients of :func:`layer_norm` with respect to ``x``, ``gamma`` and ``beta``.

    Parameters
    ----------
    x : (..., d) array_like
        The forward pass's input.
    gamma : (d,) array_like
        The forward pass's scale (the gradient does not depend on ``beta``).
    eps : float
        The forward pass's eps.
    grad_y : (..., d) array_like
        Derivative of the loss with respect to the output ``y``, with ``x``'s shape.

    Returns
    -------
    grad_x : (..., d) ndarray
    grad_gamma, grad_beta : (d,) ndarray
        Summed over every leading (batch and position) dimension.

    Notes
    -----
    With :math:`z = (x - \\mu)/\\sqrt{\\sigma^2 + \\epsilon}` and :math:`g = \\gamma \\odot dy`:

    .. math:: dx = \\frac{1}{\\sqrt{\\sigma^2 + \\epsilon}}\\left(g - \\bar g -
              z\\, \\overline{g \\odot z}\\right), \\quad
              d\\gamma = \\sum dy \\odot z, \\quad d\\beta = \\sum dy

    where the bars are means over the row. ``dx`` sums to 0 along each row: moving all of
    a row by the same amount does not change ``y``.

    Examples
    --------
    >>> x = np.array([[1.0, 2.0, 4.0]])
    >>> grad_x, grad_gamma, grad_beta = layer_norm_backward(x, np.ones(3), 1e-5, np.ones((1, 3)))
    >>> np.round(grad_x, 12) + 0.0, grad_beta
    (array([[0., 0., 0.]]), array([1., 1., 1.]))
    """
    x = as_float_array(x, "x", min_ndim=1, layout="(..., d)")
    gamma = _vector(gamma, "gamma", x.shape[-1])
    eps = check_eps(eps)
    grad_y = as_float_array(grad_y, "grad_y", min_ndim=1, layout="(..., d)")
    if grad_y.shape != x.shape:
        raise ValueError(f"grad_y must have the shape of x {x.shape}, got shape {grad_y.shape}")
    dtype = np.result_type(x, gamma, grad_y)
    x, gamma, grad_y = (a.astype(dtype, copy=False) for a in (x, gamma, grad_y))
    with checked_later():
        _, z, denom = _layer_norm_parts(x, gamma, np.zeros_like(gamma), eps)
        grads = _layer_norm_backward_parts(z, denom, gamma, grad_y)
    for g, what in zip(grads, ("grad_x", "grad_gamma", "grad_beta")):
        check_result(g, f"the layer norm's {what}")
    return grads
