"""Explorers that move in the static edition, with no kernel: frames computed at build time.

For each explorer cell of a notebook, ``frames_for_cell`` builds the very explorer the cell
builds (it runs the notebook's code cells before it, magics left out, then evaluates the
cell), moves its main controls (``MAIN_CONTROLS``) through their positions and records, for
each position, the PNG the explorer shows and its read-outs. ``player_html`` turns that into
plain HTML range inputs (and checkboxes), an image and a read-out, moved by a small inline
script (``PLAYER_SCRIPT``, no network). Identical frames are stored once. Controls a learner
types into (numbers, a sentence) are not precomputed: the player says they need a kernel.

Used by tools/build_html.py; tested by tests/test_static_html.py.
"""

import ast
import base64
import contextlib
import hashlib
import html
import io
import json
import re
import warnings

import ipywidgets as W
import numpy as np
from PIL import Image

from attn_core.explorers.base import SCALE, without_clock
from attn_core.explorers.png import RAW_MAGIC, from_raw

# The controls moved at build time, in order; a control after another is enumerated for
# each position of those before it (its options may depend on them). ``WHEN`` limits a
# control to the positions where it matters (others keep their default).
MAIN_CONTROLS = {
    "worked_example_lab": ("matrix", "row", "col"),
    "scaling_explorer": ("d_k", "scaled"),
    "softmax_explorer": ("temperature",),
    "mask_explorer": ("kind", "apply", "n", "window"),
    "heads_explorer": ("d_model", "h"),
    "cost_explorer": ("n", "dtype"),
    "tiling_explorer": ("block", "causal", "step"),
    "model_explorer": ("layer", "head"),
    "training_explorer": ("scaled", "d_k", "step"),
    "gpt_explorer": ("layer", "head"),
    "positions_explorer": ("offset",),
    "kv_cache_explorer": ("n_kv_heads", "window"),
    "induction_explorer": ("ablation", "step"),
    "llm_explorer": ("layer",),
    "beyond_explorer": ("method", "n"),
    "recall_explorer": ("mixer", "pairs", "d_state"),
}
WHEN = {("mask_explorer", "window"): lambda now: now.get("kind") == "sliding window"}
MAX_POSITIONS = 25  # per control: a longer range is sampled evenly (ends kept)
TYPED = (W.Text, W.Textarea, W.FloatText, W.BoundedFloatText, W.IntText, W.BoundedIntText)
EXPLORER_CALL = re.compile(r"^\s*(\w+_explorer|worked_example_lab)\(", re.M)


def explorer_name(source):
    match = EXPLORER_CALL.search(source)
    return match[1] if match else None


def _display(*args, **kwargs):  # IPython's display(), a no-op at build time
    return None


def _code(cell):
    """A code cell's Python, its magics and shell lines left out."""
    return "\n".join(line for line in cell.source.splitlines()
                     if not line.lstrip().startswith(("%", "!")))


def _bare_call(source):
    """The function's name if ``source`` is one call with no arguments (``mask_explorer()``)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    if len(body) != 1 or not isinstance(body[0], ast.Expr):
        return None
    call = body[0].value
    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
            and not call.args and not call.keywords):
        return call.func.id
    return None


def _imports(source):
    """The names a cell binds with import statements."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {(a.asname or a.name).split(".")[0] for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}


def cells_to_run(nb):
    """Indices of the code cells that build ``nb``'s explorers, in order.

    Where every explorer cell is a call with no arguments (``mask_explorer()``: 12 of the
    course's 16), the explorers depend on nothing the notebook computes, only on the cells that
    import them (the setup cell, which also sets numpy's print options and the BLAS threads): those
    and the explorer cells. Otherwise every code cell up to the last explorer cell. (No other
    cell may set state that outlives it, such as print options: tests/test_static_explorers.py.)
    Shared by the static edition and the browser test (tests/test_browser.py).
    """
    wanted = [i for i, c in enumerate(nb.cells)
              if c.cell_type == "code" and explorer_name(c.source)]
    if not wanted:
        return []
    called = [_bare_call(_code(nb.cells[i])) for i in wanted]
    if any(name is None for name in called):
        return [i for i, c in enumerate(nb.cells[:wanted[-1] + 1]) if c.cell_type == "code"]
    setup = [i for i, c in enumerate(nb.cells[:wanted[0]])
             if c.cell_type == "code" and _imports(_code(c)) & set(called)]
    return sorted(set(setup) | set(wanted))


def build_explorers(nb):
    """{cell index: explorer} for every explorer cell of ``nb``, built as the notebook does
    (running the cells ``cells_to_run`` names)."""
    run = cells_to_run(nb)
    if not run:
        return {}
    ns = {"__name__": "__course_static__", "display": _display}
    built = {}
    sink = io.StringIO()
    # np.printoptions(): the notebooks' setup cells set numpy's print options, which must not
    # outlive the build (under pytest-xdist they reached attn_core's doctests in the same worker)
    with warnings.catch_warnings(), contextlib.redirect_stdout(sink), \
            contextlib.redirect_stderr(sink), np.printoptions():
        warnings.simplefilter("ignore")
        for i in run:
            cell = nb.cells[i]
            code = _code(cell)
            try:
                if explorer_name(cell.source):
                    built[i] = eval(compile(code.strip(), f"<cell {i}>", "eval"), ns)
                else:
                    exec(compile(code, f"<cell {i}>", "exec"), ns)
            except Exception:  # an exercise cell left unanswered, for example
                continue
    return built


