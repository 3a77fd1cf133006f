"""How long the contributor's loop (`make check`) and the full suite (`make test`) take, with
the Makefile's default pytest-xdist workers (one more than the cores, at most 4) against one
process, and with the default workers while two CPU-bound processes run beside the whole run
(a busy machine), in one run.

    .venv/bin/python benchmarks/bench_test_loop.py            # make check and make test
    .venv/bin/python benchmarks/bench_test_loop.py --check    # make check only (a few minutes)
    .venv/bin/python benchmarks/bench_test_loop.py --only loaded   # just the busy-machine runs
    .venv/bin/python benchmarks/bench_test_loop.py --test --only default loaded

The busy machine: two plain Python busy loops (``_machine.BusyLoops``: started before the
command, stopped after it, each ending by itself after 3 hours at the latest). Each run also
records its CPU time (user + system of make and everything it started), which does not grow
with the machine's load the way wall-clock time does, and the yardstick's before and after it
(one notebook executed in a fresh kernel, ``_machine.yardstick``): the run's CPU and wall in
yardsticks do not move with the machine's own speed, which on a virtual machine changes from
hour to hour (the same code 5-25% slower), and convert to another machine's seconds.

Runs in this checkout's .venv (with the extras CI installs, where present: torch,
transformers, Playwright, Chromium, the classroom's environment), without CI=true, so the one
test that builds a fresh 700 MB Binder environment is skipped, as on a contributor's machine.
Each command is timed with the default JOBS, with JOBS=1, and with the default JOBS beside two
busy processes, in that order, with the load of the machine meanwhile and the machine (cores,
CPU, whether numpy runs AVX-512 kernels: without them make test leaves out the AVX-512-off
pass); the table goes into benchmarks/RESULTS.md
between the test-loop markers (bench_attention.py keeps that block when it rewrites the
file) and into
benchmarks/test_loop_timings.json.
"""

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import _machine  # noqa: E402
import _results  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
TIMINGS = ROOT / "benchmarks" / "test_loop_timings.json"
SUMMARY = re.compile(r"=+ (.* in [\d.]+s.*?) =+$")


#: The runs of each command: (key in the JSON, JOBS or None for the Makefile's default, busy
#: processes beside it).
RUNS = (("default", None, 0), ("1", 1, 0), ("loaded", None, 2))
#: The yardstick (``_machine.yardstick``), measured quiet before and after each run: one notebook
#: run as nbval runs it, in whose CPU seconds a run's are counted, so that hours and machines
#: compare.
YARDSTICK = ROOT / "notebooks" / "05-softmax.ipynb"
PYTHON = str(ROOT / ".venv" / "bin" / "python")
LIMIT = 3 * 3600  # seconds: a run that takes longer is stopped (and so are the busy loops)


def run(target, jobs, logdir, busy=0):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    log = logdir / f"{target}-jobs{jobs or 'default'}{'-loaded' if busy else ''}.log"
    cpu_log = log.with_suffix(".cpu.jsonl")  # each test's CPU (tools/pytest_cpu_log.py)
    cpu_log.unlink(missing_ok=True)
    env.update(COURSE_CPU_LOG=str(cpu_log), PYTHONPATH=str(ROOT / "tools"))
    stick = _machine.yardstick(YARDSTICK, PYTHON)  # quiet, before the busy loops start
    loops = _machine.BusyLoops(busy, seconds=LIMIT) if busy else contextlib.nullcontext()
    with loops, _machine.LoadMeter() as meter, open(log, "w") as f:
        start = time.perf_counter()
        proc = subprocess.Popen(["make", target, *([f"JOBS={jobs}"] if jobs else []),
                                 "ARGS=-p pytest_cpu_log"], cwd=ROOT,
                                env=env, stdout=f, stderr=subprocess.STDOUT)
        try:
            _, status, usage = os.wait4(proc.pid, 0)  # usage: make and all it waited for
        except KeyboardInterrupt:
            proc.kill()
            raise
        seconds = time.perf_counter() - start
    summaries = [m.group(1) for m in map(SUMMARY.match, log.read_text().splitlines()) if m]
    return {"seconds": round(seconds, 1), "rc": os.waitstatus_to_exitcode(status),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1), "pytest": summaries,
            "parts": parts(cpu_log),
            "load": meter.summary(),
            "beside": _machine.BusyLoops(busy).describe() if busy else "nothing started",
            "yardstick": {"notebook": str(YARDSTICK.relative_to(ROOT)), "before": round(stick, 3),
                          "after": round(_machine.yardstick(YARDSTICK, PYTHON), 3)}}


