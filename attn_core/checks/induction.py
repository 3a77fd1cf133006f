"""Exercise checks for notebook 15, induction heads: the scores, and which ablation breaks
the copy.

Every expected answer is computed here with attn_core from the exercise's inputs (the
ablation question from the stored runs); the hints name the mistake, never the answer.
"""

import numpy as np

from ..induction import induction_score, induction_targets, previous_token_score
from ._base import (
    _as_sentence,
    check_choice,
    is_close,
    is_unanswered,
    not_yet,
    progressive,
    read_number,
    right,
    unanswered,
)
from ._practice import LearnerTimeout, _low_precision, _precision_feedback, run_learner
from ._practice import unanswered as stub_unanswered

__all__ = ["ABLATION_OPTIONS", "check_my_induction_score", "check_prev_score",
           "check_which_ablation", "prev_score_map"]

SEED = 1515


def prev_score_map():
    """The exercise's map: 6 queries, random causal weights, seeded."""
    g = np.random.default_rng(SEED)
    w = g.random((6, 6)) * np.tri(6)
    return np.round(w / w.sum(axis=1, keepdims=True), 2)


@progressive
def check_prev_score(answer, weights=None):
    """The previous-token score of ``weights`` (default :func:`prev_score_map`), to 2
    decimals."""
    w = prev_score_map() if weights is None else np.asarray(weights, dtype=float)
    expected = float(previous_token_score(w))
    hint = ("average, over the queries that have a previous token, the weight each puts on "
            "the key just before it (one step left of the diagonal).")
    got, feedback = read_number(answer, hint)
    if feedback is not None:
        return feedback
    if is_close(got, expected, atol=0.006):
        return right("A perfect previous-token head scores 1; a head spread evenly over the "
                     "past scores much less.")
    n = w.shape[-1]
    below = np.diagonal(w, -1)
    slips = {
        "you divided by all n rows: the first query has no previous token, leave it out.":
            float(below.sum() / n),
        "that is the sum of the weights on the previous key; the score is their mean.":
            float(below.sum()),
        "you read the diagonal (each query on itself), not the key just before it.":
            float(np.diagonal(w).mean()),
        "you read above the diagonal (the next key), which the causal mask keeps at 0.":
            float(np.diagonal(w, 1).mean()),
    }
    for message, value in slips.items():
        if is_close(got, value, atol=0.006) and not is_close(value, expected, atol=0.006):
            return not_yet(message, hint)
    return not_yet("that is not this map's previous-token score.", hint)


def _score_cases():
    """``(label, weights, ids)`` triples that tell the usual slips apart: a token seen three
    times (two targets), a token that follows itself (its target is the query itself),
    queries without a target, and a map that looks at the earlier occurrence itself rather
    than the token after it."""
    g = np.random.default_rng(SEED + 1)
    cases = []
    for label, ids in (("the sequence with a token seen three times", [1, 2, 3, 1, 2, 3, 1]),
                       ("the sequence with a token that follows itself", [4, 4, 5, 6, 4, 5, 7, 6]),
                       ("the sequence repeated once", [0, 1, 2, 3, 4, 0, 1, 2])):
        n = len(ids)
        w = g.random((n, n)) * np.tri(n)
        cases.append((label, w / w.sum(axis=1, keepdims=True), np.array(ids)))
    ids = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    same = (ids[:, None] == ids[None, :]) & np.tri(8, k=-1, dtype=bool)  # previous occurrence
    w = np.where(same.any(1, keepdims=True), same, np.tri(8)).astype(float)
    cases.append(("the map that looks at the earlier occurrence itself",
                  w / w.sum(axis=1, keepdims=True), ids))
    return cases


def _slip(got, w, ids):
    """What is wrong, for the slip ``got`` matches, or None."""
    targets = induction_targets(ids)
    has = targets.any(-1)
    mass = (w * targets).sum(-1)
    same = (ids[:, None] == ids[None, :]) & np.tri(len(ids), k=-1, dtype=bool)
    before = targets & np.tri(len(ids), k=-1, dtype=bool)  # the query itself left out
    slips = {
        "you averaged over every query; only queries whose token occurred before have "
        "something to find, average over those.": mass.mean(),
        "you took the weight on the earlier occurrence itself; the induction target is the "
        "position one after it (the token that came next last time).":
            (w * same).sum(-1)[same.any(-1)].mean() if same.any() else np.nan,
        "you kept only one target per query; when the token occurred several times, add the "
        "weight after each occurrence.": np.where(
            has, np.where(targets, w, 0).max(-1), 0).sum() / has.sum(),
        "you left out the query itself: when a token follows itself, the key after its "
        "earlier occurrence is the query's own position (j may equal i).":
            (w * before).sum(-1)[before.any(-1)].mean() if before.any() else np.nan,
    }
    for message, value in slips.items():
        if np.isfinite(value) and np.isclose(got, value, atol=1e-6):
            return message
    return None


