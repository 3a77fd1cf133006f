"""Timing that a busy machine cannot turn upside down: notebook 09's curve.

A burst of other work that falls on the runs of one length makes that point of a curve too
slow; timed one length after another (the old way: the median of 3 runs per length), n =
512 came out slower than 1,024 on a busy machine, the opposite of the lesson. The lengths
taking turns (:func:`attn_core.cost.interleaved_times`) spreads a burst over every length,
and the fastest run of each is then undisturbed. A fake clock makes the burst exact here.
"""

from pathlib import Path

import nbformat
import numpy as np
import pytest

from attn_core import cost

ROOT = Path(__file__).resolve().parents[1]
NS = (128, 256, 512, 1024, 2048)


@pytest.fixture
def busy_clock(monkeypatch):
    """A clock where a call of ``work(n)`` takes n**2 ticks, 10 times longer during a burst
    of other work: calls 9 to 11 of the session (three calls in a row)."""
    now, calls = [0.0], [0]

    def work(n):
        def call():
            slow = 10 if 9 <= calls[0] <= 11 else 1
            calls[0] += 1
            now[0] += slow * n**2
            return n
        return call

    monkeypatch.setattr(cost.time, "perf_counter", lambda: now[0])
    return work


def test_one_length_after_another_lets_a_burst_bend_the_curve(busy_clock):
    """The burst is real: timed the old way, a point of the curve dips."""
    secs = [cost.median_time(busy_clock(n), repeat=3) for n in NS]
    assert not np.all(np.diff(secs) > 0), secs


def test_interleaved_fastest_runs_keep_the_curve_rising(busy_clock):
    times, outputs = cost.interleaved_times({n: busy_clock(n) for n in NS}, rounds=9)
    assert outputs == {n: n for n in NS}
    fastest = [min(times[n]) for n in NS]
    assert fastest == [float(n**2) for n in NS]  # every length has undisturbed runs
    assert all(len(times[n]) == 9 for n in NS)


def test_interleaved_times_rotates_the_order():
    order = []
    cost.interleaved_times({k: (lambda k=k: order.append(k)) for k in "abc"}, rounds=3)
    assert order == list("abc" + "abc" + "bca" + "cab")  # warm-up, then rotated rounds
    with pytest.raises(ValueError, match="rounds"):
        cost.interleaved_times({"a": lambda: 0}, rounds=0)
    with pytest.raises(ValueError, match="pause"):
        cost.interleaved_times({"a": lambda: 0}, rounds=1, pause=-1)


def timing_cell():
    nb = nbformat.read(ROOT / "notebooks/09-cost.ipynb", as_version=4)
    first = "ns = np.array([128, 256, 512, 1024, 2048])"
    cells = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(first)]
    assert len(cells) == 1
    return cells[0]


def test_notebook_09_times_its_curve_interleaved_and_claims_only_counts():
    """The curve is timed interleaved on the learner's BLAS threads, for the figure only: the
    cell prints and asserts FLOPs and bytes (tests/test_no_clock.py follows the timed values
    through every notebook)."""
    cell = timing_cell()
    nb = nbformat.read(ROOT / "notebooks/09-cost.ipynb", as_version=4)
    figure = nb.cells[nb.cells.index(cell) + 1]  # the time is measured where it is drawn
    assert "interleaved_times(" in figure.source and "min(runs" in figure.source
    assert "pause=" in figure.source and "with blas_threads():" in figure.source
    assert "median_time(" not in figure.source and "assert" not in figure.source
    assert "interleaved_times(" not in cell.source  # the cell that asserts times nothing
    # its output is compared by nbval: only what holds on any machine is printed
    assert "nbval-ignore-output" not in cell.metadata.get("tags", [])
    assert "peak_memory(" in cell.source and "attention_flops(" in cell.source
    assert "assert 1.5 < memory_slope < 2.5" in cell.source
    text = "".join(o.get("text", "") for o in cell.outputs)
    assert text and " ms" not in text and "MiB" not in text, text
    assert "slope for n >= 512 = 2.00" in text and text.strip().endswith("True"), text


def test_the_cost_explorer_times_each_point_the_same_robust_way(monkeypatch):
    """Its measured-time curve (notebook 09's explorer) dipped too: each point is now the
    fastest of a few paused runs on one BLAS thread, through the same function."""
    from threadpoolctl import threadpool_info

    from attn_core.explorers import cost as cost_explorer_module

    seen = []

    def fake(contenders, rounds, pause=0.0):
        threads = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
        seen.append((rounds, pause, threads))
        return {name: [3.0, 1.0, 2.0][:rounds] for name in contenders}, {}

    monkeypatch.setattr(cost_explorer_module, "interleaved_times", fake)
    ex = cost_explorer_module.cost_explorer()
    assert seen and all(r >= 3 and p > 0 and set(t) <= {1} for r, p, t in seen), seen
    assert min(ex.times.values()) == 1.0  # the fastest run is kept
