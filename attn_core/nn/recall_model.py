"""The one-layer recall models of notebook 19: five token mixers, one model around them.

Each model reads token embeddings ``x``, binds every token to the one before it (the key is
computed from the previous token, ``k_t = x_{t-1} W_k``: the short convolution Zoology's
models put before their mixer, at its smallest), mixes with one of

* ``"softmax"``: causal softmax attention, a cache of every key and value;
* ``"linear"``: ``S_t = S_{t-1} + k_t v_t^T`` (:mod:`attn_core.decay` with gates of 1);
* ``"decay"``: ``S_t = g_t S_{t-1} + k_t v_t^T``, ``g_t = sigmoid(x_t w_g + c_g)`` per head;
* ``"delta"``: DeltaNet, ``beta_t = sigmoid(x_t w_b + c_b)``;
* ``"gated_delta"``: Gated DeltaNet, both gates;

and maps the mixed values to logits over the value vocabulary. The recurrent mixers use unit
queries and keys (:func:`attn_core.delta_rule.l2_normalise`), as Gated DeltaNet does. Every
piece has its backward pass; :func:`recall_loss_and_grads` chains them.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._validate import check_option, check_positive_int, perturb_init
from ..attention import attention
from ..decay import (
    decayed_attention_backward,
    decayed_attention_chunked,
    decayed_attention_quadratic,
)
from ..delta_rule import (
    delta_rule_backward,
    delta_rule_chunked,
    delta_rule_weights,
    l2_normalise,
    l2_normalise_backward,
)
from ..gradients import attention_backward
from ..recall import mqar_batch
from .loss import cross_entropy
from .optim import AdamW, clip_grad_norm

__all__ = ["MIXERS", "RECALL_RUNS_PATH", "RecallConfig", "init_recall",
           "load_recall_runs", "recall_accuracy", "recall_forward", "read_weights",
           "recall_loss_and_grads", "recall_state_floats", "right_pair_weight", "train_recall"]

MIXERS = ("softmax", "linear", "decay", "delta", "gated_delta")
#: The stored sweep of tools/train_recall.py.
RECALL_RUNS_PATH = Path(__file__).resolve().parents[1] / "data" / "recall-runs.json"
#: Initial bias of the gates: sigmoid(3) = 0.95 keeps most of the state at the start.
GATE_BIAS = 3.0


@dataclass(frozen=True)
class RecallConfig:
    """A recall model: ``mixer`` in :data:`MIXERS`; ``d_state`` the width of the queries,
    keys and values (split over ``n_heads``), so each head's state is ``(d_state / n_heads)``
    squared; ``n_keys + n_values`` tokens in, ``n_values`` classes out."""

    mixer: str
    d_state: int = 16
    n_heads: int = 1
    d_model: int = 32
    n_keys: int = 32
    n_values: int = 32

    def __post_init__(self):
        check_option(self.mixer, "mixer", MIXERS)
        for name in ("d_state", "n_heads", "d_model", "n_keys", "n_values"):
            check_positive_int(getattr(self, name), name)
        if self.d_state % self.n_heads:
            raise ValueError(f"d_state must be divisible by n_heads, got d_state = "
                             f"{self.d_state} and n_heads = {self.n_heads}")


def recall_state_floats(config, n_tokens):
    """Numbers a decoder keeps for one sequence of ``n_tokens``: the recurrent state's
    ``n_heads (d_state / n_heads)^2`` (whatever ``n_tokens``), or softmax's cache of
    ``2 d_state`` per token."""
    if config.mixer == "softmax":
        return 2 * config.d_state * n_tokens
    return config.d_state ** 2 // config.n_heads


def init_recall(config, rng, std=0.3):
    """Parameters of a recall model, drawn from ``rng`` (a numpy Generator): a dict of
    float64 arrays ``wte (vocab, d_model)``, ``w_q, w_k, w_v (d_model, d_state)``, ``w_o
    (d_state, n_values)``, ``b_o`` and, for the gated mixers, ``w_g, c_g`` / ``w_b, c_b``
    (each nudged by :func:`attn_core._validate.perturb_init`)."""
    c = config
    d, D, h = c.d_model, c.d_state, c.n_heads
    p = {"wte": rng.standard_normal((c.n_keys + c.n_values, d)) * std,
         "w_q": rng.standard_normal((d, D)) / np.sqrt(d),
         "w_k": rng.standard_normal((d, D)) / np.sqrt(d),
         "w_v": rng.standard_normal((d, D)) / np.sqrt(d),
         "w_o": rng.standard_normal((D, c.n_values)) / np.sqrt(D),
         "b_o": np.zeros(c.n_values)}
    if c.mixer in ("decay", "gated_delta"):
        p["w_g"], p["c_g"] = np.zeros((d, h)), np.full(h, GATE_BIAS)
    if c.mixer in ("delta", "gated_delta"):
        p["w_b"], p["c_b"] = np.zeros((d, h)), np.zeros(h)
    # perturb_init: unchanged unless CI's rounding test asks for a one-ulp nudge
    return {name: perturb_init(w) for name, w in p.items()}


def _heads(x, h):
    """(b, n, D) -> (b, h, n, D / h)."""
    b, n, d = x.shape
    return x.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(x):
    """(b, h, n, D / h) -> (b, n, D)."""
    b, h, n, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def _sigmoid(z):
    return 0.5 * (1 + np.tanh(0.5 * z))


def recall_forward(params, config, ids):
    """Logits ``(b, n, n_values)`` of the model on token ``ids (b, n)``, and a cache for the
    backward pass (it holds the mixer's inputs: ``cache["q"], cache["k"]`` are the
    ``(b, h, n, d)`` queries and keys the mixer saw)."""
    p, c = params, config
    x = p["wte"][ids]  # (b, n, d_model)
    xs = np.zeros_like(x)
    xs[:, 1:] = x[:, :-1]  # the previous token: keys bind a value to the key before it
    q_raw, k_raw = _heads(x @ p["w_q"], c.n_heads), _heads(xs @ p["w_k"], c.n_heads)
    v = _heads(x @ p["w_v"], c.n_heads)  # (b, h, n, d)
    cache = {"x": x, "xs": xs, "q_raw": q_raw, "k_raw": k_raw, "v": v}
    n = ids.shape[1]
    if c.mixer == "softmax":
        q, k = q_raw, k_raw
        o, _ = attention(q, k, v, mask=np.tri(n, dtype=bool))
    else:
        q, k = l2_normalise(q_raw), l2_normalise(k_raw)
        g = beta = None
        if "w_g" in p:
            g = cache["g"] = _sigmoid(x @ p["w_g"] + p["c_g"]).transpose(0, 2, 1)  # (b, h, n)
        if "w_b" in p:
            beta = cache["beta"] = _sigmoid(x @ p["w_b"] + p["c_b"]).transpose(0, 2, 1)
        if beta is None:
            o, _ = decayed_attention_chunked(q, k, v, np.ones(1) if g is None else g)
        else:
            o, _ = delta_rule_chunked(q, k, v, beta, g)
    cache["q"], cache["k"], cache["o"] = q, k, _merge(o)
    logits = cache["o"] @ p["w_o"] + p["b_o"]  # (b, n, D) @ (D, n_values)
    return logits, cache


def _mixer_backward(p, c, cache, do, dx, grads):
    """Gradients of the mixer's q, k, v (returned, ``(b, h, n, d)``) and of its gates."""
    q, k, v = cache["q"], cache["k"], cache["v"]
    n = q.shape[-2]
    if c.mixer == "softmax":
        return attention_backward(q, k, v, do, mask=np.tri(n, dtype=bool))
    g, beta = cache.get("g"), cache.get("beta")
    if beta is None:
        dq, dk, dv, dg = decayed_attention_backward(q, k, v, np.ones((1, 1, n)) if g is None
                                                    else g, do)
    else:
        dq, dk, dv, db, dg = delta_rule_backward(q, k, v, beta, do, a=g)
        _gate_into(grads, "b", cache["x"], p["w_b"], beta, db, dx)
    if g is not None:
        _gate_into(grads, "g", cache["x"], p["w_g"], g, dg, dx)
    dq = l2_normalise_backward(cache["q_raw"], dq)
    dk = l2_normalise_backward(cache["k_raw"], dk)
    return dq, dk, dv


