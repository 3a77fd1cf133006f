"""Toy tasks whose right attention pattern is known in advance, for training a head.

Each task draws a seeded batch of sequences as input *features* (one multi-hot row per
position), the class each scored position must predict, which positions are scored, and
the attention map a head needs to solve the task (so learning can be watched).

* look-up: ``n_pairs`` positions each hold a (key, value) pair, then a query position holds
  a key only; the answer is the value stored with that key, so the query must attend to
  the position whose key matches.
* previous token: every position holds one token; position ``i`` must output the token at
  position ``i - 1``, so each query must attend exactly one step back.
"""

from dataclasses import dataclass

import numpy as np

from ._validate import check_generator, check_option, check_positive_int


@dataclass(frozen=True)
class Batch:
    """One batch of a task.

    Attributes
    ----------
    features : (b, n, n_features) ndarray
        Multi-hot input rows (float64).
    targets : (b, n) int ndarray
        The class each position must predict (0 where the position is not scored).
    scored : (b, n) bool ndarray
        Which positions count in the loss.
    pattern : (b, n, n) ndarray
        The attention a perfect head gives on the scored rows (one 1 per scored row; rows
        that are not scored are 0).
    """

    features: np.ndarray
    targets: np.ndarray
    scored: np.ndarray
    pattern: np.ndarray


def key_value_pairs(rng, batch, n_pairs, n_keys, n_values):
    """Distinct keys per sequence and a value for each: the pairs of the recall tasks.

    Parameters
    ----------
    rng : numpy.random.Generator
    batch, n_pairs, n_keys, n_values : int
        Sequences, pairs per sequence (``n_pairs <= n_keys``), key and value vocabulary.

    Returns
    -------
    keys : (batch, n_pairs) int ndarray
        Distinct within a row, drawn from ``range(n_keys)``.
    values : (batch, n_pairs) int ndarray
        Drawn from ``range(n_values)`` (repeats allowed).
    """
    rng = check_generator(rng)
    batch, n_pairs = check_positive_int(batch, "batch"), check_positive_int(n_pairs, "n_pairs")
    n_keys, n_values = check_positive_int(n_keys, "n_keys"), check_positive_int(n_values,
                                                                               "n_values")
    if n_pairs > n_keys:
        raise ValueError(f"n_pairs must be <= n_keys (keys are distinct within a sequence), "
                         f"got n_pairs = {n_pairs} and n_keys = {n_keys}")
    keys = rng.random((batch, n_keys)).argsort(axis=1)[:, :n_pairs]  # (b, m): distinct keys
    values = rng.integers(0, n_values, size=(batch, n_pairs))  # (b, m)
    return keys, values


def lookup_batch(rng, batch, n_pairs=4, n_keys=8, n_values=8):
    """Key/value pairs then a query key: the answer is the value stored with that key.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of the (distinct per sequence) keys, the values and the queried pair.
    batch, n_pairs, n_keys, n_values : int
        Sequences, pairs per sequence (``n_pairs <= n_keys``), key and value vocabulary.

    Returns
    -------
    Batch
        ``features`` has ``n = n_pairs + 1`` rows of width ``n_keys + n_values``: a pair's
        row is ``onehot(key) ++ onehot(value)``, the query's row is ``onehot(key) ++ 0``.
        Only the query (last) row is scored; its pattern is 1 on the matching pair.

    Notes
    -----
    .. math:: y = v_{j^*}, \\quad j^* = \\text{the } j \\text{ with } k_j = k_{query}

    Examples
    --------
    >>> b = lookup_batch(np.random.default_rng(0), batch=2, n_pairs=3, n_keys=4, n_values=5)
    >>> b.features.shape, b.scored[0].tolist(), float(b.pattern[0, -1].sum())
    ((2, 4, 9), [False, False, False, True], 1.0)
    """
    rng = check_generator(rng)
    keys, values = key_value_pairs(rng, batch, n_pairs, n_keys, n_values)  # (b, m) each
    batch, n_pairs = keys.shape
    n_keys, n_values = int(n_keys), int(n_values)
    asked = rng.integers(0, n_pairs, size=batch)  # (b,): which pair the query asks for
    rows = np.arange(batch)
    n = n_pairs + 1
    features = np.zeros((batch, n, n_keys + n_values))
    features[rows[:, None], np.arange(n_pairs), keys] = 1.0  # key one-hots of the pairs
    features[rows[:, None], np.arange(n_pairs), n_keys + values] = 1.0  # value one-hots
    features[rows, n_pairs, keys[rows, asked]] = 1.0  # the query row: its key only
    targets = np.zeros((batch, n), dtype=int)
    targets[:, -1] = values[rows, asked]
    scored = np.zeros((batch, n), dtype=bool)
    scored[:, -1] = True
    pattern = np.zeros((batch, n, n))
    pattern[rows, -1, asked] = 1.0
    return Batch(features, targets, scored, pattern)


def previous_token_batch(rng, batch, n=6, vocab=8):
    """Random tokens; position ``i`` must output the token at position ``i - 1``.

    Parameters
    ----------
    rng : numpy.random.Generator
    batch, n, vocab : int
        Sequences, their length (>= 2) and the token vocabulary.

    Returns
    -------
    Batch
        ``features`` is ``onehot(token)`` of width ``vocab``; positions ``1..n-1`` are scored
        and their pattern is 1 one step back (the first diagonal below the main one).

    Notes
    -----
    .. math:: y_i = t_{i-1}, \\quad i = 1, \\dots, n-1

    Examples
    --------
    >>> b = previous_token_batch(np.random.default_rng(0), batch=1, n=4, vocab=5)
    >>> tokens = b.features[0].argmax(axis=-1)
    >>> bool((b.targets[0, 1:] == tokens[:-1]).all()), b.pattern[0].astype(int)[2].tolist()
    (True, [0, 1, 0, 0])
    """
    rng = check_generator(rng)
    batch, vocab = check_positive_int(batch, "batch"), check_positive_int(vocab, "vocab")
    n = check_positive_int(n, "n", minimum=2)
    tokens = rng.integers(0, vocab, size=(batch, n))  # (b, n)
    features = np.eye(vocab)[tokens]  # (b, n) -> (b, n, vocab)
    targets = np.zeros((batch, n), dtype=int)
    targets[:, 1:] = tokens[:, :-1]
    scored = np.ones((batch, n), dtype=bool)
    scored[:, 0] = False
    pattern = np.broadcast_to(np.eye(n, k=-1), (batch, n, n)).copy()  # row i: 1 at i - 1
    return Batch(features, targets, scored, pattern)


#: The tasks by name, with the sizes the course trains on (small enough for a few seconds).
TASKS = {
    "lookup": (lookup_batch, {"n_pairs": 4, "n_keys": 8, "n_values": 8}),
    "previous": (previous_token_batch, {"n": 6, "vocab": 8}),
}


def check_task(task):
    """``task`` if it names one of :data:`TASKS`, else a clear TypeError or ValueError."""
    return check_option(task, "task", tuple(TASKS))


def make_batch(task, rng, batch):
    """A batch of the named task (``"lookup"`` or ``"previous"``) at the course's sizes.

    Examples
    --------
    >>> make_batch("previous", np.random.default_rng(0), 3).features.shape
    (3, 6, 8)
    """
    make, sizes = TASKS[check_task(task)]
    return make(rng, batch, **sizes)


def n_classes(task):
    """How many classes the named task's answers range over."""
    sizes = TASKS[check_task(task)][1]
    return sizes.get("n_values", sizes.get("vocab"))
