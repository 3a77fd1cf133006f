"""A BERT-style encoder's forward pass in numpy, built on :func:`multi_head_attention`
and the layers of :mod:`attn_core.nn` (the package's one layer norm, the exact erf GELU).

Pure maths: the weights come in as arrays (see :mod:`attn_core.model.pretrained` for
reading a real model's files) and nothing here reads files, prints or plots. Conventions are the
course's: row vectors, ``y = x @ w + b`` with ``w`` of shape ``(d_in, d_out)``, leading
batch axes ``...`` everywhere.

One layer (post-layer-norm, as in BERT)::

    a = LayerNorm(x + MHA(x))                  # attention sub-layer, residual, norm
    y = LayerNorm(a + GELU(a @ W_in + b_in) @ W_out + b_out)   # feed-forward sub-layer
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validate import as_float_array, check_positive_int
from ..multihead import multi_head_attention
from ..nn.gelu import gelu_erf as gelu  # BERT's exact GELU
from ..nn.layer_norm import layer_norm
from .layers import _attention_mask

__all__ = [
    "EncoderOutput",
    "EncoderWeights",
    "LayerWeights",
    "embed",
    "encoder_forward",
    "encoder_layer",
]


@dataclass(frozen=True)
class LayerWeights:
    """One encoder layer's parameters, in ``x @ w`` form (``w`` is ``(d_in, d_out)``).

    ``w_q, w_k, w_v, w_o`` are ``(d, d)``, ``b_*`` are ``(d,)``; ``ln1_*`` is the layer
    norm after attention; ``w_in`` ``(d, d_ff)`` and ``w_out`` ``(d_ff, d)`` the
    feed-forward network; ``ln2_*`` the layer norm after it.
    """

    w_q: np.ndarray
    b_q: np.ndarray
    w_k: np.ndarray
    b_k: np.ndarray
    w_v: np.ndarray
    b_v: np.ndarray
    w_o: np.ndarray
    b_o: np.ndarray
    ln1_gamma: np.ndarray
    ln1_beta: np.ndarray
    w_in: np.ndarray
    b_in: np.ndarray
    w_out: np.ndarray
    b_out: np.ndarray
    ln2_gamma: np.ndarray
    ln2_beta: np.ndarray


@dataclass(frozen=True)
class EncoderWeights:
    """A whole encoder: embedding tables, their layer norm, the layers, the head count.

    ``word`` is ``(vocab, d)``, ``position`` ``(max_len, d)``, ``token_type``
    ``(types, d)``; ``layers`` a tuple of :class:`LayerWeights`; ``heads`` divides ``d``.
    """

    word: np.ndarray
    position: np.ndarray
    token_type: np.ndarray
    ln_gamma: np.ndarray
    ln_beta: np.ndarray
    layers: tuple
    heads: int
    eps: float = 1e-12

    @property
    def d_model(self):
        return self.word.shape[1]


@dataclass(frozen=True)
class EncoderOutput:
    """What :func:`encoder_forward` returns.

    hidden_states : (..., layers + 1, n, d) -- the embeddings, then each layer's output
    attentions : (..., layers, heads, n, n) -- each layer's post-softmax weights
    """

    hidden_states: np.ndarray
    attentions: np.ndarray

    @property
    def last_hidden_state(self):
        """(..., n, d): the final layer's output."""
        return self.hidden_states[..., -1, :, :]


