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

from attn_core.nn import GPTConfig
from attn_core.nn.checkpoint import load_checkpoint
from attn_core.nn.induction_run import load_runs
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
    return json.loads(induction_run.LENGTHS_TRACE.read_text())


def test_copy_lengths_trace_records_both_kinds_for_every_seed(lengths):
    kinds = {(r["seed"], r["attention"]) for r in lengths["runs"]}
    seeds = {seed for seed, _ in kinds}
    assert kinds == {(s, a) for s in seeds for a in ("softmax", "linear")}
    assert lengths["lengths"] == list(induction_run.LENGTHS)
    assert all(len(r["second"]) == len(induction_run.LENGTHS) for r in lengths["runs"])


def test_copy_losses_by_length_are_recomputed_from_the_stored_parameters(lengths):
    batches = induction_run.length_batches()
    stored = load_runs()
    linear = GPTConfig(**lengths["config"], attention="linear")
    with np.load(induction_run.LENGTHS_PATH) as f:
        arrays = {k: f[k] for k in f.files}
    for r in lengths["runs"]:
        if r["seed"] != 0:
            continue
        if r["attention"] == "linear":
            params = {k.split("/", 1)[1]: v for k, v in arrays.items()
                      if k.startswith("s0.linear/")}
            config = linear
        else:
            params = stored.params(0, 2, lengths["settings"]["steps"])
            config = stored.config(2)
        got = induction_run.copy_by_length(params, config, batches)
        np.testing.assert_allclose(got["second"], r["second"], rtol=0, atol=ATOL)
        np.testing.assert_allclose(got["first"], r["first"], rtol=0, atol=ATOL)
