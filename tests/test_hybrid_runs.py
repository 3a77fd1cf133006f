"""The stored runs of tools/train_hybrid.py (notebook 19's hybrid and its two peers): what the
traces record, the hybrid's first steps re-run from the same seed, and the stored measures
recomputed from the checkpoints.

Tolerances as tests/test_gpt_trace.py argues them for the tiny GPT's float32 run: 1e-4 nats on
a re-run training loss or a recomputed loss (rounding across CPUs is far below; a changed
learning rate or seed moves the first losses by 5e-4 and more); an accuracy within one string's
share of a character (argmax ties may break differently on another CPU).
"""

import sys
from pathlib import Path

import numpy as np
import pytest

from attn_core.nn.hybrid import HYBRID_MODELS, copy_recall, load_hybrid_run, window_losses
from attn_core.nn.train import train_gpt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import train_hybrid as tool  # noqa: E402

STEPS = 5
ATOL = 1e-4


@pytest.fixture(scope="module")
def data():
    return tool.data()


@pytest.mark.parametrize("model", list(HYBRID_MODELS))
def test_each_trace_records_its_run(model, data):
    vocab, _, _ = data
    ck, tr = load_hybrid_run(model)
    assert ck.config == tool.config_for(vocab, model) and ck.vocab == vocab
    assert tuple(tr["layers"]) == HYBRID_MODELS[model] == ck.config.layers
    s = tr["settings"]
    assert s["steps"] == tool.STEPS == len(tr["losses"]) and tr["seed"] == tool.SEED
    for key, value in tool.TRAIN.items():
        if key != "steps":
            assert s[key] == (list(value) if isinstance(value, tuple) else value), key
    # the stored runs started from fb94c9b; their traces name the HEAD at their end
    # (attn_core/data/README.md), a tool bug fixed since
    assert len(tr["commit"].split("+")[0]) == 40 and tr["cpu_seconds"] > 0
    assert tr["eval_steps"][-1] == s["steps"]
    m = tr["measures"]
    assert m["n_params"] == sum(a.size for a in ck.params.values())
    assert m["val_loss"] < tr["val_losses"][0] - 1  # it learned


@pytest.mark.slow
def test_the_hybrids_first_steps_rerun_match_the_trace(data):
    _, train_ids, val_ids = data
    ck, tr = load_hybrid_run("hybrid")
    s = tr["settings"]
    assert s["warmup"] >= STEPS  # the first learning rates do not depend on `steps`
    run = train_gpt(ck.config, train_ids, val_ids, steps=STEPS, batch=s["batch"], lr=s["lr"],
                    seed=tr["seed"], dtype=s["dtype"], warmup=s["warmup"], eval_every=STEPS,
                    n_val_batches=s["n_val_batches"], max_grad_norm=s["max_grad_norm"],
                    weight_decay=s["weight_decay"], betas=tuple(s["betas"]))
    np.testing.assert_allclose(run.losses, tr["losses"][:STEPS], rtol=0, atol=ATOL)
    np.testing.assert_allclose(run.val_losses[0], tr["val_losses"][0], rtol=0, atol=ATOL)


@pytest.mark.parametrize("model", list(HYBRID_MODELS))
def test_the_stored_recall_is_recomputed(model):
    ck, tr = load_hybrid_run(model)
    stored = tr["measures"]["recall"]
    again = copy_recall(ck.params, ck.config, batch=stored["batch"], seed=stored["seed"],
                        segment=stored["segment"])
    one_char = 1 / (stored["batch"] * (stored["segment"] - 1))
    for key in ("first_acc", "second_acc"):
        assert again[key] == pytest.approx(stored[key], abs=2 * one_char), key
    for key in ("first_loss", "second_loss"):
        assert again[key] == pytest.approx(stored[key], abs=ATOL), key


@pytest.mark.slow  # all 661 windows through three 4-layer models (make test and CI run it)
def test_the_hybrids_validation_loss_is_recomputed(data):
    _, _, val_ids = data
    ck, tr = load_hybrid_run("hybrid")
    w = window_losses(ck.params, ck.config, val_ids)
    assert len(w) == tr["measures"]["val_windows"]
    assert w.mean() == pytest.approx(tr["measures"]["val_loss"], abs=ATOL)
    assert w.std(ddof=1) / np.sqrt(len(w)) == pytest.approx(tr["measures"]["val_loss_sem"],
                                                             rel=1e-3)
