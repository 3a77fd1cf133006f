"""Hostile arguments to the tiny GPT's public functions (issue 33): each gets a TypeError or
ValueError that names the argument, never a raw error from deep inside (``len(None)``)."""

import numpy as np
import pytest

from attn_core.nn import GPTConfig
from attn_core.nn.train import train_gpt

from reference import assert_clear_error

CONFIG = GPTConfig(vocab_size=5, n_ctx=4, d_model=8, n_heads=2, n_layers=1)
IDS = np.arange(40) % 5


def _train(**change):
    kwargs = dict(config=CONFIG, train_ids=IDS, val_ids=IDS, steps=1, batch=2, lr=1e-3)
    kwargs.update(change)
    return train_gpt(**kwargs)


@pytest.mark.parametrize("change, exc, pattern", [
    (dict(val_ids=None), ValueError, r"val_ids is None: pass the token ids .* val="),
    (dict(train_ids=None), ValueError, r"train_ids is None: .* sample="),
    (dict(val_ids=[0.5, 1.5] * 20), TypeError, r"val_ids must be integer token ids"),
    (dict(train_ids=IDS + 3), ValueError, r"train_ids must be token ids in 0..4"),
    (dict(val_ids=IDS.reshape(4, 10)), ValueError, r"val_ids must be a 1-D array"),
    (dict(val_ids=IDS[:3]), ValueError, r"val_ids: "),
    (dict(seed="abc"), TypeError, r"seed must be an int >= 0"),
    (dict(seed=-2), ValueError, r"seed must be an int >= 0"),
    (dict(callback=3), TypeError, r"callback must be a function"),
    (dict(sample="windows"), TypeError, r"sample must be a function"),
    (dict(val=[np.zeros((2, 4), int)]), TypeError, r"val must be a list of \(x, y\) batches"),
    (dict(steps=0), ValueError, r"steps must be an integer >= 1"),
])
def test_train_gpt_names_the_bad_argument(change, exc, pattern):
    assert_clear_error(lambda: _train(**change), exc, pattern)


def test_train_gpt_without_val_ids_runs_when_val_gives_the_batches():
    x = (np.arange(8) % 5).reshape(2, 4)
    run = _train(val_ids=None, val=[(x, x)])
    assert np.isfinite(run.val_losses).all()
