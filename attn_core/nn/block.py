"""The decoder block (pre-norm, causal), forward and backward: ONE block for every decoder of
the course, its kind set by :class:`~attn_core.nn.block_options.BlockOptions`.

One block, with its parameters in a dict under short names (the model's ``"h{i}."`` prefix
taken off; :func:`block_params` does that)::

    a = x + MHA_causal(Norm1(x))    attention sub-layer, residual
    y = a + MLP(Norm2(a))           feed-forward sub-layer, residual

The tiny GPT's block (14) has layer norms, a GELU MLP, biases and learned positions outside
the block; an attention-only block (the toy models of 15) stops at ``y = a``; SmolLM2's
(17) has RMSNorm, a SwiGLU MLP, no biases, rotary positions on the queries and keys and
grouped-query attention (see :mod:`attn_core.nn.block_options`).

Attention is :func:`attn_core.multi_head_attention` (its two halves,
``multihead._multi_head_parts`` and ``gradients._multi_head_backward_parts``, so that the
backward reuses the forward's work), with :func:`attn_core.rope` applied to the split
query and key heads; with a KV cache (:mod:`attn_core.decoding`) the new tokens' keys and
values are appended and :func:`attn_core.decoding.decode_step` attends. No second copy of
attention, RoPE or the cache.
"""

import numpy as np

from .._validate import as_float_array, check_positive_int, check_result, checked_later
from ..decoding import KVCache, append_kv, decode_step
from ..gradients import _multi_head_backward_parts
from ..masks import causal_mask
from ..multihead import _affine, _merge, _multi_head_parts, _split
from ..positions import rope
from .block_options import (
    ATTN_KEYS,
    BLOCK_KEYS,
    BlockOptions,
    block_shapes,
    check_options,
)
from .gated_delta import gated_delta_backward_parts, gated_delta_parts
from .layer_norm import _layer_norm_backward_parts, _layer_norm_parts, check_eps
from .mlp import _mlp_backward_parts, _mlp_parts
from .output_gate import _output_gate, _output_gate_backward
from .rms_norm import _rms_norm_backward_parts, _rms_norm_parts
from .swiglu import _swiglu_backward_parts, _swiglu_parts

__all__ = ["ATTN_KEYS", "BLOCK_KEYS", "BlockOptions", "block_backward", "block_forward",
           "block_params", "block_shapes"]


def block_params(params, i):
    """Block ``i``'s parameters out of a model's flat dict, under the short names (every
    ``"h{i}.*"`` key with its prefix taken off)."""
    prefix = f"h{i}."
    return {name[len(prefix):]: a for name, a in params.items() if name.startswith(prefix)}


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


def _options(p, n_heads, eps, options):
    """The block's options: ``options``, or GPT-2's with ``n_heads`` and ``eps`` (an MLP if
    ``p`` has one)."""
    if options is not None:
        if n_heads is not None:
            raise ValueError("give n_heads or options (which holds n_heads), not both")
        return check_options(options)
    n_heads = check_positive_int(n_heads, "n_heads")
    mlp = "gelu" if any(k.startswith(("ln2.", "mlp.")) for k in p) else None
    return BlockOptions(n_heads, mlp=mlp, eps=check_eps(eps))


def _check_block(x, p, n_heads, eps, options):
    x = as_float_array(x, "x", min_ndim=2)
    if not isinstance(p, dict):
        raise TypeError(f"p must be a dict of the block's parameters, got {type(p).__name__}")
    o = _options(p, n_heads, eps, options)
    if x.shape[-1] % o.n_heads:
        raise ValueError(f"d_model = {x.shape[-1]} (the last axis of x) must be divisible by "
                         f"the head count n_heads = {o.n_heads}")
    first = {"gelu": "mlp.w_in", "swiglu": "mlp.w_gate"}.get(o.mlp)
    if first is not None and first not in p:
        raise ValueError(f"p is missing the block parameter(s) ['{first}'] (a {o.mlp} MLP)")
    d_ff = None if first is None else np.shape(p[first])[-1]
    shapes = block_shapes(x.shape[-1], d_ff, o)
    missing = [k for k in shapes if k not in p]
    if missing:
        raise ValueError(f"p is missing the block parameter(s) {missing}")
    unused = [k for k in p if k not in shapes]
    if unused:  # e.g. an MLP's weights with mlp=None, a shift ln1.b with norm="rms"
        raise ValueError(f"p has parameter(s) {unused} that a block with these options does "
                         f"not use (norm={o.norm!r}, mlp={o.mlp!r}, bias={o.bias}, "
                         f"output_gate={o.output_gate}): give "
                         "the options of the block these parameters belong to, or leave "
                         "them out")
    checked = check_shaped(p, shapes, "p", f"for d_model = {x.shape[-1]}")
    dtype = np.result_type(x, *checked.values())
    return x.astype(dtype, copy=False), {k: a.astype(dtype, copy=False)
                                         for k, a in checked.items()}, o


