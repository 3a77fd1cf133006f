"""Speed, memory and growth of attn_core's attention against PyTorch; the course's own timings.

Sections (each prints a table; all of them go to benchmarks/RESULTS.md):

1. forward time, float32 and float64, d = 64, one head, n = 256 ... 4096, without and with
   a causal mask: attn_core.fast.fast_attention, attn_core.attention,
   attn_core.flash_attention (every block size in FLASH_BLOCKS, the best reported), torch's
   scaled_dot_product_attention (CPU) on 4-D (1, 1, n, 64) tensors, which PyTorch sends to
   its fused flash kernel (checked with torch._fused_sdp_choice: the script stops if it
   picks another backend; 2-D and 3-D inputs go to the slower unfused "math" path), the
   old plain-numpy attention, and the two plain matrix products of the same shapes (the
   floor).
   Every contender runs once per round, in a rotating order, so that a burst of load from
   another process hits all of them alike; each cell is the median over the rounds, and each
   ratio is the median of the per-round ratios to PyTorch. 2 threads for everyone.
2. levers: what fast_attention's thread pool, its skipped max pass and its block size each
   bought, beside the old levers (in place, query blocks, flash tiles) and torch's 2-D call.
3. peak memory (tracemalloc) of attention, flash_attention and fast_attention up to
   n = 16,384.
4. log-log slopes of time against n.
5. OMP_WAIT_POLICY: the goal sizes again in a child process with the variable unset
   (PyTorch's OpenMP threads then spin while idle) beside the main run's PASSIVE.
6. with --course: nbval over the notebooks, `make test` and `make lab` from fresh clones,
   the size of .venv (minutes; otherwise the last stored timings are shown, with their date).

Run on a quiet machine: ``.venv/bin/python benchmarks/bench_attention.py`` (``make bench``;
about 10 minutes; ``--quick`` for a third of the rounds, ``--smoke`` to check it runs). It
writes benchmarks/RESULTS.md. It is not a timed test: it prints and writes tables.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _machine  # noqa: E402
import _results  # noqa: E402

OVERRIDES = _machine.prepare_environment(  # re-execs this script once
    "unset" if "unset" in sys.argv else "PASSIVE")

import numpy as np  # noqa: E402

try:
    from threadpoolctl import threadpool_info, threadpool_limits
except ImportError:  # pragma: no cover - said once, clearly
    sys.exit("bench_attention.py needs threadpoolctl (pin it: threadpoolctl==3.7.0)")

import _variants as var  # noqa: E402

import attn_core  # noqa: E402
from attn_core import fast as fast_module  # noqa: E402
from attn_core.fast import fast_attention  # noqa: E402

# the module itself: the package exports the function under the same name
attention_module = sys.modules["attn_core.attention"]

THREADS = 2
D = 64
SIZES = (256, 512, 1024, 2048, 4096)
GOAL_SIZES = (1024, 2048, 4096)
FLASH_BLOCKS = (256, 512, 1024)
FAST_BLOCK_BYTES = (128 << 10, 512 << 10, 2 << 20, 8 << 20)
#: torch._fused_sdp_choice's answer for its fused flash kernel (torch.nn.attention.SDPBackend)
FUSED = 1
BLOCK_BYTES_SWEEP = (256 << 10, 1 << 20, 4 << 20, 16 << 20)
MEM_SIZES = (1024, 2048, 4096, 8192, 16384)
ROUNDS = {256: 31, 512: 25, 1024: 15, 2048: 11, 4096: 9}
TOL = {np.float32: {"rtol": 1e-4, "atol": 1e-5}, np.float64: {"rtol": 1e-10, "atol": 1e-12}}
GOAL_RATIO = 1.25
COURSE_JSON = ROOT / "benchmarks" / "course_timings.json"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"


# --- measuring -------------------------------------------------------------------------------



def summary(times, ref="torch"):
    """{name: (median seconds, median of the per-round ratios to ref, IQR / median)}."""
    base = np.asarray(times[ref])
    out = {}
    for name, t in times.items():
        t = np.asarray(t)
        q1, med, q3 = np.percentile(t, [25, 50, 75])
        out[name] = (med, float(np.median(t / base)), (q3 - q1) / med)
    return out


def problem(n, dtype, seed=0):
    g = np.random.default_rng(seed + n)
    return tuple(g.standard_normal((n, D)).astype(dtype) for _ in range(3))


def reference(q, k, v, mask):
    """float64 reference output (the old plain code, in float64)."""
    return var.before_attention(*(x.astype(np.float64) for x in (q, k, v)), mask=mask)[0]


def with_block_bytes(nbytes, fn, *args, **kwargs):
    saved = attention_module.BLOCK_BYTES
    attention_module.BLOCK_BYTES = nbytes
    try:
        return fn(*args, **kwargs)
    finally:
        attention_module.BLOCK_BYTES = saved


BACKENDS = set()


def torch_sdpa(torch, q, k, v, causal, four_d=True):
    """PyTorch's attention on (1, 1, n, d) tensors (its fused kernel), checked, as a callable."""
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    if four_d:
        tq, tk, tv = (t[None, None] for t in (tq, tk, tv))  # (n, d) -> (1, 1, n, d)
        choice = int(torch._fused_sdp_choice(tq, tk, tv, is_causal=causal))
        name = torch.nn.attention.SDPBackend(choice).name
        if choice != FUSED:
            sys.exit(f"PyTorch chose backend {choice} ({name}) for {tuple(tq.shape)} "
                     f"{tq.dtype} causal={causal}, not its fused kernel ({FUSED}): the "
                     "comparison would not be with PyTorch's fast path")
        BACKENDS.add(f"{choice} ({name}) for {tq.dtype}, causal={causal}")

    def sdpa():
        with torch.no_grad():
            out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
        return out.numpy().reshape(q.shape[0], v.shape[-1])  # (1, 1, n, d) -> (n, d)

    return sdpa


