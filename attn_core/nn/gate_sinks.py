"""Does an output gate remove the attention sink? The measures of notebook 19's gate section,
and its stored runs (``tools/train_gated.py``).

Qiu et al. (2025) multiply each head's attention output by a sigmoid gate of the attention's
input, ``Y * sigmoid(X W_g)`` (``output_gate=True``: :mod:`attn_core.nn.block_options`), and
report that their gated models no longer put most of their attention on the first token. The
functions here measure that on the course's small models, as notebooks 16 and 17 measure a
sink: the weight each head puts on position 0 against an even spread over the keys, and the
loss when position 0's value vector is zeroed (its weight kept) against zeroing another
position's.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from .._validate import check_positive_int, perturb_init
from .decoder import decoder_forward
from .embeddings import check_ids
from .gpt import GPTConfig, check_params, init_gpt
from .loss import next_token_losses

__all__ = ["GATE_RUNS_PATH", "GATE_TRACE_PATH", "first_weights", "gated_init", "load_gate_runs",
           "mean_gates", "uniform_share", "zeroed_value_losses"]

#: The stored runs: final parameters (npz) and trace with measurements (json).
GATE_RUNS_PATH = Path(__file__).resolve().parents[1] / "data" / "gate-runs.npz"
GATE_TRACE_PATH = GATE_RUNS_PATH.with_name("gate-trace.json")


def _check(params, config, ids):
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    params = check_params(params, config)
    ids = check_ids(np.asarray(ids), config.vocab_size, config.n_ctx)
    if ids.ndim != 2 or ids.shape[1] < 2:
        raise ValueError(f"ids must be (texts, n) token ids with n >= 2, got shape {ids.shape}")
    return params, ids


def gated_init(config, rng_of, **init_kw):
    """The initial weights of ``config`` (gated or not) for a fair comparison: the ungated
    config's draws (:func:`~attn_core.nn.init_gpt` with ``rng_of()`` and ``init_kw``), plus,
    with ``output_gate``, the gate's own parameters as the gated config's draw makes them (its
    biases 0: every gate starts at one half). ``rng_of`` makes a fresh generator each call
    (the same seed twice)."""
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    if not callable(rng_of):
        raise TypeError(f"rng_of must be a function returning a numpy Generator, got "
                        f"{type(rng_of).__name__}")
    plain = GPTConfig(**{**dataclasses.asdict(config), "output_gate": False})
    init = init_gpt(plain, rng_of(), **init_kw)
    if not config.output_gate:
        return init
    drawn = init_gpt(config, rng_of(), **init_kw)
    return {k: init.get(k, a) for k, a in drawn.items()}  # the gated config's order


def uniform_share(n, start=1):
    """The weight an even spread over the keys would put on position 0, averaged over the
    queries ``start .. n - 1`` of a causal map: ``mean_i 1 / (i + 1)``.

    Examples
    --------
    >>> round(uniform_share(3), 4)  # queries 1 and 2: (1/2 + 1/3) / 2
    0.4167
    """
    n = check_positive_int(n, "n", minimum=2)
    start = check_positive_int(start, "start")
    if start >= n:
        raise ValueError(f"start must be below n = {n}, got {start}")
    return float(np.mean(1.0 / (np.arange(start, n) + 1)))


def first_weights(params, config, ids, n_queries=None):
    """The weight each head puts on position 0, per text.

    Parameters
    ----------
    params, config
        A tiny GPT (:class:`~attn_core.nn.GPTConfig`, any ``output_gate``).
    ids : (texts, n) int array_like
    n_queries : int, optional
        Average over the queries ``1 .. n_queries - 1`` only (default: every query from 1 on):
        the model runs on ``ids[:, :n_queries]``, which gives the same weights there (causal).

    Returns
    -------
    (texts, n_layers, n_heads) float ndarray
        ``mean_{1 <= i < n_queries} weights[layer][text, head, i, 0]``; compare with
        :func:`uniform_share` ``(n_queries)``.
    """
    params, ids = _check(params, config, ids)
    if n_queries is not None:
        n_queries = check_positive_int(n_queries, "n_queries", minimum=2)
        if n_queries > ids.shape[1]:
            raise ValueError(f"n_queries must be at most n = {ids.shape[1]}, got {n_queries}")
        ids = ids[:, :n_queries]
    _, weights, _ = decoder_forward(params, config, ids, unembed=False)
    # each (texts, heads, n, n): queries 1.. on key 0 -> (texts, heads)
    return np.stack([weights[i][..., 1:, 0].mean(axis=-1) for i in range(config.n_layers)],
                    axis=1)  # (texts, layers, heads)


def zeroed_value_losses(params, config, ids, positions, scored):
    """Per text, the mean next-token loss with one position's value vector zeroed in every
    layer (its weights kept), for each of ``positions``; and without (key ``None``).

    Parameters
    ----------
    params, config, ids
        As for :func:`first_weights`.
    positions : sequence of int
        Key positions in ``0 .. n - 2`` (one at a time).
    scored : slice
        The predictions averaged (of the ``n - 1``: prediction ``i`` is of ``ids[:, i + 1]``);
        they should come after every position zeroed.

    Returns
    -------
    dict ``{None or position: (texts,) float ndarray}``
    """
    params, ids = _check(params, config, ids)
    if not isinstance(scored, slice):
        raise TypeError(f"scored must be a slice of the predictions, got {type(scored).__name__}")
    n = ids.shape[1] - 1
    out = {}
    for pos in (None, *positions):
        zero = None
        if pos is not None:
            if isinstance(pos, bool) or not isinstance(pos, (int, np.integer)) or not (
                    0 <= pos < n):
                raise ValueError(f"positions must be ints in 0..{n - 1}, got {pos!r}")
            zero = {i: [int(pos)] for i in range(config.n_layers)}
        logits, _, _ = decoder_forward(params, config, ids[:, :-1], values_zeroed=zero,
                                       weights_of=None)
        losses = next_token_losses(logits, ids)[:, scored]  # (texts, scored)
        if losses.shape[1] == 0:
            raise ValueError(f"scored = {scored} keeps no prediction of the {n}")
        out[None if pos is None else int(pos)] = losses.mean(axis=1)
    return out


def mean_gates(params, config, ids, positions=slice(None)):
    """The output gate's mean value per layer and head over the texts, the ``positions``
    (a slice of the queries, default all) and the head's channels: ``(n_layers, n_heads)``
    (Qiu et al. report the mean gate score)."""
    params, ids = _check(params, config, ids)
    if not config.output_gate:
        raise ValueError("config has no output gate (output_gate=False)")
    if not isinstance(positions, slice):
        raise TypeError(f"positions must be a slice of the queries, got "
                        f"{type(positions).__name__}")
    _, _, state = decoder_forward(params, config, ids, unembed=False, weights_of=None,
                                  keep=True)
    h = config.n_heads
    gates = [b["gate"][:, positions] for b in state["blocks"]]  # each (texts, m, h * d_head)
    if gates[0].size == 0:
        raise ValueError(f"positions = {positions} keeps no query of the {ids.shape[1]}")
    return np.stack([g.reshape(-1, h, config.d_head).mean(axis=(0, 2))
                     for g in gates])  # (layers, heads)


def load_gate_runs(runs_path=None, trace_path=None):
    """The stored runs: ``(trace, params_of)``, ``trace`` the JSON dict (settings, commit,
    seeds, CPU time, measurements per run) and ``params_of(name)`` the final parameters of
    the run ``name`` (a key of ``trace["runs"]``) with its :class:`GPTConfig` (every array
    one ulp up under ``ATTN_CORE_PERTURB_INIT=1``: CI's portability check)."""
    trace = json.loads(Path(GATE_TRACE_PATH if trace_path is None else trace_path)
                       .read_text(encoding="utf-8"))
    with np.load(GATE_RUNS_PATH if runs_path is None else runs_path, allow_pickle=False) as f:
        arrays = {k: perturb_init(f[k]) for k in f.files}

    def params_of(name):
        if name not in trace["runs"]:
            raise ValueError(f"no stored run {name!r}: stored are {sorted(trace['runs'])}")
        prefix = f"{name}/"
        params = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
        return params, GPTConfig(**trace["runs"][name]["config"])

    return trace, params_of
