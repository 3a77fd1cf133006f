"""The LLM explorer (notebook 17) and its figures: the answer shown is the model's, the map is
the chosen head's, the loss is the stored table's, a question never blocks, a superseded
answer is dropped, and a bad question is named in the error box.

The explorer runs the real SmolLM2 (installed by make setup); building it takes a few seconds,
so one explorer is shared by the module's tests.
"""

import html

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attn_core import figures  # noqa: E402
from attn_core.explorers import llm as lx  # noqa: E402
from attn_core.model.llm_file import load_llm  # noqa: E402
from attn_core.model.llm_generate import chat  # noqa: E402
from attn_core.model.llm_measures import load_measurements  # noqa: E402

# The explorers' frames: make test runs these, make check leaves them out (make test-explorers).
pytestmark = pytest.mark.explorer


@pytest.fixture(scope="module")
def ex():
    return lx.llm_explorer(background=False)


def test_default_answer_and_map_are_the_models(ex):
    reply = chat(lx.DEFAULT_QUESTION, greedy=True, max_new=lx.MAX_NEW)
    shown = ex.shown()
    assert reply.text and reply.text in shown["answer"]
    assert np.array_equal(ex.reply.new_ids, reply.new_ids)
    ids = np.concatenate([reply.prompt_ids, reply.new_ids])
    maps = lx.conversation_maps(load_llm(), ids)
    n = len(ids)
    shown_n = min(n, lx.MAX_SHOWN)
    expected = maps[lx.DEFAULT_LAYER - 1, lx.DEFAULT_HEAD - 1][-shown_n:, -shown_n:]
    np.testing.assert_allclose(shown["map"], expected, atol=1e-6)
    np.testing.assert_allclose(np.nansum(shown["map"], axis=-1), 1, atol=1e-5)  # causal rows


def test_layer_head_window_and_sinks_move_what_they_should(ex):
    before = ex.shown()
    ex.controls["layer"].value = 20
    ex.controls["head"].value = 4
    after = ex.shown()
    assert ex.errors == []
    assert not np.allclose(before["map"], after["map"])
    assert after["answer"] == before["answer"]  # no new decoding for a head
    table = load_measurements()["windows"]["table"]
    for window, sinks in ((128, 1), (64, 0), (256, 4)):
        ex.controls["window"].value = window
        ex.controls["sinks"].value = sinks
        shown = ex.shown()
        row = table[f"{window}+{sinks}"]
        assert shown["marker"] == (float(window), pytest.approx(row["loss"]))
        assert shown["window_loss"][0] == pytest.approx(row["loss"], abs=1e-3)
        assert shown["window_loss"][1] == pytest.approx(table["full"]["loss"], abs=1e-3)


def test_a_question_in_the_background_never_blocks_and_a_superseded_one_is_dropped(ex):
    ex.background = True
    try:
        answers = ex.answers
        ex.controls["question"].value = "Write a long poem about the sea."
        assert "working" in ex.shown()["status"]  # returned at once, the worker decodes
        ex.controls["question"].value = "What is 2 + 2?"  # supersedes the poem
        ex.wait()
        assert ex.errors == []
        assert ex.answers == answers + 1  # the poem was stopped, never drawn
        assert "2 + 2" in ex.shown()["answer"] and "Answered" in ex.shown()["status"]
        expected = chat("What is 2 + 2?", greedy=True, max_new=lx.MAX_NEW).text
        assert expected in ex.shown()["answer"]
    finally:
        ex.background = False


def test_a_blank_question_is_named_in_the_error_box(ex):
    with pytest.raises(ValueError, match="question"):
        ex.controls["question"].value = "   "
    assert ex.error_box.layout.display != "none"
    assert "question" in ex.error_box.value
    ex.controls["question"].value = lx.DEFAULT_QUESTION
    assert ex.error_box.layout.display == "none"


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="top_k"):
        lx.llm_explorer(top_k=7, background=False)
    with pytest.raises(ValueError, match="window"):
        lx.llm_explorer(window=100, background=False)


def test_figures_draw_what_they_are_given_and_refuse_bad_input():
    windows, curves, full = lx.window_curves(load_measurements())
    w = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]
    art = figures.llm_figure(w, ["<|im_start|>", " the", "\n"], windows, curves, full,
                             window=windows[1], n_sink=1)
    assert art.marker.get_data()[0][0] == windows[1]
    assert [t.get_text() for t in art.map.ax.get_xticklabels()] == ["<|im_…", "␣the", "↵"]
    with pytest.raises(ValueError, match="window"):
        figures.update_llm_loss(art, 99, 0)
    with pytest.raises(ValueError, match="n_sink"):
        figures.update_llm_loss(art, windows[0], 2)
    plt.close(art.figure)
    lines = figures.sink_profile(np.full((2, 4), 0.5), np.full((2, 4), 0.01), ["a", "b"])
    assert len(lines) == 2 and list(lines[0].get_ydata()) == [0.5] * 4
    plt.close(lines[0].figure)
    with pytest.raises(ValueError, match="labels"):
        figures.sink_profile(np.zeros((2, 4)), np.zeros((2, 4)), ["only one"])