def _norm_parts(x, p, name, o):
    """``(y, z, denom)`` of the block's norm ``name`` ("ln1" or "ln2")."""
    if o.norm == "rms":
        return _rms_norm_parts(x, p[f"{name}.g"], o.eps)
    return _layer_norm_parts(x, p[f"{name}.g"], p[f"{name}.b"], o.eps)


def _ffn_parts(x, p, o):
    """``(y, cache)`` of the block's MLP (GELU or SwiGLU)."""
    if o.mlp == "gelu":
        return _mlp_parts(x, p["mlp.w_in"], p["mlp.b_in"], p["mlp.w_out"], p["mlp.b_out"])
    return _swiglu_parts(x, p["mlp.w_gate"], p["mlp.w_up"], p["mlp.w_down"])


def _attn_args(p):
    """``((w_q, w_k, w_v, w_o), (b_q, b_k, b_v, b_o))`` of a block's attention (biases None
    when the block has none)."""
    return (tuple(p[f"attn.w_{c}"] for c in "qkvo"), tuple(p.get(f"attn.b_{c}") for c in "qkvo"))


def _ablated(attended, merged, w_o, n_heads, ablate, gate=None):
    """``attended`` with each head ``h`` of ``ablate`` replaced: its output
    ``merged[..., h * d_head:(h + 1) * d_head]`` swapped for ``ablate[h]`` (``None``: zeros,
    else an array broadcasting to ``(..., n, d_head)``, e.g. its mean over a reference
    batch) before the output gate (if any, ``gate`` (..., n, n_heads d_head), still applied)
    and the output projection, whose other rows are unchanged."""
    d_head = merged.shape[-1] // n_heads
    out = attended.copy()
    for h, replacement in ablate.items():
        cols = slice(h * d_head, (h + 1) * d_head)
        own = merged[..., cols]  # (..., n, d_head): what head h wrote
        new = np.zeros_like(own) if replacement is None else replacement
        change = new - own if gate is None else (new - own) * gate[..., cols]
        out += change @ w_o[cols]  # (..., n, d_head) @ (d_head, d) -> (..., n, d)
    return out


def _rotate(o, positions):
    """RoPE of the block's options on split heads ``(..., heads, n, d_head)`` at
    ``positions`` (n,), or the identity without rotary positions."""
    if o.rope_base is None:
        return lambda x: x
    return lambda x: rope(x, positions, base=o.rope_base, pairing=o.pairing)


def _edit_qkv(o, positions):
    """The ``edit_qkv`` of ``_multi_head_parts``: rotary positions on q and k (None without
    them)."""
    if o.rope_base is None:
        return None
    turn = _rotate(o, positions)
    return lambda q, k, v: (turn(q), turn(k), v)


def _value_mask(o, n, zero_values):
    """``(n_heads, n)`` bool, False at the key positions ``zero_values`` in every head: their
    value vectors carry nothing while their weights are kept (``multi_head_attention``'s
    ``value_mask``); None when no value is zeroed."""
    if zero_values is None:
        return None
    keep = np.ones((o.n_heads, n), dtype=bool)
    keep[:, zero_values] = False
    return keep


