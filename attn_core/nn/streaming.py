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

import json
from pathlib import Path

import numpy as np

from .._validate import as_float_array, check_positive_int, check_result, checked_later
from ..masks import causal_mask, window_mask
from .data import load_corpus, split_corpus
from .decoder import decoder_forward
from .embeddings import check_ids
from .generate import prefill
from .gpt import GPTConfig, check_params, gpt_forward
from .loss import next_token_losses

__all__ = ["SINKS_PATH", "SINK_CONDITIONS", "SINK_KEPT", "SINK_LOSS_FROM", "first_token_weight",
           "held_out_windows", "kept_mask", "load_sink_measurements", "sink_measures",
           "token_losses"]

#: Notebook 16's stored measurement (``tools/measure_sinks.py``).
SINKS_PATH = Path(__file__).resolve().parents[1] / "data" / "sink-measurements.json"
#: The characters kept, one at a time, beside a window of 8 in the sinks' control.
SINK_KEPT = (1, 2, 3, 4, 8)
#: Notebook 16's caches: name -> :func:`token_losses` keywords. The first five are the
#: streaming caches; the last ones keep another early character in place of the first (the
#: control: is the first character worth more than any other old one?).
SINK_CONDITIONS = {"full attention": {}, "window 8, evicts": {"window": 8},
              "window 8 + 1 sink": {"window": 8, "n_sink": 1},
              "window 8 + 4 sinks": {"window": 8, "n_sink": 4},
              "window 12 (same memory)": {"window": 12},
              **{f"window 8 + character {k}": {"window": 8, "keep": [k]} for k in SINK_KEPT}}
#: The losses are averaged from this position on, where every window of SINK_CONDITIONS is full.
SINK_LOSS_FROM = 12


def token_losses(params, config, ids, window=None, n_sink=0, ablate=None, keep=None):
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
    keep : sequence of int, optional
        With ``window`` (and no ``n_sink``): these positions stay visible beside the window to
        every later token, in place of the first ones (the sinks' control: keep another early
        token instead of the first). A rolling cache keeps only the first tokens, so this runs
        one forward pass under the same mask (``window_mask`` plus the kept columns), which a
        rolling cache with ``n_sink`` equals where ``keep`` is ``range(n_sink)``.

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
    elif keep is not None:
        mask = kept_mask(ids.shape[-1] - 1, window, keep, n_sink)  # (n - 1, n - 1)
        with checked_later():
            logits, _, _ = decoder_forward(params, config, ids[..., :-1], mask=mask,
                                           weights_of=None)
        check_result(logits, "the logits")
    else:
        logits, _ = prefill(params, config, ids[..., :-1], window=window, n_sink=n_sink)
    return next_token_losses(logits, ids)  # (..., n - 1)


def kept_mask(n, window, keep, n_sink=0):
    """The sliding-window mask with the positions ``keep`` visible to every later query.

    Parameters
    ----------
    n : int >= 1
    window : int >= 1
        As in :func:`attn_core.masks.window_mask`.
    keep : sequence of int
        Positions in ``0 .. n - 1`` kept beside the window (the first ones are the sinks).
    n_sink : int
        Must be 0: ``keep`` takes the place of the first ``n_sink`` positions.

    Returns
    -------
    mask : (n, n) bool ndarray
        ``mask[i, j]`` is ``i - window < j <= i``, or ``j`` in ``keep`` and ``j <= i``.

    Examples
    --------
    >>> kept_mask(4, 2, [1]).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 1, 1, 1]])
    """
    if window is None:
        raise ValueError("keep needs a window: without one every position is visible anyway")
    if n_sink:
        raise ValueError(f"keep takes the place of n_sink (keep=range(n_sink) is the sinks); "
                         f"give one of them, got n_sink = {n_sink} and keep = {keep!r}")
    base = window_mask(n, window)  # (n, n)
    try:
        kept = np.asarray(keep)
    except (TypeError, ValueError):
        kept = np.asarray([None])
    if kept.ndim != 1 or kept.dtype.kind not in "iu" or not ((kept >= 0) & (kept < n)).all():
        raise ValueError(f"keep must be a sequence of positions in 0..{n - 1}, got {keep!r}")
    column = np.zeros(n, dtype=bool)
    column[kept] = True
    return base | (causal_mask(n) & column)  # (n, n): kept keys, never a later one


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


def held_out_windows(checkpoint):
    """The held-out text cut end to end into windows of the model's ``n_ctx`` characters.

    Parameters
    ----------
    checkpoint : Checkpoint
        The tiny GPT (:func:`attn_core.nn.load_checkpoint`): its vocabulary and ``n_ctx``.

    Returns
    -------
    texts : (n_win, n_ctx) int ndarray
        The validation text of :func:`attn_core.nn.split_corpus`, as token ids, without the
        last incomplete window.
    """
    _, val_text = split_corpus(load_corpus())
    ids = np.asarray(checkpoint.vocab.encode(val_text))
    n_ctx = checkpoint.config.n_ctx
    n_win = len(ids) // n_ctx
    return ids[:n_win * n_ctx].reshape(n_win, n_ctx)  # (n_win, n_ctx)


def sink_measures(params, config, texts, conditions=None, start=SINK_LOSS_FROM, parts=8):
    """Notebook 16's measures of each text: the weight every head puts on its first token,
    and the mean loss under each cache of ``conditions``.

    Parameters
    ----------
    params : dict of arrays, config : GPTConfig
        The tiny GPT.
    texts : (n_win, n) int array_like
        Texts side by side (:func:`held_out_windows`).
    conditions : dict, optional
        ``{name: token_losses keywords}``; default :data:`SINK_CONDITIONS`.
    start : int
        The losses are averaged over the predictions ``start .. n - 2``.
    parts : int
        The texts go through the model in this many parts (the attention maps stay small).

    Returns
    -------
    dict
        ``"first_token_weight"``: (n_win, n_layers, n_heads), :func:`first_token_weight` of
        each text (queries 1 .. n - 1); ``"losses"``: ``{name: (n_win,)}``.
    """
    conditions = SINK_CONDITIONS if conditions is None else conditions
    texts = np.asarray(texts)
    if texts.ndim != 2:
        raise ValueError(f"texts must be (n_win, n) token ids, got shape {texts.shape}")
    start = check_positive_int(start, "start", minimum=0)
    if not start < texts.shape[1] - 1:
        raise ValueError(f"start must leave a prediction among the {texts.shape[1] - 1}, got "
                         f"{start}")
    chunks = np.array_split(texts, min(check_positive_int(parts, "parts"), len(texts)))
    share = np.concatenate([np.stack([first_token_weight(w) for w in
                                      gpt_forward(params, config, part)[1]], axis=1)
                            for part in chunks])  # (n_win, layers, heads)
    losses = {name: np.concatenate([token_losses(params, config, part, **kw)[:, start:]
                                    .mean(axis=1) for part in chunks])
              for name, kw in conditions.items()}  # each (n_win,)
    return {"first_token_weight": share, "losses": losses}


def load_sink_measurements(path=None):
    """The stored measurement of ``tools/measure_sinks.py`` (default :data:`SINKS_PATH`):
    the dict of :func:`sink_measures` (arrays) with the file's ``settings`` and ``made_by``."""
    data = json.loads(Path(SINKS_PATH if path is None else path).read_text(encoding="utf-8"))
    return {"first_token_weight": np.array(data["first_token_weight"]),
            "losses": {k: np.array(v) for k, v in data["losses"].items()},
            "settings": data["settings"], "made_by": data["made_by"]}
