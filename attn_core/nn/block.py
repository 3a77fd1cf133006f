"""The transformer block (pre-norm, causal), forward and backward.

One block, with its parameters in a dict under short names (the GPT's ``"h{i}."`` prefix
taken off; :func:`block_params` does that)::

    a = x + MHA_causal(LN1(x))      attention sub-layer, residual
    y = a + MLP(LN2(a))             feed-forward sub-layer, residual

An attention-only block (the toy models of Elhage et al. 2021, used for induction heads) has
no ``ln2.*`` and ``mlp.*`` parameters and stops at ``y = a``: a block's dict says which it
is (``block_shapes(d_model, None)`` gives the attention-only shapes).

Attention is :func:`attn_core.multi_head_attention` with :func:`attn_core.causal_mask`,
and its backward :func:`attn_core.multi_head_attention_backward`: no second copy of it. The
block calls their two halves (``multihead._multi_head_parts``, which the public forward
runs, and ``gradients._multi_head_backward_parts``, which the public backward runs after
recomputing the forward), so that its backward reuses the forward's projections and weights
instead of computing them again.
"""

import numpy as np

from .._validate import as_float_array, check_positive_int, check_result, checked_later
from ..gradients import _multi_head_backward_parts
from ..masks import causal_mask
from ..multihead import _check_inputs, _multi_head_parts
from .layer_norm import _layer_norm_backward_parts, _layer_norm_parts, check_eps
from .mlp import _mlp_backward_parts, _mlp_parts

__all__ = ["ATTN_KEYS", "BLOCK_KEYS", "block_backward", "block_forward", "block_params",
           "block_shapes"]

#: The names of one block's parameters (the GPT's are ``f"h{i}." + name``).
BLOCK_KEYS = ("ln1.g", "ln1.b", "attn.w_q", "attn.w_k", "attn.w_v", "attn.w_o", "attn.b_q",
              "attn.b_k", "attn.b_v", "attn.b_o", "ln2.g", "ln2.b", "mlp.w_in", "mlp.b_in",
              "mlp.w_out", "mlp.b_out")
#: The keys of an attention-only block (no ``ln2.*``, no ``mlp.*``).
ATTN_KEYS = BLOCK_KEYS[:10]
_MLP_KEYS = BLOCK_KEYS[10:]


def block_shapes(d_model, d_ff):
    """``{name: shape}`` of one block's parameters, in the order of :data:`BLOCK_KEYS`;
    ``d_ff=None`` gives an attention-only block's (:data:`ATTN_KEYS`)."""
    d, f = d_model, d_ff
    shapes = {"ln1.g": (d,), "ln1.b": (d,)}
    shapes.update({f"attn.w_{c}": (d, d) for c in "qkvo"})
    shapes.update({f"attn.b_{c}": (d,) for c in "qkvo"})
    if f is not None:
        shapes.update({"ln2.g": (d,), "ln2.b": (d,), "mlp.w_in": (d, f), "mlp.b_in": (f,),
                       "mlp.w_out": (f, d), "mlp.b_out": (d,)})
    return shapes


def block_params(params, i):
    """Block ``i``'s parameters out of the GPT's flat dict, under the short names (an
    attention-only model's blocks have only :data:`ATTN_KEYS`)."""
    return {name: params[f"h{i}.{name}"] for name in BLOCK_KEYS if f"h{i}.{name}" in params}


def _has_mlp(p):
    return "mlp.w_in" in p


def _check_block(x, p, n_heads, eps):
    x = as_float_array(x, "x", min_ndim=2)
    n_heads = check_positive_int(n_heads, "n_heads")
    eps = check_eps(eps)
    if not isinstance(p, dict):
        raise TypeError(f"p must be a dict of the block's parameters, got {type(p).__name__}")
    keys = BLOCK_KEYS if any(k in p for k in _MLP_KEYS) else ATTN_KEYS
    missing = [k for k in keys if k not in p]
    if missing:
        raise ValueError(f"p is missing the block parameter(s) {missing}")
    d_ff = np.shape(p["mlp.w_in"])[-1] if keys is BLOCK_KEYS else None
    shapes = block_shapes(x.shape[-1], d_ff)
    checked = check_shaped(p, shapes, "p", f"for d_model = {x.shape[-1]}")
    checked = {name: a.astype(np.result_type(x, a), copy=False) for name, a in checked.items()}
    return x.astype(np.result_type(x, *checked.values()), copy=False), checked, n_heads, eps


