"""The recap quiz of notebook 10: right answers pass, typical wrong ones get a hint that
names the notebook to reread, and no message gives the answer away."""

import math
import re
from pathlib import Path

import numpy as np
import pytest

from attn_core.checks import (
    check_quiz_heads,
    check_quiz_long_context,
    check_quiz_maps,
    check_quiz_mask,
    check_quiz_roles,
    check_quiz_scaling,
    check_quiz_spread,
)


def ref_causal_count(n):
    return sum(1 for i in range(n) for j in range(n) if j <= i)


def ref_mults(n, d_model, h):
    """Multiply-adds of Q K^T and weights @ V over h heads of width d_model / h, by loops."""
    d_k = d_model // h
    return sum(n * n * d_k + n * n * d_k for _ in range(h))


def simulated_std(d_k, samples=50_000, seed=0):
    g = np.random.default_rng(seed)
    q = g.standard_normal((samples, d_k))
    k = g.standard_normal((samples, d_k))
    return float((q * k).sum(axis=1).std())


NUMERIC = [
    (check_quiz_spread, {"d_k": 64}, lambda: round(simulated_std(64), 2), "04-scaling"),
    (check_quiz_heads, {"d_model": 512, "h": 8},
     lambda: ref_mults(512, 512, 8) / ref_mults(512, 512, 1), "08-multi-head"),
    (check_quiz_long_context, {"short": 2048, "long": 8192}, lambda: (8192 / 2048) ** 2,
     "09-cost"),
    (check_quiz_mask, {"n": 4}, lambda: ref_causal_count(4), "07-causal-masking"),
]
CHOICE = [
    (check_quiz_scaling, "b", "04-scaling"),
    (check_quiz_roles, "b", "02-queries-keys-values"),
    (check_quiz_maps, "a", "05-softmax"),
]


def answer_absent(message, expected):
    text = f"{expected:g}" if isinstance(expected, float) else str(expected)
    return re.search(rf"(?<![\d.]){re.escape(text)}(?![\d.])", message) is None


@pytest.mark.parametrize(("check", "kwargs", "reference", "notebook"), NUMERIC)
def test_numeric_question(check, kwargs, reference, notebook):
    expected = reference()
    assert check(expected, **kwargs), check(expected, **kwargs).message
    assert check(int(round(expected)), **kwargs)
    for wrong in (expected + 3, expected * 2 + 1, -1):
        fb = check(wrong, **kwargs)
        assert not fb and notebook in fb.message
        assert answer_absent(fb.message, round(expected))
    fb = check(None, **kwargs)
    assert not fb and fb.message.startswith("… No answer yet") and notebook in fb.message
    assert answer_absent(fb.message, round(expected))
    assert "single number" in check("eight", **kwargs).message


#: (check, kwargs, exact answer, the tolerance the quiz promises). The exact answers come from
#: the reasoning, not from attn_core: a sum of d_k independent unit-variance products has
#: variance d_k (standard deviation sqrt(d_k)); h heads of width d_model / h do the same
#: multiply-adds as one head of width d_model; cells grow with the square of the length.
NEAR_MISS = [
    (check_quiz_spread, {"d_k": 64}, math.sqrt(64), 0.05),
    (check_quiz_heads, {"d_model": 512, "h": 8}, 1.0, 0.01),
    (check_quiz_long_context, {"short": 2048, "long": 8192}, 16.0, 0.01),
    (check_quiz_mask, {"n": 4}, 10.0, 0.01),
]


@pytest.mark.parametrize(("check", "kwargs", "exact", "atol"), NEAR_MISS)
def test_near_misses_are_refused_and_roundings_accepted(check, kwargs, exact, atol):
    """Wrong answers close to the right one are refused: a tolerance 10x looser lets them pass.

    For 04-scaling's spread (8, tolerance 0.05) that means 7.6 and 8.4 (off by 0.4, inside a
    10x looser 0.5) and 7.9 are refused; answers within half the tolerance pass.
    """
    for offset in (-8 * atol, -5 * atol, -2 * atol, 2 * atol, 5 * atol, 8 * atol):
        fb = check(exact + offset, **kwargs)
        assert not fb, f"{exact + offset} accepted for {exact} (tolerance {atol})"
    for offset in (-atol / 2, 0.0, atol / 2):
        assert check(exact + offset, **kwargs), f"{exact + offset} refused for {exact}"
    if check is check_quiz_spread:
        assert not check_quiz_spread(7.6, d_k=64) and not check_quiz_spread(8.4, d_k=64)
        assert check_quiz_spread(8.0, d_k=64) and check_quiz_spread(7.98, d_k=64)


@pytest.mark.parametrize(("check", "expected", "notebook"), CHOICE)
def test_choice_question(check, expected, notebook):
    assert check(expected) and check(expected.upper()) and check(f" {expected} ")
    for wrong in sorted({"a", "b", "c", "d"} - {expected}):
        fb = check(wrong)
        assert not fb and notebook in fb.message
    assert "choose one of" in check("e").message.lower()
    fb = check(None)
    assert fb.message.startswith("… No answer yet") and notebook in fb.message


def test_typical_mistakes_get_a_specific_hint():
    assert "variance" in check_quiz_spread(64, d_k=64).message  # variance, not std
    assert "full width" in check_quiz_heads(8, d_model=512, h=8).message
    assert "longer" in check_quiz_long_context(4, short=2048, long=8192).message
    assert "masked weights" in check_quiz_mask(6, n=4).message


def test_expected_answers_follow_the_inputs():
    assert check_quiz_spread(4, d_k=16)
    assert check_quiz_long_context(4, short=1024, long=2048)
    assert check_quiz_mask(ref_causal_count(6), n=6)
    assert check_quiz_heads(1, d_model=64, h=4)


def test_scaling_question_says_what_training_showed():
    """Q1 and notebook 10 say the softmax's Jacobian shrinks, not that every gradient
    vanishes, and the right answer points to the notebook that trains both ways."""
    import nbformat

    fb = check_quiz_scaling("b")
    assert "Jacobian" in fb.message and "12-learning-attention.ipynb" in fb.message
    path = Path(__file__).resolve().parents[1] / "notebooks" / "10-recap.ipynb"
    text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
    assert "gradients all but vanish" not in text and "gradients vanish" not in text
    assert "Jacobian all but vanishes" in fb.message  # said once answered, not in the option
