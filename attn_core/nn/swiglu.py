"""The SwiGLU feed-forward network (Shazeer 2020, "GLU variants improve transformer"), forward
and backward: Llama's and SmolLM2's MLP, beside GPT-2's GELU MLP (:mod:`attn_core.nn.mlp`).

Three matrices and no biases: a gate and an "up" projection of the same width, the gate
through SiLU (``x * sigmoid(x)``, also called swish), multiplied entry by entry with the up
projection, then projected back down::

    SwiGLU(x) = (silu(x W_gate) * (x W_up)) W_down
"""

import numpy as np

from .._validate import as_float_array, check_result, checked_later, to_common_dtype
from ..gradients import _weight_grad

__all__ = ["silu", "swiglu", "swiglu_backward"]


def _sigmoid(a):
    """``1 / (1 + exp(-a))`` without overflow: ``exp`` of a non-positive number only."""
    with np.errstate(under="ignore"):  # exp(-1000) = 0: a weight too small to matter
        e = np.exp(-np.abs(a))  # in (0, 1]
    return np.where(a >= 0, 1 / (1 + e), e / (1 + e))


def silu(x):
    """The sigmoid-weighted linear unit, ``x * sigmoid(x)``.

    Parameters
    ----------
    x : array_like

    Returns
    -------
    y : ndarray, ``x``'s float dtype

    Examples
    --------
    >>> np.round(silu(np.array([-1.0, 0.0, 1.0])), 4)
    array([-0.2689,  0.    ,  0.7311])
    """
    x = as_float_array(x, "x")
    return x * _sigmoid(x)


def _check_swiglu(x, w_gate, w_up, w_down):
    x = as_float_array(x, "x", min_ndim=1, layout="(..., d)")
    d = x.shape[-1]
    w_gate = as_float_array(w_gate, "w_gate", min_ndim=2)
    if w_gate.ndim != 2 or w_gate.shape[0] != d:
        raise ValueError(f"w_gate must have shape ({d}, d_ff), got shape {w_gate.shape}")
    d_ff = w_gate.shape[1]
    w_up = as_float_array(w_up, "w_up", min_ndim=2)
    if w_up.shape != (d, d_ff):
        raise ValueError(f"w_up must have w_gate's shape {(d, d_ff)}, got shape {w_up.shape}")
    w_down = as_float_array(w_down, "w_down", min_ndim=2)
    if w_down.shape != (d_ff, d):
        raise ValueError(f"w_down must have shape {(d_ff, d)}, got shape {w_down.shape}")
    return to_common_dtype(x, w_gate, w_up, w_down)


def _swiglu_parts(x, w_gate, w_up, w_down):
    """The forward without checks: ``(y, (gate, sig, up, hidden))`` for the backward."""
    gate = x @ w_gate  # (..., n, d) @ (d, d_ff) -> (..., n, d_ff)
    up = x @ w_up  # (..., n, d) @ (d, d_ff) -> (..., n, d_ff)
    sig = _sigmoid(gate).astype(gate.dtype, copy=False)  # (..., n, d_ff)
    hidden = gate * sig * up  # silu(gate) * up
    return hidden @ w_down, (gate, sig, up, hidden)  # (..., n, d_ff) @ (d_ff, d) -> (..., n, d)


def _swiglu_backward_parts(x, w_gate, w_up, w_down, cache, grad_y):
    """The backward without checks: ``(grad_x, grads)`` from the forward's cache."""
    gate, sig, up, hidden = cache
    grads = {"w_down": _weight_grad(hidden, grad_y)}
    grad_hidden = grad_y @ w_down.T  # (..., n, d) @ (d, d_ff) -> (..., n, d_ff)
    grad_up = grad_hidden * gate * sig  # d hidden / d up = silu(gate)
    # silu'(a) = sigmoid(a) (1 + a (1 - sigmoid(a)))
    grad_gate = grad_hidden * up * sig * (1 + gate * (1 - sig))
    grads["w_gate"], grads["w_up"] = _weight_grad(x, grad_gate), _weight_grad(x, grad_up)
    grad_x = grad_gate @ w_gate.T + grad_up @ w_up.T  # (..., n, d_ff) @ (d_ff, d) -> (..., n, d)
    return grad_x, {key: grads[key] for key in ("w_gate", "w_up", "w_down")}


