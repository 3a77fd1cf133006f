"""What the benchmark ran on, how busy the machine was meanwhile, and interleaved timing
(benchmark helpers only)."""

import os
import platform
import subprocess
import time

#: Set on some processors for old OpenBLAS builds; they slow a current numpy (see
#: .library/env/README.md). The benchmark removes both, for its own process only.
OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

#: Idle thread-pool workers sleep instead of spinning, for the benchmark's process only.
#: With 2 cores shared with other work, torch's spinning OpenMP workers and OpenBLAS's
#: spinning pthreads (up to 2^28 cycles after each call) take the cores from each other and
#: from the other processes: measured here, torch's n = 1024 attention took 124 ms alone with
#: the defaults and 19 ms with OMP_WAIT_POLICY=PASSIVE; a numpy attention interleaved with
#: torch took 45 ms, and 18 ms once OpenBLAS also stopped spinning.
THREAD_POOL_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "4"}


def prepare_environment(omp_wait_policy="PASSIVE"):
    """Re-exec this script once with THREAD_POOL_ENV and without OPENBLAS_VARS.

    Both must be in place before numpy and torch load their thread pools. Returns what
    OPENBLAS_VARS held before (for the report). ``omp_wait_policy="unset"`` removes
    OMP_WAIT_POLICY instead (libgomp's default: idle threads spin for a while).
    """
    if "ATTN_BENCH_REEXEC" not in os.environ:
        found = {name: os.environ[name] for name in OPENBLAS_VARS if name in os.environ}
        env = {k: v for k, v in os.environ.items() if k not in OPENBLAS_VARS}
        env.update(THREAD_POOL_ENV, ATTN_BENCH_REEXEC=repr(found) if found else "none set")
        if omp_wait_policy == "unset":
            env.pop("OMP_WAIT_POLICY")
        import sys
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    return os.environ["ATTN_BENCH_REEXEC"]


def lscpu():
    """``lscpu`` as a dict (empty where it is missing)."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_jiffies():
    """(busy, total) jiffies of the whole machine since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


class LoadMeter:
    """How much of the machine other processes used while a section ran.

    ``others`` is the share of all cores' time that was busy but not spent by this process
    (0 = we had the machine to ourselves, 0.5 = another process kept one of two cores busy).
    """

    def __enter__(self):
        self.start = (cpu_jiffies(), os.times(), time.perf_counter(), loadavg())
        return self

    def __exit__(self, *exc):
        (busy0, total0), t0, w0, self.load_start = self.start
        busy1, total1 = cpu_jiffies()
        t1 = os.times()
        self.wall = time.perf_counter() - w0
        self.load_end = loadavg()
        hz = os.sysconf("SC_CLK_TCK")
        ours = (t1.user + t1.system + t1.children_user + t1.children_system
                - t0.user - t0.system - t0.children_user - t0.children_system) * hz
        total = max(total1 - total0, 1)
        self.busy = (busy1 - busy0) / total
        self.others = max(0.0, (busy1 - busy0 - ours) / total)
        return False

    def summary(self):
        return (f"{self.wall:.0f} s; load average {self.load_start} -> {self.load_end}; "
                f"cores busy {100 * self.busy:.0f}%, of which other processes "
                f"{100 * self.others:.0f}% of the machine")


