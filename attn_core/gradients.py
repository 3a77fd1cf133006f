"""Backward passes: how a small change of each input changes a loss that uses attention.

Each function takes the forward pass's inputs and the upstream gradient ``grad_out`` (the
derivative of some scalar loss with respect to the forward output) and returns the
derivative of that loss with respect to each input, with the input's shape. The chain is
the forward pass read backwards::

    scores  S = scale * Q K^T      ->  dQ = scale * dS K,   dK = scale * dS^T Q
    weights P = softmax(S)         ->  dS = P * (dP - rowsum(P * dP))
    output  O = P V                ->  dP = dO V^T,         dV = P^T dO

No Jacobian matrix is ever built: each step is one or two matrix products.
"""

import numpy as np

from ._validate import as_float_array, check_scale
from .attention import _check_qk, attention
from .linear_attention import linear_weights_backward
from .multihead import _check_inputs, _merge, _multi_head_parts, _split, repeat_kv


def softmax_backward(p, grad_p, axis=-1):
    """Gradient with respect to the softmax's input, given its output and the upstream gradient.

    Parameters
    ----------
    p : (..., n) array_like
        Softmax output (weights that sum to 1 along ``axis``, or all 0 for a fully masked
        slice).
    grad_p : (..., n) array_like
        Derivative of the loss with respect to ``p``; same shape as ``p``.
    axis : int, optional
        The axis the softmax normalised over (default: the last).

    Returns
    -------
    grad_x : (..., n) ndarray
        Derivative of the loss with respect to the scores ``x`` with ``p = softmax(x)``.

    Notes
    -----
    .. math:: \\frac{\\partial L}{\\partial x_j} = \\sum_i \\frac{\\partial L}{\\partial p_i}
              p_i(\\delta_{ij} - p_j) = p_j \\Big(g_j - \\sum_i p_i g_i\\Big)

    This is the Jacobian ``diag(p) - p p^T`` applied to ``g`` without building it. A
    saturated row (one ``p_j`` near 1) gives a gradient near 0 whatever ``g`` is; an all-zero
    (fully masked) row gives exactly 0.

    Examples
    --------
    >>> softmax_backward([0.5, 0.5], [1.0, 0.0])
    array([ 0.25, -0.25])
    >>> softmax_backward([1.0, 0.0], [0.0, 1.0])  # saturated: nothing passes back
    array([0., 0.])
    """
    p = as_float_array(p, "p", min_ndim=1)
    grad_p = as_float_array(grad_p, "grad_p", min_ndim=1)
    if p.shape != grad_p.shape:
        raise ValueError(
            f"grad_p must have the shape of p (one derivative per weight), got p of shape "
            f"{p.shape} and grad_p of shape {grad_p.shape}"
        )
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"axis must be an integer, got {axis!r}")
    if not -p.ndim <= axis < p.ndim:
        raise ValueError(f"axis must be in [{-p.ndim}, {p.ndim - 1}] for p of rank {p.ndim}, "
                         f"got {axis}")
    return _softmax_backward(p, grad_p, axis)


def _softmax_backward(p, grad_p, axis=-1):
    out = p * grad_p  # (..., n): the one new array
    inner = out.sum(axis=axis, keepdims=True)  # (..., n) -> (..., 1)
    np.subtract(grad_p, inner, out=out)
    out *= p  # p * (grad_p - inner)
    return out


def _sum_to(grad, shape):
    """Sum a gradient over the dimensions its input was broadcast along, back to ``shape``."""
    extra = grad.ndim - len(shape)
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))  # drop leading broadcast dims
    axes = tuple(i for i, (g, s) in enumerate(zip(grad.shape, shape)) if s == 1 and g != 1)
    return grad.sum(axis=axes, keepdims=True) if axes else grad


def _check_grad_out(grad_out, shape):
    grad_out = as_float_array(grad_out, "grad_out", min_ndim=2)
    if grad_out.shape != tuple(shape):
        raise ValueError(
            f"grad_out must have the shape of the forward output {tuple(shape)} "
            f"(..., n_q, d_v), got shape {grad_out.shape}"
        )
    return grad_out


