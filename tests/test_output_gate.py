"""output_gate=True: Qiu et al.'s sigmoid gate on each head's attention output (notebook 19).
The block's forward against a float64 loop, its backward and the GPT's against finite
differences, the cached step against the full forward, the checkpoint, bad input by name, and
the measures of attn_core.nn.gate_sinks with the stored runs' slice."""

import math

import numpy as np
import pytest

from attn_core.decoding import empty_cache
from attn_core.nn import BlockOptions, GPTConfig, init_gpt, load_checkpoint, save_checkpoint
from attn_core.nn.block import block_backward, block_forward, block_shapes
from attn_core.nn.data import CharVocab
from attn_core.nn.gate_sinks import (
    first_weights,
    load_gate_runs,
    mean_gates,
    uniform_share,
    zeroed_value_losses,
)
from attn_core.nn.gpt import gpt_forward, gpt_loss_and_grads

import reference as ref

GATED = BlockOptions(2, output_gate=True)


def _params(options, d=8, d_ff=12, seed=0, scale=0.4):
    g = np.random.default_rng(seed)
    return {k: scale * g.standard_normal(s) for k, s in block_shapes(d, d_ff, options).items()}


def _loop_block(x, p, h):
    """One sequence through a gated GPT-2 block, from the formulas: layer norm, each head's
    attention (tests/reference.py's loop, heads concatenated), times sigmoid(ln1 @ w_g + b_g)
    channel by channel, then w_o, the residual, the MLP."""
    d = x.shape[-1]
    a = [ref.ref_layer_norm(r, p["ln1.g"].tolist(), p["ln1.b"].tolist()) for r in x.tolist()]
    heads, _ = ref.multi_head_attention(
        np.array(a), p["attn.w_q"], p["attn.w_k"], p["attn.w_v"], np.eye(d), h,
        mask=np.tri(len(a), dtype=bool),
        biases=(p["attn.b_q"], p["attn.b_k"], p["attn.b_v"], None))
    s = ref.ref_matmul(a, p["attn.w_g"].tolist(), p["attn.b_g"].tolist())
    gated = [[v / (1 + math.exp(-z)) for v, z in zip(hr, sr)] for hr, sr in zip(heads.tolist(), s)]
    att = ref.ref_matmul(gated, p["attn.w_o"].tolist(), p["attn.b_o"].tolist())
    x1 = [[u + v for u, v in zip(r, q)] for r, q in zip(x.tolist(), att)]
    m = [ref.ref_layer_norm(r, p["ln2.g"].tolist(), p["ln2.b"].tolist()) for r in x1]
    hid = [[ref.ref_gelu(v) for v in r] for r in ref.ref_matmul(m, p["mlp.w_in"].tolist(),
                                                               p["mlp.b_in"].tolist())]
    out = ref.ref_matmul(hid, p["mlp.w_out"].tolist(), p["mlp.b_out"].tolist())
    return np.array([[u + v for u, v in zip(r, q)] for r, q in zip(x1, out)])


def test_the_gated_block_equals_a_float64_loop():
    p = _params(GATED)
    x = np.random.default_rng(1).standard_normal((2, 5, 8))
    y, _ = block_forward(x, p, options=GATED)
    for b in range(2):
        np.testing.assert_allclose(y[b], _loop_block(x[b], p, 2), rtol=1e-12, atol=1e-12)