def check_shaped(arrays, shapes, name, context):
    """``{key: float ndarray}`` for every key of ``shapes``, each checked to have its shape.

    ``arrays[key]`` goes through the package's float check (named ``name[key]``); a wrong
    shape is a ValueError that names the key, the shape expected ``context`` and the shape
    given. Shared by a block's and the whole model's parameter checks.
    """
    checked = {}
    for key, shape in shapes.items():
        a = as_float_array(arrays[key], f"{name}[{key!r}]")
        if a.shape != shape:
            raise ValueError(f"{name}[{key!r}] must have shape {shape} {context}, got shape "
                             f"{a.shape}")
        checked[key] = a
    return checked


def _attn_args(p):
    """``((w_q, w_k, w_v, w_o), (b_q, b_k, b_v, b_o))`` of a block's attention."""
    return ((p["attn.w_q"], p["attn.w_k"], p["attn.w_v"], p["attn.w_o"]),
            (p["attn.b_q"], p["attn.b_k"], p["attn.b_v"], p["attn.b_o"]))


def _ablated(attended, merged, w_o, n_heads, ablate):
    """``attended`` with each head ``h`` of ``ablate`` replaced: its output
    ``merged[..., h * d_head:(h + 1) * d_head]`` swapped for ``ablate[h]`` (``None``: zeros,
    else an array broadcasting to ``(..., n, d_head)``, e.g. its mean over a reference
    batch) before the output projection, whose other rows are unchanged."""
    d_head = merged.shape[-1] // n_heads
    out = attended.copy()
    for h, replacement in ablate.items():
        cols = slice(h * d_head, (h + 1) * d_head)
        own = merged[..., cols]  # (..., n, d_head): what head h wrote
        new = np.zeros_like(own) if replacement is None else replacement
        out += (new - own) @ w_o[cols]  # (..., n, d_head) @ (d_head, d) -> (..., n, d)
    return out


def _block_parts(x, p, n_heads, eps, ablate=None):
    """The forward without checks: ``(y, weights, cache)``, the cache for the backward (not
    valid when ``ablate``, a checked ``{head: replacement}`` of :func:`_ablated`, is given:
    ablation is for forward passes only)."""
    mask = causal_mask(x.shape[-2])  # (n, n), the same for every head
    ln1, z1, d1 = _layer_norm_parts(x, p["ln1.g"], p["ln1.b"], eps)  # (..., n, d)
    ws, bs = _attn_args(p)
    _, ws, _, bs = _check_inputs(ln1, *ws, n_heads, bs)  # multi_head_attention's checks
    attended, weights, attn = _multi_head_parts(ln1, ws, n_heads, mask, bs)  # (..., n, d)
    if ablate:
        attended = _ablated(attended, attn[3], ws[3], n_heads, ablate)
    a = x + attended  # (..., n, d)
    cache = {"ln1": ln1, "z1": z1, "d1": d1, "attn_w": ws, "attn": attn, "weights": weights}
    if not _has_mlp(p):  # attention-only: the block ends here
        return a, weights, cache
    ln2, z2, d2 = _layer_norm_parts(a, p["ln2.g"], p["ln2.b"], eps)  # (..., n, d)
    mlp_out, mlp_cache = _mlp_parts(ln2, p["mlp.w_in"], p["mlp.b_in"], p["mlp.w_out"],
                                    p["mlp.b_out"])
    cache.update({"ln2": ln2, "z2": z2, "d2": d2, "mlp": mlp_cache})
    return a + mlp_out, weights, cache


def _block_backward_parts(p, n_heads, cache, grad_y):
    """The backward without checks: ``(grad_x, grads)`` from the forward's cache."""
    grads = {}
    grad_a = grad_y  # attention-only: the stream leaving the block is a
    if _has_mlp(p):
        grad_ln2, g = _mlp_backward_parts(cache["ln2"], p["mlp.w_in"], p["mlp.w_out"],
                                          cache["mlp"], grad_y)
        grads = {f"mlp.{k}": v for k, v in g.items()}
        grad_a2, grads["ln2.g"], grads["ln2.b"] = _layer_norm_backward_parts(
            cache["z2"], cache["d2"], p["ln2.g"], grad_ln2)
        grad_a = grad_y + grad_a2  # (..., n, d): the residual passes grad_y through
    g = _multi_head_backward_parts(cache["ln1"], cache["attn_w"], n_heads, cache["attn"],
                                   cache["weights"], grad_a)
    grads.update({f"attn.{k}": v for k, v in g.items() if k != "x"})
    grad_x1, grads["ln1.g"], grads["ln1.b"] = _layer_norm_backward_parts(
        cache["z1"], cache["d1"], p["ln1.g"], g["x"])
    return grad_a + grad_x1, {k: grads[k] for k in BLOCK_KEYS if k in grads}


