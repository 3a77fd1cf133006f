"""Slider latency of the explorers: from a control's change to the PNG the learner gets.

For every explorer and every control, the control is set 20 times (cycling through its
range, starting right after the explorer is built, so first visits are included) from
Python, exactly as a message from the browser would set it; the time until
the setter returns is the time until the new PNG bytes are on the Image widget (updates
are synchronous). Beside it: the naive redraw of the same figure, a full draw and
``savefig(bbox_inches="tight")`` as the inline backend does on every change (a lower
bound: the inline backend also rebuilds the figure). Goal: median <= 50 ms. The column
"image ms" is the time until the new PNG is on the Image widget, when an explorer sends its
figure before it finishes (the GPT explorer sends the bars and the map, then draws its
200-character sample): what the learner waits for before the figure changes. The column
"CPU ms" is the process's CPU time for the change (``time.process_time``): on a busy machine
the wall time waits for other processes, the CPU time much less (compare two trees by CPU
time, their runs interleaved, and state the load).

Run: ``MPLBACKEND=Agg .venv/bin/python benchmarks/bench_explorers.py`` (or ``make bench``).
It prints a table; it is not a timed test. With ``--record`` (and no ``--only``) the table of
every explorer is written into ``benchmarks/RESULTS.md`` as the block ``explorer-latency``,
with the load average and the commit.
"""

import argparse
import datetime
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ipywidgets as W  # noqa: E402
import numpy as np  # noqa: E402

from attn_core import explorers  # noqa: E402

CHANGES = 20
NAIVE_REPEAT = 3
GOAL_MS = 50.0
#: New sentences for the model explorer (12 word pieces each, never seen before): each
#: one is a forward pass of the real model plus a full draw of the new labels.
ANIMALS = ("dog", "cat", "horse", "cow", "goat", "sheep", "fox", "wolf", "bear", "deer",
           "duck", "goose", "mouse", "rabbit", "tiger", "lion", "camel", "zebra", "pig", "owl")
NEW_SENTENCES = [f"The {a} crossed the road because it was tired." for a in ANIMALS]
#: New prompts for the GPT explorer (characters of its vocabulary, never seen before).
WORDS = ("list", "module", "class", "string", "object", "method", "value", "file", "loop",
         "thread", "socket", "error", "number", "option", "function", "tuple", "key", "line",
         "type", "name")
NEW_PROMPTS = [f"The {w} is " for w in WORDS]
#: Goals other than GOAL_MS: a new sentence may take a forward pass and a full draw; the GPT
#: explorer's temperature and top-k draw a new 200-character sample, a new prompt reads it and
#: redraws the map's labels too (issue 47: <= 200 and <= 300 ms on a quiet machine).
GOALS_MS = {"model_explorer (new sentence)": 500.0, "gpt_explorer (new sample)": 200.0,
            "gpt_explorer (new prompt)": 300.0}


def sweep(widget, count=CHANGES):
    """``count`` values for a control, cycling through its range, never the current one."""
    if isinstance(widget, W.Button):  # clicked count times
        return list(range(count))
    if isinstance(widget, (W.Checkbox, W.ToggleButton)):
        return [not widget.value if k % 2 == 0 else widget.value for k in range(count)]
    if isinstance(widget, (W.Dropdown, W.SelectionSlider, W.ToggleButtons)):
        values = [o[1] if isinstance(o, tuple) else o for o in widget.options]
        start = values.index(widget.value)
        return [values[(start + 1 + k) % len(values)] for k in range(count)]
    if isinstance(widget, W.IntSlider):
        span = list(range(widget.min, widget.max + 1))
        start = span.index(widget.value)
        return [span[(start + 1 + k) % len(span)] for k in range(count)]
    if isinstance(widget, W.FloatSlider):
        n = int(round((widget.max - widget.min) / widget.step)) + 1
        span = [round(widget.min + i * widget.step, 10) for i in range(n)]
        start = min(range(n), key=lambda i: abs(span[i] - widget.value))
        return [span[(start + 1 + k) % n] for k in range(count)]
    if isinstance(widget, W.FloatLogSlider):
        exps = np.linspace(widget.min, widget.max, count)
        return [float(widget.base ** e) for e in exps]
    if isinstance(widget, (W.BoundedFloatText, W.FloatText)):
        return [round(float(widget.value) + 0.1 * (k + 1) * (-1) ** k, 3) for k in range(count)]
    raise TypeError(f"no sweep for {type(widget).__name__}")


