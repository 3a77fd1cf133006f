"""Notebook 19's hybrid tiny GPT: three gated-delta layers then a softmax one, against four
softmax and four linear-attention layers; what is measured on each, and the stored runs of
``tools/train_hybrid.py`` read back.

The measures:

* :func:`window_losses`: the validation text's loss per window of ``n_ctx`` characters (their
  mean, and the standard error over windows);
* the seeds' traces (:func:`load_hybrid_traces`) and the same three stacks trained on the
  copy task (:func:`load_hybrid_copy`, :func:`hybrid_copy_model`): recall where it is learnt;
* :func:`copy_recall`: recall, for a language model: random characters, then the same
  characters again (``repeated_tokens`` of notebook 15/18's copy task); the accuracy (and the
  loss) of the next-character prediction on the second copy, whose characters the context
  holds, against the first copy's, which nothing before predicts (the control).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

from .._validate import check_positive_int, perturb_init
from ..hybrid_cost import hybrid_layers
from ..induction import FIRST, SECOND, repeated_tokens
from .checkpoint import load_checkpoint
from .embeddings import check_ids
from .gpt import GPTConfig, gpt_forward
from .loss import log_softmax

__all__ = ["HYBRID_COPY_PATH", "HYBRID_COPY_TRACE", "HYBRID_DATA", "HYBRID_MODELS",
           "HYBRID_SEEDS", "RECALL_SEED", "copy_recall", "hybrid_copy_model", "hybrid_paths",
           "load_hybrid_copy", "load_hybrid_run", "load_hybrid_traces", "window_losses"]

HYBRID_DATA = Path(__file__).resolve().parents[1] / "data"
#: The three runs: each layer's mixer (the hybrid's softmax layer last, as Qwen3-Next's
#: ``full_attention_interval = 4`` puts its full-attention layer fourth).
HYBRID_MODELS = {"hybrid": hybrid_layers(4, 4), "softmax": ("softmax",) * 4,
                 "linear": ("linear",) * 4}
#: The seed of the recall sequences (apart from the training's).
RECALL_SEED = 1948


#: The three stacks trained on the copy task (``tools/train_hybrid.py --copy``).
HYBRID_COPY_PATH = HYBRID_DATA / "hybrid-copy.npz"
HYBRID_COPY_TRACE = HYBRID_DATA / "hybrid-copy-trace.json"


def hybrid_paths(model, seed=0):
    """``(checkpoint, trace)`` paths of a stored run (``model`` a key of :data:`HYBRID_MODELS`);
    seed 0's run stores its weights, another seed only its trace (checkpoint ``None``)."""
    if model not in HYBRID_MODELS:
        raise ValueError(f"model must be one of {tuple(HYBRID_MODELS)}, got {model!r}")
    seed = check_positive_int(seed, "seed", minimum=0)
    if seed == 0:
        return (HYBRID_DATA / f"hybrid-{model}-checkpoint.npz",
                HYBRID_DATA / f"hybrid-{model}-trace.json")
    return None, HYBRID_DATA / f"hybrid-{model}-s{seed}-trace.json"


@functools.lru_cache(maxsize=3)
def load_hybrid_run(model):
    """``(checkpoint, trace)`` of a stored run of ``tools/train_hybrid.py`` (cached: treat
    as read-only)."""
    ck_path, trace_path = hybrid_paths(model)
    return load_checkpoint(ck_path), json.loads(trace_path.read_text(encoding="utf-8"))


#: The seeds of the stored runs (seed 0 with its weights, the others their traces).
HYBRID_SEEDS = (0, 1, 2)


@functools.lru_cache(maxsize=3)
def load_hybrid_traces(model):
    """The traces of every stored seed of ``model``, in the order of :data:`HYBRID_SEEDS`
    (cached: treat as read-only)."""
    out = []
    for seed in HYBRID_SEEDS:
        path = hybrid_paths(model, seed)[1]
        trace = json.loads(path.read_text(encoding="utf-8"))
        if trace["seed"] != seed or trace["model"] != model:
            raise ValueError(f"{path.name} holds seed {trace['seed']} of {trace['model']!r}, "
                             f"expected seed {seed} of {model!r}")
        out.append(trace)
    return tuple(out)


@functools.lru_cache(maxsize=1)
def load_hybrid_copy():
    """``(trace, arrays)``: ``tools/train_hybrid.py --copy``'s stored runs (the three stacks
    trained on the copy task; cached: treat as read-only). :func:`hybrid_copy_model` picks
    one run out."""
    trace = json.loads(HYBRID_COPY_TRACE.read_text(encoding="utf-8"))
    with np.load(HYBRID_COPY_PATH) as f:
        arrays = {k: perturb_init(f[k]) for k in f.files}  # CI's one-ulp pass nudges them
    return trace, arrays


