"""The measurements of notebook 17 on SmolLM2-135M-Instruct: attention sinks with their
controls, Xiao et al.'s windowed loss, induction heads with their ablation control.

Every function runs the model through :func:`attn_core.model.llm.llm_forward` (the course's
one decoder stack) with its interventions: a key's score masked
(``keys_masked``), a key's value vector zeroed (``values_zeroed``), a sliding window with sinks
(``mask=window_mask(n, window, n_sink)``), heads ablated (``ablate``). The long runs are made
by ``tools/measure_llm.py`` and stored in ``attn_core/data/llm-measurements.json``; the test
``tests/test_llm_measurements.py`` recomputes a slice of them with these same functions.

The texts are slices of ``attn_core/data/corpus.txt`` (Python's documentation, prose only; see
the data README), each starting at the beginning of a word (the 32 sink texts start with 27
different tokens: a few words, such as "and", begin more than one).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..induction import induction_score, previous_token_score, repeated_tokens
from ..nn.data import load_corpus
from .llm import llm_forward, llm_losses

__all__ = ["MEASUREMENTS_PATH", "ablation_losses", "corpus_texts", "first_position_weights",
           "head_scores", "intervention_losses", "load_measurements", "longest_word",
           "most_attended", "paired", "random_repeats", "windowed_losses"]


#: Where tools/measure_llm.py stores its results.
MEASUREMENTS_PATH = Path(__file__).resolve().parent.parent / "data" / "llm-measurements.json"


def load_measurements(path=None):
    """The stored measurements (a dict; see tools/measure_llm.py for what each entry is)."""
    path = MEASUREMENTS_PATH if path is None else Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run python tools/measure_llm.py")
    return json.loads(path.read_text(encoding="utf-8"))


def corpus_texts(encode, n_texts, n_tokens, start=0, stop=None):
    """``n_texts`` token sequences of ``n_tokens`` from corpus.txt, evenly spaced.

    Each slice starts just after a space (a word's beginning) and is encoded by ``encode``
    (text -> list of ids); returns ``(n_texts, n_tokens)`` int64.
    """
    text = load_corpus()
    stop = len(text) if stop is None else stop
    chars = 8 * n_tokens  # plenty: English prose is about 4-5 characters a token
    out = []
    for s in np.linspace(start, stop - chars, n_texts).astype(int):
        s = text.index(" ", int(s)) + 1
        ids = list(encode(" ".join(text[s:s + chars].split())))
        if len(ids) < n_tokens:
            raise ValueError(f"the slice at {s} has only {len(ids)} tokens")
        out.append(ids[:n_tokens])
    return np.array(out, dtype=np.int64)


def _weights(model, ids, **options):
    """Every layer's attention maps ``{layer: (..., heads, n, n)}``; ``model`` is
    ``(params, config)`` of :func:`attn_core.model.llm_file.load_llm`."""
    params, config = model
    every = {i: None for i in range(config.n_layers)}
    return llm_forward(params, config, ids, weights_of=every, heads_of={}, **options).weights


def _losses(model, ids, **options):
    params, config = model
    return llm_losses(params, config, ids, weights_of={}, heads_of={}, **options)


def first_position_weights(model, ids, position=0, queries=slice(16, None), prefix=(),
                           **options):
    """Mean weight on key ``position`` per layer (over heads and the ``queries``), per text.

    ids : (texts, n) int; ``prefix`` token ids are put before every text first; ``options``
    go to :func:`attn_core.model.llm.llm_forward` (e.g. ``keys_masked``).
    Returns (texts, layers) float64.
    """
    ids = np.asarray(ids)
    if len(prefix):
        ids = np.concatenate([np.tile(np.asarray(prefix), (len(ids), 1)), ids], axis=1)
    weights = _weights(model, ids, **options)
    per_layer = [w[..., queries, position].mean(axis=(-2, -1), dtype=np.float64)
                 for _, w in sorted(weights.items())]  # each (texts,)
    return np.stack(per_layer, axis=-1)  # (texts, layers)


def most_attended(model, ids, candidates, queries):
    """For each text, the key among ``candidates`` (positions) that receives the most weight
    from the ``queries``, averaged over every layer and head: its "most important" token by
    attention. ids (texts, n) -> (texts,) int."""
    weights = _weights(model, ids)
    got = sum(w[..., queries, :].mean(axis=(-3, -2), dtype=np.float64)
              for w in weights.values())  # (texts, n)
    return np.asarray(candidates)[np.argmax(got[:, candidates], axis=-1)]


def longest_word(ids, decode, candidates):
    """For each text, the position among ``candidates`` of its longest word-initial token (a
    space then letters only, e.g. " documentation"), the earliest of equal length: a content
    word chosen without looking at attention. ``decode`` maps one id to its text.
    ids (texts, n) -> (texts,) int; a text with no such token among the candidates raises."""
    out = []
    for row in np.asarray(ids):
        best, where = 0, None
        for c in candidates:
            piece = decode(int(row[c]))
            size = len(piece) - 1 if piece[:1] == " " and piece[1:].isalpha() else 0
            if size > best:
                best, where = size, int(c)
        if where is None:
            raise ValueError(f"no whole-word token among positions {list(candidates)}")
        out.append(where)
    return np.array(out, dtype=np.int64)


def intervention_losses(model, ids, position, scored, how):
    """Per-token losses of one text with key ``position`` intervened on in every layer.

    ``how``: ``None`` (no intervention), ``"mask"`` (its score masked: its weight goes to the
    other keys) or ``"zero"`` (its value vector zeroed, its weight kept). ``scored`` (slice)
    picks the predictions kept. ids (n,) -> float64 (len of the slice,).
    """
    layers = range(model[1].n_layers)
    kw = {}
    if how == "mask":
        kw["keys_masked"] = {i: [int(position)] for i in layers}
    elif how == "zero":
        kw["values_zeroed"] = {i: [int(position)] for i in layers}
    elif how is not None:
        raise ValueError(f"how must be None, 'mask' or 'zero', got {how!r}")
    return _losses(model, np.asarray(ids), **kw)[scored]


def paired(a, b):
    """Mean of ``b - a`` over texts and its standard error (paired: the same texts)."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size))


def windowed_losses(model, ids, window=None, n_sink=0):
    """Per-token losses of one long text ``ids`` (n,) with full attention (``window=None``)
    or a sliding window of ``window`` tokens keeping the first ``n_sink`` (every layer)."""
    if window is None:
        return _losses(model, np.asarray(ids))
    return _losses(model, np.asarray(ids), window=window, n_sink=n_sink)


def random_repeats(seed, batch, segment, low, high):
    """``batch`` sequences of ``segment`` random ordinary tokens (ids ``low .. high - 1``), then
    the same ``segment`` again: ``(ids, labels)`` of :func:`attn_core.induction.repeated_tokens`."""
    ids, labels = repeated_tokens(np.random.default_rng(seed), batch, high - low, 2 * segment,
                                  segment)
    return ids + low, labels


def head_scores(model, ids):
    """Previous-token and induction scores of every head, ``(layers, heads)`` each, averaged
    over the sequences ids (batch, n) (attn_core.induction's scores)."""
    weights = _weights(model, ids)
    prev = np.stack([previous_token_score(w).mean(axis=0) for _, w in sorted(weights.items())])
    ind = np.stack([induction_score(w, ids[:, None]).mean(axis=0)
                    for _, w in sorted(weights.items())])
    return prev, ind


def ablation_losses(model, ids, labels, heads, part):
    """Mean loss on the tokens labelled ``part`` with ``heads`` [(layer, head), ...] zeroed."""
    ablate = {(int(layer), int(h)): None for layer, h in heads} or None
    losses = _losses(model, ids, ablate=ablate)  # (batch, n - 1): predicts ids[:, 1:]
    return float(losses[labels[:, 1:] == part].mean())
