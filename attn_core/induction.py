"""Induction heads, the maths: sequences with a repeated segment, and what a head's
attention map says about its job (notebook 15).

An induction head (Elhage et al. 2021, "A mathematical framework for transformer circuits";
Olsson et al. 2022, "In-context learning and induction heads") at query position ``i``
attends to the position *one after* an earlier occurrence of the current token ``ids[i]``,
and copies what it finds there: ``[A][B] ... [A] -> [B]``. It needs a previous-token head
in an earlier layer (each position ``j`` attending to ``j - 1``), so that the key at ``j``
knows the token before it.

* :func:`repeated_tokens` -- random tokens with one segment repeated (seeded), with labels
  of the first and second copy; ``distinct=True`` gives sequences with no repeat at all.
* :func:`diagonal_score`, :func:`previous_token_score` -- weight on position ``i - offset``.
* :func:`induction_targets`, :func:`induction_score` -- weight on the positions one after an
  earlier occurrence of the current token.
* :func:`icl_score` -- Olsson et al.'s in-context learning score: late loss minus early loss.

Every function takes attention weights ``(..., n, n)`` (rows are queries) and token ids
``(..., n)``; leading dims are independent maps (batch, heads).
"""

import numpy as np

from ._validate import as_float_array, check_positive_int

__all__ = ["FIRST", "OUTSIDE", "SECOND", "diagonal_score", "icl_score", "induction_score",
           "induction_targets", "previous_token_score", "repeated_tokens"]

#: Labels of :func:`repeated_tokens`: a token outside the copies (or a copy's first token,
#: which nothing in the context predicts), in the first copy, in the second copy.
OUTSIDE, FIRST, SECOND = 0, 1, 2


def _range(value, name):
    """``(lo, hi)`` inclusive from an int or a pair."""
    lo, hi = (value, value) if np.ndim(value) == 0 else tuple(value)
    lo = check_positive_int(lo, f"{name} (its lower end)", minimum=0)
    hi = check_positive_int(hi, f"{name} (its upper end)", minimum=0)
    if hi < lo:
        raise ValueError(f"{name} must be an int or (lo, hi) with lo <= hi, got {value!r}")
    return lo, hi


