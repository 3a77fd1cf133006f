"""The tiny GPT against a PyTorch re-implementation of the same model, loaded with the same
weights: logits, attention weights, loss and every gradient (torch.autograd); AdamW against
``torch.optim.AdamW`` and clipping against ``torch.nn.utils.clip_grad_norm_``.

The torch model is written from the formulas with torch's own layers: ``F.layer_norm``
(what ``nn.LayerNorm`` calls, eps 1e-5), ``F.gelu(approximate="tanh")``, causal attention
both written out (softmax of masked scores, to compare the weights) and through
``F.scaled_dot_product_attention(is_causal=True)``, and ``F.cross_entropy``.

Tolerances from the rounding error model of ``tests/tolerances.py``:
``|ours - torch| <= c L sqrt(K) u (|torch| + s)``, ``s`` the array's root mean square, with
``K = d_ff`` (the longest inner dimension) and ``L`` the chained products: six per block (the
projections, the scores, the weighted sum, the output projection, the MLP's two) and the
unembedding, doubled for gradients (the backward pass adds as many). In float32 that is about
7e-5 relative for the logits and 1.4e-4 for the gradients (measured: 3e-5 relative on the
gradients' larger entries, 1.2e-6 of the array's largest entry everywhere); in float64 about
3e-13 (measured 4e-14). The optimiser's and the clip's arithmetic is elementwise: ``K = 1``,
one "layer" per step.

The gradient of the key bias ``b_k`` is exactly zero in exact arithmetic (it adds ``q . b_k``
to every score of a row, which the softmax ignores): both sides give rounding noise there,
so it is checked to be at rounding level instead of compared.
"""

import math

import numpy as np
import pytest

from attn_core.nn import AdamW, GPTConfig, clip_grad_norm, gpt_forward, gpt_loss_and_grads, init_gpt

from tolerances import rounding_tolerance

CONFIG = GPTConfig(vocab_size=13, n_ctx=12, d_model=32, n_heads=4, n_layers=2)


#: Chained products of the forward pass (tests/tolerances.py): six per block, the unembedding.
FORWARD_DEPTH = 6 * CONFIG.n_layers + 1


def tolerance(dtype, reference, depth=FORWARD_DEPTH, inner=CONFIG.d_ff):
    return rounding_tolerance(reference, inner=inner, depth=depth, dtype=dtype)


def make_problem(dtype, batch, seed=0, spread=0.05):
    """Initial weights (GPT-2's) plus a little noise on every array, so gains, biases and
    the residual projections all matter; random ids and targets."""
    g = np.random.default_rng(seed)
    params = init_gpt(CONFIG, g, dtype="float64")
    params = {k: (v + spread * g.standard_normal(v.shape)).astype(dtype)
              for k, v in params.items()}
    ids = g.integers(0, CONFIG.vocab_size, (*batch, CONFIG.n_ctx))
    targets = g.integers(0, CONFIG.vocab_size, (*batch, CONFIG.n_ctx))
    return params, ids, targets


