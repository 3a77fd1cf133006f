"""The README is for learners; teaching and maintaining have their own documents.

A learner needs what the course is, the two commands, Binder and the map: the README keeps
those near its top and links the rest (docs/teaching.md, docs/maintaining.md). Nothing the
README used to say is lost: every section it had is a section of one of the three documents
(or, for the learner's ones, still of the README); every local link in them resolves.
"""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import nav  # noqa: E402

README = ROOT / "README.md"
DOCS = {"teaching": ROOT / "docs/teaching.md", "maintaining": ROOT / "docs/maintaining.md"}
#: Where each section of the long README went ("README": it stayed, maybe shortened).
MOVED = {
    "What you need": "README", "Two commands": "README", "The course map": "README",
    "Your notebooks, and course updates": "README", "Without make (Windows)": "README",
    "Reading without a kernel": "README", "Solutions": "README",
    "Licences and citation": "README",
    "Teaching with this course": "teaching",
    "The same numbers on every machine": "maintaining",
    "The pretrained model (notebook 11)": "maintaining",
    "The tiny GPT (notebook 14)": "maintaining",
    "For maintainers": "maintaining",
}
#: The maintainers' details of the README's shortened learner sections, by heading.
DETAILS = {"maintaining": ("Testing", "The static edition", "How the solutions are made",
                           "Commands", "Layout")}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def headings(path):
    return re.findall(r"^## (.+)$", path.read_text(encoding="utf-8"), re.M)


def test_the_readme_is_for_learners():
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 170, f"README.md has {len(lines)} lines: move detail to docs/"
    top = "\n".join(lines[:110])
    launch = "mybinder.org" if nav.REPO else nav.badge_block()  # no public address: how to run
    for must in ("make lab", launch, nav.README_START, nav.README_END):
        assert must in top, f"{must!r} is not in the README's first 110 lines"
    for doc in DOCS.values():
        assert f"]({doc.relative_to(ROOT)})" in text, f"README.md does not link {doc.name}"


@pytest.mark.parametrize("section", sorted(MOVED))
def test_every_section_of_the_long_readme_landed_somewhere(section):
    where = MOVED[section]
    if where == "README":
        assert section in headings(README)
    else:
        body = DOCS[where].read_text(encoding="utf-8")
        kept = headings(DOCS[where])
        assert (section in kept or section.split(" (")[0] in kept
                or f"# {section}" in body or section == "For maintainers"), section


def test_the_maintainers_details_are_there():
    for where, sections in DETAILS.items():
        assert set(sections) <= set(headings(DOCS[where])), headings(DOCS[where])


@pytest.mark.parametrize("path", [README, *DOCS.values()], ids=lambda p: p.name)
def test_local_links_resolve(path):
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue
        assert (path.parent / target.split("#")[0]).exists(), f"{path.name} links {target}"


def test_anchors_into_the_docs_exist():
    """Links like docs/maintaining.md#the-static-edition point at a heading there."""
    for path in (README, *DOCS.values()):
        for target in LINK.findall(path.read_text(encoding="utf-8")):
            if "#" not in target or target.startswith(("#", "http")):
                continue
            file, anchor = target.split("#", 1)
            slugs = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-")
                     for h in headings(path.parent / file)}
            assert anchor in slugs, f"{path.name}: no heading for #{anchor} in {file}"
