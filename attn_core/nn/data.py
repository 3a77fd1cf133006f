"""The character-level data of the tiny GPT: vocabulary, corpus, split and batches.

The corpus is the prose of Python's documentation shipped in ``attn_core/data/corpus.txt``
(source, licence and extraction in ``attn_core/data/README.md``). A character is a token: the
vocabulary is the sorted set of the text's characters, and a token id is a position in it.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._validate import check_positive_int

__all__ = ["CharVocab", "CORPUS_PATH", "get_batch", "load_corpus", "split_corpus"]

#: The shipped training text (about 420 KB of ASCII).
CORPUS_PATH = Path(__file__).resolve().parents[1] / "data" / "corpus.txt"


@dataclass(frozen=True)
class CharVocab:
    """A character vocabulary: token id ``i`` is the character ``chars[i]``.

    Parameters
    ----------
    chars : str
        The distinct characters, in id order.

    Examples
    --------
    >>> v = CharVocab.from_text("hello")
    >>> v.chars, len(v)
    ('ehlo', 4)
    >>> v.encode("hole")
    array([1, 3, 2, 0])
    >>> v.decode([1, 0, 2, 2, 3])
    'hello'
    """

    chars: str

    def __post_init__(self):
        if not isinstance(self.chars, str) or not self.chars:
            raise TypeError(f"chars must be a non-empty str, got {self.chars!r}")
        if len(set(self.chars)) != len(self.chars):
            raise ValueError(f"chars must hold each character once, got {self.chars!r}")

    @classmethod
    def from_text(cls, text):
        """The vocabulary of ``text``: its distinct characters, sorted."""
        if not isinstance(text, str) or not text:
            raise TypeError(f"text must be a non-empty str, got {type(text).__name__} "
                            f"{text!r:.40}")
        return cls("".join(sorted(set(text))))

    def __len__(self):
        return len(self.chars)

    @property
    def index(self):
        """Dict from character to id."""
        return {c: i for i, c in enumerate(self.chars)}

    def encode(self, text):
        """``text`` as an int64 array of ids, shape ``(len(text),)``.

        A character outside the vocabulary is a ValueError that names every such character,
        in the order of its first appearance in ``text``.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        index = self.index
        unknown = list(dict.fromkeys(c for c in text if c not in index))  # as typed
        if unknown:
            raise ValueError(f"text holds {len(unknown)} character(s) outside the vocabulary "
                             f"of {len(self)}: {', '.join(repr(c) for c in unknown)}")
        return np.fromiter((index[c] for c in text), dtype=np.int64, count=len(text))

    def decode(self, ids):
        """The string of the ids ``(n,)`` (any int array_like)."""
        ids = np.asarray(ids)
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise TypeError(f"ids must be a 1-D array of ints, got dtype {ids.dtype} and shape "
                            f"{ids.shape}")
        bad = (ids < 0) | (ids >= len(self))
        if bad.any():
            raise ValueError(f"ids must lie in 0..{len(self) - 1}, got {ids[bad][:5].tolist()}")
        return "".join(self.chars[i] for i in ids.tolist())


def load_corpus(path=None):
    """The shipped corpus (``attn_core/data/corpus.txt``) or the text file at ``path``.

    Returns
    -------
    text : str

    Examples
    --------
    >>> text = load_corpus()
    >>> len(text) > 100_000, text[:8]
    (True, 'Appendix')
    """
    path = CORPUS_PATH if path is None else Path(path)
    return path.read_text(encoding="utf-8")


def split_corpus(text, val_fraction=0.1):
    """Split a text into training and validation parts: validation is the LAST part.

    Parameters
    ----------
    text : str or (n,) int ndarray
    val_fraction : float in (0, 1)

    Returns
    -------
    train, val : the first ``n - n_val`` and the last ``n_val = round(n * val_fraction)``
        items. They do not overlap, so a batch drawn from ``train`` never holds validation
        text.

    Examples
    --------
    >>> split_corpus("abcdefghij", 0.2)
    ('abcdefgh', 'ij')
    """
    if not isinstance(text, (str, np.ndarray)) or (isinstance(text, np.ndarray)
                                                   and text.ndim != 1):
        raise TypeError(f"text must be a str or a 1-D array of token ids, got "
                        f"{type(text).__name__} {getattr(text, 'shape', '')}")
    if not isinstance(val_fraction, numbers.Real) or not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be a number in (0, 1), got {val_fraction!r}")
    n = len(text)
    n_val = int(round(n * val_fraction))
    if n_val < 1 or n_val >= n:
        raise ValueError(f"the text of length {n} is too short to split with val_fraction "
                         f"{val_fraction}: it leaves {n_val} validation and {n - n_val} "
                         "training items")
    return text[: n - n_val], text[n - n_val:]


def batch_starts(rng, n_ids, batch, n_ctx):
    """The ``batch`` random window starts ``(batch,)`` in ``0 .. n_ids - n_ctx - 1``.

    A window ``ids[s : s + n_ctx + 1]`` needs ``n_ctx + 1`` ids (inputs and the target after
    the last), so the text must be longer than ``n_ctx``.
    """
    batch = check_positive_int(batch, "batch")
    n_ctx = check_positive_int(n_ctx, "n_ctx")
    if n_ids < n_ctx + 1:
        raise ValueError(f"the ids of length {n_ids} are too short for one batch: a window of "
                         f"n_ctx = {n_ctx} inputs needs n_ctx + 1 = {n_ctx + 1} ids "
                         f"(batch = {batch})")
    return rng.integers(0, n_ids - n_ctx, size=batch)


def get_batch(rng, ids, batch, n_ctx):
    """A random batch of training windows and their next-character targets.

    Parameters
    ----------
    rng : numpy.random.Generator
    ids : (n,) int ndarray
        The token ids of the training text.
    batch : int
        Number of windows.
    n_ctx : int
        Length of each window.

    Returns
    -------
    x : (batch, n_ctx) int64 ndarray
        ``x[b] = ids[s_b : s_b + n_ctx]``.
    y : (batch, n_ctx) int64 ndarray
        The targets, shifted by one: ``y[b] = ids[s_b + 1 : s_b + n_ctx + 1]``.

    Notes
    -----
    Every index used is below ``len(ids)``: a batch drawn from the training part of
    :func:`split_corpus` never touches the validation part.

    Examples
    --------
    >>> x, y = get_batch(np.random.default_rng(0), np.arange(10), batch=2, n_ctx=3)
    >>> x.shape, bool((y == x + 1).all())
    ((2, 3), True)
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got "
                        f"{type(rng).__name__}")
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise TypeError(f"ids must be a 1-D int array of token ids, got dtype {ids.dtype} and "
                        f"shape {ids.shape}")
    starts = batch_starts(rng, len(ids), batch, n_ctx)
    offsets = starts[:, None] + np.arange(n_ctx)[None, :]  # (batch, 1) + (1, n_ctx)
    return ids[offsets].astype(np.int64), ids[offsets + 1].astype(np.int64)
