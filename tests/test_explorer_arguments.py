"""Issue 16, edges 3 and 6: what the explorer factories accept, and the errors for the rest.

A factory never clamps or guesses: an argument outside its range, or not among its
options, is refused before anything is built, by a ``ValueError``/``TypeError`` from
attn_core that names the argument, the allowed values or range, and what was given (not
a traitlets "Invalid selection" or a numpy "negative dimensions" message). An argument
it accepts is used exactly as given (the control shows it, the maths uses it).
"""

import math

import numpy as np
import pytest

from attn_core import examples, explorers
from attn_core.attention import attention

from reference import assert_clear_error

# The explorers' frames: make test runs these, make check leaves them out (make test-explorers).
pytestmark = pytest.mark.explorer

Q3 = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]  # (3, 2)
K4 = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.5, 0.5]]  # (4, 2)
V3 = [[1.0], [2.0], [3.0]]  # (3, 1)

BAD = [
    # edge 3: the lab's weights are n x n, one token per row of Q and of K
    ("worked_example_lab", {"q": Q3, "k": K4, "v": V3 + [[4.0]]}, ValueError,
     r"q and k must have the same number of rows .*got 3 \(q\) and 4 \(k\)"),
    ("worked_example_lab", {"q": Q3, "k": [[1.0], [0.0], [1.0]], "v": V3}, ValueError,
     r"q and k must have the same width d_k, got 2 \(q\) and 1 \(k\)"),
    ("worked_example_lab", {"q": Q3, "k": Q3, "v": [[1.0], [2.0]]}, ValueError,
     r"v must have one row per key \(3\), got 2"),
    ("worked_example_lab", {"q": [1.0, 2.0]}, ValueError, r"q must be a matrix"),
    ("worked_example_lab", {"q": np.ones((2, 3, 2))}, ValueError,
     r"q must be a matrix \(n, d_k\), got shape \(2, 3, 2\)"),
    ("worked_example_lab", {"q": "abc"}, TypeError, r"q must be an array of numbers"),
    ("worked_example_lab", {"v": [[np.nan, 1.0]] * 4}, ValueError,
     r"v must hold finite values, got nan"),
    ("worked_example_lab", {"q": [[1e6, 0.0]] * 4, "k": [[1.0, 0.0]] * 4}, ValueError,
     r"q\[0, 0\] = 1e\+06 is outside the lab's range -10 to 10"),
    ("worked_example_lab", {"k": [[1.0, -10.5]] * 4}, ValueError,
     r"k\[0, 1\] = -10\.5 is outside the lab's range -10 to 10"),
    ("worked_example_lab", {"q": np.ones((9, 2)), "k": np.ones((9, 2)), "v": np.ones((9, 2))},
     ValueError, r"q has 9 rows; the lab shows at most 8"),
    # edge 6
    ("scaling_explorer", {"d_k": 100}, ValueError,
     r"d_k must be one of 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, got 100"),
    ("scaling_explorer", {"d_k": 64.0}, TypeError, r"d_k must be an int, got float"),
    ("scaling_explorer", {"n": -1}, ValueError, r"n must be from 2 to 128, got -1"),
    ("scaling_explorer", {"n": 1000}, ValueError, r"n must be from 2 to 128, got 1000"),
    ("scaling_explorer", {"seed": -3}, ValueError, r"seed must be an int >= 0, got -3"),
    ("scaling_explorer", {"seed": "x"}, TypeError, r"seed must be an int >= 0, got str"),
    ("softmax_explorer", {"temperature": 0}, ValueError,
     r"temperature must be from 0\.0316 to 31\.6 \(the slider's range\), got 0"),
    ("softmax_explorer", {"temperature": 100.0}, ValueError,
     r"temperature must be from 0\.0316 to 31\.6 \(the slider's range\), got 100"),
    ("softmax_explorer", {"temperature": math.nan}, ValueError, r"temperature must be from"),
    ("softmax_explorer", {"temperature": "hot"}, TypeError,
     r"temperature must be a number, got str"),
    ("softmax_explorer", {"row": [1.0, 25.0]}, ValueError,
     r"row\[1\] = 25 is outside the explorer's range -20 to 20"),
    ("softmax_explorer", {"row": []}, ValueError, r"row must hold 1 to 16 scores, got 0"),
    ("softmax_explorer", {"row": [[1.0, 2.0]]}, ValueError,
     r"row must be one row of scores, shape \(n,\), got shape \(1, 2\)"),
    ("mask_explorer", {"n": 0}, ValueError, r"n must be from 1 to 10, got 0"),
    ("mask_explorer", {"n": 20}, ValueError, r"n must be from 1 to 10, got 20"),
    ("mask_explorer", {"kind": "diagonal"}, ValueError,
     r"kind must be one of 'none', 'causal', 'padding', 'sliding window', 'custom', "
     r"got 'diagonal'"),
    ("mask_explorer", {"kind": None}, TypeError, r"kind must be a str, got NoneType"),
    ("heads_explorer", {"d_model": 10}, ValueError,
     r"d_model must be one of 8, 12, 16, 24, 32, 64, 512, got 10"),
    ("heads_explorer", {"d_model": 12, "h": 5}, ValueError,
     r"h must be one of 1, 2, 3, 4, 6, 12 \(the divisors of d_model = 12, up to 16\), got 5"),
    ("heads_explorer", {"h": 0}, ValueError, r"h must be one of 1, 2, 4, 8, 16 "),
    ("cost_explorer", {"n": 1000}, ValueError,
     r"n must be one of 16, 32, 64, .*, 131072, got 1000"),
    ("cost_explorer", {"dtype": "int8"}, ValueError,
     r"dtype must be one of 'float16', 'float32', 'float64', got 'int8'"),
    ("tiling_explorer", {"block_size": 7}, ValueError,
     r"block_size must be one of 1, 2, 3, 4, 5, 10, got 7"),
    ("tiling_explorer", {"causal": "yes"}, TypeError, r"causal must be True or False, got str"),
    ("tiling_explorer", {"seed": 1.5}, TypeError, r"seed must be an int >= 0, got float"),
]


@pytest.mark.parametrize(("factory", "kwargs", "exc", "pattern"), BAD,
                         ids=[f"{f}-{'-'.join(k)}-{i}" for i, (f, k, _, _) in enumerate(BAD)])
def test_a_factory_refuses_what_it_cannot_show_and_says_what_it_can(factory, kwargs, exc,
                                                                    pattern):
    assert_clear_error(lambda: getattr(explorers, factory)(**kwargs), exc, pattern)


def test_the_lab_uses_inputs_at_the_ends_of_its_range_exactly():
    q = [[10.0, -10.0], [0.25, 3.0]]
    k = [[-10.0, 10.0], [1.0, 0.5]]
    v = [[1.0, -2.0, 3.0], [0.5, 0.0, -1.0]]
    lab = explorers.worked_example_lab(q, k, v)
    shown = lab.shown()
    for name, m in (("Q", q), ("K", k), ("V", v)):
        np.testing.assert_array_equal(shown["inputs"][name], m)
    out, weights = attention(np.array(q), np.array(k), np.array(v))
    np.testing.assert_allclose(shown["weights"], weights, atol=5e-4 + 1e-12, rtol=0)
    np.testing.assert_allclose(shown["output"], out, atol=5e-4 + 1e-12, rtol=0)


def test_the_lab_accepts_d_v_different_from_d_k_and_integer_input():
    lab = explorers.worked_example_lab([[1, 0], [0, 1]], [[1, 1], [0, 1]], [[1], [2]])
    assert lab.shown()["output"].shape == (2, 1)


@pytest.mark.parametrize(("factory", "kwargs", "control", "value"), [
    ("scaling_explorer", {"d_k": 1}, "d_k", 1),
    ("scaling_explorer", {"d_k": np.int64(1024)}, "d_k", 1024),
    ("softmax_explorer", {"temperature": 10 ** -1.5}, "temperature", 10 ** -1.5),
    ("softmax_explorer", {"temperature": 10 ** 1.5}, "temperature", 10 ** 1.5),
    ("softmax_explorer", {"row": [-20.0, 20.0]}, "score 1", 20.0),
    ("mask_explorer", {"n": 1}, "n", 1),
    ("mask_explorer", {"kind": "custom"}, "kind", "custom"),
    ("heads_explorer", {"d_model": 12, "h": 12}, "h", 12),
    ("cost_explorer", {"n": 16, "dtype": "float64"}, "n", 16),
    ("cost_explorer", {"dtype": np.float16}, "dtype", "float16"),
    ("tiling_explorer", {"block_size": 10, "causal": True}, "block", 10),
    ("tiling_explorer", {"causal": np.True_}, "causal", True),
])
def test_an_accepted_argument_is_shown_exactly_as_given(factory, kwargs, control, value):
    ex = getattr(explorers, factory)(**kwargs)
    assert ex.errors == []
    assert ex.controls[control].value == value


def test_the_softmax_explorer_uses_the_temperature_it_was_given():
    row = examples.SMALL_SCORES
    t = 10 ** -1.5
    ex = explorers.softmax_explorer(temperature=t)
    z = [x / t for x in row]
    top = max(z)
    expected = [math.exp(v - top) for v in z]
    total = math.fsum(expected)
    np.testing.assert_allclose(ex.shown()["bars"], [e / total for e in expected],
                               rtol=1e-12, atol=1e-15)
