"""Build the static edition: every notebook, with its stored outputs, as an HTML page.

The pages read offline with no kernel and fetch nothing from the network:

* every figure is in the page (nbconvert embeds output PNGs as ``data:`` URIs, and
  ``embed_images`` does the same for images that markdown cells refer to);
* the mathematics is typeset by MathJax 2.7 from a local copy (the one the
  ``jupyter-server-mathjax`` package ships, pinned in requirements.txt), copied to
  ``mathjax/`` beside the pages; nbconvert's default loads it from a CDN;
* require.js, mermaid and the widget renderer (which nbconvert's ``lab`` template loads
  from a CDN) are left out, and so is any live-widget state a notebook still holds: a
  reader without a kernel sees the static figure drawn above each explorer and the
  explorer's plain-text description (as ``tools/clean_outputs.py`` stores them);
* links between notebooks (``03-scores.ipynb``) are rewritten to the pages
  (``03-scores.html``), and ``index.html`` is the course map (a copy of 00-index.html).

Outputs are the stored ones: nothing is executed (``make notebooks`` does that).

Usage (from anywhere)::

    python tools/build_html.py                 # into build/html/
    python tools/build_html.py --out DIR       # elsewhere (tests use a temporary folder)
"""

import argparse
import re
import shutil
import sys
from pathlib import Path

import nbformat
from jinja2 import DictLoader
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "build" / "html"
INDEX_NOTEBOOK = "00-index.ipynb"
MATHJAX_DIR = "mathjax"
# The local MathJax 2.7 with the only combined configuration the package ships.
MATHJAX_URL = f"{MATHJAX_DIR}/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"

# nbconvert's lab template, minus the two scripts it would fetch from a CDN.
TEMPLATE = "course_offline.html.j2"
TEMPLATE_SOURCE = """\
{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{#- The lab template writes no alt: take the figure's from the output's metadata. -#}
{%- block data_png scoped -%}
{%- set alttext = output | get_metadata('alt', 'image/png') -%}
{%- if alttext -%}
{{ super() | replace('<img ', '<img alt="' ~ (alttext | escape_html) ~ '" ', 1) }}
{%- else -%}
{{ super() }}
{%- endif -%}
{%- endblock data_png -%}
"""

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# href="03-scores.ipynb" or href="03-scores.ipynb#exercises": a relative link to a notebook.
NOTEBOOK_HREF = re.compile(r'href="(?![a-zA-Z][a-zA-Z0-9+.-]*:|/|#)([^"#?]*?)\.ipynb([#?][^"]*)?"')


def mathjax_source():
    """The folder holding MathJax.js (from the jupyter-server-mathjax package)."""
    try:
        import jupyter_server_mathjax
    except ImportError:
        sys.exit("error: jupyter-server-mathjax is not installed (it is pinned in "
                 "requirements.txt: run `make setup`)")
    path = Path(jupyter_server_mathjax.__file__).parent / "static"
    if not (path / "MathJax.js").is_file():
        sys.exit(f"error: no MathJax.js in {path}")
    return path


def exporter():
    exp = HTMLExporter(template_name="lab", extra_loaders=[DictLoader({TEMPLATE: TEMPLATE_SOURCE})])
    exp.template_file = TEMPLATE
    exp.mathjax_url = MATHJAX_URL
    exp.embed_images = True
    exp.exclude_anchor_links = False
    return exp


def drop_widget_state(nb):
    """Remove live-widget state and widget views (kept: their text/plain), in place."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            output.get("data", {}).pop(WIDGET_VIEW, None)
    return nb


def rewrite_links(html):
    """Links to notebooks point to their pages."""
    return NOTEBOOK_HREF.sub(lambda m: f'href="{m[1]}.html{m[2] or ""}"', html)


def page_name(notebook):
    return Path(notebook).with_suffix(".html").name


def build(out=DEFAULT_OUT, notebooks_dir=ROOT / "notebooks", quiet=False):
    """Render every notebook in ``notebooks_dir`` into ``out``; return the page paths."""
    out = Path(out)
    notebooks = sorted(Path(notebooks_dir).glob("*.ipynb"))
    if not notebooks:
        sys.exit(f"error: no notebooks in {notebooks_dir}")
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.html"):
        stale.unlink()
    mathjax_out = out / MATHJAX_DIR
    if mathjax_out.exists():
        shutil.rmtree(mathjax_out)
    shutil.copytree(mathjax_source(), mathjax_out)

    exp = exporter()
    pages = []
    for path in notebooks:
        nb = drop_widget_state(nbformat.read(path, as_version=4))
        body, _ = exp.from_notebook_node(
            nb, resources={"metadata": {"name": path.stem, "path": str(path.parent)}})
        page = out / page_name(path.name)
        page.write_text(rewrite_links(body), encoding="utf-8")
        pages.append(page)
        if not quiet:
            print(f"wrote {page.relative_to(out.parent) if out.parent in page.parents else page}")
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
    args = parser.parse_args(argv)
    build(args.out, args.notebooks, quiet=args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
