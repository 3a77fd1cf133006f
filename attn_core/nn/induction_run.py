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

from .._validate import perturb_init
from ..induction import (
    FIRST,
    SECOND,
    icl_score,
    induction_score,
    previous_token_score,
    repeated_tokens,
)
from .embeddings import check_ids
from .gpt import GPTConfig, gpt_forward, mean_ablation
from .loss import next_token_losses

__all__ = ["ABLATIONS", "RUNS_PATH", "TASK", "TRACE_PATH", "InductionRuns", "ablation_losses",
           "ablation_at_distance", "ablation_measures", "copy_losses", "copy_target_weight",
           "distance_batches", "distance_layout", "eval_batches", "fall_step", "find_heads",
           "head_scores", "icl", "load_runs", "measures", "sampler", "snapshot_states",
           "training_distances"]

DATA = Path(__file__).resolve().parents[1] / "data"
#: The stored snapshots (``.npz``) and trace (``.json``) of ``tools/train_induction.py``.
RUNS_PATH = DATA / "induction-snapshots.npz"
TRACE_PATH = DATA / "induction-trace.json"

#: The task: training sequences of ``n_ctx + 1`` tokens with a segment of 6..14 tokens
#: repeated after a gap of 0..4 (the copy's distance varies);
#: evaluation on the classic layout, ``eval_segment`` random tokens then the same again.
TASK = dict(vocab_size=30, n_ctx=32, segment=(6, 14), gap=(0, 4), eval_segment=14,
            eval_batch=64, eval_seed=1000)


#: The ablations compared: none, the previous-token head, the control head.
ABLATIONS = ("none", "prev", "control")


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


def _check_batch(config, ids, labels=None):
    """``ids`` (batch, n) token ids of ``config``'s vocabulary, n >= 2, and ``labels`` of the
    same shape (:func:`~attn_core.induction.repeated_tokens`), else a clear error."""
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    ids = check_ids(ids, config.vocab_size, name="ids")
    if ids.ndim != 2 or ids.shape[1] < 2:
        raise ValueError(f"ids must be a batch of sequences (batch, n) with n >= 2, got shape "
                         f"{ids.shape}")
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != ids.shape:
            raise ValueError(f"labels must have the shape of ids {ids.shape} (the labels of "
                             f"repeated_tokens), got {labels.shape}")
    return ids, labels


def training_distances(task=TASK):
    """``{distance: share}``: how the training sequences' second-copy tokens (those labelled
    :data:`~attn_core.induction.SECOND`) are spread over the distance back to their earlier
    occurrence, ``segment + gap``; exact, from the uniform draws of :func:`sampler` (a
    segment of length ``L`` gives ``L - 1`` such tokens)."""
    (s0, s1), (g0, g1) = task["segment"], task["gap"]
    counts = {}
    for length in range(s0, s1 + 1):
        for gap in range(g0, g1 + 1):
            counts[length + gap] = counts.get(length + gap, 0) + length - 1
    total = sum(counts.values())
    return {d: counts[d] / total for d in sorted(counts)}


def distance_layout(distance, task=TASK):
    """``(segment, gap)`` that put a copy ``distance`` tokens after its first occurrence,
    both within the training ranges: the longest segment that fits, then the gap.

    Examples
    --------
    >>> distance_layout(8), distance_layout(14), distance_layout(18)
    ((8, 0), (14, 0), (14, 4))
    """
    (s0, s1), (g0, g1) = task["segment"], task["gap"]
    segment = min(distance - g0, s1)
    gap = distance - segment
    if not (s0 <= segment <= s1 and g0 <= gap <= g1):
        raise ValueError(f"distance must lie in {s0 + g0}..{s1 + g1} (the training's segments "
                         f"{s0}..{s1} plus gaps {g0}..{g1}), got {distance!r}")
    return segment, gap


def distance_batches(distances, task=TASK):
    """``{distance: (ids, labels)}``: for each distance, ``eval_batch`` sequences of the
    training's length (``n_ctx + 1``) with one copy at that distance
    (:func:`distance_layout`) at a random place; seeded from ``eval_seed`` and the
    distance."""
    out = {}
    for d in distances:
        segment, gap = distance_layout(d, task)
        rng = np.random.default_rng([task["eval_seed"], d])
        out[d] = repeated_tokens(rng, task["eval_batch"], task["vocab_size"],
                                 task["n_ctx"] + 1, segment, gap)
    return out


