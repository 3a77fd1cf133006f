"""Multi-head latent attention (MLA): cache one small latent per token, not keys and values.

DeepSeek-AI 2024 ("DeepSeek-V2: a strong, economical, and efficient mixture-of-experts
language model", arXiv:2405.04434, section 2.1) compress each token's input ``x_t`` into a
latent ``c_t = x_t W_dkv`` of width ``d_c``, much smaller than ``h d_h``; every head's key
and value are linear images of it, ``k_t,i = c_t W_uk,i`` and ``v_t,i = c_t W_uv,i``. RoPE
(:func:`attn_core.positions.rope`) cannot act on keys rebuilt from ``c`` without spoiling the
trick below, so position goes into a separate small part: a rotated key ``k^R_t`` of width
``d_r`` shared by every head, and a rotated query part per head. A head's score is

    (q^C_i . k^C_j + q^R_i . k^R_j) / sqrt(d_h + d_r).

The cache keeps ``c_t`` and ``k^R_t``: ``d_c + d_r`` numbers per token and layer, against
``2 h d_h`` for multi-head attention. And the up-projections need not run at decoding:
``q^C_i . (c_j W_uk,i) = (q^C_i W_uk,i^T) . c_j``, so ``W_uk`` is folded into the query side
and the scores are taken against the cached latents directly; ``W_uv`` likewise folds into the
output projection (:func:`absorb`). :func:`mla_attention` is the explicit form,
:func:`mla_attention_absorbed` and :func:`mla_decode_step` the absorbed one; they agree.

Simplification: DeepSeek-V2 also compresses the queries through a latent of its own (to save
activation memory in training); here queries come straight from ``x``, which changes nothing
about the cache. The cache is the course's one :class:`attn_core.decoding.KVCache`, holding
the RoPE keys as its ``keys`` and the latents as its ``values``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import (
    as_float_array,
    check_float_dtype,
    check_positive_int,
    check_result,
    perturb_init,
)
from .attention import attention
from .decoding import KVCache, append_kv, empty_cache
from .multihead import merge_heads, split_heads
from .positions import rope

__all__ = ["MLAWeights", "absorb", "init_mla", "latent_kv", "mla_attention",
           "mla_attention_absorbed", "mla_decode_sequence", "mla_decode_step"]


@dataclass(frozen=True)
class MLAWeights:
    """The projections of one MLA layer (``x @ W`` convention, rows = inputs).

    w_dkv : (d_model, d_c) -- down-projection to the latent
    w_uk, w_uv : (d_c, h * d_h) -- the latent up to every head's key and value
    w_q : (d_model, h * d_h) -- the queries' content part
    w_qr : (d_model, h * d_r) -- the queries' RoPE part, per head
    w_kr : (d_model, d_r) -- the RoPE key, one for all heads
    w_o : (h * d_h, d_model) -- output projection
    h : int -- heads
    """

    w_dkv: np.ndarray
    w_uk: np.ndarray
    w_uv: np.ndarray
    w_q: np.ndarray
    w_qr: np.ndarray
    w_kr: np.ndarray
    w_o: np.ndarray
    h: int

    def __post_init__(self):
        h = check_positive_int(self.h, "h")
        names = ("w_dkv", "w_uk", "w_uv", "w_q", "w_qr", "w_kr", "w_o")
        arrays = {n: as_float_array(getattr(self, n), n) for n in names}
        for name, arr in arrays.items():
            if arr.ndim != 2:
                raise ValueError(f"{name} must be a matrix (fan_in, fan_out), got shape "
                                 f"{arr.shape}")
            object.__setattr__(self, name, arr)
        d_model, d_c = arrays["w_dkv"].shape
        d_r = arrays["w_kr"].shape[1]
        hd = arrays["w_uk"].shape[1]
        want = {"w_uk": (d_c, hd), "w_uv": (d_c, hd), "w_q": (d_model, hd),
                "w_qr": (d_model, h * d_r), "w_kr": (d_model, d_r), "w_o": (hd, d_model)}
        layout = {"w_uk": "(d_c, h * d_h)", "w_uv": "(d_c, h * d_h)",
                  "w_q": "(d_model, h * d_h)", "w_qr": "(d_model, h * d_r)",
                  "w_kr": "(d_model, d_r)", "w_o": "(h * d_h, d_model)"}
        for name, shape in want.items():
            if arrays[name].shape != shape:
                raise ValueError(
                    f"{name} must have shape {layout[name]} = {shape} (d_model = {d_model} "
                    f"and d_c = {d_c} from w_dkv, h * d_h = {hd} from w_uk, d_r = {d_r} from "
                    f"w_kr, h = {h}), got {arrays[name].shape}")
        if hd % h:
            raise ValueError(f"w_uk's {hd} columns must split into h = {h} heads of d_h each")
        if d_r % 2:
            raise ValueError(f"d_r (the columns of w_kr) must be even (RoPE turns pairs of "
                             f"features), got {d_r}")

    @property
    def d_c(self):
        return self.w_dkv.shape[1]

    @property
    def d_head(self):
        return self.w_uk.shape[1] // self.h

    @property
    def d_rope(self):
        return self.w_kr.shape[1]

    @property
    def scale(self):
        """``1 / sqrt(d_h + d_r)``: a query-key dot product has ``d_h + d_r`` terms."""
        return float(1.0 / np.sqrt(self.d_head + self.d_rope))


def init_mla(d_model, h, d_head, d_c, d_rope, rng, dtype="float64"):
    """Random MLA weights, each ``(fan_in, fan_out)`` with entries of variance ``1 / fan_in``.

    Examples
    --------
    >>> w = init_mla(16, 4, 4, 6, 2, np.random.default_rng(0))
    >>> w.w_dkv.shape, w.w_uk.shape, w.w_qr.shape, w.w_kr.shape, round(w.scale ** -2)
    ((16, 6), (6, 16), (16, 8), (16, 2), 6)
    """
    d_model, h, d_head, d_c, d_rope = (check_positive_int(v, name) for v, name in (
        (d_model, "d_model"), (h, "h"), (d_head, "d_head"), (d_c, "d_c"), (d_rope, "d_rope")))
    if d_rope % 2:
        raise ValueError(f"d_rope must be even (RoPE turns pairs of features), got {d_rope}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)), "
                        f"got {type(rng).__name__}")
    dtype = check_float_dtype(dtype)  # an integer dtype would round every weight to 0

    def draw(rows, cols):
        # perturb_init: unchanged unless CI's rounding test asks for a one-ulp nudge
        return perturb_init((rng.standard_normal((rows, cols)) / np.sqrt(rows)).astype(dtype))

    return MLAWeights(draw(d_model, d_c), draw(d_c, h * d_head), draw(d_c, h * d_head),
                      draw(d_model, h * d_head), draw(d_model, h * d_rope),
                      draw(d_model, d_rope), draw(h * d_head, d_model), h)


def _check(x, w, positions):
    if not isinstance(w, MLAWeights):
        raise TypeError(f"w must be MLAWeights (see init_mla), got {type(w).__name__}")
    x = as_float_array(x, "x", min_ndim=2, layout="(..., n, d_model)")
    if x.shape[-1] != w.w_dkv.shape[0]:
        raise ValueError(f"x must have last dimension d_model = {w.w_dkv.shape[0]} (the rows "
                         f"of w_dkv), got shape {x.shape}")
    positions = np.arange(x.shape[-2]) if positions is None else positions
    return x, positions


def latent_kv(x, w, positions=None):
    """What the cache keeps per token: the latent ``c`` and the rotated RoPE key ``k^R``.

    Parameters
    ----------
    x : (..., n, d_model) array_like
    w : MLAWeights
    positions : (n,) array_like, optional
        Token positions for RoPE, default ``0 .. n-1``.

    Returns
    -------
    c : (..., n, d_c) ndarray
        ``x W_dkv``.
    k_rope : (..., n, d_r) ndarray
        ``RoPE(x W_kr)``, one per token, shared by every head.
    """
    x, positions = _check(x, w, positions)
    c = x @ w.w_dkv  # (..., n, d_model) @ (d_model, d_c) -> (..., n, d_c)
    return c, rope(x @ w.w_kr, positions)  # (..., n, d_r)


def _queries(x, w, positions):
    q_c = split_heads(x @ w.w_q, w.h)  # (..., n, h d_h) -> (..., h, n, d_h)
    q_r = rope(split_heads(x @ w.w_qr, w.h), positions)  # (..., h, n, d_r)
    return q_c, q_r


def mla_attention(x, w, positions=None, mask=None):
    """Multi-head latent attention, explicit form: every head's keys and values rebuilt from ``c``.

    Parameters
    ----------
    x : (..., n, d_model) array_like
    w : MLAWeights
    positions : (n,) array_like, optional
        Default ``0 .. n-1``.
    mask : (n, n) bool array_like, optional
        E.g. ``causal_mask(n)``.

    Returns
    -------
    out : (..., n, d_model) ndarray
    weights : (..., h, n, n) ndarray

    Notes
    -----
    .. math:: k_{j,i} = [\\, c_j W^{UK}_i \\,;\\, k^R_j \\,], \\quad
              q_{t,i} = [\\, q^C_{t,i} \\,;\\, q^R_{t,i} \\,], \\quad
              v_{j,i} = c_j W^{UV}_i, \\qquad
              o_{t,i} = \\sum_j \\mathrm{softmax}_j\\Big(\\frac{q_{t,i} \\cdot k_{j,i}}
              {\\sqrt{d_h + d_r}}\\Big) v_{j,i}
    """
    c, k_r = latent_kv(x, w, positions)
    x, positions = _check(x, w, positions)
    q_c, q_r = _queries(x, w, positions)
    k_c = split_heads(c @ w.w_uk, w.h)  # (..., n, d_c) @ (d_c, h d_h) -> (..., h, n, d_h)
    v = split_heads(c @ w.w_uv, w.h)  # (..., h, n, d_h)
    k_r = np.broadcast_to(k_r[..., None, :, :], (*k_c.shape[:-1], w.d_rope))  # (..., h, n, d_r)
    q = np.concatenate([q_c, q_r], axis=-1)  # (..., h, n, d_h + d_r)
    k = np.concatenate([k_c, k_r], axis=-1)  # (..., h, n, d_h + d_r)
    o, weights = attention(q, k, v, mask=mask, scale=w.scale)  # (..., h, n, d_h)
    return merge_heads(o) @ w.w_o, weights  # (..., n, h d_h) @ (h d_h, d_model)


def absorb(w):
    """The two folded matrices of the absorbed form.

    Returns
    -------
    w_q_latent : (h, d_h, d_c) ndarray
        ``W_uk,i^T`` per head: ``q^C_i W_uk,i^T`` is a query against the latents.
    w_vo : (h, d_c, d_model) ndarray
        ``W_uv,i W_o,i`` per head: a head's weighted latent straight to the output.
    """
    d_c, h, d_h = w.d_c, w.h, w.d_head
    w_uk = w.w_uk.reshape(d_c, h, d_h).transpose(1, 2, 0)  # (d_c, h d_h) -> (h, d_h, d_c)
    w_uv = w.w_uv.reshape(d_c, h, d_h).transpose(1, 0, 2)  # (d_c, h d_h) -> (h, d_c, d_h)
    w_o = w.w_o.reshape(h, d_h, -1)  # (h d_h, d_model) -> (h, d_h, d_model)
    return w_uk, w_uv @ w_o  # (h, d_c, d_h) @ (h, d_h, d_model) -> (h, d_c, d_model)


def _absorbed_read(x_q, w, pos_q, c, k_r, mask, folded=None):
    """Attention of the queries of ``x_q`` over cached latents ``c`` and RoPE keys ``k_r``."""
    w_q_latent, w_vo = absorb(w) if folded is None else folded
    q_c, q_r = _queries(x_q, w, pos_q)
    q_lat = q_c @ w_q_latent  # (..., h, m, d_h) @ (h, d_h, d_c) -> (..., h, m, d_c)
    q = np.concatenate([q_lat, q_r], axis=-1)  # (..., h, m, d_c + d_r)
    k = np.concatenate([c, k_r], axis=-1)[..., None, :, :]  # (..., 1, t, d_c + d_r): all heads
    o_lat, weights = attention(q, k, c[..., None, :, :], mask=mask, scale=w.scale)
    out = (o_lat @ w_vo).sum(axis=-3)  # (..., h, m, d_c) @ (h, d_c, d_model), summed over h
    check_result(out, "the output of the absorbed form")
    return out, weights


def mla_attention_absorbed(x, w, positions=None, mask=None):
    """Multi-head latent attention with ``W_uk`` and ``W_uv`` absorbed: no key or value rebuilt.

    Same parameters and results as :func:`mla_attention`, and the same numbers up to
    rounding: each head scores its folded query against the latents ``c`` and the shared
    RoPE key, and its weighted latent goes through ``W_uv,i W_o,i``.

    Examples
    --------
    >>> from attn_core.masks import causal_mask
    >>> g = np.random.default_rng(0)
    >>> w = init_mla(16, 4, 4, 6, 2, g)
    >>> x = g.standard_normal((5, 16))
    >>> a, _ = mla_attention(x, w, mask=causal_mask(5))
    >>> b, _ = mla_attention_absorbed(x, w, mask=causal_mask(5))
    >>> bool(np.allclose(a, b, rtol=0, atol=1e-12))
    True
    """
    c, k_r = latent_kv(x, w, positions)
    x, positions = _check(x, w, positions)
    return _absorbed_read(x, w, positions, c, k_r, mask)


def mla_decode_step(x_new, cache, w, folded=None):
    """Decode one token: append its latent and RoPE key to the cache, attend in absorbed form.

    Parameters
    ----------
    x_new : (..., 1, d_model) array_like
        The new token's input; its position is ``cache.seen``.
    cache : KVCache
        ``keys`` the RoPE keys ``(..., t, d_r)``, ``values`` the latents ``(..., t, d_c)``
        (start with ``empty_cache(d_r, d_c)``).
    w : MLAWeights
    folded : tuple, optional
        :func:`absorb` ``(w)``, computed once by a caller that decodes many tokens.

    Returns
    -------
    out : (..., 1, d_model) ndarray
        Row ``t`` of ``mla_attention(x, w, mask=causal_mask(n))``.
    cache : KVCache
        One token longer: ``d_c + d_r`` numbers more per sequence.
    """
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache (start with empty_cache(d_rope, d_c)), got "
                        f"{type(cache).__name__}")
    x_new, _ = _check(x_new, w, None)
    if x_new.shape[-2] != 1:
        raise ValueError(f"x_new must hold one token, shape (..., 1, d_model), got {x_new.shape}")
    pos = [cache.seen]
    c_new, k_r_new = latent_kv(x_new, w, pos)
    cache = append_kv(cache, k_r_new, c_new)
    return _absorbed_read(x_new, w, pos, cache.values, cache.keys, None, folded)[0], cache


def mla_decode_sequence(x, w):
    """Decode ``x`` token by token (:func:`mla_decode_step`); returns ``(out, cache)``.

    Examples
    --------
    >>> from attn_core.masks import causal_mask
    >>> g = np.random.default_rng(0)
    >>> w = init_mla(8, 2, 4, 3, 2, g)
    >>> x = g.standard_normal((6, 8))
    >>> out, cache = mla_decode_sequence(x, w)
    >>> full, _ = mla_attention(x, w, mask=causal_mask(6))
    >>> bool(np.allclose(out, full, rtol=0, atol=1e-12)), cache.values.shape, cache.keys.shape
    (True, (6, 3), (6, 2))
    """
    x, _ = _check(x, w, None)
    cache = empty_cache(w.d_rope, w.d_c, batch=x.shape[:-2], dtype=np.result_type(x, w.w_dkv))
    folded = absorb(w)
    rows = []
    for t in range(x.shape[-2]):
        out, cache = mla_decode_step(x[..., t:t + 1, :], cache, w, folded)
        rows.append(out)
    return np.concatenate(rows, axis=-2), cache  # n x (..., 1, d_model) -> (..., n, d_model)
