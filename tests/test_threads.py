"""One rule for BLAS threads (attn_core.threads), and every path a learner meets follows it.

Each path is called while BLAS is allowed two threads, and the maths inside it reads how many
BLAS threads it has (threadpoolctl): it must be the learner rule's count.
"""

import re
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from attn_core import threads
from attn_core.threads import LEARNER_THREADS, blas_threads, on_learner_threads

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = 2  # what the caller allows; the learner rule must hold inside anyway


def blas_count():
    counts = {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}
    assert len(counts) == 1, counts
    return counts.pop()


@pytest.fixture
def seen():
    return []


def spy(monkeypatch, module, name, seen):
    """Replace ``module.name`` by a wrapper that records the BLAS threads it runs on."""
    original = getattr(module, name)

    def wrapper(*args, **kwargs):
        seen.append(blas_count())
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)


def test_blas_threads_holds_the_limit_and_gives_it_back():
    with blas_threads(OUTSIDE):
        assert blas_count() == OUTSIDE
        with blas_threads():
            assert blas_count() == LEARNER_THREADS
        assert blas_count() == OUTSIDE
        assert on_learner_threads(blas_count)() == LEARNER_THREADS
    for bad in (0, -1, 1.5, True, "1"):
        with pytest.raises(ValueError, match="limit must be a positive int or None"):
            blas_threads(bad)


def test_explorers_update_and_start_on_the_learner_threads(monkeypatch):
    from attn_core.explorers import scaling

    ex_seen = []
    original = scaling.ScalingExplorer._update

    def update(self):
        ex_seen.append(blas_count())
        return original(self)

    monkeypatch.setattr(scaling.ScalingExplorer, "_update", update)
    with blas_threads(OUTSIDE):
        ex = scaling.scaling_explorer()  # the constructor draws the first picture
        ex.controls["d_k"].value = ex.controls["d_k"].options[-1]  # a slider move
        assert blas_count() == OUTSIDE
    assert len(ex_seen) >= 2 and set(ex_seen) == {LEARNER_THREADS}, ex_seen


def test_training_and_generation_run_on_the_learner_threads(monkeypatch, seen):
    import sys

    from attn_core import training
    from attn_core.nn import GPTConfig, generate, init_gpt

    generate_module = sys.modules["attn_core.nn.generate"]

    spy(monkeypatch, training, "loss_and_grads", seen)
    with blas_threads(OUTSIDE):
        training.train(steps=2, seeds=(0,))
    config = GPTConfig(vocab_size=5, n_ctx=8, d_model=8, n_heads=2, n_layers=1)
    params = init_gpt(config, np.random.default_rng(0))
    spy(monkeypatch, generate_module, "forward_cached", seen)
    with blas_threads(OUTSIDE):
        generate(params, config, [1, 2], 3)
    assert seen and set(seen) == {LEARNER_THREADS}, seen


def test_the_gpt_training_loop_runs_on_the_learner_threads(monkeypatch, seen):
    from attn_core.nn import GPTConfig
    from attn_core.nn import train as train_module

    spy(monkeypatch, train_module, "gpt_loss_and_grads", seen)
    config = GPTConfig(vocab_size=5, n_ctx=8, d_model=8, n_heads=2, n_layers=1)
    ids = np.random.default_rng(0).integers(0, 5, 200)
    with blas_threads(OUTSIDE):
        train_module.train_gpt(config, ids, ids, steps=2, batch=2, lr=1e-3, eval_every=2,
                               n_val_batches=1)
    assert seen and set(seen) == {LEARNER_THREADS}, seen


#: Where the course's own code may name a thread count: the rule's module only.
RULE = ROOT / "attn_core" / "threads.py"
SECOND_RULE = re.compile(r"threadpool_limits|ThreadpoolController|OPENBLAS_NUM_THREADS\s*=|"
                         r"set_num_threads|MODEL_THREADS")


def test_no_second_thread_rule_in_the_package_tools_or_notebooks():
    """attn_core, tools/ and the notebooks say how many BLAS threads only through
    attn_core.threads (benchmarks may set their own count: they compare configurations)."""
    files = [*(ROOT / "attn_core").rglob("*.py"), *(ROOT / "tools").glob("*.py"),
             *(ROOT / "notebooks").glob("*.ipynb")]
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in files if p != RULE
             for m in SECOND_RULE.finditer(p.read_text(encoding="utf-8"))]
    assert not found, found
    assert threads.LEARNER_THREADS == 1
