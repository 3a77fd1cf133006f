"""The GPT explorer and its figure: what is shown is what the model computes, a slider
redraws only what it changes, and a bad prompt is named in the error box.

A small random model stands in for the stored checkpoint (the explorer takes any object with
``params``, ``config`` and ``vocab``), so these tests do not depend on the full run; one test
builds the explorer on the stored checkpoint itself.
"""

import io
import math
import threading

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

import attn_core.explorers.gpt as gx  # noqa: E402
from attn_core import figures  # noqa: E402
from attn_core.explorers.base import _text_of  # noqa: E402
from attn_core.nn import GPTConfig, gpt_forward, init_gpt  # noqa: E402
from attn_core.nn.checkpoint import CHECKPOINT_PATH, Checkpoint  # noqa: E402
from attn_core.nn.data import CharVocab  # noqa: E402
from attn_core.nn.generate import generate, next_token_probs  # noqa: E402

from reference import ref_gpt  # noqa: E402

# The explorers' frames: make test runs these, make check leaves them out (make test-explorers).
pytestmark = pytest.mark.explorer

CHARS = " .,abcdefghijklmnopqrstuvwxyzT\n"


@pytest.fixture(scope="module")
def model():
    vocab = CharVocab(CHARS)
    config = GPTConfig(vocab_size=len(vocab), n_ctx=24, d_model=16, n_heads=4, n_layers=2)
    params = init_gpt(config, np.random.default_rng(3), dtype="float64")
    # queries, keys and logits scaled up so that the heads' maps and the bars differ
    params = {k: w * 40 if k.endswith(("w_q", "w_k", "w_unembed")) else w
              for k, w in params.items()}
    return Checkpoint(params=params, config=config, vocab=vocab, meta={})


def pixels(png):
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def expected_view(model, prompt, temperature, top_k, layer, head, n_new, seed):
    ids = model.vocab.encode(prompt)
    window = ids[-model.config.n_ctx:]
    logits, weights = gpt_forward(model.params, model.config, window)
    probs = next_token_probs(logits[-1], temperature, top_k)
    order = np.argsort(-probs, kind="stable")[:gx.N_BARS]
    shown = slice(max(0, len(window) - gx.MAX_SHOWN), None)
    gen = generate(model.params, model.config, ids, n_new, temperature=temperature,
                   top_k=top_k, seed=seed)
    return (probs[order], [model.vocab.chars[i] for i in order],
            weights[layer - 1][head - 1][shown, shown], model.vocab.decode(gen.new_ids))


def check_view(ex, model, temperature, top_k, layer, head):
    prompt = ex.controls["prompt"].value
    bars, chars, w, new = expected_view(model, prompt, temperature, top_k, layer, head,
                                        ex.n_new, ex.seed)
    shown = ex.shown()
    n_ctx = model.config.n_ctx
    echo = prompt if len(prompt) <= n_ctx else "…" + prompt[-n_ctx:]  # what the model reads
    np.testing.assert_allclose(shown["bars"], bars, rtol=0, atol=1e-12)
    assert shown["chars"] == [figures.char_label(c) for c in chars]
    np.testing.assert_allclose(shown["map"], w, rtol=0, atol=1e-12)
    assert shown["continuation"] == echo + new
    np.testing.assert_allclose(shown["next"], bars[:10], atol=5e-4)
    np.testing.assert_allclose(shown["last_row"], np.sort(w[-1])[::-1][:5], atol=5e-4)


def test_shows_what_the_model_computes(model):
    ex = gx.gpt_explorer(model, prompt="the cat sat", n_new=30)
    check_view(ex, model, 1.0, None, 1, 1)
    c = ex.controls
    for name, value in (("temperature", 0.5), ("top_k", 3), ("layer", 2), ("head", 4),
                        ("temperature", 1.7), ("top_k", len(CHARS)), ("head", 2)):
        c[name].value = value
        check_view(ex, model, c["temperature"].value, None if c["top_k"].value == len(CHARS)
                   else c["top_k"].value, c["layer"].value, c["head"].value)
    assert ex.errors == []


