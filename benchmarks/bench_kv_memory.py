"""Memory of the KV cache against decoding steps: full cache, rolling (sliding-window) cache
with sinks, and grouped-query heads (notebook 16).

Each contender decodes ``t`` tokens one at a time through ``attn_core.decoding`` (append_kv,
then decode_step), float32, 8 query heads of width 64:

* ``full``: the ordinary cache, 8 key/value heads, every token kept;
* ``rolling``: the same with ``window = 256, n_sink = 4`` (at most 260 tokens kept);
* ``GQA full``: 2 key/value heads for the 8 query heads, every token kept;
* ``GQA rolling``: 2 key/value heads and the rolling window.

"held" is ``cache.nbytes`` after the last step (what the cache keeps); "peak" is the
tracemalloc peak of the whole decoding loop (numpy reports its buffers to tracemalloc), which
includes the step's transient arrays (the concatenation before the eviction, the scores).
Ratios are full / contender. Memory does not depend on the machine's speed, so one run is
enough.

Run: ``.venv/bin/python benchmarks/bench_kv_memory.py [--no-write]``; it prints the table and
writes its block into benchmarks/RESULTS.md.
"""

import argparse
import sys
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _results import write_block  # noqa: E402

from attn_core.decoding import append_kv, decode_step, empty_cache  # noqa: E402

HEADS, D_HEAD, WINDOW, N_SINK = 8, 64, 256, 4
STEPS = (64, 256, 1024, 2048)
CONTENDERS = {"full": (HEADS, None), "rolling": (HEADS, WINDOW),
              "GQA full": (2, None), "GQA rolling": (2, WINDOW)}


def decode(steps, n_kv, window, seed=0):
    """Decode ``steps`` random tokens; ``(bytes held at the end, tracemalloc peak)``."""
    g = np.random.default_rng(seed)
    q = g.standard_normal((HEADS, 1, D_HEAD)).astype(np.float32)
    kv = g.standard_normal((n_kv, 1, D_HEAD)).astype(np.float32)
    tracemalloc.start()
    cache = empty_cache(D_HEAD, batch=(n_kv,), dtype="float32", window=window,
                        n_sink=0 if window is None else N_SINK)
    for _ in range(steps):  # the same key and value each step: memory, not values, is measured
        cache = append_kv(cache, kv, kv)
        decode_step(q, cache, n_kv_heads=n_kv)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return cache.nbytes, peak


def kib(b):
    return f"{b / 1024:,.0f} KiB"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    head = (f"{HEADS} query heads, d_head = {D_HEAD}, float32; rolling: window = {WINDOW}, "
            f"n_sink = {N_SINK}; GQA: 2 key/value heads")
    lines = ["## KV-cache memory against steps (`benchmarks/bench_kv_memory.py`)", "", head, "",
             "| steps | " + " | ".join(f"{c} held" for c in CONTENDERS)
             + " | full / rolling | full / GQA full | full / GQA rolling | "
             + " | ".join(f"{c} peak" for c in CONTENDERS) + " |",
             "|" + "---|" * (1 + 2 * len(CONTENDERS) + 3)]
    print(head)
    for steps in STEPS:
        res = {name: decode(steps, *spec) for name, spec in CONTENDERS.items()}
        held = {name: r[0] for name, r in res.items()}
        ratios = [held["full"] / held[c] for c in ("rolling", "GQA full", "GQA rolling")]
        row = (f"| {steps:,} | " + " | ".join(kib(held[c]) for c in CONTENDERS) + " | "
               + " | ".join(f"{r:.1f}x" for r in ratios) + " | "
               + " | ".join(kib(res[c][1]) for c in CONTENDERS) + " |")
        lines.append(row)
        print(row)
    lines += ["", f"The rolling cache stops growing at {WINDOW + N_SINK} tokens (window + "
              "sinks); the full cache grows by one token's keys and values per step. Grouped "
              f"heads divide both by {HEADS // 2} (8 query heads share 2 key/value heads)."]
    if not args.no_write:
        write_block(ROOT / "benchmarks" / "RESULTS.md", "kv-memory", lines)
        print("written to benchmarks/RESULTS.md (block kv-memory)")


if __name__ == "__main__":
    main()
