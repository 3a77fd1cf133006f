"""tools/cpu_dispatch.py decides whether make test runs the notebooks with AVX-512 switched off.

On a CPU whose numpy runs AVX-512 kernels, the pass with them off is a second configuration; on
a CPU without them it would run the first pass's kernels again, so the Makefile leaves it out
(AVX512_PASS=auto). Checked here against numpy's own feature table, in fresh processes with
and without the targets switched off, and in what make would run.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

from numpy._core._multiarray_umath import __cpu_features__

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "cpu_dispatch.py"
spec = importlib.util.spec_from_file_location("course_cpu_dispatch", TOOL)
cpu_dispatch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cpu_dispatch)


def ask(**env):
    done = subprocess.run([sys.executable, str(TOOL), "--avx512"], capture_output=True,
                          text=True, env={**os.environ, **env}, check=True)
    return done.stdout.strip()


def test_the_makefile_switches_off_the_targets_the_tool_names():
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^NO_AVX512 := (.+)$", makefile, re.M)[1].split()
    assert tuple(listed) == cpu_dispatch.AVX512_TARGETS


def test_the_answer_follows_the_cpu_and_the_environment():
    # independent of the tool: AVX512F is the feature every AVX-512 target needs
    has_avx512 = bool(__cpu_features__.get("AVX512F"))
    assert ask() == ("yes" if has_avx512 else "no")
    off = ask(NPY_DISABLE_CPU_FEATURES=" ".join(cpu_dispatch.AVX512_TARGETS))
    assert off == "no", "with every AVX-512 target switched off numpy still runs one"


def test_a_wrong_argument_is_refused():
    done = subprocess.run([sys.executable, str(TOOL), "--avx"], capture_output=True, text=True)
    assert done.returncode != 0 and "usage" in done.stderr and "--avx" in done.stderr


def run_copies(setting):
    done = subprocess.run(["make", "-n", "copies", f"AVX512_PASS={setting}"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    return done.stdout


def test_make_leaves_the_pass_out_only_where_it_would_repeat_the_first():
    assert "--out build/no-avx512" in run_copies("yes")
    assert "--out build/no-avx512" not in run_copies("no")
    auto = "--out build/no-avx512" in run_copies("auto")
    assert auto == bool(cpu_dispatch.avx512_targets())


def _copies_line(plan, out):
    """The arguments of the solved_for_nbval.py command writing ``out`` in ``make -n copies``."""
    joined = plan.replace("\\\n", " ")
    line = next(line for line in joined.splitlines() if f"--out {out}" in line)
    return line.split()


def test_with_the_pass_every_notebook_runs_with_avx512_off_once():
    """Where the AVX-512-off pass runs, the nudged notebooks run in it nudged (one kernel run,
    not two): build/no-avx512 holds the other notebooks, build/nudged switches AVX-512 off as
    well, and together they are every notebook once. Without the pass, build/nudged keeps
    numpy's own kernels."""
    notebooks = {p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb")}
    plan = run_copies("yes")
    off = _copies_line(plan, "build/no-avx512")
    nudged = _copies_line(plan, "build/nudged")
    off_set = {a for a in off if a.endswith(".ipynb")}
    nudged_set = {a for a in nudged if a.endswith(".ipynb")}
    assert nudged_set and off_set and not off_set & nudged_set
    assert off_set | nudged_set == notebooks
    assert any(a.startswith("NPY_DISABLE_CPU_FEATURES=") for a in off)
    assert any(a.startswith("NPY_DISABLE_CPU_FEATURES=") for a in nudged)
    assert "ATTN_CORE_PERTURB_INIT=1" in nudged
    plain = _copies_line(run_copies("no"), "build/nudged")
    assert not any("NPY_DISABLE_CPU_FEATURES" in a for a in plain)
    assert {a for a in plain if a.endswith(".ipynb")} == nudged_set
