"""The exercise checks of notebook 14 (attn_core.checks.gpt): catalogues of wrong answers.

Each wrong implementation makes one known mistake, written as a learner would write it (not
by calling the check's own variants), and must be refused with that mistake's hint; right
implementations written in different ways are accepted; the stub gets "no answer yet"; no
feedback ever contains the expected answer. The parameter count's expected value is
recomputed here from the shapes written out by hand, not from the package.
"""

import numpy as np
import pytest

from attn_core.checks import gpt as checks
from attn_core.checks._base import NO_ANSWER, NOT_YET, RIGHT
from attn_core.nn.gpt import GPTConfig


def stub(*args, **kwargs):
    raise NotImplementedError("write your function here")


# --- 1. the parameter count ----------------------------------------------------------------

CONFIG = GPTConfig(vocab_size=50, n_ctx=32, d_model=16, n_heads=2, n_layers=3)


def by_hand(v, c, d, f, n, *, biases=True, norms=True, positions=True, unembed=True):
    per_layer = 4 * d * d + 2 * d * f + (4 * d + f + d if biases else 0) + (4 * d if norms else 0)
    return (v * d + (c * d if positions else 0) + n * per_layer + (2 * d if norms else 0)
            + (d * v if unembed else 0))


def test_param_count_right_and_common_slips():
    v, c, d, f, n = 50, 32, 16, 64, 3
    assert checks.check_param_count(by_hand(v, c, d, f, n), CONFIG).correct
    assert checks.check_param_count(None, CONFIG).message.startswith(NO_ANSWER)
    for wrong, words in ((by_hand(v, c, d, f, n, biases=False), "biases"),
                         (by_hand(v, c, d, f, n, norms=False), "layer norms"),
                         (by_hand(v, c, d, f, n, positions=False), "position"),
                         (by_hand(v, c, d, f, n, unembed=False), "tied"),
                         (by_hand(v, c, d, f, 1), "one layer")):
        fb = checks.check_param_count(wrong, CONFIG)
        assert not fb.correct and words in fb.message, (words, fb.message)
        assert str(by_hand(v, c, d, f, n)) not in fb.message.replace(",", "")
    assert not checks.check_param_count(by_hand(v, c, d, f, n) + 1, CONFIG).correct
    # issue 31: a bias on the unembedding (one per vocabulary entry) is named, not "Not yet"
    fb = checks.check_param_count(by_hand(v, c, d, f, n) + v, CONFIG, hint=True)
    assert not fb.correct and "unembedding has a bias" in fb.message, fb.message
    assert not checks.check_param_count("many", CONFIG).correct


# --- 2. the layer norm's backward pass ---------------------------------------------------------


def ln_right(x, gamma, eps, grad_y):
    mu = x.mean(-1, keepdims=True)
    sd = np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    z = (x - mu) / sd
    g = grad_y * gamma
    return (g - g.mean(-1, keepdims=True) - z * (g * z).mean(-1, keepdims=True)) / sd


def ln_right_loops(x, gamma, eps, grad_y):
    """Row by row with the explicit Jacobian (d x d), as a careful learner might."""
    out = np.empty_like(x)
    d = x.shape[-1]
    for idx in np.ndindex(x.shape[:-1]):
        row = x[idx]
        mu, var = row.mean(), row.var()
        sd = np.sqrt(var + eps)
        z = (row - mu) / sd
        jac = (np.eye(d) - 1.0 / d - np.outer(z, z) / d) / sd  # dz_i / dx_j
        out[idx] = jac.T @ (grad_y[idx] * gamma)
    return out


def ln_no_mean(x, gamma, eps, grad_y):
    mu = x.mean(-1, keepdims=True)
    sd = np.sqrt(x.var(-1, keepdims=True) + eps)
    z = (x - mu) / sd
    g = grad_y * gamma
    return (g - z * (g * z).mean(-1, keepdims=True)) / sd


def ln_no_z(x, gamma, eps, grad_y):
    sd = np.sqrt(x.var(-1, keepdims=True) + eps)
    g = grad_y * gamma
    return (g - g.mean(-1, keepdims=True)) / sd


