"""Compute notebook 12's scaling table over 20 seeds, and its learning-rate sweep with the two
controls, and store them (attn_core/data/).

    nice -n 10 .venv/bin/python tools/scaling_table.py [table|sweep]

(with no argument: both; one BLAS thread, by attn_core.threads, as every training loop).
The table takes about 20 s of CPU, the sweep about 8 min.

Trains every row twice (as initialised and with every initial weight nudged by one ulp) and
writes attn_core/data/scaling-table.json with the per-seed results, the one-ulp spread, the
settings and how it was made (commit, numpy version, whether the CPU has AVX-512, seconds).
tests/test_scaling_table.py recomputes it and compares.
"""

import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from attn_core.scaling_table import (
    SCALING_SWEEP,
    SCALING_TABLE,
    compute_scaling_sweep,
    compute_scaling_table,
)


def _commit():
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _store(path, compute):
    from numpy._core._multiarray_umath import __cpu_features__ as features

    start, cpu = time.perf_counter(), time.process_time()
    table = compute()
    table["made_by"] = {"tool": "tools/scaling_table.py", "commit": _commit(),
                        "seconds": round(time.perf_counter() - start, 1),
                        "cpu_seconds": round(time.process_time() - cpu, 1),
                        "numpy": np.__version__, "python": platform.python_version(),
                        "machine": platform.machine(),
                        "avx512": bool(features.get("AVX512_SKX", False))}
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    chaotic = sum(r["ulp_loss"] > 1e-6 for r in table["rows"])
    print(f"wrote {path} in {table['made_by']['seconds']} s ({table['made_by']['cpu_seconds']} s "
          f"CPU); {chaotic} of {len(table['rows'])} rows move by more than 1e-6 under a one-ulp "
          "nudge")


def main(argv=None):
    which = (sys.argv[1:] if argv is None else argv) or ["table", "sweep"]
    if "table" in which:
        _store(SCALING_TABLE, compute_scaling_table)
    if "sweep" in which:
        _store(SCALING_SWEEP, compute_scaling_sweep)


if __name__ == "__main__":
    sys.exit(main())
