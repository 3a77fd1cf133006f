"""A decoder-only model's forward pass, over a whole sequence or through KV caches: the one
stack of blocks that the tiny GPT (14), the attention-only models (15), streaming (16) and
SmolLM2 (17) run.

What the stack needs of a model:

* ``config`` with ``n_layers``, ``n_ctx``, ``vocab_size``, ``d_model`` and
  ``block_options`` (a :class:`~attn_core.nn.block_options.BlockOptions`: norm, MLP,
  positions, heads, biases, eps; a model that mixes kinds of layer also has
  ``layer_options(i)``, each block's), e.g. :class:`attn_core.nn.GPTConfig` or
  :class:`attn_core.model.llm.LLMConfig`;
* ``params``, one flat dict: ``"wte"`` (vocab, d_model); ``"wpe"`` (n_ctx, d_model) when
  the model learns its positions (none with rotary ones); each block's parameters under
  ``"h{i}."``; the final norm ``"ln_f.g"`` (and ``"ln_f.b"`` for layer norm);
  ``"w_unembed"`` (d_model, vocab) (tied embeddings: the view ``wte.T``, no copy)::

    x = wte[ids] (+ wpe[t:t + n])                (..., n, d_model)
    x = block_i(x)  for i in 0 .. n_layers - 1   (attn_core.nn.block)
    logits = Norm_f(x) @ w_unembed               (..., n, vocab_size)

These functions do not check their arguments: the model's own entry points do
(:func:`attn_core.nn.gpt_forward`, :func:`attn_core.nn.generate`,
:func:`attn_core.model.llm.llm_forward`).
"""

from __future__ import annotations

import numpy as np

from ..masks import causal_mask
from .block import _block_parts, _block_step
from .embeddings import _embed
from .layer_norm import _layer_norm_parts
from .rms_norm import _rms_norm_parts

__all__ = ["decoder_forward", "decoder_step"]


def _embed_at(params, ids, start):
    """Token embeddings of ``ids`` (..., n), plus learned positions ``start ..`` if any."""
    if "wpe" in params:
        return _embed(ids, params["wte"], params["wpe"][start:])  # (..., n, d_model)
    return params["wte"][ids]  # (..., n, d_model): positions come inside the blocks (RoPE)


def final_norm(params, options, x):
    """``(y, z, denom)`` of the model's final norm on the stream ``x`` (..., n, d_model)."""
    if options.norm == "rms":
        return _rms_norm_parts(x, params["ln_f.g"], options.eps)
    return _layer_norm_parts(x, params["ln_f.g"], params["ln_f.b"], options.eps)


def key_mask(mask, keys):
    """``mask`` (n, n) with the keys ``keys`` hidden from every query but their own: their
    scores are masked and the weight goes to the other keys (a query always sees itself, so
    no row is left empty)."""
    n = mask.shape[-1]
    out = mask.copy()
    hidden = np.zeros(n, dtype=bool)
    hidden[np.asarray(keys, dtype=np.int64)] = True
    out[:, hidden] = False  # (n, n): no query sees those keys ...
    own = np.flatnonzero(hidden)
    out[own, own] = mask[own, own]  # ... but its own query, so no row is left empty
    return out


def _blocks(params, n_layers):
    """Each block's parameters under their short names (as :func:`block_params`), read in
    one pass over ``params`` (not one pass per block: the real LLM has 30 blocks)."""
    blocks = [{} for _ in range(n_layers)]
    for name, a in params.items():
        layer, dot, short = name[1:].partition(".")
        if name[0] == "h" and dot and layer.isdigit() and int(layer) < n_layers:
            blocks[int(layer)][short] = a
    return blocks


def options_of(config, i):
    """Block ``i``'s options: ``config.layer_options(i)`` where the model mixes kinds of layer
    (:class:`attn_core.nn.GPTConfig`), else the one ``config.block_options``."""
    per_layer = getattr(config, "layer_options", None)
    return config.block_options if per_layer is None else per_layer(i)


def _select(arr, heads, axis):
    return arr if heads is None else np.take(arr, list(heads), axis=axis)


def decoder_forward(params, config, ids, *, ablate=None, mask=None, keys_masked=None,
                    values_zeroed=None, weights_of="all", heads_of=None, keep=False,
                    unembed=True):
    """The logits of every position, with optional interventions and what was asked to keep.

    Parameters
    ----------
    params, config
        A decoder (see the module's docstring), checked by the caller.
    ids : (..., n) int ndarray
        Checked token ids, ``n <= n_ctx``.
    ablate : dict, optional
        ``{(layer, head): None or (n, d_head) array}``: the head's output replaced by zeros or
        by the array (a mean over a reference batch) before the output projection.
    mask : (n, n) bool ndarray, optional
        Where query ``i`` may see key ``j`` in every layer; default causal. A sliding window
        with sinks is :func:`attn_core.window_mask`.
    keys_masked : dict, optional
        ``{layer: key positions}``: in that layer those keys' scores are masked for every
        later query (their weight goes to the other keys).
    values_zeroed : dict, optional
        ``{layer: key positions}``: in that layer those keys' value vectors are zeroed (their
        weights are kept, what they carry is not).
    weights_of : "all", None or dict, optional
        Which attention weights to return: every layer's (default), none, or ``{layer: heads
        or None}`` (None: all heads of that layer). The others are dropped layer by layer,
        so a long input never holds all ``n_layers x n_heads`` ``(n, n)`` maps.
    heads_of : dict, optional
        ``{layer: heads or None}``: also return those heads' outputs (``weights @ v``,
        before the output projection), ``(..., heads, n, d_head)``.
    keep : bool
        Keep each block's intermediate arrays for a backward pass (the tiny GPT's training).
    unembed : bool
        False returns the final norm's output (..., n, d_model) in place of the logits (a
        long text's logits are large: the caller unembeds a few rows at a time).

    Returns
    -------
    logits : (..., n, vocab) ndarray
    weights : dict ``{layer: (..., heads, n, n) ndarray}``
    state : dict
        ``"heads"``: ``{layer: (..., heads, n, d_head)}``; with ``keep``: ``"blocks"`` (one
        cache per block), ``"ln_f"``, ``"z"``, ``"denom"`` (the final norm's parts).
    """
    o = config.block_options
    x = _embed_at(params, ids, 0)  # (..., n, d_model)
    n = x.shape[-2]
    base = mask
    weights, heads, blocks = {}, {}, []
    params_of = _blocks(params, config.n_layers)
    for i in range(config.n_layers):
        layer_ablate = {h: r for (layer, h), r in (ablate or {}).items() if layer == i}
        layer_mask = base
        if keys_masked and i in keys_masked:
            layer_mask = key_mask(causal_mask(n) if base is None else base, keys_masked[i])
        zero = None if not values_zeroed or i not in values_zeroed else np.asarray(
            values_zeroed[i], dtype=np.int64)
        x, w, cache = _block_parts(x, params_of[i], options_of(config, i), layer_ablate,
                                   layer_mask, zero_values=zero)
        if weights_of == "all":
            weights[i] = w
        elif weights_of and i in weights_of:
            weights[i] = _select(w, weights_of[i], -3)
        if heads_of and i in heads_of:
            merged = cache["attn"][3]  # (..., n, h * d_head)
            # (..., n, h * d_head) -> (..., n, h, d_head) -> (..., h, n, d_head)
            split = merged.reshape(*merged.shape[:-1], o.n_heads, -1).swapaxes(-3, -2)
            heads[i] = _select(split, heads_of[i], -3)
        if keep:
            blocks.append(cache)
        del w, cache
    y, z, denom = final_norm(params, o, x)
    logits = y @ params["w_unembed"] if unembed else y  # (..., n, d) @ (d, vocab) -> (..., n, V)
    state = {"heads": heads}
    if keep:
        state.update({"blocks": blocks, "ln_f": y, "z": z, "denom": denom})
    return logits, weights, state


def decoder_step(params, config, new_ids, caches, ablate=None):
    """Logits of ``m`` new tokens after those in the per-layer KV caches, and the new caches.

    Parameters
    ----------
    params, config
        A decoder (see the module's docstring), checked by the caller.
    new_ids : (..., m) int ndarray
        The new tokens, at positions ``t .. t + m - 1`` with ``t = caches[0].seen``.
    caches : tuple of n_layers KVCache
        Keys and values ``(..., kv_heads, t, d_head)`` (one token at a time for a rolling
        cache that has evicted some: the caller loops).
    ablate : dict, optional
        ``{(layer, head): None or (m, d_head) array}``, as in :func:`decoder_forward`.

    Returns
    -------
    logits : (..., m, vocab) ndarray
    caches : tuple of KVCache, the ``m`` new tokens appended
    """
    o = config.block_options
    x = _embed_at(params, new_ids, caches[0].seen)  # (..., m, d_model)
    out = []
    params_of = _blocks(params, len(caches))
    for i, kv in enumerate(caches):
        layer_ablate = {h: r for (layer, h), r in (ablate or {}).items() if layer == i}
        x, _, kv = _block_step(x, params_of[i], options_of(config, i), kv, layer_ablate)
        out.append(kv)
    y = final_norm(params, o, x)[0]
    return y @ params["w_unembed"], tuple(out)  # (..., m, d) @ (d, V) -> (..., m, V)