def _gate_into(grads, name, x, w, gate, d_gate, dx):
    """Gradient through ``gate = sigmoid(x w + c)``; adds the input's share to ``dx``."""
    dz = (d_gate * gate * (1 - gate)).transpose(0, 2, 1)  # (b, h, n) -> (b, n, h)
    grads["w_" + name] = np.einsum("bnd,bnh->dh", x, dz)  # (d_model, h)
    grads["c_" + name] = dz.sum(axis=(0, 1))
    dx += dz @ w.T  # (b, n, h) @ (h, d_model)


def recall_loss_and_grads(params, config, ids, targets, scored):
    """Mean cross-entropy over the ``scored`` positions and its gradient for every parameter.

    Parameters
    ----------
    params : dict of ndarray
    config : RecallConfig
    ids, targets : (b, n) int ndarray
    scored : (b, n) bool ndarray

    Returns
    -------
    loss : float
    grads : dict of ndarray, one per parameter, same shapes
    """
    p, c = params, config
    logits, cache = recall_forward(p, c, ids)
    rows = logits[scored]  # (m, n_values)
    loss, d_rows = cross_entropy(rows, targets[scored])
    d_logits = np.zeros_like(logits)
    d_logits[scored] = d_rows
    grads = {"w_o": np.einsum("bnd,bnv->dv", cache["o"], d_logits),
             "b_o": d_logits.sum(axis=(0, 1))}
    do = _heads(d_logits @ p["w_o"].T, c.n_heads)  # (b, h, n, d)
    dx = np.zeros_like(cache["x"])
    dq, dk, dv = _mixer_backward(p, c, cache, do, dx, grads)
    dq, dk, dv = _merge(dq), _merge(dk), _merge(dv)  # (b, n, D)
    x, xs = cache["x"], cache["xs"]
    grads["w_q"] = np.einsum("bnd,bne->de", x, dq)
    grads["w_k"] = np.einsum("bnd,bne->de", xs, dk)
    grads["w_v"] = np.einsum("bnd,bne->de", x, dv)
    dx += dq @ p["w_q"].T + dv @ p["w_v"].T
    dx[:, :-1] += (dk @ p["w_k"].T)[:, 1:]  # x_{t-1} fed the key at t
    grads["wte"] = np.zeros_like(p["wte"])
    np.add.at(grads["wte"], ids, dx)
    return float(loss), grads


