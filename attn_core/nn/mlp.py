"""The transformer's feed-forward network (MLP): two affine maps with a GELU between."""

from .._validate import as_float_array, check_result, checked_later, to_common_dtype
from ..gradients import _bias_grad, _weight_grad
from .gelu import _gelu_backward_parts, _gelu_parts

__all__ = ["mlp", "mlp_backward"]


def _check_mlp(x, w_in, b_in, w_out, b_out):
    x = as_float_array(x, "x", min_ndim=2)
    d = x.shape[-1]
    w_in = as_float_array(w_in, "w_in", min_ndim=2)
    if w_in.shape[0] != d or w_in.ndim != 2:
        raise ValueError(f"w_in must have shape ({d}, d_ff), got shape {w_in.shape}")
    d_ff = w_in.shape[1]
    shapes = {"b_in": (d_ff,), "w_out": (d_ff, d), "b_out": (d,)}
    arrays = {}
    for name, a in (("b_in", b_in), ("w_out", w_out), ("b_out", b_out)):
        a = as_float_array(a, name, min_ndim=1)
        if a.shape != shapes[name]:
            raise ValueError(f"{name} must have shape {shapes[name]}, got shape {a.shape}")
        arrays[name] = a
    return to_common_dtype(x, w_in, arrays["b_in"], arrays["w_out"], arrays["b_out"])


def _mlp_parts(x, w_in, b_in, w_out, b_out):
    """The forward without checks: ``(y, (pre, t, hidden))`` for the backward."""
    pre = x @ w_in  # (..., n, d) @ (d, d_ff) -> (..., n, d_ff)
    pre += b_in
    hidden, t = _gelu_parts(pre)  # (..., n, d_ff)
    out = hidden @ w_out  # (..., n, d_ff) @ (d_ff, d) -> (..., n, d)
    out += b_out
    return out, (pre, t, hidden)


def _mlp_backward_parts(x, w_in, w_out, cache, grad_y):
    """The backward without checks: ``(grad_x, grads)`` from the forward's cache."""
    pre, t, hidden = cache
    grads = {"w_out": _weight_grad(hidden, grad_y), "b_out": _bias_grad(grad_y)}
    grad_hidden = grad_y @ w_out.T  # (..., n, d) @ (d, d_ff) -> (..., n, d_ff)
    grad_pre = _gelu_backward_parts(pre, t, grad_hidden)  # (..., n, d_ff)
    grads["w_in"], grads["b_in"] = _weight_grad(x, grad_pre), _bias_grad(grad_pre)
    grad_x = grad_pre @ w_in.T  # (..., n, d_ff) @ (d_ff, d) -> (..., n, d)
    return grad_x, {key: grads[key] for key in ("w_in", "b_in", "w_out", "b_out")}


def mlp(x, w_in, b_in, w_out, b_out):
    """The position-wise feed-forward network with the tanh GELU.

    Parameters
    ----------
    x : (..., n, d) array_like
    w_in : (d, d_ff) array_like
    b_in : (d_ff,) array_like
    w_out : (d_ff, d) array_like
    b_out : (d,) array_like

    Returns
    -------
    y : (..., n, d) ndarray, in the inputs' common dtype

    Notes
    -----
    .. math:: \\mathrm{MLP}(x) = \\mathrm{GELU}(x W_{in} + b_{in})\\, W_{out} + b_{out}

    applied to each position on its own (no mixing between positions: that is attention's
    job). GELU is :func:`attn_core.nn.gelu`, the tanh form.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.ones((2, 3))
    >>> mlp(x, np.ones((3, 4)), np.zeros(4), np.ones((4, 3)) / 4, np.zeros(3)).round(4)
    array([[2.9964, 2.9964, 2.9964],
           [2.9964, 2.9964, 2.9964]])
    """
    x, w_in, b_in, w_out, b_out = _check_mlp(x, w_in, b_in, w_out, b_out)
    with checked_later():
        y = _mlp_parts(x, w_in, b_in, w_out, b_out)[0]
    check_result(y, "the MLP's output")
    return y


def mlp_backward(x, w_in, b_in, w_out, b_out, grad_y):
    """Gradients of :func:`mlp` with respect to its input, weights and biases.

    Parameters
    ----------
    x, w_in, b_in, w_out, b_out
        The forward pass's arguments.
    grad_y : (..., n, d) array_like
        Derivative of the loss with respect to the output, with ``x``'s shape.

    Returns
    -------
    grad_x : (..., n, d) ndarray
    grads : dict
        ``"w_in"``, ``"b_in"``, ``"w_out"``, ``"b_out"`` with the parameters' shapes (summed
        over every leading dimension).

    Notes
    -----
    With :math:`a = x W_{in} + b_{in}`, :math:`h = \\mathrm{GELU}(a)`:
    :math:`dW_{out} = h^\\top dy`, :math:`dh = dy\\, W_{out}^\\top`,
    :math:`da = \\mathrm{GELU}'(a) \\odot dh`, :math:`dW_{in} = x^\\top da`,
    :math:`dx = da\\, W_{in}^\\top`; the biases get the sums of :math:`dy` and :math:`da`.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.ones((2, 3))
    >>> grad_x, grads = mlp_backward(x, np.ones((3, 4)), np.zeros(4), np.ones((4, 3)),
    ...                              np.zeros(3), np.ones((2, 3)))
    >>> grad_x.shape, grads["w_in"].shape, grads["b_out"]
    ((2, 3), (3, 4), array([2., 2., 2.]))
    """
    x, w_in, b_in, w_out, b_out = _check_mlp(x, w_in, b_in, w_out, b_out)
    grad_y = as_float_array(grad_y, "grad_y", min_ndim=2)
    if grad_y.shape != x.shape:
        raise ValueError(f"grad_y must have the shape of x {x.shape}, got shape {grad_y.shape}")
    grad_y = grad_y.astype(x.dtype, copy=False)
    with checked_later():
        _, cache = _mlp_parts(x, w_in, b_in, w_out, b_out)
        grad_x, grads = _mlp_backward_parts(x, w_in, w_out, cache, grad_y)
    check_result(grad_x, "the MLP's grad_x")
    return grad_x, grads