def test_top_k_one_is_greedy_and_bars_sum_to_one(model):
    ex = gx.gpt_explorer(model, prompt="a b", n_new=20, top_k=1)
    bars = ex.shown()["bars"]
    assert bars[0] == 1.0 and (bars[1:] == 0).all()
    logits, _ = gpt_forward(model.params, model.config, model.vocab.encode("a b"))
    assert ex.shown()["chars"][0] == figures.char_label(model.vocab.chars[int(np.argmax(
        logits[-1]))])
    ex.controls["top_k"].value = len(CHARS)
    assert np.isclose(ex.shown()["bars"].sum(), 1.0) or len(CHARS) > gx.N_BARS
    assert "kept characters: 1 of" not in ex.shown()["readout"]


def test_the_head_sliders_never_sample_and_same_settings_same_text(model):
    ex = gx.gpt_explorer(model, prompt="the end", n_new=25)
    samples, passes, text = ex.samples, ex.forward_passes, ex.shown()["continuation"]
    for layer, head in ((2, 3), (1, 4), (2, 1)):
        ex.controls["layer"].value, ex.controls["head"].value = layer, head
    assert ex.samples == samples and ex.forward_passes == passes
    assert ex.shown()["continuation"] == text
    readout = ex.readout.value
    ex.controls["temperature"].value = 0.3
    assert ex.samples == samples + 1
    ex.controls["temperature"].value = 1.0
    assert ex.shown()["continuation"] == text  # seeded: the same draw again ...
    assert ex.samples == samples + 1  # ... kept (GENERATIONS_KEPT), not drawn again
    assert ex.readout.value == readout
    ex.controls["resample"].click()
    assert ex.seed == 1 and ex.shown()["continuation"] != text
    assert ex.forward_passes == passes  # only a new prompt runs the prompt again


def test_a_slider_redraws_half_the_frame_exactly(model):
    ex = gx.gpt_explorer(model, prompt="the cat", n_new=10)
    for name, value in (("head", 3), ("temperature", 0.4), ("layer", 2), ("top_k", 5),
                        ("prompt", "a dog. the"), ("head", 1)):
        ex.controls[name].value = value
        partial = pixels(ex.png)
        ex.canvas.invalidate()
        ex._last_key = None
        ex._update()  # a full draw of the same state
        np.testing.assert_array_equal(partial, pixels(ex.png), err_msg=name)


def test_unknown_characters_are_named_in_the_order_typed(model):
    """Issue 31: they were named in code-point order."""
    ex = gx.gpt_explorer(model, prompt="the", n_new=5)
    with pytest.raises(ValueError, match="'é', 'Q', '!'"):
        ex.controls["prompt"].value = "thé Q! é"


def test_unknown_characters_are_named_in_the_error_box(model):
    ex = gx.gpt_explorer(model, prompt="the", n_new=5)
    with pytest.raises(ValueError, match="'Q', 'é'"):
        ex.controls["prompt"].value = "the Qé"
    assert "'Q', 'é'" in ex.error_box.value.replace("&#x27;", "'")
    assert ex.error_box.layout.display != "none"
    ex.controls["prompt"].value = "the cab"
    assert ex.error_box.layout.display == "none"
    assert ex.shown()["continuation"].startswith("the cab")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        gx.gpt_explorer(model, prompt="QQ")
    with pytest.raises(ValueError, match="at least one character"):
        ex.controls["prompt"].value = ""


def test_a_long_prompt_is_cropped_to_the_window_and_said(model):
    prompt = "the cat sat on the mat. the dog ran to the cat"  # 46 > n_ctx = 24
    ex = gx.gpt_explorer(model, prompt=prompt, n_new=5)
    assert "reads only its last 24" in ex.shown()["note"]
    assert ex.shown()["map"].shape == (gx.MAX_SHOWN, gx.MAX_SHOWN)
    check_view(ex, model, 1.0, None, 1, 1)