def positions(control):
    """[(label, value), ...] a control can take (sampled to MAX_POSITIONS)."""
    if isinstance(control, (W.Checkbox, W.ToggleButton)):
        out = [("off", False), ("on", True)]
    elif hasattr(control, "_options_values"):
        out = list(zip(map(str, control._options_labels), control._options_values))
    elif isinstance(control, W.FloatLogSlider):
        n = int(round((control.max - control.min) / control.step)) + 1
        exps = [control.min + i * control.step for i in range(n)]
        out = [(f"{control.base ** e:.3g}", control.base ** e) for e in exps]
    elif isinstance(control, (W.IntSlider, W.FloatSlider)):
        n = int(round((control.max - control.min) / control.step)) + 1
        vals = [control.min + i * control.step for i in range(n)]
        out = [(str(v), v) for v in vals]
    else:
        return []
    if len(out) > MAX_POSITIONS:
        idx = sorted({round(i * (len(out) - 1) / (MAX_POSITIONS - 1))
                      for i in range(MAX_POSITIONS)})
        out = [out[i] for i in idx]
    return out


def label_of(control):
    for label, value in positions(control) or []:
        if value == control.value:
            return label
    if isinstance(control, W.FloatLogSlider):
        return f"{control.value:.3g}"
    return str(control.value)


def readouts(explorer):
    """The HTML of the explorer's read-outs (every HTML widget but its error box), each clock
    reading replaced by what the page says instead (``without_clock``)."""
    found = []

    def walk(widget):
        skip = (getattr(explorer, "error_box", None), getattr(explorer, "theme_style", None))
        if isinstance(widget, W.HTML) and all(widget is not w for w in skip):
            if widget.layout.display != "none":
                found.append(widget.value)
        for child in getattr(widget, "children", ()):
            walk(child)

    walk(explorer.widget)
    return without_clock("".join(found))  # a measured time is this machine's, now


