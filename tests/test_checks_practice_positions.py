"""Notebook 08b's checks: right rotations pass, each usual mistake gets its own hint.

The implementations here are written independently of the check's own variants: loops over
pairs, the complex-number form, the halves convention as GPT-NeoX writes it.
"""

import math

import numpy as np
import pytest

from attn_core.attention import attention
from attn_core.checks._base import NO_ANSWER, NOT_YET, RIGHT
from attn_core.checks.practice_positions import (
    check_rope_wavelength,
    check_rotary_attention,
    check_which_depend_on_offset,
)


def softmax_rows(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attend(q, k, v):
    return softmax_rows(q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])) @ v


def rotate_loop(x, positions, base, theta=None, sign=1.0):
    """Pair by pair, row by row (the learner's likely first version)."""
    x = np.array(x, dtype=float)
    out = x.copy()
    d = x.shape[-1]
    for idx in np.ndindex(*x.shape[:-2]):
        for i, p in enumerate(positions):
            for c in range(d // 2):
                t = theta(c, d, base) if theta else base ** (-2 * c / d)
                a, b = x[idx + (i, 2 * c)], x[idx + (i, 2 * c + 1)]
                ang = sign * p * t
                out[idx + (i, 2 * c)] = a * math.cos(ang) - b * math.sin(ang)
                out[idx + (i, 2 * c + 1)] = a * math.sin(ang) + b * math.cos(ang)
    return out


def rotate_complex(x, positions, base):
    d = x.shape[-1]
    z = x[..., 0::2] + 1j * x[..., 1::2]
    z = z * np.exp(1j * np.outer(positions, base ** (-np.arange(0, d, 2) / d)))
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out


def rotate_half(x, positions, base):
    """GPT-NeoX / Hugging Face: cat(-x2, x1), frequencies repeated over the two halves."""
    d = x.shape[-1]
    inv = base ** (-np.arange(0, d, 2) / d)
    ang = np.outer(positions, np.concatenate([inv, inv]))
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * np.cos(ang) + np.concatenate([-x2, x1], axis=-1) * np.sin(ang)


RIGHT_ONES = [
    lambda q, k, v, positions, base=10000.0: attend(rotate_loop(q, positions, base),
                                                    rotate_loop(k, positions, base), v),
    lambda q, k, v, positions, base=10000.0: attention(rotate_complex(q, positions, base),
                                                       rotate_complex(k, positions, base), v)[0],
]

WRONG = {
    "the two halves of each vector": lambda q, k, v, p, base=10000.0: attend(
        rotate_half(q, p, base), rotate_half(k, p, base), v),
    "the sine's sign is flipped": lambda q, k, v, p, base=10000.0: attend(
        rotate_loop(q, p, base, sign=-1.0), rotate_loop(k, p, base, sign=-1.0), v),
    "off by one pair": lambda q, k, v, p, base=10000.0: attend(
        rotate_loop(q, p, base, theta=lambda c, d, b: b ** (-2 * (c + 1) / d)),
        rotate_loop(k, p, base, theta=lambda c, d, b: b ** (-2 * (c + 1) / d)), v),
    "c counts pairs, not features": lambda q, k, v, p, base=10000.0: attend(
        rotate_loop(q, p, base, theta=lambda c, d, b: b ** (-c / d)),
        rotate_loop(k, p, base, theta=lambda c, d, b: b ** (-c / d)), v),
    "-(2c + 1)/d": lambda q, k, v, p, base=10000.0: attend(
        rotate_loop(q, p, base, theta=lambda c, d, b: b ** (-(2 * c + 1) / d)),
        rotate_loop(k, p, base, theta=lambda c, d, b: b ** (-(2 * c + 1) / d)), v),
    "the values are rotated too": lambda q, k, v, p, base=10000.0: attend(
        rotate_loop(q, p, base), rotate_loop(k, p, base), rotate_loop(v, p, base)),
    "only the queries are rotated": lambda q, k, v, p, base=10000.0: attend(
        rotate_loop(q, p, base), k, v),
    "only the keys are rotated": lambda q, k, v, p, base=10000.0: attend(
        q, rotate_loop(k, p, base), v),
    "taken as 0, 1, 2": lambda q, k, v, p, base=10000.0: attend(
        rotate_loop(q, range(q.shape[-2]), base), rotate_loop(k, range(q.shape[-2]), base), v),
    "the same rate": lambda q, k, v, p, base=10000.0: attend(
        rotate_loop(q, p, base, theta=lambda c, d, b: 1.0),
        rotate_loop(k, p, base, theta=lambda c, d, b: 1.0), v),
}


@pytest.mark.parametrize("index", range(len(RIGHT_ONES)))
def test_right_rotations_pass(index):
    feedback = check_rotary_attention(RIGHT_ONES[index])
    assert feedback.correct and feedback.message.startswith(RIGHT), feedback.message


@pytest.mark.parametrize("hint", WRONG)
def test_each_mistake_gets_its_own_hint(hint):
    feedback = check_rotary_attention(WRONG[hint])
    assert not feedback.correct and feedback.message.startswith(NOT_YET)
    assert hint in feedback.message, feedback.message


def test_the_stub_is_no_answer_yet():
    def rotary_attention(q, k, v, positions, base=10000.0):
        raise NotImplementedError

    assert check_rotary_attention(rotary_attention).message.startswith(NO_ANSWER)
    assert check_rotary_attention(None).message.startswith(NO_ANSWER)


def test_wavelength_check():
    d, base, pair = 64, 10000.0, 1
    theta = base ** (-2 * pair / d)
    assert check_rope_wavelength(round(2 * math.pi / theta, 1), pair, d, base)
    one_radian = check_rope_wavelength(round(1 / theta, 1), pair, d, base)
    assert not one_radian and "one radian" in one_radian.message
    next_pair = check_rope_wavelength(round(2 * math.pi / base ** (-4 / d), 1), pair, d, base)
    assert not next_pair and "next pair" in next_pair.message
    assert check_rope_wavelength(None, pair, d, base).message.startswith(NO_ANSWER)
    assert not check_rope_wavelength("eight", pair, d, base)


def test_which_depend_on_offset_check():
    assert check_which_depend_on_offset({"rope", "alibi"})
    assert check_which_depend_on_offset(["RoPE", "ALiBi"])
    too_many = check_which_depend_on_offset({"rope", "alibi", "sinusoidal"})
    assert not too_many and "sinusoidal positions do not fit" in too_many.message.lower()
    learned = check_which_depend_on_offset({"rope", "alibi", "learned"})
    assert not learned and "learned positions do not fit" in learned.message.lower()
    only_rope = check_which_depend_on_offset({"rope"})
    assert not only_rope and "ALiBi is missing" in only_rope.message
    assert "RoPE is missing" in check_which_depend_on_offset({"alibi"}).message
    assert not check_which_depend_on_offset({"rotary"})
    assert not check_which_depend_on_offset(3)
    assert check_which_depend_on_offset(None).message.startswith(NO_ANSWER)
