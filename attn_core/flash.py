"""Tiled attention with an online softmax (the idea behind FlashAttention).

Plain attention builds the whole ``(n_q, n_k)`` score matrix. Here the queries are cut
into blocks and, for each query block, the keys and values are visited one block at a
time. Each query row keeps three running quantities:

* ``m``: the largest score seen so far (the softmax's shift),
* ``l``: the sum of ``exp(score - m)`` over the keys seen so far,
* ``o``: the output so far, the weighted average of the values seen so far
  (``sum exp(score - m) * value / l``).

When a new tile raises the maximum from ``m`` to ``m'``, the old sum was computed
relative to ``m``; multiplying it by ``exp(m - m')`` re-expresses it relative to ``m'``.
The new output is a blend of the old ``o`` and the tile's values, with weights that add up
to 1, so it never grows past the largest value: finite values give a finite output even
near the dtype's largest number. After the last tile, ``o`` is exactly
``softmax(scores) @ V``. Only one ``(block, block)`` tile of scores exists at any time.
"""

from dataclasses import dataclass

import numpy as np

from ._validate import (
    as_float_array,
    batch_shape,
    check_mask,
    check_overflow,
    check_positive_int,
    check_result,
    check_scale,
    checked_later,
    to_common_dtype,
)

#: Default tile edge. 64 keeps a float64 tile (32 KiB) and its neighbours in L1/L2 cache.
DEFAULT_BLOCK_SIZE = 64


@dataclass(frozen=True)
class TileStep:
    """The state of the online softmax right after one tile was processed.

    Attributes
    ----------
    rows, cols : slice
        The query rows and key columns of this tile.
    skipped : bool
        True if the tile lies entirely above the causal diagonal and was not computed.
    tile_scores : (..., len(rows), len(cols)) ndarray or None
        The scaled, masked scores of this tile (None when skipped).
    running_max : (..., n_q) ndarray
        ``m`` for every query row (``-inf`` for rows not reached yet).
    running_sum : (..., n_q) ndarray
        ``l`` for every query row (0 for rows not reached yet).
    partial_output : (..., n_q, d_v) ndarray
        ``o`` for every row: the output as if the keys seen so far were all keys.
    tile_elements : int
        Score elements held in memory for this tile: ``len(rows) * len(cols)``.
    """

    rows: slice
    cols: slice
    skipped: bool
    tile_scores: object
    running_max: np.ndarray
    running_sum: np.ndarray
    partial_output: np.ndarray
    tile_elements: int


def _check_inputs(q, k, v, block_size, causal, mask, scale):
    q = as_float_array(q, "q", min_ndim=2)
    k = as_float_array(k, "k", min_ndim=2)
    v = as_float_array(v, "v", min_ndim=2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same last dimension d_k, got q of shape {q.shape} "
            f"and k of shape {k.shape}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions n_k, got k of shape {k.shape} "
            f"and v of shape {v.shape}"
        )
    lead = batch_shape({"q": q.shape, "k": k.shape, "v": v.shape})
    block_size = check_positive_int(block_size, "block_size")
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    scores_shape = (*lead, q.shape[-2], k.shape[-2])
    if mask is not None:
        mask = check_mask(mask, scores_shape)
        lead = np.broadcast_shapes(lead, mask.shape[:-2])
        mask = np.broadcast_to(mask, (*lead, q.shape[-2], k.shape[-2]))  # a view, no copy
    q, k, v = to_common_dtype(q, k, v)
    return q, k, v, block_size, bool(causal), mask, check_scale(scale, q.shape[-1]), lead


def _query_block(q_blk, k, v, rows, block_size, causal, mask, scale, on_tile=None):
    """Run the online softmax for one block of query rows over every key block.

    Returns ``(m, l, o)`` with shapes ``(..., b), (..., b), (..., b, d_v)``; ``o`` is the
    block's output (0 for a row with no allowed key).
    """
    lead = np.broadcast_shapes(q_blk.shape[:-2], k.shape[:-2], v.shape[:-2],
                               () if mask is None else mask.shape[:-2])
    dtype = q_blk.dtype  # q, k and v share one dtype (the package's dtype rule)
    b, n_k = q_blk.shape[-2], k.shape[-2]
    with checked_later():
        q_blk = q_blk * dtype.type(scale)  # (..., b, d_k): scale b * d_k queries, not every score
    check_result(q_blk, "q * scale (the scaled queries)")
    m = np.full((*lead, b), -np.inf, dtype=dtype)
    l = np.zeros((*lead, b), dtype=dtype)
    o = np.zeros((*lead, b, v.shape[-1]), dtype=dtype)
    s_buf = np.empty((*lead, b, min(block_size, n_k)), dtype=dtype)  # reused by every tile
    p_buf = np.empty_like(s_buf)
    for j0 in range(0, n_k, block_size):
        cols = slice(j0, min(j0 + block_size, n_k))
        if causal and j0 > rows.stop - 1:  # every key in the tile is after every query
            if on_tile:
                on_tile(cols, None, m, l, o)
            continue
        s = s_buf[..., : cols.stop - j0]  # (..., b, bk), a view
        _tile_scores_(s, q_blk, k[..., cols, :], rows, cols, causal, mask)
        _online_update_(s, p_buf[..., : cols.stop - j0], v[..., cols, :], m, l, o)
        if on_tile:
            on_tile(cols, s, m, l, o)
    _check_no_overflowed_row(m, rows, n_k, causal, mask)
    return m, l, o


