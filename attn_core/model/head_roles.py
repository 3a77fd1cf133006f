"""Scores that say how much a head behaves like a known pattern, computed from its weights.

Each score is a number in [0, 1] per head: the share of attention, averaged over the
queries it applies to, that goes where the pattern says. A head that spread its attention
evenly over ``n`` keys would score about ``1/n``, so that is the baseline to compare with.

Every function takes attention weights of shape ``(..., n, n)`` (rows are queries and sum
to 1) and returns scores of shape ``(...)``: one per head for ``(layers, heads, n, n)``.
"""

from __future__ import annotations

import numpy as np

from .._validate import as_float_array
from ..induction import diagonal_score

__all__ = [
    "HeadScore",
    "attention_to_position",
    "heads_above",
    "next_token_score",
    "previous_token_score",
    "same_word_partners",
    "same_word_score",
    "self_score",
    "top_key",
]


def _weights(weights):
    w = as_float_array(weights, "weights", min_ndim=2, layout="(..., n, n)")
    if w.shape[-1] != w.shape[-2]:
        raise ValueError(f"weights must be square in the last two axes (..., n, n), "
                         f"got shape {w.shape}")
    return w


def _position(index, n, name):
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise TypeError(f"{name} must be an int position, got {type(index).__name__}")
    if not -n <= index < n:
        raise ValueError(f"{name} must be a position between 0 and {n - 1}, got {index}")
    return int(index) % n


def previous_token_score(weights):
    """Mean weight each query puts on the token just before it.

    Parameters
    ----------
    weights : (..., n, n) array_like, n >= 2

    Returns
    -------
    score : (...) ndarray
        ``mean over i = 1..n-1 of weights[..., i, i-1]``.

    Examples
    --------
    >>> shift = np.eye(4, k=-1); shift[0, 0] = 1.0  # each token looks at its predecessor
    >>> float(previous_token_score(shift))
    1.0
    """
    return _neighbour_score(weights, -1, "a previous token")


def next_token_score(weights):
    """Mean weight each query puts on the token just after it (the mirror of previous).

    Parameters
    ----------
    weights : (..., n, n) array_like, n >= 2

    Returns
    -------
    score : (...) ndarray
        ``mean over i = 0..n-2 of weights[..., i, i+1]``.

    Examples
    --------
    >>> float(next_token_score(np.eye(3, k=1) + np.eye(3, k=-2)))
    1.0
    """
    return _neighbour_score(weights, 1, "a next token")


def _neighbour_score(weights, offset, what):
    """Mean of the diagonal ``offset`` of ``weights``: -1 the previous token, +1 the next."""
    w = _weights(weights)
    if w.shape[-1] < 2:
        raise ValueError(f"weights must cover at least 2 positions for {what}, "
                         f"got n = {w.shape[-1]}")
    return diagonal_score(w, -offset)  # diagonal_score counts back: -1 is the next token


def self_score(weights):
    """Mean weight each query puts on itself (the diagonal).

    Parameters
    ----------
    weights : (..., n, n) array_like

    Returns
    -------
    score : (...) ndarray

    Examples
    --------
    >>> float(self_score(np.eye(3)))
    1.0
    """
    return np.diagonal(_weights(weights), axis1=-2, axis2=-1).mean(axis=-1)


def attention_to_position(weights, key, queries=None):
    """Mean weight that the queries put on one key (e.g. the separator token).

    Parameters
    ----------
    weights : (..., n, n) array_like
    key : int
        0-based key position; negative counts from the end (-1 = last).
    queries : sequence of int, optional
        The query rows to average over (default: every row).

    Returns
    -------
    score : (...) ndarray

    Examples
    --------
    >>> w = np.full((3, 3), 0.1); w[:, 2] = 0.8
    >>> float(np.round(attention_to_position(w, -1), 6))
    0.8
    """
    w = _weights(weights)
    n = w.shape[-1]
    key = _position(key, n, "key")
    rows = list(range(n)) if queries is None else [_position(q, n, "queries") for q in queries]
    if not rows:
        raise ValueError("queries must name at least one query position, got none")
    return w[..., rows, key].mean(axis=-1)


