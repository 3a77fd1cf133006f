"""The stored induction runs (tools/train_induction.py): the trace says what the stored
snapshots do.

Every stored snapshot is measured again here (a few forward passes each) and compared
with the trace's numbers at its step: both copies' losses, the in-context learning score
and every head's previous-token and induction score. The trace's settings are the ones the
script trains with, and the first training steps are re-run and compared with the stored
training losses.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

from attn_core.nn import GPTConfig, init_gpt, param_shapes
from attn_core.nn.induction_run import TASK, eval_batches, load_runs, sampler
from attn_core.nn.train import train_gpt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import train_induction  # noqa: E402

RUNS = load_runs()
BATCHES = eval_batches()
SNAPSHOTS = [(r["seed"], r["n_layers"], s) for r in RUNS.trace["runs"] for s in r["snapshot_steps"]]


def test_the_trace_covers_every_seed_and_depth_with_the_scripts_settings():
    found = {(r["seed"], r["n_layers"]) for r in RUNS.trace["runs"]}
    assert found == {(s, d) for s in train_induction.SEEDS for d in train_induction.DEPTHS}
    assert len(train_induction.SEEDS) >= 3
    settings = RUNS.trace["settings"]
    for key, value in train_induction.TRAIN.items():
        assert settings[key] == (list(value) if isinstance(value, tuple) else value), key
    assert RUNS.trace["task"] == {k: list(v) if isinstance(v, tuple) else v
                                  for k, v in TASK.items()}
    assert RUNS.trace["init_std"] == train_induction.INIT_STD


@pytest.mark.parametrize("seed, layers, step", SNAPSHOTS)
def test_a_stored_snapshot_does_what_the_trace_says(seed, layers, step):
    config = RUNS.config(layers)
    params = RUNS.params(seed, layers, step)
    assert {k: v.shape for k, v in params.items()} == param_shapes(config)
    run = RUNS.run(seed, layers)
    i = run["eval_steps"].index(step)
    got = train_induction.measure(params, config, BATCHES)
    for key in ("first", "second", "icl"):
        assert got[key] == pytest.approx(run[key][i], rel=1e-5, abs=1e-6), key
    for key in ("prev", "induction"):
        np.testing.assert_allclose(got[key], run[key][i], rtol=1e-5, atol=1e-6, err_msg=key)


def test_the_first_steps_train_as_stored():
    seed, layers, steps = 0, 2, 3
    config = GPTConfig(TASK["vocab_size"], TASK["n_ctx"], n_layers=layers,
                       **train_induction.MODEL)
    init = init_gpt(config, np.random.default_rng(seed), std=train_induction.INIT_STD)
    val = [sampler()(np.random.default_rng(TASK["eval_seed"] + 1), 4)]
    run = train_gpt(config, None, None, seed=seed, params=init, sample=sampler(), val=val,
                    **dict(train_induction.TRAIN, steps=steps, warmup=50,
                           eval_every=steps))
    stored = RUNS.run(seed, layers)["train_losses"][:steps]
    # the stored run's schedule has its full length: only the warmup steps coincide
    np.testing.assert_allclose(run.losses, stored, atol=6e-5)
