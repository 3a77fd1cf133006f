"""Arguments of training, the toy tasks, decoding, the probes and the training explorer.

Each bad argument is refused before any work by attn_core's own check, with a message that
names the argument, what was expected and what was given (``reference.assert_clear_error``:
under ``np.errstate(all="raise")`` and raised from attn_core, not from numpy).
"""

import math

import numpy as np
import pytest

from attn_core import training
from attn_core.decoding import decode_sequence
from attn_core.model import probes
from attn_core.model.encoder import _tiny_weights, encoder_forward
from attn_core.tasks import lookup_batch, make_batch, n_classes, previous_token_batch
from attn_core.training import init_gradient_norms, scaling_runs, train

import reference as ref

RNG = np.random.default_rng
A3 = np.full((2, 3, 3), 1 / 3)  # (heads, n, n) attention weights
ONES = np.ones((2, 2))


def _hidden():
    w = _tiny_weights(layers=2)
    return w, encoder_forward(w, [1, 2, 3]).hidden_states


TRAIN_BAD = [
    ({"lr": -0.01}, ValueError, r"^lr must be a positive finite number, got -0\.01"),
    ({"lr": 0}, ValueError, r"^lr must be a positive finite number, got 0"),
    ({"lr": math.nan}, ValueError, r"^lr must be a positive finite number, got nan"),
    ({"lr": math.inf}, ValueError, r"^lr must be a positive finite number, got inf"),
    ({"lr": "0.01"}, TypeError, r"^lr must be a positive real number, got '0\.01'"),
    ({"lr": True}, TypeError, r"^lr must be a positive real number, got True"),
    ({"snapshots": 0}, ValueError, r"^snapshots must be an integer >= 1, got 0"),
    ({"snapshots": 2.5}, TypeError, r"^snapshots must be an integer >= 1, got 2\.5"),
    ({"steps": 0}, ValueError, r"^steps must be an integer >= 1, got 0"),
    ({"steps": 10.0}, TypeError, r"^steps must be an integer >= 1, got 10\.0"),
    ({"batch": -4}, ValueError, r"^batch must be an integer >= 1, got -4"),
    ({"batch": "32"}, TypeError, r"^batch must be an integer >= 1, got '32'"),
    ({"d_k": 0}, ValueError, r"^d_k must be an integer >= 1, got 0"),
    ({"seeds": ()}, ValueError, r"^seeds must hold at least one integer >= 0, got none"),
    ({"seeds": (-1,)}, ValueError, r"^each entry of seeds must be an integer >= 0, got -1"),
    ({"seeds": (0.5,)}, TypeError, r"^each entry of seeds must be an integer >= 0, got 0\.5"),
    ({"seeds": 3}, TypeError, r"^seeds must be a list or tuple of integers >= 0, got int"),
    ({"seeds": "01"}, TypeError, r"^seeds must be a list or tuple of integers >= 0, got str"),
    ({"scaled": "yes"}, TypeError, r"^scaled must be True or False, got str"),
    ({"scaled": 1}, TypeError, r"^scaled must be True or False, got int"),
    ({"task": "sorting"}, ValueError, r"^task must be one of 'lookup', 'previous', got 'sorting'"),
    ({"task": 1}, TypeError, r"^task must be a str, got int"),
    ({"optimiser": "rmsprop"}, ValueError, r"^optimiser must be one of 'adam', 'sgd', got"),
    ({"optimiser": None}, TypeError, r"^optimiser must be a str, got NoneType"),
    ({"positions": "rotary"}, ValueError,
     r"^positions must be one of None, 'learned', 'sinusoidal', got 'rotary'"),
]


@pytest.mark.parametrize(("kwargs", "exc", "pattern"), TRAIN_BAD)
def test_train_refuses_bad_arguments(kwargs, exc, pattern, monkeypatch):
    monkeypatch.setattr(training, "init_params",
                        lambda *a, **k: pytest.fail("trained before checking its arguments"))
    ref.assert_clear_error(lambda: train(**kwargs), exc, pattern)


SCALING_BAD = [
    ({"d_ks": (4, 0)}, ValueError, r"^each entry of d_ks must be an integer >= 1, got 0"),
    ({"d_ks": ()}, ValueError, r"^d_ks must hold at least one integer >= 1"),
    ({"d_ks": 16}, TypeError, r"^d_ks must be a list or tuple"),
    ({"lr": -1.0}, ValueError, r"^lr must be a positive finite number"),
    ({"snapshots": 0}, ValueError, r"^snapshots must be an integer >= 1"),
    ({"seeds": (-2,)}, ValueError, r"^each entry of seeds must be an integer >= 0"),
    ({"optimiser": "lbfgs"}, ValueError, r"^optimiser must be one of"),
]


