"""Attention sinks in the tiny GPT: how much weight its heads put on the first tokens, and
what a sliding window that evicts them costs.

Xiao et al. (2023), "Efficient streaming language models with attention sinks", found that
trained language models put a large share of their attention on the first token(s), whatever
those tokens are, and that a sliding-window KV cache which evicts them degrades, while one that
keeps a few of them (the sinks) beside the window stays close to full attention. The functions
here measure both on the course's model, through the one KV-cache path
(:func:`attn_core.nn.generate.prefill` with rolling caches).
"""

from __future__ import annotations

import numpy as np

from .._validate import as_float_array, check_positive_int
from .embeddings import check_ids
from .generate import prefill
from .gpt import GPTConfig, check_params, gpt_forward
from .loss import next_token_losses

__all__ = ["first_token_weight", "token_losses"]


def token_losses(params, config, ids, window=None, n_sink=0, ablate=None):
    """The loss of each next-token prediction along ``ids``, with a full or rolling cache.

    Parameters
    ----------
    params : dict of arrays, config : GPTConfig
        The tiny GPT.
    ids : (..., n) int array_like, 2 <= n <= n_ctx
        The text (leading dims: several texts side by side); position ``i`` predicts
        ``ids[..., i + 1]``.
    window : int >= 1, optional
        Each token attends only to the last ``window`` tokens (itself included) in every
        layer; default None: to every earlier token (full causal attention).
    n_sink : int >= 0, optional
        With ``window``: the first ``n_sink`` tokens stay visible too (attention sinks).
    ablate : dict, optional
        Heads whose output is replaced, as in :func:`attn_core.nn.gpt_forward` (notebook 15);
        then the whole text goes through one forward pass (full causal attention, no window).

    Returns
    -------
    losses : (..., n - 1) float64 ndarray
        ``-log p(ids[..., i + 1] | what position i sees)`` in nats.

    Notes
    -----
    .. math:: \\ell_i = -\\log \\mathrm{softmax}(z_i)_{x_{i+1}}

    where ``z_i`` are the logits at position ``i`` computed through rolling KV caches
    (:func:`attn_core.nn.generate.prefill`), token by token: the positions stay absolute
    (learned, ``n_ctx`` of them), only the keys a query may see change.
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    params = check_params(params, config)
    ids = check_ids(np.asarray(ids), config.vocab_size, config.n_ctx)
    if ids.shape[-1] < 2:
        raise ValueError(f"ids must hold 2..n_ctx = {config.n_ctx} token ids along its last "
                         f"axis, got shape {ids.shape}")
    if ablate is not None:
        if window is not None:
            raise ValueError(f"ablate works with full attention only, got window = {window}")
        logits, _ = gpt_forward(params, config, ids[..., :-1], ablate)
    else:
        logits, _ = prefill(params, config, ids[..., :-1], window=window, n_sink=n_sink)
    return next_token_losses(logits, ids)  # (..., n - 1)


def first_token_weight(weights, n_first=1, start=None):
    """The share of each head's attention that goes to the first ``n_first`` tokens.

    Parameters
    ----------
    weights : (..., h, n, n) array_like
        Attention weights (rows sum to 1), e.g. one layer of :func:`attn_core.nn.gpt_forward`.
    n_first : int >= 1
        How many first tokens count (the candidate sinks).
    start : int, optional
        Average over the queries ``start .. n - 1`` only; default ``n_first`` (a query among
        the first tokens can see only them, so its share is 1 whatever the head does).

    Returns
    -------
    share : (..., h) ndarray
        ``mean_{i >= start} sum_{j < n_first} weights[..., i, j]``. Uniform causal attention
        would give ``mean_i n_first / (i + 1)``, the baseline to compare with.
    """
    w = as_float_array(weights, "weights", min_ndim=3, layout="(..., h, n, n)")
    n = w.shape[-1]
    n_first = check_positive_int(n_first, "n_first")
    start = n_first if start is None else check_positive_int(start, "start", minimum=0)
    if not n_first <= n - 1 or not start <= n - 1:
        raise ValueError(f"n_first and start must leave at least one query among the n = {n}, "
                         f"got n_first = {n_first}, start = {start}")
    on_first = w[..., start:, :n_first].sum(axis=-1)  # (..., h, n - start)
    return on_first.mean(axis=-1)  # (..., h)
