"""Compute notebook 12's scaling table over 20 seeds and store it (attn_core/data/).

    .venv/bin/python tools/scaling_table.py

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

from attn_core.scaling_table import SCALING_TABLE, compute_scaling_table


def _commit():
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    from numpy._core._multiarray_umath import __cpu_features__ as features

    start = time.perf_counter()
    table = compute_scaling_table()
    table["made_by"] = {"tool": "tools/scaling_table.py", "commit": _commit(),
                        "seconds": round(time.perf_counter() - start, 1),
                        "numpy": np.__version__, "python": platform.python_version(),
                        "machine": platform.machine(),
                        "avx512": bool(features.get("AVX512_SKX", False))}
    SCALING_TABLE.parent.mkdir(exist_ok=True)
    SCALING_TABLE.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    chaotic = [f"d_k={r['d_k']} {'scaled' if r['scaled'] else 'unscaled'}: {r['ulp_loss']:.2g}"
               for r in table["rows"] if r["ulp_loss"] > 1e-6]
    print(f"wrote {SCALING_TABLE} in {table['made_by']['seconds']} s; rows that move by more "
          f"than 1e-6 under a one-ulp nudge: {', '.join(chaotic) or 'none'}")


if __name__ == "__main__":
    sys.exit(main())
