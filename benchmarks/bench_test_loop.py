"""How long the contributor's loop (`make check`) and the full suite (`make test`) take, with
pytest-xdist on both cores against one process, in one run.

    .venv/bin/python benchmarks/bench_test_loop.py            # make check and make test
    .venv/bin/python benchmarks/bench_test_loop.py --check    # make check only (a few minutes)

Runs in this checkout's .venv (with the extras CI installs, where present: torch,
transformers, Playwright, Chromium, the classroom's environment), without CI=true, so the one
test that builds a fresh 700 MB Binder environment is skipped, as on a contributor's machine.
Each command is timed once with JOBS=2 and once with JOBS=1, in that order, with the load of
the machine meanwhile; the table goes into benchmarks/RESULTS.md between the test-loop markers
(bench_attention.py keeps that block when it rewrites the file) and into
benchmarks/test_loop_timings.json.
"""

import argparse
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


def run(target, jobs, logdir):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    log = logdir / f"{target}-jobs{jobs}.log"
    with _machine.LoadMeter() as meter, open(log, "w") as f:
        start = time.perf_counter()
        proc = subprocess.run(["make", target, f"JOBS={jobs}"], cwd=ROOT, env=env, stdout=f,
                              stderr=subprocess.STDOUT, timeout=3 * 3600)
        seconds = time.perf_counter() - start
    summaries = [m.group(1) for m in map(SUMMARY.match, log.read_text().splitlines()) if m]
    return {"seconds": round(seconds, 1), "rc": proc.returncode, "pytest": summaries,
            "load": meter.summary()}


def table(results):
    lines = ["| command | JOBS=2 (both cores) | JOBS=1 (one process) | JOBS=1 / JOBS=2 |",
             "| --- | --- | --- | --- |"]
    for target, by_jobs in results.items():
        two, one = by_jobs["2"], by_jobs["1"]
        lines.append(f"| `make {target}` | {two['seconds']:.0f} s (rc {two['rc']}) | "
                     f"{one['seconds']:.0f} s (rc {one['rc']}) | "
                     f"{one['seconds'] / two['seconds']:.2f} |")
    lines += ["", "pytest's summaries and the machine's load during each run:", ""]
    for target, by_jobs in results.items():
        for jobs, r in by_jobs.items():
            lines.append(f"- `make {target} JOBS={jobs}`: {'; '.join(r['pytest']) or '?'}; "
                         f"load: {r['load']}")
    return lines


def write_results(record):
    _results.write_block(RESULTS, "test-loop", [
        "## 7. The test loop (`benchmarks/bench_test_loop.py`)", "",
        f"Measured {record['date']} on commit {record['commit']}, in the checkout's .venv "
        "without CI=true (the fresh Binder environment build is skipped, as on a "
        "contributor's machine; CI runs it too).", "", *table(record["results"])])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="time make check only")
    args = ap.parse_args()
    logdir = ROOT / "artifacts" / "bench-test-loop"
    logdir.mkdir(parents=True, exist_ok=True)
    targets = ["check"] if args.check else ["check", "test"]
    results = {t: {str(j): run(t, j, logdir) for j in (2, 1)} for t in targets}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    record = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
              "results": results}
    if TIMINGS.exists() and args.check:  # keep the last make test figures
        old = json.loads(TIMINGS.read_text())
        record["results"] = {**{k: v for k, v in old["results"].items() if k != "check"},
                             **results}
    TIMINGS.write_text(json.dumps(record, indent=1) + "\n")
    write_results(record)
    print("\n".join(table(record["results"])))
    return 0 if all(r["rc"] == 0 for by in results.values() for r in by.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
