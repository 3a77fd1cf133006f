"""Exercise checks for notebook 17, a real LLM (SmolLM2-135M-Instruct).

Each expected answer is computed here by attn_core's own code from the exercise's inputs
(never typed in). Each check's inputs tell apart the slips it names: RMSNorm written as layer
norm (the mean subtracted), epsilon outside the square root, the root forgotten, the gate and
up projections swapped, GELU or a plain sigmoid in place of SiLU, the scale and minimum of a
Q4_1 block read in the wrong order, its nibbles in the wrong order. Repeating the key/value
heads and the KV-cache size are notebook 16's checks, reused here on this model's head counts
(:func:`check_repeat_kv`, :func:`check_gqa_cache_bytes`).
"""

import numpy as np

from ..model.quant_blocks import Q4_1_BYTES, dequantize_q4_1_block
from ..nn.gelu import gelu
from ..nn.rms_norm import rms_norm
from ..nn.swiglu import silu, swiglu
from ._base import progressive
from ._practice import Case, Mistake, judge
from .todays_attention import check_gqa_cache_bytes, check_repeat_kv

__all__ = ["check_dequantize_q4_1", "check_gqa_cache_bytes", "check_repeat_kv",
           "check_rms_norm", "check_swiglu"]


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


@progressive
def check_rms_norm(fn, seed=17):
    """Code exercise: ``fn(x, g, eps)`` is RMSNorm over the last axis of ``(..., d)`` rows."""
    hint = ("divide each row by the square root of the mean of its squared entries (epsilon "
            "added under the root), then multiply by the gain; nothing is subtracted.")
    rng = np.random.default_rng(seed)
    cases = []
    # rows far from zero mean (layer norm differs), a large eps (inside/outside the root
    # differ), a gain that is not all ones, then a batch of sequences
    for label, shape, eps, offset in (("a row of 6 with mean far from 0 and eps = 0.5",
                                       (1, 6), 0.5, 2.0),
                                      ("4 rows of 8, eps = 1e-5", (4, 8), 1e-5, 0.5),
                                      ("a batch of shape (2, 3, 5), eps = 0.1", (2, 3, 5), 0.1,
                                       -1.0)):
        x = rng.standard_normal(shape) + offset
        g = rng.uniform(0.5, 2.0, shape[-1])
        cases.append(Case(label, (x, g, eps), rms_norm(x, g, eps), batched=len(shape) > 2))

    def mean_removed(x, g, eps):
        c = x - x.mean(axis=-1, keepdims=True)
        return c / np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + eps) * g

    ms = lambda x: np.mean(x * x, axis=-1, keepdims=True)  # noqa: E731
    mistakes = [
        Mistake("the mean is subtracted first: that is layer norm. RMSNorm keeps the mean and "
                "divides by the root mean square of the entries as they are.", mean_removed),
        Mistake("epsilon is added after the square root; it belongs under it, with the mean "
                "square.", lambda x, g, eps: x / (np.sqrt(ms(x)) + eps) * g),
        Mistake("the square root is missing: divide by the root of the mean square, not by "
                "the mean square.", lambda x, g, eps: x / (ms(x) + eps) * g),
        Mistake("the gain is not applied.", lambda x, g, eps: x / np.sqrt(ms(x) + eps)),
        Mistake("the mean runs over the rows (axis 0) instead of along each row.",
                lambda x, g, eps: x / np.sqrt(np.mean(x * x, axis=0, keepdims=True) + eps) * g),
        Mistake("that divides by the sum of squares, not their mean.",
                lambda x, g, eps: x / np.sqrt((x * x).sum(axis=-1, keepdims=True) + eps) * g),
    ]
    return judge(fn, cases, mistakes, what="normalised rows", stub_hint=hint,
                 shape_rule="the same shape as x",
                 why="every row now has a root mean square of about 1 before the gain, with its "
                     "mean left where it was: one reduction fewer than layer norm.")


