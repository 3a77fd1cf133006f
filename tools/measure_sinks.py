"""Notebook 16's attention-sink measurement of the tiny GPT, stored (issue 47): every head's
weight on the first character and the loss under each cache of
``attn_core.nn.streaming.SINK_CONDITIONS`` (full attention, a window of 8 that evicts, with 1 or 4
sinks, a window of 12, and the control: a window of 8 keeping character 1, 2, 3, 4 or 8 in
place of the first), on every 64-character window of the held-out text, cut end to end.

Written to ``attn_core/data/sink-measurements.json``: per window, the first-token weights
(layers x heads) and the mean loss of each cache from position ``SINK_LOSS_FROM`` on, with
``made_by`` (commit, CPU and wall seconds, load average, numpy version, CPU features). Nothing
is drawn at random: the windows are the held-out text in order, the weights the stored
checkpoint's (float64). The notebook recomputes the first windows live and compares.

Run from the repository root, on a committed tree (it refuses a dirty one unless --out names
another file): ``nice -n 10 .venv/bin/python tools/measure_sinks.py`` (about a minute of CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import numpy as np  # noqa: E402
from train_gpt import cpu_features, git_commit  # noqa: E402

from attn_core.nn import load_checkpoint  # noqa: E402
from attn_core.nn.streaming import (  # noqa: E402
    SINK_CONDITIONS,
    SINK_LOSS_FROM,
    SINKS_PATH,
    held_out_windows,
    sink_measures,
)
from attn_core.threads import blas_threads  # noqa: E402

#: Decimals stored: the notebook prints 3 (weights) and 4 (losses); its live slice must agree
#: with the file within 1e-7.
DECIMALS = 8


def measure(limit=None):
    """The measurement as a JSON-ready dict (``limit``: only the first windows, to try it)."""
    ck = load_checkpoint()
    params64 = {name: a.astype(np.float64) for name, a in ck.params.items()}
    texts = held_out_windows(ck)[:limit]
    with blas_threads():
        found = sink_measures(params64, ck.config, texts)
        # the control's path (one forward pass under the mask) against the rolling cache's
        from attn_core.nn import token_losses
        a = token_losses(params64, ck.config, texts[:16], window=8, n_sink=1)
        b = token_losses(params64, ck.config, texts[:16], window=8, keep=[0])
        assert np.abs(a - b).max() < 1e-12, np.abs(a - b).max()
    return {"format_version": 1,
            "settings": {"n_windows": int(len(texts)), "n_ctx": int(ck.config.n_ctx),
                         "loss_from": SINK_LOSS_FROM, "dtype": "float64",
                         "conditions": {k: dict(v) for k, v in SINK_CONDITIONS.items()},
                         "text": "held-out text of split_corpus, windows end to end"},
            "first_token_weight": np.round(found["first_token_weight"], DECIMALS).tolist(),
            "losses": {k: np.round(v, DECIMALS).tolist() for k, v in found["losses"].items()}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=SINKS_PATH)
    ap.add_argument("--limit", type=int, default=None, help="only the first windows (a try)")
    args = ap.parse_args(argv)
    commit = git_commit()
    if args.out.resolve() == SINKS_PATH and (commit.endswith("+dirty") or args.limit):
        sys.exit(f"refusing to write {SINKS_PATH} from {commit}"
                 f"{' with --limit' if args.limit else ''}: commit first (or pass --out)")
    wall, cpu = time.perf_counter(), time.process_time()
    data = measure(args.limit)
    data["made_by"] = {"tool": "tools/measure_sinks.py", "commit": commit,
                       "cpu_seconds": round(time.process_time() - cpu, 1),
                       "wall_seconds": round(time.perf_counter() - wall, 1),
                       "load_average": [round(x, 1) for x in os.getloadavg()],
                       "seeds": "none: the windows are the held-out text in order",
                       "numpy": np.__version__, "cpu": cpu_features()}
    args.out.write_text(json.dumps(data, indent=None, separators=(",", ":")) + "\n",
                        encoding="utf-8")
    print(f"wrote {args.out}: {data['settings']['n_windows']} windows, "
          f"{data['made_by']['cpu_seconds']} s of CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
