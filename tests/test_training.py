"""The tiny model, its optimisers and the toy tasks: properties that could fail.

* the model's backward pass against finite differences of its own loss (float64);
* each optimiser lowers the loss of a seeded task;
* without positions, attention is permutation-equivariant (permuting the input rows
  permutes the output rows); with positions it is not;
* a seed trains the same way alone or inside a population;
* the tasks' answers and patterns agree with their inputs.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_core.tasks import lookup_batch, make_batch, previous_token_batch
from attn_core.training import (
    forward,
    init_params,
    loss_and_grads,
    population_batch,
    train,
)

import reference as ref


def model(task, seed, d_k=4, positions=None):
    rng = np.random.default_rng(seed)
    b = population_batch(task, [rng], 3)
    n_features, n = b.features.shape[-1], b.features.shape[-2]
    n_out = int(b.targets.max()) + 2
    return init_params([rng], n_features, n_out, n, d_model=6, d_k=d_k, d_v=5,
                       positions=positions), b


@pytest.mark.parametrize("positions", [None, "learned", "sinusoidal"])
@pytest.mark.parametrize(("task", "scale"), [("lookup", None), ("previous", 1.0)])
def test_model_gradients_match_finite_differences(task, scale, positions):
    params, b = model(task, 1, positions=positions)
    _, grads, _ = loss_and_grads(params, b, scale, positions)
    g = np.random.default_rng(2)
    eps = 1e-6
    for name, value in params.items():
        assert grads[name].shape == value.shape
        for _ in range(6):  # six random entries of each parameter
            idx = tuple(int(g.integers(0, s)) for s in value.shape)
            old = value[idx]
            value[idx] = old + eps
            up = loss_and_grads(params, b, scale, positions)[0].sum()
            value[idx] = old - eps
            down = loss_and_grads(params, b, scale, positions)[0].sum()
            value[idx] = old
            np.testing.assert_allclose(grads[name][idx], (up - down) / (2 * eps),
                                       rtol=1e-5, atol=1e-8, err_msg=f"{name}{idx}")


@pytest.mark.parametrize(("optimiser", "lr"), [("adam", 0.01), ("sgd", 0.5)])
@pytest.mark.parametrize(("task", "positions"), [("lookup", None), ("previous", "learned")])
def test_training_lowers_the_loss(optimiser, lr, task, positions):
    run, = train(task, steps=150, seeds=[0], lr=lr, optimiser=optimiser, positions=positions)
    assert np.isfinite(run.losses).all()
    assert run.losses[-20:].mean() < 0.5 * run.losses[:20].mean()


def test_trained_lookup_head_attends_to_the_matching_key():
    run, = train("lookup", steps=300, seeds=[0])
    chance = 1.0 / run.snapshot_weights.shape[-1]
    assert run.accuracy > 0.9
    assert run.on_pattern > 0.5 > chance
    # at step 0 the probe's query row is near uniform; at the end it peaks on the right pair
    row = np.argmax(run.probe_pattern.sum(axis=1))
    first, last = run.snapshot_weights[0][row], run.snapshot_weights[-1][row]
    assert first @ run.probe_pattern[row] < last @ run.probe_pattern[row]


def test_previous_token_task_needs_positions():
    without, = train("previous", steps=300, seeds=[0], positions=None)
    with_pos, = train("previous", steps=300, seeds=[0], positions="learned")
    assert with_pos.accuracy > 0.9
    assert without.accuracy < 0.6
    assert with_pos.on_pattern > 0.8 > without.on_pattern


def test_a_seed_trains_the_same_alone_or_in_a_population():
    together = train("lookup", steps=20, seeds=[3, 5])
    alone, = train("lookup", steps=20, seeds=[5])
    np.testing.assert_allclose(together[1].losses, alone.losses, rtol=1e-12)
    assert not np.allclose(together[0].losses, alone.losses)


@ref.FAST
@given(st.sampled_from(["lookup", "previous"]), st.integers(0, 2**32 - 1))
def test_without_positions_attention_is_permutation_equivariant(task, seed):
    params, b = model(task, seed % 1000)
    perm = np.random.default_rng(seed).permutation(b.features.shape[-2])
    logits, weights, _ = forward(params, b.features)
    logits_p, weights_p, _ = forward(params, b.features[..., perm, :])
    np.testing.assert_allclose(logits_p, logits[..., perm, :], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights_p, weights[..., perm, :][..., perm], rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_with_positions_a_permutation_changes_more_than_the_order(positions):
    params, b = model("previous", 4, positions=positions)
    perm = np.array([1, 0, 2, 3, 5, 4])
    logits, _, _ = forward(params, b.features, positions=positions)
    logits_p, _, _ = forward(params, b.features[..., perm, :], positions=positions)
    assert not np.allclose(logits_p, logits[..., perm, :])


def test_lookup_batch_answer_is_the_value_stored_with_the_query_key():
    n_keys = 8
    b = lookup_batch(np.random.default_rng(9), batch=50, n_pairs=5, n_keys=n_keys, n_values=6)
    for f, y, pat in zip(b.features, b.targets, b.pattern):
        query_key = np.flatnonzero(f[-1, :n_keys])
        j = int(np.flatnonzero(pat[-1])[0])
        assert np.flatnonzero(f[j, :n_keys]).tolist() == query_key.tolist()
        assert np.flatnonzero(f[j, n_keys:]).tolist() == [y[-1]]
        assert len({int(np.flatnonzero(row[:n_keys])[0]) for row in f[:-1]}) == 5  # distinct


def test_previous_token_batch_targets_and_pattern():
    b = previous_token_batch(np.random.default_rng(2), batch=10, n=5, vocab=4)
    tokens = b.features.argmax(axis=-1)
    assert (b.targets[:, 1:] == tokens[:, :-1]).all()
    for i in range(1, 5):
        assert b.pattern[:, i].argmax(axis=-1).tolist() == [i - 1] * 10


@pytest.mark.parametrize(("call", "exc", "pattern"), [
    (lambda: make_batch("sorting", np.random.default_rng(0), 2), ValueError, r"task must be"),
    (lambda: train(optimiser="rmsprop", steps=1), ValueError, r"optimiser must be one of"),
    (lambda: train(positions="rotary", steps=1), ValueError, r"positions must be one of"),
    (lambda: lookup_batch(np.random.default_rng(0), 2, n_pairs=9, n_keys=8), ValueError,
     r"n_pairs must be <= n_keys"),
    (lambda: train(d_k=0, steps=1), ValueError, r"d_k must be an integer >= 1"),
])
def test_bad_settings_get_a_clear_error(call, exc, pattern):
    ref.assert_clear_error(call, exc, pattern)
