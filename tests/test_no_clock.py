"""No notebook prints, displays or asserts anything a clock gave (issue 32).

A time depends on the machine and on what else it is doing; a learner whose laptop is busy
must not get an AssertionError, and a stored output must not hold this machine's
milliseconds. A figure may show a time (nbval does not compare images); the text says what
the figure usually shows.

The check follows the values, cell after cell, through each notebook's code (Python's
``ast``): a name is *timed* once it is assigned from a clock (``time.perf_counter``,
``min_time``, ``interleaved_times``, ...; see ``CLOCKS``) or from a timed name, or a timed
value is appended to it. A ``print``, ``display`` or ``assert`` that reads a timed name, or a
cell whose last expression (which Jupyter displays) does, fails the test, as does an IPython
timing magic (``%time``, ``%timeit``). Plotting a timed name is allowed.
"""

import ast
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

#: Functions whose result is a clock reading, or made of clock readings (attn_core.cost's
#: timing helpers included), or the machine's load or core count.
CLOCKS = {"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "process_time",
          "process_time_ns", "thread_time", "thread_time_ns", "default_timer", "timeit",
          "min_time", "median_time", "interleaved_times", "getloadavg", "cpu_count",
          "time_ns"}
#: ``time.time()`` and ``timeit.repeat()``: clocks only as attributes of these modules.
MODULE_CLOCKS = {("time", "time"), ("timeit", "repeat"), ("timeit", "timeit")}
SHOWS = {"print", "display"}
MAGIC = re.compile(r"^\s*%{1,2}(time|timeit|prun)\b", re.MULTILINE)
ADDS = {"append", "extend", "add", "update", "insert", "setdefault"}


def _is_clock(call):
    f = call.func
    if isinstance(f, ast.Name):
        return f.id in CLOCKS
    if isinstance(f, ast.Attribute):
        base = f.value.id if isinstance(f.value, ast.Name) else None
        return f.attr in CLOCKS or (base, f.attr) in MODULE_CLOCKS
    return False


def _timed(node, timed):
    """True when expression ``node`` reads a clock or a timed name."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and _is_clock(sub):
            return True
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in timed:
            return True
    return False


def _names(target):
    """The variable names an assignment target binds (``x``, ``a, b``, ``d[k]`` -> d)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_names(t) for t in target.elts)) if target.elts else set()
    if isinstance(target, (ast.Subscript, ast.Attribute, ast.Starred)):
        return _names(target.value)
    return set()


def _pairs(targets, value):
    """(target, value) pairs of an assignment; ``a, b = x, y`` pairs a with x and b with y."""
    for target in targets:
        if (isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
                and len(target.elts) == len(value.elts)
                and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts)):
            yield from zip(target.elts, value.elts)
        else:
            yield target, value


def _spread(tree, timed):
    """Add to ``timed`` every name this code assigns from a timed value (to a fixed point:
    a loop can carry a value backwards)."""
    while True:
        before = len(timed)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target, value in _pairs(targets, node.value):
                    if _timed(value, timed) or (isinstance(node, ast.AugAssign)
                                                and _timed(target, timed)):
                        timed |= _names(target)
            elif isinstance(node, (ast.For, ast.comprehension)) and _timed(node.iter, timed):
                timed |= _names(node.target)
            elif isinstance(node, ast.withitem) and node.optional_vars is not None \
                    and _timed(node.context_expr, timed):
                timed |= _names(node.optional_vars)
            elif isinstance(node, ast.NamedExpr) and _timed(node.value, timed):
                timed |= _names(node.target)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in ADDS
                  and any(_timed(a, timed) for a in [*node.args,
                                                     *(k.value for k in node.keywords)])):
                timed |= _names(node.func.value)
        if len(timed) == before:
            return timed


