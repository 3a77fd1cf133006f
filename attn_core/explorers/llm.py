"""The real LLM explorer: ask SmolLM2-135M-Instruct a question, read its answer and its heads.

Controls: a question box (Enter asks), the temperature and top-k of the sampling (top-k 1 is
greedy decoding), a layer and a head whose attention over the conversation is shown, and the
window and sink count of Xiao et al.'s experiment, whose loss on a long text is read from
the stored measurements (``attn_core/data/llm-measurements.json``, made by
``tools/measure_llm.py``: a 1,280-token forward per setting is too slow for a slider).

Typed input never blocks the page: the answer is decoded in a worker thread
(:func:`attn_core.model.llm_generate.chat`, through the KV cache) while the status line says
that the model is working and the answer grows token by token; the layer, head, window and
sink controls stay live, because they only pick among numbers already computed. A new
question while one is being answered stops the old one at its next token. Once the answer is
complete, one forward pass over the conversation (:func:`attn_core.model.llm.llm_forward`)
gives every head's map. Everything runs under one BLAS thread.

A long question is decided on before any work: the prompt may hold :data:`MAX_PROMPT` tokens;
a longer question keeps its last tokens (``chat(..., crop=True)``), and the status line says
how many were left out before the model starts. The answer's line shows a long question
shortened (its start and end), so the answer stays in view; an answer cut at ``max_new``
tokens says so and how to raise it. Only the attention the map can draw (the last
:data:`MAX_SHOWN` tokens, every layer and head) is kept.

``background=False`` decodes in the caller's thread (tests, the static edition, the notebook's
default state); :meth:`LLMExplorer.wait` waits for a running answer.
"""

from __future__ import annotations

import collections
import html
import threading

import ipywidgets as W
import numpy as np

from .. import figures
from ..model.llm import llm_forward
from ..model.llm_file import load_llm
from ..model.llm_generate import MAX_NEW as MAX_NEW_ALLOWED
from ..model.llm_generate import chat
from ..model.llm_measures import load_measurements
from ..model.llm_tokenizer import check_text, encode_chat, llm_tokenizer
from .arguments import check_bool, check_int, check_number, check_seed
from .base import MUTED_COLOR, STYLE, TEXT_COLOR, Explorer, _Canvas, _row, _slider, _table

__all__ = ["DEFAULT_QUESTION", "LLMExplorer", "conversation_maps", "llm_explorer",
           "window_curves"]

DEFAULT_QUESTION = "What is the capital of France?"
#: The layer and head shown first (counted from 1): a sink head, which puts most of each
#: query's weight on position 0 (notebook 17 prints how much).
DEFAULT_LAYER, DEFAULT_HEAD = 21, 5
TEMPERATURES = (0.1, 2.0, 0.05)
TOP_KS = (1, 2, 5, 10, 50)  # then "all"
MAX_NEW = 48
#: The most tokens of a prompt (system message, question, markers): a longer question is cut
#: to its end before any work, with a note. Its attention maps stay small (every layer's
#: (n, n) maps are made once, then only the drawn part is kept).
MAX_PROMPT = 256
#: A question longer than this many characters is shown shortened on the answer's line.
QUESTION_SHOWN = 240
#: The map shows at most the conversation's last this many tokens (labels stay readable).
MAX_SHOWN = 64
_TEXT_CSS = ("font-family:sans-serif;font-size:14px;white-space:pre-wrap;max-width:760px;"
             f"color:{TEXT_COLOR};margin:4px 0")
_NOTE_CSS = f"font-family:sans-serif;font-size:12px;color:{MUTED_COLOR};margin:2px 0"
WORKING = "The model is working: {n} token(s) so far…"


#: Answers decoded in this kernel, the newest last: (question, max_new, temperature, top_k,
#: seed) -> (the model's params, reply, maps). Asking again (a question typed a second time,
#: the cell run again, a slider moved back) shows the answer at once; the decoding is seeded,
#: so it is the same answer. A few only: a conversation's maps hold about 10 MB.
_ANSWERS = collections.OrderedDict()
ANSWERS_KEPT = 4
_ANSWERS_LOCK = threading.Lock()


def _answered(key, model):
    """The stored ``(reply, maps)`` of ``key`` for ``model`` (its very params), or None."""
    with _ANSWERS_LOCK:
        hit = _ANSWERS.get(key)
        if hit is None or hit[0] is not model[0]:
            return None
        _ANSWERS.move_to_end(key)
        return hit[1:]