def test_a_very_long_prompt_says_so_first_and_echoes_only_the_window(model):
    """Issue 31: a 5,000-character prompt was echoed whole, in bold, above the note that the
    model reads only its last characters (2,300 px below the box)."""
    prompt = ("the cat sat on the mat. " * 210)[:5000]
    ex = gx.gpt_explorer(model, prompt=prompt, n_new=5)
    markup = ex.text_box.value
    assert markup.index("reads only its last 24") < markup.index('data-name="continuation"')
    echoed = ex.shown()["continuation"]
    assert echoed.startswith("…" + prompt[-24:]) and len(echoed) == 1 + 24 + 5
    assert prompt[:100] not in markup


def test_map_labels_stay_at_the_tick_size_for_a_long_prompt(model):
    """Issue 31: past 32 characters the map's labels shrank to about 5 px."""
    from attn_core.figures.base import TICK_FONTSIZE
    ex = gx.gpt_explorer(model, prompt="the cat sat on the mat. the dog", n_new=3)
    ax = ex.art.map.ax
    sizes = {t.get_fontsize() for t in [*ax.get_xticklabels(), *ax.get_yticklabels()]}
    assert sizes == {TICK_FONTSIZE}
    assert len(ax.get_xticklabels()) == gx.MAX_SHOWN


def test_the_figure_is_sent_before_the_continuation_is_drawn(model):
    """Issue 31: a temperature, top-k or Sample again change took 340-550 ms in the page,
    because 200 characters were sampled before the figure was sent. The new PNG must reach
    the Image widget before the continuation is drawn; the bar highlighted is the
    continuation's first character all the same."""
    ex = gx.gpt_explorer(model, prompt="the cat", n_new=40)
    at_png = []
    ex.image.observe(lambda change: at_png.append((ex.samples, ex.shown()["continuation"])),
                     names="value")
    for name, value in (("temperature", 0.6), ("top_k", 5)):
        before = ex.samples
        ex.controls[name].value = value
        assert at_png and at_png[-1][0] == before, name  # the figure first ...
        assert ex.samples == before + 1  # ... then the sample
        assert at_png[-1][1].endswith("(sampling…)")
        new = ex.shown()["continuation"][len("the cat"):]
        highlighted = [b.get_facecolor() for b in ex.art.bars].index(
            matplotlib.colors.to_rgba(figures.base.BAR_HIGHLIGHT_COLOR))
        assert ex.shown()["chars"][highlighted] == figures.char_label(new[0])
    ex.controls["resample"].click()
    check_view(ex, model, 0.6, 5, 1, 1)


def test_the_top_k_value_is_shown_by_a_label_that_cannot_be_typed_into(model):
    """Issue 31: ipywidgets' read-out of a selection slider accepts typed text and ignores it
    (then shows a blank or wrong value); the value is shown by a plain label instead."""
    from attn_core.explorers.notes import READOUT_CLASS
    ex = gx.gpt_explorer(model, prompt="the", n_new=3)
    slider = ex.controls["top_k"]
    assert slider.readout is False
    def boxes(widget):
        for child in getattr(widget, "children", ()):
            yield child
            yield from boxes(child)

    box = next(b for b in boxes(ex.widget) if slider in getattr(b, "children", ()))
    label = next(w for w in box.children if READOUT_CLASS in w._dom_classes)
    assert isinstance(label, gx.W.Label)
    for value in (3, 20, len(CHARS)):
        slider.value = value
        assert label.value == slider.label


def test_bad_arguments_are_named(model):
    with pytest.raises(ValueError, match="top_k must be one of"):
        gx.gpt_explorer(model, top_k=7)
    with pytest.raises(ValueError, match="layer must be from 1 to 2"):
        gx.gpt_explorer(model, layer=3)
    with pytest.raises(ValueError, match="head must be from 1 to 4"):
        gx.gpt_explorer(model, head=0)


