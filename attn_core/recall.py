"""Multi-query associative recall (MQAR): the task that separates the fixed-size states.

Arora et al. ("Zoology: measuring and improving recall in efficient language models", ICLR
2024, arXiv 2312.04927) find that the gap between attention and its sub-quadratic
replacements on real text is mostly one skill: recalling, for a token seen earlier, what
followed it. Their synthetic task isolates it: a sequence of key-value pairs, then keys
again; after each repeated key the model must produce its value.

    k_1 v_1 k_2 v_2 ... k_m v_m   q_1 q_2 ... q_m      (each q a shuffled k, answer its v)

With ``n_updates`` some keys are written again with a new value before the queries, which
ask for the latest: the delta rule's reason to exist (a sum keeps both values). Its control,
``updates="new_keys"``, makes the same number of writes with keys not seen before.

Attention keeps every pair in its cache and looks the key up. A recurrent state of fixed size
``d_k x d_v`` must hold all ``m`` pairs at once: :func:`state_recall` measures, without any
training, how well a sum of outer products and the delta rule do that for given keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import as_float_array, check_generator, check_option, check_positive_int
from .delta_rule import delta_rule_recurrent
from .tasks import key_value_pairs

__all__ = ["UPDATES", "RecallBatch", "mqar_batch", "state_recall"]


@dataclass(frozen=True)
class RecallBatch:
    """One batch of MQAR.

    Attributes
    ----------
    ids : (b, n) int ndarray
        Tokens: keys are ``0 .. n_keys - 1``, values ``n_keys .. n_keys + n_values - 1``;
        ``n = 3 m``: ``m`` pairs, then the ``m`` keys again in a random order (with
        ``u`` later writes: ``n = 2 (m + u) + m``).
    targets : (b, n) int ndarray
        At a query position the value's class ``0 .. n_values - 1``; 0 elsewhere.
    scored : (b, n) bool ndarray
        The query positions.
    source : (b, n) int ndarray
        At a query position, the position of the value token of its pair's latest write
        (where a layer that binds each value to the key before it stores the pair); -1
        elsewhere.
    earlier : (b, n) int ndarray
        At a query position whose pair a later write replaced, the position of the value
        token it replaced: with ``"overwrite"`` the same key's stale value, with
        ``"new_keys"`` the pair left unasked; -1 elsewhere (and everywhere without updates).
    """

    ids: np.ndarray
    targets: np.ndarray
    scored: np.ndarray
    source: np.ndarray
    earlier: np.ndarray


#: What the later writes of :func:`mqar_batch` do: rewrite a key with a new value, or (the
#: control) write a key not seen before.
UPDATES = ("overwrite", "new_keys")


def mqar_batch(rng, batch, n_pairs, n_keys=32, n_values=32, n_updates=0, updates="overwrite"):
    """Draw ``batch`` MQAR sequences of ``n_pairs`` distinct keys with random values, optionally
    followed by ``n_updates`` later writes.

    Parameters
    ----------
    rng : numpy.random.Generator
    batch, n_pairs : int
        Sequences and queried keys per sequence.
    n_keys, n_values : int
        Sizes of the key and value vocabularies (``n_pairs + n_updates <= n_keys``).
    n_updates : int, optional
        Later writes, after the ``n_pairs`` pairs and before the queries (0 to ``n_pairs``;
        0, the default, is plain MQAR with the same draws as before the option existed).
    updates : {"overwrite", "new_keys"}
        ``"overwrite"``: ``n_updates`` of the pairs (distinct, at random) are written again
        with a value different from their first; the query asks for the latest value.
        ``"new_keys"``, the control: the later writes carry keys not used before, and the
        pairs that would have been rewritten are not asked. Both versions draw the same
        numbers in the same order: the same length, the same number of writes, the same
        queries' answer positions; only a repeated key distinguishes them.

    Returns
    -------
    RecallBatch
        ``n = 2 (n_pairs + n_updates) + n_pairs`` tokens: the writes, then the
        ``n_pairs`` queries in a random order.

    Examples
    --------
    >>> b = mqar_batch(np.random.default_rng(0), batch=1, n_pairs=2, n_keys=4, n_values=3)
    >>> b.ids.shape, b.scored[0].tolist()
    ((1, 6), [False, False, False, False, True, True])
    >>> b = mqar_batch(np.random.default_rng(0), 1, 2, 4, 3, n_updates=1)
    >>> b.ids.shape, int(b.ids[0, 4]) in b.ids[0, [0, 2]]  # the later write repeats a key
    ((1, 8), True)
    """
    rng = check_generator(rng)
    m = check_positive_int(n_pairs, "n_pairs")
    u = check_positive_int(n_updates, "n_updates", minimum=0)
    check_option(updates, "updates", UPDATES)
    if u > m:
        raise ValueError(f"n_updates must be <= n_pairs (each update rewrites one pair), got "
                         f"n_updates = {n_updates} and n_pairs = {n_pairs}")
    if u and check_positive_int(n_values, "n_values") < 2:
        raise ValueError(f"n_values must be >= 2 when n_updates > 0 (a rewrite needs a new "
                         f"value), got n_values = {n_values}")
    if u and m + u > check_positive_int(n_keys, "n_keys"):
        raise ValueError(f"n_pairs + n_updates must be <= n_keys (the control writes that many "
                         f"distinct keys), got n_pairs + n_updates = {m + u} and n_keys = "
                         f"{n_keys}")
    keys, values = key_value_pairs(rng, batch, m + u, n_keys, n_values)  # (b, m + u) each
    batch, n_keys, n_values = keys.shape[0], int(n_keys), int(n_values)
    rows = np.arange(batch)[:, None]
    ask_k, ask_v = keys[:, :m].copy(), values[:, :m].copy()  # (b, m): what the queries ask
    ask_src = np.broadcast_to(2 * np.arange(m) + 1, (batch, m)).copy()  # its value's position
    ask_old = np.full((batch, m), -1)  # the position a later write replaced
    later_k, later_v = keys[:, m:], values[:, m:]  # (b, u): the control's fresh pairs
    if u:
        chosen = rng.random((batch, m)).argsort(axis=1)[:, :u]  # (b, u): pairs updated
        shift = rng.integers(1, n_values, size=(batch, u))  # a new value: never the old one
        if updates == "overwrite":
            later_k = ask_k[rows, chosen]
            later_v = (ask_v[rows, chosen] + shift) % n_values
        ask_k[rows, chosen], ask_v[rows, chosen] = later_k, later_v
        ask_old[rows, chosen] = ask_src[rows, chosen]
        ask_src[rows, chosen] = 2 * (m + np.arange(u)) + 1
    w = 2 * (m + u)  # tokens written before the queries
    order = rng.random((batch, m)).argsort(axis=1)  # (b, m): which pair each query asks
    ids = np.empty((batch, w + m), dtype=int)
    ids[:, 0:w:2] = np.concatenate([keys[:, :m], later_k], axis=1)
    ids[:, 1:w:2] = n_keys + np.concatenate([values[:, :m], later_v], axis=1)
    ids[:, w:] = ask_k[rows, order]
    targets = np.zeros((batch, w + m), dtype=int)
    targets[:, w:] = ask_v[rows, order]
    scored = np.zeros((batch, w + m), dtype=bool)
    scored[:, w:] = True
    source = np.full((batch, w + m), -1)
    source[:, w:] = ask_src[rows, order]
    earlier = np.full((batch, w + m), -1)
    earlier[:, w:] = ask_old[rows, order]
    return RecallBatch(ids, targets, scored, source, earlier)


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
