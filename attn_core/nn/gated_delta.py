"""A Gated DeltaNet token mixer for the decoder block (``BlockOptions(attention="gated_delta")``),
forward and backward, through :mod:`attn_core.delta_rule`.

Each head ``h`` of width ``d_head`` keeps a ``(d_head, d_head)`` state and, per token,

    q_t, k_t = l2_normalise(x_t W_q + b_q), l2_normalise(x_t W_k + b_k)   (per head)
    v_t = x_t W_v + b_v
    a_t = sigmoid(x_t w_a + b_a),  beta_t = sigmoid(x_t w_beta + b_beta)   (one scalar per head)
    S_t = a_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,   o_t = q_t S_t

then the heads are merged and projected by ``W_o`` as in softmax attention. This is Gated
DeltaNet's mixer (Yang, Kautz and Hatamizadeh, ICLR 2025) at its smallest, as the recall
models of :mod:`attn_core.nn.recall_model` use it: the gate is a sigmoid (the paper and
Qwen3-Next parameterise it as ``exp(-A softplus(.))``), and the short convolutions, the
output gate and norm of the published layer are left out; ``q`` is not scaled by
``1/sqrt(d_head)`` (``W_o`` can scale). Kimi Delta Attention differs in the gate: a vector
``diag(alpha_t)`` with one gate per key channel instead of one scalar per head.

The output is computed as ``weights @ v`` with :func:`attn_core.delta_rule.delta_rule_weights`
(the chunked form with the whole sequence as one chunk from an empty state, so the block can
return each head's weights as softmax attention does); the backward is
:func:`attn_core.delta_rule.delta_rule_backward` and
:func:`attn_core.delta_rule.l2_normalise_backward`, then the gates' sigmoids.
"""

from __future__ import annotations

import numpy as np

from ..delta_rule import (
    delta_rule_backward,
    delta_rule_weights,
    l2_normalise,
    l2_normalise_backward,
)
from ..gradients import _bias_grad, _weight_grad
from ..multihead import _affine, _merge, _split

__all__ = ["GATE_BIAS", "gated_delta_backward_parts", "gated_delta_parts"]

#: Initial bias of the gate a_t (tiny GPT's init_gpt): sigmoid(3) = 0.95 keeps most of the
#: state at the start, as the recall models do (attn_core.nn.recall_model.GATE_BIAS).
GATE_BIAS = 3.0


def _sigmoid(z):
    return 0.5 * (1 + np.tanh(0.5 * z))


def _gate(x, w, b):
    """``sigmoid(x w + b)`` (..., n, h) as (..., h, n): one scalar per head and token."""
    return _sigmoid(x @ w + b).swapaxes(-1, -2)


def gated_delta_parts(x, p, n_heads):
    """The mixer's forward on checked inputs.

    Parameters
    ----------
    x : (..., n, d_model) ndarray
        The normalised stream (the block's ``Norm1(x)``).
    p : dict
        The block's parameters (short names): ``attn.w_q`` .. ``attn.w_o`` (d_model,
        d_model) with their biases ``attn.b_*`` when present, ``attn.w_a``, ``attn.w_beta``
        (d_model, n_heads), ``attn.b_a``, ``attn.b_beta`` (n_heads,).
    n_heads : int

    Returns
    -------
    out : (..., n, d_model) ndarray
    weights : (..., n_heads, n, n) ndarray
        What each query puts on each value (``heads = weights @ v``; lower triangular, may be
        negative).
    parts : tuple
        ``(q_raw, k_raw, v, merged, q, k, a, beta)`` for the backward (``merged`` (..., n,
        n_heads d_head) is at index 3, as in softmax attention's parts).
    """
    proj = {c: _split(_affine(x, p[f"attn.w_{c}"], p.get(f"attn.b_{c}"), f"the {c} projection"),
                      n_heads) for c in "qkv"}  # (..., h, n, d_head)
    q, k = l2_normalise(proj["q"]), l2_normalise(proj["k"])
    a = _gate(x, p["attn.w_a"], p["attn.b_a"])  # (..., h, n)
    beta = _gate(x, p["attn.w_beta"], p["attn.b_beta"])  # (..., h, n)
    weights = delta_rule_weights(q, k, beta, a)  # (..., h, n, n)
    merged = _merge(weights @ proj["v"])  # (..., h, n, d_head) -> (..., n, h * d_head)
    out = _affine(merged, p["attn.w_o"], p.get("attn.b_o"), "the output projection")
    return out, weights, (proj["q"], proj["k"], proj["v"], merged, q, k, a, beta)


def gated_delta_backward_parts(x, p, n_heads, parts, grad_out):
    """Gradients of :func:`gated_delta_parts`: ``{"x": (..., n, d_model), "w_q": .., "b_a":
    ..}`` under the short names without the ``attn.`` prefix (biases only if ``p`` has them).
    """
    q_raw, k_raw, v, merged, q, k, a, beta = parts
    grads = {"w_o": _weight_grad(merged, grad_out), "b_o": _bias_grad(grad_out)}
    grad_heads = _split(grad_out @ p["attn.w_o"].T, n_heads)  # (..., h, n, d_head)
    dq, dk, dv, dbeta, da = delta_rule_backward(q, k, v, beta, grad_heads, a=a)
    x_full = np.broadcast_to(x, (*merged.shape[:-1], x.shape[-1]))  # (..., n, d_model)
    grad_x = 0
    raw = {"q": l2_normalise_backward(q_raw, dq), "k": l2_normalise_backward(k_raw, dk),
           "v": dv}
    for c, g in raw.items():
        g = _merge(g)  # (..., h, n, d_head) -> (..., n, h * d_head)
        grads[f"w_{c}"], grads[f"b_{c}"] = _weight_grad(x_full, g), _bias_grad(g)
        grad_x = grad_x + g @ p[f"attn.w_{c}"].T
    for c, gate, d_gate in (("a", a, da), ("beta", beta, dbeta)):
        dz = (d_gate * gate * (1 - gate)).swapaxes(-1, -2)  # (..., n, h): through the sigmoid
        grads[f"w_{c}"], grads[f"b_{c}"] = _weight_grad(x_full, dz), _bias_grad(dz)
        grad_x = grad_x + dz @ p[f"attn.w_{c}"].T  # (..., n, h) @ (h, d_model)
    grads["x"] = grad_x
    return {key: g for key, g in grads.items() if key == "x" or f"attn.{key}" in p}
