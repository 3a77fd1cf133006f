"""StreamingLLM's rolling cache with positions re-numbered inside the cache (Xiao et al. 2023,
their code's ``pos_shift``), run over a whole text for notebook 17's window experiment.

The course's own rolling cache (:func:`attn_core.model.llm.llm_forward` with ``window`` and
``n_sink``) keeps each token's original position. Xiao et al.'s code keeps the keys without
their rotation and turns them, at every step, by their place in the cache: the sinks are
``0 .. n_sink - 1``, the window follows, the query is last. With RoPE only the offset between
a query and a key counts, so the two differ in one place only: once the cache is full (query
``i >= n_sink + window - 1``), a sink ``k`` sits at offset ``n_sink + window - 1 - k`` from the
query instead of ``i - k``; the window's offsets are the same in both. This module computes
that over a whole text at once: the sinks' scores use the query turned to position
``min(i, n_sink + window - 1)``, every other score the query at ``i``.

The test ``tests/test_llm_measurements.py`` checks it against a token-by-token loop that
builds each query's cache and numbers it, as their code does.
"""

from __future__ import annotations

import numpy as np

from ..masks import window_mask
from ..multihead import repeat_kv
from ..nn import next_token_losses, rms_norm, swiglu
from ..positions import rope
from ..softmax import softmax
from ..threads import blas_threads

__all__ = ["pos_shift_losses"]


def _heads(x, n):
    """(n_tok, n * d_head) -> (n, n_tok, d_head)."""
    return x.reshape(x.shape[0], n, -1).transpose(1, 0, 2)


def _attention(a, p, config, window, n_sink, shift):
    """One layer's attention output (n, d_model) for the normed rows ``a`` (n, d_model)."""
    n, h, kv = a.shape[0], config.n_heads, config.n_kv_heads
    pos = np.arange(n)
    turn = dict(base=config.rope_base, pairing=config.pairing)
    q = _heads(a @ p["attn.w_q"], h)  # (h, n, d_head)
    k = repeat_kv(_heads(a @ p["attn.w_k"], kv), h // kv)  # (h, n, d_head)
    v = repeat_kv(_heads(a @ p["attn.w_v"], kv), h // kv)
    k_turned = rope(k, pos, **turn)
    scale = 1.0 / np.sqrt(q.shape[-1])
    s = rope(q, pos, **turn) @ k_turned.swapaxes(-1, -2) * scale  # (h, n, n)
    if shift and n_sink:  # the sinks seen from the query's place in the full cache
        q_cache = rope(q, np.minimum(pos, n_sink + window - 1), **turn)
        s[..., :n_sink] = q_cache @ k_turned[:, :n_sink].swapaxes(-1, -2) * scale
    s = np.where(window_mask(n, window, n_sink), s, -np.inf)
    heads = softmax(s, axis=-1) @ v  # (h, n, d_head)
    return heads.transpose(1, 0, 2).reshape(n, -1) @ p["attn.w_o"]


def pos_shift_losses(model, ids, window, n_sink, shift=True):
    """Per-token losses (n - 1,) of one text ``ids`` (n,) read through a rolling cache of
    ``window`` tokens and ``n_sink`` sinks in every layer, the positions re-numbered inside
    the cache (``shift=True``, Xiao et al.'s ``pos_shift``) or kept (``shift=False``: the
    course's :func:`attn_core.model.llm.llm_losses` with ``window``, ``n_sink``).

    ``model`` is ``(params, config)`` of :func:`attn_core.model.llm_file.load_llm`; the
    arithmetic is in the weights' dtype. Returns float64, position ``i`` predicting
    ``ids[i + 1]``.
    """
    params, config = model
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.size < 2:
        raise ValueError(f"ids must be one text of at least 2 tokens, got shape {ids.shape}")
    if not (isinstance(window, int) and window >= 1):
        raise ValueError(f"window must be a positive int, got {window!r}")
    x = params["wte"][ids[:-1]]  # (n, d_model)
    with blas_threads():
        for i in range(config.n_layers):
            p = {name.split(".", 1)[1]: w for name, w in params.items()
                 if name.startswith(f"h{i}.")}
            x = x + _attention(rms_norm(x, p["ln1.g"], config.eps), p, config, window, n_sink,
                               shift)
            x = x + swiglu(rms_norm(x, p["ln2.g"], config.eps), p["mlp.w_gate"],
                           p["mlp.w_up"], p["mlp.w_down"])
        y = rms_norm(x, params["ln_f.g"], config.eps)
        out = np.empty(len(y))
        for s in range(0, len(y), 128):  # a block of rows at a time: (128, vocab) logits
            out[s:s + 128] = next_token_losses(y[s:s + 128] @ params["w_unembed"],
                                               ids[s:s + 129])
    return out
