"""Notebook 15's MiniLM measurement, stored (issue 47): every head's previous-token and
induction scores, and its weight on the other copy and on the key after it, on repeated
random word pieces and on the control without the repeat, per sequence
(``attn_core.model.repeat_scores``).

Written to ``attn_core/data/induction-minilm.json`` with ``made_by`` (commit, CPU and wall
seconds, load average, seed, numpy version, CPU features). The pieces are drawn from
``numpy.random.default_rng(SEED)``; MiniLM's weights are the stored ones (float32). Notebook 15
recomputes the first sequences live and compares.

Run from the repository root, on a committed tree (it refuses a dirty one unless --out names
another file): ``nice -n 10 .venv/bin/python tools/measure_minilm_repeats.py`` (about 10 s
of CPU).
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

from attn_core.model.pretrained import MODEL_NAME, load_model  # noqa: E402
from attn_core.model.repeat_scores import (  # noqa: E402
    REPEATS_PATH,
    repeat_scores,
    repeated_pieces,
)
from attn_core.threads import blas_threads  # noqa: E402

N_SEQ, SEGMENT, SEED = 16, 14, 11
#: Decimals stored: the notebook prints 2; its live slice must agree within 1e-5.
DECIMALS = 7


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPEATS_PATH)
    args = ap.parse_args(argv)
    commit = git_commit()
    if args.out.resolve() == REPEATS_PATH and commit.endswith("+dirty"):
        sys.exit(f"refusing to write {REPEATS_PATH} from {commit}: commit first (or pass --out)")
    wall, cpu = time.perf_counter(), time.process_time()
    model = load_model()
    repeat, control = repeated_pieces(model.tokenizer, N_SEQ, SEGMENT, SEED)
    with blas_threads():
        found = repeat_scores(model.weights, repeat, control, SEGMENT)
    data = {"format_version": 1,
            "settings": {"model": MODEL_NAME, "n_seq": N_SEQ, "segment": SEGMENT, "seed": SEED,
                         "shape": "each measure (n_seq, layers, heads)"},
            **{kind: {m: np.round(v, DECIMALS).tolist() for m, v in found[kind].items()}
               for kind in ("repeat", "control")}}
    data["made_by"] = {"tool": "tools/measure_minilm_repeats.py", "commit": commit,
                       "cpu_seconds": round(time.process_time() - cpu, 1),
                       "wall_seconds": round(time.perf_counter() - wall, 1),
                       "load_average": [round(x, 1) for x in os.getloadavg()],
                       "seeds": {"pieces": SEED}, "numpy": np.__version__,
                       "cpu": cpu_features()}
    args.out.write_text(json.dumps(data, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {N_SEQ} sequences, {data['made_by']['cpu_seconds']} s of CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
