"""The stored runs of notebook 18: the tiny GPT with linear attention
(attn_core/data/gpt-linear-trace.json, gpt-linear-checkpoint.npz, from ``tools/train_gpt.py
--attention linear``) and the copy task by length (copy-lengths-trace.json, copy-lengths.npz,
from ``tools/train_induction.py --lengths``): a slice of each recomputed.

Tolerances as tests/test_gpt_trace.py explains (float32 training, ``ATOL = 1e-4`` nats on the
re-run first steps and on forward-only losses).
"""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from attn_core.nn.checkpoint import load_checkpoint
from attn_core.nn.copy_lengths import (
    LENGTHS,
    LENGTHS_TRACE,
    copy_attention,
    length_batches,
    load_copy_lengths,
)
from attn_core.nn.train import evaluate, train_gpt, validation_batches

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import train_gpt as full_run  # noqa: E402
import train_induction as induction_run  # noqa: E402

DATA = ROOT / "attn_core" / "data"
STEPS = 20
ATOL = 1e-4


@pytest.fixture(scope="module")
def trace():
    return json.loads((DATA / "gpt-linear-trace.json").read_text())


@pytest.fixture(scope="module")
def data():
    return full_run.data()


def test_the_linear_run_used_the_softmax_runs_settings(trace, data):
    soft = json.loads((DATA / "gpt-trace.json").read_text())
    vocab, _, _ = data
    config = full_run.config_for(vocab, "linear")
    assert trace["config"] == dict(soft["config"], attention="linear")
    assert trace["config"]["n_layers"] == config.n_layers and config.attention == "linear"
    assert trace["settings"] == soft["settings"] and trace["seed"] == soft["seed"]
    assert len(trace["losses"]) == trace["settings"]["steps"]


@pytest.mark.slow
def test_first_linear_steps_rerun_match_the_stored_trace(trace, data):
    vocab, train_ids, val_ids = data
    s = trace["settings"]
    args = {k: s[k] for k in ("batch", "lr", "warmup", "n_val_batches", "max_grad_norm",
                              "weight_decay", "dtype")}
    run = train_gpt(full_run.config_for(vocab, "linear"), train_ids, val_ids, steps=STEPS,
                    seed=trace["seed"], eval_every=STEPS, betas=tuple(s["betas"]), **args)
    np.testing.assert_allclose(run.losses, trace["losses"][:STEPS], rtol=0, atol=ATOL)
    np.testing.assert_allclose(run.val_losses[0], trace["val_losses"][0], rtol=0, atol=ATOL)


def test_linear_checkpoint_scores_its_final_validation_loss(trace, data):
    vocab, _, val_ids = data
    ck = load_checkpoint(DATA / "gpt-linear-checkpoint.npz")
    assert ck.config == full_run.config_for(vocab, "linear") and ck.vocab == vocab
    s = trace["settings"]
    batches = validation_batches(val_ids, s["n_val_batches"], s["batch"], ck.config.n_ctx,
                                 trace["seed"])
    assert evaluate(ck.params, ck.config, batches) == pytest.approx(trace["val_losses"][-1],
                                                                    abs=ATOL)


@pytest.fixture(scope="module")
def lengths():
    return json.loads(LENGTHS_TRACE.read_text())


KINDS = {("softmax", 2), ("linear", 2), ("linear", 1), ("softmax", 1)}


def test_copy_lengths_trace_records_every_kind_for_every_seed(lengths):
    kinds = {(r["seed"], r["attention"], r["n_heads"]) for r in lengths["runs"]}
    assert kinds == {(s, a, h) for s in lengths["seeds"] for a, h in KINDS}
    assert lengths["lengths"] == list(LENGTHS) == list(induction_run.LENGTHS)
    assert all(len(r["second"]) == len(LENGTHS) for r in lengths["runs"])
    assert "+dirty" not in lengths["commit"]  # trained from a committed tree


def test_the_one_head_control_has_the_same_parameters_and_twice_the_state(lengths):
    sweep = load_copy_lengths()
    two, one = sweep.params(0, "linear", 2), sweep.params(0, "linear", 1)
    assert {k: v.shape for k, v in two.items()} == {k: v.shape for k, v in one.items()}
    d = lengths["config"]["d_model"]
    s_numbers = {h: h * (d // h) ** 2 for h in (1, 2)}  # S per layer: h heads of d_h x d_h
    z_numbers = {h: h * (d // h) for h in (1, 2)}  # z: one d_h vector per head
    assert s_numbers[1] == 2 * s_numbers[2] and z_numbers[1] == z_numbers[2]


def test_copy_losses_by_length_are_recomputed_from_the_stored_parameters(lengths):
    batches = length_batches()
    sweep = load_copy_lengths()
    for r in lengths["runs"]:
        if r["seed"] != 0:
            continue
        kind, heads = r["attention"], r["n_heads"]
        got = induction_run.copy_by_length(sweep.params(0, kind, heads),
                                           sweep.config(kind, heads), batches)
        np.testing.assert_allclose(got["second"], r["second"], rtol=0, atol=ATOL)
        np.testing.assert_allclose(got["first"], r["first"], rtol=0, atol=ATOL)


def test_copy_attention_against_a_loop_over_the_weights():
    """The weight on the copied position: for each query i whose token occurred before, the
    weight on the keys j that followed an earlier occurrence (x[j - 1] == x[i]), averaged
    over those queries, then over the sequences (in the second copy: the key i - L + 1)."""
    from attn_core.nn import gpt_forward
    sweep = load_copy_lengths()
    L = 6
    ids, labels = length_batches(lengths=(L,), batch=16)[L]
    for kind, heads in sorted(KINDS):
        params, config = sweep.params(1, kind, heads), sweep.config(kind, heads)
        got = copy_attention(params, config, ids, labels)
        _, weights = gpt_forward(params, config, ids[:, :-1])
        last, first = weights[-1], weights[0]  # (batch, heads, n, n)
        x = ids[:, :-1]
        copied = max(np.mean([np.mean([sum(last[b, h, i, j] for j in range(1, i + 1)
                                           if x[b, j - 1] == x[b, i])
                                       for i in range(len(x[b]))
                                       if any(x[b, j - 1] == x[b, i] for j in range(1, i + 1))])
                              for b in range(len(ids))]) for h in range(heads))
        prev = max(np.mean([first[b, h, i, i - 1] for b in range(len(ids))
                            for i in range(1, 2 * L - 1)]) for h in range(heads))
        top = max(np.mean([last[b, h, i].max() for b in range(len(ids))
                           for i in range(L, 2 * L - 1)]) for h in range(heads))
        assert got["copied"] == pytest.approx(copied, abs=1e-6), (kind, heads)
        assert got["prev"] == pytest.approx(prev, abs=1e-6), (kind, heads)
        assert got["top"] == pytest.approx(top, abs=1e-6), (kind, heads)