@pytest.mark.parametrize(("kwargs", "exc", "pattern"), SCALING_BAD)
def test_scaling_runs_refuses_bad_arguments_before_any_training(kwargs, exc, pattern,
                                                                monkeypatch):
    monkeypatch.setattr(training, "init_params",
                        lambda *a, **k: pytest.fail("trained before checking its arguments"))
    ref.assert_clear_error(lambda: scaling_runs(**kwargs), exc, pattern)


@pytest.mark.parametrize(("kwargs", "exc", "pattern"), [
    ({"batch": 0}, ValueError, r"^batch must be an integer >= 1, got 0"),
    ({"d_k": -3}, ValueError, r"^d_k must be an integer >= 1, got -3"),
    ({"scaled": None}, TypeError, r"^scaled must be True or False"),
    ({"seeds": []}, ValueError, r"^seeds must hold at least one integer"),
    ({"task": "copy"}, ValueError, r"^task must be one of"),
])
def test_init_gradient_norms_refuses_bad_arguments(kwargs, exc, pattern):
    ref.assert_clear_error(lambda: init_gradient_norms(**kwargs), exc, pattern)


def test_good_arguments_of_other_types_are_accepted():
    """numpy ints and floats, ranges and arrays of seeds: what a notebook passes."""
    run, = train(steps=np.int64(2), lr=np.float32(0.01), batch=np.int32(2), seeds=range(1),
                 snapshots=np.int64(2), scaled=np.bool_(True))
    assert run.losses.shape == (2,) and run.snapshot_steps.tolist() == [0, 2]
    assert init_gradient_norms(seeds=np.array([0, 1]), batch=2)["q"].shape == (2,)


@pytest.mark.parametrize(("call", "exc", "pattern"), [
    (lambda: lookup_batch(42, 2), TypeError, r"^rng must be a numpy\.random\.Generator .*got int"),
    (lambda: lookup_batch(np.random.RandomState(0), 2), TypeError,
     r"^rng must be a numpy\.random\.Generator"),
    (lambda: previous_token_batch(None, 2), TypeError, r"^rng must be a numpy\.random\.Generator"),
    (lambda: lookup_batch(RNG(0), 0), ValueError, r"^batch must be an integer >= 1, got 0"),
    (lambda: lookup_batch(RNG(0), 2, n_values=2.0), TypeError, r"^n_values must be an integer"),
    (lambda: previous_token_batch(RNG(0), 2, n=1), ValueError, r"^n must be an integer >= 2"),
    (lambda: previous_token_batch(RNG(0), 2, vocab=0), ValueError, r"^vocab must be an integer"),
    (lambda: make_batch(["lookup"], RNG(0), 2), TypeError, r"^task must be a str, got list"),
    (lambda: make_batch("lookup", RNG(0), -1), ValueError, r"^batch must be an integer >= 1"),
    (lambda: n_classes("sorting"), ValueError, r"^task must be one of 'lookup', 'previous'"),
])
def test_task_generators_refuse_bad_arguments(call, exc, pattern):
    ref.assert_clear_error(call, exc, pattern)


@pytest.mark.parametrize(("call", "exc", "pattern"), [
    (lambda: decode_sequence(ONES, ONES, ONES, scale=0), ValueError,
     r"^scale must be a positive finite number, got 0"),
    (lambda: decode_sequence(ONES, ONES, ONES, scale=math.nan), ValueError,
     r"^scale must be a positive finite number, got nan"),
    (lambda: decode_sequence(ONES, ONES, ONES, scale="x"), TypeError,
     r"^scale must be a positive real number or None, got 'x'"),
    (lambda: decode_sequence([1.0, 2.0], ONES, ONES), ValueError, r"^q must be a matrix"),
    (lambda: decode_sequence(ONES, [[np.inf, 0.0], [0.0, 0.0]], ONES), ValueError,
     r"^k must hold finite values"),
    (lambda: decode_sequence(ONES, ONES, "v"), TypeError, r"^v must be an array of numbers"),
])
def test_decode_sequence_refuses_bad_arguments(call, exc, pattern):
    ref.assert_clear_error(call, exc, pattern)