@progressive
def check_swiglu(fn, seed=17):
    """Code exercise: ``fn(x, w_gate, w_up, w_down)`` is the SwiGLU MLP of ``(..., n, d)``."""
    hint = ("project x twice, with the gate weights and with the up weights; pass only the "
            "gate's projection through SiLU (z times the sigmoid of z); multiply the two "
            "element by element; project the product down.")
    rng = np.random.default_rng(seed)
    cases = []
    for label, lead, d, d_ff in (("one token, d = 4, d_ff = 6", (1,), 4, 6),
                                 ("5 tokens, d = 3, d_ff = 8", (5,), 3, 8),
                                 ("a batch of shape (2, 3) tokens", (2, 3), 4, 5)):
        x = 1.5 * rng.standard_normal((*lead, d))
        w_gate, w_up = rng.standard_normal((d, d_ff)), rng.standard_normal((d, d_ff))
        w_down = rng.standard_normal((d_ff, d))
        cases.append(Case(label, (x, w_gate, w_up, w_down), swiglu(x, w_gate, w_up, w_down),
                          batched=len(lead) > 1))
    mistakes = [
        Mistake("SiLU is applied to the up projection instead of the gate projection: the two "
                "are swapped.", lambda x, wg, wu, wd: (silu(x @ wu) * (x @ wg)) @ wd),
        Mistake("that uses GELU; this model's gate uses SiLU (z times the sigmoid of z).",
                lambda x, wg, wu, wd: (gelu(x @ wg) * (x @ wu)) @ wd),
        Mistake("that multiplies by the sigmoid of the gate alone; SiLU is the gate's value "
                "times its sigmoid.", lambda x, wg, wu, wd: (_sigmoid(x @ wg) * (x @ wu)) @ wd),
        Mistake("SiLU is applied to the product of the two projections; only the gate's "
                "projection goes through it.",
                lambda x, wg, wu, wd: silu((x @ wg) * (x @ wu)) @ wd),
        Mistake("the up projection is missing: the gated value must multiply it.",
                lambda x, wg, wu, wd: silu(x @ wg) @ wd),
        Mistake("the gate and up projections are added, not multiplied.",
                lambda x, wg, wu, wd: (silu(x @ wg) + (x @ wu)) @ wd),
    ]
    return judge(fn, cases, mistakes, what="outputs", stub_hint=hint,
                 shape_rule="the same shape as x (d_ff only inside)",
                 why="the gate decides, entry by entry, how much of the up projection passes: "
                     "three matrices where GPT-2's MLP had two.")


def _q4_1_block(rng, d, m):
    raw = rng.integers(0, 256, size=Q4_1_BYTES, dtype=np.uint8)
    raw[:2] = np.array([d], dtype="<f2").view(np.uint8)
    raw[2:4] = np.array([m], dtype="<f2").view(np.uint8)
    return raw


def _f16(block, at):
    return np.ascontiguousarray(block[..., at:at + 2]).view("<f2")[..., 0].astype(float)[..., None]


#: What to say when a Q4_1 decoder works on one block and not on a batch of them.
Q4_1_BATCH_HINT = ("It works on one block but not on a batch of blocks: read the bytes along "
                   "the last axis only (the scale and minimum from the first four bytes of "
                   "every block, the 4-bit numbers from its last sixteen), so that each block "
                   "of the batch is decoded alike, and join the two halves of 16 weights along "
                   "that last axis.")


@progressive
def check_dequantize_q4_1(fn, seed=17):
    """Code exercise: ``fn(block)`` turns one Q4_1 block's 20 raw bytes (uint8) into its 32
    weights (and ``(..., 20)`` into ``(..., 32)``)."""
    hint = ("the first two bytes are the scale and the next two the minimum, each a "
            "little-endian float16; every later byte holds two 4-bit numbers: its low four bits "
            "belong to the first half of the block and its high four bits to the second half, "
            "in the same place. A weight is the scale times its 4-bit number plus the minimum.")
    rng = np.random.default_rng(seed)
    cases = []
    for label, d, m in (("a block with scale 0.05 and minimum -0.4", 0.05, -0.4),
                        ("a block with scale 0.0031 and minimum 0.012", 0.0031, 0.012)):
        block = _q4_1_block(rng, d, m)
        cases.append(Case(label, (block,), dequantize_q4_1_block(block)))
    blocks = np.stack([_q4_1_block(rng, *rng.uniform([0.001, -0.2], [0.02, 0.2]))
                       for _ in range(6)]).reshape(2, 3, Q4_1_BYTES)
    cases.append(Case("a batch of shape (2, 3) blocks", (blocks,),
                      dequantize_q4_1_block(blocks), batched=True, batch_hint=Q4_1_BATCH_HINT))

    def parts(b):
        low, high = (b[..., 4:] & 15).astype(float), (b[..., 4:] >> 4).astype(float)
        return _f16(b, 0), _f16(b, 2), low, high

    def variant(order, swap=False, signed=False, no_min=False):
        def fn_(b):
            d, m, low, high = parts(b)
            q = np.concatenate([low, high], -1) if order == "halves" else (
                np.concatenate([high, low], -1) if order == "high" else
                np.stack([low, high], -1).reshape(*low.shape[:-1], -1))
            if swap:
                d, m = m, d
            return d * (q - 8 if signed else q) + (0 if no_min or signed else m)
        return fn_

    mistakes = [
        Mistake("the scale and the minimum are swapped: the scale comes first in the block.",
                variant("halves", swap=True)),
        Mistake("the nibbles are interleaved (low, high, low, high): the low four bits of all "
                "16 bytes come first, then all the high four bits.", variant("pairs")),
        Mistake("the high nibbles come first; the low four bits are the first half of the "
                "block.", variant("high")),
        Mistake("the minimum is not added: Q4_1 stores it so that the 16 levels cover the "
                "block's range.", variant("halves", no_min=True)),
        Mistake("the 4-bit numbers are centred on 8, as in Q4_0; Q4_1 keeps them in 0 to 15 "
                "and adds the minimum instead.", variant("halves", signed=True)),
    ]
    return judge(fn, cases, mistakes, what="weights", stub_hint=hint,
                 shape_rule="32 weights for every block of 20 bytes",
                 why="20 bytes give 32 weights: 5 bits a weight, where float32 takes 32.")
