"""Positions: RoPE against the complex-number form, ALiBi against the paper's rule and a loop,
sinusoidal encodings against their formula, and decoding with rotated keys in the KV cache."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_core import causal_mask
from attn_core.decoding import append_kv, decode_step, empty_cache
from attn_core.positions import (
    alibi_bias,
    alibi_slopes,
    frequencies,
    rope,
    sinusoidal_positions,
)
from attn_core.softmax import softmax

import reference as ref
from tolerances import U64, rounding_tolerance

# --- independent references -------------------------------------------------------------------


def rope_complex(x, positions, base=10000.0):
    """RoPE as Su et al. write it: pair (x_2c, x_2c+1) is the complex number z_c, times
    exp(i m theta_c), theta_c = base^(-2c/d); float64, written without attn_core."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    theta = np.array([base ** (-2.0 * c / d) for c in range(d // 2)])
    z = x[..., 0::2] + 1j * x[..., 1::2]
    z = z * np.exp(1j * np.asarray(positions, dtype=np.float64)[..., None] * theta)
    out = np.empty(np.broadcast_shapes(x.shape, z.shape[:-1] + (d,)))
    out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out


def paper_slopes(n):
    """The slopes as the ALiBi authors' code computes them (Press et al. 2022, get_slopes)."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + paper_slopes(2 * closest)[0::2][: n - closest]


def rope_bound(dtype, d, scale):
    """Tolerance of a float32 rotated score: cos and sin rounded once each, the pair's product
    and sum twice more, then a dot product of length d (tests/tolerances.py's error model)."""
    return rounding_tolerance(np.zeros(1), inner=d, depth=4, dtype=dtype, scale=scale)


@st.composite
def rotations(draw, max_d=8, max_pos=200):
    batch = draw(ref.batch_shapes())
    n = draw(st.integers(1, 5))
    d = 2 * draw(st.integers(1, max_d // 2))
    dtype = draw(st.sampled_from(ref.DTYPES))
    g = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    spread = draw(st.sampled_from([0.1, 1.0, 3.0]))
    x = (spread * g.standard_normal((*batch, n, d))).astype(dtype)
    positions = g.integers(0, max_pos, size=n)
    base = draw(st.sampled_from([10000.0, 500.0, 10.0]))
    return x, positions, base


def row_dot(a, b):
    return np.einsum("...d,...d->...", np.asarray(a, np.float64), np.asarray(b, np.float64))


# --- RoPE -------------------------------------------------------------------------------------


@ref.PROPERTY
@given(rotations(), st.integers(0, 2**32 - 1))
def test_rotated_score_depends_only_on_the_offset(problem, seed):
    q, _, base = problem
    g = np.random.default_rng(seed)
    k = g.standard_normal(q.shape).astype(q.dtype)
    d = q.shape[-1]
    m, n, shift = (int(v) for v in g.integers(0, 500, size=3))
    here = row_dot(rope(q, [m] * q.shape[-2], base), rope(k, [n] * q.shape[-2], base))
    there = row_dot(rope(q, [m + shift] * q.shape[-2], base),
                    rope(k, [n + shift] * q.shape[-2], base))
    # the same offset with the query at 0: q . R(n - m) k
    exact = row_dot(rope_complex(q, [0], base), rope_complex(k, [n - m], base))
    size = float(np.max(np.linalg.norm(q.astype(np.float64), axis=-1)
                        * np.linalg.norm(k.astype(np.float64), axis=-1)))
    if q.dtype == np.float64:
        tol = {"rtol": 0.0, "atol": 1e-12 * max(size, 1.0)}
    else:
        tol = rope_bound(np.float32, d, size)
    np.testing.assert_allclose(here, there, **tol)
    np.testing.assert_allclose(here, exact, **tol)


@ref.PROPERTY
@given(rotations())
def test_rope_matches_the_complex_number_form(problem):
    x, positions, base = problem
    got = rope(x, positions, base)
    assert got.dtype == x.dtype and got.shape == x.shape
    want = rope_complex(x, positions, base)
    scale = float(np.sqrt(np.mean(want ** 2)))
    if x.dtype == np.float64:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13 * scale)
    else:
        np.testing.assert_allclose(got, want, **rope_bound(np.float32, 1, scale))


@ref.PROPERTY
@given(rotations())
def test_rope_preserves_norms_and_position_zero_is_the_identity(problem):
    x, positions, base = problem
    norms = np.linalg.norm(x.astype(np.float64), axis=-1)
    got = np.linalg.norm(rope(x, positions, base).astype(np.float64), axis=-1)
    rtol = 1e-13 if x.dtype == np.float64 else rope_bound(np.float32, x.shape[-1], 1.0)["rtol"]
    np.testing.assert_allclose(got, norms, rtol=rtol, atol=0.0)
    np.testing.assert_array_equal(rope(x, np.zeros(x.shape[-2], dtype=int), base), x)


@ref.PROPERTY
@given(rotations())
def test_halves_pairing_is_interleaved_after_a_fixed_permutation(problem):
    x, positions, base = problem
    d = x.shape[-1]
    # interleaved pair c is features (2c, 2c+1); halves pair c is (c, c + d/2)
    to_halves = np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])
    np.testing.assert_array_equal(rope(x[..., to_halves], positions, base, pairing="halves"),
                                  rope(x, positions, base)[..., to_halves])


