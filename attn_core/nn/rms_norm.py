"""RMS normalisation, forward and backward: layer norm without the mean and the shift.

Llama-style models (SmolLM2 of notebook 17, eps 1e-5) normalise with :func:`rms_norm` where
GPT-2 uses :func:`attn_core.nn.layer_norm`: each row is divided by its root mean square and
scaled by a learned gain; nothing is subtracted and nothing is added (Zhang & Sennrich 2019,
"Root mean square layer normalization").
"""

import numpy as np

from .._validate import as_float_array, check_result, checked_later
from .layer_norm import _vector, check_eps

__all__ = ["rms_norm", "rms_norm_backward"]


def _rms_norm_parts(x, gamma, eps):
    """The forward without checks: ``(y, z, denom)`` with ``z = x / denom`` the normalised
    rows and ``denom = sqrt(mean(x^2) + eps)`` (..., 1), which the backward reuses."""
    denom = np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)  # (..., 1)
    z = x / denom  # (..., d)
    return z * gamma, z, denom


def _rms_norm_backward_parts(z, denom, gamma, grad_y):
    """Unchecked backward from the forward's ``z`` and ``denom``: ``(grad_x, grad_gamma)``."""
    d = z.shape[-1]
    g = grad_y * gamma  # (..., d): dL/dz
    gz_mean = (g * z).mean(axis=-1, keepdims=True)  # (..., 1)
    grad_x = (g - z * gz_mean) / denom  # (..., d)
    grad_gamma = (grad_y * z).reshape(-1, d).sum(axis=0)  # (..., d) -> (N, d) -> (d,)
    return grad_x, grad_gamma


def _check(x, gamma, eps):
    x = as_float_array(x, "x", min_ndim=1, layout="(..., d)")
    gamma = _vector(gamma, "gamma", x.shape[-1])
    eps = check_eps(eps)
    dtype = np.result_type(x, gamma)
    return x.astype(dtype, copy=False), gamma.astype(dtype, copy=False), eps


def rms_norm(x, gamma, eps=1e-5):
    """Divide each row by its root mean square, then scale it.

    Parameters
    ----------
    x : (..., d) array_like
        Rows to normalise.
    gamma : (d,) array_like
        Learned scale (gain). There is no shift.
    eps : float
        Added to the mean square before the square root; finite and > 0 (Llama and SmolLM2:
        1e-5).

    Returns
    -------
    y : (..., d) ndarray, in the common float dtype of ``x`` and ``gamma``

    Notes
    -----
    .. math:: y = \\gamma \\odot \\frac{x}{\\sqrt{\\tfrac{1}{d}\\sum_j x_j^2 + \\epsilon}}

    Unlike layer norm, the mean is not removed: a row keeps its direction, only its length
    is set (to about ``sqrt(d)`` before the gain). One reduction per row instead of two.

    Examples
    --------
    >>> np.round(rms_norm(np.array([[3.0, 4.0]]), np.ones(2), eps=1e-12), 4)  # rms 3.5355
    array([[0.8485, 1.1314]])
    """
    x, gamma, eps = _check(x, gamma, eps)
    with checked_later():
        y = _rms_norm_parts(x, gamma, eps)[0]
    check_result(y, "the RMS norm's output")
    return y


def rms_norm_backward(x, gamma, eps, grad_y):
    """Gradients of :func:`rms_norm` with respect to ``x`` and ``gamma``.

    Parameters
    ----------
    x : (..., d) array_like
        The forward pass's input.
    gamma : (d,) array_like
        The forward pass's gain.
    eps : float
        The forward pass's eps.
    grad_y : (..., d) array_like
        Derivative of the loss with respect to the output, with ``x``'s shape.

    Returns
    -------
    grad_x : (..., d) ndarray
    grad_gamma : (d,) ndarray
        Summed over every leading (batch and position) dimension.

    Notes
    -----
    With :math:`r = \\sqrt{\\overline{x^2} + \\epsilon}`, :math:`z = x / r` and
    :math:`g = \\gamma \\odot dy`:

    .. math:: dx = \\frac{1}{r}\\left(g - z\\, \\overline{g \\odot z}\\right), \\qquad
              d\\gamma = \\sum dy \\odot z

    (layer norm's formula without the :math:`-\\bar g` term, which came from the mean).

    Examples
    --------
    >>> x = np.array([[3.0, 4.0]])
    >>> grad_x, grad_gamma = rms_norm_backward(x, np.ones(2), 1e-12, x)  # grad_y along x
    >>> np.round(grad_x, 12) + 0.0  # stretching a row does not change its RMS norm
    array([[0., 0.]])
    """
    x, gamma, eps = _check(x, gamma, eps)
    grad_y = as_float_array(grad_y, "grad_y", min_ndim=1, layout="(..., d)")
    if grad_y.shape != x.shape:
        raise ValueError(f"grad_y must have the shape of x {x.shape}, got shape {grad_y.shape}")
    grad_y = grad_y.astype(np.result_type(x, grad_y), copy=False)
    with checked_later():
        _, z, denom = _rms_norm_parts(x, gamma, eps)
        grads = _rms_norm_backward_parts(z, denom, gamma, grad_y)
    for g, what in zip(grads, ("grad_x", "grad_gamma")):
        check_result(g, f"the RMS norm's {what}")
    return grads