def part_of(nodeid):
    """The part of the suite a test belongs to: an nbval pass (its copies' folder), the
    doctests, or a test file."""
    path = nodeid.split("::")[0]
    if nodeid.startswith("<"):  # the session's teardown (tools/pytest_cpu_log.py)
        return "session teardowns (JupyterLab, Chromium, the hub of session fixtures)"
    if path.startswith("build/"):
        return "nbval " + "/".join(path.split("/")[:2])
    if path.startswith("attn_core/"):
        return "doctests (attn_core)"
    return path


def parts(cpu_log):
    """{part: [CPU s, tests]} from a COURSE_CPU_LOG file, largest first (empty if none)."""
    found = {}
    if cpu_log.exists():
        for line in cpu_log.read_text().splitlines():
            entry = json.loads(line)
            cpu, n = found.get(part_of(entry["id"]), (0.0, 0))
            found[part_of(entry["id"])] = (cpu + entry["cpu"], n + 1)
    return {k: [round(c, 1), n] for k, (c, n) in sorted(found.items(), key=lambda kv: -kv[1][0])}


def parts_table(results, top=16):
    """Where make test's CPU goes, quiet and beside two busy processes (the largest parts)."""
    runs = results.get("test", {})
    quiet = runs.get("default", {}).get("parts")
    loaded = runs.get("loaded", {}).get("parts") or {}
    if not quiet:
        return []
    total = sum(c for c, _ in quiet.values())
    lines = ["", "Where `make test`'s CPU goes (tools/pytest_cpu_log.py: each test's CPU, its "
             "kernels' and servers' included when they end; the browser test's JupyterLab, "
             "Chromium and kernels when the session's fixtures stop, at the end):", "",
             "| part | tests | CPU s, quiet | share | CPU s, beside two busy processes |",
             "| --- | ---: | ---: | ---: | ---: |"]
    shown = list(quiet.items())[:top]
    for name, (cpu, n) in shown:
        busy = f"{loaded[name][0]:.0f}" if name in loaded else "-"
        lines.append(f"| {name} | {n} | {cpu:.0f} | {100 * cpu / total:.1f}% | {busy} |")
    rest = list(quiet.items())[top:]
    rest_cpu = sum(c for _, (c, _) in rest)
    lines.append(f"| the other {len(rest)} parts | {sum(n for _, (_, n) in rest)} | "
                 f"{rest_cpu:.0f} | {100 * rest_cpu / total:.1f}% | |")
    busy_total = f"{sum(c for c, _ in loaded.values()):.0f}" if loaded else "-"
    lines.append(f"| all tests | {sum(n for _, n in quiet.values())} | {total:.0f} | 100% | "
                 f"{busy_total} |")
    return lines


def _cell(r):
    if r is None:
        return "not measured"
    cpu = f", {r['cpu_seconds']:.0f} s CPU" if "cpu_seconds" in r else ""
    return f"{r['seconds']:.0f} s{cpu} (rc {r['rc']})"


def table(results):
    workers = ", ".join(f"make {target}: {default_jobs(target)}" for target in results)
    lines = [f"| command | default JOBS ({workers}) | JOBS=1 (one process) | default JOBS "
             "beside two busy processes | busy / quiet |", "| --- | --- | --- | --- | --- |"]
    for target, by_jobs in results.items():
        quiet, one, loaded = (by_jobs.get(key) for key, _, _ in RUNS)
        ratio = f"{loaded['seconds'] / quiet['seconds']:.2f}" if quiet and loaded else "-"
        lines.append(f"| `make {target}` | {_cell(quiet)} | {_cell(one)} | {_cell(loaded)} | "
                     f"{ratio} |")
    lines += yardstick_lines(results)
    lines += ["", "pytest's summaries and the machine's load during each run:", ""]
    for target, by_jobs in results.items():
        for key, r in by_jobs.items():
            jobs = "JOBS=1" if key == "1" else "default JOBS"
            beside = " beside two busy processes" * (key == "loaded")
            lines.append(f"- `make {target}`, {jobs}{beside}: "
                         f"{'; '.join(r['pytest']) or '?'}; load: {r['load']}")
    return lines


