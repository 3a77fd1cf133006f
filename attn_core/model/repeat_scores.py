"""MiniLM on repeated random pieces (notebook 15): does a bidirectional encoder have
previous-token or induction heads?

Random word pieces (lower-case whole words of the vocabulary, all different) repeated once
between ``[CLS]`` and ``[SEP]``, and the control: the same kind of sequence without the
repeat. Every head's scores per sequence, computed by :func:`repeat_scores` and stored by
``tools/measure_minilm_repeats.py`` (notebook 15 recomputes the first sequences live).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .._validate import check_positive_int
from ..induction import induction_score, previous_token_score
from .encoder import encoder_forward

__all__ = ["MEASURES", "REPEATS_PATH", "load_repeat_scores", "repeat_layout", "repeat_scores",
           "repeated_pieces"]

#: The stored scores (``tools/measure_minilm_repeats.py``).
REPEATS_PATH = Path(__file__).resolve().parents[1] / "data" / "induction-minilm.json"
#: The measures, in the order notebook 15 prints them.
MEASURES = ("previous-token", "induction (looking back)", "after the other copy",
            "the other copy itself")


def repeated_pieces(tokenizer, n_seq=16, segment=14, seed=11):
    """``(repeat, control)``: ``n_seq`` sequences ``[CLS] x x [SEP]`` of ``segment`` random
    pieces ``x`` (all different), and ``[CLS] y [SEP]`` of ``2 * segment`` different pieces
    ``y``; each ``(n_seq, 2 * segment + 2)`` int. The pieces are the lower-case ASCII whole
    words of 3 letters or more of ``tokenizer``'s vocabulary, drawn from
    ``numpy.random.default_rng(seed)``."""
    n_seq, segment = check_positive_int(n_seq, "n_seq"), check_positive_int(segment, "segment")
    vocab = tokenizer.get_vocab()
    words = np.array(sorted(i for p, i in vocab.items()
                            if p.isascii() and p.isalpha() and p.islower() and len(p) >= 3))
    g = np.random.default_rng(seed)
    pieces = np.stack([g.choice(words, 2 * segment, replace=False) for _ in range(n_seq)])

    def wrapped(x):  # (n_seq, m) -> (n_seq, m + 2): [CLS] x [SEP]
        return np.concatenate([np.full((len(x), 1), vocab["[CLS]"]), x,
                               np.full((len(x), 1), vocab["[SEP]"])], axis=1)

    repeat = wrapped(np.concatenate([pieces[:, :segment], pieces[:, :segment]], axis=1))
    return repeat, wrapped(pieces)


def repeat_layout(segment=14):
    """The repeat's layout as labels ``(2 * segment + 2,)``: ``[CLS]`` -1, the pieces' index
    in the segment (twice), ``[SEP]`` -2: two positions with one label hold the same piece."""
    segment = check_positive_int(segment, "segment")
    return np.concatenate([[-1], np.tile(np.arange(segment), 2), [-2]])


def _mass(att, keys):
    """Mean over the queries with such keys of the weight on ``keys`` (n, n) bool:
    ``(..., n, n) -> (...)``."""
    return (att * keys).sum(-1)[..., keys.any(-1)].mean(axis=-1)


def repeat_scores(weights, repeat, control, segment=14):
    """Every head's four scores on each sequence, with and without the repeat.

    Parameters
    ----------
    weights : dict
        MiniLM's weights (``load_model().weights``).
    repeat, control : (n_seq, 2 * segment + 2) int ndarray
        :func:`repeated_pieces`.
    segment : int

    Returns
    -------
    dict
        ``{"repeat": {measure: (n_seq, layers, heads)}, "control": {...}}`` for each of
        :data:`MEASURES`: the previous-token score; the induction score (the weight on the key
        after an earlier occurrence of the query's piece); the weight on the key after the
        other occurrence and on the other occurrence itself, in either direction (the
        encoder sees both). The control is scored with the repeat's layout: the same
        positions, no repeat.
    """
    targets = repeat_layout(segment)  # (n,)
    other = (targets[:, None] == targets[None, :]) & ~np.eye(len(targets), dtype=bool)
    after = np.roll(other, 1, axis=1)  # key j: the piece at j - 1 is the query's
    out = {}
    for name, ids in (("repeat", repeat), ("control", control)):
        att = encoder_forward(weights, ids).attentions  # (n_seq, layers, heads, n, n)
        out[name] = dict(zip(MEASURES, (previous_token_score(att),
                                        induction_score(att, targets),
                                        _mass(att, after), _mass(att, other))))
    return out


def load_repeat_scores(path=None):
    """The stored scores (:data:`REPEATS_PATH`): :func:`repeat_scores`' dict of arrays, with
    the file's ``settings`` and ``made_by``."""
    data = json.loads(Path(REPEATS_PATH if path is None else path).read_text(encoding="utf-8"))
    scores = {kind: {m: np.array(v) for m, v in data[kind].items()}
              for kind in ("repeat", "control")}
    return {**scores, "settings": data["settings"], "made_by": data["made_by"]}
