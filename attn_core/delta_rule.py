"""The delta rule: a state corrected toward each new value instead of summed.

Linear attention adds ``k_t v_t^T`` to its state; when a key comes back, its old value is
still there and the read returns the sum of both. DeltaNet (Schlag, Irie and Schmidhuber,
ICML 2021; made trainable in parallel by Yang et al., NeurIPS 2024) first reads what the
state holds for the key, ``k_t^T S``, and writes only the difference, scaled by a step size
``beta_t`` in ``[0, 1]``:

    S_t = S_{t-1} + beta_t k_t (v_t - k_t^T S_{t-1})^T = (I - beta_t k_t k_t^T) S_{t-1}
          + beta_t k_t v_t^T

With a unit key and ``beta_t = 1`` the old value at ``k_t`` is replaced exactly: one step of
gradient descent on ``||k_t^T S - v_t||^2 / 2``. Gated DeltaNet (Yang, Kautz and Hatamizadeh,
ICLR 2025) adds the decay of :mod:`attn_core.decay` in front:

    S_t = a_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,    out_t = q_t S_t

(``S`` is ``(d_k, d_v)``, the transpose of the papers' ``(d_v, d_k)``). Two forms here give the
same numbers: :func:`delta_rule_recurrent` (token by token) and :func:`delta_rule_chunked`
(the WY / UT form of Yang et al. 2024: inside a chunk, one triangular solve turns the
sequential corrections into matrix products). :func:`delta_rule_backward` is the recurrence
run backwards, derived by hand; :func:`l2_normalise` and its backward make the unit keys.
"""

from __future__ import annotations

import numpy as np

from ._validate import as_float_array, check_positive_int, check_result
from .decay import _check_qkv, check_gates, decay_mask

__all__ = ["delta_rule_backward", "delta_rule_chunked", "delta_rule_recurrent",
           "delta_rule_weights", "delta_step", "l2_normalise", "l2_normalise_backward"]

#: Rows per chunk of :func:`delta_rule_chunked` unless told otherwise.
CHUNK = 16
#: Added under the square root of :func:`l2_normalise`, so a zero vector gives 0, not NaN.
EPS = 1e-12


def l2_normalise(x, eps=EPS):
    """``x / sqrt(|x|^2 + eps)`` along the last axis: unit keys for the delta rule.

    Parameters
    ----------
    x : (..., d) array_like

    Returns
    -------
    y : (..., d) ndarray

    Examples
    --------
    >>> l2_normalise([[3.0, 4.0]]).round(6).tolist()
    [[0.6, 0.8]]
    """
    x = as_float_array(x, "x", min_ndim=1, layout="(..., d)")
    return x / np.sqrt((x * x).sum(axis=-1, keepdims=True) + eps)


def l2_normalise_backward(x, grad_y, eps=EPS):
    """Gradient of :func:`l2_normalise`: ``(dy - y (y . dy)) / r`` with ``r = sqrt(|x|^2 +
    eps)``, ``x`` and ``grad_y`` both ``(..., d)``."""
    x = as_float_array(x, "x", min_ndim=1, layout="(..., d)")
    dy = as_float_array(grad_y, "grad_y", min_ndim=1, layout="(..., d)")
    r = np.sqrt((x * x).sum(axis=-1, keepdims=True) + eps)
    y = x / r
    return (dy - y * (y * dy).sum(axis=-1, keepdims=True)) / r


def _inputs(q, k, v, beta, a):
    q, k, v = _check_qkv(q, k, v)
    n = q.shape[-2]
    beta = as_float_array(beta, "beta", min_ndim=1, layout="(..., n)")
    if beta.shape[-1] not in (1, n):
        raise ValueError(f"beta must have shape (..., n) with n = {n} (one step size per "
                         f"token) or (..., 1), got shape {beta.shape}")
    if not ((beta >= 0) & (beta <= 1)).all():
        raise ValueError("beta must lie in [0, 1] (the fraction of the correction written), "
                         f"got values from {float(beta.min())!r} to {float(beta.max())!r}")
    a = np.ones(1, q.dtype) if a is None else check_gates(a, n, "a")
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], beta.shape[:-1],
                               a.shape[:-1])
    q, k, v = (np.broadcast_to(x, (*lead, *x.shape[-2:])) for x in (q, k, v))
    beta = np.broadcast_to(beta.astype(q.dtype, copy=False), (*lead, n))
    a = np.broadcast_to(a.astype(q.dtype, copy=False), (*lead, n))
    return q, k, v, beta, a, lead


