"""Decayed linear attention: a state that forgets a fraction of itself at every token.

Causal linear attention (:mod:`attn_core.linear_attention`) keeps the running sum
``S_t = S_{t-1} + k_t v_t^T`` and reads ``out_t = q_t S_t``: nothing is ever forgotten, so old
pairs pile up and blur the new ones. A gate ``g_t`` in ``(0, 1]`` shrinks the state before
each write:

    S_t = g_t S_{t-1} + k_t v_t^T,        out_t = q_t S_t

(the papers write ``S`` as ``(d_v, d_k)`` and ``v_t k_t^T``; here ``S`` is ``(d_k, d_v)`` as in
:class:`attn_core.linear_attention.LinearState`, its transpose). Unrolled, key ``j`` reaches
query ``i >= j`` multiplied by the product of the gates after it:

    out_i = sum_{j <= i} D_ij (q_i . k_j) v_j,    D_ij = g_{j+1} g_{j+2} ... g_i  (D_ii = 1)

so the same layer is masked attention with a decay mask ``D`` in place of the causal 0/1
mask. A fixed ``g`` per head is RetNet (Sun et al. 2023, arXiv 2307.08621); a ``g_t`` computed
from the token is gated linear attention (Yang et al., ICML 2024, per channel there) and
Mamba-2's state-space duality (Dao and Gu, ICML 2024: a selective SSM with a scalar decay per
step *is* this masked attention). No feature map and no normaliser here, as in those papers.

Three forms give the same numbers: :func:`decayed_attention_quadratic` (the mask, to look at),
:func:`decayed_attention_recurrent` (one token at a time) and :func:`decayed_attention_chunked`
(the mask inside chunks, the state between them). :func:`decayed_attention_backward` is the
recurrence run backwards, derived by hand.
"""

from __future__ import annotations

import numpy as np

from ._validate import (
    as_float_array,
    batch_shape,
    check_positive_int,
    check_result,
    to_common_dtype,
)

__all__ = ["check_gates", "decay_mask", "decayed_attention_backward",
           "decayed_attention_chunked", "decayed_attention_quadratic",
           "decayed_attention_recurrent", "decayed_step"]

#: Rows per chunk of :func:`decayed_attention_chunked` unless told otherwise.
CHUNK = 16


def check_gates(g, n, name="g"):
    """``g`` as a float array of shape ``(..., n)`` (a last axis of 1 is broadcast to ``n``),
    every entry in ``(0, 1]``; a clear error naming ``name`` otherwise."""
    g = as_float_array(g, name, min_ndim=1, layout="(..., n)")
    if g.shape[-1] not in (1, n):
        raise ValueError(f"{name} must have shape (..., n) with n = {n} (one gate per token) "
                         f"or (..., 1) (one per head), got shape {g.shape}")
    if not ((g > 0) & (g <= 1)).all():
        bad = g[~((g > 0) & (g <= 1))].ravel()[0]
        raise ValueError(f"{name} must lie in (0, 1] (a fraction of the state kept), got "
                         f"{float(bad)!r}")
    return np.broadcast_to(g, (*g.shape[:-1], n))


def _check_qkv(q, k, v):
    q = as_float_array(q, "q", min_ndim=2)
    k = as_float_array(k, "k", min_ndim=2)
    v = as_float_array(v, "v", min_ndim=2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension d_k, got q of shape "
                         f"{q.shape} and k of shape {k.shape}")
    if not q.shape[-2] == k.shape[-2] == v.shape[-2]:
        raise ValueError(f"q, k and v must have the same number of positions n (causal "
                         f"self-attention), got shapes {q.shape}, {k.shape}, {v.shape}")
    batch_shape({"q": q.shape, "k": k.shape, "v": v.shape})
    return to_common_dtype(q, k, v)


def _inputs(q, k, v, g):
    q, k, v = _check_qkv(q, k, v)
    g = check_gates(g, q.shape[-2]).astype(q.dtype, copy=False)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], g.shape[:-1])
    return q, k, v, g, lead


def decay_mask(g):
    """The decay mask: ``D_ij = g_{j+1} ... g_i`` for ``j <= i`` (``D_ii = 1``), 0 above.

    Parameters
    ----------
    g : (..., n) array_like
        Gates in ``(0, 1]``, one per token.

    Returns
    -------
    mask : (..., n, n) ndarray
        Lower triangular, ones on the diagonal.

    Notes
    -----
    Computed in log space: with ``c_i = sum_{t <= i} log g_t``, ``D_ij = exp(c_i - c_j)``.
    The exponent is ``<= 0`` below the diagonal, so nothing overflows, and a product of
    hundreds of small gates underflows to 0 cleanly instead of a ratio of two zeros.

    Examples
    --------
    >>> decay_mask([1.0, 0.5, 0.5]).tolist()
    [[1.0, 0.0, 0.0], [0.5, 1.0, 0.0], [0.25, 0.5, 1.0]]
    """
    g = as_float_array(g, "g", min_ndim=1, layout="(..., n)")
    g = check_gates(g, g.shape[-1])
    c = np.cumsum(np.log(g), axis=-1)  # (..., n)
    diff = c[..., :, None] - c[..., None, :]  # (..., n, 1) - (..., 1, n) -> (..., n, n)
    lower = np.tri(g.shape[-1], dtype=bool)
    return np.where(lower, np.exp(np.minimum(diff, 0)), 0.0)