def _check_no_overflowed_row(m, rows, n_k, causal, mask):
    """Raise if a row that may attend to some key ended with m = -inf: its scores overflowed."""
    empty = np.isneginf(m)  # (..., b)
    if not empty.any():
        return
    if mask is None:  # every row may attend to key 0 (causal or not)
        allowed = True
    else:
        allowed_keys = mask[..., rows, :]  # (..., b, n_k)
        if causal:
            not_later = np.arange(n_k) <= np.arange(rows.start, rows.stop)[:, None]  # (b, n_k)
            allowed_keys = allowed_keys & not_later
        allowed = allowed_keys.any(axis=-1)  # (..., b)
    check_overflow(m, m.dtype, allowed_rows=allowed)


def _tile_scores_(s, q_blk, k_tile, rows, cols, causal, mask):
    """Fill ``s`` in place with the masked scores of scaled queries ``q_blk`` against ``k_tile``."""
    kt = k_tile.swapaxes(-1, -2)  # (..., bk, d_k) -> (..., d_k, bk), a view
    with checked_later():  # checked in the running max
        np.matmul(q_blk, kt, out=s)  # (..., b, d_k) @ (..., d_k, bk) -> (..., b, bk)
    if causal and cols.stop - 1 > rows.start:  # only a tile crossing the diagonal has later keys
        later = np.arange(cols.start, cols.stop) > np.arange(rows.start, rows.stop)[:, None]
        np.copyto(s, -np.inf, where=later)
    if mask is not None:
        np.copyto(s, -np.inf, where=~mask[..., rows, cols])


def _online_update_(s, p, v_tile, m, l, o):
    """Fold one tile of scores ``s`` into ``m``, ``l`` and ``o`` in place (``p`` is scratch).

    ``o`` stays a weighted average of values (weights adding up to at most 1), never a raw
    sum of ``exp(score - m) * value``, so it cannot overflow where the values are finite.
    """
    m_new = np.maximum(m, s.max(axis=-1))  # (..., b)
    check_overflow(m_new, m.dtype)
    shift = np.where(np.isfinite(m_new), m_new, 0)  # rows with nothing allowed yet
    with checked_later():  # far below the max: exp gives 0
        np.exp(np.subtract(s, shift[..., None], out=p), out=p)  # (..., b, bk); masked give 0
        l_old = l * np.exp(m - shift)  # (..., b): the old sum relative to the new max
    l_new = l_old + p.sum(axis=-1)  # (..., b)
    inv = np.divide(1, l_new, out=np.zeros_like(l_new), where=l_new > 0)  # 0: nothing yet
    # a blend of finite values stays finite, but at the dtype's very largest values rounding
    # can still tip it over: flash_attention checks its output once, at the end
    with checked_later():
        o *= (l_old * inv)[..., None]  # the old output's share of the new sum
        p *= inv[..., None]  # the tile's weights, relative to the new sum
        o += p @ v_tile  # (..., b, bk) @ (..., bk, d_v) -> (..., b, d_v)
    l[...] = l_new
    m[...] = m_new