def delta_step(s, q_t, k_t, v_t, beta_t, a_t=1.0):
    """One token of (gated) DeltaNet: decay, correct toward ``v_t`` at ``k_t``, read.

    Parameters
    ----------
    s : (..., d_k, d_v) ndarray
        The state before the token (not modified).
    q_t, k_t : (..., d_k) ndarray
    v_t : (..., d_v) ndarray
    beta_t, a_t : (...) ndarray or float
        Step size in ``[0, 1]``; gate in ``(0, 1]`` (1: plain DeltaNet).

    Returns
    -------
    out_t : (..., d_v) ndarray
        ``q_t S_t``.
    s : (..., d_k, d_v) ndarray
        ``S_t = a_t S_{t-1} + beta_t k_t (v_t - a_t k_t^T S_{t-1})^T``.

    Examples
    --------
    >>> s = np.array([[5.0]])  # the state holds value 5 at the unit key [1]
    >>> out, s = delta_step(s, np.array([1.0]), np.array([1.0]), np.array([2.0]), 1.0)
    >>> out.tolist()  # replaced by 2, not summed to 7
    [2.0]
    """
    p = np.asarray(a_t)[..., None, None] * s  # (..., d_k, d_v): decayed state
    old = (k_t[..., None, :] @ p)[..., 0, :]  # (..., 1, d_k) @ (..., d_k, d_v) -> (..., d_v)
    u = np.asarray(beta_t)[..., None] * (v_t - old)  # (..., d_v): the correction
    s = p + k_t[..., :, None] * u[..., None, :]  # (..., d_k, 1) * (..., 1, d_v)
    out_t = (q_t[..., None, :] @ s)[..., 0, :]  # (..., d_v)
    return out_t, s


def delta_rule_recurrent(q, k, v, beta, a=None):
    """(Gated) DeltaNet one token at a time.

    Parameters
    ----------
    q, k : (..., n, d_k) array_like
        Queries and keys, used as given: the layers normalise them with
        :func:`l2_normalise` first (with ``|k| = 1`` and ``beta <= 1`` the state cannot grow).
    v : (..., n, d_v) array_like
    beta : (..., n) or (..., 1) array_like
        Step sizes in ``[0, 1]``.
    a : (..., n) or (..., 1) array_like, optional
        Gates in ``(0, 1]`` (Gated DeltaNet); None for DeltaNet.

    Returns
    -------
    out : (..., n, d_v) ndarray
    s : (..., d_k, d_v) ndarray
        The final state.

    Examples
    --------
    >>> k = [[1.0, 0.0], [1.0, 0.0]]  # the same key twice, with values 5 then 2
    >>> out, s = delta_rule_recurrent(k, k, [[5.0], [2.0]], [1.0, 1.0])
    >>> out.tolist()
    [[5.0], [2.0]]
    """
    q, k, v, beta, a, lead = _inputs(q, k, v, beta, a)
    s = np.zeros((*lead, q.shape[-1], v.shape[-1]), dtype=q.dtype)
    out = np.empty((*lead, q.shape[-2], v.shape[-1]), dtype=q.dtype)
    for t in range(q.shape[-2]):
        out[..., t, :], s = delta_step(s, q[..., t, :], k[..., t, :], v[..., t, :],
                                       beta[..., t], a[..., t])
    check_result(out, "the output q_t S_t")
    return out, s


