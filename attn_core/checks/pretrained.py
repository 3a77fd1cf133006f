"""Exercise checks for notebook 11, attention inside a pretrained transformer.

Each expected answer is computed here from the model's own output (a :class:`SentenceRun`
or the model itself) with attn_core's functions, never typed in; a wrong answer gets a hint
that points the way without giving it. Layers and heads are counted from 1, as the prose
counts them.
"""

import numpy as np

from ..model.head_roles import previous_token_score
from ._base import is_close, is_unanswered, not_yet, progressive, read_number, right, unanswered

__all__ = ["check_strongest_head", "check_previous_token_score", "check_padding_pooling"]

#: Largest embedding difference still counted as float32 rounding, not a real change.
ROUNDING = 1e-5


def _head_number(value, top, name):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= top:
        raise ValueError(f"{name} must be a number from 1 to {top}, got {value!r}")
    return int(value)


def _read_pair(answer):
    """``(layer, head)`` as two ints, or None if the answer is not a pair of whole numbers."""
    try:
        pair = tuple(answer)
        if len(pair) != 2 or any(isinstance(x, bool) for x in pair):
            return None
        if any(float(x) != int(x) for x in pair):
            return None
        return int(pair[0]), int(pair[1])
    except (TypeError, ValueError):
        return None


@progressive
def check_strongest_head(answer, run, query="it", key="animal"):
    """Exercise: the head ``(layer, head)``, from 1, whose ``query`` row weights ``key`` most.

    The expected head is the argmax of ``run.attentions[:, :, query, key]`` over every layer
    and head.
    """
    q, k = run.index(query), run.index(key)
    share = np.asarray(run.attentions)[:, :, q, k]  # (layers, heads)
    layers, heads = share.shape
    hint = (f"every head has one weight in row {query!r}, column {key!r}: collect that "
            "weight from every layer and head of run.attentions, find the largest, and say "
            "where it is, counting layers and heads from 1 as the course does.")
    hint = hint[:1].upper() + hint[1:]
    if is_unanswered(answer):
        return unanswered(hint)
    got = _read_pair(answer)
    if got is None:
        return not_yet("the answer should be a pair of whole numbers (layer, head).", hint)
    best = np.unravel_index(int(np.argmax(share)), share.shape)
    expected = (int(best[0]) + 1, int(best[1]) + 1)
    if got == expected:
        return right(f"None of the other {layers * heads - 1} heads gives {key!r} as large "
                     f"a share of the row of {query!r}.")
    layer, head = got
    if not (1 <= layer <= layers and 1 <= head <= heads):
        if (layer, head) == (expected[0] - 1, expected[1] - 1):
            return not_yet("those look like numpy's 0-based indices.", hint)
        return not_yet(f"layers run from 1 to {layers} and heads from 1 to {heads}.", hint)
    if (layer, head) == (expected[0] - 1, expected[1] - 1):
        return not_yet("those look like numpy's 0-based indices.", hint)
    if int(np.argmax(run.attentions[layer - 1, head - 1, q])) == k:
        return not_yet(f"in that head {key!r} is indeed the top key of {query!r}, but another "
                       f"head gives {key!r} a larger share.", hint)
    return not_yet(hint)


@progressive
def check_previous_token_score(answer, run, layer, head):
    """Exercise: the previous-token score of head ``head`` in layer ``layer`` (both from 1).

    The score is the mean, over every row but the first, of the weight a row puts on the
    column just before it (:func:`attn_core.model.head_roles.previous_token_score`).
    """
    layers, heads = np.shape(run.attentions)[:2]
    layer = _head_number(layer, layers, "layer")
    head = _head_number(head, heads, "head")
    w = np.asarray(run.attentions[layer - 1, head - 1], dtype=float)  # (n, n)
    n = w.shape[-1]
    hint = (f"take the weights of layer {layer}, head {head} (numpy counts from 0, the course "
            "from 1); row i's previous token is column i - 1, which exists for "
            f"rows 2 to {n} only: average those {n - 1} weights, the diagonal just below the "
            "main one. Give 3 decimals or more.")
    hint = hint[:1].upper() + hint[1:]
    if is_unanswered(answer):
        return unanswered(hint)
    got, feedback = read_number(answer, hint)
    if feedback is not None:
        return feedback
    expected = float(previous_token_score(w))
    if is_close(got, expected, atol=1e-3):
        return right("That is the average share each token gives its left-hand neighbour "
                     "in this head.")
    below = np.diagonal(w, offset=-1)
    above = np.diagonal(w, offset=1)
    others = np.asarray(run.attentions, dtype=float)
    wrong_head = (others[layer, head] if layer < layers and head < heads else None)
    traps = [
        (below.sum(), "that is the sum of the weights; the score is their mean."),
        (below.sum() / n, f"you divided by {n}, but only {n - 1} rows have a previous token."),
        (above.mean(), "that is the weight on the NEXT token (the diagonal above the main "
                       "one); the previous token is one column to the left."),
        (np.diagonal(w).mean(), "that is the weight each token puts on itself."),
    ]
    if wrong_head is not None:
        traps.append((float(previous_token_score(wrong_head)),
                      "that is the score of a different head: the layer and head numbers "
                      "start at 1, numpy's indices at 0."))
    for value, why in traps:
        if is_close(got, float(value), atol=1e-3) and not is_close(value, expected, atol=1e-3):
            return not_yet(f"{why}", hint)
    if is_close(got, expected, atol=1e-2):
        return not_yet("close, but not to 3 decimals: compute it rather than rounding.", hint)
    return not_yet(hint)


