"""Exercise checks for notebook 12, learning attention: backward passes and what training shows.

Every expected answer is computed here with attn_core from the exercise's inputs; the hints
name the mistake, never the answer.
"""

import numpy as np

from ..attention import attention
from ..gradients import attention_backward, softmax_backward
from ..softmax import softmax
from ..training import init_gradient_norms
from ._base import check_array, check_choice, is_unanswered, not_yet, progressive, right, unanswered
from ._practice import LearnerTimeout, run_learner

__all__ = ["check_grad_v", "check_my_softmax_backward", "check_order_question",
           "check_what_shrinks"]

SEED = 1212


def _cases():
    """Inputs that catch the usual slips: a batch, a saturated row, a fully masked row."""
    g = np.random.default_rng(SEED)
    batch = softmax(g.standard_normal((2, 3, 5)))  # (2, 3, 5): rows sum to 1
    saturated = softmax(np.array([12.0, 0.0, -3.0, 1.0]))  # one weight near 1
    masked = np.zeros(4)  # a query that may attend to nothing
    return [(batch, g.standard_normal(batch.shape)), (saturated, g.standard_normal(4)),
            (masked, g.standard_normal(4))]


@progressive
def check_my_softmax_backward(fn):
    """Check a learner's ``fn(p, grad_p)``: the gradient w.r.t. the softmax's input.

    ``fn`` is called on a batch of rows, a saturated row and an all-zero (fully masked) row
    and compared with :func:`~attn_core.softmax_backward`; the learner's code never sees the
    expected values.
    """
    hint = ("use the formula of step 2, one row at a time: it needs each row's p-weighted "
            "average of the upstream gradient, and no Jacobian matrix.")
    if is_unanswered(fn):
        return unanswered("write my_softmax_backward in the cell, then pass the function "
                          "itself to the check: replace None with its name, without brackets. "
                          "The gradient comes from the formula of step 2, for each row of p.")
    if not callable(fn):
        return not_yet("pass your function itself (its name, without brackets), not its "
                       "result.", hint)
    for p, g in _cases():
        expected = softmax_backward(p, g)
        try:
            got = np.asarray(run_learner(fn, p.copy(), g.copy()), dtype=float)
        except LearnerTimeout as exc:
            return not_yet(str(exc))
        except Exception as exc:  # the learner's code may fail in any way
            return not_yet(f"your function raised {type(exc).__name__}: {exc}.", hint)
        if got.shape != expected.shape:
            return not_yet(f"for input of shape {p.shape} your function returned shape "
                           f"{got.shape}; the gradient has the shape of the scores.", hint)
        if np.allclose(got, expected, atol=1e-8):
            continue
        if np.allclose(got, p * g, atol=1e-8):
            return not_yet("you multiplied by p but did not subtract the weighted average "
                           "of g: every score also changes every other weight.", hint)
        if np.allclose(got, -expected, atol=1e-8):
            return not_yet("the sign is flipped: it is g minus the average, not the average "
                           "minus g.", hint)
        if p.ndim > 1 and np.allclose(got, p * (g - (p * g).sum()), atol=1e-8):
            return not_yet("you summed the products of p and g over the whole array; each row "
                           "needs its own sum, along the last axis.", hint)
        return not_yet(f"on input of shape {p.shape} your gradient differs from the softmax's "
                       "backward pass.", hint)
    return right("That is the softmax's vector-Jacobian product: on a saturated or fully "
                 "masked row it passes back (almost) nothing, whatever g is.")