@progressive
def check_my_induction_score(fn):
    """Check a learner's ``fn(weights, ids)``: the induction score of one ``(n, n)`` map for
    the tokens ``ids`` (n,), compared with :func:`attn_core.induction.induction_score`."""
    hint = ("for each query i, add its weights on the keys j, up to i itself, whose previous "
            "token (at position j - 1) is the query's own token; average over the queries "
            "that have such a key.")
    if is_unanswered(fn):
        return unanswered(hint)
    if not callable(fn):
        return not_yet("pass your function itself (its name, without brackets).", hint)
    for label, w, ids in _score_cases():
        expected = float(induction_score(w, ids))
        try:
            result = run_learner(fn, w.copy(), ids.copy())
        except LearnerTimeout as exc:
            return not_yet(str(exc))
        except NotImplementedError:
            return stub_unanswered(_as_sentence(hint))
        except Exception as exc:  # the learner's code may fail in any way
            message = str(exc).splitlines()[0] if str(exc) else ""
            return not_yet(f"your function raised {type(exc).__name__}"
                           f"{': ' + message if message else ''} on {label}.", hint)
        if result is None or result is Ellipsis:
            return stub_unanswered(_as_sentence(hint))
        if np.size(result) != 1:
            return not_yet(f"on {label}, your function returned shape {np.shape(result)}; "
                           "the score is one number for the whole map.", hint)
        try:
            got = float(np.asarray(result, dtype=float).reshape(()))
        except (TypeError, ValueError):
            return not_yet(f"on {label}, your function returned {type(result).__name__}, not "
                           "a number.", hint)
        if np.isclose(got, expected, atol=1e-6):
            continue
        low = _low_precision(result)
        if low is not None:  # right to its own precision: name it (as the other checks do)
            feedback = _precision_feedback(low, np.asarray(got), np.asarray(expected),
                                           "numbers", label)
            if feedback is not None:
                return feedback
        return not_yet(_slip(got, w, ids)
                       or f"on {label}, your score differs from the induction score.", hint)
    return right("That is the score the notebook computed for every head: near 1 for an "
                 "induction head, near 0 for a previous-token head.")


#: Options of the question on which ablation breaks the copy.
ABLATION_OPTIONS = {
    "a": "the layer-1 head with the highest previous-token score",
    "b": "the other layer-1 head",
    "c": "neither: layer 2 finds the copy on its own",
    "d": "both break it about equally",
}


@progressive
def check_which_ablation(answer, table):
    """Which layer-1 ablation raises the two-layer model's second-copy loss most?

    ``table`` is :func:`attn_core.nn.induction_run.ablation_losses`'s result (the notebook
    passes the one it computed); the expected option is read from it: ``"c"`` if neither
    ablation moves the loss by 0.5 nats, ``"d"`` if both do and within a factor 1.5 of each
    other, else the one that moves it. A wrong option is told what the table shows against it.
    """
    base = table["none"][0]
    rise = {k: table[k][0] - base for k in ("prev", "control")}
    big = {k for k, r in rise.items() if r > 0.5}
    if not big:
        expected = "c"
    elif len(big) == 2 and max(rise.values()) < 1.5 * min(rise.values()):
        expected = "d"
    else:
        expected = "a" if rise["prev"] > rise["control"] else "b"
    head = {"a": ("prev", "the previous-token head"), "b": ("control", "the other layer-1 head")}
    wrong = {}
    for option, (key, name) in head.items():
        if key not in big:
            wrong[option] = (f"ablating {name} leaves the second-copy loss within half a nat "
                             "of the unablated model's: without it the copy still works.")
        else:
            wrong[option] = (f"ablating {name} does raise the second-copy loss, but so does "
                             "the other ablation, about as much: look at both rows.")
    wrong["c"] = ("layer 2 does not find the copy on its own: an ablation in layer 1 raises "
                  "the second-copy loss by more than half a nat (and the one-layer models, "
                  "with no layer below theirs, help only at the distances training favours).")
    wrong["d"] = ("not equally: one ablation raises the second-copy loss far more than the "
                  "other." if expected != "c" else
                  "neither ablation raises the second-copy loss by half a nat.")
    wrong.pop(expected)
    hint = ("the layer-2 head matches the current token against each key's *previous* "
            "token. Which layer-1 head writes that previous token into each position?")
    why = ("Without the previous-token head the keys no longer know what came before them, "
           "so the induction head cannot find the position after the earlier occurrence."
           if expected == "a" else "")
    return check_choice(answer, expected, tuple(ABLATION_OPTIONS), hint=hint, wrong=wrong,
                        why=why)
