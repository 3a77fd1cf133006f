"""tools/pytest_cpu_log.py, the plugin benchmarks/bench_test_loop.py measures each part of the
suite with: each test's CPU time (its child processes' too, once they end) as JSON lines, the
session fixtures' teardown apart."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import pytest_cpu_log  # noqa: E402

EXAMPLE = '''
import subprocess, sys, time
import pytest

def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

@pytest.fixture(scope="session")
def server():
    yield
    spin(0.3)  # what a session fixture's server costs when it stops

def test_busy(server):
    spin(0.3)

def test_child():  # a child process's CPU counts once it has ended
    subprocess.run([sys.executable, "-c",
                    "import time\\nend = time.process_time() + 0.3\\n"
                    "while time.process_time() < end: pass"], check=True)

def test_idle():
    time.sleep(0.3)
'''


def test_each_test_gets_its_own_cpu_and_the_session_teardown_its_own(pytester, monkeypatch):
    log = pytester.path / "cpu.jsonl"
    monkeypatch.setattr(pytest_cpu_log, "LOG", str(log))
    pytester.makepyfile(test_example=EXAMPLE)
    result = pytester.runpytest_inprocess("-p", "pytest_cpu_log", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    cpu = {line["id"].split("::")[-1]: line["cpu"] for line in lines}
    assert set(cpu) == {"test_busy", "test_child", "test_idle", pytest_cpu_log.SESSION_TEARDOWN}
    assert cpu["test_busy"] >= 0.25 and cpu["test_child"] >= 0.25
    assert cpu["test_idle"] < 0.2  # a sleep is wall time, not CPU
    assert cpu[pytest_cpu_log.SESSION_TEARDOWN] >= 0.25  # the server's stop, not test_idle's
    assert all(line["wall"] >= 0 for line in lines)