def attention_backward(q, k, v, grad_out, mask=None, scale=None):
    """Gradients of :func:`~attn_core.attention`'s output with respect to q, k and v.

    Parameters
    ----------
    q : (..., n_q, d_k) array_like
    k : (..., n_k, d_k) array_like
    v : (..., n_k, d_v) array_like
        The forward pass's inputs (same rules as :func:`~attn_core.attention`).
    grad_out : (..., n_q, d_v) array_like
        Derivative of the loss with respect to the output ``out``, with ``out``'s shape.
    mask : (..., n_q, n_k) bool array_like, optional
        The same mask as in the forward pass. Masked keys get no gradient; a query with no
        allowed key gets zero gradients, never NaN.
    scale : float, optional
        Score scale; default ``1 / sqrt(d_k)``.

    Returns
    -------
    grad_q : (..., n_q, d_k) ndarray
    grad_k : (..., n_k, d_k) ndarray
    grad_v : (..., n_k, d_v) ndarray
        Each with the shape of its input (summed over the batch dims it was broadcast along).

    Notes
    -----
    .. math:: dV = P^\\top dO, \\quad dP = dO\\, V^\\top, \\quad
              dS = P \\odot (dP - \\mathrm{rowsum}(P \\odot dP)), \\quad
              dQ = \\mathrm{scale}\\; dS\\, K, \\quad dK = \\mathrm{scale}\\; dS^\\top Q

    Examples
    --------
    >>> q = k = np.eye(2)
    >>> v = [[1.0, 2.0], [3.0, 4.0]]
    >>> grad_q, grad_k, grad_v = attention_backward(q, k, v, np.ones((2, 2)), scale=np.log(3.0))
    >>> grad_v  # each key's total weight over both queries, times 1 per output column
    array([[1., 1.],
           [1., 1.]])
    >>> grad_q.round(3)  # turning each query towards key 1 (larger values) raises the sum
    array([[-0.824,  0.824],
           [-0.824,  0.824]])
    """
    grads, _ = _attention_backward_parts(q, k, v, grad_out, mask, scale)
    return grads


def _attention_backward_parts(q, k, v, grad_out, mask=None, scale=None):
    """``((grad_q, grad_k, grad_v), (weights, grad_scores))``: the backward pass and its parts."""
    q, k = _check_qk(q, k)
    v = as_float_array(v, "v", min_ndim=2)
    out, p = attention(q, k, v, mask=mask, scale=scale)  # checks shapes, mask and scale
    grad_out = _check_grad_out(grad_out, out.shape)
    grads, grad_s = _backward_from_weights(q, k, v, p, grad_out, check_scale(scale, q.shape[-1]))
    return grads, (p, grad_s)


def _backward_from_weights(q, k, v, p, grad_out, scale):
    """The unchecked core of :func:`attention_backward`, given the forward's weights ``p``."""
    grad_v = p.swapaxes(-1, -2) @ grad_out  # (..., n_k, n_q) @ (..., n_q, d_v) -> (..., n_k, d_v)
    grad_p = grad_out @ v.swapaxes(-1, -2)  # (..., n_q, d_v) @ (..., d_v, n_k) -> (..., n_q, n_k)
    grad_s = _softmax_backward(p, grad_p)  # (..., n_q, n_k); 0 where masked
    dtype = grad_s.dtype.type
    grad_q = (grad_s @ k) * dtype(scale)  # (..., n_q, n_k) @ (..., n_k, d_k) -> (..., n_q, d_k)
    # (..., n_k, n_q) @ (..., n_q, d_k) -> (..., n_k, d_k)
    grad_k = (grad_s.swapaxes(-1, -2) @ q) * dtype(scale)
    grads = (_sum_to(grad_q, q.shape), _sum_to(grad_k, k.shape), _sum_to(grad_v, v.shape))
    return grads, grad_s


def multi_head_attention_backward(x, w_q, w_k, w_v, w_o, h, grad_out, mask=None, biases=None,
                                  n_kv_heads=None):
    """Gradients of :func:`~attn_core.multi_head_attention` w.r.t. its input, weights and biases.

    Parameters
    ----------
    x, w_q, w_k, w_v, w_o, h, mask, biases, n_kv_heads
        The forward pass's arguments, with the same rules as
        :func:`~attn_core.multi_head_attention` (scale ``1/sqrt(d_k)`` per head).
    grad_out : (..., n, d_out) array_like
        Derivative of the loss with respect to the forward output ``out``.

    Returns
    -------
    grads : dict of ndarray
        ``"x"`` with ``x``'s shape; ``"w_q"``, ``"w_k"``, ``"w_v"``, ``"w_o"`` with the
        weights' shapes; ``"b_q"``, ``"b_k"``, ``"b_v"``, ``"b_o"`` the gradients of the four
        bias vectors (given even when a bias is None: the gradient at a zero bias).

    Notes
    -----
    With :math:`Y = \\mathrm{Concat}(\\mathrm{heads})`:
    :math:`dW_o = Y^\\top dO`, :math:`dY = dO\\, W_o^\\top`; each head's slice of
    :math:`dY` goes through :func:`attention_backward` to give :math:`dQ, dK, dV`; then
    :math:`dW_q = X^\\top dQ` (summed over batch and positions), :math:`db_q = \\sum dQ`, and
    :math:`dX = dQ W_q^\\top + dK W_k^\\top + dV W_v^\\top` (``x`` feeds all three).
    With ``n_kv_heads < h`` a key/value head feeds ``h / n_kv_heads`` query heads, so its
    gradient is the sum of theirs (the backward of :func:`~attn_core.multihead.repeat_kv`).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((3, 4))
    >>> w_q, w_k, w_v, w_o = rng.standard_normal((4, 4, 4))
    >>> grads = multi_head_attention_backward(x, w_q, w_k, w_v, w_o, 2, np.ones((3, 4)))
    >>> grads["x"].shape, grads["w_q"].shape, grads["b_o"].tolist()
    ((3, 4), (4, 4), [3.0, 3.0, 3.0, 3.0])
    """
    x, ws, h, bs = _check_inputs(x, w_q, w_k, w_v, w_o, h, biases, n_kv_heads)
    out, p, parts = _multi_head_parts(x, ws, h, mask, bs, n_kv_heads)
    grad_out = _check_grad_out(grad_out, out.shape)
    return _multi_head_backward_parts(x, ws, h, parts, p, grad_out, n_kv_heads)


