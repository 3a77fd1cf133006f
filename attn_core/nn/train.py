"""Training the tiny GPT: AdamW on random windows of the training text, seeded.

Every step draws ``batch`` windows of ``n_ctx`` characters from the training ids
(:func:`attn_core.nn.data.get_batch`), computes the mean cross-entropy and its gradients
(:func:`attn_core.nn.gpt.gpt_loss_and_grads`), clips the gradients' global norm and takes
one AdamW step at the learning rate of :func:`lr_at` (linear warmup, then cosine decay to a
tenth). Every ``eval_every`` steps the model is scored on the same fixed validation batches,
so the validation curve moves only because the model does.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

from .._validate import check_positive_int, check_seed
from ..threads import on_learner_threads
from .data import batch_starts, get_batch
from .embeddings import check_ids
from .gpt import GPTConfig, gpt_forward, gpt_loss_and_grads, init_gpt, is_decayed
from .loss import cross_entropy
from .optim import AdamW, clip_grad_norm

__all__ = ["GPTRun", "evaluate", "lr_at", "text_loss", "train_gpt", "validation_batches"]


@dataclass(frozen=True)
class GPTRun:
    """The result of :func:`train_gpt`.

    params : dict of arrays -- the trained parameters
    losses : (steps,) float64 ndarray -- the training loss of each step's batch (before its
        update)
    val_losses : (n_eval,) float64 ndarray -- mean loss on the fixed validation batches
    eval_steps : (n_eval,) int ndarray -- after how many updates each was measured (0 first)
    grad_norms : (steps,) float64 ndarray -- the global gradient norm before clipping
    lrs : (steps,) float64 ndarray -- the learning rate of each step
    settings : dict -- every argument, for the record
    snapshots : dict -- ``{step: params}`` copies after the updates of ``snapshot_steps``
    """

    params: dict
    losses: np.ndarray
    val_losses: np.ndarray
    eval_steps: np.ndarray
    grad_norms: np.ndarray
    lrs: np.ndarray
    settings: dict = field(default_factory=dict)
    snapshots: dict = field(default_factory=dict)


def lr_at(step, steps, lr, warmup, final_fraction=0.1):
    """The learning rate of step ``step`` (0-based) of ``steps``: warmup, then cosine.

    Notes
    -----
    .. math:: \\eta_s = \\eta \\frac{s + 1}{w} \\ (s < w), \\qquad
              \\eta_s = \\eta \\left(f + (1 - f) \\tfrac{1}{2}
              \\left(1 + \\cos \\pi \\tfrac{s - w}{S - w}\\right)\\right) \\ (s \\ge w)

    Examples
    --------
    >>> [round(lr_at(s, 10, 1.0, 2), 3) for s in (0, 1, 2, 6, 9)]
    [0.5, 1.0, 1.0, 0.55, 0.134]
    """
    step = check_positive_int(step, "step", minimum=0)
    steps = check_positive_int(steps, "steps")
    lr = _check_lr(lr)
    warmup = check_positive_int(warmup, "warmup", minimum=0)
    if isinstance(final_fraction, bool) or not isinstance(final_fraction, numbers.Real) \
            or not 0 <= final_fraction <= 1:
        raise ValueError(f"final_fraction must be a number in [0, 1], got {final_fraction!r}")
    if step < warmup:
        return float(lr * (step + 1) / warmup)
    frac = (step - warmup) / max(steps - warmup, 1)
    return float(lr * (final_fraction + (1 - final_fraction) * 0.5 * (1 + np.cos(np.pi * frac))))


def validation_batches(val_ids, n_batches, batch, n_ctx, seed=0):
    """``n_batches`` fixed ``(x, y)`` batches of the validation ids, from their own seed."""
    n_batches = check_positive_int(n_batches, "n_batches")
    if val_ids is None:
        raise ValueError("val_ids is None: pass the validation token ids (split_corpus)")
    rng = np.random.default_rng(check_seed(seed))
    return [get_batch(rng, val_ids, batch, n_ctx) for _ in range(n_batches)]


def evaluate(params, config, batches):
    """Mean cross-entropy (nats per character) of the model over the given batches."""
    if not isinstance(batches, (list, tuple)) or not batches or not all(
            isinstance(xy, tuple) and len(xy) == 2 for xy in batches):
        raise TypeError("batches must be a non-empty list of (x, y) batches, got "
                        f"{type(batches).__name__} {batches!r:.60}")
    total = 0.0
    for x, y in batches:
        logits, _ = gpt_forward(params, config, x)
        total += float(cross_entropy(logits, y)[0])
    return total / len(batches)


def text_loss(params, config, ids, batch=64):
    """Mean cross-entropy (nats per character) over a whole text, in windows of ``n_ctx``.

    The text is cut into consecutive windows of ``n_ctx + 1`` ids overlapping by one, so every
    id after the first is predicted exactly once, from the ids before it in its window (at
    most ``n_ctx``, fewer at a window's start): the same characters as the bigram baseline
    scores, and the model's loss as it is used, with its window. A shorter last window is
    scored too.

    Examples
    --------
    >>> from attn_core.nn import GPTConfig, init_gpt
    >>> cfg = GPTConfig(vocab_size=5, n_ctx=4, d_model=8, n_heads=2, n_layers=1)
    >>> p = init_gpt(cfg, np.random.default_rng(0))
    >>> bool(abs(text_loss(p, cfg, np.arange(11) % 5) - np.log(5)) < 0.05)  # near uniform
    True
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    ids = check_ids(ids, config.vocab_size, name="ids")
    if ids.ndim != 1 or len(ids) < 2:
        raise ValueError(f"ids must be one text of at least 2 token ids (n,), got shape "
                         f"{ids.shape}")
    batch = check_positive_int(batch, "batch")
    n, w = len(ids) - 1, config.n_ctx
    total, count = 0.0, 0
    n_full = n // w
    starts = np.arange(n_full) * w  # (n_full,)
    for lo in range(0, n_full, batch):
        s = starts[lo:lo + batch]
        idx = s[:, None] + np.arange(w)[None, :]  # (b, 1) + (1, w) -> (b, w)
        logits, _ = gpt_forward(params, config, ids[idx])
        total += float(cross_entropy(logits, ids[idx + 1])[0]) * idx.size
        count += idx.size
    if n - n_full * w:
        rest = np.arange(n_full * w, n)  # (r,)
        logits, _ = gpt_forward(params, config, ids[rest])
        total += float(cross_entropy(logits, ids[rest + 1])[0]) * rest.size
        count += rest.size
    return total / count


def _check_lr(lr):
    if isinstance(lr, bool) or not isinstance(lr, numbers.Real) or not 0 < lr < np.inf:
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    return float(lr)


@on_learner_threads
def train_gpt(config, train_ids, val_ids, steps, batch, lr, seed=0, dtype="float32", *,
              warmup=None, eval_every=100, n_val_batches=8, max_grad_norm=1.0,
              weight_decay=0.0, betas=(0.9, 0.99), params=None, callback=None, sample=None,
              val=None, snapshot_steps=()):
    """Train a GPT from scratch (or from ``params``) and record its losses.

    Parameters
    ----------
    config : GPTConfig
    train_ids, val_ids : (n,) int ndarray or None
        Token ids of the training and validation text (:func:`split_corpus`); None when
        ``sample`` and ``val`` give the batches.
    steps : int
        Number of AdamW updates.
    batch : int
        Windows per step, each ``config.n_ctx`` long.
    lr : float
        Peak learning rate (:func:`lr_at`).
    seed : int
        Seeds the initial weights and the batches: ``np.random.default_rng(seed).spawn(2)``.
    dtype : "float32" or "float64"
    warmup : int, optional
        Warmup steps, default ``steps // 20``.
    eval_every : int
        Validation loss after every ``eval_every`` updates (and at 0 and at the end).
    n_val_batches : int
        Number of fixed validation batches (seeded by ``seed``, drawn once).
    max_grad_norm : float
        Global gradient norm clip.
    weight_decay : float
        AdamW's decoupled weight decay, applied to the weight matrices and tables only
        (:func:`attn_core.nn.gpt.is_decayed`).
    betas : (float, float)
    params : dict, optional
        Start from these parameters (copied) instead of ``init_gpt``.
    callback : callable(step, loss), optional
        Called after every step (for a live plot).
    sample : callable(rng, batch) -> (x, y), optional
        Draws each step's training batch ``(batch, n_ctx)`` ids and targets (default: random
        windows of ``train_ids``), e.g. synthetic sequences (notebook 15's repeats).
    val : list of (x, y), optional
        The fixed validation batches (default: drawn from ``val_ids``).
    snapshot_steps : iterable of int
        Keep a copy of the parameters after these many updates (0: the initial ones).

    Returns
    -------
    GPTRun
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    steps = check_positive_int(steps, "steps")
    batch = check_positive_int(batch, "batch")
    eval_every = check_positive_int(eval_every, "eval_every")
    n_val_batches = check_positive_int(n_val_batches, "n_val_batches")
    lr = _check_lr(lr)
    warmup = max(steps // 20, 1) if warmup is None else check_positive_int(warmup, "warmup",
                                                                           minimum=0)
    seed = check_seed(seed)
    for name, fn in (("sample", sample), ("callback", callback)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be a function or None, got {type(fn).__name__}")
    if val is not None and (not isinstance(val, (list, tuple)) or not all(
            isinstance(xy, tuple) and len(xy) == 2 for xy in val)):
        raise TypeError("val must be a list of (x, y) batches or None, got "
                        f"{type(val).__name__}")
    for name, ids in (("train_ids", train_ids), ("val_ids", val_ids)):
        if (name == "train_ids" and sample is not None) or (name == "val_ids" and val):
            continue
        if ids is None:
            other = "sample=" if name == "train_ids" else "val="
            raise ValueError(f"{name} is None: pass the token ids (split_corpus) or give the "
                             f"batches with {other}")
        ids = check_ids(ids, config.vocab_size, name=name)
        if ids.ndim != 1:
            raise ValueError(f"{name} must be a 1-D array of token ids (n,), got shape "
                             f"{ids.shape}")
        try:  # long enough for one batch?
            batch_starts(np.random.default_rng(0), len(ids), batch, config.n_ctx)
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None
    init_rng, batch_rng = np.random.default_rng(seed).spawn(2)
    if params is None:
        params = init_gpt(config, init_rng, dtype=dtype)
    else:
        params = {k: np.array(v, dtype=dtype) for k, v in params.items()}
    if not val:
        val = validation_batches(val_ids, n_val_batches, batch, config.n_ctx, seed)
    if sample is None:
        def sample(rng, batch):
            return get_batch(rng, train_ids, batch, config.n_ctx)
    keep = {check_positive_int(s, "snapshot_steps", minimum=0) for s in snapshot_steps}
    snapshots = {0: {k: v.copy() for k, v in params.items()}} if 0 in keep else {}
    opt = AdamW(lr, betas=betas, weight_decay=weight_decay, decay=is_decayed)
    losses, norms, lrs, val_losses, eval_steps = [], [], [], [], []

    def record_eval(step):
        val_losses.append(evaluate(params, config, val))
        eval_steps.append(step)

    record_eval(0)
    for step in range(steps):
        x, y = sample(batch_rng, batch)
        loss, grads = gpt_loss_and_grads(params, config, x, y)
        grads, norm = clip_grad_norm(grads, max_grad_norm)
        opt.lr = lr_at(step, steps, lr, warmup)
        opt.step(params, grads)
        losses.append(float(loss))
        norms.append(float(norm))
        lrs.append(opt.lr)
        if callback is not None:
            callback(step, float(loss))
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            record_eval(step + 1)
        if step + 1 in keep:
            snapshots[step + 1] = {k: v.copy() for k, v in params.items()}
    settings = dict(steps=steps, batch=batch, lr=lr, seed=seed, dtype=str(np.dtype(dtype)),
                    warmup=warmup, eval_every=eval_every, n_val_batches=n_val_batches,
                    max_grad_norm=max_grad_norm, weight_decay=weight_decay, betas=list(betas),
                    schedule="linear warmup, then cosine to 0.1 * lr")
    return GPTRun(params=params, losses=np.array(losses), val_losses=np.array(val_losses),
                  eval_steps=np.array(eval_steps), grad_norms=np.array(norms),
                  lrs=np.array(lrs), settings=settings, snapshots=snapshots)