def test_rope_by_hand_on_one_pair():
    # theta_0 = 1: position 2 turns (1, 0) by 2 radians, (0, 1) to (-sin 2, cos 2)
    got = rope(np.eye(2), [2, 2])
    np.testing.assert_allclose(got, [[math.cos(2), math.sin(2)], [-math.sin(2), math.cos(2)]],
                               rtol=0, atol=1e-15)
    np.testing.assert_allclose(frequencies(6, base=64.0), [1.0, 0.25, 1 / 16], rtol=1e-15)


def test_rope_broadcasts_positions_over_batch_axes():
    g = np.random.default_rng(0)
    x = g.standard_normal((2, 3, 4, 6))
    pos = np.array([[0, 1, 2, 3], [5, 6, 7, 8], [1, 1, 1, 1]])  # (3, 4) against (2, 3, 4)
    got = rope(x, pos)
    for b in range(2):
        for h in range(3):
            np.testing.assert_allclose(got[b, h], rope_complex(x[b, h], pos[h]), atol=1e-13)


@ref.PROPERTY
@given(rotations(max_d=6, max_pos=1), st.integers(0, 2**32 - 1))
def test_decoding_with_rotated_keys_in_the_cache_is_causal_attention_with_rope(problem, seed):
    x, _, base = problem
    g = np.random.default_rng(seed)
    q = x
    k = g.standard_normal(x.shape).astype(x.dtype)
    v = g.standard_normal((*x.shape[:-1], 3)).astype(x.dtype)
    n = q.shape[-2]
    pos = np.arange(n)
    want_out, want_w, _ = ref.attention(rope_complex(q, pos, base), rope_complex(k, pos, base),
                                        v.astype(np.float64), mask=ref.causal_mask(n))
    cache = empty_cache(q.shape[-1], 3, batch=q.shape[:-2], dtype=q.dtype)
    for t in range(n):  # each key rotated once, when it arrives, and cached rotated
        cache = append_kv(cache, rope(k[..., t:t + 1, :], [t], base), v[..., t:t + 1, :])
        out, w = decode_step(rope(q[..., t:t + 1, :], [t], base), cache)
        np.testing.assert_allclose(w[..., 0, :], want_w[..., t, : t + 1], **ref.tol(q.dtype))
        np.testing.assert_allclose(out[..., 0, :], want_out[..., t, :], **ref.tol(q.dtype))
    np.testing.assert_array_equal(cache.keys, rope(k, pos, base))


# --- sinusoidal -------------------------------------------------------------------------------


def test_sinusoidal_positions_against_the_formula():
    pe = sinusoidal_positions(7, 6)
    for i in range(7):
        for c in range(3):
            angle = i / 10000 ** (2 * c / 6)
            assert pe[i, 2 * c] == pytest.approx(np.sin(angle))
            assert pe[i, 2 * c + 1] == pytest.approx(np.cos(angle))
    assert len({tuple(row) for row in pe.round(6)}) == 7  # every position is distinct


