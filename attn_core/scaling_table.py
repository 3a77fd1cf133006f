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

The table holds ``d_model = 16`` and one learning rate while ``d_k`` grows. The *sweep*
(``attn_core/data/scaling-sweep.json``, same tool) answers the objections to that: every width
(``d_model = d_k = 256`` included) at several learning rates, and two controls that separate
the two ways a missing ``1/sqrt(d_k)`` can hurt (see :data:`VARIANTS`).
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ._validate import PERTURB_INIT
from .training import final_loss, scaling_runs, train

__all__ = ["SCALING_SWEEP", "SCALING_TABLE", "SETTINGS", "SWEEP_SETTINGS", "VARIANTS",
           "best_rows", "compute_scaling_sweep", "compute_scaling_table", "load_scaling_sweep",
           "load_scaling_table", "sweep_row", "table_results"]

#: Where the stored table lives (package data).
SCALING_TABLE = Path(__file__).parent / "data" / "scaling-table.json"
#: The experiment's settings: notebook 12's, with 20 seeds instead of its live 3.
SETTINGS = {"task": "lookup", "d_ks": [4, 16, 64, 256], "seeds": list(range(20)), "steps": 120,
            "lr": 0.01, "batch": 16}
FORMAT_VERSION = 1

#: Where the learning-rate sweep with its two controls lives.
SCALING_SWEEP = Path(__file__).parent / "data" / "scaling-sweep.json"
#: The four ways of training a width: ``name -> (scaled, e)``, where the initial ``W_q`` and
#: ``W_k`` are multiplied by ``d_k ** e``, so the starting scores by ``d_k ** (2 e)``. The two
#: controls separate the two causes a missing 1/sqrt(d_k) could act through: "unscaled,
#: tempered init" starts with exactly the scaled model's scores (no saturation at the start)
#: but keeps the unscaled model's step size in the scores; "scaled, saturated init" starts
#: with the unscaled model's saturated scores but keeps the scaled model's step size.
VARIANTS = {"scaled": (True, 0.0), "unscaled": (False, 0.0),
            "unscaled, tempered init": (False, -0.25), "scaled, saturated init": (True, 0.25)}
#: The sweep: every (d_model, d_k) width, every variant, every learning rate, these seeds.
SWEEP_SETTINGS = {"task": "lookup", "widths": [[16, 4], [16, 16], [16, 64], [16, 256],
                                               [256, 256]],
                  "variants": list(VARIANTS), "lrs": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2],
                  "seeds": list(range(10)), "steps": 120, "batch": 16}


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


def table_results(settings=None):
    """Train every row of the table once, as initialised (no nudge).

    Returns
    -------
    results : dict
        ``(d_k, scaled) -> (final_losses, accuracies)``, (S,) each over the seeds of
        ``settings`` (default :data:`SETTINGS`).
    """
    settings = SETTINGS if settings is None else settings
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
    plain = table_results(settings)
    with _perturbed_init():
        nudged = table_results(settings)
    rows = []
    for (d_k, scaled), (loss, acc) in plain.items():
        loss2, acc2 = nudged[d_k, scaled]
        rows.append({"d_k": int(d_k), "scaled": bool(scaled), "final_loss": loss.tolist(),
                     "accuracy": acc.tolist(), "ulp_loss": float(np.abs(loss - loss2).max()),
                     "ulp_accuracy": float(np.abs(acc - acc2).max())})
    return {"format_version": FORMAT_VERSION, "settings": settings, "rows": rows}


def sweep_row(d_model, d_k, variant, lr, settings=None):
    """Train one row of the sweep: ``(final_losses, accuracies)`` over its seeds, (S,) each."""
    settings = SWEEP_SETTINGS if settings is None else settings
    scaled, e = VARIANTS[variant]
    runs = train(settings["task"], d_k=d_k, scaled=scaled, seeds=tuple(settings["seeds"]),
                 steps=settings["steps"], lr=lr, batch=settings["batch"], d_model=d_model,
                 qk_gain=float(d_k) ** e, snapshots=2)
    return np.array([final_loss(r) for r in runs]), np.array([r.accuracy for r in runs])


def compute_scaling_sweep(settings=None):
    """Every width x variant x learning rate of :data:`SWEEP_SETTINGS`, trained as initialised
    and nudged by one ulp (as :func:`compute_scaling_table`).

    Returns
    -------
    sweep : dict
        ``"settings"``; ``"rows"``: one dict per (d_model, d_k, variant, lr) with the per-seed
        ``"final_loss"`` and ``"accuracy"`` and ``"ulp_loss"``, the largest change of a seed's
        final loss under the nudge.
    """
    settings = dict(SWEEP_SETTINGS if settings is None else settings)
    keys = [(dm, dk, var, lr) for dm, dk in settings["widths"] for var in settings["variants"]
            for lr in settings["lrs"]]
    plain = {key: sweep_row(*key, settings=settings) for key in keys}
    with _perturbed_init():
        nudged = {key: sweep_row(*key, settings=settings)[0] for key in keys}
    rows = [{"d_model": dm, "d_k": dk, "variant": var, "lr": lr,
             "final_loss": plain[dm, dk, var, lr][0].tolist(),
             "accuracy": plain[dm, dk, var, lr][1].tolist(),
             "ulp_loss": float(np.abs(plain[dm, dk, var, lr][0] - nudged[dm, dk, var, lr]).max())}
            for dm, dk, var, lr in keys]
    return {"format_version": FORMAT_VERSION, "settings": settings, "rows": rows}


def best_rows(sweep):
    """``{(d_model, d_k, variant): row}``: for each setting, the row of the learning rate with
    the lowest mean final loss over the seeds."""
    best = {}
    for row in sweep["rows"]:
        key = (row["d_model"], row["d_k"], row["variant"])
        if key not in best or np.mean(row["final_loss"]) < np.mean(best[key]["final_loss"]):
            best[key] = row
    return best


def load_scaling_sweep(path=None):
    """The stored sweep (:func:`compute_scaling_sweep`'s dict plus how it was made)."""
    return load_scaling_table(SCALING_SWEEP if path is None else path)


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