def yardstick_lines(results):
    """Each run in yardsticks: its CPU and wall seconds over the CPU seconds of the yardstick
    measured (quiet) just before and after it (runs recorded before it existed are left out)."""
    lines = []
    for target, by_jobs in results.items():
        for key, r in by_jobs.items():
            stick = r.get("yardstick")
            if key == "1" or not stick:
                continue
            unit = (stick["before"] + stick["after"]) / 2
            beside = " beside two busy processes" * (key == "loaded")
            lines.append(f"- `make {target}`{beside}: {r['cpu_seconds'] / unit:.0f} yardsticks "
                         f"of CPU, {r['seconds'] / unit:.0f} of wall (the yardstick: "
                         f"{stick['before']:.2f} s of CPU before, {stick['after']:.2f} s after)")
    if not lines:
        return []
    return ["", "In yardsticks (`benchmarks/_machine.py`'s `yardstick`: `" + YARDSTICK.name
            + "` executed in a "
            "fresh kernel by nbconvert, the fewest CPU seconds of 3 runs, measured quiet before "
            "and after each run): a cost that does not move with the machine's speed; multiply "
            "by another machine's yardstick for its seconds.", "", *lines]


def default_jobs(target):
    """The workers ``make TARGET`` runs here by default, read from the command it would run
    (the Makefile's rule: make test one more than the cores, make check one per core)."""
    dry = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True)
    found = re.search(r"pytest -n (\d+) ", dry.stdout)
    return int(found[1]) if found else 1


def machine():
    """Cores, CPU and whether numpy runs AVX-512 kernels here (tools/cpu_dispatch.py)."""
    avx512 = subprocess.run([sys.executable, str(ROOT / "tools" / "cpu_dispatch.py"), "--avx512"],
                            capture_output=True, text=True).stdout.strip()
    model = _machine.lscpu().get("Model name", "?")
    passes = "the AVX-512-off pass runs" if avx512 == "yes" else "the AVX-512-off pass is left out"
    return f"{os.cpu_count()} cores, {model}, numpy's AVX-512 kernels: {avx512} ({passes})"


def write_results(record):
    _results.write_block(RESULTS, "test-loop", [
        "## 7. The test loop (`benchmarks/bench_test_loop.py`)", "",
        f"Measured {record['date']} on commit {record['commit']}, on {record['machine']}, in "
        "the checkout's .venv without CI=true (the fresh Binder environment build is skipped, "
        "as on a contributor's machine; CI runs it too).", "", *table(record["results"]),
        *parts_table(record["results"])])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="time make check only")
    ap.add_argument("--test", action="store_true", help="time make test only")
    ap.add_argument("--only", nargs="+", choices=[key for key, _, _ in RUNS],
                    help="only these runs (default, 1, loaded); the others keep their last "
                         "figures if they were measured on the same machine")
    args = ap.parse_args()
    logdir = ROOT / "artifacts" / "bench-test-loop"
    logdir.mkdir(parents=True, exist_ok=True)
    targets = ["check"] if args.check else ["test"] if args.test else ["check", "test"]
    wanted = [(key, jobs, busy) for key, jobs, busy in RUNS if not args.only or key in args.only]
    results = {t: {key: run(t, jobs, logdir, busy) for key, jobs, busy in wanted}
               for t in targets}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    record = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
              "machine": machine(), "results": results}
    keys = {key for key, _, _ in RUNS}
    if TIMINGS.exists():  # keep the last figures of what was not run, if of this machine
        last = json.loads(TIMINGS.read_text())
        if last.get("machine") == record["machine"]:
            old = {t: {k: r for k, r in by.items() if k in keys}
                   for t, by in last["results"].items()}
            record["results"] = {t: {**old.get(t, {}), **results.get(t, {})}
                                 for t in dict.fromkeys([*old, *results])}
    TIMINGS.write_text(json.dumps(record, indent=1) + "\n")
    write_results(record)
    print("\n".join(table(record["results"]) + parts_table(record["results"])))
    return 0 if all(r["rc"] == 0 for by in results.values() for r in by.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
