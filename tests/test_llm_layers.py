"""The layers notebook 17's model adds, and the one block with its options, against
independent references (no model file needed).

* RMSNorm and the SwiGLU MLP: forwards against plain-Python formulas, backwards against
  central finite differences in float64 and against torch autograd (tests marked torch);
* the block with RMSNorm + SwiGLU + grouped-query heads and no biases: its backward against
  finite differences; with rotary positions it refuses a backward it does not have;
* small random Llama-style decoders (hypothesis: heads, key/value heads, head width, layers,
  RoPE base, window and sinks): :func:`attn_core.model.llm.llm_forward` against a float64
  loop written here (per query, per head, per key, RoPE by explicit pair rotation), with the
  interventions (masked keys, zeroed values, ablated heads); decoding through rolling KV
  caches (:func:`attn_core.nn.prefill`) against the same loop under the window mask;
  ``block_forward(..., cache=...)`` token by token against the full block.
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_core.decoding import empty_cache
from attn_core.model.llm import LLMConfig, llm_forward, llm_losses, llm_param_shapes
from attn_core.nn import (
    BlockOptions,
    block_backward,
    block_forward,
    block_shapes,
    prefill,
    rms_norm,
    rms_norm_backward,
    silu,
    swiglu,
    swiglu_backward,
)

from reference import FAST, assert_clear_error, batch_shapes, numeric_grad

FD_TOL = {"rtol": 1e-6, "atol": 1e-7}


def rng_for(seed):
    return np.random.default_rng(seed)


# --- RMSNorm and SwiGLU -----------------------------------------------------------------------


def ref_rms_norm(row, gamma, eps):
    r = math.sqrt(math.fsum(v * v for v in row) / len(row) + eps)
    return [g * v / r for v, g in zip(row, gamma)]


@FAST
@given(batch=batch_shapes(), d=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_rms_norm_is_the_formula_and_its_backward_the_finite_difference(batch, d, seed):
    g = rng_for(seed)
    x, gamma, r = g.standard_normal((*batch, d)) * 3, g.standard_normal(d), g.standard_normal(
        (*batch, d))
    y = rms_norm(x, gamma, 1e-5)
    want = [ref_rms_norm(row, gamma, 1e-5) for row in x.reshape(-1, d)]
    np.testing.assert_allclose(y.reshape(-1, d), want, rtol=1e-13, atol=1e-14)
    grad_x, grad_gamma = rms_norm_backward(x, gamma, 1e-5, r)
    for name, got, arg in (("x", grad_x, x), ("gamma", grad_gamma, gamma)):
        def loss(v, name=name):
            a = {"x": x, "gamma": gamma, name: v}
            return float(np.sum(rms_norm(a["x"], a["gamma"], 1e-5) * r))
        np.testing.assert_allclose(got, numeric_grad(loss, arg), **FD_TOL, err_msg=name)


def test_rms_norm_keeps_float32_and_does_not_centre():
    x = np.array([[1.0, 1.0, 1.0]], dtype=np.float32)  # layer norm would give 0
    y = rms_norm(x, np.ones(3, np.float32), 1e-12)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, 1.0, rtol=1e-6)


@FAST
@given(batch=batch_shapes(max_dims=1), n=st.integers(1, 3), d=st.integers(1, 4),
       d_ff=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_swiglu_is_the_formula_and_its_backward_the_finite_difference(batch, n, d, d_ff, seed):
    g = rng_for(seed)
    args = {"x": g.standard_normal((*batch, n, d)), "w_gate": g.standard_normal((d, d_ff)),
            "w_up": g.standard_normal((d, d_ff)), "w_down": g.standard_normal((d_ff, d))}
    y = swiglu(**args)
    for idx in np.ndindex(*batch, n):
        row = args["x"][idx]
        hidden = [(a / (1 + math.exp(-a))) * b for a, b in
                  zip(row @ args["w_gate"], row @ args["w_up"])]
        np.testing.assert_allclose(y[idx], np.array(hidden) @ args["w_down"], rtol=1e-12,
                                   atol=1e-13)
    r = g.standard_normal((*batch, n, d))
    grad_x, grads = swiglu_backward(**args, grad_y=r)
    grads["x"] = grad_x
    for name, got in grads.items():
        def loss(v, name=name):
            return float(np.sum(swiglu(**{**args, name: v}) * r))
        np.testing.assert_allclose(got, numeric_grad(loss, args[name]), **FD_TOL, err_msg=name)


def test_silu_does_not_overflow():
    x = np.array([-1000.0, 1000.0], dtype=np.float32)
    with np.errstate(all="raise"):
        np.testing.assert_array_equal(silu(x), [-0.0, 1000.0])


def test_rms_norm_and_swiglu_against_torch_autograd(requires_torch):
    torch = requires_torch
    g = rng_for(3)
    x, gamma, r = g.standard_normal((2, 5, 6)), g.standard_normal(6), g.standard_normal((2, 5, 6))
    tx, tg = torch.tensor(x, requires_grad=True), torch.tensor(gamma, requires_grad=True)
    ty = torch.nn.functional.rms_norm(tx, (6,), tg, eps=1e-5)
    (ty * torch.tensor(r)).sum().backward()
    np.testing.assert_allclose(rms_norm(x, gamma, 1e-5), ty.detach().numpy(), rtol=1e-12)
    grad_x, grad_gamma = rms_norm_backward(x, gamma, 1e-5, r)
    np.testing.assert_allclose(grad_x, tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(grad_gamma, tg.grad.numpy(), rtol=1e-10, atol=1e-12)

    w = {k: g.standard_normal(s) for k, s in
         (("w_gate", (6, 7)), ("w_up", (6, 7)), ("w_down", (7, 6)))}
    t = {k: torch.tensor(v, requires_grad=True) for k, v in w.items()}
    tx = torch.tensor(x, requires_grad=True)
    ty = (torch.nn.functional.silu(tx @ t["w_gate"]) * (tx @ t["w_up"])) @ t["w_down"]
    (ty * torch.tensor(r)).sum().backward()
    np.testing.assert_allclose(swiglu(x, **w), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    grad_x, grads = swiglu_backward(x, **w, grad_y=r)
    np.testing.assert_allclose(grad_x, tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for k in w:
        np.testing.assert_allclose(grads[k], t[k].grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=k)


# --- the block with options -------------------------------------------------------------------

LLAMA = {"norm": "rms", "mlp": "swiglu", "bias": False}


@FAST
@given(n=st.integers(1, 4), kv=st.sampled_from([(2, 1), (2, 2), (4, 2)]), d_head=st.integers(1, 3),
       seed=st.integers(0, 2**16))
@pytest.mark.slow
def test_llama_block_backward_is_the_finite_difference(n, kv, d_head, seed):
    h, n_kv = kv
    o = BlockOptions(h, n_kv_heads=n_kv, **LLAMA)
    g = rng_for(seed)
    d = h * d_head
    p = {k: 0.5 * g.standard_normal(s) for k, s in block_shapes(d, 5, o).items()}
    x, r = g.standard_normal((n, d)), g.standard_normal((n, d))
    grad_x, grads = block_backward(x, p, None, r, options=o)
    assert set(grads) == set(p)
    grads["x"] = grad_x
    args = {**p, "x": x}
    for name, got in grads.items():
        def loss(v, name=name):
            a = {**args, name: v}
            xx = a.pop("x")
            return float(np.sum(block_forward(xx, a, options=o)[0] * r))
        np.testing.assert_allclose(got, numeric_grad(loss, args[name]), **FD_TOL, err_msg=name)


def test_block_with_cache_is_the_full_block_token_by_token():
    o = BlockOptions(4, n_kv_heads=2, rope_base=50.0, **LLAMA)
    g = rng_for(0)
    p = {k: 0.5 * g.standard_normal(s) for k, s in block_shapes(8, 6, o).items()}
    x = g.standard_normal((2, 5, 8))
    full, w_full = block_forward(x, p, options=o)
    cache = empty_cache(2, batch=(2, 2))
    rows = []
    for i in range(5):
        y, w, cache = block_forward(x[:, i:i + 1], p, options=o, cache=cache)
        rows.append(y)
        np.testing.assert_allclose(w[..., 0, :], w_full[..., i, :i + 1], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.concatenate(rows, axis=-2), full, rtol=1e-12, atol=1e-13)
    assert cache.keys.shape == (2, 2, 5, 2)  # 2 key/value heads cached, not 4


@pytest.mark.parametrize("call, error, match", [
    (lambda: BlockOptions(4, n_kv_heads=3), ValueError, r"n_kv_heads must divide"),
    (lambda: BlockOptions(2, norm="batch"), ValueError, r"norm"),
    (lambda: BlockOptions(2, mlp="relu"), ValueError, r"mlp must be one of"),
    (lambda: BlockOptions(2, mlp="gelu", bias=False), ValueError, r"GELU MLP has biases"),
    (lambda: BlockOptions(2, rope_base=1.0), ValueError, r"rope_base must be"),
    (lambda: block_shapes(8, None, BlockOptions(2, mlp="swiglu")), ValueError, r"d_ff = None"),
    (lambda: block_backward(np.ones((2, 4)), {k: np.ones(s) for k, s in block_shapes(
        4, 3, BlockOptions(2, rope_base=10.0, **LLAMA)).items()}, None, np.ones((2, 4)),
        options=BlockOptions(2, rope_base=10.0, **LLAMA)), ValueError, r"rotary positions"),
    (lambda: block_forward(np.ones((2, 4)), {}, 2, options=BlockOptions(2)), ValueError,
     r"n_heads or options"),
    (lambda: block_forward(np.ones((2, 4)), {k: np.ones(s) for k, s in block_shapes(
        4, 3, BlockOptions(2, **LLAMA)).items() if k != "mlp.w_up"}, options=BlockOptions(
        2, **LLAMA)), ValueError, r"p is missing .*mlp.w_up"),
])
def test_block_options_errors_are_clear(call, error, match):
    assert_clear_error(call, error, match)


# --- small random Llama-style decoders against a float64 loop ---------------------------------


def random_llm(config, seed):
    g = rng_for(seed)
    params = {}
    for name, shape in llm_param_shapes(config).items():
        scale = 0.2 if name.endswith(".g") else 0.6
        params[name] = g.normal(1.0 if name.endswith(".g") else 0.0, scale, size=shape)
    return params


def _rms(row, gamma, eps):
    return gamma * row / math.sqrt(math.fsum(row * row) / len(row) + eps)


def _rotate(vec, pos, base):
    """RoPE on adjacent pairs (2c, 2c+1), one pair at a time."""
    d = len(vec)
    out = vec.copy()
    for c in range(d // 2):
        angle = pos * base ** (-2 * c / d)
        a, b = vec[2 * c], vec[2 * c + 1]
        out[2 * c], out[2 * c + 1] = (a * math.cos(angle) - b * math.sin(angle),
                                      a * math.sin(angle) + b * math.cos(angle))
    return out


def reference_llm(params, config, ids, visible, keys_masked=None, values_zeroed=None,
                  ablate=None, heads_out=None):
    """Logits (n, vocab) of a Llama-style decoder in float64, query by query, head by head,
    key by key; ``visible(i, j)`` says whether query i may see key j. ``heads_out``, a dict,
    gets each layer's head outputs ``{layer: (n_heads, n, d_head)}``, head ``h`` the values'
    weighted sum it computed (before the output projection)."""
    keys_masked, values_zeroed, ablate = keys_masked or {}, values_zeroed or {}, ablate or {}
    c, n = config, len(ids)
    d_head, group = c.d_head, c.n_heads // c.n_kv_heads
    x = np.array([params["wte"][t] for t in ids], dtype=np.float64)
    for layer in range(c.n_layers):
        p = {k.split(".", 1)[1]: v for k, v in params.items() if k.startswith(f"h{layer}.")}
        a = np.array([_rms(row, p["ln1.g"], c.eps) for row in x])
        q, k, v = a @ p["attn.w_q"], a @ p["attn.w_k"], a @ p["attn.w_v"]
        heads = np.zeros((n, c.n_heads * d_head))
        for i in range(n):
            for h in range(c.n_heads):
                kv = h // group
                qi = _rotate(q[i, h * d_head:(h + 1) * d_head], i, c.rope_base)
                allowed = [j for j in range(n) if visible(i, j) and not (
                    j in keys_masked.get(layer, ()) and j != i)]
                s = [qi @ _rotate(k[j, kv * d_head:(kv + 1) * d_head], j, c.rope_base)
                     / math.sqrt(d_head) for j in allowed]
                top = max(s)
                e = [math.exp(v_ - top) for v_ in s]
                total = math.fsum(e)
                out = np.zeros(d_head)
                for j, w in zip(allowed, e):
                    if j not in values_zeroed.get(layer, ()):
                        out += (w / total) * v[j, kv * d_head:(kv + 1) * d_head]
                if (layer, h) in ablate:
                    out = np.zeros(d_head) if ablate[(layer, h)] is None else ablate[
                        (layer, h)][i]
                heads[i, h * d_head:(h + 1) * d_head] = out
                if heads_out is not None:
                    heads_out.setdefault(layer, np.zeros((c.n_heads, n, d_head)))[h, i] = out
        x = x + heads @ p["attn.w_o"]
        b = np.array([_rms(row, p["ln2.g"], c.eps) for row in x])
        gate, up = b @ p["mlp.w_gate"], b @ p["mlp.w_up"]
        x = x + (gate / (1 + np.exp(-gate)) * up) @ p["mlp.w_down"]
    return np.array([_rms(row, params["ln_f.g"], c.eps) for row in x]) @ params["w_unembed"]


@st.composite
def small_llms(draw):
    n_kv = draw(st.integers(1, 2))
    n_heads = n_kv * draw(st.integers(1, 3))
    d_head = 2 * draw(st.integers(1, 2))
    config = LLMConfig(vocab_size=7, n_ctx=16, d_model=n_heads * d_head, n_heads=n_heads,
                       n_kv_heads=n_kv, n_layers=draw(st.integers(1, 2)),
                       d_ff=draw(st.integers(2, 5)),
                       rope_base=draw(st.sampled_from([3.0, 100.0, 1e4])))
    n = draw(st.integers(2, 9))
    ids = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    window = draw(st.one_of(st.none(), st.integers(1, n)))
    n_sink = 0 if window is None else draw(st.integers(0, 2))
    return config, np.array(ids), window, n_sink, draw(st.integers(0, 2**16))


def _visible(window, n_sink):
    if window is None:
        return lambda i, j: j <= i
    return lambda i, j: j <= i and (i - j < window or j < n_sink)


@FAST
@given(case=small_llms())
def test_random_llms_forward_and_rolling_caches_match_the_float64_loop(case):
    config, ids, window, n_sink, seed = case
    params = random_llm(config, seed)
    want = reference_llm(params, config, ids, _visible(window, n_sink))
    got = llm_forward(params, config, ids, window=window, n_sink=n_sink).logits
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    cached, caches = prefill(params, config, ids, window=window, n_sink=n_sink)
    np.testing.assert_allclose(cached, want, rtol=1e-10, atol=1e-10)
    if window is not None:  # the rolling cache keeps at most n_sink + window tokens
        assert caches[0].length <= n_sink + window
        assert caches[0].keys.shape[-3] == config.n_kv_heads


@FAST
@given(case=small_llms(), pick=st.integers(0, 2**16))
def test_random_llms_interventions_match_the_float64_loop(case, pick):
    config, ids, _, _, seed = case
    params = random_llm(config, seed)
    g = rng_for(pick)
    n, layer = len(ids), int(g.integers(config.n_layers))
    keys = [int(k) for k in g.choice(n, size=min(n, 2), replace=False)]
    head = int(g.integers(config.n_heads))
    mean = g.standard_normal((n, config.d_head))
    for options, ref in (
            ({"keys_masked": {layer: keys}}, {"keys_masked": {layer: keys}}),
            ({"values_zeroed": {layer: keys}}, {"values_zeroed": {layer: keys}}),
            ({"ablate": {(layer, head): None}}, {"ablate": {(layer, head): None}}),
            ({"ablate": {(layer, head): mean}}, {"ablate": {(layer, head): mean}})):
        want = reference_llm(params, config, ids, _visible(None, 0), **ref)
        got = llm_forward(params, config, ids, **options).logits
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10, err_msg=str(options))


@FAST
@given(case=small_llms(), pick=st.integers(0, 2**16))
def test_random_llms_head_outputs_match_the_float64_loop(case, pick):
    """``heads_of`` (what a mean ablation averages) returns each chosen head's own output,
    computed head by head in the loop, under a window too; its shape alone would not catch a
    wrong split of the merged heads."""
    config, ids, window, n_sink, seed = case
    params = random_llm(config, seed)
    g = rng_for(pick)
    layer = int(g.integers(config.n_layers))
    heads = sorted(int(h) for h in g.choice(config.n_heads, replace=False,
                                            size=int(g.integers(1, config.n_heads + 1))))
    got = llm_forward(params, config, ids, window=window, n_sink=n_sink,
                      heads_of={layer: heads}).heads
    want = {}
    reference_llm(params, config, ids, _visible(window, n_sink), heads_out=want)
    assert set(got) == {layer}
    np.testing.assert_allclose(got[layer], want[layer][heads], rtol=1e-10, atol=1e-12)
    every = llm_forward(params, config, ids, window=window, n_sink=n_sink,
                        heads_of={layer: None}).heads[layer]
    np.testing.assert_allclose(every, want[layer], rtol=1e-10, atol=1e-12)


def test_hooks_return_only_what_was_asked_and_losses_are_the_logits():
    config = LLMConfig(7, 16, 8, 4, 2, 2, 3, 100.0)
    params = random_llm(config, 1)
    ids = np.array([1, 2, 3, 4, 5, 6, 0, 1])
    run = llm_forward(params, config, ids, weights_of={1: [0, 3]}, heads_of={0: None})
    assert set(run.weights) == {1} and run.weights[1].shape == (2, 8, 8)
    full = llm_forward(params, config, ids, weights_of={1: None})
    np.testing.assert_array_equal(run.weights[1], full.weights[1][[0, 3]])
    assert run.heads[0].shape == (4, 8, 2)
    np.testing.assert_allclose(run.weights[1].sum(-1), 1.0, rtol=1e-12)
    # masking key 0: no later query gives it weight; zeroing its value keeps its weight
    masked = llm_forward(params, config, ids, weights_of={0: None}, keys_masked={0: [0]})
    assert (masked.weights[0][:, 1:, 0] == 0).all()
    zeroed = llm_forward(params, config, ids, weights_of={0: None}, values_zeroed={0: [0]})
    np.testing.assert_array_equal(zeroed.weights[0], full_w0 := llm_forward(
        params, config, ids, weights_of={0: None}).weights[0])
    assert full_w0[:, 1:, 0].min() > 0
    # the loss of each prediction, from the logits of the positions before it
    logits = llm_forward(params, config, ids[:-1]).logits
    want = [-(z[t] - math.log(math.fsum(np.exp(z)))) for z, t in zip(logits, ids[1:])]
    np.testing.assert_allclose(llm_losses(params, config, ids), want, rtol=1e-10)


@pytest.mark.parametrize("call, error, match", [
    (lambda p, c: llm_forward(p, c, [1, 2], weights_of={5: None}), ValueError,
     r"weights_of's keys must be layers 0..1"),
    (lambda p, c: llm_forward(p, c, [1, 2], keys_masked={0: [2]}), ValueError,
     r"keys_masked\[0\] must be key positions in 0..1"),
    (lambda p, c: llm_forward(p, c, [1, 2], heads_of={0: [4]}), ValueError,
     r"heads_of\[0\] must be None .* 0..3"),
    (lambda p, c: llm_forward(p, c, [1, 2], ablate={(0, 9): None}), ValueError,
     r"ablate's keys must be \(layer, head\)"),
    (lambda p, c: llm_forward(p, c, [1, 2], n_sink=2), ValueError, r"n_sink = 2 needs a window"),
    (lambda p, c: llm_forward(p, c, [1, 9]), ValueError, r"ids"),
    (lambda p, c: llm_forward({}, c, [1, 2]), ValueError, r"params is missing 'wte'"),
    (lambda p, c: llm_forward(p, "c", [1, 2]), TypeError, r"config must be an LLMConfig"),
    (lambda p, c: llm_losses(p, c, [1]), ValueError, r"at least 2 tokens"),
])
def test_llm_forward_errors_are_clear(call, error, match):
    config = LLMConfig(7, 16, 8, 4, 2, 2, 3, 100.0)
    params = random_llm(config, 0)
    assert_clear_error(lambda: call(params, config), error, match)


@pytest.mark.parametrize("name, value", [("h1.mlp.w_up", np.nan), ("h0.attn.w_k", np.inf),
                                         ("ln_f.g", -np.inf)])
def test_a_weight_that_is_not_finite_is_named_not_reported_as_an_overflow(name, value):
    """A NaN weight was reported as the logits "overflowed to inf or NaN ... although its
    inputs are finite": the weight is named, by llm_forward, llm_losses and llm_generate."""
    from attn_core.model.llm_generate import llm_generate

    config = LLMConfig(7, 16, 8, 4, 2, 2, 3, 100.0)
    params = random_llm(config, 0)
    params[name] = params[name].copy()
    params[name].flat[1] = value
    pattern = (r"params\[" + repr(name).replace(".", r"\.") + r"\] must hold finite values, "
               r"got " + str(value).replace("-", "-?"))
    for call in (lambda: llm_forward(params, config, [1, 2, 3]),
                 lambda: llm_losses(params, config, [1, 2, 3]),
                 lambda: llm_generate([1, 2, 3], 2, greedy=True, model=(params, config))):
        assert_clear_error(call, ValueError, pattern)
    assert "overflowed" not in _message(lambda: llm_forward(params, config, [1, 2, 3]))


def _message(call):
    with pytest.raises(ValueError) as info:
        call()
    return str(info.value)