@pytest.mark.skipif(not CHECKPOINT_PATH.exists(), reason="the full run is not stored yet")
def test_the_default_explorer_runs_on_the_stored_checkpoint():
    ex = gx.gpt_explorer()
    assert ex.errors == [] and len(ex.shown()["continuation"]) == len(gx.DEFAULT_PROMPT) + 200
    assert ex.controls["top_k"].label == "all"


# --- the figure -------------------------------------------------------------------------------


def test_figure_draws_what_it_is_given_and_updates_in_place():
    w = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]
    art = figures.gpt_figure([0.5, 0.3, 0.2], ["a", " ", "\n"], w, "ab ")
    assert [t.get_text() for t in art.chars] == ["a", "␣", "↵"]
    assert [b.get_height() for b in art.bars] == [0.5, 0.3, 0.2]
    np.testing.assert_array_equal(np.ma.getdata(art.map.image.get_array()), w)
    assert art.map.mask_patch is not None and art.map.mask_patch in art.map_artists
    bars = art.bars
    figures.update_gpt_bars(art, [0.9, 0.1, 0.0], ["x", "y", "z"], highlight=1)
    assert art.bars is bars and [t.get_text() for t in art.chars] == ["x", "y", "z"]
    assert art.bars[1].get_facecolor() != art.bars[0].get_facecolor()
    figures.update_gpt_map(art, np.eye(2), "hi")
    assert np.ma.getdata(art.map.image.get_array()).shape == (2, 2)
    assert [t.get_text() for t in art.map.ax.get_xticklabels()] == ["h", "i"]
    with pytest.raises(ValueError, match="one character per bar"):
        figures.gpt_figure([0.5, 0.5], ["a"], w, "abc")
    with pytest.raises(ValueError, match="3 entries"):
        figures.update_gpt_bars(art, [1.0], ["a"])
    with pytest.raises(ValueError, match="tokens must label the 2 rows"):
        figures.update_gpt_map(art, np.eye(2), "abc")
    plt.close(art.figure)


def test_in_a_kernel_the_answer_comes_first_and_only_the_latest_continuation_is_shown(model):
    """Inside a running event loop (a kernel) the continuation is drawn in a worker thread
    after the control's answer: the figure of each change is sent while its text still says
    "sampling"; quick changes end with the latest state's continuation, drawn once."""
    import asyncio

    ex = gx.gpt_explorer(model, prompt="the cat sat", n_new=200)
    at_png = []
    ex.image.observe(lambda change: at_png.append(ex.shown()["continuation"]), names="value")

    async def moves():
        for t in (0.5, 0.7, 0.9):
            ex.controls["temperature"].value = t
        while ex._worker is not None:
            await asyncio.sleep(0.01)

    before = ex.samples
    # a fresh thread: this worker's main thread may hold another library's event loop
    # (Playwright's synchronous API keeps one "running" for the whole session)
    runner = threading.Thread(target=asyncio.run, args=(moves(),))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gx, "_in_kernel", lambda: True)  # what a kernel's comm handler sees
        runner.start()
        runner.join(timeout=120)
    assert not runner.is_alive()
    assert at_png and all(text.endswith("(sampling…)") for text in at_png)
    assert ex.samples >= before + 1 and ex.errors == []
    check_view(ex, model, 0.9, None, 1, 1)


def test_only_a_kernel_counts_as_a_kernel():
    """The continuation goes to a thread only inside a Jupyter kernel's event loop: not in a
    plain event loop (another library's, as Playwright's sync API keeps one), not without a
    loop, and yes with a shell that has a kernel."""
    import asyncio
    import types

    import IPython

    async def inside():
        return gx._in_kernel()

    seen = {}
    thread = threading.Thread(target=lambda: seen.update(plain=asyncio.run(inside())))
    thread.start()
    thread.join()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(IPython, "get_ipython", lambda: types.SimpleNamespace(kernel=object()))
        thread = threading.Thread(target=lambda: seen.update(kernel=asyncio.run(inside())))
        thread.start()
        thread.join()
    assert seen == {"plain": False, "kernel": True}