def flash_attention(q, k, v, block_size=DEFAULT_BLOCK_SIZE, causal=False, mask=None, scale=None):
    """Attention computed tile by tile, never building the full score matrix.

    Parameters
    ----------
    q : (..., n_q, d_k) array_like
    k : (..., n_k, d_k) array_like
    v : (..., n_k, d_v) array_like
    block_size : int, optional
        Edge of a tile: query rows per block and key columns per block, >= 1. Any value
        works (1, or more than n); it changes speed and memory, never the result.
    causal : bool, optional
        If True, query ``i`` attends only to keys ``j <= i``; tiles entirely above the
        diagonal are skipped without computing them.
    mask : (..., n_q, n_k) bool array_like, optional
        True where a query may attend (combined with ``causal`` by ``&``).
    scale : float, optional
        Score scale; default ``1 / sqrt(d_k)``.

    Returns
    -------
    out : (..., n_q, d_v) ndarray
        Equal to ``attention(q, k, v, mask, scale)[0]`` up to rounding. Rows with no
        allowed key are 0, as in :func:`attention`. The weights are never formed.

    Notes
    -----
    Per query row, for each key tile ``T`` with scores ``s_T``:

    .. math:: m' = \\max(m, \\max s_T), \\quad
              l' = e^{m - m'} l + \\textstyle\\sum e^{s_T - m'}, \\quad
              o' = \\frac{e^{m - m'} l}{l'} o + \\frac{e^{s_T - m'}}{l'} V_T

    and ``out`` is the last ``o``. The two weights of ``o'`` add up to 1, so ``o`` stays
    within the range of the values. Peak extra memory is ``O(block_size^2 + n d)``
    instead of ``O(n^2)``.

    Dtypes follow the package's rule (``attn_core._validate``): the common dtype of
    ``q``, ``k`` and ``v`` (float16 as float32, integers as float64). Scores or an output
    that overflow raise a ValueError, as in :func:`attention`.

    Examples
    --------
    >>> from attn_core.attention import attention
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.standard_normal((3, 10, 4))
    >>> out = flash_attention(q, k, v, block_size=3, causal=True)
    >>> reference, _ = attention(q, k, v, mask=np.tri(10, dtype=bool))
    >>> bool(np.allclose(out, reference, rtol=0, atol=1e-12))
    True
    """
    q, k, v, block_size, causal, mask, scale, lead = _check_inputs(
        q, k, v, block_size, causal, mask, scale)
    n_q = q.shape[-2]
    out = np.empty((*lead, n_q, v.shape[-1]), dtype=q.dtype)
    for i0 in range(0, n_q, block_size):
        rows = slice(i0, min(i0 + block_size, n_q))
        _, _, out[..., rows, :] = _query_block(q[..., rows, :], k, v, rows, block_size, causal,
                                               mask, scale)
    check_result(out, "the output (the weighted average of v)")
    return out


def flash_attention_steps(q, k, v, block_size=DEFAULT_BLOCK_SIZE, causal=False, mask=None,
                          scale=None):
    """Step through :func:`flash_attention` one tile at a time.

    Same parameters as :func:`flash_attention`. Query blocks are visited in order and,
    inside each, key blocks in order (the loop order of FlashAttention-2).

    Returns
    -------
    steps : list of TileStep
        One entry per tile, skipped tiles included, holding copies of the running max,
        running sum and normalised partial output of every query row after that tile.
        The last step's ``partial_output`` equals ``flash_attention(...)``.

    Examples
    --------
    >>> q = k = v = np.eye(4)
    >>> steps = flash_attention_steps(q, k, v, block_size=2)
    >>> len(steps), steps[0].rows, steps[0].cols
    (4, slice(0, 2, None), slice(0, 2, None))
    >>> steps[0].running_max[2:]
    array([-inf, -inf])
    >>> bool(np.allclose(steps[-1].running_sum[:2], steps[1].running_sum[:2]))
    True
    """
    q, k, v, block_size, causal, mask, scale, lead = _check_inputs(
        q, k, v, block_size, causal, mask, scale)
    n_q = q.shape[-2]
    dtype = q.dtype
    m_all = np.full((*lead, n_q), -np.inf, dtype=dtype)
    l_all = np.zeros((*lead, n_q), dtype=dtype)
    out_all = np.zeros((*lead, n_q, v.shape[-1]), dtype=dtype)
    steps = []
    for i0 in range(0, n_q, block_size):
        rows = slice(i0, min(i0 + block_size, n_q))

        def record(cols, s, m, l, o, rows=rows):
            m_all[..., rows], l_all[..., rows] = m, l
            out_all[..., rows, :] = o
            steps.append(TileStep(
                rows=rows, cols=cols, skipped=s is None,
                tile_scores=None if s is None else s.copy(),
                running_max=m_all.copy(), running_sum=l_all.copy(),
                partial_output=out_all.copy(),
                tile_elements=0 if s is None else s.shape[-2] * s.shape[-1]))

        _query_block(q[..., rows, :], k, v, rows, block_size, causal, mask, scale, record)
    return steps
