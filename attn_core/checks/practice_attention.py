"""Checks of the code exercises of notebooks 03 to 07: scores, softmax, attention, masks.

Each check takes the learner's function, runs it on the worked example, on seeded random
batches and on edge cases (scores of 1e4, a fully masked row, a single token), compares with
attn_core, and names the first mistake it recognises (see :mod:`._practice`).
"""

import numpy as np

from .. import examples
from ..attention import attention, scores
from ..masks import causal_mask, window_mask
from ..softmax import softmax
from ._base import progressive
from ._practice import Case, Mistake, judge

__all__ = ["check_scores", "check_softmax", "check_attention", "check_masked_attention",
           "check_sliding_window_mask"]

OVERFLOW = ("exp overflows for scores this large. Subtract each row's maximum before "
            "exponentiating: it cancels in the division and keeps every exponent <= 0.")


def _t(x):
    return np.swapaxes(x, -1, -2)  # (..., a, b) -> (..., b, a)


def _raw(q, k):
    return q @ _t(k)  # (..., n_q, d_k) @ (..., d_k, n_k) -> (..., n_q, n_k)


def _batch_qkv(seed, batch, n_q, n_k, d_k, d_v):
    g = examples.rng(seed)
    return (g.standard_normal((*batch, n_q, d_k)), g.standard_normal((*batch, n_k, d_k)),
            g.standard_normal((*batch, n_k, d_v)))


def _large_qkv():
    """Queries and keys whose scaled scores reach about 1e4 (and differ by thousands)."""
    q, k, v = _batch_qkv(11, (), 4, 4, 2, 2)
    return q * 80.0, k * 80.0, v


@progressive
def check_scores(fn, scaled=True):
    """Check ``fn(q, k)``: the score matrix ``q k^T`` (divided by sqrt(d_k) if ``scaled``).

    ``q`` is ``(..., n_q, d_k)`` and ``k`` is ``(..., n_k, d_k)``; the scores are
    ``(..., n_q, n_k)``. Notebook 03 asks for the raw scores (``scaled=False``), notebook 04
    for the scaled ones.
    """
    qb, kb, _ = _batch_qkv(1, (2, 3), 5, 6, 4, 3)
    q1, k1, _ = _batch_qkv(2, (), 1, 1, 3, 3)
    scale = None if scaled else 1.0
    cases = [Case("the worked example", (examples.Q, examples.K),
                  scores(examples.Q, examples.K, scale=scale)),
             Case(f"a random batch (q of shape {qb.shape}, k of shape {kb.shape})", (qb, kb),
                  scores(qb, kb, scale=scale), batched=True),
             Case("a single token (n = 1)", (q1, k1), scores(q1, k1, scale=scale))]
    root = (lambda q: np.sqrt(q.shape[-1])) if scaled else (lambda q: 1.0)
    mistakes = [
        Mistake("rows and columns are swapped: row i should hold query i against every key "
                "(q times k transposed, not k times q transposed).",
                lambda q, k: _t(_raw(q, k)) / root(q)),
        Mistake("you multiplied q and k entry by entry: each score is the dot product of a "
                "whole query row with a whole key row.", lambda q, k: q * k / root(q)),
    ]
    if scaled:
        mistakes += [
            Mistake("these are the raw dot products: the scores are not scaled yet.",
                    lambda q, k: _raw(q, k)),
            Mistake("you scaled by d_k instead of sqrt(d_k): the spread of the dot products "
                    "grows like the square root of d_k, so that is what to divide by.",
                    lambda q, k: _raw(q, k) / q.shape[-1]),
            Mistake("you multiplied by sqrt(d_k): scaling should shrink the scores, divide.",
                    lambda q, k: _raw(q, k) * np.sqrt(q.shape[-1])),
            Mistake("you divided by the square root of the number of keys: d_k is the width "
                    "of a query or key (their last axis), not the number of tokens.",
                    lambda q, k: _raw(q, k) / np.sqrt(k.shape[-2])),
        ]
    else:
        mistakes.append(Mistake("these scores are already scaled: in this notebook the scores "
                                "are the raw dot products (scaling is step 2, notebook 04).",
                                lambda q, k: _raw(q, k) / np.sqrt(q.shape[-1])))
    name = "scaled scores" if scaled else "raw scores"
    return judge(fn, cases, mistakes, what="scores",
                 stub_hint=f"the {name}: one dot product for every (query, key) pair"
                           + (", divided by sqrt(d_k)." if scaled else "."),
                 shape_rule="scores of n_q queries against n_k keys have shape (..., n_q, n_k)",
                 why=f"Your {name} agree with attn_core on the worked example, a batch and a "
                     "single token.")


