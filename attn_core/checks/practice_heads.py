"""Checks of the code exercises of notebooks 08 and 09: multi-head attention, online softmax.

Same machinery as :mod:`.practice_attention`: run the learner's function on several inputs,
compare with attn_core, name the first mistake recognised (see :mod:`._practice`).
"""

import numpy as np

from .. import examples
from ..attention import attention
from ..multihead import merge_heads, multi_head_attention, split_heads
from ..softmax import softmax
from ._base import progressive
from ._practice import Case, Mistake, judge
from .practice_attention import OVERFLOW

__all__ = ["check_multi_head_attention", "check_online_softmax"]


def _mha_inputs(seed, batch, n, d_model, d_out):
    g = examples.rng(seed)
    x = g.standard_normal((*batch, n, d_model))
    w_q, w_k, w_v = g.standard_normal((3, d_model, d_model)) / np.sqrt(d_model)
    w_o = g.standard_normal((d_model, d_out)) / np.sqrt(d_model)
    return x, w_q, w_k, w_v, w_o


def _mha(x, w_q, w_k, w_v, w_o, h, *, split=split_heads, merge=merge_heads, scale="d_k",
         axis=-1, project=True, transpose=False):
    """Multi-head attention with switches that reproduce the usual mistakes."""
    q, k, v = (split(x @ w, h) for w in (w_q, w_k, w_v))  # each (..., h, n, d_k)
    d_k = q.shape[-1]
    factor = {"d_k": 1 / np.sqrt(d_k), "d_model": 1 / np.sqrt(x.shape[-1]), None: 1.0}[scale]
    w = softmax(q @ np.swapaxes(k, -1, -2) * factor, axis=axis)  # (..., h, n, n)
    if transpose:
        w = np.swapaxes(w, -1, -2)
    heads = merge(w @ v)  # (..., h, n, d_v) -> (..., n, h * d_v)
    return heads @ w_o if project else heads


