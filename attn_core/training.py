"""A one-head attention model, trained with the package's own gradients.

The model, for input features ``F`` (b, n, n_features)::

    x = F E (+ positions)            embedding, optional positional encoding
    Q, K, V = x W_q, x W_k, x W_v    one head
    O, P = attention(Q, K, V, scale)
    logits = O W_o                   one row of class scores per position

and the loss is the mean cross-entropy over the task's scored positions. The backward pass
is :func:`~attn_core.attention_backward` plus the chain rule through the matrix products.
Everything is seeded: the same seed gives the same initial weights and the same batches.

Several seeds train at once as a *population*: every parameter has a leading seed axis
``(S, rows, cols)`` and every batch ``(S, b, n, ...)``; the seeds never mix (each loss
is a mean over its own seed's batch), so one vectorised step is ``S`` independent steps.
"""

from dataclasses import dataclass, field

import numpy as np

from ._validate import (
    check_bool,
    check_int_sequence,
    check_option,
    check_positive_int,
    check_positive_number,
    perturb_init,
)
from .attention import _scores
from .gradients import _backward_from_weights
from .nn.loss import log_softmax
from .nn.optim import SGD, AdamW
from .positions import sinusoidal_positions  # one implementation: the positions module's
from .softmax import stable_softmax
from .tasks import Batch, check_task, make_batch, n_classes
from .threads import blas_threads

POSITIONS = (None, "learned", "sinusoidal")


def init_params(rngs, n_features, n_out, n, d_model=16, d_k=16, d_v=16, positions=None,
                qk_gain=1.0):
    """Random initial weights for one model per generator in ``rngs``.

    Returns a dict of arrays with a leading seed axis ``(S, rows, cols)``: ``E``
    (n_features, d_model), ``W_q``/``W_k`` (d_model, d_k), ``W_v`` (d_model, d_v), ``W_o``
    (d_v, n_out) and, for ``positions="learned"``, ``pos`` (n, d_model). Entries are normal
    with variance ``1 / rows``, so each product keeps its input's spread (``E`` and ``pos``:
    variance 1); ``W_q`` and ``W_k`` are then multiplied by ``qk_gain``, which multiplies
    the starting scores by ``qk_gain ** 2`` (the scaling experiment's controls).
    """
    if positions not in POSITIONS:
        raise ValueError(f"positions must be one of {POSITIONS}, got {positions!r}")
    shapes = {"E": (n_features, d_model, 1.0), "W_q": (d_model, d_k, 1.0 / d_model),
              "W_k": (d_model, d_k, 1.0 / d_model), "W_v": (d_model, d_v, 1.0 / d_model),
              "W_o": (d_v, n_out, 1.0 / d_v)}
    if positions == "learned":
        shapes["pos"] = (n, d_model, 1.0)
    params = {name: [] for name in shapes}
    for rng in rngs:
        for name, (rows, cols, var) in shapes.items():
            gain = qk_gain if name in ("W_q", "W_k") else 1.0
            params[name].append(rng.standard_normal((rows, cols)) * (np.sqrt(var) * gain))
    # perturb_init: unchanged unless CI's rounding test asks for a one-ulp nudge
    return {name: perturb_init(np.stack(arrs)) for name, arrs in params.items()}  # (S, rows, cols)


def _lin(a, w):
    """``a @ w`` per seed as one matrix product: (S, b, n, d_in) @ (S, d_in, d_out)."""
    s, b, n, d_in = a.shape
    y = a.reshape(s, b * n, d_in) @ w  # (S, b * n, d_in) @ (S, d_in, d_out) -> (S, b * n, d_out)
    return y.reshape(s, b, n, w.shape[-1])  # (S, b * n, d_out) -> (S, b, n, d_out)


def embed(params, features, positions=None):
    """``x = F E`` plus the positional encoding: (S, b, n, n_features) -> (S, b, n, d_model)."""
    x = _lin(features, params["E"])  # (S, b, n, f) -> (S, b, n, d_model)
    n = x.shape[-2]
    if positions == "learned":
        x = x + params["pos"][:, None, :n, :]  # (S, 1, n, d_model), the same for every batch
    elif positions == "sinusoidal":
        x = x + sinusoidal_positions(n, x.shape[-1])
    return x


