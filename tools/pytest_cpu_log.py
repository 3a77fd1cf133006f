"""A pytest plugin: the CPU time of each test, its kernels' and servers' included, as JSON lines.

    COURSE_CPU_LOG=cpu.jsonl PYTHONPATH=tools make test ARGS="-p pytest_cpu_log"

Each test (each nbval cell too) appends ``{"id", "cpu", "wall", "worker"}`` to the file named
by ``COURSE_CPU_LOG``: ``cpu`` is the seconds of CPU the pytest process (or xdist worker) and
its finished child processes used while the test ran (setup, call and teardown). A kernel's
CPU is counted when it is shut down and reaped, so a notebook's kernel lands on its last cell;
a session's browser and JupyterLab, on the test whose teardown stops them. On a busy machine
the wall times stretch, the CPU times much less: what each part of the suite costs.
``benchmarks/bench_test_loop.py --parts`` sums them by file and pass.
"""

import json
import os
import resource
import time

import pytest

LOG = os.environ.get("COURSE_CPU_LOG")


def cpu_seconds():
    """User + system CPU seconds of this process and its reaped children."""
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = cpu_seconds(), time.monotonic()
    yield
    if LOG:
        line = {"id": item.nodeid, "cpu": round(cpu_seconds() - cpu, 3),
                "wall": round(time.monotonic() - wall, 3),
                "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
