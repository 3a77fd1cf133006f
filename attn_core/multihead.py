"""Multi-head attention: h attentions side by side on slices of the model dimension.

With ``n_kv_heads < h`` the same function is grouped-query attention (Ainslie et al. 2023,
"GQA: Training generalized multi-query transformer models from multi-head checkpoints"):
``h / n_kv_heads`` query heads share each key/value head; ``n_kv_heads = 1`` is multi-query
attention (Shazeer 2019, "Fast transformer decoding: one write-head is all you need").
"""

import numpy as np

from ._validate import (
    as_float_array,
    check_mask,
    check_positive_int,
    check_result,
    checked_later,
    divisors,
    to_common_dtype,
)
from .attention import MASKED_SCORE, _scores
from .linear_attention import _linear_weights
from .softmax import softmax_inplace


def _check_heads(d, h, name):
    h = check_positive_int(h, "h")
    if d % h:
        raise ValueError(
            f"{name} = {d} must be divisible by the head count h, got h = {h}; "
            f"head counts that divide {d}: {divisors(d)}"
        )
    return h


def split_heads(x, h):
    """Split the last dimension into ``h`` heads and move the head axis forward.

    Parameters
    ----------
    x : (..., n, d_model) array_like
        One row per position; ``d_model`` must be divisible by ``h``.
    h : int
        Number of heads, >= 1.

    Returns
    -------
    heads : (..., h, n, d_model // h) ndarray
        ``heads[..., i, :, :]`` is columns ``i*d_k .. (i+1)*d_k - 1`` of ``x``. A new array,
        never a view of ``x``: writing into it leaves ``x`` as it was. Its dtype follows
        the package's dtype rule (float16 as float32, integers as float64).

    Notes
    -----
    .. math:: \\mathrm{head}_i = X_{:,\\, i d_k : (i+1) d_k}, \\quad d_k = d_{model} / h

    Examples
    --------
    >>> x = np.arange(8.0).reshape(2, 4)
    >>> split_heads(x, 2)
    array([[[0., 1.],
            [4., 5.]],
    <BLANKLINE>
           [[2., 3.],
            [6., 7.]]])
    """
    x = as_float_array(x, "x", min_ndim=2)
    h = _check_heads(x.shape[-1], h, "d_model (the last dimension of x)")
    return _split(x, h).copy()  # a copy: a view would let a caller write into x


def _check_kv_heads(h, n_kv_heads):
    """``n_kv_heads`` as an int that divides ``h`` (None means ``h``: multi-head attention)."""
    if n_kv_heads is None:
        return h
    n_kv_heads = check_positive_int(n_kv_heads, "n_kv_heads")
    if h % n_kv_heads:
        raise ValueError(f"n_kv_heads must divide the query head count h = {h} (each key/value "
                         f"head serves h / n_kv_heads query heads), got n_kv_heads = "
                         f"{n_kv_heads}; divisors of {h}: {divisors(h)}")
    return n_kv_heads


def repeat_kv(x, groups):
    """Repeat each key/value head ``groups`` times along the head axis.

    Parameters
    ----------
    x : (..., n_kv_heads, n, d) ndarray
        Per-head keys or values.
    groups : int
        Query heads per key/value head (``h / n_kv_heads``).

    Returns
    -------
    repeated : (..., n_kv_heads * groups, n, d) ndarray
        Head ``i`` is ``x[..., i // groups, :, :]``: query head ``i`` reads key/value head
        ``i // groups`` (PyTorch's ``repeat_interleave`` order). ``groups = 1`` returns ``x``.

    Examples
    --------
    >>> repeat_kv(np.arange(2.0).reshape(2, 1, 1), 2).ravel()
    array([0., 0., 1., 1.])
    """
    return x if groups == 1 else np.repeat(x, groups, axis=-3)