def same_word_partners(words):
    """For each position, the other positions that carry the same word.

    Parameters
    ----------
    words : sequence of n hashables or None
        One label per position (for example the lower-cased word a piece belongs to);
        None (special tokens) never matches anything.

    Returns
    -------
    partners : list of n lists of int

    Examples
    --------
    >>> same_word_partners([None, "the", "cat", "the", None])
    [[], [3], [], [1], []]
    """
    words = list(words)
    return [[j for j, v in enumerate(words) if j != i and u is not None and v == u]
            for i, u in enumerate(words)]


def same_word_score(weights, words):
    """Mean weight a query puts on other positions carrying the same word as itself.

    Averaged over the queries that have such partners (a repeated word, or the other
    pieces of a word split into several pieces).

    Parameters
    ----------
    weights : (..., n, n) array_like
    words : sequence of n hashables or None
        See :func:`same_word_partners`.

    Returns
    -------
    score : (...) ndarray

    Raises
    ------
    ValueError
        If no position has a partner: the pattern cannot be measured on this sentence.

    Examples
    --------
    >>> w = np.full((4, 4), 0.25)
    >>> float(same_word_score(w, ["a", "b", "a", "c"]))
    0.25
    """
    w = _weights(weights)
    partners = same_word_partners(words)
    if len(partners) != w.shape[-1]:
        raise ValueError(f"words must have one entry per position (n = {w.shape[-1]}), "
                         f"got {len(partners)}")
    rows = [i for i, p in enumerate(partners) if p]
    if not rows:
        raise ValueError("words has no word that occurs at two positions: the same-word "
                         "pattern cannot be measured on this sentence")
    mass = [w[..., i, p].sum(axis=-1) for i, p in ((i, partners[i]) for i in rows)]
    return np.mean(mass, axis=0)


def top_key(weights, query):
    """The key each head's ``query`` row weights most.

    Parameters
    ----------
    weights : (..., n, n) array_like
    query : int
        0-based query position.

    Returns
    -------
    keys : (...) int ndarray

    Examples
    --------
    >>> int(top_key(np.array([[0.5, 0.5], [0.2, 0.8]]), 1))
    1
    """
    w = _weights(weights)
    query = _position(query, w.shape[-1], "query")
    return np.argmax(w[..., query, :], axis=-1)


class HeadScore(tuple):
    """``(layer, head, score)`` with 1-based layer and head, as the prose counts them."""

    __slots__ = ()

    def __new__(cls, layer, head, score):
        return super().__new__(cls, (layer, head, score))

    layer = property(lambda self: self[0])
    head = property(lambda self: self[1])
    score = property(lambda self: self[2])

    def __repr__(self):
        return f"HeadScore(layer={self.layer}, head={self.head}, score={self.score:.3f})"


def heads_above(scores, threshold):
    """The heads whose score is at least ``threshold``, best first.

    Parameters
    ----------
    scores : (layers, heads) array_like
    threshold : float

    Returns
    -------
    list of HeadScore
        1-based ``layer`` and ``head``, sorted by score, highest first.

    Examples
    --------
    >>> heads_above([[0.1, 0.9], [0.6, 0.2]], 0.5)
    [HeadScore(layer=1, head=2, score=0.900), HeadScore(layer=2, head=1, score=0.600)]
    """
    s = as_float_array(scores, "scores", min_ndim=2, layout="(layers, heads)")
    if s.ndim != 2:
        raise ValueError(f"scores must have shape (layers, heads), got shape {s.shape}")
    found = [HeadScore(int(l) + 1, int(h) + 1, float(s[l, h]))
             for l, h in zip(*np.nonzero(s >= threshold))]
    return sorted(found, key=lambda x: -x.score)