def forward_contenders(torch, q, k, v, causal):
    n = q.shape[0]
    mask = attn_core.causal_mask(n) if causal else None
    s, o = np.empty((n, n), q.dtype), np.empty((n, D), q.dtype)
    c = {
        "torch": torch_sdpa(torch, q, k, v, causal),
        "fast": lambda: fast_attention(q, k, v, causal=causal),
        "attention": lambda: attn_core.attention(q, k, v, mask=mask)[0],
        "plain numpy (before)": lambda: var.before_attention(q, k, v, mask=mask)[0],
        "floor": lambda: var.floor_products(q, k, v, s, o),
    }
    for b in FLASH_BLOCKS:
        c[f"flash {b}"] = lambda b=b: attn_core.flash_attention(q, k, v, block_size=b,
                                                                causal=causal)
    return c, mask


def check(outputs, q, k, v, mask, failures, label):
    expected = reference(q, k, v, mask)
    for name, out in outputs.items():
        if name == "floor":
            continue
        try:
            np.testing.assert_allclose(out, expected, **TOL[q.dtype.type])
        except AssertionError as exc:
            failures.append(f"{label} {name}: {str(exc).splitlines()[3:6]}")


def forward_section(torch, dtype, causal, rounds_scale, failures):
    rows = []
    for n in SIZES:
        q, k, v = problem(n, dtype)
        contenders, mask = forward_contenders(torch, q, k, v, causal)
        times, outputs = _machine.interleaved(contenders, max(3, int(ROUNDS[n] * rounds_scale)))
        check(outputs, q, k, v, mask, failures, f"{np.dtype(dtype).name} causal={causal} n={n}")
        rows.append((n, summary(times)))
        st = rows[-1][1]
        best = min(FLASH_BLOCKS, key=lambda b: st[f"flash {b}"][0])
        print(f"  {np.dtype(dtype).name} causal={causal} n={n}: torch "
              f"{st['torch'][0] * 1e3:.1f} ms, fast x{st['fast'][1]:.2f}, "
              f"attention x{st['attention'][1]:.2f}, "
              f"flash {best} x{st[f'flash {best}'][1]:.2f}", flush=True)
    return rows


def with_attr(module, name, value, fn):
    """``fn()`` with ``module.name`` set to ``value`` for the call."""
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        return fn()
    finally:
        setattr(module, name, saved)