def measures(params, config, ids, labels, ablate=None, induction=True):
    """One forward pass over ``ids[:, :-1]`` (batch, n - 1) and all it tells: ``first``,
    ``second`` (:func:`copy_losses`), ``icl`` (:func:`icl`), ``prev`` and ``induction``
    (:func:`head_scores`, ``(n_layers, n_heads)``; left out with ``induction=False``, for
    sequences in which nothing repeats) and the ``weights`` themselves."""
    ids, labels = _check_batch(config, ids, labels)
    logits, weights = gpt_forward(params, config, ids[:, :-1], ablate)
    losses = next_token_losses(logits, ids)  # (batch, n - 1)
    m = losses.shape[-1]
    prev = np.array([previous_token_score(w).mean(axis=0) for w in weights])
    ind = (np.array([induction_score(w, ids[:, None, :-1]).mean(axis=0) for w in weights])
           if induction else None)
    first, second = _copy_means(losses, labels)
    return dict(first=first, second=second,
                icl=float(icl_score(losses, early=slice(1, 5), late=slice(m - 4, m)).mean()),
                prev=prev, induction=ind, weights=weights)


def copy_losses(params, config, ids, labels, ablate=None):
    """``(first, second)``: mean loss on the tokens of the first and of the second copy (the
    labels of :func:`~attn_core.induction.repeated_tokens`); no attention maps are read, so
    any mixer's model is measured (a gated-delta layer's weights are not maps)."""
    ids, labels = _check_batch(config, ids, labels)
    logits, _ = gpt_forward(params, config, ids[:, :-1], ablate)
    return _copy_means(next_token_losses(logits, ids), labels)


def _copy_means(losses, labels):
    """Mean of the (batch, n - 1) next-token ``losses`` over the first copy's and over the
    second copy's tokens (``labels`` (batch, n), the prediction of token t + 1 at t)."""
    lab = np.asarray(labels)[:, 1:]
    return float(losses[lab == FIRST].mean()), float(losses[lab == SECOND].mean())


def icl(params, config, ids, labels):
    """The in-context learning score on the classic layout (Olsson et al. 2022: loss late in
    the context minus loss early): mean loss over the last 4 predictions (second copy) minus
    over predictions 2..5 (first copy)."""
    return measures(params, config, ids, labels)["icl"]


def head_scores(params, config, ids, ablate=None):
    """``(prev, induction)``, each ``(n_layers, n_heads)``: every head's previous-token and
    induction score, averaged over the sequences ``ids`` (batch, n)."""
    ids, _ = _check_batch(config, ids)
    _, weights = gpt_forward(params, config, ids, ablate)  # n_layers x (batch, heads, n, n)
    prev = np.array([previous_token_score(w).mean(axis=0) for w in weights])
    ind = np.array([induction_score(w, np.asarray(ids)[:, None]).mean(axis=0)
                    for w in weights])
    return prev, ind


def find_heads(prev, ind):
    """The heads by what they do: ``{"prev": (0, h), "induction": (L-1, h), "control":
    (0, h)}``, the layer-1 head of highest previous-token score, the last layer's head of
    highest induction score, and the layer-1 head of lowest previous-token score among the
    others (never the previous-token head itself, also when scores tie)."""
    try:
        prev, ind = np.asarray(prev, dtype=float), np.asarray(ind, dtype=float)
    except (TypeError, ValueError):
        raise TypeError("prev and ind must be arrays of scores (layers, heads), got "
                        f"{type(prev).__name__} and {type(ind).__name__}") from None
    if prev.ndim != 2 or ind.ndim != 2 or prev.shape != ind.shape or not prev.size:
        raise ValueError(f"prev and ind must be scores of shape (layers, heads), the same for "
                         f"both, got {prev.shape} and {ind.shape}")
    if prev.shape[1] < 2:
        raise ValueError("the control needs two heads in layer 1: one that writes the previous "
                         f"token and another; this model has {prev.shape[1]}")
    if not (np.isfinite(prev).all() and np.isfinite(ind).all()):
        raise ValueError("prev and ind must be finite scores")
    best = int(np.argmax(prev[0]))
    others = np.delete(np.arange(prev.shape[1]), best)  # never the previous-token head itself
    return {"prev": (0, best),
            "induction": (len(ind) - 1, int(np.argmax(ind[-1]))),
            "control": (0, int(others[np.argmin(prev[0][others])]))}


