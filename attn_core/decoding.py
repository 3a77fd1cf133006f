"""Causal attention one token at a time, with a key/value cache.

A model that generates text does not build the full ``(n, n)`` causal weight matrix. When
token ``t`` arrives it computes that token's query, key and value, appends the key and
value to a cache holding those of tokens ``0..t-1``, and attends with the one new query
over the cached keys. The result is row ``t`` of full causal attention: the masked
entries of that row had weight exactly 0, so leaving those keys out changes nothing.

Pure maths: the cache is an immutable pair of read-only arrays; appending returns a new cache.
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
)
from .attention import attention

__all__ = ["KVCache", "append_kv", "decode_sequence", "decode_step", "empty_cache"]


@dataclass(frozen=True)
class KVCache:
    """The keys and values of every token decoded so far.

    keys : (..., t, d_k) ndarray -- one row per cached token
    values : (..., t, d_v) ndarray

    Both are read-only views that the cache owns (``cache.keys[0, 0] = 1.0`` raises
    ValueError); the arrays passed in are not frozen, so build a cache with
    :func:`empty_cache` and :func:`append_kv`, which hand it arrays no one else holds.
    """

    keys: np.ndarray
    values: np.ndarray

    def __post_init__(self):
        for name in ("keys", "values"):
            object.__setattr__(self, name, _read_only_view(getattr(self, name)))

    @property
    def length(self):
        """Number of cached tokens ``t``."""
        return self.keys.shape[-2]

    @property
    def nbytes(self):
        """Bytes the cache holds: keys plus values."""
        return self.keys.nbytes + self.values.nbytes


def _read_only_view(x):
    """A read-only view of ``x`` as an ndarray; ``x`` itself stays writeable."""
    view = np.asarray(x).view()
    view.flags.writeable = False
    return view


def empty_cache(d_k, d_v=None, batch=(), dtype="float64"):
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
    return KVCache(np.empty((*batch, 0, d_k), dtype=dt), np.empty((*batch, 0, d_v), dtype=dt))


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
        not changed.

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
    return KVCache(keys, values)


def decode_step(q_new, cache, scale=None):
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

    Returns
    -------
    out : (..., m, d_v) ndarray
        Rows ``t-m .. t-1`` of causal attention over the whole sequence.
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
    if m > t:
        raise ValueError(f"q_new holds {m} queries but the cache only {t} tokens: append the "
                         "new tokens' keys and values (append_kv) before decode_step")
    batch_shape({"q_new": q_new.shape, "cache.keys": cache.keys.shape})
    scale = check_scale(scale, q_new.shape[-1])
    # new query i sits at position t - m + i and may see keys 0 .. t - m + i
    mask = np.arange(t)[None, :] <= (t - m + np.arange(m))[:, None]  # (m, 1) vs (1, t) -> (m, t)
    return attention(q_new, cache.keys, cache.values, mask=None if m == 1 else mask,
                     scale=scale)


def decode_sequence(q, k, v, scale=None):
    """Causal attention computed token by token with a growing cache.

    Parameters
    ----------
    q, k : (..., n, d_k) array_like
    v : (..., n, d_v) array_like
    scale : float, optional

    Returns
    -------
    out : (..., n, d_v) ndarray
        Row ``t`` is :func:`decode_step` of token ``t`` after appending ``k_t, v_t``; equal
        (to rounding) to ``attention(q, k, v, mask=causal_mask(n))[0]``.
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
    lead = batch_shape({"q": q.shape, "k": k.shape, "v": v.shape})
    k = np.broadcast_to(k, (*lead, *k.shape[-2:]))  # (..., n, d_k), a view
    v = np.broadcast_to(v, (*lead, *v.shape[-2:]))  # (..., n, d_v), a view
    cache = empty_cache(k.shape[-1], v.shape[-1], batch=lead, dtype=np.result_type(k, v))
    rows = []
    for t in range(q.shape[-2]):
        cache = append_kv(cache, k[..., t:t + 1, :], v[..., t:t + 1, :])
        out, _ = decode_step(q[..., t:t + 1, :], cache, scale)  # (..., 1, d_v)
        rows.append(out)
    return np.concatenate(rows, axis=-2), cache  # n x (..., 1, d_v) -> (..., n, d_v)
