"""A pytest plugin: the CPU time of each test, its kernels' and servers' included, as JSON lines.

    COURSE_CPU_LOG=cpu.jsonl PYTHONPATH=tools make test ARGS="-p pytest_cpu_log"

Each test (each nbval cell too) appends ``{"id", "cpu", "wall", "worker"}`` to the file named
by ``COURSE_CPU_LOG``: ``cpu`` is the seconds of CPU the pytest process (or xdist worker) and
its finished child processes used while the test ran (setup, call and teardown). A kernel's
CPU is counted when it is shut down and reaped, so a notebook's kernel lands on its last cell;
the session's own teardown (the last test's, apart), where the browser test's JupyterLab and
Chromium stop, is logged as ``SESSION_TEARDOWN``. On a busy machine
the wall times stretch, the CPU times much less: what each part of the suite costs.
``benchmarks/bench_test_loop.py`` sums them by file and pass (benchmarks/RESULTS.md, section 7).
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


#: The id under which the session's own teardown is logged: the servers, browsers and kernels
#: of session-scoped fixtures (JupyterLab, Chromium) are stopped, and their CPU reaped, there.
SESSION_TEARDOWN = "<session teardown: session fixtures' servers, browsers and kernels>"
_last_teardown = {}


def _write(nodeid, cpu, wall):
    line = {"id": nodeid, "cpu": round(cpu, 3), "wall": round(wall, 3),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    cpu, wall = cpu_seconds(), time.monotonic()
    yield
    if nextitem is None:  # the last test: its teardown ends the session's fixtures too
        _last_teardown[item.nodeid] = (cpu_seconds() - cpu, time.monotonic() - wall)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = cpu_seconds(), time.monotonic()
    yield
    if LOG:
        cpu, wall = cpu_seconds() - cpu, time.monotonic() - wall
        end_cpu, end_wall = _last_teardown.pop(item.nodeid, (0.0, 0.0))
        _write(item.nodeid, cpu - end_cpu, wall - end_wall)
        if nextitem is None:
            _write(SESSION_TEARDOWN, end_cpu, end_wall)
