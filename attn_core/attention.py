"""Scaled dot-product attention: scores, softmax, weighted sum of values."""

import numpy as np

from ._validate import (
    as_float_array,
    batch_shape,
    check_mask,
    check_result,
    check_scale,
    checked_later,
    to_common_dtype,
)
from .softmax import softmax_inplace

#: The score given to a position a query may not attend to. exp(-inf) is exactly 0, so
#: a masked position gets exactly zero weight and the other weights still sum to 1.
MASKED_SCORE = -np.inf

#: Bytes of weights handled at a time: attention fills the weights a block of query rows
#: at a time, and each block goes through scores, mask, softmax and ``@ v`` while it is
#: still in cache. 4 MiB (256 float32 rows at n = 4096) was fastest in
#: benchmarks/bench_attention.py: smaller blocks fit L2 but give ``@ v`` too few rows.
BLOCK_BYTES = 4 * 1024 * 1024


def _check_qk(q, k):
    q = as_float_array(q, "q", min_ndim=2)
    k = as_float_array(k, "k", min_ndim=2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            "q and k must have the same last dimension d_k (each query is compared with each "
            f"key by a dot product), got q of shape {q.shape} and k of shape {k.shape}"
        )
    batch_shape({"q": q.shape, "k": k.shape})
    return to_common_dtype(q, k)


def scores(q, k, scale=None):
    """Scaled dot products of every query with every key.

    Parameters
    ----------
    q : (..., n_q, d_k) array_like
        Queries, one row per position.
    k : (..., n_k, d_k) array_like
        Keys, one row per position.
    scale : float, optional
        Factor applied to every dot product; default ``1 / sqrt(d_k)``. Pass ``1.0`` for
        the raw, unscaled scores.

    Returns
    -------
    s : (..., n_q, n_k) ndarray
        ``s[..., i, j]`` is how well query ``i`` matches key ``j``. Its dtype follows the
        package's dtype rule (``attn_core._validate``): the common dtype of ``q`` and ``k``,
        float32 at least, float64 for integers. A score that overflows raises ValueError.

    Notes
    -----
    .. math:: S = \\mathrm{scale} \\cdot Q K^\\top, \\qquad
              S_{ij} = \\mathrm{scale} \\sum_{c} Q_{ic} K_{jc}

    Examples
    --------
    >>> q = [[1.0, 0.5], [0.2, 1.4]]
    >>> k = [[1.1, 0.4], [0.3, 1.2]]
    >>> scores(q, k, scale=1.0)
    array([[1.3 , 0.9 ],
           [0.78, 1.74]])
    """
    q, k = _check_qk(q, k)
    s = _scores(q, k, check_scale(scale, q.shape[-1]))
    check_result(s, "the scores q . k * scale")
    return s


def _scores(q, k, scale):
    """Unchecked ``scale * q @ k^T``; overflow gives inf/NaN silently, for the caller to check."""
    with checked_later():
        s = q @ k.swapaxes(-1, -2)  # (..., n_q, d_k) @ (..., d_k, n_k) -> (..., n_q, n_k)
        s *= s.dtype.type(scale)
    return s


