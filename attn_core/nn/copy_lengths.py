"""Notebook 18's copy task by segment length: its evaluation batches, the stored runs of
``tools/train_induction.py --lengths`` read back, and what their attention does.

The runs: notebook 15's two-layer attention-only model (2 heads of 16 per layer, stored by
``tools/train_induction.py``) beside the same model trained with linear attention, and two
controls with one head of 32 per layer (the same parameters; linear attention's state of
32 x 32 is twice two states of 16 x 16), with linear and with softmax attention.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..induction import repeated_tokens
from .gpt import GPTConfig
from .induction_run import TASK, load_runs, measures

__all__ = ["LENGTHS", "LENGTHS_PATH", "LENGTHS_TRACE", "LENGTH_BATCH", "CopyLengthRuns",
           "copy_attention", "length_batches", "load_copy_lengths", "variant_key"]

DATA = Path(__file__).resolve().parents[1] / "data"
#: The segment lengths of the classic layout measured (2 L <= n_ctx = 32).
LENGTHS = (4, 6, 8, 10, 12, 14, 16)
#: Sequences per length in the evaluation (seeded by ``TASK["eval_seed"] + L``).
LENGTH_BATCH = 128
LENGTHS_PATH = DATA / "copy-lengths.npz"
LENGTHS_TRACE = DATA / "copy-lengths-trace.json"
#: Heads per layer of the stored softmax runs (and of the first linear runs).
N_HEADS = 2


def length_batches(lengths=LENGTHS, batch=LENGTH_BATCH, task=TASK):
    """``{L: (ids, labels)}``: the classic layout, ``L`` random tokens then the same again,
    each ``(batch, 2 L)``, seeded by ``task["eval_seed"] + L``."""
    return {L: repeated_tokens(np.random.default_rng(task["eval_seed"] + L), batch,
                               task["vocab_size"], 2 * L, L) for L in lengths}


def variant_key(attention, n_heads):
    """The prefix of a run's parameters in copy-lengths.npz: ``linear`` for the two-head
    linear runs, ``linear.h1`` / ``softmax.h1`` for one head of 32."""
    return attention if n_heads == N_HEADS else f"{attention}.h{n_heads}"


class CopyLengthRuns:
    """The stored sweep: ``trace`` (the JSON), ``config(attention, n_heads)``,
    ``params(seed, attention, n_heads)`` (the softmax two-head runs from notebook 15's
    stored snapshots) and ``second(attention, n_heads)``, ``(seeds, lengths)`` losses."""

    def __init__(self, trace, arrays):
        self.trace, self._arrays, self._stored = trace, arrays, None

    def config(self, attention, n_heads=N_HEADS):
        return GPTConfig(**dict(self.trace["config"], n_heads=n_heads), attention=attention)

    def params(self, seed, attention, n_heads=N_HEADS):
        if (attention, n_heads) == ("softmax", N_HEADS):
            self._stored = self._stored or load_runs()
            return self._stored.params(seed, 2, self.trace["settings"]["steps"])
        prefix = f"s{seed}.{variant_key(attention, n_heads)}/"
        got = {k[len(prefix):]: v for k, v in self._arrays.items() if k.startswith(prefix)}
        if not got:
            raise ValueError(f"no stored run of seed {seed} with {attention} attention and "
                             f"{n_heads} head(s); seeds {self.trace['seeds']}")
        return got

    def second(self, attention, n_heads=N_HEADS):
        rows = [r["second"] for r in sorted(self.trace["runs"], key=lambda r: r["seed"])
                if (r["attention"], r.get("n_heads", N_HEADS)) == (attention, n_heads)]
        return np.array(rows)


def load_copy_lengths(npz_path=LENGTHS_PATH, trace_path=LENGTHS_TRACE):
    """The stored sweep as a :class:`CopyLengthRuns`."""
    trace = json.loads(Path(trace_path).read_text(encoding="utf-8"))
    with np.load(npz_path) as f:
        arrays = {k: f[k] for k in f.files}
    return CopyLengthRuns(trace, arrays)


def copy_attention(params, config, ids, labels):
    """What the model's attention does on the second copy of the classic layout.

    Parameters
    ----------
    params, config : a two-layer model
    ids, labels : (batch, 2 L) from :func:`length_batches`

    Returns
    -------
    dict
        ``prev``: the highest previous-token score of a first-layer head (mean weight on the
        token before); ``copied``: the highest induction score of a last-layer head (mean
        weight on the position whose token comes next, the one to copy); ``top``: the
        largest of the last layer's heads' mean top weight over the second copy's rows (1:
        all on one key); ``second``: the second-copy loss.
    """
    m = measures(params, config, ids, labels)
    half = np.asarray(ids).shape[1] // 2
    last = m["weights"][-1][:, :, half:, :]  # (batch, heads, rows of the second copy, keys)
    return dict(prev=float(m["prev"][0].max()), copied=float(m["induction"][-1].max()),
                top=float(last.max(axis=-1).mean(axis=(0, 2)).max()), second=m["second"])
