"""Issue 16, edge 9: the encoder's building blocks at the ends of the float range, and
their ``eps``.

Every expected value is computed here from the mathematics, independently: a unit
vector's direction does not depend on its length, and layer norm does not depend on the
scale of its row (when ``eps`` is negligible beside the variance), so a row of 1e20s or
1e30s must give what the same row scaled to about 1 gives, computed in float64 with
Python floats.
"""

import math

import numpy as np
import pytest

from attn_core.model.encoder import _tiny_weights, encoder_layer
from attn_core.model.layers import l2_normalize, layer_norm

from reference import assert_clear_error


def _unit(values):
    """values / |values| with Python floats (math.fsum), for values near 1."""
    norm = math.sqrt(math.fsum(v * v for v in values))
    return [v / norm for v in values]


def _standardise(values):
    """(values - mean) / std with Python floats, for values near 1 (eps negligible)."""
    mean = math.fsum(values) / len(values)
    var = math.fsum((v - mean) ** 2 for v in values) / len(values)
    return [(v - mean) / math.sqrt(var) for v in values]


@pytest.mark.parametrize(("dtype", "scale"), [
    (np.float32, 1e20), (np.float32, 1e30), (np.float32, 1e-20), (np.float32, 1e-30),
    (np.float64, 1e200), (np.float64, 1e-200), (np.float64, 1e-310),  # 1e-310: subnormal
])
def test_l2_normalize_keeps_the_direction_of_very_long_and_very_short_vectors(dtype, scale):
    base = [3.0, -4.0, 1.0, 0.5]
    x = np.array([[v * scale for v in base], base], dtype=dtype)  # (2, 4)
    with np.errstate(all="raise"):  # no overflow or underflow warning on the way
        y = l2_normalize(x)
    assert y.dtype == dtype
    tol = 1e-6 if dtype == np.float32 else 1e-12
    for row in y:
        np.testing.assert_allclose(row, _unit(base), rtol=tol, atol=tol)


def test_l2_normalize_still_rejects_an_all_zero_vector():
    assert_clear_error(lambda: l2_normalize(np.zeros((2, 3), dtype=np.float32)), ValueError,
                       r"all-zero vector")


@pytest.mark.parametrize(("dtype", "scale"), [
    (np.float32, 1e30), (np.float32, 1e19), (np.float64, 1e200), (np.float64, 1e300),
])
def test_layer_norm_of_huge_rows_is_the_layer_norm_of_the_row_scaled_down(dtype, scale):
    base = [1.0, 2.0, 3.0, 6.0]
    x = np.array([v * scale for v in base], dtype=dtype)
    gamma, beta = np.array([1.0, 2.0, 0.5, 1.0]), np.array([0.0, 1.0, -1.0, 0.0])
    with np.errstate(all="raise"):
        y = layer_norm(x, gamma, beta)
    assert y.dtype == dtype
    expected = [g * z + b for z, g, b in zip(_standardise(base), gamma, beta)]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y, expected, rtol=tol, atol=tol)


def test_layer_norm_of_a_huge_constant_row_is_beta():
    x = np.full((2, 3), 3e38, dtype=np.float32)
    beta = np.array([0.5, -1.0, 2.0])
    with np.errstate(all="raise"):
        y = layer_norm(x, np.ones(3), beta)
    np.testing.assert_array_equal(y, np.broadcast_to(beta.astype(np.float32), (2, 3)))


BAD_EPS = [
    (float("nan"), ValueError, r"eps must be a finite number > 0, got nan"),
    (0.0, ValueError, r"eps must be a finite number > 0, got 0\.0"),
    (-1e-12, ValueError, r"eps must be a finite number > 0, got -1e-12"),
    (float("inf"), ValueError, r"eps must be a finite number > 0, got inf"),
    ("1e-12", TypeError, r"eps must be a number, got str"),
    (True, TypeError, r"eps must be a number, got bool"),
    (np.array([1e-12, 1e-12]), TypeError, r"eps must be a number, got ndarray"),
]


@pytest.mark.parametrize(("eps", "exc", "pattern"), BAD_EPS)
def test_layer_norm_checks_eps(eps, exc, pattern):
    assert_clear_error(lambda: layer_norm(np.ones((2, 3)), np.ones(3), np.zeros(3), eps=eps),
                       exc, pattern)


@pytest.mark.parametrize(("eps", "exc", "pattern"), BAD_EPS)
def test_encoder_layer_checks_eps(eps, exc, pattern):
    w = _tiny_weights()
    x = np.random.default_rng(0).standard_normal((3, w.d_model))
    assert_clear_error(lambda: encoder_layer(x, w.layers[0], w.heads, eps=eps), exc, pattern)


def test_a_good_eps_of_any_real_type_is_accepted():
    x = np.array([[0.0, 1e-3]])
    for eps in (1e-6, np.float32(1e-6), 1):
        y = layer_norm(x, [1, 1], [0, 0], eps=eps)
        s = 5e-4 / math.sqrt(2.5e-7 + float(eps))
        np.testing.assert_allclose(y, [[-s, s]], rtol=1e-6)