def hybrid_copy_model(trace, arrays, seed, model):
    """``(params, config)`` of one stored copy-task run (``seed`` of ``trace["seeds"]``,
    ``model`` a key of :data:`HYBRID_MODELS`)."""
    if model not in HYBRID_MODELS:
        raise ValueError(f"model must be one of {tuple(HYBRID_MODELS)}, got {model!r}")
    if seed not in trace["seeds"]:
        raise ValueError(f"seed must be one of the stored seeds {trace['seeds']}, got {seed!r}")
    prefix = f"s{seed}.{model}/"
    params = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
    return params, GPTConfig(**trace["config"], attention=HYBRID_MODELS[model])


def _token_log_probs(params, config, ids):
    """``log p(ids[:, t + 1] | ids[:, :t + 1])`` (b, n - 1) and the argmax hits (b, n - 1)."""
    logits, _ = gpt_forward(params, config, ids[:, :-1])
    log_p = log_softmax(logits.astype(np.float64))  # (b, n - 1, vocab)
    target = ids[:, 1:, None]
    picked = np.take_along_axis(log_p, target, axis=-1)[..., 0]  # (b, n - 1)
    hits = log_p.argmax(axis=-1) == ids[:, 1:]
    return picked, hits


def window_losses(params, config, ids, batch=64):
    """The mean next-character loss of each full window of a text.

    Parameters
    ----------
    params, config
        A tiny GPT (:class:`~attn_core.nn.GPTConfig`).
    ids : (N,) int array_like
        The text, at least ``n_ctx + 1`` ids.
    batch : int
        Windows per forward pass.

    Returns
    -------
    (N - 1) // n_ctx ndarray
        Window ``w`` reads ids ``w n_ctx .. (w + 1) n_ctx - 1`` and is scored on the next
        id of each (as :func:`attn_core.nn.train.text_loss` cuts the text; the short last
        window left out).
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    ids = check_ids(ids, config.vocab_size, name="ids")
    w = config.n_ctx
    if ids.ndim != 1 or len(ids) < w + 1:
        raise ValueError(f"ids must be one text of at least n_ctx + 1 = {w + 1} ids, got "
                         f"shape {ids.shape}")
    batch = check_positive_int(batch, "batch")
    n_full = (len(ids) - 1) // w
    out = np.empty(n_full)
    for lo in range(0, n_full, batch):
        starts = np.arange(lo, min(lo + batch, n_full)) * w  # (b,)
        idx = starts[:, None] + np.arange(w + 1)[None, :]  # (b, w + 1)
        picked, _ = _token_log_probs(params, config, ids[idx])
        out[lo:lo + len(starts)] = -picked.mean(axis=-1)
    return out


def copy_recall(params, config, batch=128, seed=RECALL_SEED, segment=None):
    """Recall of a language model: next-character accuracy and loss on a repeated string.

    Parameters
    ----------
    params, config
        A tiny GPT.
    batch : int
        Sequences (each ``2 * segment`` random characters: a string, then it again).
    seed : int
        Seed of the random strings.
    segment : int, optional
        Length of the string; default ``n_ctx // 2`` (both copies fill the context).

    Returns
    -------
    dict
        ``"second_acc"``, ``"second_loss"``: mean accuracy / loss (nats) on characters
        2..L of the second copy (each predictable: it followed the same character in the
        first copy); ``"first_acc"``, ``"first_loss"``: the same on the first copy (the
        control: nothing before predicts them); ``"gain"``: the first copy's loss minus the
        second's, string by string (what the repeat is worth, in nats); ``*_sem``: standard
        errors over the strings; ``"batch"``, ``"segment"``, ``"seed"``.
    """
    batch = check_positive_int(batch, "batch")
    segment = config.n_ctx // 2 if segment is None else check_positive_int(segment, "segment")
    if 2 * segment > config.n_ctx + 1:
        raise ValueError(f"segment must be at most (n_ctx + 1) // 2 = {(config.n_ctx + 1) // 2} "
                         f"(two copies in the context), got {segment}")
    ids, labels = repeated_tokens(np.random.default_rng(seed), batch, config.vocab_size,
                                  2 * segment, segment)
    picked, hits = _token_log_probs(params, config, ids)
    out = {"batch": batch, "segment": segment, "seed": seed}
    per_seq = {}
    for name, label in (("first", FIRST), ("second", SECOND)):
        where = labels[:, 1:] == label  # (b, 2L - 1): the scored predictions
        count = where.sum(axis=1)
        for what, per in (("acc", (hits * where).sum(axis=1) / count),
                          ("loss", -(picked * where).sum(axis=1) / count)):
            per_seq[f"{name}_{what}"] = per
    per_seq["gain"] = per_seq["first_loss"] - per_seq["second_loss"]  # paired, per string
    for key, per in per_seq.items():
        out[key] = float(per.mean())
        out[f"{key}_sem"] = float(per.std(ddof=1) / np.sqrt(batch))
    return out
