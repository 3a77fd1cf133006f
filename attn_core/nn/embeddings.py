"""Token and position embeddings: the rows of two tables, added; and their backward pass."""

import numpy as np

from .._validate import as_float_array, check_positive_int

__all__ = ["check_ids", "embed", "embed_backward"]


def check_ids(ids, vocab_size, n_ctx=None, name="ids"):
    """``ids`` as an integer ndarray ``(..., n)`` with every id in ``0..vocab_size - 1`` and
    ``1 <= n <= n_ctx`` (when given), else a clear error naming ``name``."""
    arr = np.asarray(ids)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integer token ids, got dtype {arr.dtype}")
    if arr.ndim < 1 or arr.shape[-1] == 0:
        raise ValueError(f"{name} must have shape (..., n) with n >= 1, got shape {arr.shape}")
    if n_ctx is not None and arr.shape[-1] > n_ctx:
        raise ValueError(f"{name} has n = {arr.shape[-1]} positions, more than the context "
                         f"window n_ctx = {n_ctx}; crop it to its last {n_ctx} tokens")
    bad = (arr < 0) | (arr >= vocab_size)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{name} must be token ids in 0..{vocab_size - 1} (vocab_size "
                         f"{vocab_size}), got {int(arr[where])} at index {where} "
                         f"({int(bad.sum())} out of range in all)")
    return arr


def _check_tables(wte, wpe):
    wte = as_float_array(wte, "wte", min_ndim=2, layout="(vocab_size, d_model)")
    wpe = as_float_array(wpe, "wpe", min_ndim=2, layout="(n_ctx, d_model)")
    if wte.ndim != 2 or wpe.ndim != 2 or wpe.shape[1] != wte.shape[1]:
        raise ValueError(f"wte (vocab_size, d_model) and wpe (n_ctx, d_model) must be matrices "
                         f"of the same width, got shapes {wte.shape} and {wpe.shape}")
    return wte, wpe


def embed(ids, wte, wpe):
    """Each token's row of the token table plus its position's row of the position table.

    Parameters
    ----------
    ids : (..., n) int array_like
        Token ids in ``0..vocab_size - 1``; ``n <= n_ctx``.
    wte : (vocab_size, d_model) array_like
        Token embedding table.
    wpe : (n_ctx, d_model) array_like
        Learned position embedding table.

    Returns
    -------
    x : (..., n, d_model) ndarray, in the tables' common dtype

    Notes
    -----
    .. math:: x_i = W_{te}[\\mathrm{id}_i] + W_{pe}[i]

    Examples
    --------
    >>> wte, wpe = np.eye(3), 10 * np.eye(3)[:2]
    >>> embed([2, 0], wte, wpe)
    array([[10.,  0.,  1.],
           [ 1., 10.,  0.]])
    """
    wte, wpe = _check_tables(wte, wpe)
    ids = check_ids(ids, wte.shape[0], wpe.shape[0])
    return _embed(ids, wte, wpe)


def _embed(ids, wte, wpe):
    n = ids.shape[-1]
    return wte[ids] + wpe[:n]  # (..., n, d_model) + (n, d_model)


def embed_backward(ids, wte, wpe, grad_x):
    """Gradients of :func:`embed` with respect to the two tables.

    Parameters
    ----------
    ids, wte, wpe
        The forward pass's arguments (only the tables' shapes and dtype are used).
    grad_x : (..., n, d_model) array_like
        Derivative of the loss with respect to the embeddings.

    Returns
    -------
    grad_wte : (vocab_size, d_model) ndarray
        Row ``v`` is the sum of ``grad_x`` over every position holding token ``v`` (zero for
        a token that does not occur).
    grad_wpe : (n_ctx, d_model) ndarray
        Row ``i`` is the sum of ``grad_x[..., i, :]`` over the batch; zero for ``i >= n``.

    Notes
    -----
    A lookup is a product with a one-hot matrix, :math:`x = \\mathrm{onehot}(\\mathrm{ids})
    W_{te}`, so :math:`dW_{te} = \\mathrm{onehot}^\\top dx`: a scatter-add of the rows of
    ``dx`` (plain fancy-index ``+=`` would keep one row per repeated id, not their sum). It is
    done by sorting the positions by token and summing each token's run with
    ``np.add.reduceat``, a few times faster than ``np.add.at``.

    Examples
    --------
    >>> g_te, g_pe = embed_backward([1, 1], np.zeros((3, 2)), np.zeros((4, 2)), np.ones((2, 2)))
    >>> g_te[1], g_pe[2]
    (array([2., 2.]), array([0., 0.]))
    """
    wte, wpe = _check_tables(wte, wpe)
    ids = check_ids(ids, wte.shape[0], wpe.shape[0])
    grad_x = as_float_array(grad_x, "grad_x", min_ndim=2)
    want = (*ids.shape, wte.shape[1])
    if grad_x.shape != want:
        raise ValueError(f"grad_x must have shape {want} (..., n, d_model), got {grad_x.shape}")
    return _embed_backward(ids, grad_x.astype(np.result_type(wte, wpe, grad_x), copy=False),
                           wte.shape[0], wpe.shape[0])


def _embed_backward(ids, grad_x, vocab_size, n_ctx):
    vocab_size, n_ctx = check_positive_int(vocab_size, "vocab_size"), int(n_ctx)
    n, d = grad_x.shape[-2:]
    flat = ids.reshape(-1)  # (..., n) -> (N,)
    order = np.argsort(flat, kind="stable")  # the positions of each token side by side
    sorted_ids = flat[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])  # one per token
    grad_wte = np.zeros((vocab_size, d), dtype=grad_x.dtype)
    # (N, d) rows in token order -> one sum per distinct token
    grad_wte[sorted_ids[starts]] = np.add.reduceat(grad_x.reshape(-1, d)[order], starts, axis=0)
    grad_wpe = np.zeros((n_ctx, d), dtype=grad_x.dtype)
    grad_wpe[:n] = grad_x.reshape(-1, n, d).sum(axis=0)  # (..., n, d) -> (B, n, d) -> (n, d)
    return grad_wte, grad_wpe
