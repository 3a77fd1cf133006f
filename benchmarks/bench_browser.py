"""Explorer latency in the page: key press to the new image decoded, in JupyterLab and Chromium.

Runs ``tests/test_browser.py`` (one JupyterLab, one headless Chromium; every explorer's main
controls moved with the keyboard, ``PRESSES`` times each) with ``BROWSER_LATENCY_RECORD``
set, then writes the block ``browser-latency`` of ``benchmarks/RESULTS.md``: per control the
number of presses, the median and the slowest press in ms, and the goal (median <= 100 ms
for a slider, 300 ms for a typed sentence), with the load average at the start and the end
of the run and the commit. A report, never an assertion: the browser test asserts what an
explorer shows, not how fast.

The machine's load changes every number here: run it on a quiet machine (load below 1) for
the figures the README and the issues compare with, and read the load columns first.

Run: ``.venv/bin/python benchmarks/bench_browser.py [-k 14-a-tiny-gpt]`` (needs
``make test-extras`` and Debian's chromium; a few minutes for every notebook).
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import write_block  # noqa: E402

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
LATENCY_GOAL_MS, SENTENCE_GOAL_MS = 100, 300  # tests/test_browser.py's goals


def table(record):
    """Markdown lines: one row per control, from a record written by the browser test."""
    rows = ["| explorer: control | presses | median ms | slowest ms | goal (median) |",
            "|---|---|---|---|---|"]
    for name, ms in record["samples"].items():
        goal = SENTENCE_GOAL_MS if "sentence" in name else LATENCY_GOAL_MS
        med = float(np.median(ms))
        rows.append(f"| {name} | {len(ms)} | {med:.0f} | {max(ms):.0f} | <= {goal}"
                    f"{'' if med <= goal else ' (missed)'} |")
    return rows


#: The parts of a key press's time (tests/test_browser.py, ``split_of``), in their order.
PARTS = ("browser out", "to kernel", "kernel", "back", "browser in")


def split_table(record):
    """Markdown lines: per control, the median of each part of a key press's time (ms), the
    kernel's whole work for the change (busy to idle: the other theme's frame included), the
    other theme's frame arrived, and the kernel's messages and kB for the change."""
    rows = ["| explorer: control | " + " | ".join(PARTS) + " | kernel busy | other theme's "
            "frame | messages | kB |", "|---|" + "---|" * (len(PARTS) + 4)]
    for name, presses in record.get("split", {}).items():
        seen = [p for p in presses if p]
        if not seen:
            continue

        def med(key, seen=seen):
            values = [p[key] for p in seen if p.get(key) is not None]
            return f"{np.median(values):.0f}" if values else "-"

        rows.append(f"| {name} | " + " | ".join(med(k) for k in PARTS)
                    + f" | {med('kernel busy')} | {med('twin')} | {med('messages')} | "
                    f"{med('kB')} |")
    return rows


def block(record, commit, when):
    load = ", ".join(f"{x:.1f}" for x in record["load_start"])
    load_end = ", ".join(f"{x:.1f}" for x in record["load_end"])
    return ["## Explorer latency in the page (benchmarks/bench_browser.py)", "",
            f"{when}, commit {commit}; load average (1, 5, 15 min) {load} at the start, "
            f"{load_end} at the end, on {os.cpu_count()} cores. Key press to the new image "
            "decoded in JupyterLab's page (headless Chromium); a report, not asserted.", "",
            *table(record), "",
            "Where the median press's time goes (ms): key press to the widget's message sent "
            "(browser out), to the kernel's busy status (to kernel), to the kernel's message with "
            "the new frame (kernel: the Python side, by the kernel's clock), its arrival in the "
            "page (back), the picture decoded (browser in); beside them the kernel's whole work "
            "for the change (busy to idle), key press to the other theme's frame in the page, and "
            "the kernel's messages and kB for the change.", "",
            *split_table(record)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-k", default="", help="pytest -k: only these notebooks")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "latency.json"
        env = dict(os.environ, BROWSER_LATENCY_RECORD=str(out), MPLBACKEND="Agg")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "tests/test_browser.py", "-k", f"notebook_runs_in_jupyterlab and ({args.k})"
               if args.k else "notebook_runs_in_jupyterlab"]
        result = subprocess.run(cmd, cwd=ROOT, env=env)
        if not out.exists():
            sys.exit(f"the browser test wrote no record (pytest exit {result.returncode})")
        record = json.loads(out.read_text())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "unknown"
    when = datetime.date.today().isoformat()
    lines = block(record, commit, when)
    print("\n".join(lines))
    if not args.k:  # a partial run is printed, not recorded
        write_block(RESULTS, "browser-latency", lines)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
