"""Every notebook in JupyterLab, in a real (headless) browser, as a learner runs it.

ONE JupyterLab server and ONE browser page serve every test of the session (session-scoped
fixtures; the browser comes from tests/conftest.py). The server runs on 127.0.0.1, on a free
port, with a token,
fresh Jupyter config/runtime/data folders and settings (every cell in the page; the "Jupyter
news" pop-up is left to the settings the environment ships for learners, and a test checks
that a first session never shows it), over a temporary copy of notebooks/ (the repository's
notebooks are never changed). Playwright for Python drives Debian's Chromium:

* each notebook is opened and its stored outputs rendered; a notebook with an explorer then
  runs the cells that build its explorers (``cells_to_run`` of tools/static_explorers.py,
  the static edition's rule: where every explorer cell is a call with no argument, the cell
  that imports it and the explorer cells; otherwise every cell up to the last explorer cell,
  none after it), each selected and run as with Shift+Enter, and must end with the kernel
  idle (status bar ``Python 3 (ipykernel) | Idle``), those cells run, no error output, and
  every widget rendered ("Error
  displaying widget" or "Loading widget..." fail it). Every cell of every notebook is run by
  nbval (with the outputs compared to the ones stored, which are rendered here), so the page
  needs a live kernel only for the widgets; a notebook without an explorer has none (no
  error output, every output rendered, no widget);
* with BROWSER_SCREENSHOTS=1 (`make screenshots`), a screenshot of the whole notebook is
  saved in artifacts/screenshots/ for a person to look at;
* every explorer listed in ``EXPLORERS`` (the table to extend when a notebook gains an
  explorer; a test checks that no explorer call in a notebook is missing from it) has its
  main controls moved with the keyboard (slider handle focused, arrow keys), ``PRESSES``
  times each: after every key press the slider's read-out and the figure (the image's
  ``src``) must change. The time from the key press to the new image decoded in the page is
  collected, and a table of median and slowest press per control is printed at the end of the
  session (a benchmark, not asserted; goal: median <= 100 ms). Where an explorer names a
  sentence, it is typed into the explorer's text box and Enter pressed: the figure must
  change and the query menu list the new word pieces (goal 300 ms);
* each explorer is photographed in JupyterLab's light theme in a 1280 px window and in its
  dark theme in a 1920 px one: artifacts/screenshots/NOTEBOOK--EXPLORER--light--1280.png and
  ...--dark--1920.png.

Skipped without Playwright or Chromium (see tests/conftest.py); a failure under CI=true.
"""

import contextlib
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import nbformat
import numpy as np
import pytest
from conftest import SCREENSHOTS

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("course_static_explorers",
                                               ROOT / "tools" / "static_explorers.py")
static_explorers = importlib.util.module_from_spec(_spec)  # cells_to_run: what builds an explorer
_spec.loader.exec_module(static_explorers)
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IDLE = "Python 3 (ipykernel) | Idle"


@dataclass(frozen=True)
class Explorer:
    """One explorer in a notebook's Try-it cell, and how a learner drives it.

    ``call`` is how its cell calls it (the text that finds the cell); ``sliders`` are the
    main controls, by the start of their label, moved in turn with the arrow keys;
    ``sentence``, if given, is typed into its text box and Enter pressed.
    """

    call: str
    sliders: tuple
    sentence: str = None

    @property
    def name(self):
        return self.call.split("(")[0]


#: notebook -> its explorers. Add a row when a notebook gains an explorer (a test fails
#: until every ``*_explorer(`` call in a notebook's code is listed here).
EXPLORERS = {
    "04-scaling.ipynb": [Explorer("scaling_explorer()", ("d_k",))],
    "05-softmax.ipynb": [Explorer("softmax_explorer()", ("temperature",))],
    "07-causal-masking.ipynb": [Explorer("mask_explorer()", ("sequence length n",))],
    "08-multi-head.ipynb": [Explorer("heads_explorer()", ("heads h",))],
    "08b-positions.ipynb": [Explorer("positions_explorer()", ("offset k = m - n",
                                                              "feature pair c"))],
    "09-cost.ipynb": [Explorer("cost_explorer()", ("sequence length n",)),
                      Explorer("tiling_explorer()", ("tile step",))],
    "11-a-real-model.ipynb": [Explorer(
        "model_explorer(", ("layer", "head"),
        sentence="The trophy did not fit in the suitcase because it was too big.")],
    "12-learning-attention.ipynb": [Explorer("training_explorer(", ("training step",))],
    "14-a-tiny-gpt.ipynb": [Explorer("gpt_explorer(", ("layer", "head", "temperature",
                                                       "top-k"),
                                     sentence="The function ")],
    "15-induction-heads.ipynb": [Explorer("induction_explorer(", ("training step",
                                                                  "ablation"))],
    "16-todays-attention.ipynb": [Explorer("kv_cache_explorer()", ("window", "key/value heads"))],
    "17-a-real-llm.ipynb": [Explorer("llm_explorer(", ("layer", "head"))],
    "18-beyond-quadratic.ipynb": [Explorer("beyond_explorer()", ("sequence length n",
                                                                 "window / stride / block"))],
    "19-gates-and-deltas.ipynb": [Explorer("recall_explorer()", ("key-value pairs",
                                                                 "d_k = d_v"))],
}
#: Key presses per slider (alternating direction at the ends): a median and a slowest press.
PRESSES = 3
LATENCY_GOAL_MS = 100  # ms: issue 31, the course's goal for a slider in the page
SENTENCE_GOAL_MS = 300
THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}
ERROR_VIEWPORT_HEIGHT = 800  # px: a laptop's browser window
NEWS_WAIT_MS = 8000  # JupyterLab asks about the news a few seconds after it starts
#: Photographs of every whole notebook (artifacts/screenshots/NOTEBOOK.png), for a person to
#: look at: `make screenshots` (BROWSER_SCREENSHOTS=1). Not in make test: nothing is asserted
#: on them, and they were a sixth of this file's time (the explorers' photographs, which carry
#: checks, are always taken).
WHOLE_NOTEBOOK_SHOTS = os.environ.get("BROWSER_SCREENSHOTS", "") == "1"

