"""Exercise checks for notebook 19, gates and deltas: a delta-rule step, the decay mask, the
cache of a hybrid model.

Each expected answer is computed here with attn_core's maths from the exercise's inputs
(never typed in); a wrong answer gets a hint in words, and the usual slips (the state summed
instead of corrected, the step size left out of the read or the write, the read taken after
the write; the gate of the key's own token counted, the mask transposed, the causal zeros
left out; every layer counted as attention or as a state, the state counted per token, keys
without values) are named.
"""

import numpy as np

from ..cost import kv_cache_bytes
from ..decay import decay_mask
from ..delta_rule import delta_step
from ..hybrid_cost import cache_parts, decoder_cache_bytes, hybrid_layers
from ._base import check_number, not_yet, progressive, read_number
from ._practice import Case, Mistake, judge

__all__ = ["check_decay_mask", "check_delta_step", "check_hybrid_cache_bytes"]


def _step(s, k, v, beta):
    """The reference: one DeltaNet step (no gate), the state only."""
    return delta_step(s, k, k, v, beta)[1]


def _summed(s, k, v, beta):
    return s + beta * np.outer(k, v)


def _beta_on_read_only(s, k, v, beta):
    return s + np.outer(k, v - beta * (k @ s))


def _no_beta(s, k, v, beta):
    return s + np.outer(k, v - k @ s)


@progressive
def check_delta_step(fn, seed=19):
    """Code exercise: ``fn(s, k, v, beta)`` is one step of the delta rule, ``(d_k, d_v)``
    state, unit key ``(d_k,)``, value ``(d_v,)``, step size ``beta`` -> the new state."""
    hint = ("read what the state holds for the key (the key times the state), subtract it from "
            "the new value, and add the key's outer product with that difference, scaled by "
            "beta.")
    g = np.random.default_rng(seed)
    cases = []
    for d_k, d_v, beta in ((3, 2, 0.5), (4, 3, 1.0), (2, 5, 0.3)):
        s, k, v = g.standard_normal((d_k, d_v)), g.standard_normal(d_k), g.standard_normal(d_v)
        k = k / np.linalg.norm(k)
        cases.append(Case(f"d_k = {d_k}, d_v = {d_v}, beta = {beta}", (s, k, v, beta),
                          _step(s, k, v, beta)))
    mistakes = [
        Mistake("the new pair is added to the state as linear attention does: the delta rule "
                "first subtracts what the state already holds for this key.", _summed),
        Mistake("beta scales the whole correction, the new value as well as the old one it "
                "replaces, not only the old one.", _beta_on_read_only),
        Mistake("the correction is not scaled by beta: beta is the fraction of the way to the "
                "new value that one step goes.", _no_beta),
    ]
    return judge(fn, cases, mistakes, what="state", stub_hint=hint,
                 shape_rule="(d_k, d_v), the shape of the state",
                 why="with beta = 1 and a unit key the state now returns exactly the new value "
                     "for that key, whatever it held before.")


def _with_own_gate(g):
    c = np.cumsum(np.log(g))
    return np.tril(np.exp(c[:, None] - c[None, :] + np.log(g)[None, :]))


def _transposed(g):
    return decay_mask(g).T


def _no_causal_zeros(g):
    c = np.cumsum(np.log(g))
    return np.exp(-np.abs(c[:, None] - c[None, :]))


def _gate_powers(g):
    n = len(g)
    i, j = np.indices((n, n))
    return np.tril(np.power(g[-1], np.maximum(i - j, 0)))


@progressive
def check_decay_mask(fn, seed=19):
    """Code exercise: ``fn(g)`` is the ``(n, n)`` decay mask of the gates ``g (n,)``:
    ``D_ij = g_{j+1} ... g_i`` for ``j <= i``, 0 above the diagonal."""
    hint = ("entry (i, j) multiplies the gates of the tokens after j up to and including i "
            "(none on the diagonal: 1), and is 0 where j comes after i. A running sum of the "
            "gates' logarithms gives every such product as a difference.")
    g = np.random.default_rng(seed)
    cases = [Case(f"{n} gates", (gates,), decay_mask(gates)) for n, gates in
             ((4, g.uniform(0.3, 1.0, 4)), (1, np.array([0.7])), (6, g.uniform(0.1, 1.0, 6)))]
    mistakes = [
        Mistake("the gate of key j's own token is included: key j is written after its gate "
                "shrinks the state, so only the gates after j reach it (the diagonal is 1).",
                _with_own_gate),
        Mistake("the mask is transposed: row i is the query, column j an earlier key, so the "
                "entries sit below the diagonal.", _transposed),
        Mistake("the entries above the diagonal must be 0: a query never reads a later key.",
                _no_causal_zeros),
        Mistake("one gate raised to the distance is RetNet's fixed decay; here each token has "
                "its own gate, so multiply the gates in between.", _gate_powers),
    ]
    return judge(fn, cases, mistakes, what="mask", stub_hint=hint,
                 shape_rule="(n, n), one row per query and one column per key",
                 why="masked attention with this mask in place of the causal 0/1 mask is the "
                     "decayed recurrence, number for number.")


@progressive
def check_hybrid_cache_bytes(answer, n, layers, every, state_heads, d_k, d_v, kv_heads, d_head,
                             dtype="float16"):
    """Exercise: bytes a decoder keeps after ``n`` tokens for a hybrid of ``layers`` layers in
    which one layer in ``every`` is softmax attention (a KV cache of ``kv_heads`` heads of
    ``d_head``) and the others gated-delta layers (``state_heads`` states of ``d_k x d_v``)."""
    hint = ("the softmax layers keep a key and a value per token and key/value head; the "
            "gated-delta layers keep one d_k x d_v state per head, whatever the number of "
            "tokens. Count each kind of layer, then add.")
    got, feedback = read_number(answer, hint, "a single whole number of bytes")
    if feedback is not None:
        return feedback
    size = np.dtype(dtype).itemsize
    kinds = hybrid_layers(layers, every)  # one softmax layer closing each run of `every`
    n_soft = kinds.count("softmax")
    n_delta = layers - n_soft
    shape = dict(state_heads=state_heads, d_k=d_k, d_v=d_v, dtype=dtype)
    one_state = cache_parts(("gated_delta",), kv_heads, d_head, **shape)[1]  # one layer's
    per_token, state = cache_parts(kinds, kv_heads, d_head, **shape)
    cache = n * per_token
    expected = decoder_cache_bytes(n, kinds, kv_heads, d_head, **shape)
    full = kv_cache_bytes(n, layers, kv_heads, d_head, dtype)
    slips = [
        (full, "that is the cache of a model with softmax attention in every layer"),
        (layers * one_state, "that counts every layer as a gated-delta state: one layer in "
                             f"{every} is softmax attention, whose cache grows with the tokens"),
        (cache + n * state, "the gated-delta state does not grow with the tokens: count it once"),
        (cache // 2 + state, "a softmax layer caches a value beside each key"),
        (kv_cache_bytes(n, n_delta, kv_heads, d_head, dtype) + n_soft * one_state,
         "the layers are swapped: most are gated-delta layers, one in each group of "
         f"{every} is softmax attention"),
        (cache, "the gated-delta layers keep their states too"),
        (expected / size, f"that counts numbers, not bytes (each {dtype} number takes "
                          f"{size} bytes)"),
    ]
    for value, wrong in slips:
        if value != expected and np.isclose(got, value, rtol=1e-9, atol=0.5):
            return not_yet(wrong + ".", hint)
    return check_number(got, expected, hint=hint, rtol=1e-9, atol=0.5,
                        why=f"{full / expected:.1f} times less than softmax attention in every "
                            "layer at this length, and the gap grows with every token.")