def delta_rule_chunked(q, k, v, beta, a=None, chunk=CHUNK):
    """(Gated) DeltaNet in chunks, through the WY / UT representation.

    Parameters
    ----------
    q, k, v, beta, a : as :func:`delta_rule_recurrent`
    chunk : int, optional
        Rows per chunk; changes the cost, never the result.

    Returns
    -------
    out : (..., n, d_v) ndarray
    s : (..., d_k, d_v) ndarray

    Notes
    -----
    Write each step's correction as ``u_t = beta_t (v_t - k_t^T P_t)`` with ``P_t = a_t
    S_{t-1}``, so that ``S_t = P_t + k_t u_t^T``. Inside a chunk starting from ``S_0``, with
    ``gamma_t`` the product of the chunk's gates up to ``t`` and ``D`` the decay mask,

    .. math:: S_t = \\gamma_t S_0 + \\sum_{i \\le t} D_{ti} k_i u_i^\\top

    so the corrections satisfy the lower-triangular system
    ``(I + diag(beta) (K K^T * D)_{strict}) U = diag(beta) (V - diag(gamma) K S_0)``: its
    inverse times ``diag(beta)`` is the UT transform ``T`` of Yang et al. 2024. Then

    .. math:: O = \\mathrm{diag}(\\gamma) Q S_0 + (Q K^\\top * D) U, \\qquad
              S_C = \\gamma_C S_0 + K^\\top \\mathrm{diag}(\\gamma_C / \\gamma) U

    All matrix products but one ``C x C`` triangular solve per chunk.
    """
    q, k, v, beta, a, lead = _inputs(q, k, v, beta, a)
    chunk = check_positive_int(chunk, "chunk")
    n = q.shape[-2]
    s = np.zeros((*lead, q.shape[-1], v.shape[-1]), dtype=q.dtype)
    out = np.empty((*lead, n, v.shape[-1]), dtype=q.dtype)
    for i0 in range(0, n, chunk):
        rows = slice(i0, min(i0 + chunk, n))
        qc, kc, vc = (x[..., rows, :] for x in (q, k, v))
        bc, ac = beta[..., rows], a[..., rows]
        c = kc.shape[-2]
        dm = decay_mask(ac)  # (..., c, c)
        gamma = np.exp(np.cumsum(np.log(ac), axis=-1))  # (..., c)
        strict = np.tril(kc @ kc.swapaxes(-1, -2), -1) * dm  # (..., c, c)
        system = np.eye(c) + bc[..., :, None] * strict  # unit lower triangular
        rhs = bc[..., :, None] * (vc - gamma[..., :, None] * (kc @ s))  # (..., c, d_v)
        u = np.linalg.solve(system, rhs)  # (..., c, d_v): the corrections U
        out[..., rows, :] = (gamma[..., :, None] * (qc @ s)
                             + (np.tril(qc @ kc.swapaxes(-1, -2)) * dm) @ u)
        to_end = (gamma[..., -1:] / gamma)[..., :, None] * kc  # (..., c, d_k)
        s = gamma[..., -1, None, None] * s + to_end.swapaxes(-1, -2) @ u
    check_result(out, "the output of the chunked form")
    return out, s


def delta_rule_weights(q, k, beta, a=None):
    """The weights (gated) DeltaNet puts on each value, from an empty state: ``out = A V``.

    Parameters
    ----------
    q, k, beta, a : as :func:`delta_rule_recurrent` (``q`` and ``k`` ``(..., n, d_k)``)

    Returns
    -------
    weights : (..., n, n) ndarray
        Lower triangular; ``weights @ v`` is the output for any values ``v``.

    Notes
    -----
    The whole sequence as one chunk of :func:`delta_rule_chunked` with ``S_0 = 0``:
    ``U = T V`` with ``T = (I + diag(beta) (K K^T * D)_{strict})^{-1} diag(beta)``, so
    ``A = (Q K^T * D)_{lower} T``. Unlike softmax's, these weights can be negative: the
    correction subtracts what an earlier, similar key wrote.
    """
    q, k, _, beta, a, _ = _inputs(q, k, np.zeros((*np.shape(k)[:-1], 1)), beta, a)
    n = q.shape[-2]
    dm = decay_mask(a)  # (..., n, n)
    strict = np.tril(k @ k.swapaxes(-1, -2), -1) * dm
    system = np.eye(n) + beta[..., :, None] * strict
    t = np.linalg.solve(system, beta[..., :, None] * np.eye(n))  # (..., n, n): UT transform
    return (np.tril(q @ k.swapaxes(-1, -2)) * dm) @ t


