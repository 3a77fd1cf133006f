"""softmax and softmax_jacobian against the float64 reference, and their properties."""


import numpy as np
import pytest
import reference as ref
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attn_core import softmax, softmax_jacobian

SEED = 20240601


@st.composite
def score_arrays(draw, min_dims=1, max_dims=3, allow_neg_inf=True, max_value=50.0):
    """Arrays of scores of rank 1 to 3 in float32 or float64, optionally with -inf entries."""
    dtype = draw(st.sampled_from(ref.DTYPES))
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=6))
    x = draw(hnp.arrays(dtype, shape, elements=st.floats(-max_value, max_value, width=32)))
    if allow_neg_inf:
        masked = draw(hnp.arrays(bool, shape))
        x = np.where(masked, -np.inf, x).astype(dtype)
    return x


# --- values --------------------------------------------------------------------------------


@ref.PROPERTY
@given(score_arrays())
def test_softmax_equals_reference(x):
    p = softmax(x)
    np.testing.assert_allclose(p, ref.softmax(x), **ref.tol(x.dtype))


@ref.PROPERTY
@given(score_arrays())
def test_rows_sum_to_one_or_are_all_zero(x):
    p = softmax(x)
    sums = p.astype(np.float64).sum(axis=-1)
    all_masked = np.isneginf(x).all(axis=-1)
    atol = 1e-6 if x.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(sums[~all_masked], 1.0, rtol=0, atol=atol)
    assert (p[all_masked] == 0).all()
    assert ((p >= 0) & (p <= 1)).all()


@ref.PROPERTY
@given(score_arrays())
def test_neg_inf_entries_get_exactly_zero(x):
    p = softmax(x)
    assert (p[np.isneginf(x)] == 0.0).all()


@ref.PROPERTY
@given(score_arrays(allow_neg_inf=False), st.data())
def test_invariant_to_adding_a_constant_per_row(x, data):
    c = data.draw(hnp.arrays(np.float64, x.shape[:-1] + (1,), elements=st.floats(-100, 100)))
    shifted = (x.astype(np.float64) + c).astype(x.dtype)
    # compare against the shifted input's own rounding: in float32 the shift itself rounds
    np.testing.assert_allclose(softmax(shifted), softmax(x),
                               **({"rtol": 1e-4, "atol": 2e-5} if x.dtype == np.float32
                                  else {"rtol": 1e-10, "atol": 1e-12}))


