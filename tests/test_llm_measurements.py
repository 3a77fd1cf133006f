"""The stored measurements of notebook 17 (attn_core/data/llm-measurements.json, made by
tools/measure_llm.py) against a recomputation of a slice of them, and the measuring functions
against independent references.

Recomputed here: the first-token weights of two of the sink texts, their loss with nothing
changed and with the first token's value zeroed, the previous-token and induction scores of
one run of repeated random tokens, and its loss on the second copy. Not recomputed (minutes of
CPU): the 1,280-token windowed losses and the random-head draws; their structure and the
relations the notebook reads from them are checked instead.
"""

import numpy as np
import pytest

from attn_core.masks import window_mask
from attn_core.model import llm_measures as M
from attn_core.model.llm import llm_forward
from attn_core.model.llm_file import load_llm
from attn_core.model.llm_tokenizer import llm_tokenizer

#: Stored numbers are rounded to 4 decimals; a recomputation on another CPU may differ in
#: float32's last bits, far below that.
TOL = 2e-4


@pytest.fixture(scope="module")
def model():
    return load_llm()


@pytest.fixture(scope="module")
def stored():
    return M.load_measurements()


def _encode(text):
    return llm_tokenizer().encode(text).ids


@pytest.fixture(scope="module")
def texts(stored):
    s = stored["sinks"]
    return M.corpus_texts(_encode, s["texts"], s["tokens"])


def test_first_token_weights_recompute(model, stored, texts):
    s = stored["sinks"]
    live = M.first_position_weights(model, texts[:2], 0, slice(s["queries_from"], None))
    np.testing.assert_allclose(live, np.array(s["first_weight"])[:2], atol=TOL)
    assert [llm_tokenizer().decode([int(t)]) for t in texts[:, 0]] == s["first_tokens"]


def test_first_position_weight_by_an_independent_average(model, texts):
    """The mean over heads and queries, written as an explicit loop over one layer's maps."""
    ids = texts[:1, :24]
    run = llm_forward(*model, ids, weights_of={5: None}, heads_of={})
    w = run.weights[5][0]  # (heads, n, n)
    by_loop = np.mean([w[h, i, 0] for h in range(w.shape[0]) for i in range(8, 24)])
    got = M.first_position_weights(model, ids, 0, slice(8, None))[0, 5]
    assert got == pytest.approx(by_loop, abs=1e-6)


def test_intervention_losses_recompute(model, stored, texts):
    s = stored["sinks"]
    scored = slice(s["scored_from"] - 1, None)
    for name, how in (("none", None), ("first, value zeroed", "zero")):
        got = M.intervention_losses(model, texts[0], 0, scored, how).mean()
        assert got == pytest.approx(s["losses"][name][0], abs=TOL)
    m, se = M.paired(s["losses"]["none"], s["losses"]["first, value zeroed"])
    assert [round(m, 4), round(se, 4)] == pytest.approx(s["effects"]["first, value zeroed"],
                                                        abs=1e-4)


def test_the_content_words_follow_their_rule(stored, texts):
    """The stored content word of each text is the longest token of letters that starts a word
    among the stored positions' range, found here by a loop over the decoded tokens."""
    s = stored["sinks"]
    tok = llm_tokenizer()
    low, high = 4, 32  # tools/measure_llm.py's CONTENT: positions 4..31
    for row, pos, word in zip(texts, s["word_positions"], s["word_tokens"]):
        pieces = [tok.decode([int(t)]) for t in row[low:high]]
        sizes = [len(p) - 1 if p.startswith(" ") and p[1:].isalpha() else 0 for p in pieces]
        assert pos == low + sizes.index(max(sizes)) and tok.decode([int(row[pos])]) == word
    for name in ("word, value zeroed", "word, score masked"):
        assert len(s["losses"][name]) == s["texts"]


def test_windowed_losses_equal_the_mask_of_notebook_07(model):
    """llm_losses with a window equals the losses read off a forward with window_mask's mask
    given as masked keys, computed here from the logits."""
    ids = np.array(_encode("The cat sat on the mat because it was warm and the sun was out."))
    got = M.windowed_losses(model, ids, 4, 1)
    run = llm_forward(*model, ids[:-1], window=4, n_sink=1, weights_of={0: None}, heads_of={})
    allowed = window_mask(len(ids) - 1, 4, 1)
    assert np.array_equal(run.weights[0][0] > 0, allowed)  # head 0: the mask is the window's
    logits = run.logits.astype(np.float64)
    top = logits.max(-1, keepdims=True)
    log_p = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
    np.testing.assert_allclose(got, -log_p[np.arange(len(ids) - 1), ids[1:]], atol=1e-5)


@pytest.mark.slow
def test_induction_scores_and_ablation_recompute(model, stored):
    ind = stored["induction"]
    segment, seed = ind["segments"][0], ind["seeds"][0]
    ids, labels = M.random_repeats(seed, ind["batch"], segment, ind["token_low"],
                                   model[1].vocab_size)
    prev, scores = M.head_scores(model, ids)
    layer, head = ind["top"][0]
    run = next(r for r in ind["ablation"] if (r["segment"], r["seed"]) == (segment, seed))
    # this run is one of four averaged: its own score must be near the stored mean's order
    assert scores.shape == prev.shape == (model[1].n_layers, model[1].n_heads)
    assert scores[layer, head] > 0.5 * np.array(ind["induction"])[layer, head]
    assert M.ablation_losses(model, ids, labels, [], 2) == pytest.approx(run["second_copy"],
                                                                         abs=TOL)


def test_the_stored_tables_hold_what_the_notebook_reads(stored):
    w = stored["windows"]
    assert w["tokens"] > 1000 and w["windows"] == [64, 128, 256] and w["sinks"] == [0, 1, 4]
    kept = {f"{a}+{b}" for a in w["windows"] for b in w["sinks"]}
    shifted = {f"{a}+{b} shifted" for a in w["windows"] for b in w["sinks"] if b}
    assert kept | shifted | {"full"} == set(w["table"])
    for row in w["table"].values():  # texts of equal length: the pooled mean is theirs
        assert len(row["per_text"]) == w["texts"]
        assert np.mean(row["per_text"]) == pytest.approx(row["loss"], abs=2e-4)
    ind = stored["induction"]
    top = {tuple(h) for h in ind["top"]}
    for draw in ind["random_draws"]:
        assert len(draw) == len(top) and not top & {tuple(h) for h in draw}
        assert sorted(layer for layer, _ in draw) == sorted(layer for layer, _ in top)
    assert stored["made_by"]["cpu_seconds"] > 0