def test_the_readout_numbers_follow_every_control_change(ex):
    """Issue 33: layer, head, window and sinks through their ends; after each change the map is
    that head's over the conversation (one forward pass of the model asked for that head
    alone), the last row's five largest weights and their tokens and positions are read off it
    here, and the window's loss, full loss, difference and marker are the stored table's (the
    difference recomputed by hand)."""
    from attn_core.model.llm import llm_forward
    from attn_core.model.llm_tokenizer import llm_tokenizer

    params, config = load_llm()
    c = ex.controls
    assert c["top_k"].value == 1  # greedy: the conversation is the question's one answer
    errors = len(ex.errors)  # the module's explorer may carry an earlier test's error
    reply = chat(c["question"].value, greedy=True, max_new=lx.MAX_NEW)
    ids = np.concatenate([reply.prompt_ids, reply.new_ids])
    n = len(ids)
    m = min(n, lx.MAX_SHOWN)
    tok = llm_tokenizer()
    pieces = figures.piece_labels([tok.decode([int(i)], skip_special_tokens=False)
                                   for i in ids[-m:]])
    table = load_measurements()["windows"]["table"]
    windows = [v for _, v in c["window"].options]
    sinks = [v for _, v in c["sinks"].options]
    moves = ([("layer", x) for x in (1, config.n_layers, 12)]
             + [("head", x) for x in (config.n_heads, 1, 5)]
             + [("window", x) for x in (windows[-1], windows[0], windows[1])]
             + [("sinks", x) for x in (sinks[-1], sinks[0], sinks[1])] + [("layer", 3)])
    for name, value in moves:
        c[name].value = value
        layer, head = c["layer"].value, c["head"].value
        window, sink = c["window"].value, c["sinks"].value
        run = llm_forward(params, config, ids[None], weights_of={layer - 1: [head - 1]},
                          heads_of={})
        w = np.asarray(run.weights[layer - 1][0, 0], dtype=float)[-m:, -m:]
        shown, where = ex.shown(), (name, value)
        np.testing.assert_allclose(shown["map"], w, atol=1e-5, err_msg=str(where))
        last = sorted(range(m), key=lambda j: (-w[-1, j], j))[:5]
        np.testing.assert_allclose(shown["last_row"], w[-1, last], atol=5e-4,
                                   err_msg=str(where))
        labels = [f"{pieces[j]} ({j + 1})" for j in last]
        text = ex.readout.value
        assert f"layer {layer}, head {head}:" in text, where
        at = [text.find(f">{html.escape(label)}<") for label in labels]
        assert -1 not in at, (where, labels)
        if len(set(w[-1, last].round(3))) == 5:  # no ties to reorder: labels in this order
            assert at == sorted(at), (where, labels)
        row, full = table[f"{window}+{sink}"]["loss"], table["full"]["loss"]
        np.testing.assert_allclose(shown["window_loss"], [row, full, row - full], atol=1.5e-3,
                                   err_msg=str(where))
        assert shown["marker"] == (float(window), pytest.approx(row)), where
    assert len(ex.errors) == errors


def test_a_question_asked_again_is_answered_from_the_kernels_store(monkeypatch):
    """The same question with the same sampling is decoded once per kernel: a second explorer
    (or the same one, asked again) shows the stored answer and maps at once, equal to a fresh
    decode; another temperature or seed is decoded anew."""
    question = "Name a colour of the sky."
    calls = []
    real_chat = lx.chat

    def counting_chat(*args, **kwargs):
        calls.append(kwargs.get("temperature"))
        return real_chat(*args, **kwargs)

    monkeypatch.setattr(lx, "chat", counting_chat)
    first = lx.llm_explorer(question, background=False, max_new=8)
    again = lx.llm_explorer(question, background=True, max_new=8)  # no worker needed
    assert len(calls) == 1 and again._thread is None
    assert again.shown()["answer"] == first.shown()["answer"]
    np.testing.assert_array_equal(again._maps, first._maps)
    fresh = lx.conversation_maps(load_llm(), np.concatenate(
        [first.reply.prompt_ids, first.reply.new_ids]))
    np.testing.assert_array_equal(again._maps, fresh)
    with pytest.raises(ValueError, match="read-only"):
        again._maps[0, 0, 0, 0] = 1.0
    other = lx.llm_explorer(question, background=False, max_new=8, seed=1, top_k=5)
    assert len(calls) == 2 and other.answers == 1
