"""The tiny GPT explorer: type a prompt, choose a temperature and a top-k, see what it writes.

The model is the stored checkpoint of the full training run (:func:`attn_core.nn.
checkpoint.load_checkpoint`) unless another is passed. The prompt is read once per new
prompt (:func:`attn_core.nn.gpt_forward`: its last position's logits and every head's
attention over it); then

* ``temperature`` and ``top_k`` reshape the next-character distribution
  (:func:`attn_core.nn.next_token_probs`) and sample a new continuation
  (:func:`attn_core.nn.generate`, seeded: the same settings give the same text). The bars
  and the map are sent first (with the sample's first character, one draw, highlighted);
  the continuation follows when it is drawn (``N_NEW`` characters, most of them a forward
  pass of the whole window once the window is full), so a change is seen at once;
* ``layer`` and ``head`` only choose which stored attention map to show;
* ``Sample again`` draws with the next seed.

Shown: the bars of the most likely next characters (the sampled one highlighted), the
chosen head's causal map over the prompt's last characters (:func:`attn_core.figures.
gpt_figure`), and in HTML the prompt with its continuation and tables of the numbers.
A prompt with characters outside the model's vocabulary is an error that names them, in
the red box, in the order they were typed. Speed follows :mod:`attn_core.explorers.base`:
a new prompt redraws the static background (its labels) once; a slider redraws only the
bars, their characters and the map.
"""

from __future__ import annotations

import html
import threading
import time
from collections import OrderedDict

import ipywidgets as W
import numpy as np

from .. import figures
from ..nn.checkpoint import load_checkpoint
from ..nn.generate import next_token_probs, sample_loop
from ..nn.gpt import check_params, gpt_forward
from ..nn.gpt_decoder import fast_engine
from ..threads import blas_threads
from .base import (
    MUTED_COLOR,
    STYLE,
    TEXT_COLOR,
    Explorer,
    _choice_slider,
    _in_kernel,
    _row,
    _slider,
    _table,
    _text_of,
    read_tables,
)
from .frames import _HalvesCanvas

__all__ = ["GPTExplorer", "gpt_explorer", "top_chars"]

DEFAULT_PROMPT = "The attention "
#: Characters sampled after the prompt at every change of temperature, top-k or seed.
N_NEW = 200
#: Continuations kept, the latest first (about 0.2 MB each: their probabilities and logits):
#: a temperature, top-k or seed set again shows its text at once, the same seeded draw.
GENERATIONS_KEPT = 32
#: Bars of the next-character distribution (the most likely first).
N_BARS = 16
#: The map shows at most the prompt's last this many characters: more would shrink its
#: labels below the figures' tick size (``figures.base.TICK_FONTSIZE``).
MAX_SHOWN = 16
TEMPERATURES = (0.1, 2.0, 0.05)  # min, max, step of the temperature slider
TOP_KS = (1, 2, 3, 5, 10, 20, 40)  # then "all" (the whole vocabulary)
PROMPT_WIDTH = "560px"
_TEXT_CSS = ("font-family:monospace;font-size:13px;white-space:pre-wrap;max-width:680px;"
             f"color:{TEXT_COLOR};margin:4px 0")
_PROMPT_CSS = "font-weight:bold"
_NOTE_CSS = f"font-family:sans-serif;font-size:12px;color:{MUTED_COLOR};margin:2px 0"
#: While a continuation is drawn, the characters drawn so far are shown at most this often
#: (seconds; the first at once): the text grows as it is drawn, a few updates, not 200.
STREAM_EVERY = 0.05


class _Stale(Exception):
    """A continuation being drawn is out of date (a newer change came): stop drawing it."""


def top_chars(probs, chars, n=N_BARS):
    """The ``n`` most likely characters and their probabilities, most likely first.

    Ties keep the vocabulary's order (a stable sort), so the bars do not flicker.

    Examples
    --------
    >>> top_chars(np.array([0.1, 0.6, 0.3]), "abc", n=2)
    (['b', 'c'], array([0.6, 0.3]))
    """
    probs = np.asarray(probs, dtype=float)
    order = np.argsort(-probs, kind="stable")[:n]
    return [chars[i] for i in order], probs[order]