def block_forward(x, p, n_heads, eps=1e-5):
    """One pre-norm transformer block with causal multi-head attention.

    Parameters
    ----------
    x : (..., n, d_model) array_like
        The residual stream entering the block.
    p : dict
        The block's parameters under the names of :data:`BLOCK_KEYS`: ``"ln1.g"``,
        ``"ln1.b"`` (d_model,), ``"attn.w_q"`` .. ``"attn.w_o"`` (d_model, d_model),
        ``"attn.b_q"`` .. ``"attn.b_o"`` (d_model,), ``"ln2.g"``, ``"ln2.b"``,
        ``"mlp.w_in"`` (d_model, d_ff), ``"mlp.b_in"`` (d_ff,), ``"mlp.w_out"``
        (d_ff, d_model), ``"mlp.b_out"`` (d_model,). Without any ``ln2.*``/``mlp.*`` the
        block is attention-only (:data:`ATTN_KEYS`): ``Y = A``.
    n_heads : int
        Number of heads; divides ``d_model``.
    eps : float
        The layer norms' eps (GPT-2's 1e-5).

    Returns
    -------
    y : (..., n, d_model) ndarray
        The residual stream leaving the block.
    weights : (..., n_heads, n, n) ndarray
        Each head's (causal) attention weights.

    Notes
    -----
    .. math:: A = X + \\mathrm{MHA}_{causal}(\\mathrm{LN}_1(X)), \\qquad
              Y = A + \\mathrm{MLP}(\\mathrm{LN}_2(A))

    Pre-norm (GPT-2's order): each sub-layer reads a normalised copy of the stream and adds
    its result back, so the stream itself is never normalised inside a block.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> p = {k: 0.1 * rng.standard_normal(s) for k, s in block_shapes(4, 8).items()}
    >>> y, w = block_forward(rng.standard_normal((3, 4)), p, n_heads=2)
    >>> y.shape, w.shape, float(w[0, 0, 1])  # the first position sees only itself
    ((3, 4), (2, 3, 3), 0.0)
    """
    x, p, n_heads, eps = _check_block(x, p, n_heads, eps)
    with checked_later():
        y, weights, _ = _block_parts(x, p, n_heads, eps)
    check_result(y, "the block's output")
    return y, weights


def block_backward(x, p, n_heads, grad_y, eps=1e-5):
    """Gradients of :func:`block_forward` with respect to its input and every parameter.

    Parameters
    ----------
    x, p, n_heads, eps
        The forward pass's arguments.
    grad_y : (..., n, d_model) array_like
        Derivative of the loss with respect to the block's output, with ``x``'s shape.

    Returns
    -------
    grad_x : (..., n, d_model) ndarray
    grads : dict
        One gradient per parameter, under the names of :data:`BLOCK_KEYS`, with the
        parameters' shapes.

    Notes
    -----
    Read backwards: :math:`dA = dY + \\mathrm{LN}_2'^\\top \\mathrm{MLP}'^\\top dY` (the
    residual passes :math:`dY` straight through), then
    :math:`dX = dA + \\mathrm{LN}_1'^\\top \\mathrm{MHA}'^\\top dA`; each layer's own
    backward (:func:`~attn_core.nn.mlp_backward`, :func:`~attn_core.nn.layer_norm_backward`,
    :func:`~attn_core.multi_head_attention_backward`) does one step.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> p = {k: 0.1 * rng.standard_normal(s) for k, s in block_shapes(4, 8).items()}
    >>> grad_x, grads = block_backward(rng.standard_normal((3, 4)), p, 2, np.ones((3, 4)))
    >>> grad_x.shape, grads["mlp.w_in"].shape, grads["attn.b_o"].tolist()
    ((3, 4), (4, 8), [3.0, 3.0, 3.0, 3.0])
    """
    x, p, n_heads, eps = _check_block(x, p, n_heads, eps)
    grad_y = as_float_array(grad_y, "grad_y", min_ndim=2)
    if grad_y.shape != x.shape:
        raise ValueError(f"grad_y must have the shape of x {x.shape}, got shape {grad_y.shape}")
    with checked_later():
        _, _, cache = _block_parts(x, p, n_heads, eps)
        grad_x, grads = _block_backward_parts(p, n_heads, cache, grad_y.astype(x.dtype))
    check_result(grad_x, "the block's grad_x")
    return grad_x, grads
