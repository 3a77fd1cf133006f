"""Sparse attention patterns, and attention that skips the blocks a pattern leaves empty.

Each pattern is a boolean mask (True = may attend, as in :mod:`attn_core.masks`), so it goes
straight into ``attention(..., mask=...)`` and into ``masks.receptive_field``:

* strided and fixed patterns (Child et al. 2019, "Generating long sequences with sparse
  transformers", arXiv:1904.10509): causal; each query sees about ``stride`` recent
  positions plus every ``stride``-th one, or its own block plus a few "summary" columns;
* local + global tokens (Beltagy et al. 2020, "Longformer: the long-document transformer",
  arXiv:2004.05150): a band around each token, and a few tokens that see and are seen by all;
* BigBird (Zaheer et al. 2020, "Big Bird: transformers for longer sequences", NeurIPS 2020):
  the same at the level of blocks, plus a few random key blocks for every query block.

:func:`block_sparse_attention` computes masked attention one query block at a time over the
key blocks that hold at least one allowed cell: equal to ``attention(q, k, v, mask)``, with
the work of the empty blocks skipped.
"""

import numpy as np

from ._validate import (
    batch_shape,
    check_bool,
    check_positive_int,
    check_qkv,
    check_seed,
)
from .attention import attention
from .masks import causal_mask, receptive_field

__all__ = ["bigbird_mask", "block_layout", "block_sparse_attention", "block_sparse_cells",
           "fixed_mask", "hops_from", "keys_kept", "layers_to_connect", "local_global_mask",
           "strided_mask"]


def _offsets(n):
    return np.arange(n)[:, None] - np.arange(n)[None, :]  # (n, 1) - (1, n) -> (n, n): i - j


def strided_mask(n, stride):
    """Child et al.'s strided pattern: the last ``stride`` positions, and every ``stride``-th.

    Parameters
    ----------
    n : int
        Sequence length.
    stride : int
        ``l`` in the paper, >= 1 (about ``sqrt(n)`` there).

    Returns
    -------
    mask : (n, n) bool ndarray
        ``mask[i, j]`` is ``0 <= i - j < stride`` or ``(i - j) % stride == 0`` (and ``j <= i``).

    Notes
    -----
    The union of the paper's two heads, ``A^(1) = {j : i - j < l}`` (local) and
    ``A^(2) = {j : (i - j) mod l = 0}`` (strided). Each row allows about ``l + i / l`` keys,
    ``O(n sqrt n)`` cells in all for ``l ~ sqrt n``; two layers connect every pair ``j <= i``.

    Examples
    --------
    >>> strided_mask(6, 2).astype(int)
    array([[1, 0, 0, 0, 0, 0],
           [1, 1, 0, 0, 0, 0],
           [1, 1, 1, 0, 0, 0],
           [0, 1, 1, 1, 0, 0],
           [1, 0, 1, 1, 1, 0],
           [0, 1, 0, 1, 1, 1]])
    """
    n = check_positive_int(n, "n")
    stride = check_positive_int(stride, "stride")
    off = _offsets(n)
    return (off >= 0) & ((off < stride) | (off % stride == 0))