class GPTExplorer(Explorer):
    """A prompt, a temperature, a top-k, a layer and a head: the tiny GPT writing, read back.

    Controls: ``"prompt"`` (text; Enter runs it), ``"temperature"`` (float slider),
    ``"top_k"`` (selection slider whose last option ``"all"`` is the whole vocabulary),
    ``"layer"`` and ``"head"`` (1-based), ``"resample"`` (a button: the next seed).
    ``.forward_passes`` counts the prompts read, ``.samples`` the continuations drawn.
    """

    title = "a tiny GPT"

    def __init__(self, checkpoint=None, prompt=DEFAULT_PROMPT, temperature=1.0, top_k=None,
                 layer=1, head=1, n_new=N_NEW, seed=0):
        super().__init__()
        self.checkpoint = load_checkpoint() if checkpoint is None else checkpoint
        cfg = self.checkpoint.config
        self.vocab = self.checkpoint.vocab
        # checked once here: every continuation then samples on checked arguments
        self.params = check_params(self.checkpoint.params, cfg)
        self._engine = fast_engine(self.params, cfg)  # generate's: GPTDecoder if it serves
        layer, head = figures.check_layer_head(layer, head, cfg.n_layers, cfg.n_heads)
        self.n_new = int(n_new)
        self.seed = int(seed)
        self.forward_passes = 0
        self.samples = 0
        self._prompt = None  # (text read, ids, last logits, weights per layer)
        self._prompt_text = None  # the whole prompt typed
        # (prompt, temperature, top-k, seed) -> its continuation, the GENERATIONS_KEPT latest
        self._generations = OrderedDict()
        self._lock = threading.Lock()  # the continuation may be drawn in a thread
        self._pending = None  # the latest state whose continuation is still to be drawn
        self._worker = None  # the thread drawing continuations, while there is one
        c = self.controls
        c["prompt"] = W.Text(value=prompt, description="prompt", continuous_update=False,
                             style=STYLE, layout=W.Layout(width=PROMPT_WIDTH))
        c["resample"] = W.Button(description="Sample again", tooltip="draw with the next seed")
        c["temperature"] = _slider(W.FloatSlider, "temperature", min=TEMPERATURES[0],
                                   max=TEMPERATURES[1], step=TEMPERATURES[2],
                                   value=temperature, readout_format=".2f")
        options = [(str(k), k) for k in TOP_KS if k < len(self.vocab)]
        options.append(("all", len(self.vocab)))
        top = len(self.vocab) if top_k is None else top_k
        if top not in [v for _, v in options]:
            raise ValueError(f"top_k must be one of {[v for _, v in options[:-1]]} or None "
                             f"(all {len(self.vocab)} characters), got {top_k!r}")
        c["top_k"], top_k_row = _choice_slider("top-k (characters kept)", options, top)
        c["layer"] = _slider(W.IntSlider, "layer", min=1, max=cfg.n_layers, value=layer)
        c["head"] = _slider(W.IntSlider, "head", min=1, max=cfg.n_heads, value=head)
        self._watch("prompt", "temperature", "top_k", "layer", "head")
        c["resample"].on_click(lambda _button: self._guard(self._resample))
        self.text_box = W.HTML()
        self.readout = W.HTML()
        self.canvas = _HalvesCanvas(figures.gpt.FIGSIZE, layout="compressed")
        self._read_prompt(prompt)  # a bad first prompt raises right here
        text, ids, logits, weights = self._prompt
        shown = self._shown_slice(len(text))
        names, heights = top_chars(next_token_probs(logits, temperature, top), self.vocab.chars)
        self.art = figures.gpt_figure(heights, names, weights[layer - 1][head - 1][shown, shown],
                                      text[shown], fig=self.canvas.figure)
        self._labels_for = text
        self._start(_row(c["prompt"], c["resample"]), _row(c["temperature"], top_k_row),
                    _row(c["layer"], c["head"]), self.image, self.text_box, self.readout)

    # --- the model ------------------------------------------------------------------------

    def _read_prompt(self, text):
        """Encode ``text`` (unknown characters: ValueError naming them) and run the model."""
        if not isinstance(text, str) or not text:
            raise ValueError("the prompt must hold at least one character")
        ids = self.vocab.encode(text)  # names every character outside the vocabulary
        n_ctx = self.checkpoint.config.n_ctx
        window = ids[-n_ctx:]  # the model sees at most n_ctx characters
        logits, weights = gpt_forward(self.params, self.checkpoint.config, window)
        self.forward_passes += 1
        self._prompt_text = text
        self._prompt = (text[-n_ctx:], ids, np.asarray(logits[-1], dtype=float),
                        [np.asarray(w) for w in weights])

    @staticmethod
    def _shown_slice(n):
        return slice(max(0, n - MAX_SHOWN), None)

    def _sample(self, temperature, top_k, n_new=None):
        """The continuation (``n_new`` characters, default ``self.n_new``; one character:
        the first of the whole continuation, the same draw, not stored)."""
        key = (self._prompt_text, temperature, top_k, self.seed)
        if n_new is not None:
            return self._draw_continuation(key, n_new=n_new)
        if key not in self._generations:
            self._keep(key, self._draw_continuation((*key, None, None)))
            self.samples += 1
        return self._generations[key]

    def _keep(self, key, generation):
        """Keep ``generation`` as the continuation of state ``key`` (prompt, temperature,
        top-k, seed): the same settings again show it at once (the same seeded draw)."""
        self._generations[key] = generation
        self._generations.move_to_end(key)
        while len(self._generations) > GENERATIONS_KEPT:
            self._generations.popitem(last=False)

    def _draw_continuation(self, key, on_token=None, n_new=None):
        """``self.n_new`` characters (or ``n_new``) after the prompt of state ``key`` (prompt,
        temperature, top-k, seed, ...), seeded: the same state, the same text (``generate``'s
        draws: its loop, its seeded generator, its sliding window). ``on_token(token)`` sees
        each character as it is drawn. The arguments were checked when they were set (the
        parameters once, in the constructor; the prompt when it was read), not again for
        every sample."""
        prompt, temperature, top_k, seed = key[:4]
        cfg = self.checkpoint.config
        with blas_threads():
            return sample_loop(self.params, cfg, np.asarray(self.vocab.encode(prompt)),
                               self.n_new if n_new is None else n_new, float(temperature),
                               int(top_k),
                               np.random.default_rng(seed), cfg.n_ctx, on_token=on_token,
                               engine=self._engine)

    def _resample(self):
        self.seed += 1
        self._update()

    # --- drawing --------------------------------------------------------------------------

    def _update(self):
        c = self.controls
        prompt = c["prompt"].value
        temperature, top_k = float(c["temperature"].value), int(c["top_k"].value)
        layer, head = c["layer"].value, c["head"].value
        key = (prompt, temperature, top_k, self.seed, layer, head)
        if key == self._last_key:
            return
        if prompt != self._prompt_text:
            self._read_prompt(prompt)
        text, ids, logits, weights = self._prompt
        last = self._last_key
        if last is None or key[0] != last[0]:
            changed = {"top", "bottom"}
        else:  # the distribution and sample, and/or the head
            changed = {"top"} if key[1:4] != last[1:4] else set()
            changed |= {"bottom"} if key[4:] != last[4:] else set()
        probs = next_token_probs(logits, temperature, top_k)
        with self._lock:
            gen = self._generations.get((prompt, temperature, top_k, self.seed))
            sampled = gen is not None
        # the highlight: the continuation's first character, one draw (the same draw)
        head_gen = gen if sampled else self._sample(temperature, top_k, min(1, self.n_new))
        names, heights = top_chars(probs, self.vocab.chars)
        first = self.vocab.chars[int(head_gen.new_ids[0])] if len(head_gen.new_ids) else None
        figures.update_gpt_bars(self.art, heights, names,
                                highlight=names.index(first) if first in names else None)
        shown = self._shown_slice(len(text))
        w = weights[layer - 1][head - 1][shown, shown]
        if text != self._labels_for:  # a new prompt: new labels, a new static background
            n_shown = len(text[shown])
            part = f"its last {n_shown} characters" if n_shown < len(text) else "the prompt"
            figures.update_gpt_map(self.art, w, text[shown],
                                   title=f"the head's attention over {part}")
            self._labels_for = text
            self.canvas.invalidate()  # only the current prompt's background is kept
        else:
            figures.update_gpt_map(self.art, w)
        with self._lock:  # from now on, a continuation still being drawn is out of date
            self._write(text, None if gen is None else gen.new_ids, probs, w, names, heights)
            first_draw, self._last_key = last is None, key
        png = self.canvas.render_halves(self.art.bar_artists, self.art.map_artists,
                                        self.art.split_y, changed, static_key=text)
        self._set_png(self.canvas, png)  # sent now: the learner sees the change at once
        if gen is None:  # then the continuation, when it is drawn
            args = (key, text, probs, w, names, heights)
            if first_draw or not _in_kernel():
                self._finish(*args)
                return
            with self._lock:
                self._pending, start = args, self._worker is None
                if start:
                    self._worker = threading.Thread(target=self._work, daemon=True)
            if start:
                self._worker.start()

    def _work(self):
        """The worker thread: draw the latest pending continuation until none is left (one
        thread at a time, so that quick changes never draw several at once)."""
        while True:
            with self._lock:
                args, self._pending = self._pending, None
                if args is None:
                    self._worker = None
                    return
            try:  # not _guard: a success here must not clear the error of a newer change
                self._finish(*args)
            except Exception as exc:  # noqa: BLE001 - shown below the controls, as any error
                self._report(exc)

    def _finish(self, key, text, probs, w, names, heights):
        """Draw the continuation of the state ``key`` and show it, growing as it is drawn
        (every ``STREAM_EVERY`` seconds), unless a newer change comes first: then it stops
        (that change's own continuation follows)."""
        if key != self._last_key:
            return
        drawn, shown_at = [], [None]

        def on_token(token):
            drawn.append(token)
            now = time.perf_counter()
            if shown_at[0] is not None and now - shown_at[0] < STREAM_EVERY:
                return
            with self._lock:
                if key != self._last_key:
                    raise _Stale
                self._write(text, drawn, probs, w, names, heights, done=False)
            shown_at[0] = time.perf_counter()

        try:
            gen = self._draw_continuation(key, on_token)
        except _Stale:
            return
        with self._lock:
            if key == self._last_key:
                self._keep(key[:4], gen)
                self.samples += 1
                self._write(text, gen.new_ids, probs, w, names, heights)

    def _write(self, text, new_ids, probs, w, names, heights, done=True):
        """The prompt and its continuation (``new_ids``; None: none drawn yet; ``done``
        False: still being drawn) and the tables. A prompt longer than the window: the note
        comes first, and only the characters the model reads are echoed, after an
        ellipsis. While the continuation is drawn only the text changes: the tables are
        written when it starts and when it is done, not at every update of the text."""
        prompt = self.controls["prompt"].value
        note, echo = "", prompt
        if len(prompt) > len(text):
            note = (f'<p style="{_NOTE_CSS}">The prompt has {len(prompt)} characters; the model '
                    f"reads only its last {len(text)} (its context window).</p>")
            echo = "…" + text
        new = html.escape(self.vocab.decode(new_ids)) if new_ids is not None else ""
        if not done or new_ids is None:
            new += f'<span style="{_NOTE_CSS}"> (sampling…)</span>'

        self.text_box.value = (
            note + f'<div data-name="continuation" style="{_TEXT_CSS}">'
            f'<span style="{_PROMPT_CSS}">{html.escape(echo)}</span>{new}</div>')
        if done:
            self._write_tables(text, probs, w, names, heights)

    def _write_tables(self, text, probs, w, names, heights):
        """The tables under the text: the next character's ten most likely, where the last
        character looks, the seed and the characters kept."""
        labels = [figures.char_label(ch) for ch in names[:10]]
        last = w[-1]
        keys = np.argsort(-last, kind="stable")[:5]
        shown_text = text[self._shown_slice(len(text))]
        value = (
            _table("next", heights[None, :10], row_labels=["p"], col_labels=labels,
                   title="the ten most likely next characters")
            + _table("last_row", last[keys][None, :], row_labels=["weight"],
                     col_labels=[f"{figures.char_label(shown_text[j])} (pos {j + 1})"
                                 for j in keys],
                     title="where the last character looks (the five largest weights)")
            + f'<p style="{_NOTE_CSS}">seed {self.seed}; kept characters: '
              f"{int((probs > 0).sum())} of {len(self.vocab)}</p>")
        if self.readout.value != value:
            self.readout.value = value

    def shown(self):
        """What is on screen: bars, their characters, the map, the text and the tables."""
        tables = read_tables(self.readout.value)
        return {"bars": np.array([b.get_height() for b in self.art.bars], dtype=float),
                "chars": [t.get_text() for t in self.art.chars],
                "map": np.array(np.ma.getdata(self.art.map.image.get_array()), dtype=float),
                "map_title": self.art.map.ax.get_title(),
                "continuation": _text_of(self.text_box.value.split("</p>")[-1]),
                "note": _text_of(self.text_box.value.split("</p>")[0])
                if "</p>" in self.text_box.value else "",
                "next": tables["next"][0], "last_row": tables["last_row"][0],
                "readout": _text_of(self.readout.value)}


def gpt_explorer(checkpoint=None, prompt=DEFAULT_PROMPT, temperature=1.0, top_k=None, layer=1,
                 head=1, n_new=N_NEW, seed=0):
    """Sample from the tiny GPT: prompt, temperature, top-k; one head's attention shown.

    Parameters
    ----------
    checkpoint : Checkpoint, optional
        Anything with ``params``, ``config`` and ``vocab`` (as
        :func:`attn_core.nn.checkpoint.load_checkpoint` returns); the stored full run when
        None.
    prompt : str, optional
        Only characters of the model's vocabulary (others are an error naming them).
    temperature : float, optional
    top_k : int, optional
        One of 1, 2, 3, 5, 10, 20, 40 (fewer than the vocabulary), or None for all.
    layer, head : int, optional
        Counted from 1.
    n_new : int, optional
        Characters sampled after the prompt.
    seed : int, optional

    Returns
    -------
    GPTExplorer
    """
    return GPTExplorer(checkpoint, prompt, temperature, top_k, layer, head, n_new, seed)
