"""The recap quiz (10 · Recap): one check per question, each hint naming the notebook
that explains the idea.

Numeric answers are computed with attn_core (cells, FLOPs, masks); a multiple-choice
answer is a letter from :data:`CHOICES`, matched against the option the notebook states.
"""

import numpy as np

from .. import examples
from ..cost import attention_flops, score_matrix_cells
from ..masks import causal_mask
from ._base import check_choice, check_number, is_unanswered, not_yet, progressive

__all__ = ["CHOICES", "check_quiz_heads", "check_quiz_long_context", "check_quiz_mask",
           "check_quiz_maps", "check_quiz_roles", "check_quiz_scaling", "check_quiz_spread"]

#: The letters of every multiple-choice question.
CHOICES = ("a", "b", "c", "d")

#: Where each idea is explained: (file, title), as in the course map.
NOTEBOOKS = {
    "qkv": ("02-queries-keys-values.ipynb", "02 · Queries, keys and values"),
    "scaling": ("04-scaling.ipynb", "04 · Step 2: scaling by √d_k"),
    "softmax": ("05-softmax.ipynb", "05 · Step 3: softmax"),
    "masking": ("07-causal-masking.ipynb", "07 · Causal masking"),
    "multihead": ("08-multi-head.ipynb", "08 · Multi-head attention"),
    "cost": ("09-cost.ipynb", "09 · The cost of attention"),
    "learning": ("12-learning-attention.ipynb", "12 · Learning attention"),
}


def _see(key):
    path, title = NOTEBOOKS[key]
    return f"See {title} ({path})."


def _number(answer, expected, hint, why, atol=1e-2, rtol=0.0):
    if not is_unanswered(answer):
        try:
            float(answer)
        except (TypeError, ValueError):
            return not_yet("the answer should be a single number.", hint)
    return check_number(answer, expected, hint=hint, why=why, atol=atol, rtol=rtol)


@progressive
def check_quiz_scaling(answer):
    """Q1: why the scores are divided by sqrt(d_k) (the option about spread and saturation)."""
    hint = ("Think about what happens to the softmax when its inputs are spread far "
            "apart, and to its Jacobian. " + _see("scaling"))
    wrong = {"a": "the softmax makes each row sum to 1 on its own, whatever the scale of "
                  "the scores; dividing them does not change that.",
             "c": "dividing by a positive number keeps every sign: a negative score stays "
                  "negative.",
             "d": "the division comes after the product and costs one extra operation per "
                  "score; it saves no work."}
    wrong = {option: f"{why} {_see('scaling')}" for option, why in wrong.items()}
    return check_choice(answer, "b", CHOICES, hint=hint, wrong=wrong,
                        why="Without it the spread of the scores grows with d_k and the "
                            "softmax saturates: its own Jacobian all but vanishes, and "
                            "unscaled wide heads learn more slowly (the gradient reaching W_q "
                            "is not smaller, though). " + _see("learning"))


@progressive
def check_quiz_spread(answer, d_k=64):
    """Q2: standard deviation of a raw dot product of two unit-variance d_k-vectors."""
    expected = float(np.sqrt(d_k))  # variance d_k (a sum of d_k unit-variance products)
    hint = ("Each of the d_k products has variance about one, and variances of independent "
            "terms add; the standard deviation is the square root of the variance. "
            + _see("scaling"))
    if not is_unanswered(answer):
        try:
            got = float(answer)
        except (TypeError, ValueError):
            got = None
        if got is not None and np.isclose(got, d_k):
            return not_yet("that is the variance; the question asks for the standard "
                           "deviation.", hint)
    return _number(answer, expected, hint, why="That is exactly the factor the scaling "
                   "divides by, bringing the spread back to about one.", atol=0.05)


@progressive
def check_quiz_roles(answer):
    """Q3: which vector of the attended token is compared with the query (its key)."""
    hint = ("One vector is compared with the query to decide the weight; another is what "
            "gets mixed into the output. " + _see("qkv"))
    wrong = {"a": "a token's query asks; it is not what the other tokens' queries are "
                  "compared with.",
             "c": "the value is what gets mixed into the output once the weight is decided; "
                  "it plays no part in deciding the weight.",
             "d": "an output is what attention returns, after the weights are decided."}
    wrong = {option: f"{why} {_see('qkv')}" for option, why in wrong.items()}
    return check_choice(answer, "b", CHOICES, hint=hint, wrong=wrong,
                        why="Queries meet keys; values are what is handed over.")


@progressive
def check_quiz_heads(answer, d_model=examples.ARTICLE_D_MODEL, h=examples.ARTICLE_HEADS,
                     n=512):
    """Q4: multiply-adds of the scores and weighted sums with h heads, relative to 1 head."""
    def work(heads):
        f = attention_flops(n, d_model, h=heads)
        return f["scores"] + f["weighted_sum"]

    expected = work(h) / work(1)
    hint = ("Each head works on d_model / h dimensions, and there are h heads: multiply the "
            "two. " + _see("multihead"))
    if not is_unanswered(answer):
        try:
            got = float(answer)
        except (TypeError, ValueError):
            got = None
        if got is not None and np.isclose(got, h) and not np.isclose(got, expected):
            return not_yet("the heads do not each take the full width.", hint)
    return _number(answer, expected, hint,
                   why="The heads split the width instead of copying it.")


@progressive
def check_quiz_maps(answer):
    """Q5: what an attention map shows (how the values were blended, not what later layers did)."""
    hint = ("An attention map is the weight matrix after the softmax; ask what its rows "
            "add up to and what the weights do and do not tell you. " + _see("softmax"))
    wrong = {"b": "the map shows one head's blend in one layer; the prediction comes from "
                  "every head and every later layer, so it does not depend 70% on one word.",
             "c": "the map is drawn after the softmax: its rows are weights, not raw scores.",
             "d": "each ROW of the map sums to 1 (one query's weights); its columns need not."}
    wrong = {option: f"{why} {_see('softmax')}" for option, why in wrong.items()}
    return check_choice(answer, "a", CHOICES, hint=hint, wrong=wrong,
                        why="A weight says how much of a value went into the blend, not what "
                            "later layers did with it.")


@progressive
def check_quiz_long_context(answer, short=2048, long=8192):
    """Q6: how many times more score cells (attention work) for ``long`` than ``short`` tokens."""
    expected = score_matrix_cells(long) / score_matrix_cells(short)
    hint = ("The score matrix has one cell per (query, key) pair, so it grows with the "
            "square of the length. " + _see("cost"))
    if not is_unanswered(answer):
        try:
            got = float(answer)
        except (TypeError, ValueError):
            got = None
        if got is not None and np.isclose(got, long / short):
            return not_yet("that is how much longer the sequence is; the work grows "
                           "faster than the length.", hint)
    return _number(answer, expected, hint, why="Quadratic growth: length ratio squared.")


@progressive
def check_quiz_mask(answer, n=4):
    """Q7: how many of the n x n weights can be non-zero under a causal mask."""
    expected = int(causal_mask(n).sum())
    hint = ("With a causal mask, the query at position i may attend to positions 1 to i "
            "only: count the allowed keys row by row and add. " + _see("masking"))
    if not is_unanswered(answer):
        try:
            got = float(answer)
        except (TypeError, ValueError):
            got = None
        if got is not None and np.isclose(got, n * n - expected):
            return not_yet("that is the number of masked weights.", hint)
    return _number(answer, expected, hint, why="The lower triangle, diagonal included.")