def decayed_attention_quadratic(q, k, v, g):
    """Decayed linear attention as masked attention: ``(Q K^T * D) V``.

    Parameters
    ----------
    q, k : (..., n, d_k) array_like
    v : (..., n, d_v) array_like
    g : (..., n) or (..., 1) array_like
        Gates in ``(0, 1]``: one per token, or one per head (RetNet's fixed decay).

    Returns
    -------
    out : (..., n, d_v) ndarray
    weights : (..., n, n) ndarray
        ``(q_i . k_j) D_ij``: not normalised (rows need not sum to 1), zero above the diagonal.

    Examples
    --------
    >>> out, w = decayed_attention_quadratic([[1.0], [1.0]], [[1.0], [1.0]], [[2.0], [4.0]],
    ...                                      [1.0, 0.5])
    >>> w.tolist(), out.tolist()
    ([[1.0, 0.0], [0.5, 1.0]], [[2.0], [5.0]])
    """
    q, k, v, g, _ = _inputs(q, k, v, g)
    weights = (q @ k.swapaxes(-1, -2)) * decay_mask(g)  # (..., n, n)
    out = weights @ v  # (..., n, n) @ (..., n, d_v) -> (..., n, d_v)
    check_result(out, "the output (QK^T * D) V")
    return out, weights


def decayed_step(s, q_t, k_t, v_t, g_t):
    """One token of the recurrence: ``S_t = g_t S_{t-1} + k_t v_t^T``, ``out_t = q_t S_t``.

    Parameters
    ----------
    s : (..., d_k, d_v) ndarray
        The state before the token (not modified).
    q_t, k_t : (..., d_k) ndarray
    v_t : (..., d_v) ndarray
    g_t : (...) ndarray or float
        The gate in ``(0, 1]``.

    Returns
    -------
    out_t : (..., d_v) ndarray
    s : (..., d_k, d_v) ndarray
        The new state.
    """
    g_t = np.asarray(g_t)[..., None, None]  # (..., 1, 1)
    s = g_t * s + k_t[..., :, None] * v_t[..., None, :]  # (..., d_k, 1) * (..., 1, d_v)
    out_t = (q_t[..., None, :] @ s)[..., 0, :]  # (..., 1, d_k) @ (..., d_k, d_v) -> (..., d_v)
    return out_t, s


def decayed_attention_recurrent(q, k, v, g):
    """Decayed linear attention one token at a time, as a decoder runs it.

    Parameters and output as :func:`decayed_attention_quadratic`, except that the second
    result is the final state ``S_n`` of shape ``(..., d_k, d_v)`` instead of the weights.

    Examples
    --------
    >>> out, s = decayed_attention_recurrent([[1.0], [1.0]], [[1.0], [1.0]], [[2.0], [4.0]],
    ...                                      [1.0, 0.5])
    >>> out.tolist(), s.tolist()
    ([[2.0], [5.0]], [[5.0]])
    """
    q, k, v, g, lead = _inputs(q, k, v, g)
    s = np.zeros((*lead, q.shape[-1], v.shape[-1]), dtype=q.dtype)
    out = np.empty((*lead, q.shape[-2], v.shape[-1]), dtype=q.dtype)
    for t in range(q.shape[-2]):
        out[..., t, :], s = decayed_step(s, q[..., t, :], k[..., t, :], v[..., t, :],
                                         g[..., t])
    check_result(out, "the output q_t S_t")
    return out, s


