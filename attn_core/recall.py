"""Multi-query associative recall (MQAR): the task that separates the fixed-size states.

Arora et al. ("Zoology: measuring and improving recall in efficient language models", ICLR
2024, arXiv 2312.04927) find that the gap between attention and its sub-quadratic
replacements on real text is mostly one skill: recalling, for a token seen earlier, what
followed it. Their synthetic task isolates it: a sequence of key-value pairs, then keys
again; after each repeated key the model must produce its value.

    k_1 v_1 k_2 v_2 ... k_m v_m   q_1 q_2 ... q_m      (each q a shuffled k, answer its v)

Attention keeps every pair in its cache and looks the key up. A recurrent state of fixed size
``d_k x d_v`` must hold all ``m`` pairs at once: :func:`state_recall` measures, without any
training, how well a sum of outer products and the delta rule do that for given keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import as_float_array, check_generator, check_option
from .delta_rule import delta_rule_recurrent
from .tasks import key_value_pairs

__all__ = ["RecallBatch", "mqar_batch", "state_recall"]


@dataclass(frozen=True)
class RecallBatch:
    """One batch of MQAR.

    Attributes
    ----------
    ids : (b, n) int ndarray
        Tokens: keys are ``0 .. n_keys - 1``, values ``n_keys .. n_keys + n_values - 1``;
        ``n = 3 m``: ``m`` pairs, then the ``m`` keys again in a random order.
    targets : (b, n) int ndarray
        At a query position the value's class ``0 .. n_values - 1``; 0 elsewhere.
    scored : (b, n) bool ndarray
        The query positions.
    source : (b, n) int ndarray
        At a query position, the position of the value token of its pair (where a layer that
        binds each value to the key before it stores the pair); -1 elsewhere.
    """

    ids: np.ndarray
    targets: np.ndarray
    scored: np.ndarray
    source: np.ndarray


def mqar_batch(rng, batch, n_pairs, n_keys=32, n_values=32):
    """Draw ``batch`` MQAR sequences of ``n_pairs`` distinct keys with random values.

    Parameters
    ----------
    rng : numpy.random.Generator
    batch, n_pairs : int
        Sequences and pairs per sequence (``n_pairs <= n_keys``).
    n_keys, n_values : int
        Sizes of the key and value vocabularies.

    Returns
    -------
    RecallBatch

    Examples
    --------
    >>> b = mqar_batch(np.random.default_rng(0), batch=1, n_pairs=2, n_keys=4, n_values=3)
    >>> b.ids.shape, b.scored[0].tolist()
    ((1, 6), [False, False, False, False, True, True])
    """
    rng = check_generator(rng)
    keys, values = key_value_pairs(rng, batch, n_pairs, n_keys, n_values)  # (b, m) each
    batch, m = keys.shape
    n_keys, n_values = int(n_keys), int(n_values)
    order = rng.random((batch, m)).argsort(axis=1)  # (b, m): which pair each query asks
    rows = np.arange(batch)[:, None]
    ids = np.empty((batch, 3 * m), dtype=int)
    ids[:, 0:2 * m:2] = keys
    ids[:, 1:2 * m:2] = n_keys + values
    ids[:, 2 * m:] = keys[rows, order]
    targets = np.zeros((batch, 3 * m), dtype=int)
    targets[:, 2 * m:] = values[rows, order]
    scored = np.zeros((batch, 3 * m), dtype=bool)
    scored[:, 2 * m:] = True
    source = np.full((batch, 3 * m), -1)
    source[:, 2 * m:] = 2 * order + 1
    return RecallBatch(ids, targets, scored, source)


def state_recall(keys, values, rule="sum"):
    """Write ``m`` pairs into a ``(d_k, d_v)`` state and read each key back, with no training.

    Parameters
    ----------
    keys : (..., m, d_k) array_like
        Unit keys (normalise them first).
    values : (..., m, d_v) array_like
    rule : {"sum", "delta"}
        ``"sum"``: ``S = sum_j k_j v_j^T`` (linear attention); ``"delta"``: the delta rule
        with step size 1.

    Returns
    -------
    read : (..., m, d_v) ndarray
        ``k_i^T S`` for each key: equal to ``values`` exactly when the rule stored the pair.

    Notes
    -----
    With the sum, ``k_i^T S = v_i + sum_{j != i} (k_i . k_j) v_j``: exact for orthonormal
    keys, which exist only while ``m <= d_k``; beyond, the cross terms do not vanish.

    Examples
    --------
    >>> eye = np.eye(2)
    >>> state_recall(eye, [[1.0], [2.0]]).tolist()  # orthonormal keys: exact
    [[1.0], [2.0]]
    """
    keys = as_float_array(keys, "keys", min_ndim=2, layout="(..., m, d_k)")
    values = as_float_array(values, "values", min_ndim=2, layout="(..., m, d_v)")
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(f"keys and values must hold the same number of pairs m, got keys of "
                         f"shape {keys.shape} and values of shape {values.shape}")
    check_option(rule, "rule", ("sum", "delta"))
    if rule == "sum":
        s = keys.swapaxes(-1, -2) @ values  # (..., d_k, m) @ (..., m, d_v) -> (..., d_k, d_v)
    else:
        _, s = delta_rule_recurrent(keys, keys, values, np.ones(1))
    return keys @ s  # (..., m, d_k) @ (..., d_k, d_v) -> (..., m, d_v)
