"""The scaling experiment of notebook 12 over many seeds, computed once and stored as data.

Training a model with unscaled scores at a large ``d_k`` is *chaotic*: its softmax is
saturated, its gradients are tiny, and Adam divides them by their own running size, so a
difference in the last bit of one initial weight (or of one ``exp``, which another CPU rounds
differently) grows into a different final loss in the second decimal. A table printed from a
live run would then read differently on every machine. So the table is computed here, once,
by ``tools/scaling_table.py``, over more seeds than the notebook trains live, and stored in
``attn_core/data/scaling-table.json`` with, for every seed, how much its result moves when
every initial weight is nudged by one unit in the last place (``ATTN_CORE_PERTURB_INIT``).
``tests/test_scaling_table.py`` recomputes it and compares.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ._validate import PERTURB_INIT
from .training import final_loss, scaling_runs

__all__ = ["SCALING_TABLE", "SETTINGS", "compute_scaling_table", "load_scaling_table"]

#: Where the stored table lives (package data).
SCALING_TABLE = Path(__file__).parent / "data" / "scaling-table.json"
#: The experiment's settings: notebook 12's, with 20 seeds instead of its live 3.
SETTINGS = {"task": "lookup", "d_ks": [4, 16, 64, 256], "seeds": list(range(20)), "steps": 120,
            "lr": 0.01, "batch": 16}
FORMAT_VERSION = 1


@contextmanager
def _perturbed_init():
    old = os.environ.get(PERTURB_INIT)
    os.environ[PERTURB_INIT] = "1"
    try:
        yield
    finally:
        if old is None:
            del os.environ[PERTURB_INIT]
        else:
            os.environ[PERTURB_INIT] = old


def _results(settings):
    runs = scaling_runs(settings["task"], d_ks=tuple(settings["d_ks"]),
                        seeds=tuple(settings["seeds"]), steps=settings["steps"],
                        lr=settings["lr"], batch=settings["batch"])
    return {key: (np.array([final_loss(r) for r in rs]), np.array([r.accuracy for r in rs]))
            for key, rs in runs.items()}


def compute_scaling_table(settings=None):
    """Train every row of the table twice (as initialised, and nudged by one ulp).

    Returns
    -------
    table : dict
        ``"settings"``; ``"rows"``: one dict per (d_k, scaled) with the per-seed
        ``"final_loss"`` and ``"accuracy"`` lists and ``"ulp_loss"`` / ``"ulp_accuracy"``, the
        largest change of any seed's result under the one-ulp nudge.
    """
    settings = dict(SETTINGS if settings is None else settings)
    plain = _results(settings)
    with _perturbed_init():
        nudged = _results(settings)
    rows = []
    for (d_k, scaled), (loss, acc) in plain.items():
        loss2, acc2 = nudged[d_k, scaled]
        rows.append({"d_k": int(d_k), "scaled": bool(scaled), "final_loss": loss.tolist(),
                     "accuracy": acc.tolist(), "ulp_loss": float(np.abs(loss - loss2).max()),
                     "ulp_accuracy": float(np.abs(acc - acc2).max())})
    return {"format_version": FORMAT_VERSION, "settings": settings, "rows": rows}


def load_scaling_table(path=None):
    """The stored table (:func:`compute_scaling_table`'s dict plus how it was made).

    Raises a ValueError naming the file when it is of another format version.
    """
    path = SCALING_TABLE if path is None else Path(path)
    table = json.loads(path.read_text(encoding="utf-8"))
    if table.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: format_version {table.get('format_version')!r}, expected "
                         f"{FORMAT_VERSION}; regenerate it with tools/scaling_table.py")
    return table