def decayed_attention_chunked(q, k, v, g, chunk=CHUNK):
    """Decayed linear attention in chunks: the decay mask inside, the state across.

    Parameters
    ----------
    q, k, v, g : as :func:`decayed_attention_quadratic`
    chunk : int, optional
        Rows per chunk; changes the cost, never the result.

    Returns
    -------
    out : (..., n, d_v) ndarray
    s : (..., d_k, d_v) ndarray
        The final state, equal to :func:`decayed_attention_recurrent`'s.

    Notes
    -----
    With ``b_i`` the log of the gates' product from the chunk's start to row ``i`` and
    ``S_0`` the state before the chunk:

    .. math:: o_i = e^{b_i} q_i S_0 + \\sum_{j \\le i} D_{ij} (q_i \\cdot k_j) v_j, \\qquad
              S_C = e^{b_C} S_0 + \\sum_j e^{b_C - b_j} k_j v_j^\\top

    A chunk costs ``C^2`` for its mask and ``C d_k d_v`` for the state: the sub-quadratic
    form that RetNet, GLA and Mamba-2 train with.
    """
    q, k, v, g, lead = _inputs(q, k, v, g)
    chunk = check_positive_int(chunk, "chunk")
    n = q.shape[-2]
    s = np.zeros((*lead, q.shape[-1], v.shape[-1]), dtype=q.dtype)
    out = np.empty((*lead, n, v.shape[-1]), dtype=q.dtype)
    for i0 in range(0, n, chunk):
        rows = slice(i0, min(i0 + chunk, n))
        qc, kc, vc, gc = q[..., rows, :], k[..., rows, :], v[..., rows, :], g[..., rows]
        b = np.cumsum(np.log(gc), axis=-1)  # (..., c): log of the gates since the chunk began
        inside = (qc @ kc.swapaxes(-1, -2)) * decay_mask(gc)  # (..., c, c)
        out[..., rows, :] = np.exp(b)[..., None] * (qc @ s) + inside @ vc  # (..., c, d_v)
        carry = np.exp(b[..., -1:] - b)[..., :, None] * kc  # (..., c, d_k): decay to the end
        s = np.exp(b[..., -1])[..., None, None] * s + carry.swapaxes(-1, -2) @ vc
    check_result(out, "the output of the chunked form")
    return out, s


def decayed_attention_backward(q, k, v, g, grad_out):
    """Gradients of decayed linear attention, by running the recurrence backwards.

    Parameters
    ----------
    q, k, v, g : as :func:`decayed_attention_quadratic` (``g`` one per token)
    grad_out : (..., n, d_v) array_like
        Derivative of the loss with respect to the output.

    Returns
    -------
    grad_q, grad_k : (..., n, d_k) ndarray
    grad_v : (..., n, d_v) ndarray
    grad_g : (..., n) ndarray
        All with the broadcast leading dimensions of the inputs.

    Notes
    -----
    With ``dS_t`` the gradient reaching ``S_t`` from its own read and from ``S_{t+1}``:

    .. math:: dS_t = q_t^\\top do_t + g_{t+1} dS_{t+1}, \\quad dq_t = S_t\\, do_t, \\quad
              dk_t = dS_t v_t, \\quad dv_t = dS_t^\\top k_t, \\quad
              dg_t = \\langle dS_t, S_{t-1} \\rangle
    """
    q, k, v, g, lead = _inputs(q, k, v, g)
    n, d_k, d_v = q.shape[-2], q.shape[-1], v.shape[-1]
    do = as_float_array(grad_out, "grad_out", min_ndim=2, layout="(..., n, d_v)")
    if do.shape[-2:] != (n, d_v):
        raise ValueError(f"grad_out must have shape (..., {n}, {d_v}) like the output, got "
                         f"shape {do.shape}")
    q, k, v = (np.broadcast_to(a, (*lead, *a.shape[-2:])) for a in (q, k, v))
    g = np.broadcast_to(g, (*lead, n))
    states = np.empty((*lead, n + 1, d_k, d_v), dtype=q.dtype)  # S_0 = 0, S_1, ..., S_n
    states[..., 0, :, :] = 0
    for t in range(n):
        _, states[..., t + 1, :, :] = decayed_step(states[..., t, :, :], q[..., t, :],
                                                   k[..., t, :], v[..., t, :], g[..., t])
    dq, dk = np.empty_like(q), np.empty_like(k)
    dv, dg = np.empty_like(v), np.empty_like(g)
    ds = np.zeros((*lead, d_k, d_v), dtype=q.dtype)
    for t in reversed(range(n)):
        do_t = do[..., t, :]
        ds = ds + q[..., t, :, None] * do_t[..., None, :]  # (..., d_k, d_v): + q_t^T do_t
        s_t = states[..., t + 1, :, :]
        dq[..., t, :] = (s_t @ do_t[..., :, None])[..., 0]  # (..., d_k, d_v) @ (..., d_v, 1)
        dk[..., t, :] = (ds @ v[..., t, :, None])[..., 0]  # (..., d_k)
        dv[..., t, :] = (ds.swapaxes(-1, -2) @ k[..., t, :, None])[..., 0]  # (..., d_v)
        dg[..., t] = (ds * states[..., t, :, :]).sum(axis=(-1, -2))
        ds = g[..., t, None, None] * ds  # what reaches S_{t-1}
    return dq, dk, dv, dg
