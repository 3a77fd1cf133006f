"""Build the static edition: every notebook, with its stored outputs, as an HTML page.

The pages read offline with no kernel and fetch nothing from the network:

* every figure is in the page (nbconvert embeds output PNGs as ``data:`` URIs, and
  ``embed_images`` does the same for images that markdown cells refer to);
* the mathematics is typeset by MathJax 3 with its SVG output (glyphs drawn as paths, so
  no web font has to load), from one file, ``mathjax/tex-svg-full.js``, beside the pages.
  That file comes from the ``mathjax`` npm package (version and SHA-512 pinned below),
  fetched once with ``npm pack`` into a cache folder and checked before use; nbconvert's
  default would load MathJax 2 from a CDN;
* require.js, mermaid and the widget renderer (which nbconvert's ``lab`` template loads
  from a CDN) are left out, and so is any live-widget state a notebook still holds. Where a
  notebook calls an explorer, the page shows instead of the widget's text description
  ("VBox(children=...") a precomputed explorer: its main controls as plain HTML sliders
  moving frames computed at build time (tools/static_explorers.py), with a note that typed
  inputs need a kernel (Binder link, ``make lab``); with ``--no-frames``, only that note;
* links between notebooks (``03-scores.ipynb``) are rewritten to the pages
  (``03-scores.html``), and ``index.html`` is the course map (a copy of 00-index.html).

Outputs are the stored ones: nothing is executed (``make notebooks`` does that).

Usage (from anywhere)::

    python tools/build_html.py                 # into build/html/
    python tools/build_html.py --out DIR       # elsewhere (tests use a temporary folder)
"""

import argparse
import base64
import hashlib
import html
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import nbformat
from jinja2 import DictLoader
from nbconvert import HTMLExporter

from attn_core.explorers.base import light_frames_only, raw_frames

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "build" / "html"
INDEX_NOTEBOOK = "00-index.ipynb"
MATHJAX_DIR = "mathjax"
# MathJax 3 from npm: the version, the tarball's SHA-512 (npm's "integrity") and the one file
# the pages load (every TeX extension, SVG output: no fonts or other files to fetch).
MATHJAX_PACKAGE = "mathjax@3.2.2"
MATHJAX_INTEGRITY = ("sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJv"
                     "tRZM1vO+geW0OhGw==")
MATHJAX_FILES = {"package/es5/tex-svg-full.js": "tex-svg-full.js",
                 "package/LICENSE": "LICENSE"}
MATHJAX_URL = f"{MATHJAX_DIR}/tex-svg-full.js"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "attn-course"
# The configuration MathJax 3 reads before it loads: the notebooks' delimiters, SVG glyphs
# shared between formulas, and no menu (it would load more files on demand).
MATHJAX_CONFIG = """\
<script>
window.MathJax = {
  tex: {
    inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]],
    displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]],
    processEscapes: true,
    processEnvironments: true
  },
  svg: {fontCache: "global"},
  options: {enableMenu: false}
};
</script>"""

# nbconvert's lab template, minus the two scripts it would fetch from a CDN.
TEMPLATE = "course_offline.html.j2"
TEMPLATE_SOURCE = """\
{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}
{{ resources.mathjax_config }}
<script src="{{ resources.course_mathjax_url }}" defer></script>
{%- endblock html_head_js_mathjax -%}
{#- The lab template writes no alt: take the figure's from the output's metadata. -#}
{%- block data_png scoped -%}
{%- set alttext = output | get_metadata('alt', 'image/png') -%}
{%- if alttext -%}
{{ super() | replace('<img ', '<img alt="' ~ (alttext | escape_html) ~ '" ', 1) }}
{%- else -%}
{{ super() }}
{%- endif -%}
{%- endblock data_png -%}
{#- The code as Pygments highlights it: every character of the source escaped, only Pygments'
    own <div>, <pre> and <span class> around it; the lab template runs it through bleach as
    well, a quarter of the time a page takes, for the same bytes. -#}
{% block input %}
<div class="jp-CodeMirrorEditor jp-Editor jp-InputArea-editor" data-type="inline">
     <div class="cm-editor cm-s-jupyter">
{{ cell.source | highlight_code(metadata=cell.metadata) }}
     </div>
</div>
{%- endblock input %}
"""

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# href="03-scores.ipynb" or href="03-scores.ipynb#exercises": a relative link to a notebook.
NOTEBOOK_HREF = re.compile(r'href="(?![a-zA-Z][a-zA-Z0-9+.-]*:|/|#)([^"#?]*?)\.ipynb([#?][^"]*)?"')


