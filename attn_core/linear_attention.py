"""Linear attention: softmax replaced by a feature map, so the n x n matrix is never needed.

Katharopoulos et al. 2020 ("Transformers are RNNs: fast autoregressive transformers with
linear attention", ICML 2020) write attention's weight of key ``j`` for query ``i`` as a
similarity ``sim(q_i, k_j)`` divided by the row's total. With ``sim = exp(q . k / sqrt d)``
that is the softmax; with ``sim = phi(q) . phi(k)`` for a feature map ``phi`` with positive
values (they take ``phi(x) = elu(x) + 1``) the sums can be regrouped:

    out_i = sum_j (phi(q_i) . phi(k_j)) v_j / sum_j phi(q_i) . phi(k_j)
          = phi(q_i) (sum_j phi(k_j)^T v_j) / phi(q_i) (sum_j phi(k_j))

The bracketed sums, a ``(d_k, d_v)`` matrix ``S`` and a ``(d_k,)`` vector ``z``, do not depend
on ``i``: computed once, they serve every query, so the cost grows like ``n`` instead of
``n^2``. Under a causal mask the sums run over ``j <= i``: ``S`` and ``z`` are updated token by
token, a recurrent network whose state has a fixed size however long the text.

Three forms here give the same numbers: :func:`linear_attention_quadratic` (the n x n matrix,
to look at), :func:`linear_attention` (the regrouped sums; causal in chunks) and
:func:`linear_attention_recurrent` (one token at a time through :func:`linear_decode_step`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import (
    as_float_array,
    batch_shape,
    check_bool,
    check_float_dtype,
    check_mask,
    check_positive_int,
    check_qkv,
    check_result,
    checked_later,
    immutable_array,
)

__all__ = ["LinearState", "elu_feature_map", "empty_linear_state", "linear_attention",
           "linear_attention_quadratic", "linear_attention_recurrent", "linear_decode_step",
           "linear_weights_backward"]

#: Query rows per chunk of the causal linear form: inside a chunk the small quadratic form,
#: across chunks the running state (the "chunkwise" form of later linear-attention models).
CHUNK = 64


def elu_feature_map(x):
    """The feature map of Katharopoulos et al. 2020: ``elu(x) + 1``, positive everywhere.

    Parameters
    ----------
    x : (..., n, d) array_like

    Returns
    -------
    phi : (..., n, d) ndarray
        ``x + 1`` where ``x > 0``, ``exp(x)`` elsewhere: always > 0, so every similarity
        ``phi(q) . phi(k)`` is positive and a row's total never 0.

    Examples
    --------
    >>> elu_feature_map([[-1.0, 0.0, 2.0]]).round(4)
    array([[0.3679, 1.    , 3.    ]])
    """
    x = as_float_array(x, "x", min_ndim=2)
    return np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))


def _check_causal(causal, q, k):
    causal = check_bool(causal, "causal")
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal=True needs as many queries as keys (self-attention), got "
                         f"q of shape {q.shape} and k of shape {k.shape}")
    return causal


def linear_attention_quadratic(q, k, v, causal=False, mask=None):
    """Linear attention written with its ``(n_q, n_k)`` matrix of similarities.

    Parameters
    ----------
    q : (..., n_q, d_k) array_like
    k : (..., n_k, d_k) array_like
    v : (..., n_k, d_v) array_like
    causal : bool, optional
        If True, query ``i`` sees keys ``j <= i`` only (``n_q == n_k``).
    mask : (..., n_q, n_k) bool array_like, optional
        True where a query may attend (and'ed with ``causal``); a masked key gets similarity
        0. A row with no allowed key gets zero weights and a zero output.

    Returns
    -------
    out : (..., n_q, d_v) ndarray
    weights : (..., n_q, n_k) ndarray
        ``phi(q_i) . phi(k_j)`` divided by its row's total: positive where allowed, each row
        summing to 1, as the softmax's weights do.

    Notes
    -----
    .. math:: A_{ij} = \\frac{\\phi(q_i)^\\top \\phi(k_j)}{\\sum_{j'} \\phi(q_i)^\\top
              \\phi(k_{j'})}, \\qquad \\mathrm{out} = A V

    Examples
    --------
    >>> out, w = linear_attention_quadratic(np.zeros((2, 1)), np.zeros((2, 1)), [[1.0], [3.0]])
    >>> w.tolist(), out.tolist()  # phi(0) = 1: every similarity equal, an even average
    ([[0.5, 0.5], [0.5, 0.5]], [[2.0], [2.0]])
    """
    q, k, v = check_qkv(q, k, v)
    causal = _check_causal(causal, q, k)
    allowed = True
    if mask is not None:
        allowed = check_mask(mask, (*batch_shape({"q": q.shape, "k": k.shape}), q.shape[-2],
                                    k.shape[-2]))
    if causal:
        allowed = np.tri(q.shape[-2], dtype=bool) & allowed  # later keys: similarity 0
    with checked_later():  # an overflow is reported by check_result, not by a warning
        weights = _linear_weights(q, k, allowed)
        out = weights @ v  # (..., n_q, n_k) @ (..., n_k, d_v) -> (..., n_q, d_v)
    check_result(weights, "the weights phi(q) . phi(k) / their row's total")
    check_result(out, "the output (weights @ v)")
    return out, weights


def _linear_weights(q, k, allowed=True):
    """Unchecked weights ``phi(q) . phi(k)`` (0 where not ``allowed``), normalised per row (a
    row with nothing allowed stays 0): shared with multi-head attention's ``kind="linear"``."""
    sim = elu_feature_map(q) @ elu_feature_map(k).swapaxes(-1, -2)  # (..., n_q, n_k)
    if allowed is not True:
        sim = np.where(allowed, sim, 0)
    total = sim.sum(axis=-1, keepdims=True)  # (..., n_q, 1), > 0 where any key is allowed
    return np.divide(sim, total, out=np.zeros_like(sim), where=total > 0)


def linear_attention(q, k, v, causal=False, chunk=CHUNK):
    """Linear attention in its linear form: ``phi(Q) (phi(K)^T V)``, normalised per row.

    Parameters
    ----------
    q : (..., n_q, d_k) array_like
    k : (..., n_k, d_k) array_like
    v : (..., n_k, d_v) array_like
    causal : bool, optional
        If True, query ``i`` sees keys ``j <= i`` only: the sums are accumulated chunk by
        chunk (a small quadratic form inside each chunk of ``chunk`` rows, the running state
        across chunks).
    chunk : int, optional
        Rows per chunk of the causal form; changes the speed, never the result.

    Returns
    -------
    out : (..., n_q, d_v) ndarray
        Equal to :func:`linear_attention_quadratic`'s output up to rounding. No weights: the
        point of this form is never to build them.

    Notes
    -----
    .. math:: S = \\phi(K)^\\top V, \\quad z = \\phi(K)^\\top \\mathbf{1}, \\qquad
              \\mathrm{out}_i = \\frac{\\phi(q_i)^\\top S}{\\phi(q_i)^\\top z}

    ``S`` costs ``n_k d_k d_v`` multiply-adds and the read-out ``n_q d_k d_v``: linear in
    ``n``, against ``n_q n_k (d_k + d_v)`` for the matrix.

    Examples
    --------
    >>> g = np.random.default_rng(0)
    >>> q, k, v = g.standard_normal((3, 6, 4))
    >>> a = linear_attention(q, k, v, causal=True, chunk=4)
    >>> b, _ = linear_attention_quadratic(q, k, v, causal=True)
    >>> bool(np.allclose(a, b, rtol=0, atol=1e-12))
    True
    """
    q, k, v = check_qkv(q, k, v)
    causal = _check_causal(causal, q, k)
    chunk = check_positive_int(chunk, "chunk")
    with checked_later():  # an overflow is reported by check_result, not by a warning
        phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)
        if not causal:
            s = phi_k.swapaxes(-1, -2) @ v  # (..., d_k, n_k) @ (..., n_k, d_v) -> (..., d_k, d_v)
            z = phi_k.sum(axis=-2)  # (..., d_k)
            out = (phi_q @ s) / (phi_q @ z[..., None])  # (..., n_q, d_v) / (..., n_q, 1)
        else:
            out = _causal_chunks(phi_q, phi_k, v, chunk)
    check_result(out, "the output phi(q) S / phi(q) z")
    return out


def _causal_chunks(phi_q, phi_k, v, chunk):
    """Causal linear attention, ``chunk`` rows at a time: within a chunk its own masked
    similarities, from earlier chunks the state ``S``, ``z`` accumulated so far."""
    lead = np.broadcast_shapes(phi_q.shape[:-2], phi_k.shape[:-2], v.shape[:-2])
    d_k, d_v, n = phi_q.shape[-1], v.shape[-1], phi_q.shape[-2]
    s = np.zeros((*lead, d_k, d_v), dtype=v.dtype)
    z = np.zeros((*lead, d_k), dtype=v.dtype)
    out = np.empty((*lead, n, d_v), dtype=v.dtype)
    for i0 in range(0, n, chunk):
        rows = slice(i0, min(i0 + chunk, n))
        fq, fk, vc = phi_q[..., rows, :], phi_k[..., rows, :], v[..., rows, :]
        sim = np.tril(fq @ fk.swapaxes(-1, -2))  # (..., c, c): keys of this chunk, j <= i
        num = fq @ s + sim @ vc  # (..., c, d_v): earlier chunks + this one
        den = fq @ z[..., None] + sim.sum(axis=-1, keepdims=True)  # (..., c, 1)
        out[..., rows, :] = num / den
        s = s + fk.swapaxes(-1, -2) @ vc  # (..., d_k, c) @ (..., c, d_v) -> (..., d_k, d_v)
        z = z + fk.sum(axis=-2)  # (..., d_k)
    return out


@dataclass(frozen=True)
class LinearState:
    """The whole memory of causal linear attention after ``seen`` tokens.

    s : (..., d_k, d_v) ndarray -- ``sum_j phi(k_j)^T v_j`` over the tokens seen
    z : (..., d_k) ndarray -- ``sum_j phi(k_j)``, the normaliser
    seen : int -- tokens folded in so far

    Its size does not grow with ``seen``: where a KV cache keeps every key and value, this
    keeps two sums. Both arrays are read-only and stay so, as a KV cache's do
    (:func:`attn_core._validate.immutable_array`: ``state.s.flags.writeable = True`` raises
    ValueError); the arrays passed in are copied once, never frozen.
    """

    s: np.ndarray
    z: np.ndarray
    seen: int = 0

    def __post_init__(self):
        for name in ("s", "z"):
            object.__setattr__(self, name, immutable_array(getattr(self, name)))

    @property
    def nbytes(self):
        """Bytes of the state: ``S`` plus ``z``, the same after 1 token or a million."""
        return self.s.nbytes + self.z.nbytes


def empty_linear_state(d_k, d_v=None, batch=(), dtype="float64"):
    """The state before any token: ``S = 0`` of shape ``(*batch, d_k, d_v)``, ``z = 0``.

    Examples
    --------
    >>> st = empty_linear_state(4, 3, batch=(2,))
    >>> st.s.shape, st.z.shape, st.nbytes
    ((2, 4, 3), (2, 4), 256)
    """
    d_k = check_positive_int(d_k, "d_k")
    d_v = d_k if d_v is None else check_positive_int(d_v, "d_v")
    if not isinstance(batch, tuple):
        raise TypeError(f"batch must be a tuple of ints such as (2, 4), got {batch!r}")
    batch = tuple(check_positive_int(b, "each entry of batch") for b in batch)
    dt = check_float_dtype(dtype)
    return LinearState(np.zeros((*batch, d_k, d_v), dt), np.zeros((*batch, d_k), dt), 0)


def linear_decode_step(state, q_t, k_t, v_t):
    """Fold one token into the state and read its output: causal linear attention as an RNN.

    Parameters
    ----------
    state : LinearState
        ``S`` of shape ``(..., d_k, d_v)`` and ``z`` of shape ``(..., d_k)``.
    q_t, k_t : (..., d_k) array_like
        The new token's query and key.
    v_t : (..., d_v) array_like
        Its value.

    Returns
    -------
    out_t : (..., d_v) ndarray
        Row ``t`` of causal linear attention over the tokens seen, this one included.
    state : LinearState
        The new state (``state`` itself is unchanged).

    Notes
    -----
    .. math:: S_t = S_{t-1} + \\phi(k_t) v_t^\\top, \\quad z_t = z_{t-1} + \\phi(k_t),
              \\qquad \\mathrm{out}_t = \\frac{\\phi(q_t)^\\top S_t}{\\phi(q_t)^\\top z_t}

    Examples
    --------
    >>> st = empty_linear_state(1)
    >>> out, st = linear_decode_step(st, [0.0], [0.0], [1.0])
    >>> out, st = linear_decode_step(st, [0.0], [0.0], [3.0])
    >>> out.tolist(), st.seen
    ([2.0], 2)
    """
    if not isinstance(state, LinearState):
        raise TypeError(f"state must be a LinearState (start with empty_linear_state(d_k)), "
                        f"got {type(state).__name__}")
    q_t = as_float_array(q_t, "q_t", min_ndim=1, layout="(..., d_k)")
    k_t = as_float_array(k_t, "k_t", min_ndim=1, layout="(..., d_k)")
    v_t = as_float_array(v_t, "v_t", min_ndim=1, layout="(..., d_v)")
    d_k, d_v = state.s.shape[-2:]
    for x, name, d in ((q_t, "q_t", d_k), (k_t, "k_t", d_k), (v_t, "v_t", d_v)):
        if x.shape[-1] != d:
            raise ValueError(f"{name} must have last dimension {d} like the state's S of shape "
                             f"{state.s.shape}, got shape {x.shape}")
    with checked_later():  # an overflow is reported by check_result, not by a warning
        phi_q = elu_feature_map(q_t[..., None, :])[..., 0, :]  # (..., d_k)
        phi_k = elu_feature_map(k_t[..., None, :])[..., 0, :]  # (..., d_k)
        s = state.s + phi_k[..., :, None] * v_t[..., None, :]  # (..., d_k, 1) * (..., 1, d_v)
        z = state.z + phi_k  # (..., d_k)
        num = (phi_q[..., None, :] @ s)[..., 0, :]  # (..., 1, d_k) @ (..., d_k, d_v)
        out = num / (phi_q * z).sum(axis=-1, keepdims=True)  # (..., d_v) / (..., 1)
    check_result(out, "the output phi(q) S / phi(q) z")
    return out, LinearState(s, z, state.seen + 1)


def linear_attention_recurrent(q, k, v):
    """Causal linear attention one token at a time, through :func:`linear_decode_step`.

    Parameters
    ----------
    q, k : (..., n, d_k) array_like
    v : (..., n, d_v) array_like

    Returns
    -------
    out : (..., n, d_v) ndarray
        Equal to ``linear_attention(q, k, v, causal=True)`` up to rounding.
    state : LinearState
        The state after the last token: ``(..., d_k, d_v)`` and ``(..., d_k)`` whatever ``n``.

    Examples
    --------
    >>> g = np.random.default_rng(1)
    >>> q, k, v = g.standard_normal((3, 5, 2))
    >>> out, st = linear_attention_recurrent(q, k, v)
    >>> bool(np.allclose(out, linear_attention(q, k, v, causal=True), rtol=0, atol=1e-12))
    True
    """
    q, k, v = check_qkv(q, k, v)
    _check_causal(True, q, k)
    lead = batch_shape({"q": q.shape, "k": k.shape, "v": v.shape})
    state = empty_linear_state(q.shape[-1], v.shape[-1], batch=lead, dtype=q.dtype)
    rows = []
    for t in range(q.shape[-2]):
        out_t, state = linear_decode_step(state, q[..., t, :], k[..., t, :], v[..., t, :])
        rows.append(np.broadcast_to(out_t, (*lead, v.shape[-1])))
    return np.stack(rows, axis=-2), state  # n x (..., d_v) -> (..., n, d_v)


def linear_weights_backward(q, k, weights, grad_weights):
    """Gradients of :func:`linear_attention_quadratic`'s weights with respect to ``q`` and ``k``.

    Parameters
    ----------
    q : (..., n_q, d_k) array_like
    k : (..., n_k, d_k) array_like
    weights : (..., n_q, n_k) array_like
        The forward's weights (0 where masked).
    grad_weights : (..., n_q, n_k) array_like
        Derivative of the loss with respect to them (``grad_out @ v^T`` for ``out = A v``).

    Returns
    -------
    grad_q : (..., n_q, d_k) ndarray
    grad_k : (..., n_k, d_k) ndarray

    Notes
    -----
    With ``P = phi(Q) phi(K)^T`` (masked) and ``A = P / r``, ``r`` the row sums:

    .. math:: dP_{ij} = \\frac{dA_{ij} - \\sum_{j'} dA_{ij'} A_{ij'}}{r_i} [\\text{allowed}],
              \\quad d\\phi(Q) = dP\\, \\phi(K), \\quad d\\phi(K) = dP^\\top \\phi(Q)

    and ``phi'(x)`` is 1 where ``x > 0``, ``exp(x)`` elsewhere. ``r_i`` is recovered from
    the weights: ``r_i = phi(q_i) . phi(k_j) / A_ij`` for any allowed ``j``, here computed
    afresh as the row sum of ``P``.
    """
    q = as_float_array(q, "q", min_ndim=2)
    k = as_float_array(k, "k", min_ndim=2)
    a = as_float_array(weights, "weights", min_ndim=2, layout="(..., n_q, n_k)")
    da = as_float_array(grad_weights, "grad_weights", min_ndim=2, layout="(..., n_q, n_k)")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension d_k, got q of shape "
                         f"{q.shape} and k of shape {k.shape}")
    lead = batch_shape({"q": q.shape, "k": k.shape})
    want = (q.shape[-2], k.shape[-2])
    for arr, name in ((a, "weights"), (da, "grad_weights")):
        if arr.shape[-2:] != want or batch_shape({"q": q.shape, name: arr.shape}) != lead:
            raise ValueError(f"{name} must have shape (..., n_q, n_k) = (..., {want[0]}, "
                             f"{want[1]}) with batch dimensions that q and k broadcast to, "
                             f"got {arr.shape} for q of shape {q.shape} and k of shape "
                             f"{k.shape}")
    if a.shape != da.shape:
        raise ValueError(f"weights and grad_weights must have the same shape (one derivative "
                         f"per weight), got {a.shape} and {da.shape}")
    with checked_later():  # an overflow is reported by check_result, not by a warning
        fq, fk = elu_feature_map(q), elu_feature_map(k)
        allowed = a > 0  # every allowed similarity is positive (phi > 0)
        p = np.where(allowed, fq @ fk.swapaxes(-1, -2), 0)  # (..., n_q, n_k)
        r = p.sum(axis=-1, keepdims=True)  # (..., n_q, 1)
        dp = np.where(allowed, (da - (da * a).sum(axis=-1, keepdims=True)) / r, 0)
        d_fq = dp @ fk  # (..., n_q, n_k) @ (..., n_k, d_k) -> (..., n_q, d_k)
        d_fk = dp.swapaxes(-1, -2) @ fq  # (..., n_k, n_q) @ (..., n_q, d_k) -> (..., n_k, d_k)
        slope_q, slope_k = np.where(q > 0, 1, fq), np.where(k > 0, 1, fk)  # phi'(x)
        grad_q, grad_k = d_fq * slope_q, _sum_to(d_fk * slope_k, k.shape)
    check_result(grad_q, "grad_q")
    check_result(grad_k, "grad_k")
    return grad_q, grad_k


def _sum_to(x, shape):
    """``x`` summed over the leading axes it gained by broadcasting, back to ``shape``."""
    while x.ndim > len(shape):
        x = x.sum(axis=0)
    return x.sum(axis=tuple(i for i, s in enumerate(shape) if s == 1 and x.shape[i] != 1),
                 keepdims=True) if x.shape != tuple(shape) else x