def _multi_head_backward_parts(x, ws, h, parts, p, grad_out, n_kv_heads=None,
                               kind="softmax", gate=None):
    """The backward of multi-head attention from the forward's ``parts = (q, k, v, merged)``
    and weights ``p`` (as ``multihead._multi_head_parts`` returns them), unchecked;
    ``kind="linear"`` for linear attention's weights (``linear_weights_backward``). With the
    forward's output ``gate`` (..., n, h * d_v), the grads also hold ``"gate"``, its
    gradient."""
    (w_q, w_k, w_v, w_o), (q, k, v, merged) = ws, parts
    groups = h // (h if n_kv_heads is None else n_kv_heads)
    k, v = repeat_kv(k, groups), repeat_kv(v, groups)  # (..., h, n, d_head)
    scale = 1.0 / np.sqrt(q.shape[-1])
    grad_merged = grad_out @ w_o.T  # (..., n, d_out) @ (d_out, h * d_v) -> (..., n, h * d_v)
    grad_gate = None
    if gate is not None:  # out = (merged * gate) @ w_o + b_o
        grad_gate = grad_merged * merged  # (..., n, h * d_v)
        grad_merged = grad_merged * gate
        merged = merged * gate  # what w_o multiplied
    grad_heads = _split(grad_merged, h)  # (..., h, n, d_v)
    grad_v = p.swapaxes(-1, -2) @ grad_heads  # (..., h, n, n) @ (..., h, n, d_v)
    grad_p = grad_heads @ v.swapaxes(-1, -2)  # (..., h, n, d_v) @ (..., h, d_v, n)
    if kind == "linear":
        grad_q, grad_k = linear_weights_backward(q, k, p, grad_p)  # (..., h, n, d_k) each
    else:
        grad_s = _softmax_backward(p, grad_p)  # (..., h, n, n)
        dtype = grad_s.dtype.type
        grad_q = (grad_s @ k) * dtype(scale)  # (..., h, n, n) @ (..., h, n, d_k)
        grad_k = (grad_s.swapaxes(-1, -2) @ q) * dtype(scale)  # (..., h, n, d_k)
    grad_k, grad_v = _sum_groups(grad_k, groups), _sum_groups(grad_v, groups)
    grads = {"w_o": _weight_grad(merged, grad_out), "b_o": _bias_grad(grad_out)}
    x_full = np.broadcast_to(x, (*merged.shape[:-1], x.shape[-1]))  # (..., n, d_model)
    grad_x = 0
    for name, g, w in (("q", grad_q, w_q), ("k", grad_k, w_k), ("v", grad_v, w_v)):
        g = _merge(g)  # (..., h, n, d) -> (..., n, h * d)
        grads[f"w_{name}"] = _weight_grad(x_full, g)
        grads[f"b_{name}"] = _bias_grad(g)
        grad_x = grad_x + g @ w.T  # (..., n, h * d) @ (h * d, d_model) -> (..., n, d_model)
    grads["x"] = _sum_to(grad_x, x.shape)
    out = {key: grads[key] for key in ("x", "w_q", "w_k", "w_v", "w_o",
                                       "b_q", "b_k", "b_v", "b_o")}
    if grad_gate is not None:
        out["gate"] = grad_gate
    return out


def _weight_grad(inputs, grad):
    """``sum over batch and positions of inputs^T grad``: the gradient of ``inputs @ w``."""
    a = inputs.reshape(-1, inputs.shape[-1])  # (..., n, d_in) -> (N, d_in)
    b = grad.reshape(-1, grad.shape[-1])  # (..., n, d_out) -> (N, d_out)
    return a.T @ b  # (d_in, N) @ (N, d_out) -> (d_in, d_out)


def _bias_grad(grad):
    return grad.reshape(-1, grad.shape[-1]).sum(axis=0)  # (..., n, d_out) -> (d_out,)


def _sum_groups(grad, groups):
    """The backward of ``repeat_kv``: sum each run of ``groups`` heads.

    ``(..., n_kv * groups, n, d) -> (..., n_kv, n, d)``."""
    if groups == 1:
        return grad
    *lead, h, n, d = grad.shape
    return grad.reshape(*lead, h // groups, groups, n, d).sum(axis=-3)
