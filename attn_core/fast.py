"""A fast exact attention for long sequences: the same result as :func:`attention`, sooner.

:func:`attn_core.attention.attention` stays the readable reference of the course. This
module computes the same output (not the weights) with four levers, each measured by
``benchmarks/bench_attention.py``:

* **query blocks on a thread pool.** The ``n^2`` element-wise work (``exp``) runs in
  numpy's ufuncs, which release the GIL, so blocks of query rows run on every core at once
  instead of one.
* **one element-wise pass per score.** A block's scores are written by the matrix product,
  turned into ``exp`` in place, and read once more by the product with the values. The
  row sums come from that same product: the values get one extra column of ones, so
  ``e @ [V | 1]`` gives ``sum_j e_ij v_j`` and ``sum_j e_ij`` together. Division happens on
  the ``(b, d_v)`` output, not on the ``(b, n_k)`` weights.
* **no max pass where it is provably not needed.** Softmax does not change when a row is
  shifted; the shift by the row maximum only guards ``exp`` against overflow. By
  Cauchy-Schwarz every score of query ``i`` lies within ``B_i = scale |q_i| max_j |k_j|``
  of 0, so when ``B_i`` is small (see ``SAFE_BOUND``) ``exp`` can neither overflow nor
  lose the row to underflow and the shift is skipped; otherwise it is done as usual.
* **blocks sized for the cache**, and for a causal mask only the keys up to the block's
  last query are visited.
"""

import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._validate import (
    as_float_array,
    batch_shape,
    check_mask,
    check_overflow,
    check_result,
    check_scale,
    checked_later,
)
from .threads import blas_threads

#: Bytes of scores per query block (one block per thread at a time): small enough for the
#: L2 cache of one core, large enough that the products get many rows.
BLOCK_BYTES = 512 * 1024

#: Largest bound ``B_i`` on ``|score|`` for which the shift by the row maximum is skipped.
#: With ``|s| <= B``, ``exp`` stays below ``e^B`` (no overflow) and the largest term of a row
#: is at least ``e^-B``, so terms that underflow are smaller than it by ``e^(B - tiny)``,
#: far below the dtype's rounding: 40 for float32 (underflow near ``e^-87``), 300 for float64
#: (near ``e^-708``).
SAFE_BOUND = {np.dtype(np.float32): 40.0, np.dtype(np.float64): 300.0}

#: Threads used by default: one per core.
DEFAULT_THREADS = os.cpu_count() or 1

_POOLS = {}


_SCRATCH = threading.local()


def _scratch(name, shape, dtype):
    """This thread's reusable buffer ``name`` viewed as ``shape``: a block's scores are
    written into the same memory block after block (no new array, no fresh pages, per
    block). It grows to the largest block asked for; at most a few blocks of
    :data:`BLOCK_BYTES` per thread stay allocated."""
    size = int(np.prod(shape))
    buf = getattr(_SCRATCH, name, None)
    if buf is None or buf.dtype != dtype or buf.size < size:
        buf = np.empty(size, dtype=dtype)
        setattr(_SCRATCH, name, buf)
    return buf[:size].reshape(shape)


@functools.lru_cache(maxsize=16)
def _later(rows, cols):
    """(rows, cols) bool, True where key ``i0 + j`` comes after query ``i0 + i`` (``j > i``):
    the causal mask of a block's diagonal part, the same for every block of that size."""
    later = np.arange(cols) > np.arange(rows)[:, None]
    later.flags.writeable = False
    return later


def _pool(threads):
    """A shared thread pool of ``threads`` workers (created once per size)."""
    if threads not in _POOLS:
        _POOLS[threads] = ThreadPoolExecutor(max_workers=threads,
                                             thread_name_prefix="attn_core.fast")
    return _POOLS[threads]


def _check_inputs(q, k, v, mask, scale, causal):
    q = as_float_array(q, "q", min_ndim=2)
    k = as_float_array(k, "k", min_ndim=2)
    v = as_float_array(v, "v", min_ndim=2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            "q and k must have the same last dimension d_k (each query is compared with each "
            f"key by a dot product), got q of shape {q.shape} and k of shape {k.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            "k and v must have the same number of positions n_k (one value per key), "
            f"got k of shape {k.shape} and v of shape {v.shape}")
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    lead = batch_shape({"q": q.shape, "k": k.shape, "v": v.shape})
    scale = check_scale(scale, q.shape[-1])
    if mask is not None:
        mask = check_mask(mask, (*lead, q.shape[-2], k.shape[-2]))
        lead = np.broadcast_shapes(lead, mask.shape[:-2])
    return q, k, v, mask, scale, bool(causal), lead


