"""Probes of a trained encoder: controlled comparisons instead of readings of one map.

* minimal pairs: two sentences that differ in one word; does a head's weight from a query
  piece follow the change?
* the size of each layer's attention update against the residual stream it is added to;
* position embeddings transformed (reversed, zeroed) to see where a head's sense of order
  comes from, and their similarity structure.

Pure numpy on the arrays of :mod:`attn_core.model.encoder`; nothing here reads files,
prints or plots.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .._validate import as_float_array, check_positive_int
from ..multihead import multi_head_attention
from .encoder import EncoderWeights
from .head_roles import next_token_score  # a head-role score; kept importable from here
from .layers import _attention_mask

__all__ = [
    "PairComparison",
    "attention_update_ratio",
    "compare_pair",
    "cosine_similarity",
    "mean_by_offset",
    "next_token_score",
    "weights_on",
    "with_positions",
]


def _attentions(attentions, name):
    a = as_float_array(attentions, name, min_ndim=2, layout="(..., n, n)")
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name} must be square in the last two axes (..., n, n), "
                         f"got shape {a.shape}")
    return a


def _positions(positions, n, name):
    if isinstance(positions, (int, np.integer)) and not isinstance(positions, bool):
        positions = [positions]
    arr = np.asarray(positions)
    if arr.dtype.kind not in "iu" or arr.ndim != 1 or arr.size == 0:
        raise TypeError(f"{name} must be an int position or a list of them, got {positions!r}")
    if (arr < 0).any() or (arr >= n).any():
        raise ValueError(f"{name} must be positions between 0 and {n - 1}, got {arr.tolist()}")
    return arr


def _position(position, n, name):
    """One int position between 0 and ``n - 1`` (a list of them is refused)."""
    if not isinstance(position, (int, np.integer)) or isinstance(position, (bool, np.bool_)):
        raise TypeError(f"{name} must be one int position between 0 and {n - 1}, "
                        f"got {position!r}")
    return _positions(position, n, name)


def _weights_on(a, query, keys, names):
    q, k = _position(query, a.shape[-1], names[0]), _positions(keys, a.shape[-1], names[1])
    return a[..., q[0], k]  # (..., n, n) -> (..., len(keys))


def weights_on(attentions, query, keys):
    """The weights that the row of ``query`` puts on each of ``keys``, in every head.

    Parameters
    ----------
    attentions : (..., n, n) array_like
        Post-softmax weights, e.g. ``(layers, heads, n, n)``.
    query : int
        Position of the query piece (0-based).
    keys : int or sequence of int
        Positions of the key pieces.

    Returns
    -------
    w : (..., len(keys)) ndarray
        ``w[..., j] = attentions[..., query, keys[j]]``.

    Examples
    --------
    >>> a = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
    >>> weights_on(a, 2, [0, 1])
    array([0.2, 0.3])
    """
    return _weights_on(_attentions(attentions, "attentions"), query, keys, ("query", "keys"))


@dataclass(frozen=True)
class PairComparison:
    """One query's weights on the same candidate words in two sentences.

    before, after : (..., c) ndarray -- weights on the ``c`` candidates in sentence a, b
    (e.g. ``(layers, heads, 2)`` for *animal* and *road*).
    """

    before: np.ndarray
    after: np.ndarray

    @property
    def change(self):
        """(..., c): ``after - before``."""
        return self.after - self.before

    @property
    def favourite_before(self):
        """(...): index of the candidate with the larger weight in sentence a."""
        return self.before.argmax(axis=-1)

    @property
    def favourite_after(self):
        """(...): index of the candidate with the larger weight in sentence b."""
        return self.after.argmax(axis=-1)

    @property
    def switched(self):
        """(...) bool: heads whose favourite candidate differs between the sentences."""
        return self.favourite_before != self.favourite_after


def compare_pair(attn_a, attn_b, query_a, query_b, keys_a, keys_b):
    """Compare a query's weights on the same candidate words in two sentences.

    Parameters
    ----------
    attn_a, attn_b : (..., n_a, n_a) and (..., n_b, n_b) array_like
        The weights of the two sentences (same leading shape, e.g. ``(layers, heads)``);
        the sentences may have different lengths.
    query_a, query_b : int
        Position of the query piece (e.g. *it*) in each sentence.
    keys_a, keys_b : sequence of int
        Positions of the candidates (e.g. *animal*, *road*) in each, in the same order.

    Returns
    -------
    PairComparison

    Notes
    -----
    A minimal pair changes one word. A head whose weights track what *it* refers to must
    move its weight between the candidates when the referent changes; if its favourite
    stays the same, the head follows something else (position, the word itself).

    Examples
    --------
    >>> a = np.array([[[0.1, 0.7, 0.2], [0.3, 0.3, 0.4], [0.6, 0.3, 0.1]]])
    >>> b = np.array([[[0.1, 0.2, 0.7], [0.3, 0.3, 0.4], [0.2, 0.7, 0.1]]])
    >>> c = compare_pair(a, b, 0, 0, [1, 2], [1, 2])
    >>> c.before, c.after, c.switched
    (array([[0.7, 0.2]]), array([[0.2, 0.7]]), array([ True]))
    """
    a = _attentions(attn_a, "attn_a")
    b = _attentions(attn_b, "attn_b")
    if a.shape[:-2] != b.shape[:-2]:
        raise ValueError("attn_a and attn_b must have the same leading shape (layers, heads), "
                         f"got {a.shape} and {b.shape}")
    before = _weights_on(a, query_a, keys_a, ("query_a", "keys_a"))
    after = _weights_on(b, query_b, keys_b, ("query_b", "keys_b"))
    if before.shape[-1] != after.shape[-1]:
        raise ValueError(f"keys_a and keys_b must name the same number of candidates, got "
                         f"{np.atleast_1d(keys_a).tolist()} and {np.atleast_1d(keys_b).tolist()}")
    return PairComparison(before, after)


def attention_update_ratio(weights, hidden_states, attention_mask=None):
    """Per layer and piece: length of the attention block's update over the stream's.

    Parameters
    ----------
    weights : EncoderWeights
    hidden_states : (..., layers + 1, n, d) array_like
        The encoder's states: row ``l`` is the input of layer ``l + 1``.
    attention_mask : (..., n) array_like of 0/1, optional
        Padding, as in :func:`~attn_core.model.encoder.encoder_forward`.

    Returns
    -------
    ratio : (..., layers, n) ndarray
        ``|MultiHead(x_l)_i| / |x_{l,i}|``, with ``x_l`` the input of layer ``l + 1``.

    Notes
    -----
    Each layer computes :math:`x + \\mathrm{MultiHead}(x)` before its layer norm. A ratio
    well below 1 means the residual stream ``x`` dominates what the layer norm then sees,
    whatever the attention map shows.

    Examples
    --------
    >>> from attn_core.model.encoder import _tiny_weights, encoder_forward
    >>> w = _tiny_weights(layers=2)
    >>> attention_update_ratio(w, encoder_forward(w, [1, 2, 3]).hidden_states).shape
    (2, 3)
    """
    if not isinstance(weights, EncoderWeights):
        raise TypeError(f"weights must be EncoderWeights, got {type(weights).__name__}")
    hs = as_float_array(hidden_states, "hidden_states", min_ndim=3,
                        layout="(..., layers + 1, n, d)")
    layers = len(weights.layers)
    if hs.shape[-3] != layers + 1 or hs.shape[-1] != weights.d_model:
        raise ValueError(f"hidden_states must have shape (..., {layers + 1}, n, "
                         f"{weights.d_model}) for this model, got {hs.shape}")
    mask = None
    if attention_mask is not None:
        keep = _attention_mask(attention_mask, (*hs.shape[:-3], hs.shape[-2]))  # (..., n)
        mask = keep[..., None, None, :]  # (..., n) -> (..., 1, 1, n): every head and query
    ratios = []
    for i, lw in enumerate(weights.layers):
        x = hs[..., i, :, :]  # (..., n, d): the input of layer i + 1
        update, _ = multi_head_attention(x, lw.w_q, lw.w_k, lw.w_v, lw.w_o, weights.heads,
                                         mask=mask, biases=(lw.b_q, lw.b_k, lw.b_v, lw.b_o))
        ratios.append(np.linalg.norm(update, axis=-1) / np.linalg.norm(x, axis=-1))
    return np.stack(ratios, axis=-2)  # layers x (..., n) -> (..., layers, n)


def with_positions(weights, n, how):
    """A copy of the model whose first ``n`` position embeddings are transformed.

    Parameters
    ----------
    weights : EncoderWeights
    n : int
        Number of positions to change (the sentence's length).
    how : {"reverse", "zero"}
        ``"reverse"``: piece ``i`` gets the embedding of position ``n - 1 - i``;
        ``"zero"``: no position information at all.

    Returns
    -------
    EncoderWeights
        The same model with a new position table; ``weights`` is unchanged.

    Examples
    --------
    >>> from attn_core.model.encoder import _tiny_weights
    >>> w = _tiny_weights()
    >>> r = with_positions(w, 3, "reverse")
    >>> bool((r.position[0] == w.position[2]).all() and (r.position[3] == w.position[3]).all())
    True
    """
    if not isinstance(weights, EncoderWeights):
        raise TypeError(f"weights must be EncoderWeights, got {type(weights).__name__}")
    n = check_positive_int(n, "n")
    if n > weights.position.shape[0]:
        raise ValueError(f"n must be at most {weights.position.shape[0]} (the model's "
                         f"positions), got {n}")
    table = weights.position.copy()
    if how == "reverse":
        table[:n] = weights.position[:n][::-1]  # row i <- row n - 1 - i
    elif how == "zero":
        table[:n] = 0.0
    else:
        raise ValueError(f"how must be 'reverse' or 'zero', got {how!r}")
    return dataclasses.replace(weights, position=table)


def cosine_similarity(rows):
    """Cosine similarity of every pair of rows.

    Parameters
    ----------
    rows : (..., m, d) array_like, no all-zero row

    Returns
    -------
    s : (..., m, m) ndarray
        ``s[i, j] = r_i . r_j / (|r_i| |r_j|)``, 1 on the diagonal.

    Examples
    --------
    >>> cosine_similarity([[1.0, 0.0], [1.0, 1.0]]).round(3)
    array([[1.   , 0.707],
           [0.707, 1.   ]])
    """
    r = as_float_array(rows, "rows", min_ndim=2, layout="(..., m, d)")
    norm = np.linalg.norm(r, axis=-1, keepdims=True)  # (..., m, 1)
    if (norm == 0).any():
        raise ValueError("rows must not contain an all-zero row (it has no direction)")
    unit = r / norm
    return unit @ unit.swapaxes(-1, -2)  # (..., m, d) @ (..., d, m) -> (..., m, m)


def mean_by_offset(s, max_offset=None):
    """Mean of each diagonal of a square matrix: how similar rows ``k`` apart are on average.

    Parameters
    ----------
    s : (m, m) array_like
        E.g. :func:`cosine_similarity` of the position embeddings.
    max_offset : int, optional
        Largest offset ``k`` (default ``m - 1``).

    Returns
    -------
    means : (max_offset + 1,) ndarray
        ``means[k]`` is the mean of ``s[i, i + k]`` over ``i``.

    Examples
    --------
    >>> mean_by_offset(np.array([[1.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 1.0]]))
    array([1. , 0.4, 0. ])
    """
    a = as_float_array(s, "s", min_ndim=2, layout="(m, m)")
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"s must be a square matrix (m, m), got shape {a.shape}")
    m = a.shape[0]
    top = m - 1 if max_offset is None else check_positive_int(max_offset, "max_offset", minimum=0)
    if top > m - 1:
        raise ValueError(f"max_offset must be at most {m - 1} for a ({m}, {m}) matrix, got {top}")
    return np.array([np.diagonal(a, offset=k).mean() for k in range(top + 1)])