SERVER_START_TIMEOUT = 120  # s
PAGE_TIMEOUT = 120_000  # ms: opening JupyterLab, a kernel start
RUN_TIMEOUT = 300_000  # ms: the cells before an explorer (a model load) on a busy machine
UPDATE_TIMEOUT = 30_000  # ms: one explorer update

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Lab settings for the test user: all cells in the DOM (JupyterLab may otherwise leave cells
# out of the page until they are scrolled to), no autosave. The news pop-up is NOT turned off
# here: the environment's shipped settings (tools/lab_settings.py) must do it, as for a learner.
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
}


# --- the server ------------------------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A JupyterLab server over a copy of notebooks/, stopped by :meth:`stop`."""

    def __init__(self, base):
        self.base = base
        self.root = base / "root"
        shutil.copytree(ROOT / "notebooks", self.root / "notebooks")
        settings = base / "user-settings"
        for rel, value in SETTINGS.items():
            path = settings / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value))
        self.port = free_port()
        self.token = uuid.uuid4().hex
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR",
                     "IPYTHONDIR"):
            env[name] = str(base / name.lower())
        env.pop("JUPYTER_PATH", None)
        env.pop("MPLBACKEND", None)  # as a learner has it; the notebooks say %matplotlib inline
        args = [sys.executable, "-m", "jupyterlab", "--no-browser",
                "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
                "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={self.root}", "--LabApp.expose_app_in_browser=True",
                f"--LabApp.user_settings_dir={settings}",
                f"--LabApp.workspaces_dir={base / 'workspaces'}",
                "--ServerApp.terminals_enabled=False"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--allow-root")
        self.log = open(base / "jupyterlab.log", "wb")
        self.proc = subprocess.Popen(args, cwd=self.root, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._wait_ready()

    def api(self, path, method="GET", body=None):
        req = urllib.request.Request(f"{self.url}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"token {self.token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def _wait_ready(self):
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                self.api("/api/status")
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        self.stop()
        pytest.fail("JupyterLab did not start:\n" + self.log_tail(), pytrace=False)

    def log_tail(self, n=4000):
        if not self.log.closed:
            self.log.flush()
        return (self.base / "jupyterlab.log").read_bytes()[-n:].decode(errors="replace")

    def start_kernel(self, name):
        """Start notebooks/NAME's kernel ahead of time (a session for its path, as JupyterLab
        makes one); opening the notebook then attaches to it instead of waiting for a new
        kernel. The kernel starts while the previous notebook runs."""
        path = f"notebooks/{name}"
        if not any(s["path"] == path for s in self.api("/api/sessions")):
            self.api("/api/sessions", method="POST", body={
                "path": path, "name": name, "type": "notebook", "kernel": {"name": "python3"}})

    def shutdown_kernels(self, name=None):
        """Stop the kernel of notebooks/NAME (every kernel if None)."""
        for session in self.api("/api/sessions"):
            if name is None or session["path"] == f"notebooks/{name}":
                self.api(f"/api/sessions/{session['id']}", method="DELETE")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.log.close()


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    server = Lab(tmp_path_factory.mktemp("jupyterlab"))
    yield server
    server.stop()


def report(config, text):
    """Print past pytest's output capture (on the terminal, also without -s)."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    if capture is None:
        print(text)
        return
    with capture.global_and_fixture_disabled():
        print(text)


def latency_table(samples):
    """Lines of a table: control, presses, median and slowest key press -> new image (ms)."""
    width = max([len(k) for k in samples] + [30])
    lines = [f"  {'explorer: control':<{width}}  presses  median ms  max ms  goal"]
    for name, ms in samples.items():
        goal = SENTENCE_GOAL_MS if "sentence" in name else LATENCY_GOAL_MS
        med, slowest = np.median(ms), np.max(ms)
        lines.append(f"  {name:<{width}}  {len(ms):>7}  {med:>9.0f}  {slowest:>6.0f}  "
                     f"median <= {goal}{'' if med <= goal else ' (missed)'}")
    return lines


#: Where the session's latencies are written as JSON when set (benchmarks/bench_browser.py sets
#: it and turns the record into a table of benchmarks/RESULTS.md): a report, never asserted.
LATENCY_RECORD = os.environ.get("BROWSER_LATENCY_RECORD", "")


def write_latency_record(path, samples, load_start, load_end, split=None):
    """The key-press -> new-image samples (ms, per control) as JSON, with the load average
    (1, 5, 15 min) at the session's start and end, and where each press's time went
    (``split_of``, per control)."""
    record = {"samples": {k: [float(x) for x in v] for k, v in samples.items()},
              "load_start": list(load_start), "load_end": list(load_end),
              "split": split or {}}
    Path(path).write_text(json.dumps(record, indent=1) + "\n")


@pytest.fixture(scope="session")
def latencies(request):
    """Key press -> new image, in ms, per control, collected over the session; a table of
    median and slowest press is printed at its end (a benchmark, not asserted), and written
    to ``BROWSER_LATENCY_RECORD`` when that is set."""
    found = {"_phases": {}, "_split": {}}
    start, load_start = time.monotonic(), os.getloadavg()
    yield found
    phases, split = found.pop("_phases"), found.pop("_split")
    if LATENCY_RECORD:
        write_latency_record(LATENCY_RECORD, found, load_start, os.getloadavg(), split)
    steps = [f"  {nb}: " + ", ".join(f"{k} {v:.1f} s" for k, v in t.items())
             for nb, t in phases.items()]
    report(request.config,
           f"\n[browser] notebooks in JupyterLab: {time.monotonic() - start:.0f} s\n"
           + "\n".join(steps)
           + "\n[browser] explorer latency, key press to new image decoded in the page:\n"
           + "\n".join(latency_table(found) if found else ["  (no explorer was run)"]))


# --- one notebook ------------------------------------------------------------------------------

# JavaScript run in the page (JupyterLab exposes itself as window.jupyterapp).
JS_STATE = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = panel.content.model.cells;
  const out = {code: 0, unrun: 0, errors: [], running: 0, counts: []};
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    out.counts.push(cell.type === 'code' ? (cell.executionCount || 0) : 0);
    if (cell.type !== 'code') continue;
    out.code += 1;
    if (!cell.executionCount) out.unrun += 1;
    for (const o of cell.toJSON().outputs || []) {
      if (o.output_type === 'error') out.errors.push(`cell ${i + 1}: ${o.ename}: ${o.evalue}`);
    }
  }
  out.running = document.querySelectorAll('.jp-InputArea-prompt').length
    ? [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
        .filter(p => p.textContent.includes('*')).length
    : 0;
  out.kernel = panel.sessionContext.session?.kernel?.status;
  return out;
}"""

JS_WIDGETS = """() => {
  const text = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)').innerText;
  const views = [...document.querySelectorAll(
    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output')]
    .filter(o => o.getAttribute('data-mime-type') ===
      'application/vnd.jupyter.widget-view+json');
  const images = [...document.querySelectorAll(
    '.jp-NotebookPanel:not(.lm-mod-hidden) img.widget-image')];
  return {
    errors: (text.match(/Error displaying widget[^\\n]*/g) || []),
    loading: (text.match(/Loading widget[^\\n]*/g) || []),
    views: views.length,
    empty_views: views.filter(v => !v.querySelector('.jupyter-widgets')).length,
    images: images.length,
    blank_images: images.filter(i => !i.complete || i.naturalWidth === 0).length,
  };
}"""


@pytest.fixture(scope="session")
def lab_page(lab, browser):
    """One browser page with JupyterLab loaded once (a full load takes 15 s or more on a
    busy machine); each test opens its notebook in it and closes it afterwards."""
    lab.start_kernel(NOTEBOOKS[0].name)  # starts while the page loads
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT)
    page = context.new_page()
    page.goto(f"{lab.url}/lab/workspaces/browser-test?reset&token={lab.token}",
              timeout=PAGE_TIMEOUT)
    page.wait_for_function("window.jupyterapp && window.jupyterapp.shell"
                           " && document.querySelector('.jp-LabShell')", timeout=PAGE_TIMEOUT)
    page.locator(".jp-StatusBar-Widget").first.wait_for(timeout=PAGE_TIMEOUT)
    page.loaded_at = time.monotonic()  # for the news check (test_a_first_session_...)
    yield page
    context.close()


def open_notebook(page, name):
    """Open notebooks/NAME as a learner would (File Browser or File > Open), await its kernel."""
    # Returns nothing: the command's result (the notebook widget) would be serialised back to
    # Python, a walk through the whole widget tree that took 3 s per notebook.
    page.evaluate("async (path) => { await window.jupyterapp.commands.execute("
                  "'docmanager:open', {path}); }", f"notebooks/{name}")
    page.wait_for_function(
        """(name) => { const w = window.jupyterapp.shell.currentWidget;
             return w && w.context && w.context.path.endsWith(name)
               && w.node.querySelector('.jp-Cell'); }""", arg=name, timeout=PAGE_TIMEOUT)
    kernel_idle(page, PAGE_TIMEOUT)


def kernel_idle(page, timeout):
    """Wait until the status bar reads ``IDLE``, as a learner sees it. Looked for in the status
    bar only: a text search of the whole page reads every cell's text on every poll (a third
    of Chromium's CPU while a notebook opened)."""
    page.locator(".jp-StatusBar-Widget").get_by_text(IDLE, exact=True).wait_for(timeout=timeout)


# Close every open notebook without saving (the copy is thrown away anyway).
JS_CLOSE_ALL = """() => {
  for (const w of [...window.jupyterapp.shell.widgets('main')]) {
    if (w.context && w.context.model) w.context.model.dirty = false;
    w.dispose();
  }
}"""


JS_RUN_CELL = """async (i) => {
  const panel = window.jupyterapp.shell.currentWidget;
  panel.content.activeCellIndex = i;
  panel.content.deselectAll();
  await window.jupyterapp.commands.execute('notebook:run-cell');
  return panel.content.model.cells.get(i).executionCount;
}"""


def run_cells(page, indices):
    """Run the cells ``indices`` (0-based), one after the other, as Shift+Enter on each would
    (without moving on); each must get an execution count."""
    for i in indices:
        count = page.evaluate(JS_RUN_CELL, i)
        assert count, f"cell {i + 1} did not run"
    kernel_idle(page, RUN_TIMEOUT)


# The stored execution counts are those of a run from the top: cleared first, so that a count
# after the run proves the cell ran in this page.
JS_CLEAR_COUNTS = """() => {
  const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
  for (let i = 0; i < cells.length; i++) {
    if (cells.get(i).type === 'code') cells.get(i).executionCount = null;
  }
}"""


def run_explorer_cells(page, notebook):
    """Run what builds the notebook's explorers (``cells_to_run``); the cells run, 0-based.
    (Not Run All: in 11 it ran the 28 cells after the explorer too, which nbval runs anyway.)"""
    nb = nbformat.read(notebook, as_version=4)
    page.evaluate(JS_CLEAR_COUNTS)
    run = static_explorers.cells_to_run(nb)
    run_cells(page, run)
    return run


JS_SCROLLER = """() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const el = [panel.querySelector('.jp-WindowedPanel-outer'), panel.querySelector('.jp-Notebook')]
    .find(e => e && e.scrollHeight > e.clientHeight) || panel.querySelector('.jp-Notebook');
  // The content ends at the last cell (JupyterLab pads the end so one can scroll past it).
  const cells = panel.querySelectorAll('.jp-Notebook .jp-Cell');
  const last = cells[cells.length - 1];
  const end = last ? last.getBoundingClientRect().bottom - el.getBoundingClientRect().top
                     + el.scrollTop + 20 : el.scrollHeight;
  return {total: Math.min(Math.ceil(end), el.scrollHeight), visible: el.clientHeight};
}"""
JS_SCROLL_TO = """(y) => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  for (const e of [panel.querySelector('.jp-WindowedPanel-outer'),
                   panel.querySelector('.jp-Notebook')]) { if (e) e.scrollTop = y; }
}"""
MAX_SHOT_HEIGHT = 12000  # px: one tall screenshot, or several scrolled ones beyond this


def screenshot_notebook(page, name):
    """The whole notebook: the page is made as tall as the notebook (or, for a very long
    one, as tall as allowed, then shot again scrolled); saved as NAME.png, NAME-2.png, ..."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    stem = Path(name).stem
    for old in SCREENSHOTS.glob(f"{stem}-[0-9]*.png"):
        old.unlink()
    size = page.viewport_size
    first = page.evaluate(JS_SCROLLER)
    chrome = size["height"] - first["visible"]  # menu, toolbar and status bar
    height = min(max(first["total"] + chrome, size["height"]), MAX_SHOT_HEIGHT)
    page.set_viewport_size({"width": size["width"], "height": height})
    try:
        page.wait_for_timeout(500)  # let the layout settle at the new size
        dims = page.evaluate(JS_SCROLLER)
        y, part = 0, 1
        while True:
            page.evaluate(JS_SCROLL_TO, y)
            page.wait_for_timeout(200)
            suffix = "" if part == 1 else f"-{part}"
            page.screenshot(path=str(SCREENSHOTS / f"{stem}{suffix}.png"))
            y += dims["visible"]
            part += 1
            if y >= dims["total"] or part > 10:
                break
    finally:
        page.set_viewport_size(size)


def explorer_output(page, call):
    """The output (an element handle) of the one code cell whose code contains ``call`` and
    which shows a figure widget. Found once per explorer, then held: a locator is found again
    at every use, and this one reads the text of every code cell each time (25 ms of
    Chromium's CPU per use, ten uses per key press)."""
    cell = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell").filter(
        has=page.locator(".jp-InputArea-editor", has_text=call)).filter(
        has=page.locator(".jp-OutputArea-output img.widget-image"))
    assert cell.count() == 1, f"no single cell calls {call} and shows its figure"
    return cell.locator(".jp-OutputArea-output").filter(
        has=page.locator("img.widget-image")).element_handle()


JS_WATCH = """(img) => {
  // Record when the key goes down and when the image shows a new, decoded picture; and, for
  // the split of that time (split_of), every message of the kernel connection meanwhile and
  // when the other theme's frame (the hidden image beside this one) arrives (not decoded: the
  // page does not decode a hidden image either).
  const now = () => performance.timeOrigin + performance.now();  // ms since 1970, as the kernel's
  const twin = img.parentElement && img.parentElement.querySelector('img.attn-dark');
  const w = {t0: null, ms: null, src: img.src, msgs: [], decoded: null,
             twin_ms: null, twin_src: twin && twin !== img ? twin.src : null};
  window.__watch = w;
  const kernel = window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel;
  if (kernel && !kernel.__attnWatched) {  // once per kernel: log into the current watch
    kernel.__attnWatched = true;
    kernel.anyMessage.connect((_, args) => {
      const x = window.__watch;
      if (!x || x.t0 === null) return;
      const m = args.msg, data = (m.content && m.content.data) || {};
      x.msgs.push({at: now(), dir: args.direction, type: m.header.msg_type,
                   id: m.header.msg_id, parent: (m.parent_header || {}).msg_id || null,
                   date: Date.parse(m.header.date), state: m.content && m.content.execution_state,
                   method: data.method || null,
                   bytes: (m.buffers || []).reduce((s, b) => s + (b.byteLength || 0), 0)});
    });
  }
  const start = () => { if (w.t0 === null) { w.t0 = performance.now(); w.t0_epoch = now(); } };
  for (const type of ['keydown', 'input', 'change']) {  // a key press, or a choice made
    document.addEventListener(type, start, {capture: true, once: true});
  }
  const watch = (el, decode, done) => {
    const before = el.src;
    const obs = new MutationObserver(() => {
      if (el.src === before) return;
      obs.disconnect();
      const src = el.src;
      if (decode) el.decode().catch(() => {}).then(() => done(src)); else done(src);
    });
    obs.observe(el, {attributes: true, attributeFilter: ['src']});
  };
  watch(img, true, (src) => { w.decoded = now(); w.ms = performance.now() - w.t0; w.src = src; });
  if (w.twin_src !== null) watch(twin, false, () => { w.twin_ms = performance.now() - w.t0; });
}"""


def split_of(watch):
    """Where one key press's time went (ms), from ``JS_WATCH``'s record: ``browser out`` (key
    press to the widget's message sent), ``to kernel`` (sent to the kernel's busy status, whose
    date is the kernel's clock: one machine, one clock), ``kernel`` (busy to the message with
    the new image, by the kernel's date on it), ``back`` (that date to the message's arrival
    in the page), ``browser in`` (arrival to the new picture decoded), ``kernel busy`` (busy
    to idle: all the change's work, the other theme's frame included), ``twin`` (key press to
    the other theme's frame in the page), the kernel's messages for the change and their bytes.
    None where a part was not seen."""
    msgs = watch.get("msgs") or []
    sent = next((m for m in msgs if m["dir"] == "send" and m["type"] == "comm_msg"), None)
    if sent is None or watch.get("decoded") is None:
        return None
    mine = [m for m in msgs if m["dir"] == "recv" and m["parent"] == sent["id"]]
    busy = next((m for m in mine if m["type"] == "status" and m["state"] == "busy"), None)
    idle = next((m for m in mine if m["type"] == "status" and m["state"] == "idle"), None)
    frame = next((m for m in mine if m["type"] == "comm_msg" and m["bytes"] > 0), None)
    if busy is None or frame is None:
        return None
    updates = [m for m in mine if m["type"] == "comm_msg"]
    return {"browser out": sent["at"] - watch["t0_epoch"], "to kernel": busy["date"] - sent["at"],
            "kernel": frame["date"] - busy["date"], "back": frame["at"] - frame["date"],
            "browser in": watch["decoded"] - frame["at"],
            "kernel busy": idle["date"] - busy["date"] if idle else None,
            "twin": watch.get("twin_ms"), "messages": len(updates),
            "kB": sum(m["bytes"] for m in updates) / 1e3}


def slider_named(output, label):
    """The slider (an element handle) whose label starts with ``label`` (a word boundary
    after it)."""
    starts = re.compile(rf"^\s*{re.escape(label)}(\s|$|\()")
    labels = output.eval_on_selector_all(
        ".widget-slider", "(all) => all.map(s => s.querySelector('.widget-label')?.innerText)")
    found = [i for i, text in enumerate(labels) if text is not None and starts.match(text)]
    assert len(found) == 1, f"no single slider labelled {label!r} in the explorer: {labels}"
    return output.query_selector_all(".widget-slider")[found[0]]


def press_arrow(page, img, handle, readout, where):
    """One arrow key on a focused slider handle (right, or left at the top end); returns
    the ms from the key press to the new image decoded in the page."""
    before_src, before = img.get_attribute("src"), readout.inner_text()
    now, top = (handle.get_attribute(a) for a in ("aria-valuenow", "aria-valuemax"))
    key = "ArrowRight" if now is None or top is None or float(now) < float(top) else "ArrowLeft"
    handle.focus()
    img.evaluate(JS_WATCH)
    page.keyboard.press(key)
    page.wait_for_function("window.__watch && window.__watch.ms !== null",
                           timeout=UPDATE_TIMEOUT, polling="raf")
    ms = page.evaluate("window.__watch.ms")
    page.wait_for_function(
        "([el, old]) => el.innerText !== old", arg=[readout, before], timeout=UPDATE_TIMEOUT)
    # the other theme's frame and the kernel's idle status, for the split (a report only)
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):  # a twin whose bytes did not change
        page.wait_for_function("(window.__watch.twin_src === null"
                               " || window.__watch.twin_ms !== null) && window.__watch.msgs.some("
                               "m => m.type === 'status' && m.state === 'idle')",
                               timeout=2000, polling="raf")
    press_arrow.splits.append(split_of(page.evaluate("window.__watch")))
    assert img.get_attribute("src") != before_src, f"{where} ({key}): the figure did not change"
    assert readout.inner_text() != before, f"{where} ({key}): the read-out did not change"
    return ms


def move_slider(page, output, where, label, latencies):
    """``PRESSES`` arrow keys on the slider labelled ``label``; each one timed."""
    slider = slider_named(output, label)
    img = output.query_selector("img.widget-image")
    handle, readout = (slider.query_selector(c) for c in (".noUi-handle", ".widget-readout"))
    if not readout.is_visible():  # a choice slider: its value is the label beside it
        readout = slider.query_selector(
            "xpath=following-sibling::*[contains(@class, 'attn-readout')]")
    press_arrow.splits = []
    latencies[f"{where}: {label}"] = [press_arrow(page, img, handle, readout, where)
                                      for _ in range(PRESSES)]
    latencies["_split"][f"{where}: {label}"] = press_arrow.splits


def type_sentence(page, output, where, latencies, text):
    """Type ``text`` into the explorer's text box and press Enter: the model reruns, the
    figure changes and (the model explorer) the query menu lists the new sentence's pieces."""
    img = output.query_selector("img.widget-image")
    before_src = img.get_attribute("src")
    boxes = output.query_selector_all(".widget-text input")
    assert len(boxes) == 1, f"{where}: no single text box"
    box = boxes[0]
    box.fill(text)
    img.evaluate(JS_WATCH)
    box.press("Enter")
    page.wait_for_function("window.__watch && window.__watch.ms !== null",
                           timeout=UPDATE_TIMEOUT, polling="raf")
    ms = page.evaluate("window.__watch.ms")
    assert img.get_attribute("src") != before_src, f"{where}: the figure did not change"
    options = output.eval_on_selector_all(".widget-dropdown select option",
                                          "(all) => all.map(o => o.innerText)")
    if options:  # the model explorer: its query menu lists the new sentence's word pieces
        words = text.lower().rstrip(".").split()
        pieces = [o.replace("\xa0", " ").split(": ", 1)[1] for o in options]  # "3: trophy"
        assert pieces[1:-2] == words and pieces[0] == "[CLS]" and pieces[-1] == "[SEP]", options
    assert not output.evaluate(JS_ERRORS_SHOWN), f"{where}: the explorer shows an error"
    latencies[f"{where}: new sentence + Enter"] = [ms]
    error_beside_the_box(page, output, box, where, text)


#: The explorer's visible HTML widgets that say it hit an error.
JS_ERRORS_SHOWN = """(output) => [...output.querySelectorAll('.widget-html')]
  .filter(e => e.innerText.includes('hit an error') && e.getClientRects().length > 0)"""


def error_beside_the_box(page, output, box, where, good):
    """An empty text + Enter: the error shows in an 800 px window with the text box in its
    middle (it was once 982 px below the box, under the figure: nothing seemed to happen)."""
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": ERROR_VIEWPORT_HEIGHT})
    try:
        box.fill("")
        box.press("Enter")
        page.wait_for_function(f"(o) => ({JS_ERRORS_SHOWN})(o).length === 1", arg=output,
                               timeout=UPDATE_TIMEOUT)
        error = output.evaluate_handle(f"(o) => ({JS_ERRORS_SHOWN})(o)[0]").as_element()
        box.evaluate("(e) => e.scrollIntoView({block: 'center'})")
        page.wait_for_timeout(200)
        shot, area = error.bounding_box(), box.bounding_box()
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{where.replace(' ', '-')}--error.png"))
        assert 0 <= shot["y"] and shot["y"] + min(shot["height"], 60) <= ERROR_VIEWPORT_HEIGHT, (
            f"{where}: the error starts {shot['y'] - area['y']:.0f} px below the text box, "
            f"outside an {ERROR_VIEWPORT_HEIGHT} px window")
    finally:
        page.set_viewport_size(size)
    box.fill(good)  # back to the good text: the error goes
    box.press("Enter")
    page.wait_for_function(f"(o) => ({JS_ERRORS_SHOWN})(o).length === 0", arg=output,
                           timeout=UPDATE_TIMEOUT)


def set_theme(page, theme):
    """Switch JupyterLab's theme (as Settings > Theme does) and wait until it is applied
    (nothing to do when it is the theme already)."""
    light = "true" if theme == "light" else "false"
    if page.evaluate("() => document.body.dataset.jpThemeLight") == light:
        return
    page.evaluate("(t) => window.jupyterapp.commands.execute('apputils:change-theme', "
                  "{theme: t})", THEMES[theme])
    page.wait_for_function("(v) => document.body.dataset.jpThemeLight === v", arg=light,
                           timeout=UPDATE_TIMEOUT)
    page.wait_for_timeout(300)  # the theme's stylesheet and a repaint


#: Window sizes the explorers are photographed at (a laptop, a desktop screen).
SIZES = {"1280": (1280, 800), "1920": (1920, 1080)}
#: (theme, window) of each photograph of an explorer: both themes, both sizes.
SHOTS = (("light", "1280"), ("dark", "1920"))

JS_TABLES = """(output) => {
  // Every number table of the explorer: cut by the output's right edge? does it scroll?
  const right = output.getBoundingClientRect().right;
  return [...output.querySelectorAll('table[data-name]')].map(t => {
    let box = t.parentElement;
    while (box && box !== output && box.style.overflowX !== 'auto') {  // the course's own
      box = box.parentElement;
    }
    const scroller = box && box !== output ? box : null;
    const seen = (scroller || t).getBoundingClientRect().right;
    return {name: t.dataset.name, cut: seen > right + 1,
            scrolls: scroller ? scroller.scrollWidth > scroller.clientWidth + 1 : false,
            width: t.getBoundingClientRect().width};
  });
}"""


def room_for(output):
    """The window height (px) that shows ``output`` whole above the status bar."""
    return output.bounding_box()["height"] + 400


def screenshot_themes(page, output, stem, explorer):
    """The explorer in the light theme in a 1280 px wide window and in the dark theme in a
    1920 px one (``SHOTS``): NOTEBOOK--EXPLORER--THEME--WIDTH.png. The page is made taller
    than the explorer first, so that the status bar never covers its end. In each theme only
    that theme's frame shows; no number table is cut by the output's edge, and in the wide
    window none needs to scroll (11's row table was cut at the figure's width at 1920 px).
    Each theme and each width is met once: the frame a theme shows does not depend on the
    window's width, nor a table's layout on the theme. The page's own theme comes first and
    the page stays in the other: one theme switch per explorer (a switch restyles the whole
    page, 0.5-1.5 s of Chromium's CPU here), and three resizes (each 0.1-0.8 s)."""
    size = page.viewport_size
    light = page.evaluate("() => document.body.dataset.jpThemeLight") == "true"
    shots = sorted(SHOTS, key=lambda shot: (shot[0] == "light") != light)  # its own first
    try:
        for theme, label in shots:
            set_theme(page, theme)
            width, height = SIZES[label]
            # One resize, as tall as twice the explorer's height at the present width (it is
            # shown at most its pixels' width, so a wider window grows it by far less), and a
            # second only if it still needs more: each resize re-lays out the whole page.
            tall = int(max(height, 2 * room_for(output)))
            page.set_viewport_size({"width": width, "height": tall})
            page.wait_for_timeout(300)
            if room_for(output) > tall:
                page.set_viewport_size({"width": width, "height": int(room_for(output))})
            output.scroll_into_view_if_needed()
            shown = output.query_selector(f"img.attn-{theme}")
            hidden = output.query_selector(f"img.attn-{'dark' if theme == 'light' else 'light'}")
            assert shown is not None and shown.is_visible() and not (
                hidden is not None and hidden.is_visible()), (
                f"{explorer.name}: the {theme} theme does not show its own frame")
            output.screenshot(
                path=str(SCREENSHOTS / f"{stem}--{explorer.name}--{theme}--{label}.png"))
            tables = output.evaluate(JS_TABLES)
            assert not [t for t in tables if t["cut"]], (
                f"{explorer.name} at {label}, {theme}: {tables}")
            if label == "1920":
                assert not [t for t in tables if t["scrolls"]], (
                    f"{explorer.name} at {label}: a table scrolls: {tables}")
    finally:
        page.set_viewport_size(size)


def drive_explorer(page, stem, explorer, latencies):
    output = explorer_output(page, explorer.call)
    output.scroll_into_view_if_needed()
    where = f"{stem.split('-')[0]} {explorer.name}"
    for label in explorer.sliders:
        move_slider(page, output, where, label, latencies)
    if explorer.sentence:
        type_sentence(page, output, where, latencies, explorer.sentence)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    screenshot_themes(page, output, stem, explorer)


JS_NEWS_DEFAULT = """async () => {
  const id = '@jupyterlab/apputils-extension:notification';
  const plugin = await window.jupyterapp.serviceManager.settings.fetch(id);
  const p = plugin.schema.properties;
  return {fetchNews: p.fetchNews.default, checkForUpdates: p.checkForUpdates.default};
}"""


def test_every_explorer_is_in_the_table():
    """A notebook that calls an explorer must list it in EXPLORERS (so it gets driven)."""
    called = set()
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                called |= {(path.name, m) for m in re.findall(r"\b(\w+_explorer)\(", cell.source)}
    listed = {(nb, e.name) for nb, explorers in EXPLORERS.items() for e in explorers}
    assert called == listed, (f"not in EXPLORERS: {sorted(called - listed)}; "
                              f"listed but not called: {sorted(listed - called)}")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_in_jupyterlab(notebook, lab, lab_page, latencies):
    name = notebook.name
    page = lab_page
    phases = latencies.setdefault("_phases", {}).setdefault(notebook.stem, {})
    clock = [time.monotonic()]

    def lap(phase):
        now = time.monotonic()
        phases[phase] = now - clock[0]
        clock[0] = now

    try:
        open_notebook(page, name)
        following = NOTEBOOKS.index(notebook) + 1
        if following < len(NOTEBOOKS):
            lab.start_kernel(NOTEBOOKS[following].name)
        lap("open")
        ran = []
        if name in EXPLORERS:
            ran = run_explorer_cells(page, notebook)
            lap(f"run {len(ran)} cells")
        state = page.evaluate(JS_STATE)
        assert not state["errors"], f"{name}: error outputs: {state['errors']}"
        # a fresh kernel: the cells run count 1, 2, 3, ... in the order they ran
        counts = [state["counts"][i] for i in ran]
        assert counts == list(range(1, len(ran) + 1)), f"{name}: execution counts {counts}"
        # Widgets render asynchronously after their output arrives: give them a moment.
        page.wait_for_function(
            f"(() => {{ const w = ({JS_WIDGETS})(); return w.loading.length === 0 "
            "&& w.empty_views === 0 && w.blank_images === 0; })()",
            timeout=UPDATE_TIMEOUT, polling=250)
        widgets = page.evaluate(JS_WIDGETS)
        assert not widgets["errors"], f"{name}: {widgets['errors']}"
        if name not in EXPLORERS:  # as stored: a widget there would need a kernel
            assert widgets["views"] == 0, f"{name}: a widget outside EXPLORERS"
        if name in EXPLORERS:
            assert widgets["images"] > 0, f"{name}: the explorer shows no figure"
            for explorer in EXPLORERS[name]:
                drive_explorer(page, notebook.stem, explorer, latencies)
        lap("checks")
        if WHOLE_NOTEBOOK_SHOTS:
            screenshot_notebook(page, name)
            lap("screenshot")
    except Exception:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"FAILED-{notebook.stem}.png"))
        raise
    finally:
        page.evaluate(JS_CLOSE_ALL)
        lab.shutdown_kernels(name)


def test_a_first_session_shows_no_news_pop_up(lab_page):
    """A learner's first session (the shared page: a fresh workspace, no settings of the
    learner's own, JupyterLab loaded minutes ago by now): the shipped settings
    (tools/lab_settings.py) reach the page and the news question never appeared (the toast
    stays until answered). Last in this file, so that the whole session had time to show it."""
    page = lab_page
    assert page.evaluate(JS_NEWS_DEFAULT) == {"fetchNews": "false", "checkForUpdates": False}
    waited = (time.monotonic() - page.loaded_at) * 1000
    if waited < NEWS_WAIT_MS:  # this test alone: give JupyterLab the time it takes to ask
        page.wait_for_timeout(NEWS_WAIT_MS - waited)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "first-session.png"))
    text = page.evaluate("() => document.body.innerText")
    assert "Jupyter news" not in text, "the news pop-up appeared on a first session"
