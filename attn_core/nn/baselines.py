"""What a model without attention scores: unigram and bigram baselines, in nats per character.

A GPT's validation loss means little alone. The unigram model predicts every character from
its frequency in the training text, ignoring context; the bigram model from the one
character before it. Both are counted on the training ids and scored on the validation ids,
so "the GPT beats the bigram" says what looking further back (attention) adds.

Counts are smoothed by adding ``alpha`` (default :data:`ALPHA` = 1, Laplace) to every
cell, so a character never seen (after some character) in training still has a finite loss.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._validate import check_positive_int

__all__ = ["ALPHA", "bigram_loss", "bigram_probs", "unigram_loss", "unigram_probs"]

#: Add-alpha (Laplace) smoothing used by both baselines.
ALPHA = 1.0


def _ids(ids, name, vocab_size, min_len=1):
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise TypeError(f"{name} must be a 1-D int array of token ids, got dtype {ids.dtype} "
                        f"and shape {ids.shape}")
    if len(ids) < min_len:
        raise ValueError(f"{name} must hold at least {min_len} ids, got {len(ids)}")
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError(f"{name} must lie in 0..{vocab_size - 1} (vocab_size {vocab_size}), "
                         f"got ids from {ids.min()} to {ids.max()}")
    return ids.astype(np.int64)


def _alpha(alpha):
    if not isinstance(alpha, numbers.Real) or not alpha > 0 or not np.isfinite(alpha):
        raise ValueError(f"alpha must be a positive finite number, got {alpha!r}")
    return float(alpha)


def unigram_probs(train_ids, vocab_size, alpha=ALPHA):
    """Smoothed character frequencies ``(vocab_size,)`` of the training ids.

    Notes
    -----
    .. math:: p(c) = \\frac{N(c) + \\alpha}{N + \\alpha V}

    Examples
    --------
    >>> unigram_probs(np.array([0, 0, 1]), 3, alpha=1.0)
    array([0.5       , 0.33333333, 0.16666667])
    """
    vocab_size = check_positive_int(vocab_size, "vocab_size")
    train_ids = _ids(train_ids, "train_ids", vocab_size)
    counts = np.bincount(train_ids, minlength=vocab_size) + _alpha(alpha)  # (V,)
    return counts / counts.sum()


def bigram_probs(train_ids, vocab_size, alpha=ALPHA):
    """Smoothed next-character table ``(vocab_size, vocab_size)``: row ``a`` is p(. | a).

    Notes
    -----
    .. math:: p(b \\mid a) = \\frac{N(a b) + \\alpha}{N(a \\cdot) + \\alpha V}

    Examples
    --------
    >>> bigram_probs(np.array([0, 1, 0, 1]), 2, alpha=1.0)
    array([[0.25      , 0.75      ],
           [0.66666667, 0.33333333]])
    """
    vocab_size = check_positive_int(vocab_size, "vocab_size")
    train_ids = _ids(train_ids, "train_ids", vocab_size, min_len=2)
    pair = train_ids[:-1] * vocab_size + train_ids[1:]  # (n-1,) flat index of (a, b)
    counts = np.bincount(pair, minlength=vocab_size * vocab_size).astype(np.float64)
    counts = counts.reshape(vocab_size, vocab_size) + _alpha(alpha)  # (V*V,) -> (V, V)
    return counts / counts.sum(axis=1, keepdims=True)


def unigram_loss(train_ids, val_ids, vocab_size, alpha=ALPHA):
    """Mean cross-entropy (nats per character) of the unigram model on ``val_ids``.

    Notes
    -----
    .. math:: L = -\\frac{1}{n} \\sum_{t} \\ln p(x_t)

    Examples
    --------
    >>> round(unigram_loss(np.array([0, 1]), np.array([0, 1, 0]), 2), 4)  # ln 2
    0.6931
    """
    probs = unigram_probs(train_ids, vocab_size, alpha)
    val_ids = _ids(val_ids, "val_ids", vocab_size)
    return float(-np.log(probs[val_ids]).mean())


def bigram_loss(train_ids, val_ids, vocab_size, alpha=ALPHA):
    """Mean cross-entropy (nats per character) of the bigram model on ``val_ids``.

    Scores the ``n - 1`` characters of ``val_ids`` that have a predecessor in it.

    Notes
    -----
    .. math:: L = -\\frac{1}{n - 1} \\sum_{t=1}^{n-1} \\ln p(x_t \\mid x_{t-1})

    Examples
    --------
    >>> round(bigram_loss(np.array([0, 1, 0, 1]), np.array([0, 1]), 2), 4)  # -ln 0.75
    0.2877
    """
    probs = bigram_probs(train_ids, vocab_size, alpha)
    val_ids = _ids(val_ids, "val_ids", vocab_size, min_len=2)
    return float(-np.log(probs[val_ids[:-1], val_ids[1:]]).mean())
