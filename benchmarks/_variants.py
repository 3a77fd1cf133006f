"""The attention paths the benchmark compares, one lever at a time (benchmark helpers only).

``before_*`` are the maths of attn_core as it was before it was tuned (commit ee4f519),
without the input checks: plain numpy, every step a new full-size array. Each other
function adds exactly one lever to the one before it, so that the benchmark can say what
each lever bought on its own, measured in the same run:

1. ``before_attention``      scores, ``np.where`` mask, ``exp(s - max)``, ``e / sum``, ``@ v``
2. ``inplace_attention``     the same on the whole (n, n) matrix, but in place
                             (``np.exp(s, out=s)``, ``subtract(out=)``, one reciprocal per
                             row), scale folded into q, the mask written with ``copyto``
3. ``blocked_copying``       query blocks of about ``block_bytes`` (cache), but each block
                             still computed with new arrays (lever: blocks without in place)
4. ``attn_core.attention``   blocks *and* in place (the package's path; block size
                             ``attn_core.attention.BLOCK_BYTES``, swept by the benchmark)
"""

import numpy as np

from attn_core.softmax import softmax_inplace


def before_softmax(x):
    """The old ``stable_softmax``: three new (n, n) arrays (x - max, exp, divide)."""
    row_max = x.max(axis=-1, keepdims=True)
    row_max[np.isneginf(row_max)] = 0
    e = np.exp(x - row_max)
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def before_attention(q, k, v, mask=None, scale=None):
    """The old ``attention``: (out, weights), each step a new (n, n) array."""
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.swapaxes(-1, -2)  # (n_q, d) @ (d, n_k) -> (n_q, n_k)
    s *= s.dtype.type(scale)
    if mask is not None:
        s = np.where(mask, s, s.dtype.type(-np.inf))
    weights = before_softmax(s)
    return weights @ v, weights


def inplace_attention(q, k, v, mask=None, scale=None):
    """Lever 1, in place on the whole matrix: one (n, n) array, no blocks."""
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = (q * q.dtype.type(scale)) @ k.swapaxes(-1, -2)  # (n_q, n_k), the only big array
    if mask is not None:
        np.copyto(s, -np.inf, where=~mask)
    softmax_inplace(s)
    return s @ v, s


def blocked_copying(q, k, v, mask=None, scale=None, block_bytes=4 * 1024 * 1024):
    """Lever 2 alone: query blocks that stay in cache, each computed the old, copying way."""
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    n_q, n_k = q.shape[-2], k.shape[-2]
    weights = np.empty((n_q, n_k), dtype=q.dtype)
    out = np.empty((n_q, v.shape[-1]), dtype=q.dtype)
    b = max(1, block_bytes // (n_k * q.dtype.itemsize))
    for i in range(0, n_q, b):
        rows = slice(i, i + b)
        o, w = before_attention(q[rows], k, v, None if mask is None else mask[rows], scale)
        weights[rows], out[rows] = w, o
    return out, weights


def floor_products(q, k, v, s, o):
    """The two plain products of attention's shapes into preallocated s and o: the floor."""
    np.matmul(q, k.swapaxes(-1, -2), out=s)  # (n, d) @ (d, n) -> (n, n)
    np.matmul(s, v, out=o)  # (n, n) @ (n, d) -> (n, d)
    return o


def before_flash(q, k, v, block_size=64, causal=False, scale=None):
    """The old ``flash_attention`` (2-D, no mask): new arrays for every tile."""
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    n_q, n_k = q.shape[-2], k.shape[-2]
    out = np.empty((n_q, v.shape[-1]), dtype=q.dtype)
    for i0 in range(0, n_q, block_size):
        rows = slice(i0, min(i0 + block_size, n_q))
        m = np.full(rows.stop - i0, -np.inf, dtype=q.dtype)
        l = np.zeros(rows.stop - i0, dtype=q.dtype)
        acc = np.zeros((rows.stop - i0, v.shape[-1]), dtype=q.dtype)
        for j0 in range(0, n_k, block_size):
            cols = slice(j0, min(j0 + block_size, n_k))
            if causal and j0 > rows.stop - 1:
                continue
            s = q[rows] @ k[cols].T  # (b, d) @ (d, bk) -> (b, bk)
            s *= q.dtype.type(scale)
            if causal:
                keys, queries = np.arange(cols.start, cols.stop), np.arange(rows.start, rows.stop)
                allowed = keys <= queries[:, None]
                s = np.where(allowed, s, q.dtype.type(-np.inf))
            m_new = np.maximum(m, s.max(axis=-1))
            shift = np.where(np.isfinite(m_new), m_new, 0)
            p = np.exp(s - shift[:, None])
            rescale = np.exp(m - shift)
            l = rescale * l + p.sum(axis=-1)
            acc = rescale[:, None] * acc + p @ v[cols]
            m = m_new
        out[rows] = acc / l[:, None]
    return out