def forward(params, features, scale=None, positions=None):
    """The model's forward pass: ``(logits, weights, cache)``.

    ``logits`` (S, b, n, n_out), ``weights`` (S, b, n, n) the head's attention map, ``cache``
    the intermediate arrays the backward pass needs. ``scale=None`` is ``1/sqrt(d_k)``; pass
    ``1.0`` for unscaled scores.
    """
    x = embed(params, features, positions)
    q, k, v = (_lin(x, params[w]) for w in ("W_q", "W_k", "W_v"))  # each (S, b, n, d)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    # attention(q, k, v, scale=scale) without re-checking arrays built from checked weights
    weights = stable_softmax(_scores(q, k, scale))  # (S, b, n, n)
    out = weights @ v  # (S, b, n, n) @ (S, b, n, d_v) -> (S, b, n, d_v)
    logits = _lin(out, params["W_o"])  # (S, b, n, d_v) -> (S, b, n, n_out)
    return logits, weights, {"x": x, "q": q, "k": k, "v": v, "out": out, "scale": scale}


def cross_entropy(logits, targets, scored):
    """Each seed's mean cross-entropy over its scored positions, and the gradient.

    Parameters
    ----------
    logits : (S, b, n, c) ndarray
    targets : (S, b, n) int ndarray
    scored : (S, b, n) bool ndarray

    Returns
    -------
    loss : (S,) ndarray
    grad : (S, b, n, c) ndarray
        Gradient of ``loss.sum()`` (so of each seed's loss w.r.t. its own logits).

    Notes
    -----
    .. math:: L = -\\frac{1}{|S|}\\sum_{i \\in S} \\log \\mathrm{softmax}(z_i)_{y_i}, \\quad
              \\frac{\\partial L}{\\partial z_i} = \\frac{\\mathrm{softmax}(z_i) - e_{y_i}}{|S|}
    """
    log_p = log_softmax(logits)  # (S, b, n, c)
    count = scored.sum(axis=(1, 2))  # (S,)
    picked = np.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]  # (S, b, n)
    loss = -(picked * scored).sum(axis=(1, 2)) / count
    grad = np.exp(log_p) - (np.arange(logits.shape[-1]) == targets[..., None])  # p - onehot
    grad *= scored[..., None] / count[:, None, None, None]
    return loss, grad


def loss_and_grads(params, batch, scale=None, positions=None):
    """``(loss, grads, parts)``: each seed's loss (S,), the gradient of every parameter, and
    ``parts`` (weights, and the gradients w.r.t. the scores and q) for inspection."""
    logits, weights, cache = forward(params, batch.features, scale, positions)
    loss, grad_logits = cross_entropy(logits, batch.targets, batch.scored)
    grads, parts = backward(params, batch.features, weights, cache, grad_logits, positions)
    return loss, grads, parts


def backward(params, features, weights, c, grad_logits, positions=None):
    """``(grads, parts)``: the gradient of every parameter from the logits' gradient, by the
    chain rule through :func:`forward` (``weights`` and ``c`` are its outputs)."""
    grads = {"W_o": _sum_outer(c["out"], grad_logits)}
    grad_out = _lin(grad_logits, params["W_o"].swapaxes(-1, -2))  # (S, b, n, d_v)
    (gq, gk, gv), grad_s = _backward_from_weights(c["q"], c["k"], c["v"], weights, grad_out,
                                                  c["scale"])
    grad_x = 0
    for name, g in (("W_q", gq), ("W_k", gk), ("W_v", gv)):
        grads[name] = _sum_outer(c["x"], g)
        grad_x = grad_x + _lin(g, params[name].swapaxes(-1, -2))  # (S, b, n, d_model)
    grads["E"] = _sum_outer(features, grad_x)
    if positions == "learned":
        grads["pos"] = grad_x.sum(axis=1)  # (S, b, n, d) -> (S, n, d)
    return grads, {"weights": weights, "grad_scores": grad_s, "grad_q": gq}


def _sum_outer(a, g):
    """``sum_b a_b^T g_b`` per seed: the gradient of ``a @ W`` -> (S, d_in, d_out)."""
    s = a.shape[0]
    a = a.reshape(s, -1, a.shape[-1])  # (S, b, n, d_in) -> (S, b * n, d_in)
    g = g.reshape(s, -1, g.shape[-1])  # (S, b, n, d_out) -> (S, b * n, d_out)
    return a.swapaxes(-1, -2) @ g  # (S, d_in, b * n) @ (S, b * n, d_out) -> (S, d_in, d_out)


