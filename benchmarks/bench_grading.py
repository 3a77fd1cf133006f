"""Grading a class with nbgrader: time and memory of autograding N submissions of notebook 07.

    classroom/.venv/bin/python benchmarks/bench_grading.py [--students 100] [--whole 5]

In a temporary nbgrader course directory (no hub: grading is the teacher's nbgrader commands,
which the hub only gives a terminal or kernel to), the assignment is generated from the
course's exercise cells (tools/nbgrader_assignments.py) and ``nbgrader generate_assignment``;
N submissions are written from the released notebook, in turn the solutions, the notebook as
fetched (empty) and typical mistakes; then ``nbgrader autograde`` and ``nbgrader
generate_feedback`` run over all of them, timed, while a sampler reads the memory (RSS and PSS)
of nbgrader and the kernels it starts, every 0.2 s. For comparison, ``--whole`` submissions of
the whole notebook (``--whole`` of the tool: grading runs every cell) are graded the same way.

Writes its block into benchmarks/RESULTS-classroom.md (needs ``make classroom-env``).
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tools"))
import nbgrader_assignments as A  # noqa: E402
from _machine import loadavg  # noqa: E402
from _results import write_block  # noqa: E402
from bench_classroom import tree_memory  # noqa: E402

BIN = Path(sys.executable).parent
NOTEBOOK = ROOT / "notebooks" / "07-causal-masking.ipynb"
MISTAKES = {  # exercise number -> a wrong answer (the mask after the softmax, rows summing to 1)
    2: "q0 = np.zeros((5, 2))\nk0 = rng.standard_normal((5, 2))\nanswer = np.ones(5)",
    4: ("def masked_attention(q, k, v, mask):\n"
        "    w = softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))\n"
        "    return (w * mask) @ v\n"),
}


def nbgrader(course, *args):
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(BIN / "nbgrader"), *args, f"--CourseDirectory.root={course}"],
                            cwd=course, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**{k: v for k, v in os.environ.items()
                                    if k != "JUPYTER_CONFIG_PATH"},
                                 "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}"})
    peak = [0.0, 0.0]

    def sample():
        while proc.poll() is None:
            try:
                rss, pss = tree_memory(proc.pid)
                peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            except psutil.NoSuchProcess:
                pass
            time.sleep(0.2)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out = proc.communicate(timeout=7200)[0].decode(errors="replace")
    sampler.join()
    if proc.returncode:
        raise RuntimeError(f"nbgrader {args}: exit {proc.returncode}\n{out[-3000:]}")
    return time.perf_counter() - t0, peak


def strip_markers(source):
    return "\n".join(line for line in source.splitlines()
                     if line.strip() not in (A.BEGIN_SOLUTION, A.END_SOLUTION))


def submissions(course, assignment, n):
    """``n`` submissions in ``course/submitted/``: solutions, empty, mistakes, in turn."""
    source = nbformat.read(course / "source" / assignment / NOTEBOOK.name, as_version=4)
    solved = [strip_markers(c.source) for c in source.cells
              if c.metadata.get("nbgrader", {}).get("solution")]
    released = nbformat.read(course / "release" / assignment / NOTEBOOK.name, as_version=4)
    kinds = {"solutions": dict(enumerate(solved, 1)), "empty": {}, "mistakes": MISTAKES}
    names = list(kinds)
    for i in range(n):
        kind = names[i % 3]
        nb = nbformat.from_dict(json.loads(json.dumps(released)))
        answers = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
        for number, text in kinds[kind].items():
            answers[number - 1].source = text
        folder = course / "submitted" / f"student{i:03d}" / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / NOTEBOOK.name)
        (folder / "timestamp.txt").write_text("2026-12-01 12:00:00.000000 UTC\n")


def grade(n, whole):
    course = Path(tempfile.mkdtemp(prefix="attn-bench-grading-"))
    assignment = "masking-whole" if whole else "masking"
    try:
        A.write(NOTEBOOK, course, assignment, whole=whole)
        nbgrader(course, "db", "assignment", "add", assignment)
        nbgrader(course, "generate_assignment", assignment)
        submissions(course, assignment, n)
        seconds, peak = nbgrader(course, "autograde", assignment)
        feedback_seconds, feedback_peak = nbgrader(course, "generate_feedback", assignment)
        graded = len(list((course / "autograded").glob(f"*/{assignment}/{NOTEBOOK.name}")))
        if graded != n:
            raise RuntimeError(f"{graded} of {n} submissions autograded")
        db = (course / "gradebook.db").stat().st_size
        return {"n": n, "seconds": seconds, "peak": peak, "feedback_seconds": feedback_seconds,
                "feedback_peak": feedback_peak, "db_kib": db / 1024}
    finally:
        shutil.rmtree(course, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--whole", type=int, default=5,
                        help="submissions of the whole notebook, for comparison (0: none)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "RESULTS-classroom.md")
    args = parser.parse_args(argv)
    load0 = loadavg()
    t0 = time.perf_counter()
    rows = [("exercises section (the default)", grade(args.students, whole=False))]
    if args.whole:
        rows.append(("whole notebook (`--whole`)", grade(args.whole, whole=True)))
    load1 = loadavg()
    import nbgrader as nbg

    base = rows[0][1]["seconds"] / rows[0][1]["n"]
    lines = [
        "## Grading a class (nbgrader)",
        "",
        "Generated by `benchmarks/bench_grading.py` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Do not edit by hand.",
        "",
        f"nbgrader {nbg.__version__}, Python {platform.python_version()}, {os.cpu_count()} cores; "
        f"notebook 07's assignment (4 autograded tests, 7 points); submissions in turn the "
        f"solutions, empty, typical mistakes. `nbgrader autograde` grades one submission after "
        f"another, each in a fresh kernel. Run took {time.perf_counter() - t0:.0f} s; load "
        f"average {load0} -> {load1} (1, 5, 15 min)"
        + (": **the machine was shared with other work**, so the times are pessimistic; "
           "memory is not affected." if float(load0.split()[0]) > 2 else "."),
        "",
        "| assignment | submissions | autograde | per submission | per submission / section's "
        "| peak RSS (PSS) | generate_feedback | gradebook |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, r in rows:
        per = r["seconds"] / r["n"]
        lines.append(
            f"| {label} | {r['n']} | {r['seconds']:.0f} s | {per:.1f} s | x{per / base:.2f} "
            f"| {r['peak'][0]:.0f} MiB ({r['peak'][1]:.0f} MiB) "
            f"| {r['feedback_seconds']:.0f} s ({r['feedback_seconds'] / r['n']:.2f} s each) "
            f"| {r['db_kib']:.0f} KiB |")
    lines += ["", "Peak memory is nbgrader's process plus the one kernel it runs at a time "
              "(submissions are graded one after another)."]
    write_block(args.out, "grading", lines)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