def describe(threadpool_info, overrides):
    """Lines of markdown that say what the machine and libraries were."""
    import numpy
    cpu = lscpu()
    lines = [
        f"- CPU: {cpu.get('Model name', platform.processor() or '?')} "
        f"({cpu.get('Vendor ID', '?')}, family {cpu.get('CPU family', '?')} model "
        f"{cpu.get('Model', '?')}), {os.cpu_count()} logical cores, "
        f"{cpu.get('Thread(s) per core', '?')} thread(s) per core, "
        f"hypervisor {cpu.get('Hypervisor vendor', 'none')}",
        f"- caches: L1d {cpu.get('L1d cache', '?')}, L2 {cpu.get('L2 cache', '?')}, "
        f"L3 {cpu.get('L3 cache', '?')}",
        f"- memory: {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB; "
        f"{platform.system()} {platform.release()}; Python {platform.python_version()}",
        f"- numpy {numpy.__version__}"
        + "".join(f", {name} {_version(name)}" for name in ("torch", "threadpoolctl")),
        f"- OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in the environment: {overrides} "
        "(the benchmark removes both for its own process only)",
        "- thread pools told to sleep when idle, for the benchmark's process only: "
        + ", ".join(f"{k}={v}" for k, v in THREAD_POOL_ENV.items())
        + " (why: benchmarks/_machine.py)",
    ]
    for lib in threadpool_info:
        lines.append(
            f"- thread pool: {lib.get('internal_api')} {lib.get('version') or ''} "
            f"({lib.get('user_api')}), kernel architecture {lib.get('architecture', '-')}, "
            f"{lib.get('num_threads')} threads, `{os.path.basename(lib.get('filepath', ''))}`")
    return lines


def _version(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:  # noqa: BLE001 - absent or unversioned: say so
        return "not installed"


def interleaved(contenders, rounds):
    """{name: [seconds per round]} and {name: output}; the order rotates every round.

    The one implementation is :func:`attn_core.cost.interleaved_times` (notebook 09 times its
    curve with it too), imported here on first use: numpy must not be imported before
    :func:`prepare_environment` has set the thread pools' environment.
    """
    from attn_core.cost import interleaved_times

    return interleaved_times(contenders, rounds)


#: A CPU-bound loop that ends by itself after ``seconds`` (so a killed benchmark leaves no load).
_BUSY_CODE = ("import sys, time\nend = time.monotonic() + float(sys.argv[1])\n"
              "while time.monotonic() < end:\n    pass\n")


class BusyLoops:
    """``n`` CPU-bound processes beside the code in the ``with`` block: a busy machine on demand.

    Each is a plain Python loop (no numpy, no thread pool) that stops by itself after
    ``seconds`` at the latest; leaving the block stops them all. ``stress-ng --cpu n`` would
    do the same where Debian's package is installed; this needs nothing but Python.
    """

    def __init__(self, n=2, seconds=3600):
        self.n, self.seconds, self.procs = n, seconds, []

    def __enter__(self):
        import sys
        self.procs = [subprocess.Popen([sys.executable, "-c", _BUSY_CODE, str(self.seconds)],
                                       stdin=subprocess.DEVNULL)
                      for _ in range(self.n)]
        time.sleep(0.5)  # let them reach their loops
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = []
        return False

    def describe(self):
        return (f"{self.n} CPU-bound Python processes (busy loops, started and stopped by the "
                "benchmark) running beside it")


def yardstick(notebook, python, runs=3):
    """The CPU seconds this machine spends on one fixed piece of the test suite's own kind of
    work: ``notebook`` executed in a fresh Jupyter kernel by nbconvert (start-up, imports,
    numpy, matplotlib's drawing and PNG encoding), as nbval runs each notebook.

    The fewest CPU seconds (user + system of nbconvert and its kernel) of ``runs`` runs.
    Suite CPU seconds divided by it give a cost that does not move with the machine's speed
    (a virtual machine here ran the same code 5-25% slower from one hour to the next), so
    measurements of different hours, or machines, can be compared.
    """
    best = None
    env = {**os.environ, "MPLBACKEND": "Agg"}
    for _ in range(runs):
        proc = subprocess.Popen(
            [python, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--stdout",
             "--log-level=ERROR", "--ExecutePreprocessor.kernel_name=python3", str(notebook)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)  # the kernel is reaped by nbconvert: counted
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"the yardstick notebook {notebook} failed to run")
        cpu = usage.ru_utime + usage.ru_stime
        best = cpu if best is None else min(best, cpu)
    return best
