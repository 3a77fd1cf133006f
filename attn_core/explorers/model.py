"""The model explorer: a real pretrained encoder's attention, one head and one query at a time.

Type a sentence; the model (all-MiniLM-L6-v2, run by :mod:`attn_core.model.pretrained`)
reads it once; then the ``layer`` and ``head`` sliders and the ``query`` menu only choose
which of its stored attention weights to show:

* left, the chosen head's map, the query's row outlined
  (:func:`~attn_core.figures.head_map`);
* right, the query's row in every head at once, the chosen head outlined
  (:func:`~attn_core.figures.query_in_every_head`);
* below, HTML tables: the query's weights over the keys (top key highlighted), the chosen
  head's role scores beside those of a uniform head, and the forward pass's time.

Speed follows :mod:`attn_core.explorers.base`: each sentence's figure is built and drawn
once (its labels are the static background); a slider move redraws only the two images,
the outlines and the titles over that background. Runs are cached by text, so the model never
reads the same sentence twice.

Like every explorer, it builds on :class:`~attn_core.explorers.base.Explorer`.
"""

from __future__ import annotations

import html
import re
from collections import OrderedDict

import ipywidgets as W
import numpy as np

from .. import figures
from ..model import head_roles, pretrained
from .base import (
    MUTED_COLOR,
    STYLE,
    Explorer,
    _Canvas,
    _row,
    _slider,
    _table,
    clocked,
    css_width,
    read_tables,
)
from .colors import _HEAD_CSS

__all__ = ["ModelExplorer", "model_explorer", "piece_words", "role_table"]

DEFAULT_SENTENCE = "The animal crossed the road because it was tired."
DEFAULT_QUERY = "it"  # shown first when the sentence has it; else its first real piece
#: Longest sentence the explorer shows (word pieces, [CLS] and [SEP] included): beyond
#: this its labels would have to be thinned out. The model itself reads up to 512.
MAX_PIECES = 64
#: Sentences whose runs are kept (a run holds every layer's states: about 2 MB at 64 pieces).
RUN_CACHE_SIZE = 16
SENTENCE_WIDTH = "560px"
#: The roles scored in the read-out, in order: (name, description).
ROLES = (
    ("previous token", "mean weight on the piece just before the query"),
    ("[CLS]", "mean weight on [CLS], over the sentence's own pieces"),
    ("[SEP]", "mean weight on [SEP], over the sentence's own pieces"),
    ("self", "mean weight a piece puts on itself"),
    ("same word", "mean weight on other pieces of the same word"),
)
NOT_AVAILABLE = "n/a"
TIME_ROLE = "forward-time"  # data-role of the HTML that holds the time (tests ignore it)
_DIV_CSS = "font-family:sans-serif;font-size:12px;margin:2px 0"
_SCROLL_CSS = "overflow-x:auto;max-width:100%;white-space:nowrap"  # one line, scrolled


# --- pure helpers ---------------------------------------------------------------------------


def piece_words(pieces, word_ids):
    """The lower-cased word each piece belongs to (None for [CLS], [SEP]).

    Pieces of one word (``"river"``, ``"##bank"``) all get the whole word; two pieces then
    carry the same word when the sentence repeats it or when a word was split, which is
    what :func:`attn_core.model.head_roles.same_word_score` measures.

    Parameters
    ----------
    pieces : sequence of n str
    word_ids : sequence of n int or None
        As :class:`attn_core.model.pretrained.SentenceRun` gives them.

    Returns
    -------
    list of n str or None

    Examples
    --------
    >>> piece_words(["[CLS]", "the", "river", "##bank", "the", "[SEP]"],
    ...             [None, 0, 1, 1, 2, None])
    [None, 'the', 'riverbank', 'riverbank', 'the', None]
    """
    if len(pieces) != len(word_ids):
        raise ValueError(f"pieces and word_ids must have the same length, got {len(pieces)} "
                         f"and {len(word_ids)}")
    text = {}
    for piece, word in zip(pieces, word_ids):
        if word is not None:
            text[word] = text.get(word, "") + (piece[2:] if piece.startswith("##") else piece)
    return [None if w is None else text[w].lower() for w in word_ids]