def fast_attention(q, k, v, mask=None, scale=None, *, causal=False, threads=None,
                   block_bytes=None):
    """Scaled dot-product attention's output, computed in blocks on a thread pool.

    Parameters
    ----------
    q : (..., n_q, d_k) array_like
        Queries.
    k : (..., n_k, d_k) array_like
        Keys.
    v : (..., n_k, d_v) array_like
        Values.
    mask : (..., n_q, n_k) bool array_like, optional
        True where query ``i`` may attend to key ``j``, broadcastable to the scores' shape,
        as in :func:`attn_core.attention.attention`. A row with no allowed key gives a zero
        output row.
    scale : float, optional
        Score scale; default ``1 / sqrt(d_k)``.
    causal : bool, optional
        If True, query ``i`` attends only to keys ``j <= i`` (combined with ``mask`` by
        ``&``); keys after a block's last query are never visited.
    threads : int, optional
        Worker threads; default one per core. 1 runs everything in the calling thread.
        While the call runs, BLAS is held to one thread per worker (with threadpoolctl),
        so ``threads`` is the number of cores used.
    block_bytes : int, optional
        Bytes of scores per query block; default :data:`BLOCK_BYTES`. Changes speed and
        memory, never the result.

    Returns
    -------
    out : (..., n_q, d_v) ndarray
        Equal to ``attention(q, k, v, mask, scale)[0]`` up to rounding, in the same dtype
        (float32 stays float32, integers become float64). The weights are not returned:
        they are never stored whole.

    Raises
    ------
    ValueError, TypeError
        For the same bad input as :func:`attn_core.attention.attention`, with the same
        messages naming the argument.

    Notes
    -----
    For each block of query rows :math:`Q_b`, with :math:`c_i` the row shift (0 when the
    Cauchy-Schwarz bound :math:`\\mathrm{scale}\\,\\|q_i\\| \\max_j \\|k_j\\|` is small,
    else the row maximum):

    .. math:: E = e^{\\mathrm{scale}\\, Q_b K^\\top - c}, \\qquad
              [A \\mid s] = E\\,[V \\mid \\mathbf{1}], \\qquad
              \\mathrm{out}_b = A / s

    which is :math:`\\mathrm{softmax}(\\mathrm{scale}\\, Q K^\\top) V` row by row. Extra
    memory is about ``threads * block_bytes`` plus the output.

    Examples
    --------
    >>> from attn_core.attention import attention
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.standard_normal((3, 2, 50, 8))  # 2 batch elements, 50 positions
    >>> out = fast_attention(q, k, v, causal=True, block_bytes=1024)
    >>> reference, _ = attention(q, k, v, mask=np.tri(50, dtype=bool))
    >>> bool(np.allclose(out, reference, rtol=1e-12, atol=1e-12))
    True
    >>> out.shape
    (2, 50, 8)
    """
    q, k, v, mask, scale, causal, lead = _check_inputs(q, k, v, mask, scale, causal)
    threads = DEFAULT_THREADS if threads is None else threads
    block_bytes = BLOCK_BYTES if block_bytes is None else block_bytes
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    if isinstance(block_bytes, bool) or not isinstance(block_bytes, (int, np.integer)) \
            or block_bytes < 1:
        raise ValueError(f"block_bytes must be an integer >= 1, got {block_bytes!r}")
    # BLAS on one thread while the pool runs (attn_core.threads): otherwise every worker's
    # small product would wake all of BLAS's own threads, two levels fighting for the cores.
    with blas_threads(1):
        out = _fast_core(q, k, v, mask, scale, causal, lead, threads, block_bytes)
    check_result(out, "the output")
    return out


def _groups(q, k, v, mask, lead):
    """How many query heads share each key/value head: ``g = lead[-1]`` when ``q``'s last
    leading axis is ``g > 1`` while ``k``'s and ``v``'s is 1 (grouped-query attention's
    layout, ``(..., kv, g, n, d)`` against ``(..., kv, 1, n, d)``) and there is no mask; else 1.
    The ``g`` heads' rows of a query block then go through ONE product with their shared
    keys (``g`` times the rows per product, the keys read once)."""
    if (mask is None and q.ndim >= 3 and k.ndim >= 3 and v.ndim >= 3 and lead[-1] > 1
            and q.shape[-3] == lead[-1] and k.shape[-3] == 1 and v.shape[-3] == 1):
        return lead[-1]
    return 1