def _remember(key, model, reply, maps):
    maps.setflags(write=False)  # shared by every explorer that asks the same again
    with _ANSWERS_LOCK:
        _ANSWERS[key] = (model[0], reply, maps)
        _ANSWERS.move_to_end(key)
        while len(_ANSWERS) > ANSWERS_KEPT:
            _ANSWERS.popitem(last=False)


class _Stopped(Exception):
    """Raised inside a superseded answer's token callback: stops its decoding loop."""


def window_curves(measured):
    """``(windows, {n_sink: losses by window}, full loss)`` of the stored windowed-loss table."""
    w = measured["windows"]
    table = w["table"]
    curves = {s: np.array([table[f"{win}+{s}"]["loss"] for win in w["windows"]])
              for s in w["sinks"]}
    return tuple(w["windows"]), curves, table["full"]["loss"]


def conversation_maps(model, ids, last=None):
    """Every layer's attention maps over the conversation ``ids`` (n,):
    ``(layers, heads, n, n)`` float32; with ``last``, only the last ``last`` queries and keys
    of each map are kept, ``(layers, heads, m, m)`` with ``m = min(n, last)``."""
    params, config = model
    run = llm_forward(params, config, np.asarray(ids)[None],
                      weights_of={i: None for i in range(config.n_layers)}, heads_of={})
    keep = slice(None) if last is None else slice(-min(last, len(ids)), None)
    return np.stack([run.weights[i][0][:, keep, keep] for i in range(config.n_layers)])