def role_table(attentions, words):
    """Every head's role scores, and those of a head that spreads its weight evenly.

    Parameters
    ----------
    attentions : (layers, heads, n, n) array_like, n >= 3 ([CLS], a piece, [SEP])
    words : sequence of n str or None
        From :func:`piece_words`.

    Returns
    -------
    scores : dict, role name -> (layers, heads) ndarray, or None for "same word" when no
        word occurs twice
    uniform : dict, role name -> float (None likewise): the same scores of the uniform
        weights 1/n, the baseline to compare with (1/n, except for "same word")
    """
    a = np.asarray(attentions, dtype=float)
    n = a.shape[-1]
    inner = list(range(1, n - 1))  # the sentence's own pieces, without [CLS] and [SEP]

    def scores(w):
        found = {"previous token": head_roles.previous_token_score(w),
                 "[CLS]": head_roles.attention_to_position(w, 0, queries=inner),
                 "[SEP]": head_roles.attention_to_position(w, n - 1, queries=inner),
                 "self": head_roles.self_score(w)}
        try:
            found["same word"] = head_roles.same_word_score(w, words)
        except ValueError:  # no word repeats: the pattern cannot be measured here
            found["same word"] = None
        return found

    uniform = {k: None if v is None else float(v)
               for k, v in scores(np.full((n, n), 1.0 / n)).items()}
    return scores(a), uniform


def _query_options(pieces):
    """Dropdown options: ``"8: it"`` (1-based, as a learner counts) -> 0-based position."""
    return [(f"{i + 1}: {p}", i) for i, p in enumerate(pieces)]


def _default_query(pieces, *wanted):
    """The first occurrence of the first wanted piece present, else the first real token."""
    lowered = [p.lower() for p in pieces]
    for piece in wanted:
        if isinstance(piece, str) and piece.lower() in lowered:
            return lowered.index(piece.lower())
    return 1 if len(pieces) > 2 else 0


# --- the explorer ---------------------------------------------------------------------------