def clock_claims(sources):
    """``(cell index, what)`` for every cell of ``sources`` (code, in order) that prints,
    displays or asserts a timed value, or times itself with a magic."""
    found, timed = [], set()
    for index, source in enumerate(sources):
        if MAGIC.search(source):
            found.append((index, "an IPython timing magic"))
        code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                         for line in source.splitlines())
        tree = ast.parse(code)
        _spread(tree, timed)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert) and _timed(node.test, timed):
                found.append((index, f"asserts a time: {ast.unparse(node.test)[:80]}"))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in SHOWS
                  and any(_timed(a, timed) for a in node.args)):
                found.append((index, f"shows a time: {ast.unparse(node)[:80]}"))
        if tree.body and isinstance(tree.body[-1], ast.Expr) and _timed(tree.body[-1].value,
                                                                          timed):
            last = tree.body[-1].value
            shown = isinstance(last, ast.Call) and isinstance(last.func, ast.Name) \
                and last.func.id in SHOWS  # already reported above
            if not shown and not (isinstance(last, ast.Call)
                                  and isinstance(last.func, ast.Attribute)):
                found.append((index, f"displays a time: {ast.unparse(last)[:80]}"))
    return found


def code_sources(path):
    nb = nbformat.read(path, as_version=4)
    return [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_cell_prints_displays_or_asserts_a_time(path):
    cells = code_sources(path)
    found = clock_claims([s for _, s in cells])
    assert not found, "; ".join(f"{path.name} cell {cells[i][0]}: {what}" for i, what in found)


# --- the check catches what it must, and lets the rest through -------------------------------

#: Notebook 09's cell before issue 32: it printed and asserted that time rose faster than n.
OLD_09 = """\
with threadpool_limits(limits=1, user_api="blas"):
    runs, _ = interleaved_times({int(n): partial(attention, *qkv) for n, qkv in zip(ns, inputs)},
                               rounds=15, pause=0.002)
secs = np.array([min(runs[int(n)]) for n in ns])
peaks = np.array([peak_memory(attention, *qkv) for qkv in inputs])
time_slope, memory_slope = loglog_slope(ns[2:], secs[2:]), loglog_slope(ns[2:], peaks[2:])
rises = bool(np.all(np.diff(secs) > 0))
print(f"memory grows close to n^2: {1.5 < memory_slope < 2.5}")
assert rises and time_slope > 1.3, "time should rise with n, faster than linearly"
"""
#: Notebook 08's cell before issue 32: it printed this machine's milliseconds.
OLD_08 = """\
times = {hh: np.inf for hh in (1, 2, 4, 8)}
for _ in range(7):
    for hh in times:
        t = min_time(multi_head_attention, x_t, *w_t, h=hh, repeat=1)
        times[hh] = min(times[hh], t)
for hh, t in times.items():
    print(f"h = {hh}: {1e3 * t:7.2f} ms")
"""


@pytest.mark.parametrize("sources, expected", [
    ([OLD_09], ["asserts a time"]),
    ([OLD_08], ["shows a time"]),
    (["import time\nstart = time.perf_counter()\n", "elapsed = time.perf_counter() - start\n",
      "elapsed"], ["displays a time"]),
    (["steps = []\nsteps.append(min_time(f, 3))\n", "display(max(steps))"], ["shows a time"]),
    (["%timeit f(3)"], ["an IPython timing magic"]),
], ids=["09-before", "08-before", "displayed", "appended", "magic"])
def test_the_check_finds_printed_asserted_and_displayed_times(sources, expected):
    found = clock_claims(sources)
    assert [what.split(":")[0] for _, what in found] == expected, found


def test_the_check_lets_plots_counts_and_bytes_through():
    sources = ["""\
runs, _ = interleaved_times({1: f}, rounds=3)
secs = [min(runs[1])]
flops = attention_flops(512, 64)["total"]
peak = peak_memory(attention, q, k, v)
print(f"{flops:,} FLOPs, {peak:,} bytes")
assert peak > 0
ax.plot([1], secs)
ax.set(title=f"fastest of {len(runs[1])} runs")
plt.show()
"""]
    assert clock_claims(sources) == []
