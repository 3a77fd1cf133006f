"""Exercise checks for notebook 14, a tiny GPT: its size, the layer norm's backward pass,
the residual block, the sampling step.

The code exercises use the machinery of the practice checks (:mod:`._practice`): the
learner's function runs on several inputs, chosen so that the usual mistakes give different
results (a row of tiny variance for the forgotten eps, a temperature below 1 for a
multiplied temperature, gains that differ between the two layer norms for a pre-norm block
wired post-norm), and is compared with :mod:`attn_core.nn`; the first mistake recognised
is named, the answer never shown. The parameter count is computed from the arrays
:func:`~attn_core.nn.init_gpt` makes.
"""

import numpy as np

from .. import examples
from ..masks import causal_mask
from ..multihead import multi_head_attention
from ..nn.block import block_forward, block_shapes
from ..nn.generate import next_token_probs
from ..nn.gpt import GPTConfig, init_gpt
from ..nn.layer_norm import layer_norm, layer_norm_backward
from ..nn.mlp import mlp
from ._base import not_yet, progressive, read_number, right
from ._practice import Case, Mistake, judge

__all__ = ["check_block", "check_layer_norm_backward", "check_param_count",
           "check_sampling_probs"]

EPS = 1e-5  # the GPT's layer-norm eps
SEED = 1414


# --- 1. the parameter count ------------------------------------------------------------------


def _count(config, **parts):
    """Parameters of ``config`` with some parts left out or doubled (the usual slips)."""
    d, f, v, c, n = (config.d_model, config.d_ff, config.vocab_size, config.n_ctx,
                     config.n_layers)
    sizes = {"wte": v * d, "wpe": c * d, "attn": 4 * d * d, "attn_b": 4 * d,
             "mlp": 2 * d * f, "mlp_b": f + d, "ln": 4 * d, "ln_f": 2 * d, "unembed": d * v}
    sizes.update(parts)
    per_layer = sizes["attn"] + sizes["attn_b"] + sizes["mlp"] + sizes["mlp_b"] + sizes["ln"]
    return (sizes["wte"] + sizes["wpe"] + n * per_layer + sizes["ln_f"] + sizes["unembed"])


@progressive
def check_param_count(answer, config):
    """Exercise: how many numbers the GPT of ``config`` learns (every array of init_gpt)."""
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    expected = sum(int(w.size) for w in init_gpt(config, np.random.default_rng(0)).values())
    hint = ("add up, array by array: the two embedding tables, per layer the four attention "
            "matrices with their biases, the MLP's two matrices with their biases and the two "
            "layer norms' gains and shifts, then the final layer norm and the unembedding.")
    got, feedback = read_number(answer, hint, "a whole number of parameters")
    if feedback is not None:
        return feedback
    if got == expected:
        return right(f"{expected:,} numbers. Most of them sit in the layers' matrices, "
                     "which grow as d_model²; the embeddings grow only as d_model.")
    d, f = config.d_model, config.d_ff
    slips = [
        ("the biases are missing: every projection and both MLP layers add one per output.",
         dict(attn_b=0, mlp_b=0)),
        ("the layer norms are missing: each has a gain and a shift of d_model numbers, two "
         "per layer and one at the end.", dict(ln=0, ln_f=0)),
        ("the position embeddings (n_ctx rows of d_model) are missing.", dict(wpe=0)),
        ("the unembedding is counted as tied to the token embedding; here it is its own "
         "(d_model, vocab) matrix.", dict(unembed=0)),
        ("the unembedding has a bias in your count: this model's unembedding is a matrix "
         "alone, with no bias (one per vocabulary entry would be too many).",
         dict(unembed=d * config.vocab_size + config.vocab_size)),
        ("the attention has four matrices (queries, keys, values and the output projection), "
         "each d_model x d_model.", dict(attn=3 * d * d, attn_b=3 * d)),
        (f"the MLP's hidden width is d_ff = {f}, not d_model.", dict(mlp=2 * d * d, mlp_b=2 * d)),
        ("the final layer norm is missing.", dict(ln_f=0)),
    ]
    for text, parts in slips:
        if got == _count(config, **parts):
            return not_yet(text)
    if config.n_layers > 1 and got == _count(config.__class__(
            config.vocab_size, config.n_ctx, d, config.n_heads, 1, f)):
        return not_yet(f"that is one layer's worth; the model has {config.n_layers} layers.")
    return not_yet(hint)