class ModelExplorer(Explorer):
    """A sentence, a layer, a head and a query: the real model's attention, read back.

    Controls: ``"sentence"`` (text; Enter or the ``"run"`` button runs the model),
    ``"layer"`` and ``"head"`` (1-based sliders), ``"query"`` (the pieces, ``"8: it"``,
    whose values are 0-based positions). ``.model_runs`` counts forward passes.
    """

    title = "a real model"

    def __init__(self, sentence=DEFAULT_SENTENCE, layer=1, head=1, query=None):
        super().__init__()
        self.model = pretrained.load_model()  # ModelFilesError when the package is missing
        self.layers, self.heads = self.model.layers, self.model.heads
        layer, head = figures.check_layer_head(layer, head, self.layers, self.heads)
        if query is not None and not isinstance(query, str):
            raise TypeError(f"query must be a word piece (str), got {type(query).__name__}")
        self.query_piece = DEFAULT_QUERY if query is None else query
        self.model_runs = 0
        self._runs = OrderedDict()  # text -> SentenceRun, most recent last
        self._roles = {}  # text -> role_table(...)
        self.run = None
        self.panels = None
        c = self.controls
        c["sentence"] = W.Text(value=sentence, description="sentence", continuous_update=False,
                               style=STYLE, layout=W.Layout(width=SENTENCE_WIDTH))
        c["run"] = W.Button(description="Run the model", button_style="primary",
                            tooltip="Run the model on the sentence (Enter does it too)")
        c["layer"] = _slider(W.IntSlider, "layer", min=1, max=self.layers, value=layer)
        c["head"] = _slider(W.IntSlider, "head", min=1, max=self.heads, value=head)
        c["query"] = W.Dropdown(description="query", style=STYLE,
                                layout=W.Layout(width="200px"))
        self.readout = W.HTML(layout=W.Layout(width="100%"))  # never wider than the output
        self.readout.add_class("attn-fill")
        run = self._run_for(sentence)  # a bad first sentence raises right here
        if query is not None and query.lower() not in [p.lower() for p in run.pieces]:
            raise ValueError(f"query {query!r} is not a word piece of the sentence; its pieces "
                             f"are {', '.join(map(repr, run.pieces))}")
        self._set_run(run)
        c["sentence"].observe(self._on_sentence, names="value")
        c["run"].on_click(self._on_sentence)
        self._watch("layer", "head", "query")
        self._start(_row(c["sentence"], c["run"]), _row(c["layer"], c["head"], c["query"]),
                    self.image, self.readout)

    # the model, once per sentence
    def _run_for(self, text):
        if not isinstance(text, str):
            raise TypeError(f"sentence must be a str, got {type(text).__name__}")
        if text in self._runs:
            self._runs.move_to_end(text)
            return self._runs[text]
        pieces, _, _ = self.model.tokenize(text)  # ValueError: empty, or over 512 pieces
        if len(pieces) > MAX_PIECES:
            raise ValueError(f"the sentence has {len(pieces)} word pieces; this explorer shows "
                             f"at most {MAX_PIECES} (shorten it, or draw a longer text with "
                             f"attn_core.figures.head_map)")
        run = self.model.run(text)  # on the learner's BLAS threads (attn_core.threads)
        self.model_runs += 1
        self._runs[text] = run
        while len(self._runs) > RUN_CACHE_SIZE:
            old, _ = self._runs.popitem(last=False)
            self._roles.pop(old, None)
        return run

    def roles(self, run):
        """:func:`role_table` of ``run`` (cached by text)."""
        if run.text not in self._roles:
            self._roles[run.text] = role_table(run.attentions,
                                               piece_words(run.pieces, run.word_ids))
        return self._roles[run.text]

    def _on_sentence(self, change=None):
        """Enter in the text box, or the button: run the model on the text (if new)."""
        if self._busy:
            return
        text = self.controls["sentence"].value
        if self.run is not None and text == self.run.text:
            self._guard(lambda: None)  # back to the sentence shown: clear any error
            return
        try:
            run = self._run_for(text)
        except (ValueError, TypeError) as exc:  # the learner's input: say so, keep the state
            self._report(exc)
            return
        except Exception as exc:
            self._report(exc)
            raise
        self._guard(self._show_run, run)

    def _show_run(self, run):
        """Show a new sentence whole, or not at all: if anything fails on the way, the last
        good sentence, figure, query menu and read-out are put back (and the error raised)."""
        c = self.controls
        saved = (self.run, self.canvas, self.panels, self._last_key, self.readout.value,
                 c["query"].options, c["query"].value)
        try:
            self._set_run(run)
            self._update()
        except Exception:
            (self.run, self.canvas, self.panels, self._last_key, self.readout.value,
             options, value) = saved
            self._set_query_menu(options, value)
            raise

    def _set_run(self, run):
        """A new sentence: a new figure (new labels), new query options. Everything new is
        built before anything of the explorer changes."""
        c = self.controls
        keep = None if self.run is None else self.run.pieces[c["query"].value]
        q = _default_query(run.pieces, keep, self.query_piece)
        canvas = _Canvas(figures.panels_layout(run.pieces).figsize, layout=None)
        panels = figures.explorer_panels(run.attentions, run.pieces, c["layer"].value,
                                         c["head"].value, q, fig=canvas.figure)
        options = _query_options(run.pieces)
        self.run, self.canvas, self.panels = run, canvas, panels
        self._set_query_menu(options, q)
        self._last_key = None

    def _set_query_menu(self, options, value):
        self._busy = True  # the explorer's own change: no update
        try:
            self.controls["query"].options = options
            self.controls["query"].value = value
        finally:
            self._busy = False

    # slider moves: only redraw
    def _update(self):
        run, c = self.run, self.controls
        layer, head, q = c["layer"].value, c["head"].value, c["query"].value
        key = (run.text, layer, head, q)
        if key == self._last_key:
            return
        figures.update_explorer_panels(self.panels, run.attentions, layer, head, q)
        self.readout.value = self._readout(run, layer, head, q)
        self._show(self.canvas, self.panels.dynamic, static_key=run.text)
        self._last_key = key

    def _readout(self, run, layer, head, q):
        w = run.attentions[layer - 1, head - 1, q]  # (n,) the query's row
        top = int(np.argmax(w))
        labels = [f"{j + 1}: {p}" for j, p in enumerate(run.pieces)]
        where = (f"Layer {layer}, head {head}: where {run.pieces[q]!r} (piece {q + 1}) looks. "
                 f"Its top key is {run.pieces[top]!r} (piece {top + 1}) with weight "
                 f"{w[top]:.3f}; a head spreading evenly would give each of the "
                 f"{run.n} pieces 1/{run.n} = {1 / run.n:.3f}.")
        row = _table("row", w[None, :], row_labels=[labels[q]], col_labels=labels,
                     highlight={(0, top)})
        # The text wraps at the figure's width; the row table may use the output's whole
        # width (at 1920 px it was cut at the figure's) and scrolls sideways beyond it.
        width = css_width(self.canvas.figure)
        return (f'<div style="{_DIV_CSS};max-width:{width}px">{html.escape(where)}</div>'
                f'<div style="{_SCROLL_CSS}">{row}</div>'
                f'<div style="max-width:{width}px">'
                + self._roles_html(run, layer, head) + self._time_html(run) + "</div>")

    def _roles_html(self, run, layer, head):
        scores, uniform = self.roles(run)
        names = [name for name, _ in ROLES if scores[name] is not None]
        values = [[scores[k][layer - 1, head - 1], uniform[k]] for k in names]
        table = _table("roles", np.array(values), row_labels=names,
                       col_labels=[f"layer {layer}, head {head}", "uniform head"],
                       title="Role scores: the share of weight this head gives each "
                             "pattern, beside a head that spreads it evenly")
        missing = [name for name, _ in ROLES if scores[name] is None]
        extra = "".join(
            f'<tr><th style="{_HEAD_CSS}">'
            f'{html.escape(name)}</th><td colspan="2" style="padding:1px 6px;'
            f'text-align:center;border:1px solid #ddd;color:{MUTED_COLOR}">{NOT_AVAILABLE} '
            f"(no word repeats)</td></tr>" for name in missing)
        return table.replace("</table>", extra + "</table>")

    @staticmethod
    def _time_html(run):
        return clocked(
            "div", f"Forward pass through the model: {run.seconds * 1e3:.0f} ms for {run.n} "
                   "word pieces (run once per sentence; the sliders only pick stored weights).",
            instead=f"Forward pass through the model: run once per sentence ({run.n} word "
                    "pieces; a running kernel says how long it took); the sliders only pick "
                    "stored weights.",
            style=f'{_DIV_CSS};color:{MUTED_COLOR}" data-role="{TIME_ROLE}')

    # what is on screen
    def shown(self):
        p = self.panels
        hm, every = p.head_map, p.every_head
        markup = self.readout.value
        tables = read_tables(markup)
        roles = tables["roles"]
        names = [name for name, _ in ROLES if name in self._role_names(markup)]
        time = re.search(rf'data-role="{TIME_ROLE}"[^>]*>Forward pass through the model: (\d+) ms',
                         markup)
        return {
            "sentence": self.run.text,
            "pieces": list(self.run.pieces),
            "weights": figures.image_values(hm),  # the (n, n) map
            "row_labels": [t.get_text() for t in hm.row_labels],
            "col_labels": [t.get_text() for t in hm.col_labels],
            "query_row": figures.outlined_query(hm),
            "map_title": hm.title.get_text(),
            "every_head": figures.image_values(every),
            "every_col_labels": [t.get_text() for t in every.col_labels],
            "layer_labels": [t.get_text() for t in every.layer_labels],
            "head_labels": [t.get_text() for t in every.head_labels],
            "selected": figures.selected_head(every),
            "every_title": every.title.get_text(),
            "query_options": [label for label, _ in self.controls["query"].options],
            "row": tables["row"][0],
            "roles": {name: roles[k] for k, name in enumerate(names)},
            "not_available": [name for name, _ in ROLES if name not in names],
            "forward_ms": None if time is None else float(time.group(1)),
        }

    @staticmethod
    def _role_names(markup):
        block = re.search(r'<table data-name="roles".*?</table>', markup, re.S).group(0)
        return [html.unescape(m) for m in re.findall(
            r'<tr><th[^>]*>([^<]*)</th><td class="v"', block)]


def model_explorer(sentence=DEFAULT_SENTENCE, layer=1, head=1, query=None):
    """A real model's attention: type a sentence, pick a layer, a head and a query piece.

    Parameters
    ----------
    sentence : str
        Run through all-MiniLM-L6-v2 once (at most ``MAX_PIECES`` word pieces).
    layer, head : int
        1-based: layers 1 to 6, heads 1 to 12.
    query : str, optional
        The query piece shown first (its first occurrence), which must be a piece of the
        sentence. Default: ``"it"`` if the sentence has it, else its first real piece.
        (A sentence typed later keeps the current piece if it has it, else falls back the
        same way.)

    Returns
    -------
    ModelExplorer
        Controls ``"sentence"``, ``"run"``, ``"layer"``, ``"head"``, ``"query"``.

    Raises
    ------
    attn_core.model.pretrained.ModelFilesError
        If the model's package is not installed (the message says how to install it).
    ValueError
        For an empty or too long sentence, a layer or head out of range, or a query
        that is not a piece of the sentence.
    """
    return ModelExplorer(sentence, layer, head, query)