def lever_contenders(torch, q, k, v):
    never_safe = {dt: 0.0 for dt in fast_module.SAFE_BOUND}
    c = {
        "torch": torch_sdpa(torch, q, k, v, False),
        "torch, 2-D (n, d) input: unfused math path": torch_sdpa(torch, q, k, v, False,
                                                                 four_d=False),
        "0 plain numpy (before)": lambda: var.before_attention(q, k, v)[0],
        "1 in place, whole matrix": lambda: var.inplace_attention(q, k, v)[0],
        "2 attention: query blocks + in place (BLAS on 2 threads, exp on 1)":
            lambda: attn_core.attention(q, k, v)[0],
        "3 fast, 1 thread (one exp pass, sums from [V | 1])":
            lambda: fast_attention(q, k, v, threads=1),
        "4 fast, 2 threads, max shift always (no bound)": lambda: with_attr(
            fast_module, "SAFE_BOUND", never_safe, lambda: fast_attention(q, k, v, threads=2)),
        "5 fast, 2 threads (the default)": lambda: fast_attention(q, k, v, threads=2),
        "6 fast, 4 threads on 2 cores": lambda: fast_attention(q, k, v, threads=4),
    }
    for nb in FAST_BLOCK_BYTES:
        c[f"7 fast, 2 threads, blocks of {nb >> 10} KiB"] = (
            lambda nb=nb: fast_attention(q, k, v, block_bytes=nb))
    for b in (64, 512, 1024):
        c[f"8 flash_attention, tiles {b}"] = (
            lambda b=b: attn_core.flash_attention(q, k, v, block_size=b))
    return c


def lever_section(torch, rounds_scale, failures):
    rows = []
    for n in GOAL_SIZES:
        q, k, v = problem(n, np.float32)
        c = lever_contenders(torch, q, k, v)
        times, outputs = _machine.interleaved(c, max(3, int(ROUNDS[n] * rounds_scale)))
        check(outputs, q, k, v, None, failures, f"levers n={n}")
        rows.append((n, summary(times)))
        print(f"  levers n={n} done", flush=True)
    return rows


def goal_only(torch, rounds_scale, failures):
    """float32, no mask, the goal sizes: torch, fast_attention, attention (section 5's runs)."""
    rows = []
    for n in GOAL_SIZES:
        q, k, v = problem(n, np.float32)
        c = {"torch": torch_sdpa(torch, q, k, v, False),
             "fast": lambda q=q, k=k, v=v: fast_attention(q, k, v),
             "attention": lambda q=q, k=k, v=v: attn_core.attention(q, k, v)[0]}
        times, outputs = _machine.interleaved(c, max(3, int(ROUNDS[n] * rounds_scale)))
        check(outputs, q, k, v, None, failures, f"wait policy n={n}")
        rows.append((n, {name: list(st) for name, st in summary(times).items()}))
    return rows


def memory_section(dtype, block):
    rows = []
    for n in MEM_SIZES:
        q, k, v = problem(n, dtype)
        full = attn_core.score_matrix_bytes(n, dtype=np.dtype(dtype).name)
        attn = attn_core.peak_memory(attn_core.attention, q, k, v)
        flash = attn_core.peak_memory(attn_core.flash_attention, q, k, v, block_size=block)
        fast = attn_core.peak_memory(fast_attention, q, k, v)
        rows.append((n, full, attn, flash, fast))
        print(f"  memory {np.dtype(dtype).name} n={n}: attention {attn / 2**20:.1f} MiB, "
              f"flash {flash / 2**20:.2f} MiB, fast {fast / 2**20:.2f} MiB", flush=True)
    return rows


# --- the course ------------------------------------------------------------------------------


def run_timed(cmd, cwd, log, env=None, timeout=3600):
    start = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, env=env,
                              timeout=timeout, shell=isinstance(cmd, str))
    return time.perf_counter() - start, proc.returncode