def record_frames(name, explorer):
    """Move the main controls through their positions; return the player's data."""
    names = [n for n in MAIN_CONTROLS.get(name, ()) if n in explorer.controls]
    controls = [explorer.controls[n] for n in names]
    start = [c.value for c in controls]
    images, image_ids, texts, text_ids, frames = [], {}, [], {}, {}
    labels = {n: [] for n in names}

    def capture():
        png = compact_png(bytes(explorer.png))
        key = hashlib.sha256(png).hexdigest()
        if key not in image_ids:
            image_ids[key] = len(images)
            images.append(base64.b64encode(png).decode())
        text = readouts(explorer)
        if text not in text_ids:
            text_ids[text] = len(texts)
            texts.append(text)
        now = tuple(label_of(c) for c in controls)
        for n, lab in zip(names, now):
            if lab not in labels[n]:
                labels[n].append(lab)
        frames.setdefault(now, (image_ids[key], text_ids[text]))

    def walk(i, now):
        if i == len(names):
            capture()
            return
        control = controls[i]
        when = WHEN.get((name, names[i]))
        options = positions(control) if when is None or when(now) else []
        if not options:  # this control does not matter here: keep its starting value
            with contextlib.suppress(Exception):
                control.value = start[i]
            walk(i + 1, {**now, names[i]: control.value})
            return
        for _, value in options:
            control.value = value
            walk(i + 1, {**now, names[i]: value})

    walk(0, {})
    for control, value in zip(controls, start):
        control.value = value
    capture()  # the starting position, whatever the walk reached
    for n, c in zip(names, controls):  # positions in the controls' own order
        order = [lab for lab, _ in positions(c)]
        labels[n].sort(key=lambda lab: order.index(lab) if lab in order else len(order))
    default = tuple(label_of(c) for c in controls)
    typed = list(dict.fromkeys(re.sub(r"\[.*\]$", "", getattr(c, "description", n) or n)
                               for n, c in explorer.controls.items() if isinstance(c, TYPED)))
    return {
        "controls": [{"name": n, "description": getattr(c, "description", n) or n,
                      "labels": labels[n],
                      "check": isinstance(c, (W.Checkbox, W.ToggleButton))}
                     for n, c in zip(names, controls)],
        "frames": [[[labels[n].index(lab) for n, lab in zip(names, key)], img, txt]
                   for key, (img, txt) in frames.items()],
        "default": [labels[n].index(lab) for n, lab in zip(names, default)],
        "images": images, "readouts": texts, "typed": typed,
        # CSS widths: each frame is drawn at SCALE (2) device pixels per CSS pixel (HiDPI)
        "widths": [Image.open(io.BytesIO(base64.b64decode(b))).width // SCALE for b in images],
    }


def compact_png(frame):
    """The frame (a PNG, or raw pixels: ``raw_frames``) as a 256-colour palette PNG: about a
    third of the bytes of the RGB frame.

    The figures are flat colours and anti-aliased text, so the palette is not visible; it is
    what keeps the edition, with every frame drawn at twice its CSS size, under 50 MB.
    """
    if frame.startswith(RAW_MAGIC):
        image = Image.fromarray(from_raw(frame))  # (h, w, 3) uint8: RGB
    else:
        image = Image.open(io.BytesIO(frame)).convert("RGB")  # an opaque frame may be RGBA
    small = image.quantize(colors=256, method=Image.Quantize.FASTOCTREE,
                           dither=Image.Dither.NONE)
    out = io.BytesIO()
    small.save(out, format="PNG")
    return out.getvalue()


def _run_it(binder_url):
    """Where the live explorer runs: Binder when the course has a public address (a link),
    else a clone (no link)."""
    if not binder_url:
        return "run <code>make lab</code> in a clone of the course's repository"
    return (f'<a href="{html.escape(binder_url, quote=True)}">launch the course on Binder</a> '
            "or run <code>make lab</code>")


def player_html(data, number, binder_url):
    """The static player of one explorer: controls, image, read-out and notes."""
    first = next(f for f in data["frames"] if f[0] == data["default"])
    rows = []
    for j, control in enumerate(data["controls"]):
        i = data["default"][j]
        desc = html.escape(control["description"])
        if control["check"]:
            checked = " checked" if control["labels"][i] == "on" else ""
            rows.append(f'<label class="cse-control">{desc} <input type="checkbox" '
                        f'data-control="{j}"{checked}></label>')
        else:
            rows.append(
                f'<label class="cse-control">{desc} <input type="range" min="0" '
                f'max="{len(control["labels"]) - 1}" step="1" value="{i}" data-control="{j}">'
                f' <output>{html.escape(control["labels"][i])}</output></label>')
    typed = ""
    if data["typed"]:
        what = ", ".join(html.escape(t) for t in data["typed"])
        typed = f"<p>The typed inputs ({what}) need a running kernel: {_run_it(binder_url)}.</p>"
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return (
        f'<div class="course-static-explorer" data-player="{number}" '
        'style="border-left: 4px solid #1f6feb; padding: 0.4em 0.8em; margin: 0.4em 0;">'
        '<p style="margin: 0 0 0.4em 0"><strong>Explorer, precomputed:</strong> move the '
        "controls; each position shows a figure computed when this page was built (the live "
        f"explorer: {_run_it(binder_url)}).</p>"
        f'<div class="cse-controls" style="display:flex;flex-wrap:wrap;gap:0.4em 1.5em">'
        f'{"".join(rows)}</div>'
        f'<img class="cse-image" alt="The explorer at the chosen position" '
        f'src="data:image/png;base64,{data["images"][first[1]]}" '
        f'style="width:{data["widths"][first[1]]}px;max-width:100%">'
        f'<div class="cse-readout">{data["readouts"][first[2]]}</div>{typed}'
        f'<script type="application/json" class="cse-data">{payload}</script></div>')


# One script per page: moves every player. A position that was not computed (a window wider
# than n, say) snaps the other controls to the nearest computed frame.
PLAYER_SCRIPT = """<script>
(function () {
  document.querySelectorAll(".course-static-explorer").forEach(function (root) {
    var data = JSON.parse(root.querySelector(".cse-data").textContent);
    var inputs = root.querySelectorAll("[data-control]");
    var img = root.querySelector(".cse-image"), readout = root.querySelector(".cse-readout");
    var now = data["default"].slice();
    function show(changed) {
      var best = null, bestCost = Infinity;
      data.frames.forEach(function (f) {
        if (changed !== null && f[0][changed] !== now[changed]) return;
        var cost = 0;
        for (var j = 0; j < now.length; j++) cost += Math.abs(f[0][j] - now[j]);
        if (cost < bestCost) { best = f; bestCost = cost; }
      });
      if (!best) return;
      now = best[0].slice();
      inputs.forEach(function (input) {
        var j = +input.dataset.control, c = data.controls[j];
        if (input.type === "checkbox") { input.checked = c.labels[now[j]] === "on"; }
        else {
          input.value = now[j];
          input.parentNode.querySelector("output").textContent = c.labels[now[j]];
        }
      });
      img.src = "data:image/png;base64," + data.images[best[1]];
      img.style.width = data.widths[best[1]] + "px";
      img.alt = "The explorer at " + data.controls.map(function (c, j) {
        return c.description + " = " + c.labels[now[j]]; }).join(", ");
      readout.innerHTML = data.readouts[best[2]];
    }
    inputs.forEach(function (input) {
      input.addEventListener("input", function () {
        var j = +input.dataset.control, c = data.controls[j];
        now[j] = input.type === "checkbox" ? c.labels.indexOf(input.checked ? "on" : "off")
                                           : +input.value;
        show(j);
      });
    });
  });
})();
</script>"""