def delta_rule_backward(q, k, v, beta, grad_out, a=None):
    """Gradients of (gated) DeltaNet, by running the recurrence backwards.

    Parameters
    ----------
    q, k, v, beta, a : as :func:`delta_rule_recurrent`
    grad_out : (..., n, d_v) array_like
        Derivative of the loss with respect to the output.

    Returns
    -------
    grad_q, grad_k : (..., n, d_k) ndarray
    grad_v : (..., n, d_v) ndarray
    grad_beta, grad_a : (..., n) ndarray
        With the broadcast leading dimensions (``grad_a`` is returned even when ``a`` is None:
        the gradient a gate of 1 would get).

    Notes
    -----
    Forward: ``P = a_t S_{t-1}``, ``w = P^T k_t``, ``u = beta_t (v_t - w)``,
    ``S_t = P + k_t u^T``, ``o_t = q_t S_t``. Backward, with ``dS`` what reaches ``S_t``:

    .. math:: dS \\mathrel{+}= q_t^\\top do_t, \\quad dq_t = S_t do_t, \\quad
              du = dS^\\top k_t, \\quad dv_t = \\beta_t du, \\quad
              d\\beta_t = du \\cdot (v_t - w),

    .. math:: dP = dS - \\beta_t k_t du^\\top, \\quad dk_t = dS\\, u - \\beta_t P\\, du, \\quad
              da_t = \\langle dP, S_{t-1} \\rangle, \\quad dS_{t-1} = a_t dP
    """
    q, k, v, beta, a, lead = _inputs(q, k, v, beta, a)
    n, d_k, d_v = q.shape[-2], q.shape[-1], v.shape[-1]
    do = as_float_array(grad_out, "grad_out", min_ndim=2, layout="(..., n, d_v)")
    if do.shape[-2:] != (n, d_v):
        raise ValueError(f"grad_out must have shape (..., {n}, {d_v}) like the output, got "
                         f"shape {do.shape}")
    states = np.empty((*lead, n + 1, d_k, d_v), dtype=q.dtype)  # S_0 = 0, ..., S_n
    states[..., 0, :, :] = 0
    for t in range(n):
        _, states[..., t + 1, :, :] = delta_step(states[..., t, :, :], q[..., t, :],
                                                 k[..., t, :], v[..., t, :], beta[..., t],
                                                 a[..., t])
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    dbeta, da = np.empty_like(beta), np.empty_like(a)
    ds = np.zeros((*lead, d_k, d_v), dtype=q.dtype)
    for t in reversed(range(n)):
        k_t, do_t, b_t = k[..., t, :], do[..., t, :], beta[..., t, None]
        prev = states[..., t, :, :]
        p = a[..., t, None, None] * prev  # (..., d_k, d_v)
        w = (k_t[..., None, :] @ p)[..., 0, :]  # (..., d_v)
        u = b_t * (v[..., t, :] - w)  # (..., d_v)
        ds = ds + q[..., t, :, None] * do_t[..., None, :]  # (..., d_k, d_v)
        dq[..., t, :] = (states[..., t + 1, :, :] @ do_t[..., :, None])[..., 0]  # (..., d_k)
        du = (ds.swapaxes(-1, -2) @ k_t[..., :, None])[..., 0]  # (..., d_v)
        dv[..., t, :] = b_t * du
        dbeta[..., t] = (du * (v[..., t, :] - w)).sum(axis=-1)
        dp = ds - b_t[..., None] * k_t[..., :, None] * du[..., None, :]  # (..., d_k, d_v)
        dk[..., t, :] = ((ds @ u[..., :, None])[..., 0]
                         - b_t * (p @ du[..., :, None])[..., 0])  # (..., d_k)
        da[..., t] = (dp * prev).sum(axis=(-1, -2))
        ds = a[..., t, None, None] * dp
    return dq, dk, dv, dbeta, da
