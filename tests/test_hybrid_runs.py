"""The stored runs of tools/train_hybrid.py (notebook 19's hybrid and its two peers, three seeds
each, and the same three stacks trained on the copy task): what the traces record, first steps
re-run from the same seeds, and the stored measures recomputed from the stored weights.

Tolerances as tests/test_gpt_trace.py argues them for the tiny GPT's float32 run: 1e-4 nats on
a re-run training loss or a recomputed loss (rounding across CPUs is far below; a changed
learning rate or seed moves the first losses by 5e-4 and more); an accuracy within one string's
share of a character (argmax ties may break differently on another CPU).
"""

import sys
from pathlib import Path

import numpy as np
import pytest

from attn_core.nn.hybrid import (
    HYBRID_MODELS,
    HYBRID_SEEDS,
    copy_recall,
    hybrid_copy_model,
    load_hybrid_copy,
    load_hybrid_run,
    load_hybrid_traces,
    window_losses,
)
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
    ck, tr0 = load_hybrid_run(model)
    assert ck.config == tool.config_for(vocab, model) and ck.vocab == vocab
    traces = load_hybrid_traces(model)
    assert traces[0] == tr0 and [t["seed"] for t in traces] == list(HYBRID_SEEDS)
    for tr in traces:
        assert tuple(tr["layers"]) == HYBRID_MODELS[model] == ck.config.layers
        s = tr["settings"]
        assert s["steps"] == tool.STEPS == len(tr["losses"]) == 2000
        for key, value in tool.TRAIN.items():
            if key != "steps":
                assert s[key] == (list(value) if isinstance(value, tuple) else value), key
        # read at the start; "+dirty" in the runs that started beside their siblings' new
        # outputs (attn_core/data/README.md: the code was the commit's)
        assert len(tr["commit"].split("+")[0]) == 40 and tr["cpu_seconds"] > 0
        assert tr["eval_steps"][-1] == s["steps"]
        m = tr["measures"]
        assert m["n_params"] == sum(a.size for a in ck.params.values())
        assert m["val_loss"] < tr["val_losses"][0] - 1  # it learned
    # the seeds are different runs: their first losses differ (the initial weights do)
    firsts = [t["losses"][0] for t in traces]
    assert len(set(np.round(firsts, 6))) == len(firsts)


def _rerun(config, trace, train_ids, val_ids):
    s = trace["settings"]
    assert s["warmup"] >= STEPS  # the first learning rates do not depend on `steps`
    return train_gpt(config, train_ids, val_ids, steps=STEPS, batch=s["batch"], lr=s["lr"],
                     seed=trace["seed"], dtype=s["dtype"], warmup=s["warmup"],
                     eval_every=STEPS, n_val_batches=s["n_val_batches"],
                     max_grad_norm=s["max_grad_norm"], weight_decay=s["weight_decay"],
                     betas=tuple(s["betas"]))


@pytest.mark.slow
@pytest.mark.parametrize("seed", HYBRID_SEEDS)
def test_the_hybrids_first_steps_rerun_match_the_trace(seed, data):
    _, train_ids, val_ids = data
    ck, _ = load_hybrid_run("hybrid")
    tr = load_hybrid_traces("hybrid")[seed]
    run = _rerun(ck.config, tr, train_ids, val_ids)
    np.testing.assert_allclose(run.losses, tr["losses"][:STEPS], rtol=0, atol=ATOL)
    np.testing.assert_allclose(run.val_losses[0], tr["val_losses"][0], rtol=0, atol=ATOL)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["softmax", "linear"])
def test_the_peers_other_seeds_rerun_match_their_traces(model, data):
    _, train_ids, val_ids = data
    ck, _ = load_hybrid_run(model)
    for tr in load_hybrid_traces(model)[1:]:
        run = _rerun(ck.config, tr, train_ids, val_ids)
        np.testing.assert_allclose(run.losses, tr["losses"][:STEPS], rtol=0, atol=ATOL)


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


