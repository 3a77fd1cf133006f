"""What a decoder keeps between tokens when its layers mix kinds of token mixer: a KV cache
that grows by a key and a value per token in each softmax layer, a fixed state in each
recurrent one (notebook 19's hybrids: Qwen3-Next, Kimi Linear, the hybrid tiny GPT).

=================  ============================================  =========================
layer kind         kept per head                                 grows with the tokens
=================  ============================================  =========================
``"softmax"``      a key and a value of ``d_head`` per token      yes (:func:`kv_cache_bytes`)
``"gated_delta"``  the state ``S``, ``d_k x d_v``                 no
``"linear"``       ``S`` (``d_k x d_v``) and the normaliser       no
                   ``z`` (``d_k``) of Katharopoulos et al.
=================  ============================================  =========================
"""

from __future__ import annotations

from ._validate import check_float_dtype, check_option, check_positive_int
from .cost import kv_cache_bytes

__all__ = ["LAYER_KINDS", "cache_parts", "decoder_cache_bytes", "hybrid_layers"]

#: The layer kinds counted here (the names of :data:`attn_core.nn.block_options.ATTENTIONS`).
LAYER_KINDS = ("softmax", "linear", "gated_delta")


def hybrid_layers(n_layers, every, full="softmax", other="gated_delta"):
    """The layers of a hybrid with one ``full`` layer in each run of ``every``, last in its
    run (Qwen3-Next's ``full_attention_interval``): e.g. ``hybrid_layers(4, 4)`` is three
    gated-delta layers then a softmax one.

    Examples
    --------
    >>> hybrid_layers(8, 4)
    ('gated_delta', 'gated_delta', 'gated_delta', 'softmax', 'gated_delta', 'gated_delta', \
'gated_delta', 'softmax')
    """
    n_layers, every = check_positive_int(n_layers, "n_layers"), check_positive_int(every, "every")
    check_option(full, "full", LAYER_KINDS)
    check_option(other, "other", LAYER_KINDS)
    return tuple(full if (i + 1) % every == 0 else other for i in range(n_layers))


def cache_parts(layers, kv_heads, d_head, state_heads=None, d_k=None, d_v=None,
                dtype="float32"):
    """``(bytes per token, fixed bytes)`` a decoder keeps for one sequence.

    Parameters
    ----------
    layers : sequence of str
        Each layer's kind, in :data:`LAYER_KINDS`.
    kv_heads, d_head : int
        Key/value heads and their width in a softmax layer.
    state_heads, d_k, d_v : int, optional
        Heads and state shape of a recurrent layer; default ``kv_heads``, ``d_head``,
        ``d_head`` (the tiny GPT, whose heads are the same in every layer).
    dtype : numpy float dtype
        What each number is stored as.

    Returns
    -------
    per_token : int
        What each new token adds: a key and a value per head in each softmax layer.
    fixed : int
        The recurrent layers' states, whatever the number of tokens.

    Examples
    --------
    >>> cache_parts(("gated_delta",) * 3 + ("softmax",), kv_heads=4, d_head=16)
    (512, 12288)
    """
    if isinstance(layers, str) or not hasattr(layers, "__len__") or not len(layers):
        raise ValueError(f"layers must be a non-empty sequence of layer kinds {LAYER_KINDS}, "
                         f"got {layers!r}")
    kinds = [check_option(k, f"layers[{i}]", LAYER_KINDS) for i, k in enumerate(layers)]
    kv_heads, d_head = check_positive_int(kv_heads, "kv_heads"), check_positive_int(d_head,
                                                                                    "d_head")
    state_heads = kv_heads if state_heads is None else check_positive_int(state_heads,
                                                                          "state_heads")
    d_k = d_head if d_k is None else check_positive_int(d_k, "d_k")
    d_v = d_head if d_v is None else check_positive_int(d_v, "d_v")
    size = check_float_dtype(dtype).itemsize
    n_soft = kinds.count("softmax")
    per_token = kv_cache_bytes(1, n_soft, kv_heads, d_head, dtype) if n_soft else 0
    one_state = {"gated_delta": state_heads * d_k * d_v,
                 "linear": state_heads * (d_k * d_v + d_k)}  # numbers per layer
    fixed = sum(one_state.get(k, 0) for k in kinds) * size
    return per_token, fixed


def decoder_cache_bytes(n, layers, kv_heads, d_head, state_heads=None, d_k=None, d_v=None,
                        dtype="float32"):
    """Bytes a decoder keeps after ``n`` tokens: ``n * per_token + fixed`` of
    :func:`cache_parts` (same arguments, ``n`` a positive int).

    Examples
    --------
    >>> decoder_cache_bytes(64, ("softmax",) * 4, kv_heads=4, d_head=16)  # 4 layers' caches
    131072
    """
    n = check_positive_int(n, "n")
    per_token, fixed = cache_parts(layers, kv_heads, d_head, state_heads, d_k, d_v, dtype)
    return n * per_token + fixed
