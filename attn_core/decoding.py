"""Causal attention one token at a time, with a key/value cache.

A model that generates text does not build the full ``(n, n)`` causal weight matrix. When
token ``t`` arrives it computes that token's query, key and value, appends the key and
value to a cache holding those of tokens ``0..t-1``, and attends with the one new query
over the cached keys. The result is row ``t`` of full causal attention: the masked
entries of that row had weight exactly 0, so leaving those keys out changes nothing.

Two variants of today's models, both options of this one cache:

* grouped-query / multi-query attention (Ainslie et al. 2023; Shazeer 2019): the cache holds
  ``n_kv_heads`` key/value heads, fewer than the query heads; each is read by
  ``h / n_kv_heads`` queries (:func:`decode_step`'s ``n_kv_heads``);
* a rolling (sliding-window) cache (Beltagy et al. 2020, "Longformer: the long-document
  transformer"; Jiang et al. 2023, "Mistral 7B"): only the last ``window`` tokens are kept,
  optionally with the first ``n_sink`` tokens too (the "attention sinks" of Xiao et al. 2023,
  "Efficient streaming language models with attention sinks"); each step then equals full
  attention under ``masks.window_mask`` (or that mask or the first ``n_sink`` keys), and the
  memory stays bounded by ``n_sink + window`` tokens however long the text.

Pure maths: the cache is an immutable pair of arrays (no one can make them writeable again);
appending returns a new cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import (
    as_float_array,
    batch_shape,
    check_float_dtype,
    check_positive_int,
    check_scale,
    immutable_array,
)
from .attention import attention
from .multihead import _check_kv_heads

__all__ = ["KVCache", "append_kv", "decode_sequence", "decode_step", "empty_cache"]


@dataclass(frozen=True)
class KVCache:
    """The keys and values of every token decoded so far.

    keys : (..., t, d_k) ndarray -- one row per cached token
    values : (..., t, d_v) ndarray

    window : int or None -- a rolling cache keeps only the last ``window`` tokens ...
    n_sink : int -- ... and the first ``n_sink`` tokens (0 unless ``window`` is set)
    seen : int -- tokens appended so far (``length`` plus those evicted); the next token's
        position

    Both arrays are read-only and stay so: they are views of an immutable ``bytes`` buffer
    the cache owns (``cache.keys[0, 0] = 1.0`` raises ValueError, and so does
    ``cache.keys.flags.writeable = True``). The arrays passed in are copied once (a cache's
    own arrays are not copied again), never frozen: the caller may go on changing them.
    """

    keys: np.ndarray
    values: np.ndarray
    window: int | None = None
    n_sink: int = 0
    seen: int | None = None

    def __post_init__(self):
        for name in ("keys", "values"):
            object.__setattr__(self, name, immutable_array(getattr(self, name)))
        if self.seen is None:
            object.__setattr__(self, "seen", self.keys.shape[-2])

    @property
    def length(self):
        """Number of cached tokens ``t``."""
        return self.keys.shape[-2]

    @property
    def nbytes(self):
        """Bytes the cache holds: keys plus values."""
        return self.keys.nbytes + self.values.nbytes


def empty_cache(d_k, d_v=None, batch=(), dtype="float64", window=None, n_sink=0):
    """A cache with no tokens yet.

    Parameters
    ----------
    d_k : int
        Width of each key (and query).
    d_v : int, optional
        Width of each value, default ``d_k``.
    batch : tuple of int, optional
        Leading dimensions, e.g. ``(b, h)`` for a batch of ``b`` sequences and ``h`` heads.
    dtype : floating numpy dtype, optional
    window : int >= 1, optional
        Make it a rolling cache: it keeps the last ``window`` tokens (a token attends to
        itself and the ``window - 1`` before it, as under ``masks.window_mask(n, window)``).
        Default None: keep every token.
    n_sink : int >= 0, optional
        With ``window``: also keep the first ``n_sink`` tokens for good (attention sinks).

    Returns
    -------
    cache : KVCache with keys ``(*batch, 0, d_k)`` and values ``(*batch, 0, d_v)``

    Examples
    --------
    >>> c = empty_cache(4, batch=(2, 3))
    >>> c.keys.shape, c.values.shape, c.length
    ((2, 3, 0, 4), (2, 3, 0, 4), 0)
    """
    d_k = check_positive_int(d_k, "d_k")
    d_v = d_k if d_v is None else check_positive_int(d_v, "d_v")
    if not isinstance(batch, tuple):
        raise TypeError(f"batch must be a tuple of ints such as (2, 4), got {batch!r}")
    batch = tuple(check_positive_int(b, "each entry of batch") for b in batch)
    dt = check_float_dtype(dtype)
    if window is not None:
        window = check_positive_int(window, "window")
    n_sink = check_positive_int(n_sink, "n_sink", minimum=0)
    if n_sink and window is None:
        raise ValueError(f"n_sink = {n_sink} needs a window: sinks are the tokens a rolling "
                         "cache keeps besides its last `window`; pass window=...")
    return KVCache(np.empty((*batch, 0, d_k), dtype=dt), np.empty((*batch, 0, d_v), dtype=dt),
                   window=window, n_sink=n_sink)


def _evict(x, n_sink, window):
    """Rows ``0..n_sink-1`` and the last ``window`` rows of ``x`` (..., t, d): a copy."""
    t = x.shape[-2]
    if t <= n_sink + window:
        return x
    # (..., n_sink, d) and (..., window, d) -> (..., n_sink + window, d)
    return np.concatenate([x[..., :n_sink, :], x[..., t - window:, :]], axis=-2)


def _check_cache(cache):
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache (start with empty_cache(d_k)), "
                        f"got {type(cache).__name__}")
    return cache


def append_kv(cache, k_new, v_new):
    """A new cache with ``m`` more tokens' keys and values at the end.

    Parameters
    ----------
    cache : KVCache
        Keys ``(..., t, d_k)`` and values ``(..., t, d_v)``.
    k_new : (..., m, d_k) array_like
        Keys of the new tokens (``m = 1`` when generating).
    v_new : (..., m, d_v) array_like
        Their values.

    Returns
    -------
    cache : KVCache
        Keys ``(..., t + m, d_k)`` and values ``(..., t + m, d_v)``; ``cache`` itself is
        not changed. A rolling cache (``cache.window`` set) then drops the tokens that are
        neither among its first ``n_sink`` nor its last ``window``: it never holds more than
        ``n_sink + window`` (the arrays kept are copies, so the dropped rows are freed).

    Notes
    -----
    .. math:: K_{0..t+m-1} = \\begin{bmatrix} K_{0..t-1} \\\\ K_{new} \\end{bmatrix}, \\qquad
              V_{0..t+m-1} = \\begin{bmatrix} V_{0..t-1} \\\\ V_{new} \\end{bmatrix}

    Examples
    --------
    >>> c = append_kv(empty_cache(2), [[1.0, 0.0]], [[5.0, 6.0]])
    >>> c = append_kv(c, [[0.0, 1.0]], [[7.0, 8.0]])
    >>> c.length, c.values.tolist()
    (2, [[5.0, 6.0], [7.0, 8.0]])
    """
    cache = _check_cache(cache)
    k_new = as_float_array(k_new, "k_new", min_ndim=2, layout="(..., m, d_k)")
    v_new = as_float_array(v_new, "v_new", min_ndim=2, layout="(..., m, d_v)")
    if k_new.shape[-2] != v_new.shape[-2]:
        raise ValueError("k_new and v_new must hold the same number of new tokens m, got "
                         f"k_new of shape {k_new.shape} and v_new of shape {v_new.shape}")
    for new, old, name in ((k_new, cache.keys, "k_new"), (v_new, cache.values, "v_new")):
        if new.shape[-1] != old.shape[-1]:
            raise ValueError(f"{name} must have last dimension {old.shape[-1]} like the cached "
                             f"rows of shape {old.shape}, got shape {new.shape}")
        if new.shape[:-2] != old.shape[:-2]:
            raise ValueError(f"{name} must have the cache's leading dimensions "
                             f"{old.shape[:-2]}, got shape {new.shape}")
    dtype = np.result_type(cache.keys, k_new)
    k_new, v_new = k_new.astype(dtype, copy=False), v_new.astype(dtype, copy=False)
    keys = np.concatenate([cache.keys, k_new], axis=-2)  # (..., t+m, d_k)
    values = np.concatenate([cache.values, v_new], axis=-2)  # (..., t+m, d_v)
    if cache.window is not None:
        keys, values = (_evict(x, cache.n_sink, cache.window) for x in (keys, values))
    return KVCache(keys, values, window=cache.window, n_sink=cache.n_sink,
                   seen=cache.seen + k_new.shape[-2])


def decode_step(q_new, cache, scale=None, n_kv_heads=None):
    """Attention of the newest ``m`` tokens' queries over every cached key.

    Parameters
    ----------
    q_new : (..., m, d_k) array_like
        Queries of the tokens just appended (``m = 1`` when generating): they are the
        last ``m`` tokens of ``cache``, so append their keys and values first.
    cache : KVCache
        Keys ``(..., t, d_k)`` and values ``(..., t, d_v)`` of tokens ``0..t-1``, ``t >= m``.
    scale : float, optional
        Score scale, default ``1 / sqrt(d_k)``.
    n_kv_heads : int, optional
        Grouped-query attention: ``q_new`` is ``(..., h, m, d_k)`` and the cache holds
        ``(..., n_kv_heads, t, d)``, ``n_kv_heads`` dividing ``h``; query head ``i`` reads
        cached head ``i // (h / n_kv_heads)``. Default None: one cached head per query head
        (or no head axis at all).

    Returns
    -------
    out : (..., m, d_v) ndarray
        Rows ``t-m .. t-1`` of causal attention over the whole sequence (with a rolling
        cache, of attention under its window: ``m`` must then be 1).
    weights : (..., m, t) ndarray
        Their weights; new token ``i`` (at position ``t - m + i``) gives weight 0 to the
        new tokens after it.

    Notes
    -----
    For the newest token at position ``t - 1``:

    .. math:: o_{t-1} = \\mathrm{softmax}\\!\\left(\\frac{q_{t-1} K_{0..t-1}^\\top}{\\sqrt{d_k}}
              \\right) V_{0..t-1}

    It costs ``O(t d)`` (one query against ``t`` keys), where recomputing the full causal
    matrix would cost ``O(t^2 d)``.

    Examples
    --------
    >>> c = append_kv(empty_cache(2), [[1.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [3.0, 4.0]])
    >>> out, w = decode_step([[0.0, 1.0]], c, scale=np.log(3.0))
    >>> w
    array([[0.25, 0.75]])
    >>> out
    array([[2.5, 3.5]])
    """
    cache = _check_cache(cache)
    q_new = as_float_array(q_new, "q_new", min_ndim=2, layout="(..., m, d_k)")
    m, t = q_new.shape[-2], cache.length
    if q_new.shape[-1] != cache.keys.shape[-1]:
        raise ValueError(f"q_new must have last dimension d_k = {cache.keys.shape[-1]} like the "
                         f"cached keys of shape {cache.keys.shape}, got shape {q_new.shape}")
    if m > 1 and cache.window is not None and cache.seen > cache.length:
        raise ValueError(f"q_new holds {m} queries but the rolling cache (window = "
                         f"{cache.window}) has evicted keys the earlier ones need: append and "
                         "decode one token at a time (m = 1)")
    if m > t:
        raise ValueError(f"q_new holds {m} queries but the cache only {t} tokens: append the "
                         "new tokens' keys and values (append_kv) before decode_step")
    scale = check_scale(scale, q_new.shape[-1])
    # new query i sits at position t - m + i and may see keys 0 .. t - m + i
    mask = np.arange(t)[None, :] <= (t - m + np.arange(m))[:, None]  # (m, 1) vs (1, t) -> (m, t)
    if n_kv_heads is None:
        batch_shape({"q_new": q_new.shape, "cache.keys": cache.keys.shape})
        return attention(q_new, cache.keys, cache.values, mask=None if m == 1 else mask,
                         scale=scale)
    return _grouped_step(q_new, cache, scale, n_kv_heads, None if m == 1 else mask)


def _grouped_step(q_new, cache, scale, n_kv_heads, mask):
    """:func:`decode_step` with ``h / n_kv_heads`` query heads per cached head: the group's
    queries are stacked as rows against the one cached head, which is never copied."""
    if q_new.ndim < 3 or cache.keys.ndim < 3:
        raise ValueError(f"with n_kv_heads, q_new must be (..., h, m, d_k) and the cache "
                         f"(..., n_kv_heads, t, d), got q_new of shape {q_new.shape} and "
                         f"cache keys of shape {cache.keys.shape}")
    *lead, h, m, d_k = q_new.shape
    n_kv = _check_kv_heads(h, n_kv_heads)
    if cache.keys.shape[-3] != n_kv:
        raise ValueError(f"the cache must hold n_kv_heads = {n_kv} heads on axis -3, got "
                         f"cache keys of shape {cache.keys.shape}")
    batch_shape({"q_new": (*lead, n_kv, m, d_k), "cache.keys": cache.keys.shape})
    g = h // n_kv
    q = q_new.reshape(*lead, n_kv, g * m, d_k)  # (..., h, m, d_k) -> (..., n_kv, g m, d_k)
    if mask is not None:
        mask = np.tile(mask, (g, 1))  # (m, t) -> (g m, t): the same rows for each query head
    out, w = attention(q, cache.keys, cache.values, mask=mask, scale=scale)  # (..., n_kv, g m, .)
    return (out.reshape(*out.shape[:-3], h, m, out.shape[-1]),  # (..., h, m, d_v)
            w.reshape(*w.shape[:-3], h, m, w.shape[-1]))  # (..., h, m, t)


def decode_sequence(q, k, v, scale=None, window=None, n_sink=0, n_kv_heads=None):
    """Causal attention computed token by token with a growing (or rolling) cache.

    Parameters
    ----------
    q, k : (..., n, d_k) array_like
    v : (..., n, d_v) array_like
    scale : float, optional
    window, n_sink : int, optional
        A rolling cache (see :func:`empty_cache`); default: keep every token.
    n_kv_heads : int, optional
        Grouped-query attention: ``q`` is ``(..., h, n, d_k)``, ``k`` and ``v`` are
        ``(..., n_kv_heads, n, d)`` (see :func:`decode_step`).

    Returns
    -------
    out : (..., n, d_v) ndarray
        Row ``t`` is :func:`decode_step` of token ``t`` after appending ``k_t, v_t``; equal
        (to rounding) to ``attention(q, k, v, mask=causal_mask(n))[0]``, or with a window to
        the same under ``window_mask(n, window)`` (or'ed with the first ``n_sink`` keys).
    cache : KVCache
        The final cache, holding all ``n`` keys and values.

    Examples
    --------
    >>> g = np.random.default_rng(0)
    >>> q, k, v = g.standard_normal((3, 5, 4))
    >>> out, cache = decode_sequence(q, k, v)
    >>> out.shape, cache.length
    ((5, 4), 5)
    """
    q = as_float_array(q, "q", min_ndim=2)
    k = as_float_array(k, "k", min_ndim=2)
    v = as_float_array(v, "v", min_ndim=2)
    if not q.shape[-2] == k.shape[-2] == v.shape[-2]:
        raise ValueError("q, k and v must have the same number of tokens n to decode, got "
                         f"shapes {q.shape}, {k.shape} and {v.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension d_k, got shapes "
                         f"{q.shape} and {k.shape}")
    if n_kv_heads is None:
        lead = batch_shape({"q": q.shape, "k": k.shape, "v": v.shape})
    else:  # the cache's batch is the key/value heads'; the query heads stay in q
        lead = batch_shape({"k": k.shape, "v": v.shape})
    k = np.broadcast_to(k, (*lead, *k.shape[-2:]))  # (..., n, d_k), a view
    v = np.broadcast_to(v, (*lead, *v.shape[-2:]))  # (..., n, d_v), a view
    cache = empty_cache(k.shape[-1], v.shape[-1], batch=lead, dtype=np.result_type(k, v),
                        window=window, n_sink=n_sink)
    rows = []
    for t in range(q.shape[-2]):
        cache = append_kv(cache, k[..., t:t + 1, :], v[..., t:t + 1, :])
        out, _ = decode_step(q[..., t:t + 1, :], cache, scale, n_kv_heads)  # (..., 1, d_v)
        rows.append(out)
    return np.concatenate(rows, axis=-2), cache  # n x (..., 1, d_v) -> (..., n, d_v)