def _query_rows(batch, where):
    """The query positions of ``batch`` (and of ``where``, a ``(b, n)`` bool mask, if given)."""
    if where is None:
        return batch.scored
    where = np.asarray(where)
    if where.shape != batch.scored.shape or where.dtype != bool:
        raise ValueError(f"where must be a bool array of the batch's shape "
                         f"{batch.scored.shape}, got {where.dtype} of shape {where.shape}")
    rows = batch.scored & where
    if not rows.any():
        raise ValueError("where selects no query position of the batch")
    return rows


def recall_accuracy(params, config, batch, where=None):
    """Fraction of the ``batch``'s queries (a :class:`attn_core.recall.RecallBatch`) whose
    value is the model's most likely class; only those inside ``where`` ``(b, n)`` bool, if
    given (e.g. ``batch.earlier >= 0``: the queries whose pair was updated)."""
    rows = _query_rows(batch, where)
    logits, _ = recall_forward(params, config, batch.ids)
    guess = logits.argmax(axis=-1)  # (b, n)
    return float((guess == batch.targets)[rows].mean())


def read_weights(params, config, ids):
    """The weights ``(b, h, n, n)`` each query row puts on each position's value: softmax's
    attention, the decay mask times ``q . k``, or the delta rule's :func:`delta_rule_weights`
    (``out = weights @ v`` in every case)."""
    _, cache = recall_forward(params, config, ids)
    q, k, v = cache["q"], cache["k"], cache["v"]
    if config.mixer == "softmax":
        return attention(q, k, v, mask=np.tri(ids.shape[1], dtype=bool))[1]
    g = cache.get("g", np.ones(1))
    if "beta" in cache:
        return delta_rule_weights(q, k, cache["beta"], g)
    return decayed_attention_quadratic(q, k, v, g)[1]