#: The optimisers by name; both live in :mod:`attn_core.nn.optim` (the GPT's too). ``"adam"``
#: is AdamW without weight decay: plain Adam.
OPTIMISERS = {"adam": AdamW, "sgd": SGD}


@dataclass
class Run:
    """One seed's training run: settings, loss curve and snapshots of the head on a probe.

    ``losses[t]`` is the loss of the batch at step ``t`` (before the update);
    ``snapshot_steps[i]`` the step at which ``snapshot_weights[i]`` (n, n), the head's
    attention map on the fixed probe sequence ``probe_pattern`` belongs to, was taken;
    ``accuracy`` and ``on_pattern`` (the mean weight the scored rows give the right
    position) are measured after training on a fresh batch of 256.
    """

    task: str
    d_k: int
    scaled: bool
    seed: int
    lr: float
    optimiser: str
    positions: str | None
    losses: np.ndarray
    snapshot_steps: np.ndarray
    snapshot_weights: np.ndarray
    probe_pattern: np.ndarray
    accuracy: float = 0.0
    on_pattern: float = 0.0
    params: dict = field(default_factory=dict, repr=False)


def population_batch(task, rngs, batch):
    """One batch of ``task`` per generator, stacked: each field gets a leading seed axis."""
    parts = [make_batch(task, rng, batch) for rng in rngs]
    return Batch(*(np.stack([getattr(b, f) for b in parts])
                   for f in ("features", "targets", "scored", "pattern")))  # each (S, b, ...)


def train(task="lookup", d_k=16, scaled=True, seeds=(0,), steps=300, lr=0.01, batch=32,
          optimiser="adam", positions=None, snapshots=16, d_model=16, qk_gain=1.0):
    """Train one one-head model per seed on ``task``; return a list of :class:`Run`.

    Parameters
    ----------
    task : {"lookup", "previous"}
    d_k : int
        Width of queries and keys.
    scaled : bool
        Divide the scores by ``sqrt(d_k)`` (True) or not (False).
    seeds : sequence of int
        One model per seed; seed ``s`` fixes that model's initial weights and batches, so a
        seed trains the same way alone or among others.
    steps, lr, batch : int, float, int
        Number of updates, learning rate, sequences per batch.
    optimiser : {"adam", "sgd"}
    positions : {None, "learned", "sinusoidal"}
    snapshots : int
        How many evenly spaced attention maps of the probe sequence to keep (steps 0 and
        ``steps`` included; every step when ``snapshots > steps``).
    d_model, qk_gain : int, float
        Width of the embedding; factor on the initial ``W_q`` and ``W_k`` (see
        :func:`init_params`).

    Examples
    --------
    >>> run, = train("lookup", steps=200, seeds=[0])
    >>> bool(run.losses[-20:].mean() < run.losses[:20].mean())
    True
    """
    task, scaled = check_task(task), check_bool(scaled, "scaled")
    seeds, d_k = check_int_sequence(seeds, "seeds"), check_positive_int(d_k, "d_k")
    steps = check_positive_int(steps, "steps")
    lr, batch = check_positive_number(lr, "lr"), check_positive_int(batch, "batch")
    optimiser = check_option(optimiser, "optimiser", tuple(OPTIMISERS))
    positions = check_option(positions, "positions", POSITIONS)
    snapshots = check_positive_int(snapshots, "snapshots")
    d_model, qk_gain = check_positive_int(d_model, "d_model"), check_positive_number(qk_gain,
                                                                                     "qk_gain")
    rngs = [np.random.default_rng(s) for s in seeds]
    probe = population_batch(task, [np.random.default_rng(10_000 + s) for s in seeds], 1)
    n, n_features = probe.features.shape[-2:]
    scale = None if scaled else 1.0
    keep = set(np.linspace(0, steps, snapshots).round().astype(int).tolist())
    losses, snap_steps, snap_weights = np.empty((len(seeds), steps)), [], []
    with blas_threads():
        params = init_params(rngs, n_features, n_classes(task), n, d_model=d_model, d_k=d_k,
                             positions=positions, qk_gain=qk_gain)
        opt = OPTIMISERS[optimiser](lr)
        for t in range(steps + 1):
            if t in keep:
                snap_steps.append(t)
                snap_weights.append(forward(params, probe.features, scale, positions)[1][:, 0])
            if t == steps:
                break
            losses[:, t], grads, _ = loss_and_grads(params, population_batch(task, rngs, batch),
                                                    scale, positions)
            opt.step(params, grads)
        test = population_batch(task, [np.random.default_rng(20_000 + s) for s in seeds], 256)
        logits, weights, _ = forward(params, test.features, scale, positions)
    right = logits.argmax(axis=-1) == test.targets  # (S, b, n)
    on = (weights * test.pattern).sum(axis=-1)  # (S, b, n): weight on the right position
    snap_weights = np.stack(snap_weights, axis=1)  # (S, snapshots, n, n)
    return [Run(task, d_k, scaled, s, lr, optimiser, positions, losses[i], np.array(snap_steps),
                snap_weights[i], probe.pattern[i, 0],
                accuracy=float(right[i][test.scored[i]].mean()),
                on_pattern=float(on[i][test.scored[i]].mean()),
                params={name: p[i] for name, p in params.items()})
            for i, s in enumerate(seeds)]