def setups(only=""):
    """(name, explorer, {label: control widget, or (control widget, values to set)}); only the
    explorers whose name contains ``only`` are built (the real-model ones take seconds and a
    gigabyte)."""
    if only in "worked_example_lab":
        lab = explorers.worked_example_lab()
        c = lab.controls
        yield "worked_example_lab", lab, {
            "Q[0,0]": c["Q[0,0]"], "V[2,1]": c["V[2,1]"], "matrix": c["matrix"], "row": c["row"],
            "col": c["col"],
        }
    if only in "scaling_explorer":
        ex = explorers.scaling_explorer()
        yield "scaling_explorer", ex, {"d_k": ex.controls["d_k"], "scaled": ex.controls["scaled"]}
    if only in "softmax_explorer":
        ex = explorers.softmax_explorer()
        yield "softmax_explorer", ex, {"score 0": ex.controls["score 0"],
                                       "temperature": ex.controls["temperature"]}
    if only in "mask_explorer":
        ex = explorers.mask_explorer()
        c = ex.controls
        controls = {"n": c["n"], "kind": c["kind"], "apply": c["apply"]}
        yield "mask_explorer", ex, controls
        c["n"].value = 10
        c["kind"].value = "padding"
        yield "mask_explorer", ex, {"length": c["length"]}
        c["kind"].value = "sliding window"
        yield "mask_explorer", ex, {"window": c["window"]}
        c["kind"].value = "custom"
        yield "mask_explorer", ex, {"custom[4,2]": ex.cell_buttons[4, 2]}
    if only in "heads_explorer":
        ex = explorers.heads_explorer()
        yield "heads_explorer", ex, {"h": ex.controls["h"], "d_model": ex.controls["d_model"]}
    if only in "cost_explorer":
        ex = explorers.cost_explorer()
        yield "cost_explorer", ex, {"n": ex.controls["n"], "dtype": ex.controls["dtype"]}
    if only in "tiling_explorer":
        ex = explorers.tiling_explorer()
        yield "tiling_explorer", ex, {"step": ex.controls["step"], "block": ex.controls["block"],
                                      "causal": ex.controls["causal"]}
    if only in "training_explorer":
        ex = explorers.training_explorer()
        yield "training_explorer", ex, {"step": ex.controls["step"], "d_k": ex.controls["d_k"],
                                        "scaled": ex.controls["scaled"]}
    if only in "model_explorer (new sentence)":
        ex = explorers.model_explorer()
        c = ex.controls
        yield "model_explorer", ex, {"layer": c["layer"], "head": c["head"], "query": c["query"]}
        # A new sentence runs the model and draws new labels: timed apart, not in the goal.
        yield "model_explorer (new sentence)", ex, {"sentence": (c["sentence"], NEW_SENTENCES)}
    if only in "gpt_explorer (new sample) (new prompt)":
        ex = explorers.gpt_explorer()
        c = ex.controls
        yield "gpt_explorer", ex, {"layer": c["layer"], "head": c["head"]}
        # Temperature and top-k sample 200 new characters through the KV cache: timed apart.
        yield "gpt_explorer (new sample)", ex, {"temperature": c["temperature"],
                                                "top_k": c["top_k"], "again": c["resample"]}
        yield "gpt_explorer (new prompt)", ex, {"prompt": (c["prompt"], NEW_PROMPTS)}
    if only in "positions_explorer":
        ex = explorers.positions_explorer()
        c = ex.controls
        yield "positions_explorer", ex, {"offset": c["offset"], "query": c["query"],
                                         "pair": c["pair"], "base": c["base"]}
    if only in "kv_cache_explorer":
        ex = explorers.kv_cache_explorer()
        c = ex.controls
        yield "kv_cache_explorer", ex, {name: c[name] for name in
                                        ("n_heads", "n_kv_heads", "window", "n_sink", "n_ctx")}
    if only in "induction_explorer":
        ex = explorers.induction_explorer()
        yield "induction_explorer", ex, {"step": ex.controls["step"],
                                         "ablation": ex.controls["ablation"]}
    if only in "llm_explorer":
        ex = explorers.llm_explorer(background=False)  # a new question decodes: not timed here
        yield "llm_explorer", ex, {name: ex.controls[name] for name in
                                   ("layer", "head", "window", "sinks")}
    if only in "beyond_explorer":
        ex = explorers.beyond_explorer()
        yield "beyond_explorer", ex, {name: ex.controls[name] for name in ("method", "n", "size")}
    if only in "recall_explorer":
        ex = explorers.recall_explorer()
        yield "recall_explorer", ex, {name: ex.controls[name] for name in
                                      ("mixer", "pairs", "d_state")}