def _split(x, h):
    *lead, n, d = x.shape
    x = x.reshape(*lead, n, h, d // h)  # (..., n, d_model) -> (..., n, h, d_k)
    return x.swapaxes(-3, -2)  # (..., n, h, d_k) -> (..., h, n, d_k)


def merge_heads(x):
    """Concatenate the heads back into one row per position (inverse of :func:`split_heads`).

    Parameters
    ----------
    x : (..., h, n, d_k) array_like
        Per-head rows.

    Returns
    -------
    merged : (..., n, h * d_k) ndarray
        Head ``i`` fills columns ``i*d_k .. (i+1)*d_k - 1``. A new array, never a view of
        ``x``; its dtype follows the package's dtype rule, as in :func:`split_heads`.

    Notes
    -----
    .. math:: \\mathrm{Concat}(\\mathrm{head}_1, \\dots, \\mathrm{head}_h)

    Examples
    --------
    >>> x = np.arange(8.0).reshape(2, 4)
    >>> np.array_equal(merge_heads(split_heads(x, 2)), x)
    True
    """
    x = as_float_array(x, "x", min_ndim=3, layout="(..., h, n, d_k)")
    merged = _merge(x)
    return merged.copy() if np.shares_memory(merged, x) else merged  # h = 1 reshapes as a view


def _merge(x):
    *lead, h, n, d_k = x.shape
    x = x.swapaxes(-3, -2)  # (..., h, n, d_k) -> (..., n, h, d_k)
    return x.reshape(*lead, n, h * d_k)  # (..., n, h, d_k) -> (..., n, h * d_k)


def _check_weight(w, name, rows):
    w = as_float_array(w, name, min_ndim=2)
    if w.ndim != 2 or w.shape[0] != rows:
        raise ValueError(f"{name} must have shape ({rows}, d_out), got shape {w.shape}")
    return w


def _check_biases(biases, widths):
    names = ("b_q", "b_k", "b_v", "b_o")
    if biases is None:
        return (None,) * 4
    if isinstance(biases, dict):
        unknown = set(biases) - {"q", "k", "v", "o"}
        if unknown:
            raise ValueError(f"biases keys must be among 'q', 'k', 'v', 'o', got {sorted(unknown)}")
        biases = [biases.get(key) for key in "qkvo"]
    if not isinstance(biases, (tuple, list)):
        raise TypeError("biases must be a tuple (b_q, b_k, b_v, b_o) or a dict with keys 'q', "
                        f"'k', 'v', 'o' (any may be None), or None, got {biases!r}")
    if len(biases) != 4:
        raise ValueError(f"biases must be (b_q, b_k, b_v, b_o), got {len(biases)} items")
    checked = []
    for b, name, width in zip(biases, names, widths):
        if b is not None:
            b = as_float_array(b, name, min_ndim=1)
            if b.shape != (width,):
                raise ValueError(f"{name} must have shape ({width},), got shape {b.shape}")
        checked.append(b)
    return tuple(checked)


def multi_head_attention(x, w_q, w_k, w_v, w_o, h, mask=None, biases=None, n_kv_heads=None,
                         value_mask=None):
    """Self-attention with ``h`` heads, concatenated and projected by ``w_o``.

    Parameters
    ----------
    x : (..., n, d_model) array_like
        Token representations.
    w_q : (d_model, h * d_k) array_like
        Query projection (``Q = x @ w_q``); ``h`` must divide its width.
    w_k : (d_model, n_kv_heads * d_k) array_like
        Key projection (``(d_model, h * d_k)``, like ``w_q``, for multi-head attention).
    w_v : (d_model, n_kv_heads * d_v) array_like
        Value projection.
    w_o : (h * d_v, d_out) array_like
        Output projection applied to the concatenated heads.
    h : int
        Number of heads, >= 1.
    mask : (..., h, n, n) bool array_like, optional
        True where query ``i`` may attend to key ``j``; broadcastable to the weights'
        shape, so a ``(n, n)`` causal mask applies to every head.
    biases : tuple (b_q, b_k, b_v, b_o) or dict with keys 'q', 'k', 'v', 'o', optional
        Bias vectors added after each projection; any may be None.
    n_kv_heads : int, optional
        Key/value heads, dividing ``h``; default ``h`` (multi-head attention). Fewer is
        grouped-query attention (1 is multi-query): query head ``i`` uses key/value head
        ``i // (h / n_kv_heads)``, the same as multi-head attention whose key and value
        projections repeat each head's columns ``h / n_kv_heads`` times.
    value_mask : (..., h, n) bool array_like, optional
        False where key ``j``'s value vector is replaced by zeros in query head ``i`` while
        the weights stay as they are: an ablation that removes what a key gives without
        moving the weight it holds (notebook 16 tells a sink from an important token by it).

    Returns
    -------
    out : (..., n, d_out) ndarray
        ``Concat(head_1..head_h) @ w_o``.
    weights : (..., h, n, n) ndarray
        Each head's attention weights.

    Notes
    -----
    .. math:: \\mathrm{head}_i = \\mathrm{softmax}\\!\\left(
              \\frac{Q_i K_i^\\top}{\\sqrt{d_k}}\\right) V_i, \\quad
              \\mathrm{MHA}(X) = \\mathrm{Concat}(\\mathrm{head}_1..\\mathrm{head}_h) W_o

    where ``Q_i`` is columns ``i*d_k .. (i+1)*d_k - 1`` of ``X W_q``: one big projection
    split into slices, which is the same as ``h`` separate ``(d_model, d_k)`` projections.
    The scale is ``1/sqrt(d_k)`` with the per-head ``d_k``.

    Dtypes follow the package's rule (``attn_core._validate``): ``x``, the projections and
    the biases are brought to their common dtype (float16 as float32, integers as float64),
    and both results have it. A projection, score or output that overflows raises a
    ValueError naming it, never a silent inf or NaN.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((5, 8))
    >>> w_q, w_k, w_v, w_o = rng.standard_normal((4, 8, 8))
    >>> out, weights = multi_head_attention(x, w_q, w_k, w_v, w_o, h=2)
    >>> out.shape, weights.shape
    ((5, 8), (2, 5, 5))
    >>> np.allclose(weights.sum(axis=-1), 1.0)
    True
    """
    x, ws, h, bs = _check_inputs(x, w_q, w_k, w_v, w_o, h, biases, n_kv_heads)
    out, weights, _ = _multi_head_parts(x, ws, h, mask, bs, n_kv_heads,
                                        value_mask=value_mask)
    return out, weights


def _check_value_mask(value_mask, h, n):
    """``value_mask`` as a bool array broadcastable to ``(..., h, n)``."""
    vm = np.asarray(value_mask)
    if vm.dtype != bool or vm.ndim < 2 or vm.shape[-2:] != (h, n):
        raise ValueError(f"value_mask must be a bool array of shape (..., h, n) = (..., {h}, "
                         f"{n}), True where a key's value is kept, got dtype {vm.dtype} and "
                         f"shape {vm.shape}")
    return vm


def _multi_head_parts(x, ws, h, mask, bs, n_kv_heads=None, edit_qkv=None, value_mask=None,
                      kind="softmax", gate=None):
    """:func:`multi_head_attention` on checked inputs (``ws = (w_q, w_k, w_v, w_o)``,
    ``bs`` the four biases): ``(out, weights, (q, k, v, merged))``, the last for a backward
    pass that reuses the forward's work (``gradients._multi_head_backward_parts``); ``k`` and
    ``v`` hold the ``n_kv_heads`` heads, not repeated.

    ``edit_qkv``, optional, is a function ``(q, k, v) -> (q, k, v)`` applied to the split
    heads ``(..., h or n_kv, n, d_head)`` before the scores: a decoder block's rotary
    positions (:func:`attn_core.rope`) go in there. ``value_mask`` (..., h, n) bool, False where
    a key's value vector is zeroed in a head (its weight kept).

    ``kind="linear"`` replaces each head's softmax by linear attention's normalised
    ``phi(q) . phi(k)`` (:mod:`attn_core.linear_attention`, quadratic form, under ``mask``).
    ``gate`` (..., n, h * d_v), optional, multiplies the merged heads before the output
    projection (an output gate, :mod:`attn_core.nn.block_options`); ``merged`` is returned
    ungated."""
    n_kv = h if n_kv_heads is None else n_kv_heads
    (w_q, w_k, w_v, w_o), (b_q, b_k, b_v, b_o) = ws, bs
    q, k, v = (_affine(x, w, b, f"x @ w_{name} (the {what} projection)")
               for w, b, name, what in ((w_q, b_q, "q", "query"), (w_k, b_k, "k", "key"),
                                        (w_v, b_v, "v", "value")))
    q, k, v = _split(q, h), _split(k, n_kv), _split(v, n_kv)  # (..., h or n_kv, n, d_head)
    if edit_qkv is not None:
        q, k, v = edit_qkv(q, k, v)
    k_rep, v_rep = repeat_kv(k, h // n_kv), repeat_kv(v, h // n_kv)  # (..., h, n, d_head)
    if value_mask is not None:  # zero chosen values per query head; the weights stay
        v_rep = v_rep * _check_value_mask(value_mask, h, x.shape[-2])[..., None]
    if kind == "linear":
        weights = _linear_weights(q, k_rep, True if mask is None else check_mask(
            mask, (*np.broadcast_shapes(q.shape[:-2], k_rep.shape[:-2]), q.shape[-2],
                   k_rep.shape[-2])))  # (..., h, n, n)
    else:
        weights = _softmax_weights(q, k_rep, mask)
    with checked_later():
        heads = weights @ v_rep  # (..., h, n, n) @ (..., h, n, d_v) -> (..., h, n, d_v)
    check_result(heads, "the heads (weights @ v)")
    merged = _merge(heads)  # (..., h, n, d_v) -> (..., n, h * d_v)
    gated = merged if gate is None else merged * gate  # (..., n, h * d_v)
    out = _affine(gated, w_o, b_o, "heads @ w_o (the output projection)")
    return out, weights, (q, k, v, merged)


def _softmax_weights(q, k_rep, mask):
    """Each head's softmax weights of the scaled scores, ``mask`` applied (``-inf``)."""
    s = _scores(q, k_rep, 1.0 / np.sqrt(q.shape[-1]))  # (..., h, n, n)
    allowed = True
    if mask is not None:
        allowed = check_mask(mask, s.shape)
        if np.broadcast_shapes(allowed.shape, s.shape) == s.shape:  # s is ours: in place
            np.copyto(s, s.dtype.type(MASKED_SCORE), where=~allowed)
        else:  # a mask with more batch dims than x makes the weights bigger than s
            s = np.where(allowed, s, s.dtype.type(MASKED_SCORE))
    # an inf/NaN score, or a row of allowed scores that all overflowed to -inf, raises here;
    # s is a fresh array (the scores), so the softmax may overwrite it
    return softmax_inplace(s, axis=-1, allowed=allowed)


def _check_inputs(x, w_q, w_k, w_v, w_o, h, biases, n_kv_heads=None):
    """The checks of :func:`multi_head_attention` (also its backward pass): shapes, heads,
    biases, then the dtype rule. Returns ``x, (w_q, w_k, w_v, w_o), h, (b_q, b_k, b_v, b_o)``.
    """
    x = as_float_array(x, "x", min_ndim=2)
    d_model = x.shape[-1]
    w_q, w_k, w_v = (_check_weight(w, name, d_model) for w, name in
                     ((w_q, "w_q"), (w_k, "w_k"), (w_v, "w_v")))
    if n_kv_heads is None and w_q.shape != w_k.shape:
        raise ValueError(f"w_q and w_k must have the same shape, got {w_q.shape} and {w_k.shape}")
    h = _check_heads(w_q.shape[1], h, "the width of w_q and w_k (h * d_k)" if n_kv_heads is None
                     else "the width of w_q (h * d_k)")
    n_kv = _check_kv_heads(h, n_kv_heads)
    d_k = w_q.shape[1] // h
    if w_k.shape[1] != n_kv * d_k:
        raise ValueError(f"w_k must have width n_kv_heads * d_k = {n_kv} * {d_k} = {n_kv * d_k}"
                         f" (d_k = {d_k} from w_q), got shape {w_k.shape}")
    if n_kv_heads is None:
        _check_heads(w_v.shape[1], h, "the width of w_v (h * d_v)")
    else:
        _check_heads(w_v.shape[1], n_kv, "the width of w_v (n_kv_heads * d_v)")
    w_o = _check_weight(w_o, "w_o", w_v.shape[1] // n_kv * h)
    b_q, b_k, b_v, b_o = _check_biases(biases, (w_q.shape[1], w_k.shape[1], w_v.shape[1],
                                                w_o.shape[1]))
    x, w_q, w_k, w_v, w_o = to_common_dtype(x, w_q, w_k, w_v, w_o, *(
        b for b in (b_q, b_k, b_v, b_o) if b is not None))[:5]  # the dtype rule: one dtype
    b_q, b_k, b_v, b_o = (None if b is None else b.astype(x.dtype, copy=False)
                          for b in (b_q, b_k, b_v, b_o))
    return x, (w_q, w_k, w_v, w_o), h, (b_q, b_k, b_v, b_o)


def _affine(x, w, b, what):
    """``x @ w + b``, raising a ValueError naming ``what`` if it overflowed."""
    with checked_later():
        y = x @ w  # (..., n, d_in) @ (d_in, d_out) -> (..., n, d_out)
        if b is not None:
            y += b  # in place: y is a fresh array
    check_result(y, what)
    return y