# --- the copy task (tools/train_hybrid.py --copy) ---------------------------------------------

#: The copy traces store training losses rounded to 4 decimals.
COPY_ATOL = ATOL + 5e-5


def test_the_copy_trace_records_its_runs():
    import train_induction as ti

    trace, arrays = load_hybrid_copy()
    assert trace["seeds"] == list(HYBRID_SEEDS)
    assert "+dirty" not in trace["commit"] and len(trace["commit"]) == 40
    assert trace["settings"] == {k: list(v) if isinstance(v, tuple) else v
                                 for k, v in ti.TRAIN.items()}
    assert trace["config"] == dict(vocab_size=ti.TASK["vocab_size"], n_ctx=ti.TASK["n_ctx"],
                                   **ti.MODEL, n_layers=tool.N_LAYERS)
    got = {(r["seed"], r["model"]) for r in trace["runs"]}
    assert got == {(s, m) for s in HYBRID_SEEDS for m in HYBRID_MODELS}
    from attn_core.nn.gpt import param_shapes
    for r in trace["runs"]:
        params, config = hybrid_copy_model(trace, arrays, r["seed"], r["model"])
        assert tuple(r["layers"]) == config.layers == HYBRID_MODELS[r["model"]]
        assert {k: v.shape for k, v in params.items()} == param_shapes(config)
        assert len(r["train_losses"]) == trace["settings"]["steps"]
        assert len(r["first"]) == len(r["second"]) == len(trace["lengths"])


@pytest.mark.parametrize("model", list(HYBRID_MODELS))
def test_the_copy_runs_first_steps_rerun(model):
    import train_induction as ti

    trace, _ = load_hybrid_copy()
    run = next(r for r in trace["runs"] if (r["seed"], r["model"]) == (0, model))
    _, again = ti.train_variant(0, HYBRID_MODELS[model], ti.MODEL["n_heads"], 3,
                                n_layers=tool.N_LAYERS)
    np.testing.assert_allclose(again.losses, run["train_losses"][:3], rtol=0, atol=COPY_ATOL)


def _copy_measures_recomputed(seeds):
    import train_induction as ti

    from attn_core.nn.copy_lengths import length_batches

    trace, arrays = load_hybrid_copy()
    batches = length_batches(trace["lengths"], trace["length_batch"])
    for r in trace["runs"]:
        if r["seed"] in seeds:
            params, config = hybrid_copy_model(trace, arrays, r["seed"], r["model"])
            got = ti.copy_by_length(params, config, batches)
            for key in ("first", "second"):  # stored to 5 decimals
                np.testing.assert_allclose(got[key], r[key], rtol=0, atol=ATOL, err_msg=key)


def test_the_copy_measures_are_recomputed_seed_0():
    _copy_measures_recomputed({0})


@pytest.mark.slow
def test_the_copy_measures_are_recomputed_other_seeds():
    _copy_measures_recomputed(set(HYBRID_SEEDS) - {0})


def test_git_commit_is_dirty_for_code_not_for_stored_outputs(tmp_path, monkeypatch):
    """A run started while an earlier run's outputs (attn_core/data/) are uncommitted starts
    from the committed code: clean; a changed tracked file elsewhere makes it dirty."""
    import subprocess

    import train_gpt

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "attn_core" / "data").mkdir(parents=True)
    (tmp_path / "attn_core" / "data" / "run.json").write_text("{}\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    monkeypatch.setattr(train_gpt, "ROOT", tmp_path)
    assert not train_gpt.git_commit().endswith("+dirty")
    (tmp_path / "attn_core" / "data" / "run.json").write_text('{"a": 1}\n')
    assert not train_gpt.git_commit().endswith("+dirty")
    (tmp_path / "code.py").write_text("x = 2\n")
    assert train_gpt.git_commit().endswith("+dirty")