@pytest.mark.parametrize(("call", "exc", "pattern"), [
    (lambda: probes.weights_on(A3, [0, 1], [1]), TypeError,
     r"^query must be one int position between 0 and 2, got \[0, 1\]"),
    (lambda: probes.weights_on(A3, 1.5, [1]), TypeError, r"^query must be one int position"),
    (lambda: probes.weights_on(A3, True, [1]), TypeError, r"^query must be one int position"),
    (lambda: probes.weights_on(A3, 0, []), TypeError, r"^keys must be an int position"),
    (lambda: probes.compare_pair(A3, A3, 5, 0, [1], [1]), ValueError,
     r"^query_a must be positions between 0 and 2, got \[5\]"),
    (lambda: probes.compare_pair(A3, A3, 0, [0], [1], [1]), TypeError,
     r"^query_b must be one int position"),
    (lambda: probes.compare_pair(A3, A3, 0, 0, [1], [1, 2]), ValueError,
     r"^keys_a and keys_b must name the same number of candidates"),
    (lambda: probes.attention_update_ratio(*_hidden(), attention_mask=[1, 1]), ValueError,
     r"^attention_mask must have the shape of ids \(3,\), got \(2,\)"),
    (lambda: probes.attention_update_ratio(*_hidden(), attention_mask=[1, 0.5, 1]), ValueError,
     r"^attention_mask must hold only 0 and 1"),
    (lambda: probes.attention_update_ratio(*_hidden(), attention_mask=[0, 0, 0]), ValueError,
     r"^attention_mask must keep at least one token"),
    (lambda: probes.with_positions(_tiny_weights(), 2, "shuffle"), ValueError,
     r"^how must be 'reverse' or 'zero', got 'shuffle'"),
    (lambda: probes.mean_by_offset(np.eye(3), 1.5), TypeError, r"^max_offset must be an integer"),
])
def test_probes_refuse_bad_arguments(call, exc, pattern):
    ref.assert_clear_error(call, exc, pattern)


def test_a_padding_mask_still_works_in_the_update_ratio():
    w, hs = _hidden()
    full = probes.attention_update_ratio(w, hs)
    same = probes.attention_update_ratio(w, hs, attention_mask=[1, 1, 1])
    np.testing.assert_array_equal(full, same)
    padded = probes.attention_update_ratio(w, hs, attention_mask=[True, True, False])
    assert padded.shape == full.shape and not np.allclose(padded, full)


@pytest.fixture(scope="module")
def small_runs():
    return scaling_runs(d_ks=(4, 16), seeds=(0,), steps=4, snapshots=3)


@pytest.mark.parametrize(("kwargs", "exc", "pattern"), [
    ({"d_k": 8}, ValueError, r"^d_k must be one of 4, 16 \(the runs' widths\), got 8"),
    ({"d_k": "16"}, TypeError, r"^d_k must be an int, got str"),
    ({"scaled": "no"}, TypeError, r"^scaled must be True or False, got str"),
    ({"seed_index": 1}, ValueError, r"^seed_index must be from 0 to 0, got 1"),
    ({"seed_index": -1}, ValueError, r"^seed_index must be from 0 to 0, got -1"),
    ({"seed_index": 0.0}, TypeError, r"^seed_index must be an int, got float"),
])
def test_training_explorer_refuses_bad_arguments(small_runs, kwargs, exc, pattern):
    from attn_core.explorers import training_explorer

    ref.assert_clear_error(lambda: training_explorer(small_runs, **kwargs), exc, pattern)


@pytest.mark.parametrize(("runs", "pattern"), [
    ([1, 2], r"^runs must be a non-empty dict"),
    ({}, r"^runs must be a non-empty dict"),
    ({(4, True): []}, r"^runs must map \(d_k, scaled\) to a non-empty list of Run"),
    ({(4, True): ["run"]}, r"^runs must map \(d_k, scaled\) to a non-empty list of Run"),
])
def test_training_explorer_refuses_what_is_not_a_set_of_runs(runs, pattern):
    from attn_core.explorers import training_explorer

    ref.assert_clear_error(lambda: training_explorer(runs), TypeError, pattern)


def test_training_explorer_without_the_other_scaling_is_refused(small_runs):
    from attn_core.explorers import training_explorer

    only_scaled = {key: rs for key, rs in small_runs.items() if key[1]}
    ref.assert_clear_error(lambda: training_explorer(only_scaled, scaled=False), ValueError,
                           r"^runs has no entry for d_k = 16, scaled = False")
