"""Qiu et al.'s output gate on each head's attention output (notebook 19), forward and
backward, for the decoder block (:mod:`attn_core.nn.block`, ``BlockOptions(output_gate=True)``).

The gate is ``sigmoid(Norm1(x) @ W_g + b_g)``, one value per channel of every head's output
(``attn.w_g`` (d_model, n_heads d_head), ``attn.b_g`` (n_heads d_head,) when the block has
biases); the block multiplies the heads' merged output by it before the output projection.
"""

from ..gradients import _bias_grad, _weight_grad
from ..multihead import _affine
from .swiglu import _sigmoid

__all__ = []


def _output_gate(ln1, p, o):
    """The output gate ``sigmoid(ln1 @ W_g + b_g)`` (..., n, n_heads d_head) of the block's
    attention input ``ln1`` (..., n, d_model), one value per channel of every head's output;
    None without ``output_gate``."""
    if not o.output_gate:
        return None
    return _sigmoid(_affine(ln1, p["attn.w_g"], p.get("attn.b_g"), "the gate projection"))


def _output_gate_backward(ln1, p, gate, grad_gate):
    """The gate's gradients ``({"attn.w_g": ..., "attn.b_g": ...}, d loss / d ln1)`` from
    ``grad_gate`` (..., n, n_heads d_head), the gradient at the gate's output ``gate`` of
    :func:`_output_gate`: with ``gate = sigmoid(s)``, ``ds = dgate * gate * (1 - gate)``."""
    grad_s = grad_gate * gate * (1 - gate)  # (..., n, h * d_head)
    grads = {"attn.w_g": _weight_grad(ln1, grad_s)}
    if "attn.b_g" in p:
        grads["attn.b_g"] = _bias_grad(grad_s)
    return grads, grad_s @ p["attn.w_g"].T  # (..., n, h d) @ (h d, d_model)
