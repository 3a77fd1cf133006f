"""The generated navigation is current, its links resolve, and the generator is idempotent."""

import contextlib
import importlib.util
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NAV_SCRIPT = ROOT / "tools" / "nav.py"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

spec = importlib.util.spec_from_file_location("course_nav", NAV_SCRIPT)
nav = importlib.util.module_from_spec(spec)
spec.loader.exec_module(nav)

# [text](target) and ![alt](target); the target ends at whitespace or ')'.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def run_nav(*args):
    """Run tools/nav.py in this process (nbformat is already imported: fast)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = nav.main(list(args))
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def local_targets(markdown):
    for target in LINK.findall(markdown):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue  # http:, https:, mailto:, attachment:, or an anchor in the same file
        yield target.split("#")[0]


def test_nav_check_passes():
    # The real command line, as CI and `make nav` use it.
    result = subprocess.run([sys.executable, str(NAV_SCRIPT), "--check"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_course_list_is_numbered_in_order():
    names = [name for name, _, _ in nav.COURSE]
    assert names[0] == "00-index.ipynb"
    numbered = [name for name in names if not nav.is_appendix(name)]
    # two digits in order without gaps; an inserted section (08b) follows its parent (08)
    main = [name for name in numbered if not nav.is_inserted(name)]
    for i, name in enumerate(main):
        assert re.fullmatch(rf"{i:02d}-[a-z0-9]+(-[a-z0-9]+)*\.ipynb", name), name
    for before, name in zip(numbered, numbered[1:]):
        if nav.is_inserted(name):
            assert re.fullmatch(r"\d\d[b-z]-[a-z0-9]+(-[a-z0-9]+)*\.ipynb", name), name
            assert nav.number(before)[:2] == nav.number(name)[:2], (before, name)
    # appendices (appendix-*.ipynb) come after every numbered notebook
    assert names == numbered + [name for name in names if nav.is_appendix(name)]
    for name in names[len(numbered):]:
        assert re.fullmatch(r"appendix-[a-z0-9]+(-[a-z0-9]+)*\.ipynb", name), name
    assert all(title and line for _, title, line in nav.COURSE)


def test_every_notebook_is_in_the_course_list():
    known = {name for name, _, _ in nav.COURSE}
    assert {p.name for p in NOTEBOOKS} <= known


def test_binder_url_is_built_from_repo():
    if nav.REPO is None:  # no public address yet: no launch link at all
        assert nav.BINDER_URL is None
        return
    assert nav.BINDER_URL == (f"https://mybinder.org/v2/gh/{nav.REPO}/HEAD"
                              "?urlpath=lab/tree/notebooks/00-index.ipynb")


#: Words that mark an address as a placeholder, not a real one.
PLACEHOLDERS = re.compile(r"\b(OWNER|USER(NAME)?|YOUR[-_]?\w*|EXAMPLE|ORG)\b")
LAUNCH_LINK = re.compile(r"https://mybinder\.org/v2/gh/([^/\s)\"']+/[^/\s)\"']+)")


def pages_text():
    """``(page, text)`` of what learners read: the README and every notebook's cells."""
    yield "README.md", (ROOT / "README.md").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        yield path.name, "\n".join(c.source for c in nb.cells)