def time_control(explorer, widget):
    """Set the control to each value of its sweep (or of the ``(widget, values)`` given)."""
    widget, values = widget if isinstance(widget, tuple) else (widget, sweep(widget))
    times, to_image, cpu, seen = [], [], [], []
    watch = explorer.image.observe(lambda change: seen.append(time.perf_counter()),
                                   names="value")
    try:
        for value in values:
            seen.clear()
            start, start_cpu = time.perf_counter(), time.process_time()
            if isinstance(widget, W.Button):
                widget.click()
            else:
                widget.value = value
            end = time.perf_counter()
            cpu.append(time.process_time() - start_cpu)
            times.append(end - start)
            to_image.append((seen[0] if seen else end) - start)
            assert explorer.errors == [], explorer.errors
    finally:
        explorer.image.unobserve(watch, names="value")
    return np.array(times) * 1e3, np.array(to_image) * 1e3, np.array(cpu) * 1e3


def naive_ms(explorer):
    times = []
    for _ in range(NAIVE_REPEAT):
        start = time.perf_counter()
        explorer.naive_png()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def unfiltered_rgb_png(rgba, level):
    """The explorers' PNG writer until issue 47 (the peer of ``png_table``): every row
    unfiltered, the fourth byte of each pixel dropped (RGB)."""
    import struct
    import zlib

    from attn_core.explorers.png import _SIGNATURE, _chunk

    height, width = rgba.shape[:2]
    rows = np.empty((height, 1 + 3 * width), dtype=np.uint8)
    rows[:, 0] = 0
    rows[:, 1:].reshape(height, width, 3)[...] = rgba[:, :, :3]
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (_SIGNATURE + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(rows.data, level)) + _chunk(b"IEND", b""))


def png_table(setups_, only, repeat=10):
    """Each explorer's first frame encoded by the course's writer (attn_core.explorers.png),
    by its writer until issue 47 (rows unfiltered, RGB) and by Pillow at the same zlib level
    (the explorers' encoder until issue 31), interleaved in one run: median CPU ms (process
    time: the machine may be busy), kB, and each peer / ours."""
    import io

    from PIL import Image

    from attn_core.explorers.png import ZLIB_LEVEL, rgb_png

    print(f"{'explorer (first frame)':<29} {'pixels':>10} {'ours ms':>8} {'old/ours':>8} "
          f"{'Pillow/ours':>11} {'ours kB':>8} {'old kB':>7} {'Pillow kB':>9}")
    seen = set()
    for name, explorer, _ in setups_:
        if only not in name or name in seen:
            continue
        seen.add(name)
        rgba = np.asarray(explorer.canvas.figure.canvas.buffer_rgba())
        h, w = rgba.shape[:2]

        def pillow(rgba=rgba, w=w, h=h):
            out = io.BytesIO()
            Image.frombytes("RGB", (w, h), rgba, "raw", "RGBX").save(
                out, format="PNG", compress_level=ZLIB_LEVEL, optimize=False)
            return out.getvalue()

        encoders = {"ours": lambda rgba=rgba: rgb_png(rgba),
                    "old": lambda rgba=rgba: unfiltered_rgb_png(rgba, ZLIB_LEVEL),
                    "pillow": pillow}
        times = {label: [] for label in encoders}
        for _ in range(repeat):  # interleaved: a burst of load falls on every writer
            for label, encode in encoders.items():
                start = time.process_time()
                encode()
                times[label].append(time.process_time() - start)
        ms = {label: float(np.median(t)) * 1e3 for label, t in times.items()}
        kb = {label: len(encode()) / 1e3 for label, encode in encoders.items()}
        print(f"{name:<29} {w * h:>10,} {ms['ours']:8.1f} {ms['old'] / ms['ours']:7.2f}x "
              f"{ms['pillow'] / ms['ours']:10.2f}x {kb['ours']:8.0f} {kb['old']:7.0f} "
              f"{kb['pillow']:9.0f}")