def test_sinusoidal_dot_products_depend_only_on_the_offset():
    pe = sinusoidal_positions(40, 8)
    theta = [10000 ** (-2 * c / 8) for c in range(4)]
    for m in range(0, 40, 7):
        for n in range(0, 40, 5):
            want = sum(math.cos((m - n) * t) for t in theta)
            assert pe[m] @ pe[n] == pytest.approx(want, abs=1e-12)


# --- ALiBi ------------------------------------------------------------------------------------


def test_alibi_slopes_for_8_heads_are_one_half_to_one_over_256():
    assert [Fraction(s) for s in alibi_slopes(8)] == [Fraction(1, 2 ** i) for i in range(1, 9)]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 8, 12, 16, 20, 24, 31, 64, 100])
def test_alibi_slopes_follow_the_papers_code(n):
    # their start ** i carries start's rounding i times: i ulps, i <= 2n
    np.testing.assert_allclose(alibi_slopes(n), paper_slopes(n), rtol=4 * n * U64, atol=0.0)


@given(st.integers(1, 9), st.integers(1, 7), st.integers(0, 5))
@ref.FAST
def test_alibi_bias_against_a_loop(h, n_q, extra):
    n_k = n_q + extra
    slopes = paper_slopes(h)
    bias = alibi_bias(h, n_q, n_k)
    assert bias.shape == (h, n_q, n_k)
    for head in range(h):
        for i in range(n_q):
            p = n_k - n_q + i  # the query's position
            for j in range(n_k):
                want = -slopes[head] * (p - j) if j <= p else 0.0
                assert bias[head, i, j] == pytest.approx(want, rel=1e-14, abs=0.0)


@ref.FAST
@given(st.integers(1, 8), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_alibi_weights_equal_the_papers_row_constant_form(h, n, seed):
    # the paper's code adds m * j (the same per row up to a constant): softmax cannot tell
    s = np.random.default_rng(seed).standard_normal((h, n, n))
    allowed = causal_mask(n)
    ours = softmax(np.where(allowed, s + alibi_bias(h, n), -np.inf))
    slopes = np.array(paper_slopes(h))[:, None, None]
    theirs = softmax(np.where(allowed, s + slopes * np.arange(n), -np.inf))
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)


# --- bad arguments ----------------------------------------------------------------------------


@pytest.mark.parametrize(("call", "exc", "pattern"), [
    (lambda: rope(np.ones((3, 5)), np.arange(3)), ValueError, r"x must have an even last"),
    (lambda: rope(np.ones(4), [0]), ValueError, r"x must be a matrix"),
    (lambda: rope(np.ones((3, 4)), np.arange(4)), ValueError, r"positions of shape \(4,\)"),
    (lambda: rope(np.ones((3, 4)), "abc"), TypeError, r"positions must be an array"),
    (lambda: rope(np.ones((3, 4)), [True, False, True]), TypeError, r"positions must hold"),
    (lambda: rope(np.ones((3, 4)), [0, np.nan, 1]), ValueError, r"positions must be finite"),
    (lambda: rope(np.ones((3, 4)), np.arange(3), base=-1.0), ValueError, r"base must be"),
    (lambda: rope(np.ones((3, 4)), np.arange(3), pairing="pairs"), ValueError,
     r"pairing must be one of 'interleaved', 'halves'"),
    (lambda: rope([[1.0, np.inf]], [0]), ValueError, r"x"),
    (lambda: sinusoidal_positions(4, 5), ValueError, r"d must be even"),
    (lambda: sinusoidal_positions(0, 4), ValueError, r"n must be an integer >= 1"),
    (lambda: frequencies(4, base=0), ValueError, r"base must be a positive"),
    (lambda: alibi_slopes(0), ValueError, r"n_heads must be an integer >= 1"),
    (lambda: alibi_slopes(2.0), TypeError, r"n_heads must be an integer"),
    (lambda: alibi_bias(4, 5, 3), ValueError, r"n_k must be at least n_q"),
])
def test_bad_arguments_get_a_clear_error(call, exc, pattern):
    ref.assert_clear_error(call, exc, pattern)