def shorten(text, size=QUESTION_SHOWN):
    """``text`` if it has at most ``size`` characters; else its start and end around a note
    of how many characters are left out."""
    if len(text) <= size:
        return text
    head, tail = text[:2 * size // 3], text[-size // 3:]
    return f"{head} … [{len(text) - len(head) - len(tail):,} characters not shown] … {tail}"


class LLMExplorer(Explorer):
    """A question, sampling controls, a layer and head, a window and sinks.

    ``.answers`` counts the answers completed; ``.reply`` is the last
    :class:`~attn_core.model.llm_generate.Reply`.
    """

    title = "a real LLM"

    def __init__(self, question=DEFAULT_QUESTION, temperature=1.0, top_k=1,
                 layer=DEFAULT_LAYER, head=DEFAULT_HEAD, window=None, n_sink=0, seed=0,
                 max_new=MAX_NEW, background=True):
        super().__init__()
        self.model = load_llm()
        config = self.model[1]
        self.tok = llm_tokenizer()
        self.measured = load_measurements()
        windows, curves, full = window_curves(self.measured)
        layer, head = figures.check_layer_head(layer, head, config.n_layers, config.n_heads)
        check_text(question, "question")
        temperature = check_number(temperature, "temperature", TEMPERATURES[0], TEMPERATURES[1],
                                   " (the temperature slider's range)")
        self.seed = check_seed(seed)
        self.max_new = check_int(max_new, "max_new", 1, MAX_NEW_ALLOWED)
        self.background = check_bool(background, "background")
        self.answers = 0
        self.reply = None
        self._job = 0
        self._thread = None
        self._lock = threading.Lock()
        self._draw_lock = threading.RLock()  # the worker and a slider never draw at once
        c = self.controls
        c["question"] = W.Text(value=question, description="question", continuous_update=False,
                               style=STYLE, layout=W.Layout(width="560px"))
        c["temperature"] = _slider(W.FloatSlider, "temperature", min=TEMPERATURES[0],
                                   max=TEMPERATURES[1], step=TEMPERATURES[2], value=temperature,
                                   readout_format=".2f")
        options = [(str(k), k) for k in TOP_KS] + [("all", config.vocab_size)]
        top = config.vocab_size if top_k is None else top_k
        if top not in [v for _, v in options]:
            raise ValueError(f"top_k must be one of {list(TOP_KS)} or None (all), got {top_k!r}")
        c["top_k"] = _slider(W.SelectionSlider, "top-k (1 = greedy)", options=options,
                             value=top)
        c["layer"] = _slider(W.IntSlider, "layer", min=1, max=config.n_layers, value=layer)
        c["head"] = _slider(W.IntSlider, "head", min=1, max=config.n_heads, value=head)
        window = windows[0] if window is None else window
        if window not in windows or n_sink not in curves:
            raise ValueError(f"window must be one of {windows} and n_sink one of "
                             f"{sorted(curves)}; got {window!r} and {n_sink!r}")
        c["window"] = _slider(W.SelectionSlider, "window (tokens)",
                              options=[(str(x), x) for x in windows], value=window)
        c["sinks"] = _slider(W.SelectionSlider, "sink tokens kept",
                             options=[(str(s), s) for s in sorted(curves)], value=n_sink)
        self.status = W.HTML()
        self.answer_box = W.HTML()
        self.readout = W.HTML()
        self.canvas = _Canvas(figures.real_llm.FIGSIZE, layout="constrained")
        self._maps, self._pieces, self._n_tokens, self._cut = None, None, 0, 0
        self._ask(question, wait=True)  # the first answer before the figure exists
        n = self._maps.shape[-1]
        shown = slice(max(0, n - MAX_SHOWN), None)
        self.art = figures.llm_figure(self._maps[layer - 1, head - 1][shown, shown],
                                      self._pieces[shown], windows, curves, full,
                                      fig=self.canvas.figure, window=window, n_sink=n_sink)
        self._watch("question", "temperature", "top_k", "layer", "head", "window", "sinks")
        self._start(c["question"], self.status, self.answer_box,
                    _row(c["temperature"], c["top_k"]), _row(c["layer"], c["head"]),
                    _row(c["window"], c["sinks"]), self.image, self.readout)

    # --- the model (possibly in a worker thread) --------------------------------------------

    def _ask(self, question, wait=False):
        check_text(question, "question")
        if not question.strip():
            raise ValueError("the question must hold at least one non-blank character")
        c = self.controls
        temperature, top_k = float(c["temperature"].value), int(c["top_k"].value)
        with self._lock:
            self._job += 1
            job = self._job
        self._asked = (question, temperature, top_k)  # what the controls asked for
        self._cut = encode_chat(question, max_tokens=MAX_PROMPT).cut  # decided before any work
        self.status.value = f'<p style="{_NOTE_CSS}">{self._note(WORKING.format(n=0))}</p>'
        self.answer_box.value = ""
        args = (job, question, temperature, top_k)
        known = _answered(self._key(question, temperature, top_k), self.model) is not None
        if self.background and not wait and not known:
            self._thread = threading.Thread(target=self._answer, args=args, daemon=True,
                                            name="llm-explorer")
            self._thread.start()
        else:
            self._answer(*args)

    def _key(self, question, temperature, top_k):
        return (question, self.max_new, temperature, top_k, self.seed)

    def _answer(self, job, question, temperature, top_k):
        new = []

        def on_token(token):
            if job != self._job:
                raise _Stopped
            new.append(int(token))
            self.status.value = (f'<p style="{_NOTE_CSS}">'
                                 f'{self._note(WORKING.format(n=len(new)))}</p>')
            self._show_answer(question, self.tok.decode(new))

        key = self._key(question, temperature, top_k)
        try:
            known = _answered(key, self.model)
            if known is None:
                reply = chat(question, self.max_new, greedy=top_k == 1,
                             temperature=temperature,
                             top_k=None if top_k >= self.model[1].vocab_size else top_k,
                             seed=self.seed, on_token=on_token, max_prompt=MAX_PROMPT,
                             crop=True)
                ids = np.concatenate([reply.prompt_ids, reply.new_ids])
                maps = conversation_maps(self.model, ids, last=MAX_SHOWN)
                _remember(key, self.model, reply, maps)
            else:
                reply, maps = known
                ids = np.concatenate([reply.prompt_ids, reply.new_ids])
        except _Stopped:
            return
        except Exception as exc:  # a worker's error goes to the red box, not a log
            self._report(exc)
            if not self.background:
                raise
            return
        if job != self._job:
            return
        self.reply, self._maps = reply, maps
        self._n_tokens = len(ids)
        self._pieces = [self.tok.decode([int(i)], skip_special_tokens=False)
                        for i in ids[-maps.shape[-1]:]]
        self.answers += 1
        self._show_answer(question, reply.text, done=True)
        ended = (f"Answered in {len(reply.new_ids)} tokens through the KV cache."
                 if reply.stopped else
                 f"Stopped at {len(reply.new_ids)} tokens, the explorer's limit, before the "
                 f"answer ended: llm_explorer(max_new=...) allows up to {MAX_NEW_ALLOWED}.")
        self.status.value = (f'<p style="{_NOTE_CSS}">'
                             f"{html.escape(self._note(ended))}</p>")
        if hasattr(self, "art"):
            try:
                self._update(new_answer=True)
            except Exception as exc:  # shown in the red box; a thread has no one to raise to
                self._report(exc)
                if not self.background:
                    raise

    def wait(self, timeout=120):
        """Wait for the answer being decoded (if any); returns self."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self

    def _note(self, text):
        """``text`` after the note of a question cut to fit :data:`MAX_PROMPT` tokens."""
        if not self._cut:
            return text
        return (f"The question is too long for this explorer: its first {self._cut:,} tokens "
                f"were left out, and the model reads the rest (at most {MAX_PROMPT} tokens "
                f"with the system message). {text}")

    def _show_answer(self, question, text, done=False):
        self.answer_box.value = (
            f'<div data-name="answer" style="{_TEXT_CSS}"><b>Q:</b> '
            f"{html.escape(shorten(question))}\n"
            f"<b>A:</b> {html.escape(text)}{'' if done else ' ▍'}</div>")

    # --- drawing ---------------------------------------------------------------------------

    def _update(self, new_answer=False):
        with self._draw_lock:
            self._draw(new_answer)

    def _draw(self, new_answer):
        c = self.controls
        question = c["question"].value
        sampling = (question, float(c["temperature"].value), int(c["top_k"].value))
        if not new_answer and sampling != self._asked:
            self._ask(question)
            if self.background:
                return  # the worker draws when the answer is complete
        layer, head = c["layer"].value, c["head"].value
        window, sinks = int(c["window"].value), int(c["sinks"].value)
        key = (id(self._maps), layer, head, window, sinks)
        if key == self._last_key:
            return
        n = self._n_tokens
        shown = slice(max(0, self._maps.shape[-1] - MAX_SHOWN), None)
        w = self._maps[layer - 1, head - 1][shown, shown]
        new_labels = self._last_key is None or key[0] != self._last_key[0]
        part = ("the conversation" if n <= MAX_SHOWN
                else f"the conversation's last {MAX_SHOWN} tokens")
        figures.update_llm_map(self.art, w, self._pieces[shown] if new_labels else None,
                               title=f"one head's attention over {part}" if new_labels else None)
        figures.update_llm_loss(self.art, window, sinks)
        if new_labels:
            self.canvas.invalidate()  # new labels: a new static background
        # the layer and head are named in the read-out: a change redraws the image alone
        self._show(self.canvas, self.art.dynamic, static_key=key[0])
        self._write(w, window, sinks, layer, head)
        self._last_key = key

    def _write(self, w, window, sinks, layer, head):
        table = self.measured["windows"]["table"]
        full = table["full"]
        row = table[f"{window}+{sinks}"]
        last = w[-1]
        keys = np.argsort(-last, kind="stable")[:5]
        pieces = figures.piece_labels(self._pieces[-w.shape[0]:])
        self.readout.value = (
            _table("last_row", last[keys][None, :], row_labels=["weight"],
                   col_labels=[f"{pieces[j]} ({j + 1})" for j in keys],
                   title=f"layer {layer}, head {head}: where the last token looks (the five "
                         "largest weights)")
            + _table("window_loss", np.array([[row["loss"], full["loss"], row["vs_full"]]]),
                     row_labels=[f"window {window} + {sinks} sink(s)"],
                     col_labels=["loss", "full attention", "difference"],
                     title="loss on a long text (nats a token; stored measurement)"))

    def shown(self):
        """What is on screen: the map, the marker, the answer, the status and the tables."""
        from .base import _text_of, read_tables
        tables = read_tables(self.readout.value)
        return {"map": np.array(np.ma.getdata(self.art.map.image.get_array()), dtype=float),
                "marker": tuple(float(v[0]) for v in self.art.marker.get_data()),
                "answer": _text_of(self.answer_box.value), "status": _text_of(self.status.value),
                "last_row": tables["last_row"][0], "window_loss": tables["window_loss"][0]}


def llm_explorer(question=DEFAULT_QUESTION, temperature=1.0, top_k=1, layer=DEFAULT_LAYER,
                 head=DEFAULT_HEAD, window=None, n_sink=0, seed=0, max_new=MAX_NEW,
                 background=True):
    """Ask SmolLM2-135M-Instruct; see its answer, one head's attention, the windowed loss.

    Parameters
    ----------
    question : str
    temperature : float, optional
    top_k : int or None, optional
        1 (greedy, the default), 2, 5, 10, 50, or None for the whole vocabulary.
    layer, head : int, optional
        Counted from 1.
    window, n_sink : int, optional
        One of the stored windows (64, 128, 256) and sink counts (0, 1, 4).
    seed : int, optional
    max_new : int, optional
        The most tokens of an answer.
    background : bool, optional
        Decode in a worker thread (the page stays live); False: in the caller's thread.

    Returns
    -------
    LLMExplorer
    """
    return LLMExplorer(question, temperature, top_k, layer, head, window, n_sink, seed,
                       max_new, background)
