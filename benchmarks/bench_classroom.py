"""The classroom on this machine: spawn time, memory per student, concurrently active students.

    python benchmarks/bench_classroom.py [--max-students 6] [--out benchmarks/RESULTS-classroom.md]

Starts the classroom hub (classroom/hub.py; needs ``make classroom-env``) on 127.0.0.1 with
simulated students, as tests/test_classroom.py does, and measures:

* spawn: seconds from asking the hub for a student's server until it answers (sequential);
* memory: RSS and PSS (shared pages split between the processes that share them) of a
  student's Jupyter server plus its kernel, after the kernel ran every cell of notebook 04,
  and after it ran notebook 11 (the pretrained model loaded);
* concurrency: k students run notebook 04's cells at the same moment (fresh kernels); the peer
  is one student alone in the same run. Each k is reported as the ratio of the slowest
  student's cell time to the single student's; the figure is the largest k under 2x.

Writes the table to ``--out`` (linked from benchmarks/RESULTS.md). Bounded: the hub stops by
itself after ``--deadline`` seconds.
"""

import argparse
import importlib.util
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import loadavg  # noqa: E402
from _results import kept_blocks  # noqa: E402

spec = importlib.util.spec_from_file_location("classroom_hub", ROOT / "classroom" / "hub.py")
H = importlib.util.module_from_spec(spec)
spec.loader.exec_module(H)

NB04 = f"{H.TARGET}/notebooks/04-scaling.ipynb"
NB11 = f"{H.TARGET}/notebooks/11-a-real-model.ipynb"
MIB = 2**20


def tree_memory(pid):
    """(RSS, PSS) in MiB of process ``pid`` and all its descendants."""
    procs = [psutil.Process(pid)]
    procs += procs[0].children(recursive=True)
    rss = pss = 0
    for proc in procs:
        try:
            info = proc.memory_full_info()
        except psutil.NoSuchProcess:
            continue
        rss += info.rss
        pss += getattr(info, "pss", info.rss)
    return rss / MIB, pss / MIB


def code_sources(student, path):
    nb = student.read(path)
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def memory_after(student, path):
    """Memory of the student's server + kernel after the kernel ran the notebook ``path``."""
    sources = code_sources(student, path)
    with H.Kernel(student, path) as kernel:
        results = kernel.run_cells(sources)
        bad = [i for i, r in enumerate(results) if r["status"] != "ok" or r["errors"]]
        if bad:
            raise RuntimeError(f"{path}: cells {bad} failed: {results[bad[0]]['errors']}")
        time.sleep(1)
        rss, pss = tree_memory(student.server_pid())
        seconds = sum(r["seconds"] for r in results)
    return rss, pss, seconds


