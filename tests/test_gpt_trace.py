"""The stored full run (attn_core/data/gpt-trace.json, gpt-checkpoint.npz; issue 21): its first
steps re-run from the same seed give the stored losses, the checkpoint loads and scores the
stored final validation loss, and the model beats both baselines.

Tolerance for the re-run, ``ATOL = 1e-4`` nats on each of the first ``STEPS = 20`` training
losses and on the step-0 validation loss. float32 training diverges in the last bits across
CPUs (numpy's SIMD kernels and OpenBLAS round differently), so the stored numbers cannot be
compared exactly. Measured on the machine that wrote the trace (Xeon with AVX-512,
numpy 2.4.6), over these 20 steps:

* every initial weight perturbed by one ulp (``ATTN_CORE_PERTURB_INIT=1``): largest change
  of a training loss 6.3e-8, of a validation loss 6.4e-8;
* ``NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL
  AVX512_SPR"`` (numpy's AVX-512 kernels off): no change at all (0.0);
* two BLAS threads instead of the stored run's one: largest change 5.2e-9.

The margin, 1e-4, is 1500 times the measured spread (a CPU whose BLAS rounds differently in
every product perturbs every step, not only the start, hence the wide margin) and still
below what a real change shows, measured the same way: a learning rate 10 % higher changes
the losses of steps 1, 2, 3, 4 by 5.7e-4, 1.7e-3, 3.2e-3, 5.5e-3; another seed changes the
first loss by 3e-2.
The checkpoint's validation loss is a forward pass only (no training to amplify rounding):
the same 1e-4 holds with a wider margin still.
"""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from attn_core.nn.baselines import bigram_loss, unigram_loss
from attn_core.nn.checkpoint import CHECKPOINT_PATH, load_checkpoint
from attn_core.nn.train import evaluate, train_gpt, validation_batches

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import train_gpt as full_run  # noqa: E402

TRACE = ROOT / "attn_core" / "data" / "gpt-trace.json"
STEPS = 20
ATOL = 1e-4


@pytest.fixture(scope="module")
def trace():
    return json.loads(TRACE.read_text())


@pytest.fixture(scope="module")
def data():
    return full_run.data()


def test_trace_records_what_it_should(trace):
    for key in ("losses", "val_losses", "eval_steps", "unigram_loss", "bigram_loss",
                "settings", "seed", "commit", "seconds", "numpy", "cpu", "config"):
        assert key in trace, key
    s = trace["settings"]
    assert len(trace["losses"]) == s["steps"] and trace["eval_steps"][0] == 0
    assert trace["eval_steps"][-1] == s["steps"]
    assert len(trace["val_losses"]) == len(trace["eval_steps"])
    assert trace["seed"] == full_run.SEED and s["dtype"] == "float32"
    assert trace["cpu"]["numpy_features"]


def test_the_script_still_describes_the_stored_run(trace, data):
    """tools/train_gpt.py's settings are those of the stored run (else re-run it)."""
    vocab, _, _ = data
    config = full_run.config_for(vocab)
    assert trace["config"] == dict(vocab_size=config.vocab_size, n_ctx=config.n_ctx,
                                   d_model=config.d_model, n_heads=config.n_heads,
                                   n_layers=config.n_layers, d_ff=config.d_ff)
    for key, value in full_run.TRAIN.items():
        stored = trace["settings"][key]
        assert stored == (list(value) if isinstance(value, tuple) else value), key


@pytest.mark.slow
def test_first_steps_rerun_match_the_stored_trace(trace, data):
    vocab, train_ids, val_ids = data
    s = trace["settings"]
    assert s["warmup"] >= STEPS  # the first STEPS learning rates do not depend on `steps`
    args = {k: s[k] for k in ("batch", "lr", "warmup", "n_val_batches", "max_grad_norm",
                              "weight_decay", "dtype")}
    run = train_gpt(full_run.config_for(vocab), train_ids, val_ids, steps=STEPS,
                    seed=trace["seed"], eval_every=STEPS, betas=tuple(s["betas"]), **args)
    np.testing.assert_allclose(run.lrs, trace["lrs"][:STEPS], rtol=1e-15)
    np.testing.assert_allclose(run.losses, trace["losses"][:STEPS], rtol=0, atol=ATOL)
    np.testing.assert_allclose(run.val_losses[0], trace["val_losses"][0], rtol=0, atol=ATOL)
    assert run.losses[-1] < run.losses[0] - 0.5  # it learns in 20 steps


def test_checkpoint_loads_and_scores_the_final_validation_loss(trace, data):
    vocab, _, val_ids = data
    ck = load_checkpoint()
    assert ck.vocab == vocab and ck.config == full_run.config_for(vocab)
    assert ck.meta["commit"] == trace["commit"] and ck.meta["seed"] == trace["seed"]
    s = trace["settings"]
    batches = validation_batches(val_ids, s["n_val_batches"], s["batch"], ck.config.n_ctx,
                                 trace["seed"])
    assert evaluate(ck.params, ck.config, batches) == pytest.approx(trace["val_losses"][-1],
                                                                    abs=ATOL)
    assert CHECKPOINT_PATH.stat().st_size < 2_000_000


def test_the_model_beats_both_baselines(trace, data):
    vocab, train_ids, val_ids = data
    uni = unigram_loss(train_ids, val_ids, len(vocab))
    bi = bigram_loss(train_ids, val_ids, len(vocab))
    assert trace["unigram_loss"] == pytest.approx(uni, rel=1e-12)
    assert trace["bigram_loss"] == pytest.approx(bi, rel=1e-12)
    assert trace["val_losses"][-1] < bi - 0.3 < uni