def _split_wrong(x, h):
    *lead, n, d = x.shape
    return x.reshape(*lead, h, n, d // h)  # rows cut into h groups: the wrong axis


def _merge_wrong(x):
    *lead, h, n, d_k = x.shape
    return x.reshape(*lead, n, h * d_k)  # heads not moved back next to their columns


@progressive
def check_multi_head_attention(fn):
    """Check ``fn(x, w_q, w_k, w_v, w_o, h)``: multi-head self-attention, output only.

    One big projection per role (``x @ w_q`` is ``(..., n, h * d_k)``), split into ``h``
    heads along the feature axis, scaled dot-product attention per head with the per-head
    ``d_k``, the heads merged back in order and projected by ``w_o``.
    """
    cases = []
    for label, seed, batch, n, d_model, d_out, h in (
            ("5 tokens, d_model = 8, 2 heads", 1, (), 5, 8, 8, 2),
            ("a batch of 2 sequences of 4 tokens, d_model = 8, 4 heads, d_out = 6", 2, (2,), 4,
             8, 6, 4),
            ("one head (h = 1)", 3, (), 4, 6, 6, 1),
            ("a single token (n = 1), 3 heads", 4, (), 1, 6, 6, 3)):
        args = (*_mha_inputs(seed, batch, n, d_model, d_out), h)
        cases.append(Case(label, args, multi_head_attention(*args)[0], batched=bool(batch)))

    def mistake(hint, **switches):
        return Mistake(hint, lambda *args: _mha(*args, **switches))

    mistakes = [
        mistake("W_o is forgotten: the merged heads still go through the output projection.",
                project=False),
        mistake("the heads are split along the wrong axis: cut the columns (the feature axis "
                "of the projected x) into h slices of d_k, then move the head axis in front of the "
                "tokens.", split=_split_wrong),
        mistake("the heads are split along the wrong axis and merged the same way: cut the "
                "feature columns into h slices of d_k.", split=_split_wrong, merge=_merge_wrong),
        mistake("the heads are merged in the wrong order: move the head axis back next to "
                "d_k before reshaping, so that each head fills its own block of d_k "
                "consecutive columns, head 0 first.",
                merge=_merge_wrong),
        mistake("you scaled by sqrt(d_model): each head's scores are divided by the square "
                "root of its own width d_k, its share of the model's width.", scale="d_model"),
        mistake("the scores are not scaled: divide each head's dot products by sqrt(d_k).",
                scale=None),
        mistake("the softmax runs over the wrong axis: each query's row of weights (the last "
                "axis) should sum to 1.", axis=-2),
        mistake("the weights are transposed: row i of a head's weights mixes that head's "
                "value rows for query i.", transpose=True),
        mistake("this is one head over all the columns: split the projections into h heads.",
                split=lambda x, h: x[..., None, :, :], merge=lambda x: x[..., 0, :, :]),
    ]
    return judge(fn, cases, mistakes, what="output",
                 stub_hint="project x with w_q, w_k and w_v, split the columns of each into h "
                           "heads of d_k and move the head axis in front of the tokens, attend "
                           "per head, merge the heads back, and multiply by w_o.",
                 shape_rule="the output has one row per token and as many columns as w_o, "
                            "(..., n, d_out)",
                 why="Split, attend, merge, project: your multi-head attention agrees with "
                     "attn_core, batched and with one head.")


def _online(q, k, v, block_size, *, rescale_l=True, rescale_acc=True, inverted=False,
            divide=True, drop_last=False, scaled=True, local_max=False):
    """The online softmax over key tiles, with switches that reproduce the usual mistakes."""
    s_all = q @ np.swapaxes(k, -1, -2)  # (..., n_q, d_k) @ (..., d_k, n_k) -> (..., n_q, n_k)
    s_all = s_all / (np.sqrt(q.shape[-1]) if scaled else 1.0)
    n_k = k.shape[-2]
    m = np.full(s_all.shape[:-1], -np.inf)  # (..., n_q)
    l = np.zeros(s_all.shape[:-1])  # (..., n_q)
    acc = np.zeros((*s_all.shape[:-1], v.shape[-1]))  # (..., n_q, d_v)
    stop = n_k - n_k % block_size if drop_last and n_k % block_size else n_k
    for j0 in range(0, stop, block_size):
        s = s_all[..., j0:j0 + block_size]  # (..., n_q, b)
        new = s.max(axis=-1) if local_max else np.maximum(m, s.max(axis=-1))
        factor = np.exp(new - m) if inverted else np.exp(m - new)  # (..., n_q)
        p = np.exp(s - new[..., None])  # (..., n_q, b)
        l = (l * factor if rescale_l else l) + p.sum(axis=-1)
        acc = (acc * factor[..., None] if rescale_acc else acc) + p @ v[..., j0:j0 + block_size, :]
        m = new
    return acc / l[..., None] if divide else acc


@progressive
def check_online_softmax(fn):
    """Check ``fn(q, k, v, block_size)``: attention's output by the online softmax over key tiles.

    The function visits the keys ``block_size`` at a time, keeping per query a running
    maximum, a running sum and an accumulator, and returns ``(..., n_q, d_v)``: the same
    output as ``attention(q, k, v)``. Run on the worked example, a random batch whose last
    tile is shorter, keys whose scores rise from tile to tile, scores near 1e4, tiles of one
    key, one tile larger than the sequence and a single token.
    """
    q, k, v = examples.Q, examples.K, examples.V
    g = examples.rng(12)
    qb, kb, vb = (g.standard_normal(shape) for shape in ((2, 5, 3), (2, 7, 3), (2, 7, 2)))
    qr = np.ones((3, 2))
    kr = np.arange(1.0, 9.0)[:, None] * np.array([1.0, 0.5])  # scores rise with every key
    vr = g.standard_normal((8, 2))
    ql, kl, vl = (x * f for x, f in zip(examples.random_qkv(6, 2, seed=13), (80.0, 80.0, 1.0)))
    q1, k1, v1 = examples.random_qkv(1, 3, 2, seed=14)
    cases = [Case("the worked example, tiles of 2 keys", (q, k, v, 2), attention(q, k, v)[0]),
             Case(f"a random batch (q {qb.shape}, k {kb.shape}), tiles of 3 keys (the last "
                  "tile is shorter)", (qb, kb, vb, 3), attention(qb, kb, vb)[0], batched=True),
             Case("keys whose scores rise from tile to tile, tiles of 3", (qr, kr, vr, 3),
                  attention(qr, kr, vr)[0]),
             Case("scores near 1e4, tiles of 2", (ql, kl, vl, 2), attention(ql, kl, vl)[0],
                  nonfinite_hint=OVERFLOW.replace("each row's maximum", "the running maximum")),
             Case("the worked example, tiles of 1 key", (q, k, v, 1), attention(q, k, v)[0]),
             Case("the worked example, one tile of 10 (larger than n)", (q, k, v, 10),
                  attention(q, k, v)[0]),
             Case("a single token (n = 1)", (q1, k1, v1, 2), attention(q1, k1, v1)[0])]

    def mistake(hint, **switches):
        return Mistake(hint, lambda *args: _online(*args, **switches))

    unrescaled = ("the running maximum is not rescaled: when a tile raises the maximum, the "
                  "old sum and the old accumulator were counted against the old maximum and "
                  "must be brought to the new one.")
    mistakes = [
        mistake(unrescaled, rescale_l=False, rescale_acc=False),
        mistake(unrescaled, rescale_l=False, rescale_acc=False, local_max=True),
        mistake("the rescaling factor is upside down: when the maximum grows, the old sums "
                "must shrink, not grow.", inverted=True),
        mistake("only the running sum is rescaled: the accumulator needs the same factor.",
                rescale_acc=False),
        mistake("only the accumulator is rescaled: the running sum needs the same factor.",
                rescale_l=False),
        mistake("the accumulator is not divided by the running sum at the end.", divide=False),
        mistake("the last, shorter tile is dropped: every key must be visited, even when n is "
                "not a multiple of block_size.", drop_last=True),
        mistake("the scores are not scaled: divide the dot products by sqrt(d_k).", scaled=False),
    ]
    return judge(fn, cases, mistakes, what="output",
                 stub_hint="loop over the keys block_size at a time; per query keep the running "
                           "maximum, the running sum of the exponentials of the scores shifted "
                           "by that maximum, and an accumulator of those exponentials times the "
                           "values; whenever the maximum grows, shrink the sum and the "
                           "accumulator to the new maximum; at the end, divide the accumulator "
                           "by the sum.",
                 shape_rule="the output has shape (..., n_q, d_v)",
                 why="Tile by tile, with the running maximum rescaled, you get exactly "
                     "softmax(scores) V without ever holding a whole row of scores.")