# --- 2. the layer norm's backward pass ------------------------------------------------------


def _ln_backward(x, gamma, eps, grad_y, *, mean_term=True, z_term=True, use_gamma=True,
                 use_eps=True, means=True):
    """grad_x of the layer norm with switches that reproduce the usual mistakes."""
    mu = x.mean(axis=-1, keepdims=True)  # (..., 1)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)  # (..., 1)
    denom = np.sqrt(var + (eps if use_eps else 0.0))  # (..., 1)
    z = (x - mu) / denom  # (..., d)
    g = grad_y * gamma if use_gamma else grad_y  # (..., d)
    over = x.shape[-1] if means else 1  # the row's d entries; 1: sums where means belong
    out = g
    if mean_term:
        out = out - g.sum(axis=-1, keepdims=True) / over
    if z_term:
        out = out - z * (g * z).sum(axis=-1, keepdims=True) / over
    return out / denom


@progressive
def check_layer_norm_backward(fn):
    """Check ``fn(x, gamma, eps, grad_y)``: the gradient of the layer norm w.r.t. ``x``.

    Run on one row, a batch (2, 3, 6) and a row of tiny variance (1e-6, below eps = 1e-5)
    against :func:`~attn_core.nn.layer_norm_backward`; only ``grad_x`` is returned.
    """
    g = examples.rng(SEED)
    cases = []
    for label, shape, scale in (("one row of 5 numbers", (1, 5), 1.0),
                                ("a batch of shape (2, 3, 6)", (2, 3, 6), 1.0),
                                ("a row of tiny variance (about 1e-6, below eps)", (1, 6), 1e-3)):
        x = scale * g.standard_normal(shape) + 0.5
        gamma = 1.0 + 0.5 * g.standard_normal(shape[-1])
        grad_y = g.standard_normal(shape)
        cases.append(Case(label, (x, gamma, EPS, grad_y),
                          layer_norm_backward(x, gamma, EPS, grad_y)[0],
                          batched=len(shape) > 2))

    def mistake(hint, **switches):
        return Mistake(hint, lambda *args: _ln_backward(*args, **switches))

    mistakes = [
        mistake("the mean term is missing: moving every entry of a row by the same amount "
                "does not change the output, so the gradient must sum to zero along each row; "
                "the term that does it comes from the row's mean, which every entry moves.",
                mean_term=False),
        mistake("the term through the variance is missing: a change of one entry also "
                "changes the row's standard deviation, and through it every normalised "
                "entry of the row; that path gives a third term, the same for the whole row "
                "up to each entry's own normalised value.", z_term=False),
        mistake("only the direct term is left: both the mean and the variance depend on every "
                "entry of the row.", mean_term=False, z_term=False),
        mistake("gamma is missing: the output scales each normalised entry by its gain, so the "
                "gradient reaching the normalised row is the output's gradient scaled by the "
                "same gains.", use_gamma=False),
        mistake("eps is missing: the backward pass divides by the same standard deviation as "
                "the forward pass, the one with eps added to the variance (it matters on a "
                "row of tiny variance).", use_eps=False),
        mistake("the two correction terms use sums where means belong: divide them by the "
                "row's d entries.", means=False),
    ]
    return judge(fn, cases, mistakes, what="gradient",
                 stub_hint="start from the gradient with respect to the normalised row (the "
                           "output's gradient scaled by the gains); each normalised entry "
                           "depends on an input entry directly, through the row's mean and "
                           "through its variance: three terms, the last two shared by the "
                           "whole row. Each row of the result sums to zero.",
                 shape_rule="the gradient has the shape of x",
                 why="Your backward pass agrees with attn_core.nn on a batch and on a row of "
                     "tiny variance; each row of dx sums to 0.")