def concurrent_cell_times(students, sources):
    """Every student runs ``sources`` in a fresh kernel, all starting together; cell seconds."""
    barrier = threading.Barrier(len(students))
    times = [None] * len(students)
    errors = []

    def run(i, student):
        try:
            with H.Kernel(student, NB04) as kernel:
                kernel.execute("1")  # the kernel is up before the clock starts
                barrier.wait(timeout=300)
                results = kernel.run_cells(sources)
            if any(r["status"] != "ok" or r["errors"] for r in results):
                errors.append(f"{student.name}: a cell failed")
            times[i] = sum(r["seconds"] for r in results)
        except Exception as exc:  # noqa: BLE001  (reported below, after the threads end)
            errors.append(f"{student.name}: {exc!r}")
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i, s)) for i, s in enumerate(students)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    return times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-students", type=int, default=6)
    parser.add_argument("--levels", default="2,3,4,5,6",
                        help="numbers of concurrently active students to try, in order")
    parser.add_argument("--deadline", type=int, default=1500, help="the hub's life, seconds")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "RESULTS-classroom.md")
    args = parser.parse_args(argv)
    if H.missing_tools():  # `make bench` runs every script: say why, do not fail the others
        print("bench_classroom: skipped, missing " + "; ".join(H.missing_tools()))
        return

    load_start, t_start = loadavg(), time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="bench-classroom-"))
    repo = H.bare_clone(ROOT, tmp / "course.git")
    branch = subprocess.run(["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.strip()
    levels = [k for k in map(int, args.levels.split(",")) if k <= args.max_students]
    with H.Hub(tmp / "state", deadline=args.deadline) as hub:
        students = [hub.student(f"student{i}") for i in range(args.max_students)]
        spawn = []
        for student in students:  # one after the other: each spawn alone
            student.log_in()
            spawn.append(student.start_server())
            student.follow_link(f"file://{repo}", branch)
            print(f"{student.name}: server up in {spawn[-1]:.1f} s", flush=True)
        hub_rss, hub_pss = tree_memory(hub.proc.pid)
        hub_rss -= sum(tree_memory(s.server_pid())[0] for s in students)
        hub_pss -= sum(tree_memory(s.server_pid())[1] for s in students)
        idle_rss, idle_pss = tree_memory(students[0].server_pid())

        rss04, pss04, single04 = memory_after(students[0], NB04)
        print(f"notebook 04: {rss04:.0f} MiB RSS, {pss04:.0f} MiB PSS", flush=True)
        rss11, pss11, single11 = memory_after(students[0], NB11)
        print(f"notebook 11: {rss11:.0f} MiB RSS, {pss11:.0f} MiB PSS", flush=True)

        sources = code_sources(students[0], NB04)
        base = concurrent_cell_times(students[:1], sources)[0]
        print(f"1 student: notebook 04's cells in {base:.1f} s", flush=True)
        rows = [(1, base, base, 1.0, 1.0)]
        for k in levels:
            times = concurrent_cell_times(students[:k], sources)
            worst, median = max(times), statistics.median(times)
            rows.append((k, median, worst, median / base, worst / base))
            print(f"{k} students: median {median:.1f} s, slowest {worst:.1f} s "
                  f"(x{worst / base:.2f})", flush=True)
            if worst / base >= 2:
                break
    load_end, wall = loadavg(), time.perf_counter() - t_start
    shutil.rmtree(tmp, ignore_errors=True)
    holds = max(k for k, _, _, _, ratio in rows if ratio < 2)

    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        "# Classroom benchmark",
        "",
        f"Generated by `benchmarks/bench_classroom.py` on {stamp}. Do not edit by hand.",
        "",
        f"Machine: {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.1f} GiB; "
        f"JupyterHub 6.1.1, SimpleLocalProcessSpawner, the course's environment "
        f"(classroom/.venv). Run took {wall:.0f} s; load average {load_start} -> {load_end} "
        "(1, 5, 15 min; the start is before any student). **The machine was shared with "
        "other work while this ran**: a load average above 2 on 2 cores means the students "
        "competed with other processes, so the times are pessimistic and noisy; memory "
        "figures are not affected.",
        "",
        "## Spawn time",
        "",
        "| students spawned one after another | median | min | max |",
        "| --- | --- | --- | --- |",
        f"| {len(spawn)} | {statistics.median(spawn):.1f} s | {min(spawn):.1f} s | "
        f"{max(spawn):.1f} s |",
        "",
        "## Memory per student (a Jupyter server + one kernel)",
        "",
        "PSS splits shared pages (libraries, the venv's files) between the processes that map "
        "them: the better estimate of what each additional student costs. RSS counts them in full.",
        "",
        "| state | RSS | PSS |",
        "| --- | --- | --- |",
        f"| server only, no kernel | {idle_rss:.0f} MiB | {idle_pss:.0f} MiB |",
        f"| kernel ran notebook 04 (cells {single04:.1f} s) | {rss04:.0f} MiB | {pss04:.0f} MiB |",
        f"| kernel ran notebook 11, model loaded (cells {single11:.1f} s) | {rss11:.0f} MiB | "
        f"{pss11:.0f} MiB |",
        f"| the hub itself (hub + proxy + idle culler, once) | {hub_rss:.0f} MiB | "
        f"{hub_pss:.0f} MiB |",
        "",
        "## Concurrently active students",
        "",
        "k students run all of notebook 04's code cells at the same moment, each in a fresh "
        "kernel (kernel start not counted). The peer is one student alone, in the same run.",
        "",
        "| active students | median cell time | slowest student | median / alone "
        "| slowest / alone |",
        "| --- | --- | --- | --- | --- |",
    ]
    for k, median, worst, r_med, r_worst in rows:
        lines.append(f"| {k} | {median:.1f} s | {worst:.1f} s | x{r_med:.2f} | x{r_worst:.2f} |")
    lines += [
        "",
        f"**This machine holds {holds} concurrently active students** with every student's "
        f"cells finishing in under 2x the single-user time (the slowest student counts).",
        "",
    ]
    # (benchmarks/bench_grading.py's block, kept when this rewrites the file)
    args.out.write_text("\n".join(lines).rstrip("\n") + "\n" + kept_blocks(args.out),
                        encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