def tail(log, lines=1):
    return " | ".join(Path(log).read_text(errors="replace").strip().splitlines()[-lines:])


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def time_make_lab(clone, logdir):
    """Seconds from `make lab` in a fresh clone until /api answers with the token; then stop it."""
    import signal
    import urllib.request
    token, port = "bench" + os.urandom(8).hex(), free_port()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(logdir / "rt"),
           "JUPYTER_CONFIG_DIR": str(logdir / "cfg")}
    log = open(logdir / "make-lab.log", "w")
    start = time.perf_counter()
    proc = subprocess.Popen(
        ["make", "lab", f"PORT={port}",
         f"LAB_ARGS=--no-browser --IdentityProvider.token={token}"],
        cwd=clone, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    answered = None
    try:
        while time.perf_counter() - start < 1800 and proc.poll() is None:
            try:
                url = f"http://127.0.0.1:{port}/api?token={token}"
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        answered = time.perf_counter() - start
                        break
            except OSError:
                time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # our own process group only
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    return answered


def du(path):
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True).stdout
    return int(out.split()[0]) if out else None


def course_section():
    import shutil
    import tempfile
    work = Path(tempfile.mkdtemp(prefix="attn-bench-course-"))
    result = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
              "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                       capture_output=True, text=True).stdout.strip()}
    with _machine.LoadMeter() as meter:
        env = {**os.environ, "MPLBACKEND": "Agg"}
        secs, rc = run_timed([sys.executable, "-m", "pytest", "notebooks", "-q"], ROOT,
                             work / "nbval.log", env=env)
        result["nbval"] = {"seconds": secs, "rc": rc, "tail": tail(work / "nbval.log")}
        print(f"  nbval: {secs:.0f} s (rc {rc})", flush=True)
        for name in ("test", "lab"):
            clone = work / f"clone-{name}"
            subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
            if name == "test":
                secs, rc = run_timed(["make", "test"], clone, work / "make-test.log")
                result["make_test"] = {"seconds": secs, "rc": rc,
                                       "tail": tail(work / "make-test.log")}
                result["venv_bytes"] = du(clone / ".venv")
                print(f"  make test: {secs:.0f} s (rc {rc})", flush=True)
            else:
                secs = time_make_lab(clone, work)
                result["make_lab"] = {"seconds": secs, "tail": tail(work / "make-lab.log", 2)}
                print(f"  make lab: {secs} s until /api answered", flush=True)
            shutil.rmtree(clone, ignore_errors=True)
        result["venv_bytes_main"] = du(ROOT / ".venv")
    result["load"] = meter.summary()
    COURSE_JSON.write_text(json.dumps(result, indent=1) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return result


# --- the report ------------------------------------------------------------------------------


def ms(t):
    return f"{t * 1e3:.2f}" if t < 0.01 else f"{t * 1e3:.1f}"


def best_flash(stats):
    b = min(FLASH_BLOCKS, key=lambda b: stats[f"flash {b}"][0])
    return b, stats[f"flash {b}"]


def forward_table(rows):
    lines = ["| n | torch fused ms (spread) | fast_attention ms (x torch) | attention ms (x torch) "
             "| flash ms, best block (x torch) | plain numpy before (x torch) "
             "| floor: 2 products (x torch) |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for n, st in rows:
        b, fl = best_flash(st)
        lines.append(
            f"| {n} | {ms(st['torch'][0])} ({100 * st['torch'][2]:.0f}%) | "
            f"{ms(st['fast'][0])} (x{st['fast'][1]:.2f}) | "
            f"{ms(st['attention'][0])} (x{st['attention'][1]:.2f}) | "
            f"{ms(fl[0])}, {b} (x{fl[1]:.2f}) | "
            f"{ms(st['plain numpy (before)'][0])} (x{st['plain numpy (before)'][1]:.2f}) | "
            f"{ms(st['floor'][0])} (x{st['floor'][1]:.2f}) |")
    return lines


def lever_table(rows):
    names = list(rows[0][1])
    head = " | ".join(f"n = {n}: ms (x torch)" for n, _ in rows)
    lines = [f"| path (float32, no mask) | {head} |",
             "|---|" + "---:|" * len(rows)]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(
            f"{ms(st[name][0])} (x{st[name][1]:.2f})" for _, st in rows) + " |")
    return lines


def memory_table(rows, dtype, block):
    lines = [f"{np.dtype(dtype).name}, flash_attention block_size = {block}:", "",
             "| n | full score matrix | attention peak | flash_attention peak "
             "| flash / attention | fast_attention peak | fast / attention |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for n, full, attn, flash, fast in rows:
        lines.append(f"| {n} | {full / 2**20:.1f} MiB | {attn / 2**20:.1f} MiB | "
                     f"{flash / 2**20:.2f} MiB | {100 * flash / attn:.2f}% | "
                     f"{fast / 2**20:.2f} MiB | {100 * fast / attn:.2f}% |")
    return lines


def slope_lines(all_rows):
    lines = ["| dtype, mask | contender | slope n = 256..4096 | slope n = 1024..4096 |",
             "|---|---|---:|---:|"]
    for label, rows in all_rows.items():
        ns = [n for n, _ in rows]
        for name in ("fast", "attention", "flash (best block)", "torch", "floor"):
            ys = [best_flash(st)[1][0] if name.startswith("flash") else st[name][0]
                  for _, st in rows]
            big = [(n, y) for n, y in zip(ns, ys) if n >= 1024]
            lines.append(f"| {label} | {name} | {attn_core.loglog_slope(ns, ys):.2f} | "
                         f"{attn_core.loglog_slope(*zip(*big)):.2f} |")
    return lines


def goal_lines(all_rows, mem_rows):
    lines = []
    for label in all_rows:
        rows = dict(all_rows[label])
        for n in GOAL_SIZES:
            st = rows[n]
            b, fl = best_flash(st)
            name, (_, ratio, _) = min(
                ("fast_attention", st["fast"]), ("attention", st["attention"]),
                (f"flash_attention({b})", fl), key=lambda x: x[1][1])
            verdict = "met" if ratio <= GOAL_RATIO else f"missed by x{ratio / GOAL_RATIO:.2f}"
            goal = "goal" if label == "float32, no mask" else "reported; goal set for float32"
            lines.append(f"- {label}, n = {n}: fastest exact path {name} at x{ratio:.2f} of "
                         f"PyTorch's fused kernel ({goal} <= x{GOAL_RATIO}): {verdict}")
    for dtype, (rows_mem, _) in mem_rows.items():
        for n, _full, attn, flash, _fast in rows_mem:
            if n == 8192:
                share = flash / attn
                lines.append(f"- {dtype} n = 8192: flash_attention peak is {100 * share:.2f}% of "
                             f"attention's (goal <= 5%): {'met' if share <= 0.05 else 'missed'}")
    best = {best_flash(dict(rws)[n])[0] for rws in all_rows.values() for n in GOAL_SIZES}
    lines.append(f"- flash_attention's fastest tile at n = 1024..4096 (every dtype and mask): "
                 f"{', '.join(map(str, sorted(best)))}; its default DEFAULT_BLOCK_SIZE is "
                 f"{attn_core.DEFAULT_BLOCK_SIZE} (memory at n = 8192 is measured with the tile "
                 "that was fastest at 4096, section 3)")
    for label, rws in all_rows.items():
        n, st = rws[-1]
        b, fl = best_flash(st)
        ratio = fl[0] / st["attention"][0]
        lines.append(f"- {label}, n = {n}: flash_attention ({b}) takes x{ratio:.2f} the time of "
                     f"attention (goal <= x1, 'no slower'): {'met' if ratio <= 1.0 else 'missed'}")
    return lines


def wait_policy_lines(runs):
    """Section 5: the goal sizes with OMP_WAIT_POLICY=PASSIVE and with it unset."""
    if not runs:
        return ["Not measured in this run (--smoke)."]
    lines = ["| OMP_WAIT_POLICY | n | torch fused ms | fast_attention ms (x torch) "
             "| attention ms (x torch) | load meanwhile |", "|---|---:|---:|---:|---:|---|"]
    for policy, (rows, load) in runs.items():
        for n, st in rows:
            lines.append(f"| {policy} | {n} | {ms(st['torch'][0])} | {ms(st['fast'][0])} "
                         f"(x{st['fast'][1]:.2f}) | {ms(st['attention'][0])} "
                         f"(x{st['attention'][1]:.2f}) | {load} |")
    return lines + [
        "", "PASSIVE makes idle OpenMP threads sleep at once; unset, libgomp lets them spin "
        "for a while, which wakes PyTorch's threads faster on a quiet machine but takes a "
        "core from everything else on a busy one. The main tables use PASSIVE (see "
        "benchmarks/_machine.py); this section shows what the choice does to the ratios."]


def run_wait_policy_child(policy, args):
    """Run this script's goal-only mode in a child with OMP_WAIT_POLICY=policy (or unset)."""
    import tempfile
    out = Path(tempfile.mkstemp(suffix=".json", prefix="attn-bench-")[1])
    cmd = [sys.executable, str(Path(__file__).resolve()), "--goal-only", str(out),
           "--omp-wait-policy", policy] + (["--quick"] if args.quick else [])
    env = {k: v for k, v in os.environ.items() if k != "ATTN_BENCH_REEXEC"}
    subprocess.run(cmd, env=env, check=True, timeout=1800)
    data = json.loads(out.read_text())
    out.unlink()
    return [(n, {k: tuple(v) for k, v in st.items()}) for n, st in data["rows"]], data["load"]


def course_lines(course):
    if not course:
        return ["Not measured yet: run `benchmarks/bench_attention.py --course`."]
    gib = 2**30
    lab = course.get("make_lab", {}).get("seconds")
    return [
        f"Measured {course['date']} on commit {course['commit']} (clones take the committed "
        f"tree, not uncommitted work); load during it: {course.get('load', '?')}.",
        "",
        "| what | wall time | result |", "|---|---:|---|",
        f"| nbval over every notebook (`.venv/bin/python -m pytest notebooks -q`) | "
        f"{course['nbval']['seconds']:.0f} s | rc {course['nbval']['rc']}: "
        f"{course['nbval']['tail']} |",
        f"| `make test` in a fresh clone (builds its own .venv) | "
        f"{course['make_test']['seconds']:.0f} s | rc {course['make_test']['rc']}: "
        f"{course['make_test']['tail']} |",
        f"| `make lab` in a fresh clone, until `/api?token=...` answers 200 | "
        f"{'did not answer' if lab is None else f'{lab:.0f} s'} | stopped afterwards |",
        "",
        f"Size of .venv: {course['venv_bytes'] / gib:.2f} GiB in the fresh clone "
        f"(requirements.txt + attn_core), {course['venv_bytes_main'] / gib:.2f} GiB in the main "
        "work tree "
        "(which also has torch for the cross-checks and test extras).",
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--course", action="store_true", help="also time nbval, make test, make lab")
    ap.add_argument("--quick", action="store_true", help="a third of the rounds (a smoke run)")
    ap.add_argument("--no-write", action="store_true", help="print only, keep RESULTS.md")
    ap.add_argument("--smoke", action="store_true",
                    help="3 rounds, memory up to 8192: checks that the script runs")
    ap.add_argument("--omp-wait-policy", default="PASSIVE", choices=("PASSIVE", "unset"),
                    help="OMP_WAIT_POLICY for this process (default PASSIVE)")
    ap.add_argument("--goal-only", metavar="JSON",
                    help="(internal) time the goal sizes only and write them to JSON")
    args = ap.parse_args()
    global MEM_SIZES
    if args.smoke:
        MEM_SIZES = (1024, 8192)
    try:
        import torch
    except ImportError:
        sys.exit("bench_attention.py needs torch==2.13.0 (CPU), as CI installs it")
    torch.set_num_threads(THREADS)
    scale = 0.0 if args.smoke else 1 / 3 if args.quick else 1.0
    failures = []
    if args.goal_only:
        with threadpool_limits(limits=THREADS), _machine.LoadMeter() as m:
            rows = goal_only(torch, scale, failures)
        Path(args.goal_only).write_text(json.dumps({"rows": rows, "load": m.summary()}))
        return 1 if failures else 0
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    with threadpool_limits(limits=THREADS):
        info = threadpool_info()
        sections = {}
        all_rows = {}
        with _machine.LoadMeter() as m:
            for dtype in (np.float32, np.float64):
                for causal in (False, True):
                    label = f"{np.dtype(dtype).name}, {'causal' if causal else 'no mask'}"
                    all_rows[label] = forward_section(torch, dtype, causal, scale, failures)
        sections["forward"] = m
        with _machine.LoadMeter() as m:
            levers = lever_section(torch, scale, failures)
        sections["levers"] = m
        mem_rows = {}
        with _machine.LoadMeter() as m:
            for dtype in (np.float32, np.float64):
                label = f"{np.dtype(dtype).name}, no mask"
                block = best_flash(dict(all_rows[label])[4096])[0]
                mem_rows[np.dtype(dtype).name] = (memory_section(dtype, block), block)
        sections["memory"] = m
    waits = {}
    if not args.smoke:
        with threadpool_limits(limits=THREADS), _machine.LoadMeter() as m:
            rows = goal_only(torch, scale, failures)
        waits["PASSIVE"] = rows, m.summary()
        waits["unset (libgomp's default)"] = run_wait_policy_child("unset", args)
    course = course_section() if args.course else (
        json.loads(COURSE_JSON.read_text()) if COURSE_JSON.exists() else None)

    md = ["# Benchmark results", "",
          f"Generated by `benchmarks/bench_attention.py{' --course' if args.course else ''}` "
          f"on {started}. Do not edit by hand.", "", "## Machine", "",
          *_machine.describe(info, OVERRIDES), "",
          "Load during each section (other processes' share of the machine shows how noisy "
          "it was):", ""]
    md += [f"- {name}: {m.summary()}" for name, m in sections.items()]
    md += ["", "Each cell is the median over interleaved rounds (every contender once per round, "
           "in a rotating order); `x` is the median of the per-round ratios to PyTorch in the same "
           "round; `spread` is torch's interquartile range over its median, a measure of the "
           "noise.", "",
           "PyTorch is called with 4-D `(1, 1, n, 64)` tensors; the backend it chose "
           "(`torch._fused_sdp_choice`, checked before timing; the run stops if it is not the "
           f"fused kernel, {FUSED}): " + "; ".join(sorted(BACKENDS)) + ".",
           "", "## Goals", "", *goal_lines(all_rows, mem_rows), ""]
    md += ["## Correctness", "",
           "Every timed output (the floor's aside) was checked against a float64 reference "
           "(float32: rtol 1e-4, atol 1e-5; float64: rtol 1e-10, atol 1e-12): "
           + ("all equal within tolerance." if not failures else "FAILURES:"), *failures, ""]
    md += ["## 1. Forward time, d = 64, one head, 2 threads", ""]
    for label, rows in all_rows.items():
        md += [f"### {label}", "", *forward_table(rows), ""]
    md += ["The floor is `q @ k.T` into a preallocated (n, n) array, then `@ v`: the same "
           "products for the causal rows (no skipping).", "",
           "## 2. What each lever bought (float32, no mask, same rounds as PyTorch)", "",
           *lever_table(levers), "",
           "Read down the table: 0 to 2 are the old levers of `attention`; 3 is "
           "`fast_attention` on one core (its one exp pass per score and [V | 1] sums); 4 adds "
           "the thread pool but keeps the max pass; 5 is the default; 6 and 7 vary the thread "
           "count and block size; 8 is the tiled online softmax (`flash_attention`) for "
           "comparison. The 2-D torch row is the unfused path the old RESULTS.md compared "
           "with.", "",
           "## 3. Peak memory (tracemalloc, `attn_core.peak_memory`)", ""]
    for dtype, (rows, block) in mem_rows.items():
        md += memory_table(rows, dtype, block) + [""]
    md += ["## 4. Growth: log-log slope of time against n (`attn_core.loglog_slope`)", "",
           *slope_lines(all_rows), "",
           "## 5. OMP_WAIT_POLICY (float32, no mask)", "", *wait_policy_lines(waits), "",
           "## 6. The course", "", *course_lines(course), ""]
    text = "\n".join(md)
    print(text)
    if not args.no_write:
        RESULTS.write_text(text + _results.kept_blocks(RESULTS))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