@ref.PROPERTY
@given(score_arrays(), st.data())
def test_other_axis_equals_moving_that_axis_last(x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    expected = np.moveaxis(softmax(np.moveaxis(x, axis, -1)), -1, axis)
    np.testing.assert_allclose(softmax(x, axis=axis), expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", ref.DTYPES)
@pytest.mark.parametrize("big", [1e4, -1e4, 3e4])
def test_stable_for_large_inputs(dtype, big):
    x = np.array([[big, big], [big, big - 1.0], [big, 0.0]], dtype=dtype)
    # any overflow or invalid operation fails the test (underflow to 0 is expected)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        p = softmax(x)
    assert np.isfinite(p).all()
    np.testing.assert_allclose(p[0], [0.5, 0.5])
    np.testing.assert_allclose(p[1], ref.softmax_row([0.0, -1.0]), rtol=1e-6)
    if big > 0:
        np.testing.assert_array_equal(p[2], [1.0, 0.0])


def test_all_neg_inf_row_gives_zeros_not_nan():
    x = np.array([[-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 1.0]])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        p = softmax(x)
    np.testing.assert_array_equal(p[0], [0.0, 0.0, 0.0])
    assert p[1, 1] == 0.0
    np.testing.assert_allclose(p[1], ref.softmax_row([0.0, -np.inf, 1.0]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_preserved(dtype):
    x = np.random.default_rng(SEED).standard_normal((2, 3, 4)).astype(dtype)
    assert softmax(x).dtype == dtype
    assert softmax_jacobian(softmax(x)).dtype == dtype


@pytest.mark.parametrize("x", [[1, 2, 3], [True, False], np.arange(4, dtype=np.int32)])
def test_integer_and_bool_input_is_computed_in_float64(x):
    p = softmax(x)
    assert p.dtype == np.float64
    np.testing.assert_allclose(p, ref.softmax(np.asarray(x, dtype=float)), rtol=1e-12)


def test_input_is_not_modified():
    x = np.array([[1.0, -np.inf, 3.0]])
    before = x.copy()
    softmax(x)
    np.testing.assert_array_equal(x, before)


# --- the Jacobian ------------------------------------------------------------------------


def finite_difference_jacobian(x, eps=1e-6):
    """d softmax(x)_i / d x_j by central differences, for a 1-D float64 x."""
    n = x.size
    jac = np.empty((n, n))
    for j in range(n):
        step = np.zeros(n)
        step[j] = eps
        jac[:, j] = (ref.softmax(x + step) - ref.softmax(x - step)) / (2 * eps)
    return jac


@ref.PROPERTY
@given(hnp.arrays(np.float64, st.integers(1, 7), elements=st.floats(-5, 5)))
def test_jacobian_equals_central_finite_differences(x):
    jac = softmax_jacobian(softmax(x))
    np.testing.assert_allclose(jac, finite_difference_jacobian(x), rtol=0, atol=1e-8)


@ref.PROPERTY
@given(score_arrays(allow_neg_inf=False, max_value=10.0))
def test_jacobian_rows_sum_to_zero_and_it_is_symmetric(x):
    p = softmax(x)
    jac = softmax_jacobian(p)
    assert jac.shape == p.shape + p.shape[-1:]
    atol = 1e-6 if x.dtype == np.float32 else 1e-14
    np.testing.assert_allclose(jac.sum(axis=-1), 0.0, rtol=0, atol=atol)
    np.testing.assert_array_equal(jac, np.swapaxes(jac, -1, -2))


def test_jacobian_against_its_formula_by_loops():
    p = softmax(np.random.default_rng(SEED).standard_normal(5))
    jac = softmax_jacobian(p)
    for i in range(5):
        for j in range(5):
            assert jac[i, j] == pytest.approx(p[i] * ((i == j) - p[j]), abs=1e-15)


def test_jacobian_vanishes_when_softmax_saturates():
    p = softmax(np.array([0.0, 100.0, 0.0]))
    assert np.abs(softmax_jacobian(p)).max() < 1e-40


# --- bad input ---------------------------------------------------------------------------

BAD_INPUT = [
    pytest.param(lambda: softmax([1.0, np.nan]), ValueError,
                 r"^x must hold finite values or -inf, got nan at index \(1,\)", id="nan"),
    pytest.param(lambda: softmax([[0.0], [np.inf]]), ValueError,
                 r"^x must hold finite values or -inf, got inf at index \(1, 0\)", id="posinf"),
    pytest.param(lambda: softmax(2.0), ValueError,
                 r"^x must be an array of rank >= 1 .*got shape \(\) \(rank 0\)", id="rank-0"),
    pytest.param(lambda: softmax(["a", "b"]), TypeError,
                 r"^x must hold real numbers, got dtype <U1", id="strings"),
    pytest.param(lambda: softmax([[1.0], [1.0, 2.0]]), TypeError,
                 r"^x must be a rectangular array of numbers", id="ragged"),
    pytest.param(lambda: softmax([1.0, 2.0], axis=1), ValueError,
                 r"^axis must be in \[-1, 0\] for x of rank 1, got 1", id="axis-out-of-range"),
    pytest.param(lambda: softmax([1.0, 2.0], axis=0.5), TypeError,
                 r"^axis must be an integer, got 0\.5", id="axis-not-int"),
    pytest.param(lambda: softmax_jacobian([0.5, np.nan]), ValueError,
                 r"^p must hold finite values, got nan at index \(1,\)", id="jacobian-nan"),
    pytest.param(lambda: softmax_jacobian([0.5, -np.inf]), ValueError,
                 r"^p must hold finite values, got -inf at index \(1,\)", id="jacobian-neginf"),
    pytest.param(lambda: softmax_jacobian(0.5), ValueError,
                 r"^p must be an array of rank >= 1 .*got shape \(\) \(rank 0\)",
                 id="jacobian-rank-0"),
    # An empty axis has nothing to normalise: it should be refused by our checks, not by
    # numpy's "zero-size array to reduction operation maximum" deep inside.
    pytest.param(lambda: softmax(np.zeros((2, 0))), ValueError,
                 r"^x .*(at least one|non-empty|empty).*got shape \(2, 0\)", id="empty-axis"),
]


@pytest.mark.parametrize(("call", "exc_type", "pattern"), BAD_INPUT)
def test_bad_input_gets_a_clear_error(call, exc_type, pattern):
    ref.assert_clear_error(call, exc_type, pattern)