def _block_parts(x, p, o, ablate=None, mask=None, positions=None, zero_values=None):
    """The full-sequence forward without checks: ``(y, weights, cache)``, the cache for the
    backward (not valid when ``ablate``, a checked ``{head: replacement}`` of
    :func:`_ablated`, or ``zero_values`` is given: interventions are for forward passes).

    ``mask`` (n, n) bool, default causal: where query ``i`` may see key ``j`` (a narrower
    causal mask: a window, keys masked); ``positions`` (n,), default ``0..n-1``: RoPE's."""
    n = x.shape[-2]
    given_mask, mask = mask, causal_mask(n) if mask is None else mask  # (n, n), every head
    positions = np.arange(n) if positions is None else positions
    ln1, z1, d1 = _norm_parts(x, p, "ln1", o)  # (..., n, d)
    ws, bs = _attn_args(p)
    gate = None
    if o.attention == "gated_delta":  # a recurrent state per head: causal by construction
        if zero_values is not None or given_mask is not None:
            raise ValueError("attention='gated_delta' takes no attention mask and no zeroed "
                             "values (interventions on softmax weights)")
        attended, weights, attn = gated_delta_parts(ln1, p, o.n_heads)
    else:
        gate = _output_gate(ln1, p, o)  # None or (..., n, n_heads * d_head)
        attended, weights, attn = _multi_head_parts(ln1, ws, o.n_heads, mask, bs,
                                                    o.n_kv_heads, _edit_qkv(o, positions),
                                                    _value_mask(o, n, zero_values),
                                                    o.attention, gate)
    if ablate:
        attended = _ablated(attended, attn[3], ws[3], o.n_heads, ablate, gate)
    a = x + attended  # (..., n, d)
    cache = {"ln1": ln1, "z1": z1, "d1": d1, "attn_w": ws, "attn": attn, "weights": weights,
             "gate": gate}
    if o.mlp is None:  # attention-only: the block ends here
        return a, weights, cache
    ln2, z2, d2 = _norm_parts(a, p, "ln2", o)  # (..., n, d)
    mlp_out, mlp_cache = _ffn_parts(ln2, p, o)
    cache.update({"ln2": ln2, "z2": z2, "d2": d2, "mlp": mlp_cache})
    return a + mlp_out, weights, cache


def _block_step(x, p, o, kv, ablate=None):
    """The cached forward without checks: ``m`` new rows ``x`` (..., m, d) after the
    ``kv.seen`` tokens of the KV cache ``kv`` (..., kv_heads, t, d_head). Returns ``(y,
    weights (..., n_heads, m, t + m), kv)``, ``kv`` with the new keys and values appended
    (a rolling cache takes one token at a time: ``m = 1``)."""
    if o.attention != "softmax":
        raise ValueError(f"a KV cache serves softmax attention; attention={o.attention!r} "
                         "decodes with a fixed-size state (attn_core.linear_attention), or "
                         "run the block on the whole sequence")
    m = x.shape[-2]
    a = _norm_parts(x, p, "ln1", o)[0]  # (..., m, d_model)
    (w_q, w_k, w_v, w_o), (b_q, b_k, b_v, b_o) = _attn_args(p)
    q = _split(_affine(a, w_q, b_q, "the q projection"), o.n_heads)  # (..., h, m, d_head)
    k = _split(_affine(a, w_k, b_k, "the k projection"), o.kv_heads)  # (..., kv, m, d_head)
    v = _split(_affine(a, w_v, b_v, "the v projection"), o.kv_heads)  # (..., kv, m, d_head)
    if o.rope_base is not None:  # q and k turned in one call, at positions seen .. seen + m - 1
        qk = _rotate(o, kv.seen + np.arange(m))(np.concatenate([q, k], axis=-3))  # (.., h+kv, ..)
        q, k = qk[..., :o.n_heads, :, :], qk[..., o.n_heads:, :, :]
    kv = append_kv(kv, k, v)  # (..., kv_heads, t + m, d_head)
    heads, weights = decode_step(q, kv, n_kv_heads=o.n_kv_heads)  # (..., h, m, d_head)
    merged = _merge(heads)  # (..., h, m, d_head) -> (..., m, h * d_head)
    gate = _output_gate(a, p, o)  # None or (..., m, h * d_head)
    attended = _affine(merged if gate is None else merged * gate, w_o, b_o,
                       "the output projection")
    if ablate:
        attended = _ablated(attended, merged, w_o, o.n_heads, ablate, gate)
    x = x + attended
    if o.mlp is not None:  # an attention-only model (notebook 15) has no MLP sublayer
        x = x + _ffn_parts(_norm_parts(x, p, "ln2", o)[0], p, o)[0]  # (..., m, d_model)
    return x, weights, kv


def _norm_backward(cache, name, p, o, grad):
    """``(grad_x, {norm's parameter grads})`` of the block's norm ``name``."""
    z, denom = cache["z" + name[-1]], cache["d" + name[-1]]
    if o.norm == "rms":
        grad_x, g = _rms_norm_backward_parts(z, denom, p[f"{name}.g"], grad)
        return grad_x, {f"{name}.g": g}
    grad_x, g, b = _layer_norm_backward_parts(z, denom, p[f"{name}.g"], grad)
    return grad_x, {f"{name}.g": g, f"{name}.b": b}


