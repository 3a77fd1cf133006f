"""`make solutions` runs only what changed, and its kernel does not talk over TCP.

Issue 31: `make html` re-ran every solution notebook even when up to date (140 of its 250 s),
and `make solutions` printed the kernel's "running over TCP without encryption" warning once
per notebook. tools/solutions.py now skips a notebook whose stored solution was made from the
same inputs (a content hash) and runs its kernels over IPC. No kernel starts here: the
execution is replaced by a counter, except in the last test, which runs one small notebook.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("course_solutions_cache",
                                              ROOT / "tools" / "solutions.py")
solutions = importlib.util.module_from_spec(spec)
spec.loader.exec_module(solutions)


@pytest.fixture
def runs(monkeypatch):
    """The names of the notebooks 'executed' (execution replaced by a counter)."""
    ran = []

    def fake_execute(nb, timeout=120):
        ran.append(next(c.source for c in nb.cells if c.source.startswith("# ")))
        return nb

    monkeypatch.setattr(solutions, "execute", fake_execute)
    return ran


def test_an_up_to_date_solution_is_not_run_again(tmp_path, runs):
    first = solutions.build(tmp_path, prefixes=("03", "05"), quiet=True)
    assert len(runs) == 2 and len(first) == 2
    again = solutions.build(tmp_path, prefixes=("03", "05"), quiet=True)
    assert len(runs) == 2, "an up-to-date solution ran again"
    assert again == first  # still listed: the static edition renders it
    solutions.build(tmp_path, prefixes=("03",), quiet=True, force=True)
    assert len(runs) == 3


def test_the_hash_follows_the_notebook_and_the_package(tmp_path, monkeypatch):
    path, nb = solutions.with_exercises(("03",))[0]
    key = solutions.inputs_hash(solutions.solve(nb, path.stem))
    assert key == solutions.inputs_hash(solutions.solve(nb, path.stem))  # ids do not count
    changed = solutions.solve(nb, path.stem)
    changed.cells[-2].source += "\n"
    assert solutions.inputs_hash(changed) != key
    # a change in what the kernel imports (attn_core or its data) changes it too
    fake = tmp_path / "attn_core"
    fake.mkdir()
    (fake / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(solutions, "ROOT", tmp_path)
    monkeypatch.setattr(solutions, "DEPENDS_ON", (fake,))
    before = solutions.inputs_hash(solutions.solve(nb, path.stem))
    (fake / "a.py").write_text("x = 2\n")
    assert solutions.inputs_hash(solutions.solve(nb, path.stem)) != before


def test_a_half_written_or_unexecuted_solution_is_not_up_to_date(tmp_path):
    (tmp_path / "x.ipynb").write_text("{not json")
    assert not solutions.is_up_to_date(tmp_path / "x.ipynb", "k")
    assert not solutions.is_up_to_date(tmp_path / "missing.ipynb", "k")
    solutions.build(tmp_path, run=False, prefixes=("03",), quiet=True)
    path, nb = solutions.with_exercises(("03",))[0]
    key = solutions.inputs_hash(solutions.solve(nb, path.stem))
    assert not solutions.is_up_to_date(tmp_path / path.name, key)  # written, never run


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="IPC transport needs Unix sockets")
def test_the_kernel_runs_over_ipc_and_prints_no_tcp_warning(tmp_path):
    km, folder = solutions._kernel_manager()
    assert km.transport == "ipc"
    folder.cleanup()
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "solutions.py"), "03",
                           "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "MPLBACKEND": "Agg"})
    assert done.returncode == 0, done.stderr
    assert "without encryption" not in done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr

