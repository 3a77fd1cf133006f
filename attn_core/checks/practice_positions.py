"""Checks of notebook 08b's exercises: the learner writes the rotation of RoPE, and two numbers.

The code exercise uses the machinery of :mod:`._practice`: run the learner's
``rotary_attention(q, k, v, positions, base)`` on several inputs, compare with attn_core
(:func:`~attn_core.positions.rope` on the queries and keys, then
:func:`~attn_core.attention.attention`), name the first mistake recognised. The inputs are
chosen so that the usual mistakes give different outputs: two or more pairs per vector (so
that the pairing matters), positions that are not ``0, 1, 2, ...`` (so that they must be
read), ``d_v = d`` (so that rotating the values changes the output) and a small base (so that
slow pairs turn too).
"""

import numpy as np

from .. import examples
from ..attention import attention
from ..positions import frequencies, rope
from ._base import (
    check_choice,
    check_number,
    not_yet,
    progressive,
    read_number,
    right,
    rounding_tolerance,
)
from ._practice import Case, Mistake, judge

__all__ = ["check_rope_wavelength", "check_rotary_attention", "check_which_depend_on_offset"]


def _rotary(q, k, v, positions, base=10000.0, *, scale=1.0, base_of=None, pairing="interleaved",
            which="qk", at=None, unscaled=False):
    """Attention with rotated queries and keys; switches reproduce the usual mistakes, all
    through :func:`~attn_core.positions.rope`: a frequency exponent off by a constant is
    ``theta_c`` times a constant (``scale``: positions scaled), a missing factor 2 is another
    base (``base_of``), a sign flip of the sine is the rotation by minus the position."""
    positions = np.arange(q.shape[-2]) if at == "arange" else np.asarray(positions, float)
    positions = scale * positions if not callable(scale) else scale(positions, base, q.shape[-1])
    base = base if base_of is None else base_of(base)

    def turn(x):
        return rope(x, positions, base, pairing=pairing)

    turned = (turn(x) if name in which else x for x, name in zip((q, k, v), "qkv"))
    return attention(*turned, scale=1.0 if unscaled else None)[0]


@progressive
def check_rotary_attention(fn):
    """Check ``fn(q, k, v, positions, base=10000.0)``: attention with RoPE on q and k.

    Pair ``c`` is features ``2c`` and ``2c + 1`` (Su et al. 2021), turned by the angle
    ``position * base**(-2c/d)``; the values are not rotated; the attention is
    ``attention(q_rot, k_rot, v)`` with the default scale ``1/sqrt(d)``, no mask.
    """
    g = examples.rng(23)
    cases = []
    for label, batch, n, d, base, positions in (
            ("4 tokens at positions 3, 5, 6, 10, d = 4", (), 4, 4, 10000.0, [3, 5, 6, 10]),
            ("5 tokens at positions 0 to 4, d = 6, base 100", (), 5, 6, 100.0, np.arange(5)),
            ("a batch of 2 sequences of 3 tokens at positions 7, 2, 9, d = 8", (2,), 3, 8,
             10000.0, [7, 2, 9]),
            ("a single token at position 12, d = 4", (), 1, 4, 10000.0, [12])):
        q, k, v = (g.standard_normal((*batch, n, d)) for _ in range(3))
        args = (q, k, v, np.asarray(positions), base)
        want = attention(rope(q, args[3], base), rope(k, args[3], base), v)[0]
        cases.append(Case(label, args, want, batched=bool(batch)))

    def mistake(hint, **switches):
        return Mistake(hint, lambda *args: _rotary(*args, **switches))

    mistakes = [
        mistake("the pairs are the two halves of each vector (feature c with feature c + d/2, "
                "as in GPT-NeoX); here pair c is the neighbours 2c and 2c + 1.",
                pairing="halves"),
        mistake("each pair turns the wrong way: the sine's sign is flipped, so the pair turns "
                "clockwise by its angle instead of anticlockwise.", scale=-1.0),
        # base**(-(2c + 2)/d) = base**(-2/d) * base**(-2c/d): every angle times base**(-2/d)
        mistake("the frequencies are off by one pair: pair 0, the fastest, turns by exactly 1 "
                "radian per position.",
                scale=lambda p, base, d: p * base ** (-2 / d)),
        # base**(-c/d) = sqrt(base)**(-2c/d)
        mistake("the frequency exponent is off: it is -2c/d for pair c (c counts pairs, not "
                "features).", base_of=np.sqrt),
        mistake("the frequency exponent is -(2c + 1)/d: it is -2c/d for pair c, so pair 0 "
                "turns by exactly 1 radian per position.",
                scale=lambda p, base, d: p * base ** (-1 / d)),
        mistake("the values are rotated too: RoPE turns only the queries and keys (the "
                "values carry content, not position).", which="qkv"),
        mistake("the scores are not scaled: after turning the queries and keys, divide their "
                "dot products by the square root of d, as in every attention of the course.",
                unscaled=True),
        mistake("only the queries are rotated: rotate the keys the same way.", which="q"),
        mistake("only the keys are rotated: rotate the queries the same way.", which="k"),
        mistake("the positions are taken as 0, 1, 2, ...: use the positions passed in.",
                at="arange"),
        mistake("every pair turns at the same rate: each pair has its own frequency, slower "
                "and slower along the vector.",
                base_of=lambda base: 1.0),
    ]
    return judge(fn, cases, mistakes, what="output",
                 stub_hint="for each pair of neighbouring features, take the angle the "
                           "position gives at that pair's frequency (the formula above the "
                           "exercise) and turn the pair by it (a 2-D rotation), in every "
                           "query and every key; then attend with the rotated queries and keys "
                           "and the values as they are.",
                 shape_rule="the output has one row per query and as many columns as v, "
                            "(..., n, d_v)",
                 why="Each pair turned by its own angle, queries and keys only: your rotary "
                     "attention agrees with attn_core's rope, batched and at any positions.")


