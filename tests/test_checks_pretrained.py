"""Tests of the exercise checks of notebook 11 (a real model), and of the notebook's key facts
against independent references (plain Python loops over the model's own numbers, not
attn_core's attention or head-role functions)."""

import math

import numpy as np
import pytest

from attn_core.checks import check_padding_pooling, check_previous_token_score, check_strongest_head
from attn_core.model.pretrained import load_model

from reference import assert_not_yet, assert_unanswered, numbers_in

SENTENCE = "The animal crossed the road because it was tired."
LONGER = "A much longer sentence, with many more words in it than the first one has."


@pytest.fixture(scope="module")
def model():
    return load_model()


@pytest.fixture(scope="module")
def run(model):
    return model.run(SENTENCE)


# --- independent references ---------------------------------------------------------------


def loop_weights(x, w_q, b_q, w_k, b_k, cols):
    """One head's attention weights with Python loops: projections, dot products, softmax."""
    n, d = len(x), len(x[0])

    def project(w, b, i, c):
        return sum(x[i][t] * w[t][c] for t in range(d)) + b[c]

    q = [[project(w_q, b_q, i, c) for c in cols] for i in range(n)]
    k = [[project(w_k, b_k, i, c) for c in cols] for i in range(n)]
    out = []
    for i in range(n):
        s = [sum(a * b for a, b in zip(q[i], k[j])) / math.sqrt(len(cols)) for j in range(n)]
        top = max(s)
        e = [math.exp(v - top) for v in s]
        out.append([v / sum(e) for v in e])
    return out


def loop_previous_token(w):
    n = len(w)
    return sum(w[i][i - 1] for i in range(1, n)) / (n - 1)


def loop_strongest(attentions, q, k):
    best, where = -1.0, None
    for layer, heads in enumerate(attentions):
        for head, w in enumerate(heads):
            if w[q][k] > best:
                best, where = w[q][k], (layer + 1, head + 1)
    return where


# --- the notebook's facts -------------------------------------------------------------------


def test_the_sentence_splits_into_twelve_pieces(run):
    assert run.pieces[0] == "[CLS]" and run.pieces[-1] == "[SEP]"
    assert run.n == 12 and run.attentions.shape == (6, 12, 12, 12)


@pytest.mark.parametrize("layer, head", [(0, 2), (3, 1), (5, 11)])
def test_a_head_is_the_course_attention_on_the_layer_input(model, run, layer, head):
    weights = model.weights
    lw = weights.layers[layer]
    d_k = weights.d_model // weights.heads
    cols = range(head * d_k, (head + 1) * d_k)
    x = run.hidden_states[layer].astype(float).tolist()
    ref = loop_weights(x, lw.w_q.tolist(), lw.b_q.tolist(), lw.w_k.tolist(), lw.b_k.tolist(),
                       cols)
    np.testing.assert_allclose(run.attentions[layer, head], ref, rtol=0, atol=1e-5)


def test_a_previous_token_head_exists_in_the_first_layer(run):
    scores = [[loop_previous_token(run.attentions[l, h].tolist()) for h in range(12)]
              for l in range(6)]
    best = max(max(row) for row in scores)
    assert best > 0.9 and max(scores[0]) == best


def test_it_to_animal_strongest_head_by_loop(run):
    where = loop_strongest(run.attentions.tolist(), run.index("it"), run.index("animal"))
    assert check_strongest_head(where, run)


# --- check_strongest_head -------------------------------------------------------------------


def test_strongest_head_right_and_unanswered(run):
    where = loop_strongest(run.attentions.tolist(), run.index("it"), run.index("animal"))
    assert check_strongest_head(where, run)
    assert check_strongest_head(list(where), run)
    feedback = check_strongest_head(None, run)
    assert_unanswered(feedback)
    assert not {float(x) for x in where} <= numbers_in(feedback.message)


def test_strongest_head_wrong_answers_get_hints(run):
    layer, head = loop_strongest(run.attentions.tolist(), run.index("it"), run.index("animal"))
    zero_based = check_strongest_head((layer - 1, head - 1), run)
    assert_not_yet(zero_based)
    assert "0-based" in zero_based.message
    # a head where 'animal' is the top key of 'it', but not the strongest one
    top = run.attentions[:, :, run.index("it")].argmax(axis=-1)
    others = [(l + 1, h + 1) for l, h in zip(*np.nonzero(top == run.index("animal")))
              if (l + 1, h + 1) != (layer, head)]
    assert others, "the sentence should have more than one head preferring 'animal'"
    feedback = check_strongest_head(others[0], run)
    assert_not_yet(feedback)
    assert "another" in feedback.message
    for wrong in ((99, 1), "L4H2", (1.5, 2), (True, 2), 7):
        assert_not_yet(check_strongest_head(wrong, run))
    for fb in (zero_based, feedback):
        assert not {float(layer), float(head)} <= numbers_in(fb.message)