_PADDING_CACHE = {}


def _padding_difference(model, sentence, longer):
    """Largest |embedding alone - embedding padded in a batch with ``longer``| (cached)."""
    key = (id(model), sentence, longer)
    cached = _PADDING_CACHE.get(key)
    if cached is not None and cached[0] is model:  # the same model object, not a reused id
        return cached[1]
    alone = model.run(sentence).embedding
    _, mask, _, embeddings = model.run_batch([sentence, longer])
    if int(mask[0].sum()) == mask.shape[1]:
        raise ValueError("longer must have more word pieces than sentence, so that the "
                         "sentence is padded")
    diff = float(np.abs(embeddings[0] - alone).max())
    _PADDING_CACHE.clear()  # keep one entry: the notebook's
    _PADDING_CACHE[key] = (model, diff)
    return diff


@progressive
def check_padding_pooling(prediction, difference, model, sentence, longer):
    """Exercise: does padding change a sentence's embedding? A prediction, then the measurement.

    ``prediction`` is True if the embedding of ``sentence`` changes (beyond float rounding,
    ``ROUNDING``) when it is run in a batch with ``longer`` and padded to its length, False if
    not. ``difference`` is the largest absolute difference between the two embeddings. Both
    are checked against ``model.run`` and ``model.run_batch`` here.
    """
    hint = ("In the batch, the short sentence is padded with [PAD] pieces. Think about which "
            "weights the attention mask sets to zero, and which rows mean_pool averages; then "
            "measure: run_batch returns the embeddings as its last item; the largest absolute "
            "difference of the two vectors is the number asked for.")
    if is_unanswered(prediction) and is_unanswered(difference):
        return unanswered(hint)
    expected_diff = _padding_difference(model, sentence, longer)
    expected_change = expected_diff > ROUNDING
    if is_unanswered(prediction) or not isinstance(prediction, (bool, np.bool_)):
        return not_yet("prediction should be True or False (write your guess first).", hint)
    if is_unanswered(difference):
        return unanswered(f"now measure: set difference to the largest absolute difference "
                          f"between the two embeddings. {hint}")
    try:
        got = float(difference)
    except (TypeError, ValueError):
        return not_yet("difference should be a single number.", hint)
    if not np.isfinite(got) or got < 0:
        return not_yet("an absolute difference is a number of at least zero.", hint)
    measured_ok = got <= ROUNDING if not expected_change else is_close(got, expected_diff, 1e-4)
    if not measured_ok:
        return not_yet("your difference is far larger than what the model gives. Did you "
                       "compare the same sentence (row 0 of the batch), and take the "
                       "embeddings from run_batch, which average the real pieces only? "
                       "A plain mean over every row, [PAD] included, is a different vector. "
                       "", hint)
    if bool(prediction) != expected_change:
        return not_yet(f"your measurement is right, but it contradicts your prediction: look "
                       f"at its size next to float32 rounding ({ROUNDING:g}).", hint)
    if expected_change:
        return right("Padding does move this embedding: compare the rows of the two runs "
                     "layer by layer to see where they part.")
    return right("The padded keys get weight exactly 0 in every head, and mean pooling "
                 "averages only the real pieces, so the sentence's embedding is the same "
                 "up to float32 rounding.")
