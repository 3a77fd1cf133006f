"""Hostile arguments to the tiny GPT's public functions (issue 33): each gets a TypeError or
ValueError that names the argument, never a raw error from deep inside (``len(None)``)."""

import re

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


def _params():
    from attn_core.nn import init_gpt

    return init_gpt(CONFIG, np.random.default_rng(0), dtype="float64")


def _cases():
    from attn_core.nn import global_norm, log_softmax
    from attn_core.nn.data import split_corpus
    from attn_core.nn.generate import forward_cached, prefill
    from attn_core.nn.induction_run import (
        ablation_losses,
        ablation_measures,
        copy_losses,
        fall_step,
        find_heads,
        head_scores,
        icl,
        load_runs,
        measures,
        snapshot_states,
    )
    from attn_core.nn.train import evaluate, lr_at, text_loss, validation_batches

    p = _params()
    ids = (np.arange(12) % 5).reshape(2, 6)
    labels = np.zeros((2, 6), int)
    caches = prefill(p, CONFIG, np.array([1, 2]))[1]
    return [
        (lambda: measures(p, "cfg", ids, labels), TypeError, r"config must be a GPTConfig"),
        (lambda: measures(p, CONFIG, ids[0], labels), ValueError, r"ids must be a batch .*\(6,\)"),
        (lambda: copy_losses(p, CONFIG, ids, labels[:, :3]), ValueError,
         r"labels must have the shape of ids \(2, 6\)"),
        (lambda: icl(p, CONFIG, ids + 5, labels), ValueError, r"ids must be token ids in 0..4"),
        (lambda: head_scores(p, CONFIG, ids.astype(float)), TypeError, r"ids must be integer"),
        (lambda: ablation_losses(p, CONFIG, None, {}), TypeError, r"batches must be eval_"),
        (lambda: ablation_measures(p, CONFIG, {"repeat": 0, "reference": 0}, "heads"),
         TypeError, r"heads must be find_heads\(\)'s dict"),
        (lambda: ablation_measures(p, CONFIG, {"repeat": 0, "reference": 0},
                                   {"prev": 0, "control": 0, "induction": 0}, kind="max"),
         ValueError, r"kind must be 'mean' or 'zero'"),
        (lambda: find_heads("abc", "abc"), TypeError, r"prev and ind must be arrays"),
        (lambda: split_corpus(None), TypeError, r"text must be a str or a 1-D array"),
        (lambda: fall_step([1, 2], [0.5], 0.3), ValueError, r"steps \(int\) and losses"),
        (lambda: fall_step([1, 2], [0.5, 0.2], None), TypeError, r"threshold must be"),
        (lambda: snapshot_states("runs"), TypeError, r"runs must be the stored runs"),
        (lambda: snapshot_states(load_runs(), seed=99), ValueError,
         r"no stored run with seed 99"),
        (lambda: snapshot_states(load_runs(), sequence=10**6), ValueError,
         r"sequence must be an int in 0\.\."),
        (lambda: lr_at(None, 10, 1e-3, 2), TypeError, r"step must be an integer"),
        (lambda: lr_at(0, 0, 1e-3, 2), ValueError, r"steps must be an integer >= 1"),
        (lambda: lr_at(0, 10, "fast", 2), ValueError, r"lr must be a finite number"),
        (lambda: lr_at(0, 10, 1e-3, 2, final_fraction=2), ValueError, r"final_fraction"),
        (lambda: validation_batches(None, 2, 2, 4), ValueError, r"val_ids is None"),
        (lambda: validation_batches(IDS, 2, 2, 4, seed="x"), TypeError, r"seed must be"),
        (lambda: evaluate(p, CONFIG, None), TypeError, r"batches must be a non-empty list"),
        (lambda: evaluate(p, CONFIG, []), TypeError, r"batches must be a non-empty list"),
        (lambda: text_loss(p, CONFIG, None), TypeError, r"ids must be integer token ids"),
        (lambda: text_loss(p, CONFIG, ids), ValueError, r"ids must be one text"),
        (lambda: global_norm(None), TypeError, r"grads must be a dict"),
        (lambda: log_softmax([1.0, 2.0]), TypeError, r"logits must be a float ndarray"),
        (lambda: prefill(p, None, np.array([1])), TypeError,
         r"config must be a decoder.s config \(a GPTConfig"),
        (lambda: prefill(p, CONFIG, np.array([1, 9])), ValueError, r"ids must be token ids"),
        (lambda: prefill(p, CONFIG, np.arange(5) % 5), ValueError, r"more than the context"),
        (lambda: forward_cached(p, CONFIG, np.array([1]), "caches"), TypeError,
         r"caches must be a tuple of 1 KVCache"),
        (lambda: forward_cached(p, CONFIG, np.array([1]), caches * 2), TypeError,
         r"caches must be a tuple of 1 KVCache .*got 2 items"),
    ]


def test_the_other_public_functions_name_the_bad_argument():
    for call, exc, pattern in _cases():
        assert_clear_error(call, exc, pattern)


def _block_params(options, d_ff=8, extra=()):
    """Parameters of a block with ``options`` (d_model 4), plus the GPT-2 block's ``extra``."""
    from attn_core.nn import block_shapes

    g = np.random.default_rng(0)
    shapes = block_shapes(4, d_ff, options)
    shapes.update({k: s for k, s in block_shapes(4, 8).items() if k in extra})
    return {k: 0.1 * g.standard_normal(s) for k, s in shapes.items()}


def test_block_forward_refuses_parameters_its_options_would_not_read():
    """A GPT-2 block's parameters with mlp=None dropped the MLP without a word; norm="rms"
    with an ``ln1.b`` dropped the shift; bias=False dropped the attention's biases."""
    from attn_core.nn import ATTN_KEYS, BLOCK_KEYS, BlockOptions, block_backward, block_forward

    x = np.random.default_rng(1).standard_normal((3, 4))
    gpt2 = _block_params(None)
    rms = BlockOptions(2, norm="rms", mlp="swiglu", bias=False)
    cases = [
        (gpt2, BlockOptions(2, mlp=None), BLOCK_KEYS[10:]),
        ({**_block_params(rms), "ln1.b": np.zeros(4)}, rms, ["ln1.b"]),
        (_block_params(BlockOptions(2, mlp=None, bias=False), d_ff=None,
                       extra=("attn.b_q", "attn.b_o")), BlockOptions(2, mlp=None, bias=False),
         ["attn.b_q", "attn.b_o"]),
    ]
    for p, options, unused in cases:
        pattern = (r"p has parameter\(s\) " + re.escape(str(list(unused)))
                   + r" that a block with these options does not use")
        assert_clear_error(lambda p=p, o=options: block_forward(x, p, options=o), ValueError,
                           pattern)
        assert_clear_error(lambda p=p, o=options: block_backward(x, p, None, np.ones((3, 4)),
                                                                 options=o), ValueError, pattern)
    # The controls: every parameter read, the block runs (GPT-2's, and attention-only).
    assert block_forward(x, gpt2, n_heads=2)[0].shape == (3, 4)
    attn_only = {k: a for k, a in gpt2.items() if k in ATTN_KEYS}
    assert block_forward(x, attn_only, options=BlockOptions(2, mlp=None))[0].shape == (3, 4)