def integrity(data):
    """npm's integrity string of a tarball: 'sha512-' and the base64 digest."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def mathjax_tarball(cache=CACHE):
    """The pinned MathJax npm tarball's bytes, fetched once with ``npm pack`` and checked."""
    name = MATHJAX_PACKAGE.replace("@", "-") + ".tgz"
    path = Path(cache) / name
    if not path.is_file():
        npm = shutil.which("npm")
        if npm is None:
            sys.exit(f"error: the static edition needs {MATHJAX_PACKAGE} from npm once, and "
                     f"there is no npm (install Node.js), or put {name} in {cache}")
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            run = subprocess.run([npm, "pack", MATHJAX_PACKAGE, "--silent",
                                  "--pack-destination", tmp], capture_output=True, text=True,
                                 timeout=600, stdin=subprocess.DEVNULL)
            if run.returncode != 0 or not (Path(tmp) / name).is_file():
                sys.exit(f"error: npm pack {MATHJAX_PACKAGE} failed: {run.stderr[-2000:]}")
            os.replace(Path(tmp) / name, path)
    data = path.read_bytes()
    if integrity(data) != MATHJAX_INTEGRITY:
        sys.exit(f"error: {path} does not match the pinned SHA-512 of {MATHJAX_PACKAGE} "
                 "(delete it to fetch it again)")
    return data


def install_mathjax(dest, cache=CACHE):
    """Write the files the pages load (``MATHJAX_FILES``) from the tarball into ``dest``."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(mathjax_tarball(cache)), mode="r:gz") as tar:
        for member, target in MATHJAX_FILES.items():
            (dest / target).write_bytes(tar.extractfile(member).read())
    return dest


def binder_url():
    """The Binder launch link, from tools/nav.py (the one place that knows the address)."""
    spec = importlib.util.spec_from_file_location("course_nav_html", ROOT / "tools" / "nav.py")
    nav = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nav)
    return nav.BINDER_URL


def exporter():
    exp = HTMLExporter(template_name="lab", extra_loaders=[DictLoader({TEMPLATE: TEMPLATE_SOURCE})])
    exp.template_file = TEMPLATE
    exp.embed_images = True
    exp.exclude_anchor_links = False
    return exp


# A cell that shows an explorer: it calls one (scaling_explorer(), worked_example_lab(),
# ...), or stored a widget view, or a widget's text description.
EXPLORER_CALL = re.compile(r"\b(\w+_explorer|worked_example_lab)\(")
WIDGET_REPR = re.compile(r"^[A-Z]\w*\(children=")
NEEDS_KERNEL_CLASS = "course-needs-kernel"


def shows_explorer(cell):
    if cell.cell_type != "code":
        return False
    if EXPLORER_CALL.search(cell.source):
        return True
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if WIDGET_VIEW in data or WIDGET_REPR.match(str(data.get("text/plain", ""))):
            return True
    return False


def run_it_html(url):
    """How to get a kernel, as HTML: the Binder link when the course has a public address
    (``url``), else only how to run it in a clone (no link that cannot work)."""
    if not url:
        return "run <code>make lab</code> in a clone of the course's repository"
    return (f'<a href="{html.escape(url, quote=True)}">launch the course on Binder</a> '
            "(nothing to install), or run <code>make lab</code> in a clone of the repository")


def needs_kernel_html(url):
    return (f'<div class="{NEEDS_KERNEL_CLASS}" role="note" style="border-left: 4px solid '
            '#1f6feb; padding: 0.5em 0.8em; margin: 0.4em 0; line-height: 1.5;">'
            "<strong>This explorer needs a running kernel.</strong> The figure above shows "
            "it in its default state. To move its controls, open this notebook in "
            f"JupyterLab: {run_it_html(url)}.</div>")


def load_tool(name):
    spec = importlib.util.spec_from_file_location(f"course_{name}", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def players(nb, url):
    """{cell index: the HTML of a precomputed explorer} for the explorer cells of ``nb``."""
    static = load_tool("static_explorers")
    out = {}
    # the pages show the light frames only; each is encoded once, as a palette PNG
    with light_frames_only(), raw_frames():
        for number, (i, explorer) in enumerate(sorted(static.build_explorers(nb).items())):
            name = static.explorer_name(nb.cells[i].source)
            data = static.record_frames(name, explorer)
            if data["controls"]:  # an explorer without main controls listed keeps the note
                out[i] = static.player_html(data, number, url)
    return out


def drop_widget_state(nb, url=None, frames=None):
    """Remove live-widget state; an explorer's outputs become its precomputed player (from
    ``frames``, {cell index: HTML}) or else the needs-a-kernel note."""
    nb.metadata.pop("widgets", None)
    url = url or binder_url()  # None: the course has no public address yet
    frames = frames or {}
    for i, cell in enumerate(nb.cells):
        if shows_explorer(cell):
            shown = frames.get(i) or needs_kernel_html(url)
            cell.outputs = [nbformat.v4.new_output(
                "display_data", data={"text/html": shown,
                                      "text/plain": "This explorer needs a running kernel."})]
            continue
        for output in cell.get("outputs", []):
            output.get("data", {}).pop(WIDGET_VIEW, None)
    return nb


def rewrite_links(html):
    """Links to notebooks point to their pages."""
    return NOTEBOOK_HREF.sub(lambda m: f'href="{m[1]}.html{m[2] or ""}"', html)


def page_name(notebook):
    return Path(notebook).with_suffix(".html").name


def link_solutions(nb, name, solutions_dir):
    """Add a link to the notebook's solutions page under its title, if solutions were built."""
    if not (Path(solutions_dir) / f"{name}.ipynb").exists():
        return nb
    link = nbformat.v4.new_markdown_cell(f"[Solutions to this notebook's exercises]"
                                         f"(solutions/{name}.html) (built by `make solutions`)")
    titles = [i for i, c in enumerate(nb.cells) if c.source.startswith("# ")]
    nb.cells.insert(titles[0] + 1 if titles else 0, link)
    return nb