def fixed_mask(n, stride, n_summary=1):
    """Child et al.'s fixed pattern: a query's own block, and the last ``n_summary`` columns
    of every block (causal).

    Parameters
    ----------
    n : int
    stride : int
        Block length ``l``, >= 1.
    n_summary : int, optional
        ``c`` in the paper, 1 <= c <= stride: the summary positions at the end of each block,
        which every later query reads.

    Returns
    -------
    mask : (n, n) bool ndarray
        ``mask[i, j]`` is ``j <= i`` and (``j // l == i // l`` or ``j mod l >= l - c``).

    Examples
    --------
    >>> fixed_mask(6, 3).astype(int)
    array([[1, 0, 0, 0, 0, 0],
           [1, 1, 0, 0, 0, 0],
           [1, 1, 1, 0, 0, 0],
           [0, 0, 1, 1, 0, 0],
           [0, 0, 1, 1, 1, 0],
           [0, 0, 1, 1, 1, 1]])
    """
    n = check_positive_int(n, "n")
    stride = check_positive_int(stride, "stride")
    n_summary = check_positive_int(n_summary, "n_summary")
    if n_summary > stride:
        raise ValueError(f"n_summary must be at most stride = {stride} (summary positions "
                         f"within each block), got {n_summary}")
    pos = np.arange(n)
    same_block = (pos[:, None] // stride) == (pos[None, :] // stride)  # (n, n)
    summary = (pos % stride >= stride - n_summary)[None, :]  # (1, n)
    return causal_mask(n) & (same_block | summary)


def local_global_mask(n, radius, n_global=0, causal=False):
    """Longformer's pattern: a band of ``radius`` on each side, plus ``n_global`` global tokens.

    Parameters
    ----------
    n : int
    radius : int
        Each token sees the ``radius`` tokens on either side of it and itself, >= 0.
    n_global : int, optional
        The first ``n_global`` tokens (a ``[CLS]`` or the question) attend to every token and
        every token attends to them. Default 0.
    causal : bool, optional
        Also forbid later keys (``& causal_mask(n)``), for a decoder. Default False.

    Returns
    -------
    mask : (n, n) bool ndarray

    Examples
    --------
    >>> local_global_mask(5, 1, n_global=1).astype(int)
    array([[1, 1, 1, 1, 1],
           [1, 1, 1, 0, 0],
           [1, 1, 1, 1, 0],
           [1, 0, 1, 1, 1],
           [1, 0, 0, 1, 1]])
    """
    n = check_positive_int(n, "n")
    radius = check_positive_int(radius, "radius", minimum=0)
    n_global = check_positive_int(n_global, "n_global", minimum=0)
    causal = check_bool(causal, "causal")
    pos = np.arange(n)
    band = np.abs(_offsets(n)) <= radius
    glob = (pos[:, None] < n_global) | (pos[None, :] < n_global)  # (n, 1) | (1, n) -> (n, n)
    mask = band | glob
    return mask & causal_mask(n) if causal else mask


def bigbird_mask(n, block, n_random=1, n_global=1, seed=0):
    """BigBird's pattern, block by block: 3 neighbouring blocks, global blocks, random blocks.

    Parameters
    ----------
    n : int
    block : int
        Block edge, >= 1; the last block may be shorter.
    n_random : int, optional
        Random key blocks per query block (drawn without repetition from a seeded
        generator). Default 1.
    n_global : int, optional
        The first ``n_global`` blocks see and are seen by every block. Default 1.
    seed : int >= 0, optional

    Returns
    -------
    mask : (n, n) bool ndarray
        Whole blocks on or off: the layout ``(nb, nb)`` expanded to cells.

    Examples
    --------
    >>> m = bigbird_mask(8, 2, n_random=0, n_global=1)
    >>> block_layout(m, 2).astype(int)
    array([[1, 1, 1, 1],
           [1, 1, 1, 0],
           [1, 1, 1, 1],
           [1, 0, 1, 1]])
    """
    n = check_positive_int(n, "n")
    block = check_positive_int(block, "block")
    n_random = check_positive_int(n_random, "n_random", minimum=0)
    n_global = check_positive_int(n_global, "n_global", minimum=0)
    nb = -(-n // block)  # blocks, the last possibly short
    layout = local_global_mask(nb, 1, n_global=min(n_global, nb))
    rng = np.random.default_rng(check_seed(seed))
    for i in range(nb):
        free = np.flatnonzero(~layout[i])
        if len(free) and n_random:
            layout[i, rng.choice(free, size=min(n_random, len(free)), replace=False)] = True
    ids = np.arange(n) // block  # the block of each position
    return layout[ids[:, None], ids[None, :]]  # (nb, nb) -> (n, n)


def _check_square_mask(mask, name="mask"):
    m = np.asarray(mask)
    if m.dtype != bool or m.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (n_q, n_k) bool array (one pattern for the "
                         f"whole batch), got dtype {m.dtype} and shape {m.shape}")
    return m


def block_layout(mask, block):
    """Which ``block x block`` tiles of ``mask`` hold at least one allowed cell.

    Parameters
    ----------
    mask : (n_q, n_k) bool array_like
    block : int
        Tile edge, >= 1 (the last row and column of tiles may be shorter).

    Returns
    -------
    layout : (ceil(n_q / block), ceil(n_k / block)) bool ndarray

    Examples
    --------
    >>> block_layout(causal_mask(4), 2).astype(int)
    array([[1, 0],
           [1, 1]])
    """
    m = _check_square_mask(mask)
    block = check_positive_int(block, "block")
    rows = np.logical_or.reduceat(m, np.arange(0, m.shape[0], block), axis=0)
    return np.logical_or.reduceat(rows, np.arange(0, m.shape[1], block), axis=1)


def block_sparse_cells(mask, block):
    """Score cells a block-sparse kernel computes: every cell of every non-empty tile.

    Examples
    --------
    >>> block_sparse_cells(causal_mask(4), 2), int(causal_mask(4).sum())
    (12, 10)
    """
    m = _check_square_mask(mask)
    layout = block_layout(m, block)
    h = np.diff(np.r_[np.arange(0, m.shape[0], block), m.shape[0]])  # (nb_q,) tile heights
    w = np.diff(np.r_[np.arange(0, m.shape[1], block), m.shape[1]])  # (nb_k,) tile widths
    return int((h[:, None] * w[None, :])[layout].sum())


def block_sparse_attention(q, k, v, mask, block=64, scale=None):
    """Masked attention that computes only the tiles of ``mask`` holding an allowed cell.

    Parameters
    ----------
    q : (..., n_q, d_k) array_like
    k : (..., n_k, d_k) array_like
    v : (..., n_k, d_v) array_like
    mask : (n_q, n_k) bool array_like
        The pattern, one for the whole batch.
    block : int, optional
        Tile edge, >= 1. Changes the work done, never the result.
    scale : float, optional
        Default ``1 / sqrt(d_k)``.

    Returns
    -------
    out : (..., n_q, d_v) ndarray
        Equal (to rounding) to ``attention(q, k, v, mask=mask, scale=scale)[0]``; rows with
        no allowed key are 0, as there.

    Notes
    -----
    For query block ``I``, the key blocks ``J`` with ``layout[I, J]`` are gathered and
    attention runs over them alone (with the mask's cells of those tiles): a masked cell has
    weight exactly 0, so the tiles left out change nothing. The work is
    :func:`block_sparse_cells` cells instead of ``n_q n_k``.

    Examples
    --------
    >>> g = np.random.default_rng(0)
    >>> q, k, v = g.standard_normal((3, 8, 4))
    >>> m = strided_mask(8, 3)
    >>> a = block_sparse_attention(q, k, v, m, block=2)
    >>> bool(np.allclose(a, attention(q, k, v, mask=m)[0], rtol=0, atol=1e-12))
    True
    """
    q, k, v = check_qkv(q, k, v)  # d_k shared by q and k, one value per key
    m = _check_square_mask(mask)
    if m.shape != (q.shape[-2], k.shape[-2]):
        raise ValueError(f"mask must have shape (n_q, n_k) = {(q.shape[-2], k.shape[-2])}, "
                         f"got {m.shape}")
    block = check_positive_int(block, "block")
    lead = batch_shape({"q": q.shape, "k": k.shape, "v": v.shape})
    layout = block_layout(m, block)
    dtype = np.result_type(q, k, v)
    out = np.zeros((*lead, q.shape[-2], v.shape[-1]), dtype=dtype)
    for bi, allowed in enumerate(layout):
        if not allowed.any():
            continue  # no key for these queries: zero rows, as attention gives
        rows = slice(bi * block, (bi + 1) * block)
        cols = np.concatenate([np.arange(bj * block, min((bj + 1) * block, k.shape[-2]))
                               for bj in np.flatnonzero(allowed)])  # the kept keys
        out[..., rows, :], _ = attention(q[..., rows, :], k[..., cols, :], v[..., cols, :],
                                         mask=m[rows][:, cols], scale=scale)
    return out


def layers_to_connect(mask, max_layers=64):
    """Fewest stacked layers (all with ``mask``) through which input ``j`` reaches output ``i``.

    Parameters
    ----------
    mask : (n, n) bool array_like
        One layer's pattern; its diagonal must be True (the residual path).
    max_layers : int, optional
        Stop composing after this many layers. Default 64.

    Returns
    -------
    hops : (n, n) int ndarray
        ``hops[i, j]`` is the smallest ``L`` with ``receptive_field(mask, L)[i, j]``, or 0 if
        no ``L <= max_layers`` connects them (a later position under a causal pattern).

    Examples
    --------
    >>> from attn_core.masks import window_mask
    >>> layers_to_connect(window_mask(5, 2))[4]
    array([4, 3, 2, 1, 1])
    >>> int(layers_to_connect(strided_mask(16, 4)).max())
    2
    """
    m = _check_square_mask(mask)
    max_layers = check_positive_int(max_layers, "max_layers")
    hops = np.zeros(m.shape, dtype=np.int64)
    previous = None
    for layers in range(1, max_layers + 1):
        reach = receptive_field(m, layers)  # checks the diagonal
        hops[reach & (hops == 0)] = layers
        if previous is not None and (reach == previous).all():
            break  # nothing new: more layers reach no further
        previous = reach
    return hops


def hops_from(mask, j, max_layers=64):
    """Row ``j`` of :func:`layers_to_connect`, transposed: layers for input ``j`` to reach each
    output, by pushing one set of positions through the layers (work per layer: the allowed cells).

    Returns
    -------
    hops : (n,) int ndarray
        ``hops[i]`` equals ``layers_to_connect(mask, max_layers)[i, j]`` (0: not within
        ``max_layers``).

    Examples
    --------
    >>> from attn_core.masks import window_mask
    >>> hops_from(window_mask(5, 2), 0).tolist()
    [1, 1, 2, 3, 4]
    """
    m = _check_square_mask(mask)
    j = check_positive_int(j, "j", minimum=0)
    if j >= m.shape[1]:
        raise ValueError(f"j must be a position below n = {m.shape[1]}, got {j}")
    max_layers = check_positive_int(max_layers, "max_layers")
    rows, cols = np.nonzero(m)  # the allowed cells: one step from input cols to output rows
    reach = m[:, j].copy()  # (n,): outputs that read input j directly
    hops = np.where(reach, 1, 0)
    for layers in range(2, max_layers + 1):
        new = reach.copy()
        new[rows[reach[cols]]] = True  # every output that reads a position reached so far
        if (new == reach).all():
            break
        hops[new & ~reach] = layers
        reach = new
    return hops


def keys_kept(mask):
    """How many tokens' keys and values a decoder must still hold after each step.

    Parameters
    ----------
    mask : (n, n) bool array_like
        A causal pattern.

    Returns
    -------
    kept : (n,) int ndarray
        ``kept[t]``: tokens ``j <= t`` that query ``t`` or a later query (up to ``n - 1``)
        attends to: the cache a decoder needs after token ``t``. A window keeps ``w``; a
        pattern whose later rows reach back to any old key (strided) keeps them all.

    Examples
    --------
    >>> from attn_core.masks import window_mask
    >>> keys_kept(window_mask(6, 3)).tolist()
    [1, 2, 3, 3, 3, 3]
    """
    m = _check_square_mask(mask)
    n = m.shape[0]
    t = np.arange(n)
    read = m.any(axis=0)  # (n,): keys some query reads
    last = np.where(read, n - 1 - m[::-1].argmax(axis=0), t - 1)  # the last query reading
    # key j is kept after step t iff j <= t <= last[j]; a key nobody reads gets last = j - 1.
    # last[j] >= j - 1 >= t for every j > t, so the keys dropped by step t are exactly
    # those with last[j] < t: count them by sorting instead of comparing all (t, j) pairs
    dropped = np.searchsorted(np.sort(last), t, side="left")  # (n,): #{j : last[j] < t}
    return (t + 1 - dropped).astype(np.int64)