def test_a_gate_held_open_is_the_ungated_block_and_a_shut_one_leaves_only_the_bias():
    plain = BlockOptions(2)
    p = _params(plain)
    x = np.random.default_rng(2).standard_normal((4, 8))
    y_plain, w_plain = block_forward(x, p, options=plain)
    open_ = dict(p, **{"attn.w_g": np.zeros((8, 8)), "attn.b_g": np.full(8, 60.0)})
    y_open, w_open = block_forward(x, open_, options=GATED)  # sigmoid(60) = 1 - 9e-27
    np.testing.assert_allclose(y_open, y_plain, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(w_open, w_plain)  # the gate never touches the weights
    shut = dict(open_, **{"attn.b_g": np.full(8, -60.0)})
    no_attn = dict(p, **{"attn.w_o": np.zeros((8, 8))})  # only b_o reaches the stream
    np.testing.assert_allclose(block_forward(x, shut, options=GATED)[0],
                               block_forward(x, no_attn, options=plain)[0], atol=1e-14)


@pytest.mark.parametrize("options", [
    GATED,
    BlockOptions(2, mlp=None, output_gate=True),
    BlockOptions(4, n_kv_heads=2, norm="rms", mlp="swiglu", bias=False, output_gate=True),
], ids=["gpt2", "attention-only", "rms-swiglu-gqa-nobias"])
def test_the_gated_block_backward_matches_finite_differences(options):
    d_ff = None if options.mlp is None else 12
    p = _params(options, d_ff=d_ff)
    assert ("attn.b_g" in p) == options.bias
    g = np.random.default_rng(3)
    x, grad_y = g.standard_normal((2, 4, 8)), g.standard_normal((2, 4, 8))
    grad_x, grads = block_backward(x, p, None, grad_y, options=options)
    assert set(grads) == set(p)

    def f_x(xx):
        return float((block_forward(xx, p, options=options)[0] * grad_y).sum())
    np.testing.assert_allclose(grad_x, ref.numeric_grad(f_x, x), rtol=1e-6, atol=1e-8)
    for name in ("attn.w_g", "attn.b_g", "attn.w_q", "attn.w_v", "attn.w_o", "ln1.g"):
        if name not in p:
            continue

        def f(w, name=name):
            return float((block_forward(x, dict(p, **{name: w}), options=options)[0]
                          * grad_y).sum())
        np.testing.assert_allclose(grads[name], ref.numeric_grad(f, p[name]), rtol=1e-6,
                                   atol=1e-8, err_msg=name)


def test_the_gated_gpt_gradients_match_finite_differences_and_the_cache_the_full_forward():
    cfg = GPTConfig(vocab_size=11, n_ctx=6, d_model=8, n_heads=2, n_layers=2, output_gate=True)
    p = init_gpt(cfg, np.random.default_rng(0), dtype="float64", std=0.3)
    p = {k: v + 0.3 * np.random.default_rng(9).standard_normal(v.shape) if ".b_g" in k else v
         for k, v in p.items()}  # gates not all at 0.5
    ids = np.random.default_rng(1).integers(0, 11, (2, 6))
    targets = np.random.default_rng(2).integers(0, 11, (2, 6))
    _, grads = gpt_loss_and_grads(p, cfg, ids, targets)
    for name in ("h0.attn.w_g", "h1.attn.b_g", "h0.attn.w_q", "wte"):
        def loss(w, name=name):
            return float(gpt_loss_and_grads(dict(p, **{name: w}), cfg, ids, targets)[0])
        np.testing.assert_allclose(grads[name], ref.numeric_grad(loss, p[name]), rtol=1e-5,
                                   atol=1e-8, err_msg=name)
    # the cached step (one token at a time) against the full forward, block by block
    bp = _params(GATED)
    x = np.random.default_rng(4).standard_normal((5, 8))
    full, _ = block_forward(x, bp, options=GATED)
    cache = empty_cache(4, batch=(2,))
    for i in range(5):
        y, _, cache = block_forward(x[i:i + 1], bp, options=GATED, cache=cache)
        np.testing.assert_allclose(y[0], full[i], rtol=1e-12, atol=1e-12)


def test_the_gate_is_saved_with_the_checkpoint(tmp_path):
    cfg = GPTConfig(vocab_size=3, n_ctx=4, d_model=8, n_heads=2, n_layers=1, output_gate=True)
    p = init_gpt(cfg, np.random.default_rng(0))
    save_checkpoint(tmp_path / "g.npz", p, cfg, CharVocab("abc"))
    ck = load_checkpoint(tmp_path / "g.npz")
    assert ck.config == cfg and ck.config.output_gate
    np.testing.assert_array_equal(ck.params["h0.attn.w_g"], p["h0.attn.w_g"])
    assert "output_gate=True" in repr(cfg) and "output_gate" not in repr(
        GPTConfig(3, 4, 8, 2, 1))


def test_bad_gate_input_is_refused_by_name():
    with pytest.raises(TypeError, match="output_gate"):
        BlockOptions(2, output_gate="yes")
    with pytest.raises(TypeError, match="output_gate"):
        GPTConfig(3, 4, 8, 2, 1, output_gate=1)
    # the gated-delta mixer has no output gate here: refused, not silently ignored
    with pytest.raises(ValueError, match="output_gate.*gated_delta"):
        BlockOptions(2, attention="gated_delta", output_gate=True)
    hybrid = GPTConfig(3, 4, 8, 2, 2, attention=("gated_delta", "softmax"), output_gate=True)
    with pytest.raises(ValueError, match="output_gate.*gated_delta"):
        hybrid.layer_options(0)
    p = _params(GATED)
    x = np.zeros((3, 8))
    with pytest.raises(ValueError, match="attn.w_g"):
        block_forward(x, {k: v for k, v in p.items() if k != "attn.w_g"}, options=GATED)
    with pytest.raises(ValueError, match=r"attn\.w_g.*output_gate=False"):
        block_forward(x, p, options=BlockOptions(2))
    with pytest.raises(ValueError, match=r"attn\.w_g.*\(8, 8\)"):
        block_forward(x, dict(p, **{"attn.w_g": np.zeros((8, 4))}), options=GATED)
    cfg = GPTConfig(vocab_size=5, n_ctx=6, d_model=8, n_heads=2, n_layers=1)
    with pytest.raises(ValueError, match="output gate"):
        mean_gates(init_gpt(cfg, np.random.default_rng(0)), cfg, np.zeros((1, 4), dtype=int))


def test_the_sink_measures_against_loops():
    cfg = GPTConfig(vocab_size=7, n_ctx=8, d_model=8, n_heads=2, n_layers=2, output_gate=True)
    p = init_gpt(cfg, np.random.default_rng(5), dtype="float64", std=0.5)
    ids = np.random.default_rng(6).integers(0, 7, (3, 8))
    assert uniform_share(8) == pytest.approx(sum(1 / (i + 1) for i in range(1, 8)) / 7, abs=0)
    _, weights = gpt_forward(p, cfg, ids)
    got = first_weights(p, cfg, ids, n_queries=5)  # queries 1..4 of the full run (causal)
    for t in range(3):
        for layer in range(2):
            for h in range(2):
                want = sum(weights[layer][t, h, i, 0] for i in range(1, 5)) / 4
                assert got[t, layer, h] == pytest.approx(want, rel=1e-12)
    zl = zeroed_value_losses(p, cfg, ids, [0, 2], slice(3, None))
    logits, _ = gpt_forward(p, cfg, ids[:, :-1])
    lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    base = [-np.mean([lp[t, i, ids[t, i + 1]] for i in range(3, 7)]) for t in range(3)]
    np.testing.assert_allclose(zl[None], base, rtol=1e-12)
    assert not np.allclose(zl[0], zl[None])  # zeroing a value changes the later predictions
    gates = mean_gates(p, cfg, ids)
    assert gates.shape == (2, 2) and np.all((gates > 0) & (gates < 1))
    # the mean over positions 2.. against the block's own gate, sigmoid(ln1 @ w_g + b_g)
    from attn_core.nn.decoder import decoder_forward
    _, _, state = decoder_forward(p, cfg, ids, keep=True)
    ln1 = state["blocks"][1]["ln1"]  # (3, 8, 8)
    g1 = 1 / (1 + np.exp(-(ln1 @ p["h1.attn.w_g"] + p["h1.attn.b_g"])))
    want = g1[:, 2:].reshape(3, 6, 2, 4).mean(axis=(0, 1, 3))
    np.testing.assert_allclose(mean_gates(p, cfg, ids, slice(2, None))[1], want, rtol=1e-12)
    with pytest.raises(ValueError, match="positions"):
        zeroed_value_losses(p, cfg, ids, [7], slice(3, None))
    with pytest.raises(ValueError, match="n_queries"):
        first_weights(p, cfg, ids, n_queries=9)


def test_the_stored_runs_slice():
    import sys
    from pathlib import Path

    from attn_core.nn.induction_run import eval_batches
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import train_gated

    trace, params_of = load_gate_runs()
    # the ungated runs are 14's and 15's stored runs, which the tool's own training reproduced
    # (15's trace keeps its losses to 4 decimals)
    read_back = [r for r in trace["runs"].values() if "source" in r]
    assert {r["part"] for r in read_back} == {"induction", "gpt"}
    assert all(not r["output_gate"] and r["reproduced"] < 1e-4 for r in read_back)
    # the first steps of a gated run, retrained here, give its stored losses
    _, run = train_gated.train_induction(1, True, steps=3)
    np.testing.assert_allclose(run.losses, trace["runs"]["induction.s1.gated"]["losses"][:3],
                               atol=1e-4)
    b = eval_batches()
    for name in ("induction.s0.plain", "induction.s1.gated"):
        p, cfg = params_of(name)
        assert cfg.output_gate == name.endswith("gated")
        p64 = {k: v.astype(np.float64) for k, v in p.items()}
        got = first_weights(p64, cfg, b["no_repeat"][0]).mean(axis=0)
        np.testing.assert_allclose(got, trace["runs"][name]["measures"]
                                   ["first_weight.no_repeat"]["mean"], atol=2e-6)


def test_the_first_weight_figure_draws_the_means_and_refuses_bad_shapes():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attn_core.figures import first_weight_bars
    w = np.array([[[0.6, 0.1], [0.4, 0.2]], [[0.1, 0.1], [0.3, 0.1]]])  # (2 variants, 2 seeds, 2)
    bars = first_weight_bars(w, 0.2, ["a", "b"])
    np.testing.assert_allclose([r.get_height() for r in bars[0]], [0.5, 0.15])
    np.testing.assert_allclose([r.get_height() for r in bars[1]], [0.2, 0.1])
    plt.close("all")
    with pytest.raises(ValueError, match="weights"):
        first_weight_bars(w[:, :, :1], 0.2, ["a", "b"])


def test_gated_init_shares_the_ungated_draws_and_adds_the_gate():
    from attn_core.nn import gated_init
    cfg = GPTConfig(vocab_size=7, n_ctx=6, d_model=8, n_heads=2, n_layers=2, output_gate=True)
    plain = GPTConfig(vocab_size=7, n_ctx=6, d_model=8, n_heads=2, n_layers=2)
    a = gated_init(cfg, lambda: np.random.default_rng(3))
    b = init_gpt(plain, np.random.default_rng(3))
    assert list(a) == list(init_gpt(cfg, np.random.default_rng(3)))  # the gated config's keys
    assert all(np.array_equal(a[k], b[k]) for k in b)
    assert a["h1.attn.w_g"].std() > 0 and not a["h1.attn.b_g"].any()
    with pytest.raises(TypeError, match="rng_of"):
        gated_init(cfg, np.random.default_rng(3))


def test_the_long_runs_are_stored_and_their_first_steps_rerun():
    """The ``induction_long`` part: both variants trained (three times 15's steps), same seeds;
    its first steps re-run, and the plain long run starts as 15's stored run does (same seed,
    same initial weights and batches: only the schedule's length differs)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import train_gated

    trace, params_of = load_gate_runs()
    long = {n: r for n, r in trace["runs"].items() if r["part"] == "induction_long"}
    assert set(long) == {train_gated.run_name("induction_long", s, g)
                         for s in train_gated.INDUCTION_SEEDS for g in (False, True)}
    for name, r in long.items():
        assert r["settings"]["steps"] == train_gated.LONG_STEPS == len(r["losses"])
        assert "source" not in r and r["cpu_seconds"] > 0
        p, cfg = params_of(name)
        assert cfg.output_gate == r["output_gate"] == name.endswith("gated")
    for gate in (False, True):
        _, run = train_gated.train_induction(2, gate, steps=3)
        np.testing.assert_allclose(
            run.losses, long[train_gated.run_name("induction_long", 2, gate)]["losses"][:3],
            atol=1e-4)
    # the warm-up's learning rates do not depend on the run's length: 15's first losses
    short = trace["runs"]["induction.s2.gated"]["losses"][:3]
    np.testing.assert_allclose(long["induction_long.s2.gated"]["losses"][:3], short, atol=1e-4)