def solution_links(html, solved):
    """Links of a solutions page: to another solutions page where that notebook has one
    (``solved``: their stems), else up to the course's page (``../NAME.html``): the appendix
    and the index have no solutions page."""
    def fix(m):
        return m[0] if m[1] in solved else f'href="../{m[1]}.html{m[2] or ""}"'
    return re.sub(r'href="([\w.-]+)\.html(#[^"]*)?"', fix, html)


def build_solutions(exp, out, solutions_dir):
    """Render solutions/*.ipynb (``make solutions``) into ``out``/solutions/."""
    pages = []
    paths = sorted(Path(solutions_dir).glob("*.ipynb"))
    solved = {path.stem for path in paths}
    for path in paths:
        nb = drop_widget_state(nbformat.read(path, as_version=4), binder_url())
        body, _ = exp.from_notebook_node(
            nb, resources={"metadata": {"name": path.stem, "path": str(path.parent)},
                           "course_mathjax_url": f"../{MATHJAX_URL}",
                           "mathjax_config": MATHJAX_CONFIG})
        (out / "solutions").mkdir(exist_ok=True)
        page = out / "solutions" / page_name(path.name)
        page.write_text(solution_links(rewrite_links(body.replace('href="../notebooks/',
                                                                  'href="../')), solved),
                        encoding="utf-8")
        pages.append(page)
    return pages


def build(out=DEFAULT_OUT, notebooks_dir=ROOT / "notebooks", quiet=False, frames=True,
          solutions_dir=ROOT / "solutions"):
    """Render every notebook in ``notebooks_dir`` into ``out``; return the page paths."""
    out = Path(out)
    notebooks = sorted(Path(notebooks_dir).glob("*.ipynb"))
    if not notebooks:
        sys.exit(f"error: no notebooks in {notebooks_dir}")
    out.mkdir(parents=True, exist_ok=True)
    for stale in [*out.glob("*.html"), *out.glob("solutions/*.html")]:
        stale.unlink()
    install_mathjax(out / MATHJAX_DIR)

    exp = exporter()
    url = binder_url()
    pages = []
    script = load_tool("static_explorers").PLAYER_SCRIPT
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        made = players(nb, url) if frames else {}
        nb = link_solutions(drop_widget_state(nbformat.read(path, as_version=4), url, made),
                            path.stem, solutions_dir)
        body, _ = exp.from_notebook_node(
            nb, resources={"metadata": {"name": path.stem, "path": str(path.parent)},
                           "course_mathjax_url": MATHJAX_URL, "mathjax_config": MATHJAX_CONFIG})
        if made:
            body = body.replace("</body>", f"{script}\n</body>", 1)
        page = out / page_name(path.name)
        page.write_text(rewrite_links(body), encoding="utf-8")
        pages.append(page)
        if not quiet:
            print(f"wrote {page.relative_to(out.parent) if out.parent in page.parents else page}")
    pages += build_solutions(exp, out, solutions_dir)
    index_src = out / page_name(INDEX_NOTEBOOK)
    if index_src.exists():
        shutil.copyfile(index_src, out / "index.html")
        pages.append(out / "index.html")
    if not quiet:
        print(f"static edition: {len(pages)} pages in {out} (open {out / 'index.html'})")
    return pages


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="output folder (default: build/html)")
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks",
                        help="folder of notebooks (default: notebooks/)")
    parser.add_argument("-q", "--quiet", action="store_true")
    parser.add_argument("--no-frames", action="store_true",
                        help="no precomputed explorers (faster): a needs-a-kernel note instead")
    args = parser.parse_args(argv)
    build(args.out, args.notebooks, quiet=args.quiet, frames=not args.no_frames)
    return 0


if __name__ == "__main__":
    sys.exit(main())