def _block_backward_parts(p, o, cache, grad_y):
    """The backward without checks: ``(grad_x, grads)`` from the forward's cache (no rotary
    positions: :func:`block_backward` refuses them)."""
    grads = {}
    grad_a = grad_y  # attention-only: the stream leaving the block is a
    if o.mlp is not None:
        if o.mlp == "gelu":
            grad_ln2, g = _mlp_backward_parts(cache["ln2"], p["mlp.w_in"], p["mlp.w_out"],
                                              cache["mlp"], grad_y)
        else:
            grad_ln2, g = _swiglu_backward_parts(cache["ln2"], p["mlp.w_gate"], p["mlp.w_up"],
                                                 p["mlp.w_down"], cache["mlp"], grad_y)
        grads = {f"mlp.{k}": v for k, v in g.items()}
        grad_a2, g = _norm_backward(cache, "ln2", p, o, grad_ln2)
        grads.update(g)
        grad_a = grad_y + grad_a2  # (..., n, d): the residual passes grad_y through
    gate = None
    if o.attention == "gated_delta":
        g = gated_delta_backward_parts(cache["ln1"], p, o.n_heads, cache["attn"], grad_a)
    else:
        gate = cache["gate"]
        g = _multi_head_backward_parts(cache["ln1"], cache["attn_w"], o.n_heads, cache["attn"],
                                       cache["weights"], grad_a, o.n_kv_heads, o.attention, gate)
    grads.update({f"attn.{k}": v for k, v in g.items() if k != "x" and f"attn.{k}" in p})
    grad_ln1 = g["x"]
    if gate is not None:  # the output gate's own weights, and its share of d loss / d ln1
        g_gate, grad_ln1_gate = _output_gate_backward(cache["ln1"], p, gate, g["gate"])
        grads.update(g_gate)
        grad_ln1 = grad_ln1 + grad_ln1_gate
    grad_x1, g = _norm_backward(cache, "ln1", p, o, grad_ln1)
    grads.update(g)
    return grad_a + grad_x1, {k: grads[k] for k in p if k in grads}


def block_forward(x, p, n_heads=None, eps=1e-5, *, options=None, positions=None, cache=None):
    """One pre-norm decoder block with causal multi-head attention.

    Parameters
    ----------
    x : (..., n, d_model) array_like
        The residual stream entering the block (with ``cache``: the ``n`` new tokens only).
    p : dict
        The block's parameters under the names of :func:`block_shapes` for its options; for
        GPT-2's block those of :data:`BLOCK_KEYS`: ``"ln1.g"``, ``"ln1.b"`` (d_model,),
        ``"attn.w_q"`` .. ``"attn.w_o"`` (d_model, d_model), ``"attn.b_q"`` ..
        ``"attn.b_o"`` (d_model,), ``"ln2.g"``, ``"ln2.b"``, ``"mlp.w_in"`` (d_model, d_ff),
        ``"mlp.b_in"`` (d_ff,), ``"mlp.w_out"`` (d_ff, d_model), ``"mlp.b_out"`` (d_model,).
        Without any ``ln2.*``/``mlp.*`` the block is attention-only (:data:`ATTN_KEYS`);
        with ``options.output_gate`` also ``"attn.w_g"`` (d_model, d_model) and ``"attn.b_g"``
        (d_model,) (the latter with biases).
    n_heads : int
        Number of heads; divides ``d_model`` (GPT-2's block; else give ``options``).
    eps : float
        The layer norms' eps (GPT-2's 1e-5).
    options : BlockOptions, optional
        Any other block (RMSNorm, SwiGLU, RoPE, grouped-query heads, no biases); then leave
        ``n_heads`` out (the options hold it and eps).
    positions : (n,) array_like of numbers, optional
        The tokens' positions for rotary embeddings; default ``0..n-1`` (with ``cache``:
        ``cache.seen ..``).
    cache : KVCache, optional
        Keys and values ``(..., kv_heads, t, d_head)`` of the tokens before ``x``
        (:func:`attn_core.decoding.empty_cache` at the start): the new tokens attend over
        them and themselves (rows ``t .. t + n - 1`` of the full causal block).

    Returns
    -------
    y : (..., n, d_model) ndarray
        The residual stream leaving the block.
    weights : (..., n_heads, n, n) ndarray (with ``cache``: (..., n_heads, n, t + n))
        Each head's (causal) attention weights.
    cache : KVCache
        Only when ``cache`` was given: it with the new tokens' keys and values appended.

    Notes
    -----
    .. math:: A = X + \\mathrm{MHA}_{causal}(\\mathrm{Norm}_1(X)), \\qquad
              Y = A + \\mathrm{MLP}(\\mathrm{Norm}_2(A))

    Pre-norm (GPT-2's order, kept by Llama): each sub-layer reads a normalised copy of the
    stream and adds its result back, so the stream itself is never normalised in a block.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> p = {k: 0.1 * rng.standard_normal(s) for k, s in block_shapes(4, 8).items()}
    >>> y, w = block_forward(rng.standard_normal((3, 4)), p, n_heads=2)
    >>> y.shape, w.shape, float(w[0, 0, 1])  # the first position sees only itself
    ((3, 4), (2, 3, 3), 0.0)
    """
    x, p, o = _check_block(x, p, n_heads, eps, options)
    if cache is not None:
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache (attn_core.decoding.empty_cache), got "
                            f"{type(cache).__name__}")
        if positions is not None:
            raise ValueError("with a cache the positions are cache.seen onwards: leave "
                             "positions out")
        with checked_later():
            y, weights, cache = _block_step(x, p, o, cache)
        check_result(y, "the block's output")
        return y, weights, cache
    if positions is not None:
        positions = np.asarray(positions)
        if positions.shape != (x.shape[-2],):
            raise ValueError(f"positions must have shape ({x.shape[-2]},), one per row of x, "
                             f"got shape {positions.shape}")
    with checked_later():
        y, weights, _ = _block_parts(x, p, o, positions=positions)
    check_result(y, "the block's output")
    return y, weights


