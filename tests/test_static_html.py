"""The static edition (`make html`): every notebook as a page that reads offline.

The build (tools/build_html.py) runs once into a temporary folder; then every page must
exist, every local link and anchor must resolve, no link may still point to a .ipynb, every
figure a notebook stores must be in its page as an embedded PNG, and no script, style
sheet or image may come from the network. With a browser (see tests/conftest.py), one page
is also opened from disk with every network request refused, to see MathJax typeset it.
"""

import base64
import importlib.util
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
BUILD_SCRIPT = ROOT / "tools" / "build_html.py"

spec = importlib.util.spec_from_file_location("course_build_html", BUILD_SCRIPT)
build_html = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build_html)

REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.I)  # http://, https://, //host
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MARKDOWN_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)")

pytestmark = pytest.mark.slow


class Page(HTMLParser):
    """The parts of a page these tests look at."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.links, self.images, self.scripts, self.styles, self.ids = [], [], [], [], set()
        self.inline_scripts, self.inline_styles = [], []
        self._in = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("href") is not None:
            self.links.append(a["href"])
        elif tag == "img":
            self.images.append(a.get("src") or "")
        elif tag == "script":
            if a.get("src"):
                self.scripts.append(a["src"])
            self._in = "script"
        elif tag == "link" and a.get("href"):
            self.styles.append(a["href"])
        elif tag == "style":
            self._in = "style"
        for key in ("src", "href"):  # any other element that loads something
            if tag not in {"a", "img", "script", "link"} and a.get(key):
                self.scripts.append(a[key])

    def handle_endtag(self, tag):
        if tag in {"script", "style"}:
            self._in = None

    def handle_data(self, data):
        if self._in == "script":
            self.inline_scripts.append(data)
        elif self._in == "style":
            self.inline_styles.append(data)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("html") / "html"
    build_html.build(out, quiet=True)
    return out


@pytest.fixture(scope="module")
def pages(site):
    return {p.name: Page(p.read_text(encoding="utf-8")) for p in site.glob("*.html")}


def stored_images(nb):
    """How many figures a notebook stores: image outputs and markdown images."""
    count = 0
    for cell in nb.cells:
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                count += any(k in data for k in ("image/png", "image/jpeg", "image/svg+xml"))
        elif cell.cell_type == "markdown":
            count += len(MARKDOWN_IMAGE.findall(cell.source))
    return count


def test_every_notebook_has_a_page_and_there_is_an_index(site):
    assert NOTEBOOKS
    for nb in NOTEBOOKS:
        assert (site / nb.with_suffix(".html").name).is_file(), nb.name
    index = site / "index.html"
    assert index.is_file()
    text = index.read_text(encoding="utf-8")
    for nb in NOTEBOOKS[1:]:  # the course map links every notebook's page
        assert f'href="{nb.with_suffix(".html").name}"' in text, nb.name


def test_every_local_link_resolves(site, pages):
    broken = []
    for name, page in pages.items():
        for href in page.links:
            if REMOTE.match(href) or href.startswith(("mailto:", "data:")):
                continue
            parts = urlsplit(href)
            assert not parts.path.endswith(".ipynb"), f"{name}: link to a notebook: {href}"
            target = name if not parts.path else unquote(parts.path)
            if not (site / target).is_file():
                broken.append(f"{name}: {href} (no file {target})")
            elif parts.fragment and target in pages:
                ids = pages[target].ids  # browsers try the fragment as written, then decoded
                if parts.fragment not in ids and unquote(parts.fragment) not in ids:
                    broken.append(f"{name}: {href} (no anchor in {target})")
    assert not broken, "\n".join(broken)


def test_nav_links_go_to_neighbouring_pages(pages):
    names = [nb.with_suffix(".html").name for nb in NOTEBOOKS]
    for prev, nxt in zip(names, names[1:]):
        assert nxt in pages[prev].links, f"{prev} does not link to {nxt}"
        assert prev in pages[nxt].links, f"{nxt} does not link back to {prev}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_is_embedded(notebook, site, pages):
    nb = nbformat.read(notebook, as_version=4)
    page = pages[notebook.with_suffix(".html").name]
    embedded = [src for src in page.images if src.startswith("data:image/")]
    assert len(embedded) >= stored_images(nb), (
        f"{notebook.name} stores {stored_images(nb)} figures, its page embeds {len(embedded)}")
    for src in page.images:
        assert src.startswith("data:image/"), f"{notebook.name}: image not embedded: {src[:80]}"
    for src in embedded:
        if src.startswith("data:image/png;base64,"):
            assert base64.b64decode(src.split(",", 1)[1])[:8] == PNG_SIGNATURE


def test_nothing_is_fetched_from_the_network(site, pages):
    problems = []
    for name, page in pages.items():
        for url in page.scripts + page.styles + page.images:
            if REMOTE.match(url):
                problems.append(f"{name}: loads {url}")
            elif not url.startswith("data:"):
                local = site / unquote(urlsplit(url).path)
                if not local.is_file():
                    problems.append(f"{name}: loads missing local file {url}")
        for code in page.inline_scripts:
            for url in re.findall(r"""["'`]((?:https?:)?//[^"'`\s]+)""", code):
                problems.append(f"{name}: a script refers to {url}")
        for css in page.inline_styles:
            for url in re.findall(r"""(?:@import\s+|url\()\s*["']?((?:https?:)?//[^"')\s]+)""",
                                  css):
                problems.append(f"{name}: a style loads {url}")
    assert not problems, "\n".join(problems)


def test_mathematics_is_typeset_by_the_local_mathjax(site, pages):
    mathjax = site / build_html.MATHJAX_DIR
    config = build_html.MATHJAX_URL.split("config=")[1].split(",")[0]
    assert (mathjax / "MathJax.js").is_file()
    assert (mathjax / "config" / f"{config}.js").is_file()
    for name, page in pages.items():
        assert build_html.MATHJAX_URL in page.scripts, f"{name} does not load the local MathJax"


def test_a_page_renders_offline_in_a_browser(site, browser, tmp_path):
    """Open 04-scaling.html from disk, every http(s) request refused; MathJax typesets.

    ``browser`` is the session's one Chromium (tests/conftest.py), shared with the JupyterLab
    tests: Playwright's sync API cannot start a second one while it runs."""
    from conftest import SCREENSHOTS

    page_path = site / "04-scaling.html"
    if not page_path.exists():
        page_path = sorted(site.glob("0[1-9]-*.html"))[0]
    refused = []
    context = browser.new_context(viewport={"width": 1100, "height": 1400})
    try:
        page = context.new_page()

        def refuse(route):
            if route.request.url.startswith(("http:", "https:")):
                refused.append(route.request.url)
                return route.abort()
            return route.continue_()

        page.route("**/*", refuse)
        page.goto(page_path.as_uri(), timeout=120_000)
        page.wait_for_function(
            "window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0"
            " && !MathJax.Hub.queue.running && document.querySelector('.MathJax')",
            timeout=120_000)
        typeset = page.locator(".MathJax, .MathJax_Display").count()
        errors = page.locator(".MathJax_Error, merror").count()
        broken_images = page.evaluate(
            "[...document.images].filter(i => !i.complete || i.naturalWidth === 0).length")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"static-{page_path.stem}.png"))
    finally:
        context.close()
    assert not refused, f"the page tried to fetch: {refused}"
    assert typeset > 0 and errors == 0, (typeset, errors)
    assert broken_images == 0