# --- every read-out against the formulas, after each control change (issue 33) ---------------


def _by_hand(model, prompt, temperature, top_k):
    """The last position's distribution and every head's map, from tests/reference.py's
    float64 loop (not gpt_forward), softmax over T and top-k written out here."""
    window = model.vocab.encode(prompt)[-model.config.n_ctx:].tolist()
    logits, weights = ref_gpt(model.params, model.config, window)
    z = logits[-1]
    keep = sorted(range(len(z)), key=lambda i: (-z[i], i))[:top_k or len(z)]
    top = max(z)
    e = {i: math.exp((z[i] - top) / temperature) for i in keep}
    total = math.fsum(e.values())
    probs = [e.get(i, 0.0) / total for i in range(len(z))]
    return probs, weights, model.vocab.decode(window)


def _assert_every_number(ex, model):
    """Every number the explorer shows is the by-hand one for the controls' values now."""
    c = ex.controls
    k = None if c["top_k"].value == len(CHARS) else c["top_k"].value
    probs, weights, text = _by_hand(model, c["prompt"].value, c["temperature"].value, k)
    order = sorted(range(len(probs)), key=lambda i: (-probs[i], i))[:gx.N_BARS]
    shown_text = text[-gx.MAX_SHOWN:]
    w = weights[c["layer"].value - 1][c["head"].value - 1][-len(shown_text):, -len(shown_text):]
    last = sorted(range(len(shown_text)), key=lambda j: (-w[-1][j], j))[:5]
    s = ex.shown()
    state = {n: c[n].value for n in ("prompt", "temperature", "top_k", "layer", "head")}
    np.testing.assert_allclose(s["bars"], [probs[i] for i in order], atol=1e-9, err_msg=state)
    assert s["chars"] == [figures.char_label(model.vocab.chars[i]) for i in order], state
    np.testing.assert_allclose(s["map"], w, atol=1e-9, err_msg=str(state))
    ticks = [t.get_text() for t in ex.art.map.ax.get_xticklabels()]
    assert ticks == [figures.char_label(ch) for ch in shown_text], state
    np.testing.assert_allclose(s["next"], [probs[i] for i in order[:10]], atol=5e-4)
    np.testing.assert_allclose(s["last_row"], [w[-1][j] for j in last], atol=5e-4)
    labels = [f"{figures.char_label(shown_text[j])} (pos {j + 1})" for j in last]
    at = [s["readout"].index(label) for label in labels]  # in this order
    assert at == sorted(at), (state, labels)
    kept = sum(p > 0 for p in probs)
    assert f"seed {ex.seed}; kept characters: {kept} of {len(CHARS)}" in s["readout"], state
    new = s["continuation"][-ex.n_new:]  # its first draw is a kept character, highlighted
    assert probs[model.vocab.chars.index(new[0])] > 0, state
    lit = [i for i, b in enumerate(ex.art.bars) if b.get_facecolor()
           == matplotlib.colors.to_rgba(figures.base.BAR_HIGHLIGHT_COLOR)]
    label = figures.char_label(new[0])
    assert [s["chars"][i] for i in lit] == ([label] if label in s["chars"] else []), state


