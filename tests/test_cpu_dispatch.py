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