@progressive
def check_grad_v(answer, q, k, v, grad_out):
    """Check the gradient of the loss w.r.t. V, given the upstream gradient ``grad_out``."""
    grad_v = attention_backward(q, k, v, grad_out)[2]
    hint = ("the output is P V, so each value row j collects the upstream gradients of the "
            "queries, weighted by how much each query attends to j: a transposed product.")
    if not is_unanswered(answer):
        try:
            got = np.asarray(answer, dtype=float)
        except (TypeError, ValueError):
            got = None
        weights = attention(q, k, v)[1]
        if got is not None and got.shape == grad_v.shape and not np.allclose(got, grad_v,
                                                                            atol=1e-2):
            if np.allclose(got, weights @ np.asarray(grad_out, float), atol=1e-2):
                return not_yet("you used P, not its transpose: the gradient of V sums over "
                               "the queries, i.e. the columns of P.", hint)
            if np.allclose(got, np.asarray(grad_out, float), atol=1e-2):
                return not_yet("that is the upstream gradient itself: each value row gets "
                               "the upstream gradients weighted by how much each query "
                               "attends to it.", hint)
    return check_array(answer, grad_v, hint=hint,
                       why="dV = Pᵀ dO: a value gets gradient only through the queries that "
                           "attend to it.")


#: Options of the question on what a saturated softmax does to the gradients.
SHRINK_OPTIONS = {
    "a": "scores",
    "b": "q",
    "c": "W_q",
    "d": "all three",
}


@progressive
def check_what_shrinks(answer, d_k=256, seeds=(0, 1, 2)):
    """Which gradient is smaller without the 1/sqrt(d_k) factor, at initialisation?

    The answer is computed with :func:`~attn_core.training.init_gradient_norms` on the
    look-up task: the option whose gradient norms, averaged over ``seeds``, are smaller
    unscaled than scaled (``"d"`` if all three are).
    """
    scaled = init_gradient_norms("lookup", d_k=d_k, scaled=True, seeds=seeds)
    raw = init_gradient_norms("lookup", d_k=d_k, scaled=False, seeds=seeds)
    smaller = [name for name in ("scores", "q", "W_q") if raw[name].mean() < scaled[name].mean()]
    expected = "d" if len(smaller) == 3 else next(
        key for key, name in SHRINK_OPTIONS.items() if smaller == [name])
    hint = ("compare the table of gradient norms at initialisation, row by row: which of "
            "the three is smaller in the unscaled column? Remember that the scale multiplies the "
            "gradient on its way from the scores back to q.")
    why = ("Only the softmax's own gradient shrinks; the factor sqrt(d_k) that the scaling "
           "removes comes back in dS/dq, so the gradient reaching q and W_q is larger "
           "unscaled." if expected == "a" else "")
    wrong = {key: f"the gradient w.r.t. {name} is not smaller unscaled: the factor sqrt(d_k) "
                  "that the scaling removes comes back in the chain from the scores to q."
             for key, name in SHRINK_OPTIONS.items() if key in ("b", "c")}
    wrong["d"] = ("not all three: the gradient w.r.t. the scores does shrink, but the factor "
                  "sqrt(d_k) that the scaling removes comes back on the way to q and W_q.")
    wrong.pop(expected, None)
    return check_choice(answer, expected, tuple(SHRINK_OPTIONS), hint=hint, why=why,
                        wrong=wrong)


#: Options of the question on permuting the input rows when positional vectors are added.
ORDER_OPTIONS = {
    "a": "the output is unchanged",
    "b": "the output rows are permuted in the same way",
    "c": "the output changes in a way that depends on the weights and the positional vectors",
    "d": "the attention weights become uniform",
}


@progressive
def check_order_question(answer):
    """With learned positional vectors added to x, permuting x's rows (the positional vectors
    staying in place) does what to the output?"""
    wrong = {"a": "the output rows follow their inputs: a row that moves takes its content "
                  "elsewhere, so the output is not unchanged.",
             "b": "that holds without positions (the notebook shows it). Here a token that "
                  "moves meets another position's vector, so its input row is not just moved "
                  "but changed.",
             "d": "nothing makes the weights uniform: they still come from the queries and "
                  "keys, which now carry their positions."}
    return check_choice(answer, "c", tuple(ORDER_OPTIONS), wrong=wrong,
                        hint="the positional vectors stay where they are: which input rows "
                             "are merely moved, and which are changed?",
                        why="With positions added, a permuted token meets another positional "
                            "vector: attention is no longer permutation-equivariant, which is "
                            "what lets a previous-token head find position i - 1.")