def swiglu(x, w_gate, w_up, w_down):
    """The SwiGLU feed-forward network, position by position.

    Parameters
    ----------
    x : (..., n, d) array_like
    w_gate, w_up : (d, d_ff) array_like
        The gate and up projections (SmolLM2: d = 576, d_ff = 1536).
    w_down : (d_ff, d) array_like
        The down projection.

    Returns
    -------
    y : (..., n, d) ndarray, in the inputs' common dtype

    Notes
    -----
    .. math:: \\mathrm{SwiGLU}(x) = \\bigl(\\mathrm{silu}(x W_{gate}) \\odot x W_{up}\\bigr)
              W_{down}, \\qquad \\mathrm{silu}(a) = \\frac{a}{1 + e^{-a}}

    The gate decides, entry by entry, how much of the up projection passes. With three
    matrices instead of two, a SwiGLU MLP of width ``d_ff`` has the parameters of a GELU MLP
    of width ``1.5 d_ff``.

    Examples
    --------
    >>> x = np.ones((1, 2))
    >>> np.round(swiglu(x, np.ones((2, 3)), np.ones((2, 3)), np.ones((3, 2))), 4)
    array([[10.5696, 10.5696]])
    """
    x, w_gate, w_up, w_down = _check_swiglu(x, w_gate, w_up, w_down)
    with checked_later():
        y = _swiglu_parts(x, w_gate, w_up, w_down)[0]
    check_result(y, "the SwiGLU MLP's output")
    return y


def swiglu_backward(x, w_gate, w_up, w_down, grad_y):
    """Gradients of :func:`swiglu` with respect to its input and its three matrices.

    Parameters
    ----------
    x, w_gate, w_up, w_down
        The forward pass's arguments.
    grad_y : (..., n, d) array_like
        Derivative of the loss with respect to the output, with ``x``'s shape.

    Returns
    -------
    grad_x : (..., n, d) ndarray
    grads : dict
        ``"w_gate"``, ``"w_up"``, ``"w_down"`` with the matrices' shapes (summed over every
        leading dimension).

    Notes
    -----
    With :math:`g = x W_{gate}`, :math:`u = x W_{up}`, :math:`h = \\mathrm{silu}(g) \\odot u`
    and :math:`dh = dy\\, W_{down}^\\top`: :math:`du = dh \\odot \\mathrm{silu}(g)`,
    :math:`dg = dh \\odot u \\odot \\sigma(g)(1 + g(1 - \\sigma(g)))`, then
    :math:`dx = dg\\, W_{gate}^\\top + du\\, W_{up}^\\top` and each matrix gets its input's
    transpose times its output's gradient.

    Examples
    --------
    >>> x = np.ones((1, 2))
    >>> grad_x, grads = swiglu_backward(x, np.ones((2, 3)), np.ones((2, 3)), np.ones((3, 2)),
    ...                                 np.ones((1, 2)))
    >>> grad_x.shape, grads["w_gate"].shape, grads["w_down"].shape
    ((1, 2), (2, 3), (3, 2))
    """
    x, w_gate, w_up, w_down = _check_swiglu(x, w_gate, w_up, w_down)
    grad_y = as_float_array(grad_y, "grad_y", min_ndim=1)
    if grad_y.shape != x.shape:
        raise ValueError(f"grad_y must have the shape of x {x.shape}, got shape {grad_y.shape}")
    grad_y = grad_y.astype(x.dtype, copy=False)
    with checked_later():
        _, cache = _swiglu_parts(x, w_gate, w_up, w_down)
        grad_x, grads = _swiglu_backward_parts(x, w_gate, w_up, w_down, cache, grad_y)
    check_result(grad_x, "the SwiGLU MLP's grad_x")
    return grad_x, grads
