"""What the methods beyond the n x n matrix cost, counted as :mod:`attn_core.cost` counts.

One convention for the whole course (that of :func:`attn_core.cost.attention_flops`): a
multiply-add is 2 FLOPs, the softmax 5 per score cell, bytes are elements times the dtype's
size. Here: masked (sparse) attention, linear attention, and the memory a decoder keeps per
layer under each method: a KV cache (:func:`attn_core.cost.kv_cache_bytes`), a latent cache
(:mod:`attn_core.latent`) or a fixed-size state (:mod:`attn_core.linear_attention`).
"""

from ._validate import check_float_dtype, check_positive_int
from .cost import attention_flops

__all__ = ["linear_attention_flops", "linear_overtakes_at", "linear_state_bytes",
           "masked_attention_flops", "mla_cache_bytes"]


def _ints(**named):
    return [check_positive_int(v, name) for name, v in named.items()]


def masked_attention_flops(cells, d_model, h=1):
    """FLOPs of attention that computes only ``cells`` score cells per head.

    Parameters
    ----------
    cells : int
        Score cells computed per head: ``mask.sum()`` for a kernel that visits only the
        allowed cells, :func:`attn_core.sparse.block_sparse_cells` for one that visits whole
        tiles, ``n * n_k`` for the full matrix.
    d_model, h : int
        As in :func:`attn_core.cost.attention_flops`.

    Returns
    -------
    flops : dict
        ``{"scores": 2 cells d_model, "softmax": 5 h cells, "weighted_sum": 2 cells d_model,
        "total": ...}``; with ``cells = n * n_k`` exactly ``attention_flops(n, d_model, h)``.

    Examples
    --------
    >>> from attn_core.cost import attention_flops
    >>> masked_attention_flops(64 * 64, 32, h=4) == attention_flops(64, 32, h=4)
    True
    """
    cells = check_positive_int(cells, "cells", minimum=0)
    d_model, h = _ints(d_model=d_model, h=h)
    attention_flops(1, d_model, h=h)  # the same checks (h divides d_model) and messages
    qk = 2 * cells * d_model
    soft = 5 * h * cells
    return {"scores": qk, "softmax": soft, "weighted_sum": qk, "total": 2 * qk + soft}


def linear_attention_flops(n, d_model, h=1, n_k=None):
    """FLOPs of linear attention's linear form (``linear_attention.linear_attention``).

    Parameters
    ----------
    n : int
        Queries.
    d_model, h : int
        Total width and heads; each head has ``d_k = d_v = d_model / h``.
    n_k : int, optional
        Keys, default ``n``.

    Returns
    -------
    flops : dict
        ``{"feature_map": (n + n_k) d_model, "state": 2 n_k d_model d_k,
        "readout": 2 n d_model d_k, "normaliser": n_k d_model + 3 n d_model, "total": ...}``:
        ``phi`` once per entry; ``S = phi(K)^T V`` and ``phi(Q) S`` are ``n d_k d_v``
        multiply-adds per head; ``z`` a sum, ``phi(q) . z`` a dot product and the division one
        per output entry.

    Notes
    -----
    Every term grows like ``n``; softmax attention's scores and weighted sum like
    ``n n_k d_model``. Per query the two compare as ``4 d_model d_k`` against
    ``4 n_k d_model``: the linear form is cheaper once ``n_k`` passes about ``d_k``.

    Examples
    --------
    >>> f = linear_attention_flops(1024, 512, h=8)
    >>> f["state"] == f["readout"] == 2 * 1024 * 512 * 64
    True
    """
    n, d_model, h = _ints(n=n, d_model=d_model, h=h)
    n_k = n if n_k is None else check_positive_int(n_k, "n_k")
    attention_flops(1, d_model, h=h)
    d_k = d_model // h
    parts = {"feature_map": (n + n_k) * d_model,
             "state": 2 * n_k * d_model * d_k,
             "readout": 2 * n * d_model * d_k,
             "normaliser": n_k * d_model + 3 * n * d_model}
    return {**parts, "total": sum(parts.values())}


def linear_overtakes_at(d_model, h=1):
    """Smallest ``n`` at which softmax attention's FLOPs exceed linear attention's (``n_k = n``).

    Examples
    --------
    >>> linear_overtakes_at(512, h=8)  # just past d_k = 64
    65
    """
    d_model, h = _ints(d_model=d_model, h=h)
    attention_flops(1, d_model, h=h)
    n = 1
    while attention_flops(n, d_model, h)["total"] <= linear_attention_flops(n, d_model, h)["total"]:
        n += 1
    return n


def linear_state_bytes(layers, heads, d_head, dtype="float16", batch=1):
    """Bytes of causal linear attention's decoding state: ``S`` and ``z`` per head and layer.

    Returns
    -------
    nbytes : int
        ``layers * batch * heads * (d_head^2 + d_head) * itemsize``, whatever the number of
        tokens read: where :func:`attn_core.cost.kv_cache_bytes` grows by
        ``2 heads d_head`` numbers per token and layer, this stays.

    Examples
    --------
    >>> linear_state_bytes(32, 32, 128) / 2**20  # a Llama-2-7B shape
    32.25
    """
    layers, heads, d_head, batch = _ints(layers=layers, heads=heads, d_head=d_head, batch=batch)
    size = check_float_dtype(dtype).itemsize
    return layers * batch * heads * (d_head * d_head + d_head) * size


def mla_cache_bytes(n, layers, d_c, d_rope, dtype="float16", batch=1):
    """Bytes of a multi-head latent attention cache: ``d_c + d_rope`` numbers per token and layer.

    Parameters
    ----------
    n : int
        Tokens cached.
    layers : int
    d_c : int
        Width of the latent ``c`` (DeepSeek-V2: 512).
    d_rope : int
        Width of the shared RoPE key (DeepSeek-V2: 64).
    dtype, batch : as in :func:`attn_core.cost.kv_cache_bytes`

    Notes
    -----
    .. math:: \\text{bytes} = L \\cdot b \\cdot n \\cdot (d_c + d_r) \\cdot \\text{itemsize}

    No factor 2 and no head count: keys and values of every head come from the one latent.

    Examples
    --------
    >>> mla_cache_bytes(1, layers=60, d_c=512, d_rope=64)  # DeepSeek-V2, per token, float16
    69120
    """
    n, layers, d_c, d_rope, batch = _ints(n=n, layers=layers, d_c=d_c, d_rope=d_rope,
                                          batch=batch)
    return layers * batch * n * (d_c + d_rope) * check_float_dtype(dtype).itemsize