def _ids(ids, name, vocab):
    arr = np.asarray(ids)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integer token ids, got dtype {arr.dtype}")
    if arr.ndim < 1 or arr.shape[-1] == 0:
        raise ValueError(f"{name} must have shape (..., n) with n >= 1, got shape {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() >= vocab):
        bad = arr[(arr < 0) | (arr >= vocab)].ravel()[0]
        raise ValueError(f"{name} must be between 0 and {vocab - 1}, got {bad}")
    return arr


def embed(weights, ids, token_type_ids=None):
    """Token embedding + position embedding + token-type embedding, then layer norm.

    Parameters
    ----------
    weights : EncoderWeights
    ids : (..., n) int array_like
        Token ids, each below the vocabulary size; ``n`` at most the position table's length.
    token_type_ids : (..., n) int array_like, optional
        Segment of each token (all 0 for a single sentence, the default).

    Returns
    -------
    x : (..., n, d) ndarray
        ``LayerNorm(E_word[ids] + E_pos[0..n-1] + E_type[token_type_ids])``.

    Examples
    --------
    >>> w = _tiny_weights()
    >>> embed(w, [1, 2, 3]).shape
    (3, 4)
    """
    ids = _ids(ids, "ids", weights.word.shape[0])
    n = ids.shape[-1]
    if n > weights.position.shape[0]:
        raise ValueError(f"ids has {n} positions; this model has position embeddings for at "
                         f"most {weights.position.shape[0]}")
    if token_type_ids is None:
        types = weights.token_type[0]  # (d,) broadcast over every position
    else:
        tt = _ids(token_type_ids, "token_type_ids", weights.token_type.shape[0])
        if tt.shape != ids.shape:
            raise ValueError(f"token_type_ids must have the shape of ids {ids.shape}, "
                             f"got {tt.shape}")
        types = weights.token_type[tt]  # (..., n, d)
    x = weights.word[ids] + weights.position[:n] + types  # (..., n, d)
    return layer_norm(x, weights.ln_gamma, weights.ln_beta, weights.eps)


def encoder_layer(x, layer, heads, mask=None, eps=1e-12, value_mask=None):
    """One encoder layer: multi-head self-attention and a feed-forward network.

    Parameters
    ----------
    x : (..., n, d) array_like
        The layer's input rows.
    layer : LayerWeights
    heads : int
        Number of attention heads (divides ``d``).
    mask : bool array_like broadcastable to (..., heads, n, n), optional
        True where query ``i`` may attend to key ``j``
        (e.g. ``padding_mask(...)[..., None, :, :]``).
    eps : float
        Layer-norm epsilon.
    value_mask : (heads, n) bool array_like, optional
        False where a head's value vector at key ``j`` is replaced by zeros (its weights
        unchanged); see :func:`attn_core.multihead.multi_head_attention`.

    Returns
    -------
    y : (..., n, d) ndarray
        The layer's output.
    weights : (..., heads, n, n) ndarray
        The attention weights of each head (rows sum to 1).

    Notes
    -----
    .. math:: A = \\mathrm{LN}(X + \\mathrm{MHA}(X)), \\qquad
              Y = \\mathrm{LN}(A + \\mathrm{GELU}(A W_{in} + b_{in}) W_{out} + b_{out})

    Examples
    --------
    >>> w = _tiny_weights()
    >>> y, a = encoder_layer(embed(w, [1, 2, 3]), w.layers[0], heads=2)
    >>> y.shape, a.shape, bool(np.allclose(a.sum(axis=-1), 1.0))
    ((3, 4), (2, 3, 3), True)
    """
    x = as_float_array(x, "x", min_ndim=2)
    heads = check_positive_int(heads, "heads")
    attended, weights = multi_head_attention(
        x, layer.w_q, layer.w_k, layer.w_v, layer.w_o, heads, mask=mask,
        biases=(layer.b_q, layer.b_k, layer.b_v, layer.b_o), value_mask=value_mask)
    a = layer_norm(x + attended, layer.ln1_gamma, layer.ln1_beta, eps)  # (..., n, d)
    hidden = gelu(a @ layer.w_in + layer.b_in)  # (..., n, d_ff)
    y = layer_norm(a + hidden @ layer.w_out + layer.b_out, layer.ln2_gamma, layer.ln2_beta, eps)
    return y, weights


def encoder_forward(weights, ids, attention_mask=None, token_type_ids=None, head_mask=None,
                    value_mask=None):
    """The whole encoder: embeddings, then every layer, keeping every step's output.

    Parameters
    ----------
    weights : EncoderWeights
    ids : (..., n) int array_like
        Token ids (a batch of padded sentences has shape ``(b, n)``).
    attention_mask : (..., n) array_like of 0/1 or bool, optional
        1 for real tokens, 0 for padding; padded keys get weight 0 in every head. Default:
        every token is real.
    token_type_ids : (..., n) int array_like, optional
    head_mask : (layers, heads, n) bool array_like, optional
        False where head ``h`` of layer ``l`` may not attend to key ``j`` (for any query):
        an ablation of what single heads see (notebook 16 masks the ``[CLS]`` sink). It
        combines with ``attention_mask`` by "and"; a query must keep at least one key.
    value_mask : (layers, heads, n) bool array_like, optional
        False where head ``h`` of layer ``l`` reads zeros in place of key ``j``'s value while
        its weights stay: the ablation that tells a sink (weight held, nothing given) from an
        important key (notebook 16).

    Returns
    -------
    EncoderOutput
        ``hidden_states`` ``(..., layers + 1, n, d)`` and ``attentions``
        ``(..., layers, heads, n, n)``.

    Examples
    --------
    >>> w = _tiny_weights()
    >>> out = encoder_forward(w, [[1, 2, 3], [4, 5, 0]], attention_mask=[[1, 1, 1], [1, 1, 0]])
    >>> out.hidden_states.shape, out.attentions.shape
    ((2, 2, 3, 4), (2, 1, 2, 3, 3))
    >>> float(out.attentions[1, 0, :, :, 2].max())  # nobody attends to the padding
    0.0
    """
    ids = _ids(ids, "ids", weights.word.shape[0])
    mask = None
    if attention_mask is not None:
        keep = _attention_mask(attention_mask, ids.shape)
        mask = keep[..., None, None, :]  # (..., 1, 1, n): every head, every query
    layers, n = len(weights.layers), ids.shape[-1]
    layer_masks = _head_masks(head_mask, layers, weights.heads, n, mask)
    value_masks = [None] * layers if value_mask is None else _value_masks(
        value_mask, layers, weights.heads, n)
    x = embed(weights, ids, token_type_ids)
    states, attentions = [x], []
    for layer, layer_mask, keep in zip(weights.layers, layer_masks, value_masks):
        x, a = encoder_layer(x, layer, weights.heads, mask=layer_mask, eps=weights.eps,
                             value_mask=keep)
        states.append(x)
        attentions.append(a)
    return EncoderOutput(hidden_states=np.stack(states, axis=-3),
                         attentions=np.stack(attentions, axis=-4))


def _head_masks(head_mask, layers, heads, n, mask):
    """One mask per layer: ``mask`` and'ed with ``head_mask[l]`` as ``(heads, 1, n)``."""
    if head_mask is None:
        return [mask] * layers
    hm = np.asarray(head_mask)
    if hm.dtype != bool or hm.shape != (layers, heads, n):
        raise ValueError(f"head_mask must be a bool array of shape (layers, heads, n) = "
                         f"{(layers, heads, n)}, got dtype {hm.dtype} and shape {hm.shape}")
    per_layer = hm[:, :, None, :]  # (layers, heads, 1, n): the same keys for every query
    return [m if mask is None else m & mask for m in per_layer]


def _value_masks(value_mask, layers, heads, n):
    """``value_mask`` checked as ``(layers, heads, n)`` bool: one ``(heads, n)`` per layer."""
    vm = np.asarray(value_mask)
    if vm.dtype != bool or vm.shape != (layers, heads, n):
        raise ValueError(f"value_mask must be a bool array of shape (layers, heads, n) = "
                         f"{(layers, heads, n)}, got dtype {vm.dtype} and shape {vm.shape}")
    return list(vm)


def _tiny_weights(d=4, d_ff=8, heads=2, layers=1, vocab=8, seed=0):
    """A small random encoder for the examples and tests."""
    g = np.random.default_rng(seed)

    def m(*shape):
        return g.standard_normal(shape) / math.sqrt(shape[0])

    def layer():
        return LayerWeights(m(d, d), m(d), m(d, d), m(d), m(d, d), m(d), m(d, d), m(d),
                            np.ones(d), np.zeros(d), m(d, d_ff), m(d_ff), m(d_ff, d), m(d),
                            np.ones(d), np.zeros(d))

    return EncoderWeights(word=m(vocab, d), position=m(16, d), token_type=m(2, d),
                          ln_gamma=np.ones(d), ln_beta=np.zeros(d),
                          layers=tuple(layer() for _ in range(layers)), heads=heads)
