"""The tiny GPT (attn_core.nn.gpt): gradients, causality, shapes, dtypes, init and errors.

* ``gpt_loss_and_grads`` against central finite differences of ``gpt_loss_and_grads``'s own
  loss in float64, on tiny configurations drawn by hypothesis (batch dims, n, d_model, heads,
  layers): every gradient along a random direction of its parameter, and on one fixed tiny
  model every entry of every parameter;
* the forward pass against a float64 loop written here from the formulas (no attn_core.nn);
* causality: changing a later token never changes an earlier position's logits;
* init: GPT-2's statistics, seeded, dtype kept, one ulp up under ATTN_CORE_PERTURB_INIT=1;
* bad input (ids, params, config) raises an error that names what is wrong.
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_core.nn import (
    GPTConfig,
    cross_entropy,
    gpt_forward,
    gpt_loss_and_grads,
    init_gpt,
    is_decayed,
    param_shapes,
)

from reference import FAST, assert_clear_error, batch_shapes, ref_gpt_logits

H = 1e-6
FD_TOL = {"rtol": 1e-6, "atol": 1e-8}


def perturbed_params(config, seed, spread=0.2):
    """float64 parameters with every array random (gains near 1, biases non-zero), so that
    no gradient is trivially zero by symmetry."""
    g = np.random.default_rng(seed)
    params = init_gpt(config, g, dtype="float64")
    return {k: v + spread * g.standard_normal(v.shape) for k, v in params.items()}


def problem(config, seed, batch=(2,), n=None):
    g = np.random.default_rng(seed + 1)
    n = config.n_ctx if n is None else n
    ids = g.integers(0, config.vocab_size, (*batch, n))
    targets = g.integers(0, config.vocab_size, (*batch, n))
    return perturbed_params(config, seed), ids, targets


def loss_of(params, config, ids, targets):
    return gpt_loss_and_grads(params, config, ids, targets)[0]


@FAST
@given(batch=batch_shapes(max_dims=2, max_side=2), n=st.integers(1, 4),
       heads_dk=st.sampled_from([(1, 3), (3, 1), (2, 2)]), n_layers=st.integers(1, 2),
       seed=st.integers(0, 2**16))
def test_every_gradient_is_the_directional_finite_difference(batch, n, heads_dk, n_layers, seed):
    heads, d_k = heads_dk  # d_model >= 3: a layer norm of 2 entries is a near-step (+-1, +-1)
    config = GPTConfig(vocab_size=5, n_ctx=4, d_model=heads * d_k, n_heads=heads,
                       n_layers=n_layers, d_ff=3)
    params, ids, targets = problem(config, seed, batch, n)
    _, grads = gpt_loss_and_grads(params, config, ids, targets)
    g = np.random.default_rng(seed + 2)
    for name in params:
        direction = g.standard_normal(params[name].shape)
        up = {**params, name: params[name] + H * direction}
        down = {**params, name: params[name] - H * direction}
        numeric = (loss_of(up, config, ids, targets) - loss_of(down, config, ids, targets)) / (
            2 * H)
        assert np.sum(grads[name] * direction) == pytest.approx(numeric, rel=1e-6, abs=1e-8), name


def test_every_entry_of_every_gradient_is_the_finite_difference():
    config = GPTConfig(vocab_size=6, n_ctx=4, d_model=4, n_heads=2, n_layers=2, d_ff=5)
    assert_every_entry_is_the_finite_difference(config, *problem(config, 7, batch=(2,), n=4))


def assert_every_entry_is_the_finite_difference(config, params, ids, targets):
    """Every entry of every gradient against a central difference of the loss (float64);
    also used for the attention-only model (tests/test_gpt_attention_only.py)."""
    loss, grads = gpt_loss_and_grads(params, config, ids, targets)
    assert set(grads) == set(params)
    for name, p in params.items():
        assert grads[name].shape == p.shape and grads[name].dtype == np.float64
        numeric = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            for sign in (1, -1):
                q = p.copy()
                q[idx] += sign * H
                numeric[idx] += sign * loss_of({**params, name: q}, config, ids, targets)
        np.testing.assert_allclose(grads[name], numeric / (2 * H), **FD_TOL, err_msg=name)


# --- the forward pass against a loop written from the formulas ---------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_forward_is_the_formula_and_keeps_the_dtype(dtype):
    config = GPTConfig(vocab_size=7, n_ctx=5, d_model=6, n_heads=3, n_layers=2, d_ff=8)
    params64, ids, _ = problem(config, 3, batch=(2,), n=5)
    params = {k: v.astype(dtype) for k, v in params64.items()}
    logits, weights = gpt_forward(params, config, ids)
    assert logits.shape == (2, 5, 7) and logits.dtype == dtype
    assert len(weights) == 2 and all(w.shape == (2, 3, 5, 5) and w.dtype == dtype
                                     for w in weights)
    tol = {"rtol": 1e-12, "atol": 1e-12} if dtype == "float64" else {"rtol": 1e-4, "atol": 1e-4}
    for b in range(2):
        np.testing.assert_allclose(logits[b], ref_gpt_logits(params64, config, ids[b].tolist()),
                                   **tol)
    _, grads = gpt_loss_and_grads(params, config, ids, ids)
    assert {g.dtype for g in grads.values()} == {np.dtype(dtype)}


def test_leading_batch_dims_are_independent_sequences():
    config = GPTConfig(vocab_size=9, n_ctx=6, d_model=4, n_heads=2, n_layers=1)
    params, ids, targets = problem(config, 4, batch=(2, 3), n=6)
    logits, weights = gpt_forward(params, config, ids)
    for idx in np.ndindex(2, 3):
        one, w = gpt_forward(params, config, ids[idx])
        np.testing.assert_allclose(logits[idx], one, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(weights[0][idx], w[0], rtol=1e-13, atol=1e-13)
    loss, _ = gpt_loss_and_grads(params, config, ids, targets)
    assert loss == pytest.approx(cross_entropy(logits, targets)[0], rel=1e-14)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_later_token_never_changes_an_earlier_logit(dtype):
    config = GPTConfig(vocab_size=11, n_ctx=8, d_model=8, n_heads=2, n_layers=2)
    params = {k: v.astype(dtype) for k, v in perturbed_params(config, 5).items()}
    ids = np.random.default_rng(0).integers(0, 11, (3, 8))
    logits, weights = gpt_forward(params, config, ids)
    for t in range(1, 8):
        changed = ids.copy()
        changed[:, t:] = (changed[:, t:] + 1 + t) % 11
        new, new_w = gpt_forward(params, config, changed)
        np.testing.assert_array_equal(new[:, :t], logits[:, :t])
        assert not np.array_equal(new[:, t], logits[:, t])
        for w, w_new in zip(weights, new_w):
            np.testing.assert_array_equal(w_new[..., :t, :], w[..., :t, :])
            assert not np.triu(w, k=1).any()


# --- init -------------------------------------------------------------------------------------


def test_init_is_gpt2s():
    config = GPTConfig(vocab_size=50, n_ctx=64, d_model=64, n_heads=4, n_layers=3)
    params = init_gpt(config, np.random.default_rng(0))
    assert {k: v.shape for k, v in params.items()} == param_shapes(config)
    assert {v.dtype for v in params.values()} == {np.dtype("float32")}
    residual = 0.02 / math.sqrt(2 * 3)
    for name, p in params.items():
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "g":
            assert (p == 1).all(), name
        elif leaf.startswith("b"):
            assert (p == 0).all(), name
        else:  # a normal(0, std) sample of >= 3200 entries: its std within 5 %, mean ~ 0
            std = residual if name.endswith(("attn.w_o", "mlp.w_out")) else 0.02
            assert float(p.std()) == pytest.approx(std, rel=0.05), name
            assert abs(float(p.mean())) < 5 * std / math.sqrt(p.size), name
    again = init_gpt(config, np.random.default_rng(0), dtype="float64")
    for name in params:  # the same draws, rounded to each dtype
        np.testing.assert_array_equal(params[name], again[name].astype(np.float32))


def test_init_loss_is_near_log_vocab():
    config = GPTConfig(vocab_size=40, n_ctx=16, d_model=32, n_heads=4, n_layers=2)
    params = init_gpt(config, np.random.default_rng(1), dtype="float64")
    ids = np.random.default_rng(2).integers(0, 40, (4, 16))
    loss, _ = gpt_loss_and_grads(params, config, ids, np.roll(ids, -1, axis=-1))
    assert abs(loss - math.log(40)) < 0.05


def test_perturb_init_moves_every_weight_up_by_one_ulp(monkeypatch):
    config = GPTConfig(vocab_size=5, n_ctx=4, d_model=4, n_heads=2, n_layers=1)
    plain = init_gpt(config, np.random.default_rng(3))
    monkeypatch.setenv("ATTN_CORE_PERTURB_INIT", "1")
    nudged = init_gpt(config, np.random.default_rng(3))
    for name, p in plain.items():
        assert nudged[name].dtype == p.dtype
        np.testing.assert_array_equal(nudged[name], np.nextafter(p, np.float32(np.inf)))


def test_decay_is_for_matrices_only():
    config = GPTConfig(vocab_size=5, n_ctx=4, d_model=4, n_heads=2, n_layers=1)
    decayed = {name for name in param_shapes(config) if is_decayed(name)}
    assert decayed == {"wte", "wpe", "w_unembed", "h0.mlp.w_in", "h0.mlp.w_out"} | {
        f"h0.attn.w_{c}" for c in "qkvo"}


# --- errors -----------------------------------------------------------------------------------

CONFIG = GPTConfig(vocab_size=5, n_ctx=4, d_model=4, n_heads=2, n_layers=1)
PARAMS = init_gpt(CONFIG, np.random.default_rng(0))
IDS = np.array([[0, 1, 2]])

BAD_CONFIG = [
    ({"vocab_size": 0}, ValueError, r"vocab_size must be an integer >= 1"),
    ({"n_ctx": 2.5}, TypeError, r"n_ctx must be an integer"),
    ({"d_model": -4}, ValueError, r"d_model must be"),
    ({"n_heads": 3}, ValueError, r"n_heads = 3 must divide d_model = 4"),
    ({"n_layers": 0}, ValueError, r"n_layers must be"),
    ({"d_ff": 0}, ValueError, r"d_ff must be"),
    ({"n_layers": True}, TypeError, r"n_layers must be an integer"),
]


def test_config_fields_are_plain_ints():
    config = GPTConfig(np.int64(5), 4, 4, 2, 1)
    assert type(config.vocab_size) is int and config.d_ff == 16 and config.d_head == 2


@pytest.mark.parametrize(("change", "exc", "pattern"), BAD_CONFIG)
def test_a_bad_config_names_the_field(change, exc, pattern):
    fields = {"vocab_size": 5, "n_ctx": 4, "d_model": 4, "n_heads": 2, "n_layers": 1, **change}
    assert_clear_error(lambda: GPTConfig(**fields), exc, pattern)


BAD = [
    (lambda: gpt_forward(PARAMS, CONFIG, [[0, 5]]), ValueError,
     r"ids must be token ids in 0\.\.4 .*got 5 at index \(0, 1\)"),
    (lambda: gpt_forward(PARAMS, CONFIG, [[-1]]), ValueError, r"ids must be token ids"),
    (lambda: gpt_forward(PARAMS, CONFIG, [[0, 1, 2, 3, 4]]), ValueError,
     r"ids has n = 5 positions, more than the context window n_ctx = 4"),
    (lambda: gpt_forward(PARAMS, CONFIG, [[0.0, 1.0]]), TypeError, r"ids must be integer"),
    (lambda: gpt_forward(PARAMS, CONFIG, np.zeros((2, 0), int)), ValueError, r"n >= 1"),
    (lambda: gpt_forward({**PARAMS, "h0.mlp.w_in": np.ones((4, 15), np.float32)}, CONFIG, IDS),
     ValueError, r"params\['h0.mlp.w_in'\] must have shape \(4, 16\)"),
    (lambda: gpt_forward({k: v for k, v in PARAMS.items() if k != "ln_f.g"}, CONFIG, IDS),
     ValueError, r"params is missing .*ln_f.g"),
    (lambda: gpt_forward({**PARAMS, "h1.ln1.g": np.ones(4)}, CONFIG, IDS), ValueError,
     r"params has parameter\(s\) this config does not: \['h1.ln1.g'\]"),
    (lambda: gpt_forward({**PARAMS, "wte": PARAMS["wte"].astype(np.float64)}, CONFIG, IDS),
     ValueError, r"params must all have one dtype"),
    (lambda: gpt_forward({**PARAMS, "wpe": np.full((4, 4), np.nan, np.float32)}, CONFIG, IDS),
     ValueError, r"params\['wpe'\] must hold finite values"),
    (lambda: gpt_forward(PARAMS, {"vocab_size": 5}, IDS), TypeError, r"config must be a GPTConfig"),
    (lambda: gpt_forward([1, 2], CONFIG, IDS), TypeError, r"params must be a dict"),
    (lambda: gpt_loss_and_grads(PARAMS, CONFIG, IDS, [[1, 2]]), ValueError,
     r"targets must have the shape of ids \(1, 3\)"),
    (lambda: gpt_loss_and_grads(PARAMS, CONFIG, IDS, [[1, 2, 7]]), ValueError,
     r"targets must be token ids in 0\.\.4"),
    (lambda: init_gpt(CONFIG, 0), TypeError, r"rng must be a numpy.random.Generator"),
    (lambda: init_gpt(CONFIG, np.random.default_rng(0), dtype="int32"), ValueError,
     r"dtype must be a floating dtype"),
]


@pytest.mark.parametrize(("call", "exc", "pattern"), BAD)
def test_bad_input_names_the_argument(call, exc, pattern):
    assert_clear_error(call, exc, pattern)
