"""Beyond the quadratic (notebook 18): linear attention against softmax attention as n grows,
and block-sparse attention against the same mask applied to the full matrix.

* ``softmax``: attn_core.attention with a causal mask (the n x n matrix);
* ``linear``: attn_core.linear_attention.linear_attention, causal (chunks of 64 rows and a
  d x d state): the n x n matrix never forms;
* ``masked dense``: attn_core.attention under a sparse pattern's mask (all n^2 scores computed,
  most thrown away);
* ``block-sparse``: attn_core.sparse.block_sparse_attention, the same mask, only the tiles
  holding an allowed cell (tiles of 64).

One head, d = 64, float32, one BLAS thread (attn_core.threads' rule for what a learner runs).
Each contender runs once per round, in rotating order (attn_core.cost.interleaved_times);
cells are medians over the rounds, ratios the medians of the per-round ratios: the two sides
of a ratio always ran within the same second, so the machine's load hits both.

Run: ``MPLBACKEND=Agg .venv/bin/python benchmarks/bench_beyond.py [--rounds R]``. It is not a
timed test: it prints a table.
"""

import argparse
import statistics
import sys
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _machine  # noqa: E402

OVERRIDES = _machine.prepare_environment()  # re-execs this script once (thread pools)

import numpy as np  # noqa: E402

from attn_core import attention, causal_mask, examples  # noqa: E402
from attn_core.cost import interleaved_times  # noqa: E402
from attn_core.cost_beyond import linear_attention_flops, masked_attention_flops  # noqa: E402
from attn_core.linear_attention import linear_attention  # noqa: E402
from attn_core.masks import window_mask  # noqa: E402
from attn_core.sparse import block_sparse_attention, block_sparse_cells  # noqa: E402
from attn_core.threads import blas_threads  # noqa: E402

D = 64
TILE = 64


def ratio(times, a, b):
    return statistics.median(x / y for x, y in zip(times[a], times[b]))


def linear_table(rounds):
    print(f"causal attention, one head, d = {D}, float32: softmax (n x n) against linear "
          "(state of d x d)")
    print(f"{'n':>6} {'softmax':>11} {'linear':>11} {'softmax / linear':>17} "
          f"{'FLOP ratio':>11}")
    for n in (256, 512, 1024, 2048, 4096):
        q, k, v = examples.random_qkv(n, D, dtype=np.float32)
        jobs = {"softmax": partial(attention, q, k, v, mask=causal_mask(n)),
                "linear": partial(linear_attention, q, k, v, causal=True)}
        times, _ = interleaved_times(jobs, rounds)
        flops = (masked_attention_flops(n * (n + 1) // 2, D)["total"]
                 / linear_attention_flops(n, D)["total"])
        med = {name: 1e3 * statistics.median(t) for name, t in times.items()}
        print(f"{n:>6} {med['softmax']:>8.2f} ms {med['linear']:>8.2f} ms "
              f"{ratio(times, 'softmax', 'linear'):>16.2f}x {flops:>10.2f}x")


def sparse_table(rounds):
    print(f"\nsliding window of 128, one head, d = {D}, float32: the mask on the full matrix "
          f"against tiles of {TILE}")
    print(f"{'n':>6} {'masked dense':>13} {'block-sparse':>13} {'dense / sparse':>15} "
          f"{'cell ratio':>11}")
    for n in (512, 1024, 2048, 4096):
        q, k, v = examples.random_qkv(n, D, dtype=np.float32)
        mask = window_mask(n, 128)
        jobs = {"dense": partial(attention, q, k, v, mask=mask),
                "sparse": partial(block_sparse_attention, q, k, v, mask, block=TILE)}
        times, outputs = interleaved_times(jobs, rounds)
        assert np.allclose(outputs["dense"][0], outputs["sparse"], rtol=1e-4, atol=1e-5)
        cells = n * n / block_sparse_cells(mask, TILE)
        med = {name: 1e3 * statistics.median(t) for name, t in times.items()}
        print(f"{n:>6} {med['dense']:>10.2f} ms {med['sparse']:>10.2f} ms "
              f"{ratio(times, 'dense', 'sparse'):>14.2f}x {cells:>10.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"{args.rounds} rounds; OpenBLAS variables removed: {OVERRIDES}")
    with blas_threads():
        linear_table(args.rounds)
        sparse_table(args.rounds)
    print(f"load average after the run: {_machine.loadavg()} (2 cores; noisy when high)")


if __name__ == "__main__":
    main()