def init_gradient_norms(task="lookup", d_k=16, scaled=True, seeds=(0,), batch=256):
    """Gradient norms at initialisation, and how saturated the softmax starts, per seed.

    Returns
    -------
    norms : dict of (S,) ndarray
        ``"scores"``, ``"q"``, ``"W_q"``: Frobenius norms of the loss's gradient with respect
        to the (scaled) scores, the queries and ``W_q`` on one batch of ``batch`` sequences;
        ``"max_weight"``: the mean over scored rows of the largest attention weight (1 = fully
        saturated).
    """
    task, scaled = check_task(task), check_bool(scaled, "scaled")
    seeds, d_k = check_int_sequence(seeds, "seeds"), check_positive_int(d_k, "d_k")
    batch = check_positive_int(batch, "batch")
    rngs = [np.random.default_rng(s) for s in seeds]
    with blas_threads():
        params = init_params(rngs, *_sizes(task), d_k=d_k)
        b = population_batch(task, rngs, batch)
        _, grads, parts = loss_and_grads(params, b, None if scaled else 1.0)
    s = len(rngs)
    return {"scores": np.linalg.norm(parts["grad_scores"].reshape(s, -1), axis=1),
            "q": np.linalg.norm(parts["grad_q"].reshape(s, -1), axis=1),
            "W_q": np.linalg.norm(grads["W_q"].reshape(s, -1), axis=1),
            "max_weight": np.array([parts["weights"][i].max(axis=-1)[b.scored[i]].mean()
                                    for i in range(s)])}


def _sizes(task):
    """``(n_features, n_out, n)`` of the named task."""
    b = make_batch(task, np.random.default_rng(0), 1)
    return b.features.shape[-1], n_classes(task), b.features.shape[-2]


def running_mean(losses, window=10):
    """Mean of each ``window`` consecutive losses (a shorter window at the start).

    Parameters
    ----------
    losses : (..., steps) array_like
    window : int

    Returns
    -------
    smooth : (..., steps) ndarray
        ``smooth[..., t]`` is the mean of ``losses[..., max(0, t - window + 1) : t + 1]``.

    Examples
    --------
    >>> running_mean([4.0, 2.0, 0.0, 2.0], window=2)
    array([4., 3., 1., 1.])
    """
    x = np.asarray(losses, dtype=float)
    window = check_positive_int(window, "window")
    c = np.cumsum(x, axis=-1)  # (..., steps)
    out = c.copy()
    out[..., window:] = c[..., window:] - c[..., :-window]
    return out / np.minimum(np.arange(1, x.shape[-1] + 1), window)


def final_loss(run, last=10):
    """A run's final loss: the mean batch loss over its ``last`` steps."""
    return float(np.mean(run.losses[-last:]))


def scaling_runs(task="lookup", d_ks=(4, 16, 64, 256), seeds=(0, 1, 2), steps=120, lr=0.01,
                 batch=16, optimiser="adam", snapshots=16):
    """The scaling experiment: the same task, seeds and learning rate for every d_k, with
    and without the 1/sqrt(d_k) factor.

    Returns
    -------
    runs : dict
        ``runs[d_k, scaled]`` is the list of :class:`Run`, one per seed.
    """
    d_ks = check_int_sequence(d_ks, "d_ks", minimum=1)  # train checks the rest, before any work
    return {(d_k, scaled): train(task, d_k=d_k, scaled=scaled, seeds=seeds, steps=steps, lr=lr,
                                 batch=batch, optimiser=optimiser, snapshots=snapshots)
            for d_k in d_ks for scaled in (True, False)}
