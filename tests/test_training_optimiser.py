"""The optimisers and the snapshots of a training run, against independent arithmetic.

Adam is checked three ways: two steps written out by hand in float64 (the formula of Kingma
& Ba with the default betas and eps), ten steps against ``torch.optim.Adam`` on the same
gradients, and one step of :func:`attn_core.training.train` against the hand-written update
of the initial weights with the gradients of the first batch. The snapshots are checked
against a forward pass with the run's own scale at the weights of their step.
"""

import numpy as np
import pytest

from attn_core import training
from attn_core.tasks import make_batch, n_classes
from attn_core.training import forward, init_params, loss_and_grads, train

BETA1, BETA2, EPS = 0.9, 0.999, 1e-8  # Adam's defaults, here and in torch


def _adam():
    return training.OPTIMISERS["adam"]


def test_two_adam_steps_by_hand():
    lr = 0.1
    w0 = np.array([1.0, -2.0, 0.5])
    g1, g2 = np.array([0.3, -0.01, 0.0]), np.array([-0.2, 0.04, 2.0])
    params = {"w": w0.copy()}
    opt = _adam()(lr)
    opt.step(params, {"w": g1})
    after1 = params["w"].copy()
    opt.step(params, {"w": g2})
    # step 1: m = (1 - b1) g1, s = (1 - b2) g1^2; the bias corrections give back g1 and g1^2
    m1, s1 = 0.1 * g1, 0.001 * g1 ** 2
    want1 = w0 - lr * (m1 / 0.1) / (np.sqrt(s1 / 0.001) + EPS)
    # step 2: the running moments, corrected by 1 - 0.9^2 = 0.19 and 1 - 0.999^2 = 0.001999
    m2, s2 = 0.9 * m1 + 0.1 * g2, 0.999 * s1 + 0.001 * g2 ** 2
    want2 = want1 - lr * (m2 / 0.19) / (np.sqrt(s2 / 0.001999) + EPS)
    np.testing.assert_allclose(after1, want1, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(params["w"], want2, rtol=1e-14, atol=1e-15)
    # the first step moves every weight with a nonzero gradient by lr, against the gradient
    np.testing.assert_allclose((w0 - after1)[:2], lr * np.sign(g1[:2]), rtol=1e-6)
    assert after1[2] == w0[2]


def test_an_sgd_step_by_hand():
    params = {"w": np.array([[1.0, 2.0]])}
    training.OPTIMISERS["sgd"](0.5).step(params, {"w": np.array([[0.2, -4.0]])})
    np.testing.assert_array_equal(params["w"], [[0.9, 4.0]])


def test_adam_matches_torch_optim_adam(requires_torch):
    torch = requires_torch
    g = np.random.default_rng(7)
    shapes = {"E": (2, 5, 3), "W_q": (2, 3, 4)}
    params = {name: g.standard_normal(shape) for name, shape in shapes.items()}
    tensors = {name: torch.tensor(p.copy(), dtype=torch.float64, requires_grad=True)
               for name, p in params.items()}
    ours, theirs = _adam()(0.01), torch.optim.Adam(list(tensors.values()), lr=0.01)
    for step in range(10):
        grads = {name: g.standard_normal(shape) * 10.0 ** (step % 3 - 1)
                 for name, shape in shapes.items()}
        ours.step(params, grads)
        for name, t in tensors.items():
            t.grad = torch.tensor(grads[name], dtype=torch.float64)
        theirs.step()
        for name, t in tensors.items():
            np.testing.assert_allclose(params[name], t.detach().numpy(), rtol=1e-12, atol=1e-14,
                                       err_msg=f"{name} after step {step + 1}")


def _first_step(task, seed, d_k, batch, scale):
    """The initial weights and the first batch's gradients, drawn as train draws them."""
    rng = np.random.default_rng(seed)
    b0 = make_batch(task, rng, 1)
    rng = np.random.default_rng(seed)  # init first, then the batches, from the same stream
    params = init_params([rng], b0.features.shape[-1], n_classes(task), b0.features.shape[-2],
                         d_k=d_k)
    first = make_batch(task, rng, batch)
    batch_s = type(first)(*(x[None] for x in (first.features, first.targets, first.scored,
                                               first.pattern)))  # one seed: (1, b, ...)
    _, grads, _ = loss_and_grads(params, batch_s, scale)
    return params, grads


@pytest.mark.parametrize("scaled", [True, False])
def test_one_step_of_train_is_one_adam_step_of_the_first_batch(scaled):
    lr, d_k, batch = 0.05, 8, 4
    params, grads = _first_step("lookup", 3, d_k, batch, None if scaled else 1.0)
    run, = train("lookup", d_k=d_k, scaled=scaled, seeds=[3], steps=1, lr=lr, batch=batch,
                 snapshots=2)
    for name, w in params.items():
        g = grads[name][0]
        want = w[0] - lr * g / (np.abs(g) + EPS)  # step 1 of Adam: m_hat = g, s_hat = g^2
        np.testing.assert_allclose(run.params[name], want, rtol=1e-12, atol=1e-15,
                                   err_msg=name)


# --- snapshots ----------------------------------------------------------------------------------

def _probe_map(task, seed, params, scale):
    probe = make_batch(task, np.random.default_rng(10_000 + seed), 1)
    p = {name: w[None] for name, w in params.items()}  # (rows, cols) -> (1, rows, cols)
    return forward(p, probe.features[None], scale)[1][0, 0]  # (1, 1, n, n) -> (n, n)


@pytest.fixture(scope="module")
def pair():
    """A scaled and an unscaled run (d_k = 64, where the switch matters), and shorter ones."""
    kw = {"d_k": 64, "seeds": [1], "lr": 0.01, "batch": 8, "snapshots": 4}
    return {scaled: {steps: train("lookup", scaled=scaled, steps=steps, **kw)[0]
                     for steps in (6, 2)} for scaled in (True, False)}


@pytest.mark.parametrize("scaled", [True, False])
def test_each_snapshot_is_a_forward_pass_with_its_own_scale(pair, scaled):
    run, short = pair[scaled][6], pair[scaled][2]
    assert run.snapshot_steps.tolist() == [0, 2, 4, 6]
    scale, other = (None, 1.0) if scaled else (1.0, None)
    init = {name: w[0] for name, w in init_params([np.random.default_rng(1)], 16, 8, 5,
                                                  d_k=64).items()}
    for i, params in ((0, init), (1, short.params), (3, run.params)):
        np.testing.assert_allclose(run.snapshot_weights[i], _probe_map("lookup", 1, params, scale),
                                   rtol=1e-12, atol=1e-14, err_msg=f"snapshot {i}")
        assert not np.allclose(run.snapshot_weights[i],
                               _probe_map("lookup", 1, params, other), atol=1e-3)
    # the shorter run's last snapshot is the longer run's snapshot of that step
    np.testing.assert_array_equal(short.snapshot_weights[-1], run.snapshot_weights[1])


def test_scaled_and_unscaled_snapshots_differ(pair):
    scaled, unscaled = pair[True][6], pair[False][6]
    assert scaled.snapshot_steps.tolist() == unscaled.snapshot_steps.tolist()
    for i in range(len(scaled.snapshot_steps)):
        assert not np.allclose(scaled.snapshot_weights[i], unscaled.snapshot_weights[i],
                               atol=1e-3), f"snapshot {i}"
    # unscaled scores at d_k = 64 are about 8 times larger: a sharper map from the start
    assert unscaled.snapshot_weights[0].max(axis=-1).mean() > \
        scaled.snapshot_weights[0].max(axis=-1).mean()