def test_the_readout_numbers_follow_every_control_change(model):
    """Each control in turn, through several values and both ends: after every change the
    bars, their characters, the map and its labels, both tables, their labels and the kept
    count are those of the current state, recomputed by a float64 loop; a read-out one change
    behind fails here."""
    ex = gx.gpt_explorer(model, prompt="the cat sat", n_new=8)
    _assert_every_number(ex, model)
    c = ex.controls
    top_ks = [v for _, v in c["top_k"].options]
    moves = ([("temperature", t) for t in (0.1, 0.35, 2.0, 1.0)]
             + [("top_k", k) for k in (top_ks[0], top_ks[2], top_ks[-2], top_ks[-1])]
             + [("layer", 2), ("layer", 1)]
             + [("head", h) for h in (4, 2, 1, 3)]
             + [("prompt", p) for p in ("a", "the dog ran to the mat. the cat sat on",
                                         "the cat sat")]
             + [("layer", 2), ("top_k", 3), ("temperature", 0.1), ("resample", None)])
    for name, value in moves:
        if name == "resample":
            c["resample"].click()
        else:
            c[name].value = value
        _assert_every_number(ex, model)
    assert ex.errors == []


def test_a_continuation_drawn_late_never_clears_a_newer_error(model, monkeypatch):
    """In a kernel the continuation is drawn in a thread; a bad prompt typed while it is drawn
    must keep its error on screen when the thread finishes (the browser test saw the error
    vanish before it could be read)."""
    monkeypatch.setattr(gx, "_in_kernel", lambda: True)
    ex = gx.gpt_explorer(model, prompt="the cat sat", n_new=200)
    ex.controls["temperature"].value = 0.7  # starts the worker
    assert ex._worker is not None
    with pytest.raises(ValueError):
        ex.controls["prompt"].value = ""  # an empty prompt is refused: the error shows
    shown = ex.error_box.layout.display
    worker = ex._worker
    if worker is not None:
        worker.join(timeout=120)
    assert shown != "none" and ex.error_box.layout.display != "none"
    assert "hit an error" in ex.error_box.value


def test_the_continuation_grows_on_screen_as_it_is_drawn(model, monkeypatch):
    """Issue 47: the 200 characters took half a second before any showed. The text box now
    shows the characters drawn so far (every STREAM_EVERY seconds; here every one), each a
    prefix of generate's seeded continuation and marked as still sampling, then the whole."""
    monkeypatch.setattr(gx, "STREAM_EVERY", 0.0)
    ex = gx.gpt_explorer(model, prompt="the cat sat", n_new=40)
    seen = []
    ex.text_box.observe(lambda change: seen.append(_text_of(change["new"])), names="value")
    ex.controls["temperature"].value = 0.7
    final = ex.shown()["continuation"]
    check_view(ex, model, 0.7, None, 1, 1)
    growing = [t[:-len(" (sampling…)")] for t in seen if t.endswith("(sampling…)")]
    grown = [t for t in growing if len(t) > len("the cat sat")]
    assert len(grown) >= ex.n_new - 1, (len(grown), seen[:3])
    assert all(final.startswith(t) for t in grown)
    assert [len(t) for t in grown] == sorted(len(t) for t in grown)
    assert seen[-1] == final and not final.endswith("(sampling…)")


def test_a_continuation_out_of_date_stops_being_drawn(model, monkeypatch):
    """In a kernel, a continuation whose state was changed meanwhile stops at its next
    character (it would be thrown away): only the latest state's is drawn to its end."""
    monkeypatch.setattr(gx, "STREAM_EVERY", 0.0)
    ex = gx.gpt_explorer(model, prompt="the cat sat", n_new=60)
    drawn = []
    key = ex._last_key
    original = ex._draw_continuation

    def counting(k, on_token=None, n_new=None):
        def wrapped(token):
            drawn.append(token)
            ex._last_key = ("newer",)  # a change arrives while this one is drawn
            on_token(token)
        return original(k, wrapped if on_token else None, n_new)

    monkeypatch.setattr(ex, "_draw_continuation", counting)
    samples = ex.samples
    ex._finish(key, "the cat sat", np.ones(len(model.vocab)) / len(model.vocab),
               np.eye(2), ["a"], np.ones(1))
    assert len(drawn) == 1 and ex.samples == samples  # stopped after one character, not kept