def right_pair_weight(params, config, batch, positions=None, where=None):
    """Mean share of the read's weight on the right pair: ``|A_i,src| / sum_j |A_ij|`` over
    the query rows ``i`` (``src`` the value position of the asked pair's latest write), heads
    averaged.

    ``positions`` ``(b, n)`` int, if given, replaces ``batch.source`` (e.g. ``batch.earlier``:
    the share on the write an update replaced); ``where`` ``(b, n)`` bool keeps only those query
    rows (as in :func:`recall_accuracy`).
    """
    rows = _query_rows(batch, where)
    src = batch.source if positions is None else np.asarray(positions)
    if src.shape != batch.scored.shape:
        raise ValueError(f"positions must have the batch's shape {batch.scored.shape}, got "
                         f"{src.shape}")
    w = np.abs(read_weights(params, config, batch.ids))  # (b, h, n, n)
    b_idx, q_idx = np.nonzero(rows)
    if (src[b_idx, q_idx] < 0).any():
        raise ValueError("positions must be >= 0 at every query row kept (-1 marks no pair)")
    right = w[b_idx, :, q_idx, src[b_idx, q_idx]]  # (m, h)
    total = w[b_idx, :, q_idx, :].sum(axis=-1)  # (m, h)
    return float((right / np.where(total > 0, total, 1)).mean())


def train_recall(config, n_pairs, steps=300, batch=32, lr=3e-3, seed=0, n_updates=0,
                 updates="overwrite"):
    """Train a recall model on fresh MQAR batches of ``n_pairs`` pairs with AdamW
    (``n_updates`` later writes of kind ``updates``: see :func:`attn_core.recall.mqar_batch`).

    The model and the batches are drawn from ``np.random.default_rng(seed)``; the learning
    rate warms up over the first 20 steps and the gradient's norm is clipped to 1.

    Returns
    -------
    params : dict of ndarray
        The trained parameters.
    losses : (steps,) ndarray
        The training loss at each step.
    """
    steps, batch = check_positive_int(steps, "steps"), check_positive_int(batch, "batch")
    rng = np.random.default_rng(seed)
    params = init_recall(config, rng)
    opt = AdamW(lr=lr, weight_decay=0.0)
    losses = np.empty(steps)
    for t in range(steps):
        b = mqar_batch(rng, batch, n_pairs, config.n_keys, config.n_values, n_updates, updates)
        losses[t], grads = recall_loss_and_grads(params, config, b.ids, b.targets, b.scored)
        grads, _ = clip_grad_norm(grads, 1.0)
        opt.lr = lr * min(1.0, (t + 1) / 20)
        opt.step(params, grads)
    return params, losses


#: How :func:`load_recall_runs` keys each group's runs.
RUN_KEYS = {"grid": ("mixer", "pairs", "d_state", "n_heads"),
            "updates": ("mixer", "updates", "seed"),
            "steps": ("mixer", "pairs", "d_state", "n_updates", "steps")}


@functools.lru_cache(maxsize=8)
def load_recall_runs(path=RECALL_RUNS_PATH, group="grid"):
    """The stored runs of tools/train_recall.py: ``(trace, runs)``, ``runs`` the ``group``'s
    dicts (accuracy, right_weight, final_loss, losses every 10 steps, cpu_s, ...) keyed by the
    fields :data:`RUN_KEYS` names: ``"grid"`` (plain MQAR) by ``(mixer, pairs, d_state,
    n_heads)``, ``"updates"`` (rewrites and their control) by ``(mixer, updates, seed)``,
    ``"steps"`` (longer training) by ``(mixer, pairs, d_state, n_updates, steps)``. Cached:
    treat the result as read-only."""
    fields = RUN_KEYS[check_option(group, "group", tuple(RUN_KEYS))]
    data = json.loads(Path(path).read_text())
    runs = {tuple(r[f] for f in fields): r for r in data["runs"]
            if r.get("group", "grid") == group}
    return data["trace"], runs