def _softmax_variants():
    def along(fn):
        def run(x, axis=-1):
            return fn(np.asarray(x, dtype=float), axis)
        return run

    def no_keepdims_max(x, a):
        e = np.exp(x - np.expand_dims(x.max(axis=a), -1))  # (..., n) - (..., 1) on the LAST axis
        return e / e.sum(axis=a, keepdims=True)

    def other_axis(x, a):
        return softmax(x, axis=-2 if a % x.ndim == x.ndim - 1 else -1)

    return [
        Mistake("your function ignores `axis`: normalise along the axis it is given.",
                along(lambda x, a: softmax(x, axis=-1))),
        Mistake("the softmax runs over the wrong axis: the entries along `axis` should sum "
                "to 1.", along(other_axis)),
        Mistake("you normalised over the whole array: every slice along `axis` should sum to "
                "1 on its own.",
                along(lambda x, a: np.exp(x - x.max()) / np.exp(x - x.max()).sum())),
        Mistake("you subtracted the maximum of the whole array, not each slice's own: a row "
                "far below that maximum underflows to 0 / 0. Subtract the maximum along `axis`, "
                "one per row.",
                along(lambda x, a: np.exp(x - x.max()) / np.exp(x - x.max()).sum(
                    axis=a, keepdims=True))),
        Mistake("you divided the scores by their sum: exponentiate every score first.",
                along(lambda x, a: x / x.sum(axis=a, keepdims=True))),
        Mistake("the exponentials are not normalised: divide each by the sum along `axis`.",
                along(lambda x, a: np.exp(x - x.max(axis=a, keepdims=True)))),
        Mistake("the row maxima do not line up with their rows: keep the reduced axis when "
                "you take the maximum, so that it broadcasts along `axis`.",
                along(no_keepdims_max)),
        Mistake("the sums do not line up with their rows: keep the reduced axis when you take "
                "the sum, so that it broadcasts along `axis`.",
                along(lambda x, a: np.exp(x) / np.expand_dims(np.exp(x).sum(axis=a), -1))),
    ]


@progressive
def check_softmax(fn):
    """Check ``fn(x, axis=-1)``: a numerically stable softmax along ``axis``.

    Run on the worked example's scaled scores along rows and columns, a random batch,
    scores near 1e4 (a plain ``exp`` overflows there) and a single score.
    """
    s = scores(examples.Q, examples.K)
    g = examples.rng(4)
    xb = g.standard_normal((2, 3, 5)) * 3.0
    big = 1e4 + g.standard_normal((3, 4)) * 1e3
    apart = np.array([[1e4, 1e4 - 1, 1e4 - 2], [0.0, 1.0, 2.0]])  # rows 1e4 apart
    one = np.array([[2.5]])
    cases = [Case("the worked example's scaled scores", (s,), softmax(s, axis=-1),
                  kwargs={"axis": -1}),
             Case("the worked example's scores with axis=0", (s,), softmax(s, axis=0),
                  kwargs={"axis": 0}),
             Case(f"a random batch of shape {xb.shape}", (xb,), softmax(xb, axis=-1),
                  kwargs={"axis": -1}, batched=True),
             Case(f"a random batch of shape {xb.shape} with axis=1", (xb,), softmax(xb, axis=1),
                  kwargs={"axis": 1}, batched=True),
             Case("scores near 1e4", (big,), softmax(big, axis=-1), kwargs={"axis": -1},
                  nonfinite_hint=OVERFLOW),
             Case("two rows 1e4 apart ([1e4, 1e4 - 1, 1e4 - 2] and [0, 1, 2])", (apart,),
                  softmax(apart, axis=-1), kwargs={"axis": -1}, nonfinite_hint=OVERFLOW),
             Case("a single score", (one,), softmax(one, axis=-1), kwargs={"axis": -1})]
    return judge(fn, cases, _softmax_variants(), what="weights",
                 stub_hint="exponentiate the scores after subtracting the maximum along `axis`, "
                           "then divide by their sum along `axis`.",
                 shape_rule="softmax keeps the shape of its input",
                 why="A stable softmax: every slice along `axis` sums to 1, even for scores "
                     "of 1e4.")


def _weights(q, k, scale=None, axis=-1, mask=None, fill=-np.inf):
    s = _raw(q, k) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        s = np.where(mask, s, fill)
    return softmax(s, axis=axis)