# --- check_previous_token_score ---------------------------------------------------------------


def test_previous_token_score_right_answer(run):
    w = run.attentions[1, 9].tolist()  # layer 2, head 10
    expected = loop_previous_token(w)
    assert check_previous_token_score(expected, run, layer=2, head=10)
    assert check_previous_token_score(round(expected, 3), run, layer=2, head=10)
    assert not check_previous_token_score(round(expected, 1) + 0.05, run, layer=2, head=10)
    near = check_previous_token_score(expected + 0.004, run, layer=2, head=10)
    assert_not_yet(near)
    assert "close" in near.message.lower()


def test_previous_token_score_typical_mistakes(run):
    w = run.attentions[1, 9].astype(float)
    n = len(w)
    below = [w[i][i - 1] for i in range(1, n)]
    above = [w[i][i + 1] for i in range(n - 1)]
    cases = {
        sum(below): "sum",
        sum(below) / n: f"divided by {n}",
        sum(above) / (n - 1): "NEXT",
        loop_previous_token(run.attentions[2, 10].tolist()): "different head",
    }
    expected = loop_previous_token(w.tolist())
    for value, phrase in cases.items():
        feedback = check_previous_token_score(value, run, layer=2, head=10)
        assert_not_yet(feedback)
        assert phrase in feedback.message
        assert round(expected, 2) not in numbers_in(feedback.message)
    assert_not_yet(check_previous_token_score("a lot", run, layer=2, head=10))
    feedback = check_previous_token_score(None, run, layer=2, head=10)
    assert_unanswered(feedback)
    assert round(expected, 2) not in numbers_in(feedback.message)


def test_previous_token_score_rejects_bad_head_numbers(run):
    with pytest.raises(ValueError):
        check_previous_token_score(0.3, run, layer=0, head=1)
    with pytest.raises(ValueError):
        check_previous_token_score(0.3, run, layer=1, head=13)


# --- check_padding_pooling ----------------------------------------------------------------------


def test_padding_pooling_right_answer(model, run):
    *_, embeddings = model.run_batch([SENTENCE, LONGER])
    diff = float(np.abs(embeddings[0] - run.embedding).max())
    assert diff < 1e-5  # the fact the exercise is about
    assert check_padding_pooling(False, diff, model, SENTENCE, LONGER)


def test_padding_pooling_wrong_answers(model, run):
    *_, embeddings = model.run_batch([SENTENCE, LONGER])
    diff = float(np.abs(embeddings[0] - run.embedding).max())
    assert_unanswered(check_padding_pooling(None, None, model, SENTENCE, LONGER))
    # the prediction alone: asked to measure
    feedback = check_padding_pooling(True, None, model, SENTENCE, LONGER)
    assert not feedback and "measure" in feedback.message
    # measured right, predicted wrong
    feedback = check_padding_pooling(True, diff, model, SENTENCE, LONGER)
    assert_not_yet(feedback)
    assert "contradicts" in feedback.message
    # a plain mean over every row of the padded batch, [PAD] included
    ids, mask, out, _ = model.run_batch([SENTENCE, LONGER])
    naive = out.last_hidden_state[0].mean(axis=0)
    naive = naive / np.linalg.norm(naive)
    naive_diff = float(np.abs(naive - run.embedding).max())
    assert naive_diff > 1e-3
    feedback = check_padding_pooling(False, naive_diff, model, SENTENCE, LONGER)
    assert_not_yet(feedback)
    assert "[PAD]" in feedback.message
    for bad_prediction in ("no", 0, None):
        assert_not_yet(check_padding_pooling(bad_prediction, diff, model, SENTENCE, LONGER))
    assert_not_yet(check_padding_pooling(False, -1.0, model, SENTENCE, LONGER))
    assert_not_yet(check_padding_pooling(False, "tiny", model, SENTENCE, LONGER))


def test_padding_pooling_needs_a_longer_sentence(model):
    with pytest.raises(ValueError):
        check_padding_pooling(False, 0.0, model, LONGER, SENTENCE)