def ablation_measures(params, config, batches, heads, kind="mean"):
    """:func:`measures` on ``batches["repeat"]`` with no ablation, the previous-token head
    ablated and the control head ablated: ``{"none": ..., "prev": ..., "control": ...}``.

    ``kind="mean"`` replaces a head's output by its mean over ``batches["reference"]`` (at
    each position), ``"zero"`` by zeros."""
    if not isinstance(batches, dict) or not {"repeat", "reference"} <= set(batches):
        raise TypeError("batches must be eval_batches()'s dict (with 'repeat' and "
                        f"'reference'), got {type(batches).__name__}")
    if not isinstance(heads, dict) or not {"prev", "control", "induction"} <= set(heads):
        raise TypeError("heads must be find_heads()'s dict (with 'prev', 'control' and "
                        f"'induction'), got {type(heads).__name__}")
    if kind not in ("mean", "zero"):
        raise ValueError(f"kind must be 'mean' or 'zero', got {kind!r}")
    ids, labels = batches["repeat"]
    keys = [heads["prev"], heads["control"]]
    means = (mean_ablation(params, config, batches["reference"][0][:, :-1], keys)
             if kind == "mean" else {k: None for k in keys})
    return {name: measures(params, config, ids, labels,
                           None if name == "none" else {heads[name]: means[heads[name]]})
            for name in ABLATIONS}


def ablation_losses(params, config, batches, heads, kind="mean"):
    """``{ablation: (second-copy loss, the induction head's score)}`` of
    :func:`ablation_measures`."""
    found = ablation_measures(params, config, batches, heads, kind)  # (checks its arguments)
    layer, h = heads["induction"]
    return {name: (m["second"], float(m["induction"][layer, h])) for name, m in found.items()}


def ablation_at_distance(runs, seed, distance, kind="mean", task=TASK):
    """:func:`ablation_losses` of the last snapshot of ``seed``'s two-layer run on sequences
    with the copy ``distance`` back (:func:`distance_batches`); the heads are those found on
    the evaluation batches (:func:`find_heads`), the mean over other sequences of the same
    layout (seeded apart)."""
    config = runs.config(2)
    params = runs.params(seed, 2, runs.snapshot_steps(seed, 2)[-1])
    m = measures(params, config, *eval_batches(task)["repeat"])
    heads = find_heads(m["prev"], m["induction"])
    other = dict(task, eval_seed=task["eval_seed"] + 1)
    batches = {"repeat": distance_batches([distance], task)[distance],
               "reference": distance_batches([distance], other)[distance]}
    return ablation_losses(params, config, batches, heads, kind)


def copy_target_weight(weights, labels, distance):
    """The mean weight a head puts on the copy's next token: for each query ``i`` whose token
    is a copy (labelled :data:`~attn_core.induction.SECOND`, ``distance`` after its first
    occurrence), the weight on key ``i - distance + 1``, the token that followed the first
    occurrence.

    Parameters
    ----------
    weights : (batch, m, m) array_like
        One head's maps over ``ids[:, :m]`` (:func:`measures`' ``weights[layer][:, head]``).
    labels : (batch, n) int array_like, n >= m
        The labels of :func:`~attn_core.induction.repeated_tokens` (one copy ``distance``
        back, :func:`distance_batches`).
    distance : int

    Returns
    -------
    float
    """
    w = np.asarray(weights, dtype=float)
    labels = np.asarray(labels)
    if w.ndim != 3 or w.shape[1] != w.shape[2] or labels.ndim != 2 \
            or labels.shape[0] != w.shape[0] or labels.shape[1] < w.shape[1]:
        raise ValueError(f"weights must be (batch, m, m) and labels (batch, n >= m), got "
                         f"{w.shape} and {labels.shape}")
    b, i = np.nonzero(labels[:, :w.shape[1]] == SECOND)
    if isinstance(distance, bool) or not isinstance(distance, (int, np.integer)) \
            or not b.size or (i - distance + 1 < 0).any() or distance < 1:
        raise ValueError(f"distance must be the copy's distance (an int >= 1 that every "
                         f"copied token lies behind), got {distance!r}")
    return float(w[b, i, i - distance + 1].mean())