def test_no_page_shows_a_launch_link_that_cannot_work():
    """Issue 31: the Binder links held the placeholder OWNER in the README, the index and 28
    static pages. REPO is a real owner/name or None; every launch link is built from it, and
    without it no page shows one, only how to run the course (the static edition is checked
    the same way in test_static_html)."""
    assert nav.REPO is None or (re.fullmatch(r"[A-Za-z0-9-]+/[A-Za-z0-9._-]+", nav.REPO)
                                and not PLACEHOLDERS.search(nav.REPO)), nav.REPO
    for page, text in pages_text():
        for repo in LAUNCH_LINK.findall(text):
            assert repo == nav.REPO, f"{page}: a launch link to {repo!r}, REPO is {nav.REPO!r}"
        assert not PLACEHOLDERS.search(" ".join(LAUNCH_LINK.findall(text))), page
    if nav.REPO is None:
        readme = dict(pages_text())["README.md"]
        assert "make lab" in readme.split(nav.BADGE_START)[1].split(nav.BADGE_END)[0]
        index = nbformat.read(ROOT / "notebooks" / nav.INDEX, as_version=4)
        assert any("make lab" in c.source for c in index.cells
                   if nav.BINDER_TAG in c.metadata.get("tags", []))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_starts_and_ends_with_nav(path):
    cells = nbformat.read(path, as_version=4).cells
    assert "nav" in cells[0].metadata.get("tags", []), "first cell is not the nav cell"
    assert "nav" in cells[-1].metadata.get("tags", []), "last cell is not the nav cell"
    assert cells[0].source == cells[-1].source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_links_point_to_existing_files(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for target in local_targets(cell.source):
                assert (path.parent / target).exists(), f"{path.name} links to missing {target}"


def test_readme_links_point_to_existing_files():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert nav.README_START in text and nav.README_END in text
    for target in local_targets(text):
        assert (ROOT / target).exists(), f"README.md links to missing {target}"


def make_notebook(path, cells):
    nb = nbformat.v4.new_notebook(cells=cells)
    nbformat.write(nb, path)
    return path.read_bytes()


def test_nav_inserts_cells_and_is_idempotent(tmp_path):
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    index = tmp_path / "notebooks" / "00-index.ipynb"
    make_notebook(index, [nbformat.v4.new_markdown_cell("# Index")])
    code = nbformat.v4.new_code_cell("print(6 * 7)")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="42\n")]
    code.execution_count = 1
    scores = tmp_path / "notebooks" / "03-scores.ipynb"
    make_notebook(scores, [nbformat.v4.new_markdown_cell("# 03 · Scores"), code])

    assert run_nav("--check", "--root", str(tmp_path)).returncode == 1
    first = run_nav("--root", str(tmp_path))
    assert first.returncode == 0, first.stderr
    after_first = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    second = run_nav("--root", str(tmp_path))
    assert second.returncode == 0 and "updated" not in second.stdout
    assert after_first == {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert run_nav("--check", "--root", str(tmp_path)).returncode == 0

    cells = nbformat.read(scores, as_version=4).cells
    assert [c.cell_type for c in cells] == ["markdown", "markdown", "code", "markdown"]
    assert cells[0].source == "[< 00 · Course map](00-index.ipynb) | [Contents](00-index.ipynb)"
    assert cells[2].source == "print(6 * 7)" and cells[2].outputs[0].text == "42\n"
    assert cells[2].execution_count == 1
    assert scores.read_text(encoding="utf-8").endswith("}\n")

    index_cells = nbformat.read(index, as_version=4).cells
    assert index_cells[0].source == "**Contents** | [03 · Step 1: scores >](03-scores.ipynb)"
    course_map = [c for c in index_cells if "course-map" in c.metadata.get("tags", [])]
    assert len(course_map) == 1
    assert "3. [Step 1: scores](03-scores.ipynb)" in course_map[0].source
    assert "5. Step 3: softmax *(not written yet)*" in course_map[0].source
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "3. [Step 1: scores](notebooks/03-scores.ipynb)" in readme


def test_nav_check_rejects_unknown_notebook(tmp_path):
    (tmp_path / "notebooks").mkdir()
    make_notebook(tmp_path / "notebooks" / "99-scratch.ipynb", [])
    result = run_nav("--check", "--root", str(tmp_path))
    assert result.returncode == 1 and "99-scratch.ipynb" in result.stderr


def test_the_course_map_gives_each_notebook_an_estimated_time_and_says_how_it_was_made():
    """Issue 31: the index never said how long the course or a notebook takes. The map gives
    every notebook's time, the course's total, and says they are estimates and how made."""
    index = nbformat.read(ROOT / "notebooks" / nav.INDEX, as_version=4)
    course_map = next(c.source for c in index.cells if nav.MAP_TAG in c.metadata.get("tags", []))
    listed = [line for line in course_map.splitlines() if re.search(r"\]\([\w.-]+\.ipynb\)", line)]
    assert len(listed) == len(NOTEBOOKS) - 1  # every notebook but the index itself
    for line in listed:
        assert re.search(r"\*\(about \d+ min\)\*$", line), line
    assert "The whole course: about" in course_map and "estimates" in course_map
    assert f"{nav.READ_WORDS_PER_MIN} words a minute" in course_map
    # the calibration the note claims: within 5 minutes of the review's four timings
    review = {"08b-positions.ipynb": 60, "14-a-tiny-gpt.ipynb": 100,
              "15-induction-heads.ipynb": 75, "16-todays-attention.ipynb": 60}
    for name, minutes in review.items():
        if (ROOT / "notebooks" / name).exists():
            got = nav.study_minutes(nbformat.read(ROOT / "notebooks" / name, as_version=4))
            assert abs(got - minutes) <= 10, (name, got, minutes)


def test_which_notebooks_have_an_explorer_is_generated_not_written_by_hand():
    """Issue 31: 00-index said by hand that notebooks 03 to 09 have explorers, out of date
    once 08b and 11 to 16 had theirs. The sentence is generated from the notebooks' cells, and
    no hand-written cell of the index names a range of notebooks with explorers."""
    index = nbformat.read(ROOT / "notebooks" / nav.INDEX, as_version=4)
    course_map = next(c.source for c in index.cells if nav.MAP_TAG in c.metadata.get("tags", []))
    with_explorer = [nav.number(p.name) for p in NOTEBOOKS
                     if not nav.is_appendix(p.name) and p.name != nav.INDEX
                     and nav.has_explorer(nbformat.read(p, as_version=4))]
    line = next(x for x in course_map.splitlines() if "**explorer**" in x)
    assert line.rstrip(".").split(": ")[-1].split(", ") == sorted(
        with_explorer, key=[nav.number(n) for n, _, _ in nav.COURSE].index)
    for cell in index.cells:
        if not {nav.MAP_TAG, nav.NAV_TAG} & set(cell.metadata.get("tags", [])):
            assert not re.search(r"notebooks \d\d to \d\d[^.]*(explorer|Try it)", cell.source)