def repeated_tokens(rng, batch, vocab_size, n, segment, gap=0, distinct=False):
    """Random token sequences in which one random segment appears twice.

    Parameters
    ----------
    rng : numpy.random.Generator
    batch, vocab_size, n : int
        Number of sequences, tokens ``0..vocab_size - 1``, length of each.
    segment : int or (int, int)
        Length ``L`` of the repeated segment (drawn uniformly from ``lo..hi`` per sequence).
    gap : int or (int, int)
        Random tokens between the two copies (drawn likewise); the first copy starts at a
        uniform position that leaves room for both. ``segment=L, gap=0, n=2L`` is the
        classic "L random tokens, then the same L again".
    distinct : bool
        True: every token of a sequence differs from every other (drawn without
        replacement, needs ``n <= vocab_size``) and the second "copy" is fresh tokens, so
        nothing repeats; the labels still mark where the copies would be.

    Returns
    -------
    ids : (batch, n) int64 ndarray
    labels : (batch, n) int8 ndarray
        :data:`FIRST` on tokens 2..L of the first copy, :data:`SECOND` on tokens 2..L of
        the second (predictable from the context: the token before them was seen before,
        followed by them), :data:`OUTSIDE` elsewhere.

    Examples
    --------
    >>> ids, labels = repeated_tokens(np.random.default_rng(0), 2, 10, 6, segment=3)
    >>> bool((ids[:, :3] == ids[:, 3:]).all()), labels[0].tolist()
    (True, [0, 1, 1, 0, 2, 2])
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    batch = check_positive_int(batch, "batch")
    vocab_size = check_positive_int(vocab_size, "vocab_size")
    n = check_positive_int(n, "n")
    seg, gaps = _range(segment, "segment"), _range(gap, "gap")
    if seg[0] < 2:
        raise ValueError(f"segment must be at least 2 tokens, got {segment!r}")
    if 2 * seg[1] + gaps[1] > n:
        raise ValueError(f"two copies of up to {seg[1]} tokens with a gap of up to {gaps[1]} "
                         f"do not fit in n = {n}")
    if distinct and n > vocab_size:
        raise ValueError(f"distinct=True needs n <= vocab_size, got n = {n} > {vocab_size}")
    ids = np.empty((batch, n), dtype=np.int64)
    labels = np.full((batch, n), OUTSIDE, dtype=np.int8)
    for b in range(batch):
        length = int(rng.integers(seg[0], seg[1] + 1))
        g = int(rng.integers(gaps[0], gaps[1] + 1))
        start = int(rng.integers(0, n - 2 * length - g + 1))
        if distinct:
            ids[b] = rng.permutation(vocab_size)[:n]
        else:
            ids[b] = rng.integers(0, vocab_size, n)
            second = start + length + g
            ids[b, second:second + length] = ids[b, start:start + length]
        labels[b, start + 1:start + length] = FIRST
        labels[b, start + length + g + 1:start + 2 * length + g] = SECOND
    return ids, labels


def _check_weights(weights):
    w = as_float_array(weights, "weights", min_ndim=2, layout="(..., n, n)")
    if w.shape[-1] != w.shape[-2]:
        raise ValueError(f"weights must be square attention maps (..., n, n), got shape {w.shape}")
    return w


def _check_attention_maps(w, name="weights"):
    """Refuse what is not a stack of attention maps: rows of weights >= 0 summing to 1
    (within 1e-6 in float64, 1e-3 in a lower precision)."""
    if np.any(w < 0):
        i = np.unravel_index(int(np.argmin(w)), w.shape)
        raise ValueError(f"{name} must be attention maps (rows of weights >= 0 that sum to 1, "
                         f"softmax's output), but entry {tuple(int(k) for k in i)} is "
                         f"{float(w[i]):.4g}: raw scores? apply the softmax first")
    sums = w.sum(axis=-1)  # (..., n)
    tol = 1e-6 if w.dtype == np.float64 else 1e-3
    bad = np.abs(sums - 1) > tol
    if np.any(bad):
        i = tuple(int(k) for k in np.argwhere(bad)[0])
        raise ValueError(f"{name} must be attention maps (rows of weights >= 0 that sum to 1, "
                         f"softmax's output), but row {i} sums to {float(sums[i]):.6g}")
    return w


def diagonal_score(weights, offset):
    """Mean weight each query puts on the key ``offset`` positions before it (the one
    implementation of the neighbour scores: ``attn_core.model.head_roles`` uses it too).

    Parameters
    ----------
    weights : (..., n, n) array_like
        Attention maps, row ``i`` the weights of query ``i``.
    offset : int
        ``-n < offset < n``: 1 the previous token, 0 the query itself, -1 the next token.

    Returns
    -------
    (...,) ndarray
        :math:`\\frac{1}{n - |o|} \\sum_i w_{i, i-o}` over the queries that have such a key:
        1 for a head that always looks exactly ``offset`` back.

    Examples
    --------
    >>> float(diagonal_score(np.eye(4, k=-1) + np.eye(4, k=0) * [1, 0, 0, 0], 1))
    1.0
    """
    w = _check_weights(weights)
    n = w.shape[-1]
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
        raise TypeError(f"offset must be an int, got {type(offset).__name__}")
    if not -n < offset < n:
        raise ValueError(f"offset must be between {1 - n} and {n - 1} (n = {n}), got {offset}")
    # np.diagonal's offset counts columns to the right: the key o back is diagonal -o
    return np.diagonal(w, offset=-int(offset), axis1=-2, axis2=-1).mean(axis=-1)


def previous_token_score(weights):
    """Mean weight on the previous token, :func:`diagonal_score` with offset 1:
    :math:`\\frac{1}{n-1} \\sum_{i \\ge 1} w_{i, i-1}`, ``(..., n, n) -> (...,)``."""
    return diagonal_score(weights, 1)


def _check_ids(ids):
    ids = np.asarray(ids)
    if ids.ndim < 1 or not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"ids must be an integer array (..., n), got dtype {ids.dtype} and "
                        f"shape {ids.shape}")
    return ids


def induction_targets(ids):
    """Where an induction head should look: ``T[..., i, j]`` is True when the token before
    ``j`` is an earlier occurrence of the current token, ``ids[j - 1] == ids[i]`` with
    ``1 <= j <= i``.

    Parameters
    ----------
    ids : (..., n) int array_like

    Returns
    -------
    (..., n, n) bool ndarray

    Examples
    --------
    >>> induction_targets([5, 7, 5])[2].tolist()  # query 2 (a 5): look after the first 5
    [False, True, False]
    """
    ids = _check_ids(ids)
    n = ids.shape[-1]
    same = ids[..., :, None] == ids[..., None, :]  # (..., n, 1) == (..., 1, n) -> (..., n, n)
    targets = np.zeros(same.shape, dtype=bool)
    targets[..., 1:] = same[..., :-1]  # key j is a target when key j - 1 holds the query's token
    return targets & np.tri(n, k=0, dtype=bool)  # j <= i (j - 1 < i)


def induction_score(weights, ids):
    """Mean weight on the induction targets, over the queries that have one.

    Parameters
    ----------
    weights : (..., n, n) array_like
        Attention maps (e.g. ``(batch, heads, n, n)``).
    ids : (..., n) int array_like
        The tokens, broadcasting against the maps' leading dims (``ids[:, None]`` for
        ``(batch, heads, n, n)`` maps).

    Returns
    -------
    (...,) ndarray
        :math:`\\frac{1}{|Q|} \\sum_{i \\in Q} \\sum_j w_{ij} T_{ij}` with ``T`` of
        :func:`induction_targets` and ``Q`` the queries with at least one target: 1 for a
        perfect induction head, near 0 for a previous-token head.

    Raises
    ------
    ValueError
        If ``weights`` are not attention maps (an entry below 0, a row not summing to 1:
        raw scores, say). If some map's sequence has no query with a target (no token
        occurs twice): the score is undefined there, there is nothing to find.

    Examples
    --------
    >>> ids = [3, 4, 5, 3, 4, 5]
    >>> perfect = induction_targets(ids) + np.diag([1.0, 1, 1, 0, 0, 0])  # 3, 4, 5: on target
    >>> previous = np.eye(6, k=-1) + np.diag([1.0, 0, 0, 0, 0, 0])  # 0 on itself
    >>> float(induction_score(perfect, ids)), float(induction_score(previous, ids))
    (1.0, 0.0)
    """
    w = _check_weights(weights)
    targets = induction_targets(ids)
    if targets.shape[-1] != w.shape[-1]:
        raise ValueError(f"ids must have n = {w.shape[-1]} tokens (the maps' size), got "
                         f"{targets.shape[-1]}")
    try:
        targets = np.broadcast_to(targets, np.broadcast_shapes(targets.shape, w.shape))
    except ValueError:
        raise ValueError(f"ids of shape {np.shape(ids)} do not broadcast against weights of "
                         f"shape {w.shape} (for (batch, heads, n, n) maps pass ids[:, None])"
                         ) from None
    has = targets.any(axis=-1)  # (..., n): queries with something to find
    count = has.sum(axis=-1)  # (...,)
    if np.any(count == 0):
        raise ValueError("ids has a sequence in which no token occurs twice: the induction "
                         "score is undefined there (nothing to find)")
    _check_attention_maps(w)  # (after the ids: nothing to find is said first)
    mass = np.where(targets, w, 0.0).sum(axis=-1)  # (..., n): weight on the targets
    return np.where(has, mass, 0.0).sum(axis=-1) / count


def icl_score(token_losses, early, late):
    """Olsson et al. 2022's in-context learning score: the mean loss at late positions
    minus the mean loss at early positions (negative: the model uses its context).

    Parameters
    ----------
    token_losses : (..., n) array_like
        Cross-entropy of the prediction at each position.
    early, late : int, slice or index array
        The positions compared (Olsson et al.: token 500 against token 50).

    Returns
    -------
    (...,) ndarray

    Examples
    --------
    >>> float(icl_score([3.0, 3.0, 1.0, 0.5], early=slice(0, 2), late=slice(2, 4)))
    -2.25
    """
    losses = as_float_array(token_losses, "token_losses", min_ndim=1)
    late_part = np.asarray(losses[..., late])
    early_part = np.asarray(losses[..., early])
    if early_part.size == 0 or late_part.size == 0:
        raise ValueError("early and late must each select at least one position")
    return late_part.reshape(*losses.shape[:-1], -1).mean(-1) - early_part.reshape(
        *losses.shape[:-1], -1).mean(-1)
