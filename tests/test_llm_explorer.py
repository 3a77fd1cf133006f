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

from reference import assert_same_frames  # noqa: E402

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


# --- issue 46: input handling; issue 47: long questions -----------------------------------


@pytest.mark.parametrize("kwargs, error, match", [
    ({"seed": "abc"}, TypeError, r"seed must be an int >= 0, got str"),
    ({"seed": -1}, ValueError, r"seed must be an int >= 0"),
    ({"background": "no"}, TypeError, r"background must be True or False, got str"),
    ({"temperature": 0.0}, ValueError, r"temperature must be from 0.1 to 2 \(the temperature "
                                        r"slider's range\), got 0"),
    ({"temperature": 50.0}, ValueError, r"temperature must be from 0.1 to 2 .*got 50"),
    ({"temperature": "hot"}, TypeError, r"temperature must be a number"),
    ({"max_new": 0}, ValueError, r"max_new must be from 1 to 1024"),
    ({"question": "hi \ud800"}, ValueError, r"question .*surrogate"),
    ({"question": 7}, TypeError, r"question must be a str"),
])
def test_explorer_arguments_are_refused_by_name(kwargs, error, match):
    with pytest.raises(error, match=match):
        lx.llm_explorer(**{"background": False, **kwargs})


def test_special_tokens_typed_in_the_question_box_stay_text(ex):
    from test_llm_chat_input import TYPED, turns

    from attn_core.model.llm_tokenizer import llm_tokenizer

    errors = len(ex.errors)  # the module's explorer may carry an earlier test's error
    ex.controls["question"].value = TYPED
    try:
        assert len(ex.errors) == errors
        assert turns(ex.reply.prompt_ids, llm_tokenizer()) == (3, 1)
    finally:
        ex.controls["question"].value = lx.DEFAULT_QUESTION


def test_a_long_question_is_cut_with_a_note_and_keeps_only_the_drawn_maps(ex, monkeypatch):
    """A 6,000-character question: the note is there before the model runs, the prompt is
    cut to MAX_PROMPT tokens, the maps kept are the drawn part only (not (n, n) for every
    layer), and the answer's line shows the question shortened."""
    from test_llm_chat_input import long_question

    from attn_core.model.llm_tokenizer import encode_chat

    question = long_question()
    full = len(encode_chat(question).ids)
    seen = []
    real_chat = lx.chat

    def watching_chat(*args, **kwargs):
        seen.append(ex.shown()["status"])  # what the learner reads when the work starts
        return real_chat(*args, **kwargs)

    monkeypatch.setattr(lx, "chat", watching_chat)
    ex.controls["question"].value = question
    try:
        cut = full - lx.MAX_PROMPT
        assert f"its first {cut:,} tokens were left out" in seen[0]
        assert len(ex.reply.prompt_ids) == lx.MAX_PROMPT
        config = load_llm()[1]
        assert ex._maps.shape == (config.n_layers, config.n_heads, lx.MAX_SHOWN, lx.MAX_SHOWN)
        answer = ex.shown()["answer"]
        assert "characters not shown" in answer and len(answer) < len(question) // 4
        assert answer.rstrip().endswith(ex.reply.text.rstrip())
        assert question[-30:] in answer  # the end of the question, where it asks
    finally:
        ex.controls["question"].value = lx.DEFAULT_QUESTION


def test_an_answer_cut_at_its_limit_says_so():
    small = lx.llm_explorer("Write a long poem about the sea.", background=False, max_new=3)
    assert not small.reply.stopped and len(small.reply.new_ids) == 3
    status = small.shown()["status"]
    assert "Stopped at 3 tokens" in status and "max_new" in status
    assert "Answered" in lx.llm_explorer(background=False).shown()["status"]


def test_a_long_question_stays_under_the_memory_bound(tmp_path):
    """In a fresh process, the explorer asked a 6,000-character question peaks under 1.5 GB
    of resident memory (VmHWM; the float32 weights are about 540 MB)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "long.py"
    script.write_text(
        "from test_llm_chat_input import long_question\n"
        "from attn_core.explorers import llm as lx\n"
        "ex = lx.llm_explorer(long_question(), background=False)\n"
        "assert len(ex.reply.prompt_ids) == lx.MAX_PROMPT\n"
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])\n")
    tests = os.path.dirname(__file__)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [tests, os.path.dirname(tests), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, check=True).stdout
    assert int(out.split()[-1]) < 1.5 * 2 ** 20  # kB


def test_after_changes_the_frames_are_a_fresh_explorers_at_that_state(ex):
    c = ex.controls
    errors = len(ex.errors)  # the module's explorer may carry an earlier test's error
    for layer, head, window, sinks in [(3, 2, 128, 1), (30, 9, 64, 4), (12, 5, 256, 0)]:
        c["layer"].value, c["head"].value = layer, head
        c["window"].value, c["sinks"].value = window, sinks
    fresh = lx.llm_explorer(background=False, layer=12, head=5, window=256, n_sink=0)
    assert ex.errors[errors:] == [] and fresh.errors == []
    assert_same_frames(ex, fresh)