def load_average():
    """The 1, 5 and 15 minute load averages (a loaded machine makes every number larger)."""
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def record_block(per_explorer, image_ms, load_start):
    """The lines of RESULTS.md's block ``explorer-latency``: per explorer, the median and p95
    of every change's wall time, the median time to the new image and CPU time, the goal."""
    root = Path(__file__).resolve().parents[1]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                            capture_output=True, text=True).stdout.strip() or "unknown"
    lines = ["## Explorer latency, Python side (benchmarks/bench_explorers.py)", "",
             f"{datetime.date.today().isoformat()}, commit {commit}; load average (1, 5, 15 min) "
             f"{load_start} at the start, {load_average()} at the end, on {os.cpu_count()} "
             f"cores. {CHANGES} changes of each control, set from Python as a message from the "
             "page would set it, until the setter returns (both themes' frames made); a "
             "report, not asserted.", "",
             "| explorer (all controls) | median ms | p95 ms | to the new image ms | CPU ms | "
             "goal (median) |", "|---|---|---|---|---|---|"]
    for name, parts in per_explorer.items():
        ms = np.concatenate([wall for wall, _ in parts])
        cpu_ms = np.concatenate([cpu for _, cpu in parts])
        med, goal = float(np.median(ms)), GOALS_MS.get(name, GOAL_MS)
        lines.append(f"| {name} | {med:.0f} | {np.percentile(ms, 95):.0f} | "
                     f"{np.median(np.concatenate(image_ms[name])):.0f} | "
                     f"{np.median(cpu_ms):.0f} | <= {goal:.0f}"
                     f"{'' if med <= goal else ' (missed)'} |")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", metavar="TEXT", default="",
                        help="time only the explorers whose name contains TEXT "
                             "(e.g. --only model)")
    parser.add_argument("--png", action="store_true",
                        help="only the PNG encoders: the course's against Pillow's")
    parser.add_argument("--record", action="store_true",
                        help="write the table into benchmarks/RESULTS.md (every explorer only)")
    args = parser.parse_args()
    load_start = load_average()
    print(f"load average at start: {load_start} ({os.cpu_count()} cores)")
    if args.png:
        png_table(setups(args.only), args.only)
        print(f"load average at end: {load_average()}")
        return
    rows = []
    per_explorer, to_image = {}, {}
    naive = {}
    for name, explorer, controls in setups(args.only):
        if args.only not in name:
            continue
        for label, widget in controls.items():
            ms, image_ms, cpu_ms = time_control(explorer, widget)
            per_explorer.setdefault(name, []).append((ms, cpu_ms))
            to_image.setdefault(name, []).append(image_ms)
            rows.append((name, label, ms, image_ms, cpu_ms))
        if name not in naive:
            naive[name] = naive_ms(explorer)
    print(f"{'explorer':<29} {'control':<12} {'median ms':>9} {'p95 ms':>8} {'naive ms':>9} "
          f"{'naive/median':>12} {'image ms':>9} {'CPU ms':>7}")
    for name, label, ms, image_ms, cpu_ms in rows:
        med = float(np.median(ms))
        print(f"{name:<29} {label:<12} {med:9.1f} {np.percentile(ms, 95):8.1f} "
              f"{naive[name]:9.1f} {naive[name] / med:11.1f}x {np.median(image_ms):9.1f} "
              f"{np.median(cpu_ms):7.1f}")
    print()
    print(f"{'explorer (all controls)':<33} {'median ms':>9} {'p95 ms':>8} {'naive ms':>9} "
          f"{'naive/median':>12} {'CPU ms':>7}  goal <= {GOAL_MS:.0f} ms")
    for name, parts in per_explorer.items():
        ms = np.concatenate([wall for wall, _ in parts])
        cpu_ms = np.concatenate([cpu for _, cpu in parts])
        med = float(np.median(ms))
        goal = GOALS_MS.get(name, GOAL_MS)
        verdict = "ok" if med <= goal else "ABOVE GOAL"
        verdict += f" (goal <= {goal:.0f} ms)" if goal != GOAL_MS else ""
        print(f"{name:<33} {med:9.1f} {np.percentile(ms, 95):8.1f} {naive[name]:9.1f} "
              f"{naive[name] / med:11.1f}x {np.median(cpu_ms):7.1f}  {verdict}")
    print(f"load average at end: {load_average()}")
    if args.record and not args.only:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _results import write_block

        write_block(Path(__file__).resolve().parent / "RESULTS.md", "explorer-latency",
                    record_block(per_explorer, to_image, load_start))


if __name__ == "__main__":
    main()