def ln_no_gamma(x, gamma, eps, grad_y):
    return ln_right(x, np.ones_like(gamma), eps, grad_y)


def ln_no_eps(x, gamma, eps, grad_y):
    return ln_right(x, gamma, 0.0, grad_y)


def ln_sums(x, gamma, eps, grad_y):
    mu = x.mean(-1, keepdims=True)
    sd = np.sqrt(x.var(-1, keepdims=True) + eps)
    z = (x - mu) / sd
    g = grad_y * gamma
    return (g - g.sum(-1, keepdims=True) - z * (g * z).sum(-1, keepdims=True)) / sd


def ln_whole_array_mean(x, gamma, eps, grad_y):  # means over the whole batch, not per row
    mu = x.mean(-1, keepdims=True)
    sd = np.sqrt(x.var(-1, keepdims=True) + eps)
    z = (x - mu) / sd
    g = grad_y * gamma
    return (g - g.mean() - z * (g * z).mean()) / sd


@pytest.mark.parametrize("fn", [ln_right, ln_right_loops])
def test_layer_norm_backward_accepts_right_answers(fn):
    fb = checks.check_layer_norm_backward(fn)
    assert fb.correct and fb.message.startswith(RIGHT), fb.message


@pytest.mark.parametrize("fn, words", [
    (ln_no_mean, "mean term is missing"), (ln_no_z, "through the variance"),
    (ln_no_gamma, "gamma is missing"), (ln_no_eps, "eps is missing"),
    (ln_sums, "sums where means belong"),
])
def test_layer_norm_backward_names_the_mistake(fn, words):
    fb = checks.check_layer_norm_backward(fn)
    assert not fb.correct and fb.message.startswith(NOT_YET) and words in fb.message, fb.message


def test_layer_norm_backward_batch_slip_stub_and_errors():
    fb = checks.check_layer_norm_backward(ln_whole_array_mean)
    assert not fb.correct and "batch" in fb.message, fb.message
    assert checks.check_layer_norm_backward(stub).message.startswith(NO_ANSWER)
    assert checks.check_layer_norm_backward(None).message.startswith(NO_ANSWER)

    def broken(x, gamma, eps, grad_y):
        return x @ grad_y  # (1, 5) @ (1, 5): shapes do not fit

    fb = checks.check_layer_norm_backward(broken)
    assert not fb.correct and "raised" in fb.message


# --- 3. the residual block --------------------------------------------------------------


def block_right(x, ln1, attn, ln2, mlp):
    x = x + attn(ln1(x))
    return x + mlp(ln2(x))


def block_right_named(x, ln1, attn, ln2, mlp):
    attended = attn(ln1(x))
    stream = attended + x
    return stream + mlp(ln2(stream))


WRONG_BLOCKS = {
    "post-norm": lambda x, ln1, attn, ln2, mlp: ln2(ln1(x + attn(x)) + mlp(ln1(x + attn(x)))),
    "residual connections are missing": lambda x, ln1, attn, ln2, mlp: mlp(ln2(attn(ln1(x)))),
    "residual adds the normalised": lambda x, ln1, attn, ln2, mlp: (
        lambda h: (lambda a: a + mlp(ln2(a)))(h + attn(h)))(ln1(x)),
    "its own layer norm, ln2": lambda x, ln1, attn, ln2, mlp: (
        lambda a: a + mlp(ln1(a)))(x + attn(ln1(x))),
    "parallel block": lambda x, ln1, attn, ln2, mlp: x + attn(ln1(x)) + mlp(ln2(x)),
    "not normalised": lambda x, ln1, attn, ln2, mlp: (lambda a: a + mlp(a))(x + attn(ln1(x))),
    "MLP half": lambda x, ln1, attn, ln2, mlp: x + attn(ln1(x)),
}


@pytest.mark.parametrize("fn", [block_right, block_right_named])
def test_block_accepts_right_answers(fn):
    fb = checks.check_block(fn)
    assert fb.correct, fb.message