def attention(q, k, v, mask=None, scale=None):
    """Scaled dot-product attention: ``softmax(Q K^T / sqrt(d_k)) V``.

    Parameters
    ----------
    q : (..., n_q, d_k) array_like
        Queries: what each position is looking for.
    k : (..., n_k, d_k) array_like
        Keys: what each position offers to be matched against.
    v : (..., n_k, d_v) array_like
        Values: what each position contributes when it is attended to.
    mask : (..., n_q, n_k) bool array_like, optional
        True where query ``i`` may attend to key ``j``; broadcastable to the scores'
        shape (a ``(n_q, n_k)`` mask applies to every batch element). Masked scores are
        set to ``-inf`` *before* the softmax, so their weight is exactly 0 and each row
        still sums to 1. A row with no allowed key gets all-zero weights and a zero output.
        Without a mask no score is ever ``-inf``: a row whose scores all overflow to
        ``-inf`` (like an overflow to ``+inf``) raises a ValueError, never a zero row.
    scale : float, optional
        Score scale; default ``1 / sqrt(d_k)``.

    Returns
    -------
    out : (..., n_q, d_v) ndarray
        Each row is the weighted average of the value rows.
    weights : (..., n_q, n_k) ndarray
        The attention weights (the "attention map"); each row sums to 1 (or is all 0 if
        fully masked).

    Notes
    -----
    .. math:: \\mathrm{Attention}(Q, K, V) =
              \\mathrm{softmax}\\!\\left(\\frac{Q K^\\top}{\\sqrt{d_k}}\\right) V

    Dtypes follow the package's rule (``attn_core._validate``): ``q``, ``k`` and ``v`` are
    brought to their common dtype (float16 as float32, integers as float64) and both
    results have it, so ``attention(q32, k32, v64)`` gives float64 output and weights.
    Scores, weights or output that overflow to inf or NaN raise a ValueError.

    Examples
    --------
    >>> q = k = [[1.0, 0.0], [0.0, 1.0]]
    >>> v = [[1.0, 2.0], [3.0, 4.0]]
    >>> out, weights = attention(q, k, v, scale=np.log(3.0))
    >>> weights
    array([[0.75, 0.25],
           [0.25, 0.75]])
    >>> out
    array([[1.5, 2.5],
           [2.5, 3.5]])
    >>> out, weights = attention(q, k, v, mask=np.tril(np.ones((2, 2), dtype=bool)))
    >>> weights[0]
    array([1., 0.])
    """
    q, k = _check_qk(q, k)
    v = as_float_array(v, "v", min_ndim=2)
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            "k and v must have the same number of positions n_k (one value per key), "
            f"got k of shape {k.shape} and v of shape {v.shape}"
        )
    batch_shape({"q": q.shape, "k": k.shape, "v": v.shape})
    q, k, v = to_common_dtype(q, k, v)
    scale = check_scale(scale, q.shape[-1])
    shape = (*batch_shape({"q": q.shape, "k": k.shape}), q.shape[-2], k.shape[-2])
    if mask is not None:
        mask = check_mask(mask, shape)
        shape = np.broadcast_shapes(shape, mask.shape)
        mask = np.broadcast_to(mask, shape)  # a view, no copy
    weights = np.empty(shape, dtype=q.dtype)  # (..., n_q, n_k)
    out = np.empty((*np.broadcast_shapes(shape[:-2], v.shape[:-2]), q.shape[-2], v.shape[-1]),
                   dtype=q.dtype)  # (..., n_q, d_v)
    with checked_later():
        q = q * q.dtype.type(scale)  # scale the n_q * d_k queries, not the n_q * n_k scores
    check_result(q, "q * scale (the scaled queries)")
    for rows in _row_blocks(shape, weights.itemsize):
        w = weights[..., rows, :]  # (..., b, n_k), a view into weights
        _weights_block_(w, q[..., rows, :], k, None if mask is None else mask[..., rows, :])
        with checked_later():  # checked below, on the output
            # (..., b, n_k) @ (..., n_k, d_v) -> (..., b, d_v)
            np.matmul(w, v, out=out[..., rows, :])
    check_result(out, "the output weights @ v")
    return out, weights


def _row_blocks(shape, itemsize):
    """Slices of query rows whose weights, over the whole batch, take about BLOCK_BYTES."""
    n_q, row_bytes = shape[-2], int(np.prod(shape[:-2])) * shape[-1] * itemsize
    b = max(1, BLOCK_BYTES // max(1, row_bytes))  # row_bytes is 0 for an empty batch
    return [slice(i, min(i + b, n_q)) for i in range(0, n_q, b)]


def _weights_block_(w, q_blk, k, mask_blk):
    """Fill ``w`` in place with the softmax weights of the (already scaled) query rows ``q_blk``."""
    with checked_later():  # checked in the softmax's row maxima
        # (..., b, d_k) @ (..., d_k, n_k) -> (..., b, n_k)
        np.matmul(q_blk, k.swapaxes(-1, -2), out=w)
    if mask_blk is not None:
        np.copyto(w, MASKED_SCORE, where=~mask_blk)
    # a row whose allowed scores are all -inf overflowed: the softmax raises for it
    softmax_inplace(w, axis=-1, allowed=True if mask_blk is None else mask_blk)
