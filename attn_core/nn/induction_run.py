"""Induction heads grown in the attention-only GPT (notebook 15): the task, the measures of
a trained model, and the stored runs of ``tools/train_induction.py``.

The model is :class:`~attn_core.nn.gpt.GPTConfig` with ``mlp=False``, trained by
:func:`~attn_core.nn.train.train_gpt` on :func:`attn_core.induction.repeated_tokens`; the
measures are computed here from its forward pass (ablation included, computed by
:func:`~attn_core.nn.gpt.gpt_forward`, never by editing weights).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..induction import (
    FIRST,
    SECOND,
    diagonal_score,
    icl_score,
    induction_score,
    previous_token_score,
    repeated_tokens,
)
from .gpt import GPTConfig, gpt_forward, mean_ablation
from .loss import log_softmax

__all__ = ["RUNS_PATH", "TASK", "TRACE_PATH", "InductionRuns", "ablation_losses",
           "copy_losses", "eval_batches", "fall_step", "find_heads", "head_scores", "icl",
           "load_runs", "offset_score", "sampler", "token_losses"]

DATA = Path(__file__).resolve().parents[1] / "data"
#: The stored snapshots (``.npz``) and trace (``.json``) of ``tools/train_induction.py``.
RUNS_PATH = DATA / "induction-snapshots.npz"
TRACE_PATH = DATA / "induction-trace.json"

#: The task: training sequences of ``n_ctx + 1`` tokens with a segment of 6..14 tokens
#: repeated after a gap of 0..4 (the copy's distance varies, so no position gives it away);
#: evaluation on the classic layout, ``eval_segment`` random tokens then the same again.
TASK = dict(vocab_size=30, n_ctx=32, segment=(6, 14), gap=(0, 4), eval_segment=14,
            eval_batch=64, eval_seed=1000)


def sampler(task=TASK):
    """``sample(rng, batch) -> (x, y)`` for ``train_gpt``: repeated-token sequences, the
    targets shifted by one, each ``(batch, n_ctx)``."""
    def sample(rng, batch):
        ids, _ = repeated_tokens(rng, batch, task["vocab_size"], task["n_ctx"] + 1,
                                 task["segment"], task["gap"])
        return ids[:, :-1], ids[:, 1:]
    return sample


def eval_batches(task=TASK):
    """The fixed evaluation sequences, from ``task["eval_seed"]``: ``{"repeat": (ids, labels),
    "reference": (ids, labels), "no_repeat": (ids, labels)}``, each ``(eval_batch,
    2 * eval_segment)``; ``reference`` (other draws, same layout) is what mean ablation
    averages over; ``no_repeat`` has all tokens distinct."""
    rng = np.random.default_rng(task["eval_seed"])
    b, v, L = task["eval_batch"], task["vocab_size"], task["eval_segment"]
    return {"repeat": repeated_tokens(rng, b, v, 2 * L, L),
            "reference": repeated_tokens(rng, b, v, 2 * L, L),
            "no_repeat": repeated_tokens(rng, b, v, 2 * L, L, distinct=True)}


def token_losses(params, config, ids, ablate=None):
    """Cross-entropy of each next-token prediction, ``(..., n) ids -> (..., n - 1)``: entry
    ``t - 1`` is the loss of predicting ``ids[..., t]`` from ``ids[..., :t]``."""
    logits, _ = gpt_forward(params, config, np.asarray(ids)[..., :-1], ablate)
    logp = log_softmax(logits)  # (..., n - 1, vocab)
    return -np.take_along_axis(logp, np.asarray(ids)[..., 1:, None], axis=-1)[..., 0]


def copy_losses(params, config, ids, labels, ablate=None):
    """``(first, second)``: mean loss on the tokens of the first and of the second copy (the
    labels of :func:`~attn_core.induction.repeated_tokens`)."""
    losses = token_losses(params, config, ids, ablate)  # (..., n - 1)
    lab = np.asarray(labels)[..., 1:]
    return float(losses[lab == FIRST].mean()), float(losses[lab == SECOND].mean())


def icl(params, config, ids, segment):
    """The in-context learning score on the classic layout: mean loss over the last 4
    predictions of the second copy minus over 4 early ones of the first (positions 1..4)."""
    losses = token_losses(params, config, ids)  # (batch, 2L - 1)
    n = losses.shape[-1]
    return float(icl_score(losses, early=slice(1, 5), late=slice(n - 4, n)).mean())


def head_scores(params, config, ids, ablate=None):
    """``(prev, induction)``, each ``(n_layers, n_heads)``: every head's previous-token and
    induction score, averaged over the sequences ``ids`` (batch, n)."""
    _, weights = gpt_forward(params, config, ids, ablate)  # n_layers x (batch, heads, n, n)
    prev = np.array([previous_token_score(w).mean(axis=0) for w in weights])
    ind = np.array([induction_score(w, np.asarray(ids)[:, None]).mean(axis=0)
                    for w in weights])
    return prev, ind


def find_heads(prev, ind):
    """The heads by what they do: ``{"prev": (0, h), "induction": (L-1, h), "control":
    (0, h)}``, the layer-1 head of highest previous-token score, the last layer's head of
    highest induction score, and the layer-1 head of lowest previous-token score."""
    prev, ind = np.asarray(prev), np.asarray(ind)
    return {"prev": (0, int(np.argmax(prev[0]))),
            "induction": (len(ind) - 1, int(np.argmax(ind[-1]))),
            "control": (0, int(np.argmin(prev[0])))}


def ablation_losses(params, config, batches, heads, kind="mean"):
    """Second-copy loss and the induction head's score with no ablation, the previous-token
    head ablated, the control head ablated: ``{name: (second_loss, induction_score)}``.

    ``kind="mean"`` replaces a head's output by its mean over ``batches["reference"]``,
    ``"zero"`` by zeros."""
    ids, labels = batches["repeat"]
    reference = batches["reference"][0][:, :-1]  # the inputs the losses' forward sees
    out = {}
    for name in ("none", "prev", "control"):
        ablate = None
        if name != "none":
            key = heads[name]
            ablate = (mean_ablation(params, config, reference, [key])
                      if kind == "mean" else {key: None})
        second = copy_losses(params, config, ids, labels, ablate)[1]
        _, ind = head_scores(params, config, ids[:, :-1], ablate)
        layer, h = heads["induction"]
        out[name] = (second, float(ind[layer, h]))
    return out


def fall_step(steps, first, second):
    """The first step at which the second-copy loss is below the midpoint between the
    first-copy loss (chance, nothing to copy) and the final second-copy loss at that step;
    None if it never is."""
    steps, first, second = map(np.asarray, (steps, first, second))
    mid = (first + second[-1]) / 2
    below = np.flatnonzero(second < mid)
    return int(steps[below[0]]) if below.size else None


def offset_score(weights, segment):
    """Weight on the position ``segment - 1`` back (where the classic layout's copy would
    point): :func:`~attn_core.induction.diagonal_score`, averaged over the batch."""
    return diagonal_score(weights, segment - 1).mean(axis=0)


class InductionRuns:
    """The stored runs: ``trace`` (the JSON dict), ``config(layers)`` and ``params(seed,
    layers, step)`` of each stored snapshot (``snapshot_steps(seed, layers)``)."""

    def __init__(self, trace, arrays):
        self.trace = trace
        self._arrays = arrays

    def config(self, layers):
        c = dict(self.trace["config"])
        return GPTConfig(**{**c, "n_layers": layers})

    def run(self, seed, layers):
        return next(r for r in self.trace["runs"]
                    if r["seed"] == seed and r["n_layers"] == layers)

    def snapshot_steps(self, seed, layers):
        return list(self.run(seed, layers)["snapshot_steps"])

    def params(self, seed, layers, step):
        prefix = f"s{seed}.l{layers}.t{step}/"
        found = {k[len(prefix):]: v for k, v in self._arrays.items() if k.startswith(prefix)}
        if not found:
            raise ValueError(f"no stored snapshot for seed {seed}, {layers} layer(s), step "
                             f"{step}: stored are {self.snapshot_steps(seed, layers)}")
        return found


def load_runs(runs_path=None, trace_path=None):
    """The stored runs (:data:`RUNS_PATH`, :data:`TRACE_PATH`) as :class:`InductionRuns`."""
    with np.load(RUNS_PATH if runs_path is None else runs_path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    trace = json.loads(Path(TRACE_PATH if trace_path is None else trace_path).read_text())
    return InductionRuns(trace, arrays)