@pytest.mark.parametrize("words", WRONG_BLOCKS)
def test_block_names_the_mistake(words):
    fb = checks.check_block(WRONG_BLOCKS[words])
    assert not fb.correct and words in fb.message, fb.message


def test_block_stub():
    assert checks.check_block(stub).message.startswith(NO_ANSWER)


# --- 4. the sampling step ---------------------------------------------------------------


def probs_right(logits, temperature, top_k):
    z = logits / temperature
    if top_k is not None:
        cut = np.sort(z)[-top_k]
        z = np.where(z >= cut, z, -np.inf)
    e = np.exp(z - z.max())
    return e / e.sum()


def probs_right_argsort(logits, temperature, top_k):
    z = np.asarray(logits, float) / temperature
    keep = np.argsort(-z)[: len(z) if top_k is None else top_k]
    p = np.zeros_like(z)
    e = np.exp(z[keep] - z[keep].max())
    p[keep] = e / e.sum()
    return p


def probs_times_t(logits, temperature, top_k):
    return probs_right(logits * temperature * temperature, temperature, top_k)


def probs_smallest(logits, temperature, top_k):
    z = logits / temperature
    if top_k is not None:
        cut = np.sort(z)[top_k - 1]
        z = np.where(z <= cut, z, -np.inf)
    e = np.exp(z - z.max())
    return e / e.sum()


def probs_not_renormalised(logits, temperature, top_k):
    z = logits / temperature
    p = np.exp(z - z.max())
    p = p / p.sum()
    if top_k is not None:
        p[np.argsort(p)[:-top_k]] = 0.0
    return p


def probs_off_by_one(logits, temperature, top_k):
    return probs_right(logits, temperature, None if top_k is None else top_k + 1)


def probs_unstable(logits, temperature, top_k):
    z = logits / temperature
    if top_k is not None:
        z = np.where(z >= np.sort(z)[-top_k], z, -np.inf)
    e = np.exp(z)
    return e / e.sum()


@pytest.mark.parametrize("fn", [probs_right, probs_right_argsort])
def test_sampling_accepts_right_answers(fn):
    fb = checks.check_sampling_probs(fn)
    assert fb.correct, fb.message


@pytest.mark.parametrize("fn, words", [
    (probs_times_t, "multiplies the logits"), (probs_smallest, "least likely"),
    (probs_not_renormalised, "no longer sum to 1"), (probs_off_by_one, "one token too many"),
    (probs_unstable, "overflows"),
])
def test_sampling_names_the_mistake(fn, words):
    fb = checks.check_sampling_probs(fn)
    assert not fb.correct and words in fb.message, fb.message


def test_sampling_stub_and_wrong_type():
    assert checks.check_sampling_probs(stub).message.startswith(NO_ANSWER)
    fb = checks.check_sampling_probs(probs_right(np.zeros(3), 1.0, None))
    assert not fb.correct and "function itself" in fb.message


# --- every hint in words -----------------------------------------------------------------

#: What code or a formula looks like in a hint: a call, an assignment or equation, a product
#: dot, a power, minus infinity, a square root by name (issue 31: ex 3 quoted half of the
#: solution, ex 2 and ex 4 gave the missing term as a formula).
CODE = r"\w\(\w|=|·|\*\*|-inf|sqrt|\bexp\("


@pytest.mark.parametrize("check, answer", [
    *((checks.check_layer_norm_backward, fn) for fn in
      (ln_no_mean, ln_no_z, ln_no_gamma, ln_no_eps, ln_sums, ln_whole_array_mean, stub)),
    *((checks.check_block, fn) for fn in (*WRONG_BLOCKS.values(), stub)),
    *((checks.check_sampling_probs, fn) for fn in
      (probs_times_t, probs_smallest, probs_not_renormalised, probs_off_by_one,
       probs_unstable, stub)),
])
def test_the_feedback_of_the_code_exercises_is_words(check, answer):
    import re
    fb = check(answer, hint=True)
    words = re.sub(r"d_model = \d+|top_k=\w+", "", fb.message)  # the input's description
    assert not re.search(CODE, words), fb.message