@progressive
def check_attention(fn):
    """Check ``fn(q, k, v, scale=None)``: the output ``softmax(q k^T * scale) v``.

    ``scale`` defaults to ``1 / sqrt(d_k)``; the function returns only the output,
    ``(..., n_q, d_v)``. Run on the worked example (with the default scale and with
    ``scale=0.5``), a random batch with n_q != n_k and d_v != d_k, scores near 1e4 and a
    single token.
    """
    q, k, v = examples.Q, examples.K, examples.V
    qb, kb, vb = _batch_qkv(5, (2, 3), 5, 6, 4, 3)
    ql, kl, vl = _large_qkv()
    q1, k1, v1 = _batch_qkv(6, (), 1, 1, 3, 2)
    cases = [Case("the worked example", (q, k, v), attention(q, k, v)[0]),
             Case("the worked example with scale=0.5", (q, k, v), attention(q, k, v, scale=0.5)[0],
                  kwargs={"scale": 0.5}),
             Case(f"a random batch (q {qb.shape}, k {kb.shape}, v {vb.shape})", (qb, kb, vb),
                  attention(qb, kb, vb)[0], batched=True),
             Case("scores near 1e4", (ql, kl, vl), attention(ql, kl, vl)[0],
                  nonfinite_hint=OVERFLOW),
             Case("a single token (n = 1)", (q1, k1, v1), attention(q1, k1, v1)[0])]

    def mistake(hint, weights=_weights, mix=lambda w, v: w @ v):
        return Mistake(hint, lambda q, k, v, scale=None: mix(weights(q, k, scale), v))

    mistakes = [
        mistake("you returned the weights: multiply them by v to get the output.",
                mix=lambda w, v: w),
        mistake("the scores are not scaled: multiply the dot products by 1/sqrt(d_k) "
                "(or by `scale` when it is given).", lambda q, k, s: _weights(q, k, 1.0)),
        mistake("you scaled by 1/d_k instead of 1/sqrt(d_k).",
                lambda q, k, s: _weights(q, k, 1 / q.shape[-1] if s is None else s)),
        mistake("your function ignores `scale` when it is given.",
                lambda q, k, s: _weights(q, k)),
        mistake("you divided by `scale`: the scale multiplies the dot products.",
                lambda q, k, s: _weights(q, k, None if s is None else 1 / s)),
        mistake("the softmax runs over the wrong axis: each query's row of weights (the "
                "last axis) should sum to 1.", lambda q, k, s: _weights(q, k, s, axis=-2)),
        mistake("the weights are transposed: row i of the weights (query i) mixes the rows "
                "of v.", mix=lambda w, v: _t(w) @ v),
        mistake("the scores multiply v directly: turn them into weights with a softmax "
                "first.", lambda q, k, s: _raw(q, k) * (1 / np.sqrt(q.shape[-1]) if s is None
                                                       else s)),
    ]
    return judge(fn, cases, mistakes, what="output",
                 stub_hint="scores (q times k transposed, times the scale), a stable softmax "
                           "along the last axis, then the weights times v.",
                 shape_rule="the output has one row per query and one column per value "
                            "dimension, (..., n_q, d_v)",
                 why="Scores, softmax and the weighted sum agree with attn_core, on batches and "
                     "on scores of 1e4.")


def _random_mask(seed, n_q, n_k):
    g = examples.rng(seed)
    mask = g.random((n_q, n_k)) < 0.6
    mask[np.arange(n_q), g.integers(0, n_k, n_q)] = True  # every query may see some key
    return mask