# --- 3. the residual block ------------------------------------------------------------------


def _block_parts(seed, d_model, n_heads, d_ff):
    """A block's weights, and its four layers as functions of one array (weights inside)."""
    g = examples.rng(seed)
    p = {}
    for name, shape in block_shapes(d_model, d_ff).items():
        if name.endswith(".g"):  # gains that differ from 1 and from each other
            p[name] = 1.0 + 0.5 * g.standard_normal(shape)
        elif len(shape) == 2:
            p[name] = g.standard_normal(shape) / np.sqrt(shape[0])
        else:
            p[name] = 0.3 * g.standard_normal(shape)
    qkvo = [p[f"attn.w_{c}"] for c in "qkvo"]
    biases = [p[f"attn.b_{c}"] for c in "qkvo"]

    def ln1(h):
        return layer_norm(h, p["ln1.g"], p["ln1.b"], EPS)

    def ln2(h):
        return layer_norm(h, p["ln2.g"], p["ln2.b"], EPS)

    def attn(h):
        return multi_head_attention(h, *qkvo, n_heads, mask=causal_mask(h.shape[-2]),
                                    biases=biases)[0]

    def feed_forward(h):
        return mlp(h, p["mlp.w_in"], p["mlp.b_in"], p["mlp.w_out"], p["mlp.b_out"])

    return p, (ln1, attn, ln2, feed_forward)


def _wired(x, ln1, attn, ln2, mlp, how):
    """The block wired right (``"pre"``) or in a known wrong way."""
    if how == "post":
        h = ln1(x + attn(x))
        return ln2(h + mlp(h))
    if how == "no residual":
        return mlp(ln2(attn(ln1(x))))
    if how == "residual of the normed":
        h = ln1(x)
        h = h + attn(h)
        return h + mlp(ln2(h))
    if how == "one norm":
        h = x + attn(ln1(x))
        return h + mlp(ln1(h))
    if how == "parallel":
        return x + attn(ln1(x)) + mlp(ln2(x))
    if how == "mlp not normed":
        h = x + attn(ln1(x))
        return h + mlp(h)
    if how == "attention only":
        return x + attn(ln1(x))
    raise ValueError(how)


@progressive
def check_block(fn):
    """Check ``fn(x, ln1, attn, ln2, mlp)``: the pre-norm residual block's output.

    The four layers are passed as functions of one array (the block's own weights are inside
    them): the exercise is the wiring. Compared with :func:`~attn_core.nn.block_forward` on
    5 tokens and on a batch; the two layer norms have different gains, so swapping them
    shows.
    """
    cases = []
    for label, seed, batch, n in (("5 tokens, d_model = 8", 1, (), 5),
                                  ("a batch of 2 sequences of 4 tokens", 2, (2,), 4)):
        p, layers = _block_parts(seed, 8, 2, 16)
        x = examples.rng(seed + 10).standard_normal((*batch, n, 8))
        expected = block_forward(x, p, 2, EPS)[0]
        cases.append(Case(label, (x, *layers), expected, batched=bool(batch)))

    def mistake(hint, how):
        return Mistake(hint, lambda x, *layers: _wired(x, *layers, how))

    mistakes = [
        mistake("that is the post-norm block of the original transformer: in GPT's pre-norm "
                "block the layer norm comes before each sub-layer and the residual adds the "
                "un-normalised x.", "post"),
        mistake("the residual connections are missing: each sub-layer's output is added to "
                "the stream it read from, not passed on alone.", "no residual"),
        mistake("the residual adds the normalised x: the sub-layer reads a normalised copy, "
                "but its output is added to the un-normalised stream.",
                "residual of the normed"),
        mistake("the MLP gets its input through ln1: it has its own layer norm, ln2.",
                "one norm"),
        mistake("this is a parallel block (attention and MLP both read x): in this GPT the MLP "
                "reads the stream after the attention has been added.", "parallel"),
        mistake("the MLP's input is not normalised: it goes through ln2 first.",
                "mlp not normed"),
        mistake("the MLP half of the block is missing.", "attention only"),
    ]
    return judge(fn, cases, mistakes, what="output",
                 stub_hint="pre-norm: which function sees the stream itself and which a "
                           "normalised copy? Each sub-layer's output is added to the stream.",
                 shape_rule="the block keeps the shape of x, (..., n, d_model)",
                 why="Pre-norm: each sub-layer reads a normalised copy and adds its result to "
                     "the un-normalised stream, which flows from the embedding to the last "
                     "layer untouched except by these additions.")


# --- 4. the sampling step -------------------------------------------------------------------


def _probs(logits, temperature=1.0, top_k=None, *, multiply=False, smallest=False,
           renormalise=True, stable=True, k_shift=0):
    """Next-token probabilities with switches that reproduce the usual mistakes."""
    z = logits * temperature if multiply else logits / temperature
    if top_k is not None:
        k = top_k + k_shift
        order = np.argsort(z)
        keep = order[:k] if smallest else order[len(z) - k:]
        allowed = np.zeros(len(z), dtype=bool)
        allowed[keep] = True
    else:
        allowed = np.ones(len(z), dtype=bool)
    if not renormalise:
        e = np.exp(z - z.max())
        p = e / e.sum()
        return np.where(allowed, p, 0.0)
    z = np.where(allowed, z, -np.inf)
    e = np.exp(z - z.max()) if stable else np.exp(z)
    return e / e.sum()


@progressive
def check_sampling_probs(fn):
    """Check ``fn(logits, temperature, top_k)``: the distribution the next token is drawn from.

    ``logits`` is ``(vocab,)``; ``top_k`` None keeps every token. Compared with
    :func:`~attn_core.nn.next_token_probs` on logits at temperatures 1, 0.5 and 2, with
    top-k 3 and 1, and on logits near 1000.
    """
    g = examples.rng(SEED + 1)
    logits = 2.0 * g.standard_normal(10)
    big = 1000.0 + 3.0 * g.standard_normal(10)
    cases = [Case(f"10 logits at temperature {t}, top_k={k}", (logits, t, k),
                  next_token_probs(logits, temperature=t, top_k=k))
             for t, k in ((1.0, None), (0.5, None), (2.0, 3), (0.7, 1))]
    cases.append(Case("logits near 1000", (big, 1.0, None), next_token_probs(big),
                      nonfinite_hint="the exponential of a logit near 1000 overflows: shift "
                                     "every logit down by the largest one before taking "
                                     "exponentials (the softmax does not change)."))

    def mistake(hint, **switches):
        return Mistake(hint, lambda lg, t, k: _probs(lg, t, k, **switches))

    mistakes = [
        mistake("the temperature multiplies the logits: divide by it, so that a temperature "
                "below 1 sharpens the distribution and above 1 flattens it.", multiply=True),
        mistake("top-k keeps the k least likely tokens: keep the k largest logits.",
                smallest=True),
        mistake("after top-k the probabilities no longer sum to 1: leave the other tokens out "
                "of the softmax altogether, or rescale the kept probabilities so that they "
                "sum to one.", renormalise=False),
        mistake("top-k keeps one token too many.", k_shift=1),
        mistake("top-k keeps one token too few.", k_shift=-1),
    ]
    return judge(fn, cases, mistakes, what="probabilities",
                 stub_hint="three steps: the temperature, then top-k (the other tokens get "
                           "probability 0), then a softmax that cannot overflow.",
                 shape_rule="one probability per token of the vocabulary, (vocab,)",
                 why="Temperature divides, top-k cuts, the softmax renormalises: the "
                     "distribution sums to 1 over the kept tokens.")