def _fast_core(q, k, v, mask, scale, causal, lead, threads, block_bytes):
    """:func:`fast_attention` on checked arguments (``lead`` the broadcast leading dims),
    without its BLAS limit and its final check: for a caller that already holds BLAS to one
    thread and checks its own result (SmolLM2's prefill, :mod:`attn_core.model.llm_fast`)."""
    dtype = np.result_type(q, k, v)
    n_q, n_k, d_k, d_v = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    g = _groups(q, k, v, mask, lead)
    if g > 1:  # the shared key/value head's axis dropped: (..., kv, n, d)
        k, v, lead_kv = k[..., 0, :, :], v[..., 0, :, :], lead[:-1]
    else:
        lead_kv = lead

    # every operand as a (batch, [g,] n, d) stack over the broadcast leading dims
    size = int(np.prod(lead_kv))
    qs = (np.broadcast_to(q, (*lead, n_q, d_k)) * dtype.type(scale)).reshape(
        size, g, n_q, d_k)  # (B, g, n_q, d_k)
    ks = np.ascontiguousarray(np.broadcast_to(k, (*lead_kv, n_k, d_k)), dtype=dtype).reshape(
        size, n_k, d_k)  # (B, n_k, d_k)
    v1 = np.ones((size, n_k, d_v + 1), dtype=dtype)  # (B, n_k, d_v + 1): [V | 1]
    v1[..., :d_v] = np.broadcast_to(v, (*lead_kv, n_k, d_v)).reshape(size, n_k, d_v)
    masks = None if mask is None else np.broadcast_to(mask, (*lead, n_q, n_k)).reshape(
        size, n_q, n_k)  # (B, n_q, n_k), a view where nothing is repeated (g is 1)
    # per-row bound on |score| (Cauchy-Schwarz): decides whether the max shift is needed
    k_norm = np.sqrt(np.einsum("bjd,bjd->bj", ks, ks).max(axis=-1))  # (B,)
    bound = np.sqrt(np.einsum("bgid,bgid->bgi", qs, qs)) * k_norm[:, None, None]  # (B, g, n_q)
    safe = bound <= SAFE_BOUND[np.dtype(dtype)]  # (B, g, n_q)
    out = np.empty((size, g, n_q, d_v), dtype=dtype)

    rows = max(1, min(n_q, block_bytes // (g * n_k * dtype.itemsize)))
    tasks = [(b, i0, min(i0 + rows, n_q)) for b in range(size) for i0 in range(0, n_q, rows)]

    def run(task):
        with checked_later():  # numpy's error state is per thread: set it in each worker
            _run(task)

    def _run(task):
        b, i0, i1 = task
        r = i1 - i0
        stop = min(n_k, i1) if causal else n_k  # keys after the block's last query: skipped
        # the g heads' rows of the block, (g, r, d_k) -> (g r, d_k) (a copy when g > 1)
        q_block = qs[b, :, i0:i1].reshape(g * r, d_k)
        # (g r, d_k) @ (d_k, stop) -> (g r, stop), into this thread's reused buffer
        s = np.matmul(q_block, ks[b, :stop].T, out=_scratch("s", (g * r, stop), dtype))
        later = _later(r, stop - i0) if causal else None  # (r, stop - i0)
        if causal and stop > i0 + 1:  # only the block's diagonal part has later keys
            np.copyto(s.reshape(g, r, stop)[:, :, i0:stop], -np.inf, where=later)
        if masks is not None:  # (g is 1)
            np.copyto(s, -np.inf, where=~masks[b, i0:i1, :stop])
        if not safe[b, :, i0:i1].all():
            row_max = s.max(axis=-1, keepdims=True)  # (g r, 1)
            check_overflow(row_max, dtype, allowed_rows=_allowed_rows(b, i0, i1, stop, later))
            row_max[np.isneginf(row_max)] = 0  # a fully masked row: shift by 0, exp gives 0
            np.subtract(s, row_max, out=s)
        np.exp(s, out=s)
        # (g r, stop) @ (stop, d_v + 1) -> (g r, d_v + 1) -> (g, r, d_v + 1)
        acc = np.matmul(s, v1[b, :stop], out=_scratch("acc", (g * r, d_v + 1), dtype))
        acc = acc.reshape(g, r, d_v + 1)
        total = acc[..., d_v:]  # (g, r, 1): the row sums of exp
        block = out[b, :, i0:i1]  # (g, r, d_v)
        if masks is None and stop > 0:  # every row sees a key, its largest term >= e^-B > 0
            np.divide(acc[..., :d_v], total, out=block)
        else:  # (a masked division, slower: only where a row may have no allowed key)
            np.divide(acc[..., :d_v], total, out=block, where=total > 0)
            block[total[..., 0] == 0] = 0  # rows with no allowed key

    def _allowed_rows(b, i0, i1, stop, later):
        """(g r, 1) bool: True where the row may attend to at least one key."""
        if masks is None:
            return np.ones((g * (i1 - i0), 1), dtype=bool)  # causal or not, every row sees a key
        allowed = masks[b, i0:i1, :stop].copy()  # (r, stop), g is 1
        if causal and stop > i0 + 1:  # later: (r, stop - i0), True above the diagonal
            allowed[:, i0:stop] &= ~later
        return allowed.any(axis=-1, keepdims=True)

    if threads == 1 or len(tasks) == 1:
        for task in tasks:
            run(task)
    else:
        list(_pool(threads).map(run, tasks))  # list(): re-raise a worker's exception here
    return out.reshape(*lead, n_q, d_v)  # (B, g, n_q, d_v) -> (..., n_q, d_v)