def torch_gpt(torch, p, config, ids, sdpa=False):
    """The same model in PyTorch: ``(logits, weights per layer or None with sdpa)``."""
    F = torch.nn.functional
    d, h = config.d_model, config.n_heads
    n = ids.shape[-1]
    x = p["wte"][ids] + p["wpe"][:n]  # (..., n, d)
    weights = []

    def heads(t):  # (..., n, d) -> (..., h, n, d_head)
        return t.reshape(*t.shape[:-1], h, d // h).transpose(-3, -2)

    for i in range(config.n_layers):
        a = F.layer_norm(x, (d,), p[f"h{i}.ln1.g"], p[f"h{i}.ln1.b"], eps=1e-5)
        q, k, v = (heads(a @ p[f"h{i}.attn.w_{c}"] + p[f"h{i}.attn.b_{c}"]) for c in "qkv")
        if sdpa:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            weights.append(None)
        else:
            s = q @ k.transpose(-1, -2) / math.sqrt(d // h)  # (..., h, n, n)
            causal = torch.ones(n, n, dtype=torch.bool).tril()
            w = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1)
            o = w @ v
            weights.append(w)
        o = o.transpose(-3, -2).reshape(*x.shape)  # (..., h, n, d_head) -> (..., n, d)
        x = x + o @ p[f"h{i}.attn.w_o"] + p[f"h{i}.attn.b_o"]
        m = F.layer_norm(x, (d,), p[f"h{i}.ln2.g"], p[f"h{i}.ln2.b"], eps=1e-5)
        hidden = F.gelu(m @ p[f"h{i}.mlp.w_in"] + p[f"h{i}.mlp.b_in"], approximate="tanh")
        x = x + hidden @ p[f"h{i}.mlp.w_out"] + p[f"h{i}.mlp.b_out"]
    x = F.layer_norm(x, (d,), p["ln_f.g"], p["ln_f.b"], eps=1e-5)
    return x @ p["w_unembed"], weights


def leaves(torch, params):
    return {k: torch.from_numpy(np.ascontiguousarray(v)).requires_grad_(True)
            for k, v in params.items()}


@pytest.mark.parametrize("sdpa", [False, True], ids=["explicit", "sdpa"])
@pytest.mark.parametrize("batch", [(3,), (2, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_logits_loss_and_every_gradient_match_autograd(requires_torch, dtype, batch, sdpa):
    torch = requires_torch
    params, ids, targets = make_problem(dtype, batch)
    tp = leaves(torch, params)
    t_ids = torch.from_numpy(ids)
    t_logits, t_weights = torch_gpt(torch, tp, CONFIG, t_ids, sdpa=sdpa)
    t_loss = torch.nn.functional.cross_entropy(
        t_logits.reshape(-1, CONFIG.vocab_size), torch.from_numpy(targets).reshape(-1))
    t_loss.backward()

    logits, weights = gpt_forward(params, CONFIG, ids)
    assert logits.dtype == dtype
    ref = t_logits.detach().numpy()
    np.testing.assert_allclose(logits, ref, **tolerance(dtype, ref))
    for w, tw in zip(weights, t_weights):
        if tw is not None:
            np.testing.assert_allclose(w, tw.detach().numpy(),
                                       **tolerance(dtype, tw.detach().numpy()))
    loss, grads = gpt_loss_and_grads(params, CONFIG, ids, targets)
    rel = 1e-12 if dtype == np.float64 else 1e-5
    assert loss == pytest.approx(float(t_loss.detach()), rel=rel)
    eps = np.finfo(dtype).eps
    for name, g in grads.items():
        assert g.dtype == dtype and g.shape == params[name].shape, name
        theirs = tp[name].grad.numpy()
        if name.endswith("attn.b_k"):  # zero in exact arithmetic: rounding level on both sides
            scale = float(np.abs(grads[name.replace("b_k", "w_k")]).max())
            assert np.abs(g).max() < 100 * eps * scale and np.abs(theirs).max() < 100 * eps * scale
            continue
        np.testing.assert_allclose(g, theirs, **tolerance(dtype, theirs, 2 * FORWARD_DEPTH),
                                   err_msg=name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adamw_and_clipping_match_torch(requires_torch, dtype):
    torch = requires_torch
    g = np.random.default_rng(1)
    shapes = {"w": (4, 3), "b": (3,)}
    params = {k: g.standard_normal(s).astype(dtype) for k, s in shapes.items()}
    steps = [{k: (3 * g.standard_normal(s)).astype(dtype) for k, s in shapes.items()}
             for _ in range(6)]
    tp = {k: torch.from_numpy(v.copy()).requires_grad_(True) for k, v in params.items()}
    opt_t = torch.optim.AdamW(list(tp.values()), lr=0.02, betas=(0.9, 0.95), eps=1e-8,
                              weight_decay=0.1)
    opt = AdamW(0.02, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    for step, grads in enumerate(steps, start=1):
        clipped, norm = clip_grad_norm(grads, max_norm=2.0)
        for k in tp:
            tp[k].grad = torch.from_numpy(grads[k].copy())
        t_norm = torch.nn.utils.clip_grad_norm_(list(tp.values()), max_norm=2.0)
        assert norm == pytest.approx(float(t_norm), rel=1e-12 if dtype == np.float64 else 1e-6)
        for k in tp:
            np.testing.assert_allclose(clipped[k], tp[k].grad.numpy(),
                                       **tolerance(dtype, tp[k].grad.numpy(), 1, inner=1))
        opt.step(params, clipped)
        opt_t.step()
        for k in tp:
            ref = tp[k].detach().numpy()
            np.testing.assert_allclose(params[k], ref, **tolerance(dtype, ref, step, inner=1),
                                       err_msg=k)