@progressive
def check_masked_attention(fn):
    """Check ``fn(q, k, v, mask)``: attention where a False ``mask[..., i, j]`` hides key j.

    Masked scores must be set to -inf *before* the softmax; a query with no allowed key gets
    zero weights and a zero output row (as ``attn_core.attention`` does). Run on the worked
    example with a causal and a window mask, a random batch with a random mask, scores near
    1e4, and a fully masked row.
    """
    q, k, v = examples.Q, examples.K, examples.V
    qb, kb, vb = _batch_qkv(7, (2,), 5, 6, 4, 3)
    mb = _random_mask(8, 5, 6)
    ql, kl, vl = _large_qkv()
    hole = causal_mask(4).copy()
    hole[1] = False  # query 2 may attend to nothing
    causal, win = causal_mask(4), window_mask(4, 2)
    cases = [Case("the worked example with a causal mask", (q, k, v, causal),
                  attention(q, k, v, mask=causal)[0]),
             Case("the worked example with a window mask", (q, k, v, win),
                  attention(q, k, v, mask=win)[0]),
             Case(f"a random batch (q {qb.shape}) with a random {mb.shape} mask",
                  (qb, kb, vb, mb), attention(qb, kb, vb, mask=mb)[0], batched=True),
             Case("scores near 1e4 with a causal mask", (ql, kl, vl, causal),
                  attention(ql, kl, vl, mask=causal)[0], nonfinite_hint=OVERFLOW),
             Case("the worked example with a fully masked row (query 2 may see no key)",
                  (q, k, v, hole), attention(q, k, v, mask=hole)[0],
                  nonfinite_hint="a query with no allowed key divides 0 by 0. Give such a "
                                 "row zero weights, so that its output is a row of zeros.")]
    mistakes = [
        Mistake("the mask is applied after the softmax: the allowed weights no longer sum "
                "to 1. Set the masked scores to -inf before the softmax.",
                lambda q, k, v, m: (_weights(q, k) * m) @ v),
        Mistake("the mask is the wrong way round: True means the query may attend to that key.",
                lambda q, k, v, m: _weights(q, k, mask=~np.asarray(m, bool)) @ v),
        Mistake("a masked score of 0 still gets weight exp(0) = 1: give masked scores -inf.",
                lambda q, k, v, m: _weights(q, k, mask=m, fill=0.0) @ v),
        Mistake("the mask is transposed: mask[i, j] says whether query i may see key j.",
                lambda q, k, v, m: _weights(q, k, mask=_t(m)) @ v),
        Mistake("a query with no allowed key should attend to nothing (zero weights, a zero "
                "output row), not spread its weight evenly over the masked keys.",
                lambda q, k, v, m: _weights(q, k, mask=m, fill=-1e9) @ v),
        Mistake("the scores are not scaled: divide the dot products by sqrt(d_k).",
                lambda q, k, v, m: _weights(q, k, 1.0, mask=m) @ v),
        Mistake("you returned the weights: multiply them by v to get the output.",
                lambda q, k, v, m: _weights(q, k, mask=m)),
        Mistake("the mask was ignored.", lambda q, k, v, m: _weights(q, k) @ v),
    ]
    return judge(fn, cases, mistakes, what="output",
                 stub_hint="scaled scores, then -inf wherever the mask is False, then a stable "
                           "softmax (a row with no allowed key gets zero weights), then times v.",
                 shape_rule="the output has shape (..., n_q, d_v)",
                 why="The mask acts before the softmax, every allowed row still sums to 1, and a "
                     "query that may see nothing gets a zero output instead of NaN.")


@progressive
def check_sliding_window_mask(fn):
    """Check ``fn(n, window)``: the causal sliding-window mask, ``(n, n)`` booleans.

    ``mask[i, j]`` is True when query ``i`` may attend to key ``j``: itself and the
    ``window - 1`` keys just before it.
    """
    sizes = [(5, 2), (6, 3), (4, 4), (3, 10), (6, 1), (1, 1)]
    cases = [Case(f"n = {n}, window = {w}", (n, w), window_mask(n, w)) for n, w in sizes]

    def offsets(n):
        return np.arange(n)[:, None] - np.arange(n)[None, :]  # (n, 1) - (1, n): i - j

    mistakes = [
        Mistake("the mask is the wrong way round: True means the query may attend to the key.",
                lambda n, w: ~window_mask(n, w)),
        Mistake("your mask lets queries see keys after them: the window looks only backwards.",
                lambda n, w: np.abs(offsets(n)) < w),
        Mistake("rows and columns are swapped: row i is query i, and it sees the keys up to "
                "and including position i.", lambda n, w: window_mask(n, w).T),
        Mistake("each query should see `window` keys, itself included; yours sees one more.",
                lambda n, w: (offsets(n) >= 0) & (offsets(n) <= w)),
        Mistake("each query should see `window` keys, itself included; yours sees one fewer.",
                lambda n, w: (offsets(n) >= 0) & (offsets(n) < w - 1)),
        Mistake("each query should see itself too (the window includes the query's own "
                "position).", lambda n, w: (offsets(n) > 0) & (offsets(n) <= w)),
        Mistake("that is the plain causal mask: the window is ignored.",
                lambda n, w: causal_mask(n)),
    ]
    return judge(fn, cases, mistakes, what="mask",
                 stub_hint="compare the query index i (running down the rows) with the key "
                           "index j (running along the columns): a key is allowed when it is not "
                           "in the future and fewer than `window` positions back.",
                 shape_rule="the mask has one row per query and one column per key, (n, n)",
                 why="Each query sees itself and the window - 1 tokens before it, never the "
                     "future.")
