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


#: The notebooks given solutions pages in the edition the tests build: two that link to the
#: appendix, which has none (issue 31: their links to it were broken).
SOLVED = ("03-scores", "05-softmax")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The edition, built once, with solutions pages for ``SOLVED`` (copies of the notebooks,
    as ``make solutions`` leaves them in solutions/; the repository's own solutions/ folder,
    which exists only after ``make solutions``, is not used)."""
    base = tmp_path_factory.mktemp("html")
    solved = base / "solutions"
    solved.mkdir()
    for path in NOTEBOOKS:
        if path.stem in SOLVED:
            (solved / path.name).write_bytes(path.read_bytes())
    out = base / "html"
    build_html.build(out, quiet=True, solutions_dir=solved)
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


def broken_links(site):
    """Every link of every page under ``site`` (its solutions/ pages too) that does not
    resolve: a missing file, a missing anchor, a link to a notebook, a placeholder launch
    link, or a Binder link while the course has no public address."""
    nav = build_html.load_tool("nav")
    pages = {p: Page(p.read_text(encoding="utf-8")) for p in site.rglob("*.html")}
    broken = []
    for path, page in pages.items():
        name = path.relative_to(site).as_posix()
        for href in page.links:
            if REMOTE.match(href) or href.startswith(("mailto:", "data:")):
                if "mybinder.org" in href and (nav.BINDER_URL is None or "OWNER" in href
                                               or href != nav.BINDER_URL):
                    broken.append(f"{name}: {href} (a launch link that cannot work)")
                continue
            parts = urlsplit(href)
            if parts.path.endswith(".ipynb"):
                broken.append(f"{name}: {href} (a link to a notebook)")
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if not target.is_file():
                broken.append(f"{name}: {href} (no file {target.relative_to(site.resolve())})"
                              if site.resolve() in target.parents else f"{name}: {href}")
            elif parts.fragment and target in {p.resolve() for p in pages}:
                ids = pages[next(p for p in pages if p.resolve() == target)].ids
                # browsers try the fragment as written, then decoded
                if parts.fragment not in ids and unquote(parts.fragment) not in ids:
                    broken.append(f"{name}: {href} (no anchor)")
    return broken


def test_every_local_link_resolves(site):
    broken = broken_links(site)
    assert not broken, "\n".join(broken)


def test_every_link_of_the_solutions_pages_resolves(site):
    """Issue 31: the solutions pages linked to appendix-errata.html in their own folder,
    where it is not (the appendix has no solutions page). The edition's solutions pages (of
    ``SOLVED``) exist, each course page links to its own, and every link of theirs resolves."""
    made = sorted(p.name for p in (site / "solutions").glob("*.html"))
    assert made == [f"{stem}.html" for stem in SOLVED]
    for stem in SOLVED:
        assert f'href="solutions/{stem}.html"' in (site / f"{stem}.html").read_text("utf-8")
    solutions_site = [line for line in broken_links(site) if line.startswith("solutions/")]
    assert not solutions_site, "\n".join(solutions_site)


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
    assert (site / build_html.MATHJAX_URL).is_file()
    # the file really is MathJax 3 with SVG output, checked against the pinned tarball
    text = (site / build_html.MATHJAX_URL).read_text(encoding="utf-8")
    assert "3.2.2" in text and "SVG" in text
    assert (mathjax / "LICENSE").is_file()
    for name, page in pages.items():
        assert build_html.MATHJAX_URL in page.scripts, f"{name} does not load the local MathJax"
        assert "window.MathJax = {" in "".join(page.inline_scripts), f"{name}: no configuration"


def test_the_mathjax_tarball_is_checked_against_its_pin(tmp_path):
    name = build_html.MATHJAX_PACKAGE.replace("@", "-") + ".tgz"
    (tmp_path / name).write_bytes(b"not the real tarball")
    with pytest.raises(SystemExit, match="does not match the pinned SHA-512"):
        build_html.mathjax_tarball(cache=tmp_path)


def explorer_cells(nb):
    return [c for c in nb.cells if build_html.shows_explorer(c)]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_explorer_cells_show_a_precomputed_explorer_never_a_widget_repr(notebook, site):
    text = (site / notebook.with_suffix(".html").name).read_text(encoding="utf-8")
    nb = nbformat.read(notebook, as_version=4)
    assert "(children=" not in text, f"{notebook.name}: a widget's text repr is on the page"
    players = text.count('<div class="course-static-explorer"')
    notes = text.count(f'class="{build_html.NEEDS_KERNEL_CLASS}"')
    assert players + notes == len(explorer_cells(nb)), (players, notes, len(explorer_cells(nb)))
    if players + notes:
        url = build_html.binder_url()
        assert url is None or url.replace("&", "&amp;") in text
        assert "<code>make lab</code>" in text


def test_without_frames_explorer_cells_say_they_need_a_kernel():
    nb = nbformat.read(ROOT / "notebooks" / "04-scaling.ipynb", as_version=4)
    cleaned = build_html.drop_widget_state(nb, "https://binder.example/launch")
    shown = [c for c in cleaned.cells if build_html.shows_explorer(c)]
    assert shown
    for cell in shown:
        (output,) = cell.outputs
        assert build_html.NEEDS_KERNEL_CLASS in output.data["text/html"]
        assert "https://binder.example/launch" in output.data["text/html"]


def test_the_whole_edition_stays_under_50_mb(site):
    size = sum(p.stat().st_size for p in site.rglob("*")  # solutions pages: only after
               if p.is_file() and "solutions" not in p.relative_to(site).parts)  # make solutions
    print(f"\n[static edition] {size / 1e6:.1f} MB in {site}")
    assert size < 50e6, f"the static edition is {size / 1e6:.1f} MB"


# Every load of the pages, whatever its scheme (file:// included), must succeed; these
# scripts run in the page once MathJax has finished.
MATH_STATE = r"""async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  await document.fonts.ready;
  return {
    typeset: document.querySelectorAll('mjx-container svg').length,
    untypeset: [...document.querySelectorAll('.jp-RenderedMarkdown, .jp-RenderedHTMLCommon')]
      .filter(e => /(^|[^\\$])\$[^$\s][^$]*\$/.test(e.innerText)).length,
    errors: document.querySelectorAll('mjx-merror, [data-mjx-error]').length,
    fontErrors: [...document.fonts].filter(f => f.status === 'error').map(f => f.family),
    brokenImages: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).length,
    smallest: Math.min(...[...document.querySelectorAll('mjx-container')]
      .map(c => parseFloat(getComputedStyle(c).fontSize))),
  };
}"""


def test_every_page_loads_everything_and_typesets_its_maths_offline(site, browser):
    """Open every page from disk in Chromium, every http(s) request refused.

    Any failed request (file:// included), any HTTP error, any console error or uncaught
    exception, any font that failed to load, any broken image or MathJax error fails it.
    """
    from conftest import SCREENSHOTS

    problems, typeset = [], {}
    # ``browser``: the session's one Chromium (tests/conftest.py), shared with the JupyterLab
    # tests (Playwright's sync API cannot start a second one while it runs)
    context = browser.new_context(viewport={"width": 1100, "height": 1400})
    try:
        page = context.new_page()
        current = {"name": None}

        def note(text):
            problems.append(f"{current['name']}: {text}")

        def refuse(route):
            if route.request.url.startswith(("http:", "https:")):
                note(f"tried to fetch {route.request.url}")
                return route.abort()
            return route.continue_()

        page.route("**/*", refuse)
        page.on("requestfailed", lambda r: note(f"failed to load {r.url}: {r.failure}"))
        page.on("response", lambda r: r.status >= 400 and note(f"{r.status} for {r.url}"))
        page.on("console", lambda m: m.type in {"error", "warning"}
                and note(f"console {m.type}: {m.text}"))
        page.on("pageerror", lambda exc: note(f"uncaught {exc}"))
        for path in sorted(site.glob("*.html")):
            current["name"] = path.name
            page.goto(path.as_uri(), timeout=120_000, wait_until="load")
            state = page.evaluate(MATH_STATE)
            typeset[path.name] = state["typeset"]
            if state["errors"] or state["fontErrors"] or state["brokenImages"]:
                note(f"{state}")
            if state["untypeset"]:
                note(f"{state['untypeset']} blocks still show $...$ as text")
            if state["typeset"] and state["smallest"] < 12:
                note(f"a formula is set in {state['smallest']:.1f} px type")
            if path.stem == "04-scaling":
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SCREENSHOTS / f"static-{path.stem}.png"))
    finally:
        context.close()
    assert not problems, "\n".join(problems)
    # Every section with formulas shows them typeset (the index has the formula too).
    assert typeset["00-index.html"] > 0 and typeset["04-scaling.html"] > 0, typeset


# For one player: its first control moved, position by position, until the image changes
# (a learner's slide); resolves to what changed and how long that move took.
MOVE = r"""async (root) => {
  const data = JSON.parse(root.querySelector('.cse-data').textContent);
  const input = root.querySelector('[data-control="0"]');
  const img = root.querySelector('.cse-image'), readout = root.querySelector('.cse-readout');
  const before = [img.src, readout.innerHTML];
  const count = data.controls[0].labels.length, start = data['default'][0];
  for (let step = 1; step < count; step++) {
    const t0 = performance.now();
    if (input.type === 'checkbox') { input.checked = !input.checked; }
    else { input.value = String((start + step) % count); }
    input.dispatchEvent(new Event('input'));
    await img.decode();
    const ms = performance.now() - t0;
    if (img.src !== before[0]) {
      return {ms, image: true, readout: readout.innerHTML !== before[1],
              readoutCanChange: data.readouts.length > 1, shows: img.naturalWidth > 0,
              name: input.closest('label').textContent.trim()};
    }
  }
  return {ms: 0, image: false, readout: false, readoutCanChange: false, shows: false,
          name: input.closest('label').textContent.trim()};
}"""


def test_every_precomputed_explorer_moves_in_a_browser(site, browser):
    """On file://, with no kernel and no network: moving a slider changes image and read-out."""
    from conftest import SCREENSHOTS

    problems, latencies, moved = [], [], 0
    # ``browser``: the session's one Chromium (tests/conftest.py), shared with the JupyterLab
    # tests (Playwright's sync API cannot start a second one while it runs)
    context = browser.new_context(viewport={"width": 1100, "height": 1400})
    try:
        page = context.new_page()
        page.route("**/*", lambda route: route.abort()
                   if route.request.url.startswith(("http:", "https:"))
                   else route.continue_())
        page.on("pageerror", lambda exc: problems.append(f"uncaught {exc}"))
        for nb in NOTEBOOKS:
            path = site / nb.with_suffix(".html").name
            page.goto(path.as_uri(), timeout=120_000, wait_until="load")
            players = page.locator(".course-static-explorer")
            for k in range(players.count()):
                result = page.evaluate(MOVE, players.nth(k).element_handle())
                latencies.append(result["ms"])
                where = f"{path.name} player {k} ({result['name'][:40]})"
                if not (result["image"] and result["shows"]):
                    problems.append(f"{where}: the image did not change")
                if result["readoutCanChange"] and not result["readout"]:
                    problems.append(f"{where}: the read-out did not change")
                moved += 1
                if k == 0 and nb.stem in {"07-causal-masking", "11-a-real-model"}:
                    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                    players.nth(k).screenshot(
                        path=str(SCREENSHOTS / f"static-explorer-{nb.stem}.png"))
    finally:
        context.close()
    # every explorer of the course has a player (a new one needs its MAIN_CONTROLS entry)
    expected = sum(len(explorer_cells(nbformat.read(nb, as_version=4))) for nb in NOTEBOOKS)
    assert moved == expected and moved > 0, (moved, expected)
    assert not problems, "\n".join(problems)
    print(f"\n[static explorers] {moved} moved; in-page latency median "
          f"{sorted(latencies)[len(latencies) // 2]:.0f} ms, max {max(latencies):.0f} ms")


#: How the README and the maintainers' guide state the edition's size (its solutions pages,
#: which exist only after `make solutions`, stated apart).
STATED_SIZE = re.compile(r"edition is\s+about (\d+) MB without its solutions pages", re.S)


def test_the_stated_size_of_the_edition_is_its_size(site):
    """Issue 31: the README said 39 MB when the edition was 47 MB. What README.md and
    docs/maintaining.md state is the built edition's size without its solutions pages (files'
    total, MB = 10^6 bytes) within 15%: a figure that goes stale fails here."""
    size = sum(p.stat().st_size for p in site.rglob("*")
               if p.is_file() and "solutions" not in p.relative_to(site).parts) / 1e6
    for doc in (ROOT / "README.md", ROOT / "docs" / "maintaining.md"):
        stated = [int(m) for m in STATED_SIZE.findall(doc.read_text(encoding="utf-8"))]
        assert stated, f"{doc.name} does not state the edition's size"
        for mb in stated:
            assert abs(mb - size) <= 0.15 * size, f"{doc.name} says {mb} MB, the edition is " \
                                                  f"{size:.1f} MB"