def block_backward(x, p, n_heads, grad_y, eps=1e-5, *, options=None):
    """Gradients of :func:`block_forward` with respect to its input and every parameter.

    Parameters
    ----------
    x, p, n_heads, eps, options
        The forward pass's arguments (without rotary positions: this backward does not turn
        the gradients of q and k back; ``n_heads=None`` with ``options``).
    grad_y : (..., n, d_model) array_like
        Derivative of the loss with respect to the block's output, with ``x``'s shape.

    Returns
    -------
    grad_x : (..., n, d_model) ndarray
    grads : dict
        One gradient per parameter, under the names of ``p``, with the parameters' shapes.

    Notes
    -----
    Read backwards: :math:`dA = dY + \\mathrm{Norm}_2'^\\top \\mathrm{MLP}'^\\top dY` (the
    residual passes :math:`dY` straight through), then
    :math:`dX = dA + \\mathrm{Norm}_1'^\\top \\mathrm{MHA}'^\\top dA`; each layer's own
    backward (:func:`~attn_core.nn.mlp_backward`, :func:`~attn_core.nn.swiglu_backward`,
    :func:`~attn_core.nn.layer_norm_backward`, :func:`~attn_core.nn.rms_norm_backward`,
    :func:`~attn_core.multi_head_attention_backward`) does one step.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> p = {k: 0.1 * rng.standard_normal(s) for k, s in block_shapes(4, 8).items()}
    >>> grad_x, grads = block_backward(rng.standard_normal((3, 4)), p, 2, np.ones((3, 4)))
    >>> grad_x.shape, grads["mlp.w_in"].shape, grads["attn.b_o"].tolist()
    ((3, 4), (4, 8), [3.0, 3.0, 3.0, 3.0])
    """
    x, p, o = _check_block(x, p, n_heads, eps, options)
    if o.rope_base is not None:
        raise ValueError("block_backward does not cover rotary positions (rope_base set): "
                         "it is for the blocks the course trains, which have none")
    grad_y = as_float_array(grad_y, "grad_y", min_ndim=2)
    if grad_y.shape != x.shape:
        raise ValueError(f"grad_y must have the shape of x {x.shape}, got shape {grad_y.shape}")
    with checked_later():
        _, _, cache = _block_parts(x, p, o)
        grad_x, grads = _block_backward_parts(p, o, cache, grad_y.astype(x.dtype))
    check_result(grad_x, "the block's grad_x")
    return grad_x, grads
