"""Decoding with a key/value cache (notebook 13): one cached step against the alternatives.

For a context of t tokens (one head, d_k = 64, float32), the newest token's attention:

* ``cached step``: attn_core.decoding.decode_step, one query against the t cached keys;
* ``full recompute``: attn_core.attention over all t queries with a causal mask (what a model
  without a cache would redo for every new token), of which only the last row is needed;
* ``torch step``: torch's scaled_dot_product_attention of the same one query against the
  same cache, the peer (skipped, with the reason, without torch).

Each contender runs once per round, in alternating order; cells are medians over the rounds,
and the ratios are the medians of the per-round ratios. 2 threads.

Run: ``MPLBACKEND=Agg .venv/bin/python benchmarks/bench_decoding.py [--rounds R]``. It is not a
timed test: it prints a table.
"""

import argparse
import statistics
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _machine  # noqa: E402

OVERRIDES = _machine.prepare_environment()  # re-execs this script once (thread pools)

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from attn_core import attention, causal_mask, examples  # noqa: E402
from attn_core.decoding import append_kv, decode_step, empty_cache  # noqa: E402

THREADS = 2
D_K = 64


def once(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def torch_step():
    """A function (q, k, v) -> output of one query with torch, or None and the reason."""
    try:
        import torch
    except ImportError:
        return None, "torch not installed (pip install torch==2.13.0)"
    torch.set_num_threads(THREADS)

    def step(q, k, v):
        with torch.no_grad():
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    return (torch, step), None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    peer, why = torch_step()
    print(f"one head, d_k = {D_K}, float32, {THREADS} threads, {args.rounds} rounds; "
          f"OpenBLAS variables removed: {OVERRIDES}")
    print(f"{'t':>7} {'cached step':>13} {'full recompute':>15} {'full / cached':>14} "
          f"{'torch step':>12} {'cached / torch':>15}")
    with threadpool_limits(THREADS):
        for t in (512, 2048, 8192):
            q, k, v = examples.random_qkv(t, D_K, dtype=np.float32)
            cache = append_kv(empty_cache(D_K, dtype="float32"), k, v)
            mask = causal_mask(t)
            jobs = {"cached": partial(decode_step, q[-1:], cache),
                    "full": partial(attention, q, k, v, mask=mask)}
            if peer is not None:
                torch, step = peer
                tq, tk, tv = (torch.from_numpy(a)[None] for a in (q[-1:], k, v))  # (1, ., d)
                jobs["torch"] = partial(step, tq, tk, tv)
            for fn in jobs.values():  # warm-up
                fn()
            times = {name: [] for name in jobs}
            for r in range(args.rounds):
                order = list(jobs) if r % 2 == 0 else list(jobs)[::-1]
                for name in order:
                    times[name].append(once(jobs[name]))
            med = {name: statistics.median(ts) for name, ts in times.items()}
            full_ratio = statistics.median(f / c for f, c in zip(times["full"], times["cached"]))
            line = (f"{t:>7,} {1e3 * med['cached']:>10.3f} ms {1e3 * med['full']:>12.2f} ms "
                    f"{full_ratio:>13.0f}x")
            if peer is not None:
                peer_ratio = statistics.median(c / p for c, p in zip(times["cached"],
                                                                       times["torch"]))
                line += f" {1e3 * med['torch']:>9.3f} ms {peer_ratio:>14.2f}x"
            else:
                line += f" {'-':>12} {why}"
            print(line)
    print(f"load average after the run: {_machine.loadavg()} (2 cores; noisy when high)")


if __name__ == "__main__":
    main()