@progressive
def check_rope_wavelength(answer, pair, d, base=10000.0, decimals=1):
    """Exercise: how many positions pair ``pair`` of a ``d``-wide RoPE takes to turn once."""
    theta = frequencies(d, base)
    places = f"{decimals} decimal{'' if decimals == 1 else 's'}"
    hint = (f"find how many radians pair {pair} turns per position (its frequency, from the "
            f"formula in the notebook), and how many such steps make a full turn of 2 pi "
            f"radians; give the number of positions to {places}.")
    got, feedback = read_number(answer, hint)
    if feedback is not None:
        return feedback
    tol = rounding_tolerance(decimals)
    # each misconception's number, computed from the same frequencies (c counted from 0)
    slips = [(1 / theta[pair], "that is one radian's worth of positions; a full turn is 2 pi "
                               "radians."),
             (2 * np.pi * theta[pair], "that multiplies by the frequency: the positions of one "
                                       "turn are the full angle divided by the angle of one "
                                       "position."),
             (2 * np.pi / base ** (-pair / d), "that uses the exponent -c/d: it is -2c/d, c "
                                               "counts pairs, not features."),
             (360 / theta[pair], "that counts the full turn as 360: the angles of RoPE are in "
                                 "radians.")]
    if pair + 1 < theta.size:
        slips.append((2 * np.pi / theta[pair + 1], "that is the next pair's turn: count pairs "
                                                   "from c = 0."))
    if pair > 0:
        slips.append((2 * np.pi / theta[pair - 1], f"that is the turn of pair {pair - 1}: pair "
                                                   f"c = {pair} is features {2 * pair} and "
                                                   f"{2 * pair + 1}, counted from 0."))
    for value, wrong in slips:
        if abs(got - value) <= tol and abs(value - 2 * np.pi / theta[pair]) > tol:
            return not_yet(wrong, hint)
    return check_number(got, 2 * np.pi / theta[pair], hint=hint, atol=tol,
                        why=f"pair {pair} repeats every 2 pi / theta_c positions; the slow pairs "
                            "repeat only after thousands of positions, so far-apart tokens stay "
                            "distinguishable.")


#: The schemes of exercise 3: where each puts the position.
SCHEMES = ("sinusoidal", "learned", "rope", "alibi")

#: Exercise 3: what is wrong with leaving a scheme out (it sees only offsets) or putting it in.
_LEFT_OUT = {
    "rope": "RoPE is missing: the query turned by m and the key turned by n meet in the dot "
            "product as one rotation by n - m, wherever the two are.",
    "alibi": "ALiBi is missing: its bias is minus the slope times the distance m - n, and "
             "nothing else about the positions.",
}
_PUT_IN = {
    "sinusoidal": "Sinusoidal positions do not fit: the dot product of two position vectors "
                  "depends only on m - n, but they are added to the content before W_q and W_k, "
                  "so the score keeps terms with one position alone.",
    "learned": "Learned positions do not fit: a vector of the table is added to the content at "
               "each place, so the score keeps terms with one position alone.",
}


@progressive
def check_which_depend_on_offset(answer):
    """Exercise: which schemes give a score that depends only on the query-key offset (and
    on content), whatever the absolute positions? Answer: a set of names from SCHEMES."""
    hint = ("write the score of a query at position m and a key at n under each scheme: when "
            "position vectors are added to the content, multiplying out the score leaves terms "
            "with one position alone; a rotation or a bias by the offset leaves none.")
    if answer is None or answer is Ellipsis:
        return check_choice(answer, None, SCHEMES, hint=hint)
    try:
        got = {str(a).strip().lower() for a in answer}
    except TypeError:
        return not_yet("answer with a set of names, such as {'rope'}.", hint)
    if not got <= set(SCHEMES):
        return not_yet(f"use names among {list(SCHEMES)}.", hint)
    # RoPE: R(m)^T R(n) = R(n - m) (tests/test_positions.py); ALiBi: - slope (m - n)
    wrong = ([why for name, why in _LEFT_OUT.items() if name not in got]
             + [why for name, why in _PUT_IN.items() if name in got])
    if not wrong:
        return right("RoPE and ALiBi see only m - n; added positions (fixed or learned) leave "
                     "terms in the score that depend on where the query and key are.")
    return not_yet(" ".join(wrong), hint)