def fall_step(steps, losses, threshold):
    """The first of ``steps`` at which ``losses`` is below ``threshold`` (notebook 15: the
    second-copy loss below half of chance, ``ln(vocab) / 2``); None if it never is."""
    steps, losses = np.asarray(steps), np.asarray(losses)
    if steps.ndim != 1 or steps.shape != losses.shape or steps.dtype.kind not in "iu":
        raise ValueError(f"steps (int) and losses must be 1-D arrays of the same length, got "
                         f"shapes {steps.shape} ({steps.dtype}) and {losses.shape}")
    if isinstance(threshold, bool) or not np.isscalar(threshold) or not np.isfinite(threshold):
        raise TypeError(f"threshold must be a finite number, got {threshold!r}")
    below = np.flatnonzero(losses < threshold)
    return int(steps[below[0]]) if below.size else None


class InductionRuns:
    """The stored runs: ``trace`` (the JSON dict), ``config(layers)`` and ``params(seed,
    layers, step)`` of each stored snapshot (``snapshot_steps(seed, layers)``)."""

    def __init__(self, trace, arrays):
        self.trace = trace
        self._arrays = arrays
        self.states = {}  # snapshot_states' results, computed once per run and sequence

    def config(self, layers):
        c = dict(self.trace["config"])
        return GPTConfig(**{**c, "n_layers": layers})

    def run(self, seed, layers):
        found = [r for r in self.trace["runs"] if r["seed"] == seed and r["n_layers"] == layers]
        if not found:
            stored = sorted((r["seed"], r["n_layers"]) for r in self.trace["runs"])
            raise ValueError(f"no stored run with seed {seed!r} and {layers!r} layer(s): stored "
                             f"(seed, layers) are {stored}")
        return found[0]

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
    """The stored runs (:data:`RUNS_PATH`, :data:`TRACE_PATH`) as :class:`InductionRuns`
    (every array one ulp up under ``ATTN_CORE_PERTURB_INIT=1``: CI's portability check)."""
    with np.load(RUNS_PATH if runs_path is None else runs_path, allow_pickle=False) as f:
        arrays = {k: perturb_init(f[k]) for k in f.files}
    trace = json.loads(Path(TRACE_PATH if trace_path is None else trace_path).read_text())
    return InductionRuns(trace, arrays)



def snapshot_states(runs, seed=0, layers=2, sequence=0, batches=None):
    """Everything the explorer shows, computed once: for each stored step of one run and
    each ablation of :data:`ABLATIONS` (the heads found at the last step, mean-ablated),
    the two found heads' maps on sequence ``sequence`` of the evaluation batch and the
    first- and second-copy losses and the induction score over the whole batch, all three of
    the model as ablated. With the default batches the
    result is kept in ``runs.states`` and returned again by a later call.

    Returns
    -------
    dict
        ``heads`` (:func:`find_heads` at the last step), ``steps``, ``ids`` (n,),
        ``maps[(step, ablation)] = (prev_map, induction_map)`` each (n - 1, n - 1),
        ``numbers[(step, ablation)] = (first_loss, second_loss, induction_score)``.
    """
    if not isinstance(runs, InductionRuns):
        raise TypeError(f"runs must be the stored runs (load_runs()), got {type(runs).__name__}")
    key = (seed, layers, sequence)
    if batches is None and key in runs.states:  # the stored runs' states, computed before
        return runs.states[key]
    fixed = batches is None
    batches = eval_batches() if batches is None else batches
    steps = runs.snapshot_steps(seed, layers)  # (refuses a run that is not stored)
    config = runs.config(layers)
    ids = batches["repeat"][0]
    if isinstance(sequence, bool) or not isinstance(sequence, (int, np.integer)) \
            or not 0 <= sequence < len(ids):
        raise ValueError(f"sequence must be an int in 0..{len(ids) - 1} (the evaluation "
                         f"batch's sequences), got {sequence!r}")
    last = measures(runs.params(seed, layers, steps[-1]), config, *batches["repeat"])
    heads = find_heads(last["prev"], last["induction"])
    (l1, h1), (l2, h2) = heads["prev"], heads["induction"]
    maps, numbers = {}, {}
    for step in steps:
        params = runs.params(seed, layers, step)
        for kind, m in ablation_measures(params, config, batches, heads).items():
            w = m["weights"]
            maps[(step, kind)] = (w[l1][sequence, h1], w[l2][sequence, h2])
            numbers[(step, kind)] = (m["first"], m["second"], float(m["induction"][l2, h2]))
    state = {"heads": heads, "steps": steps, "ids": ids[sequence], "maps": maps,
             "numbers": numbers}
    if fixed:
        runs.states[key] = state
    return state
