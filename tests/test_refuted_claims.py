"""No notebook, doc, docstring or comment repeats a claim the course has refuted.

A refuted claim fixed in its notebook lives on wherever it was copied: the teachers' guide, the
index, a module's comment. Each phrase below was found false by the review named beside it (or
is the wording of a claim reduced to what was measured); it must not appear in any tracked text
file. Add a phrase here when a review refutes a claim, with the issue that refuted it.

Phrases are matched case-insensitively with any whitespace (a line break) between their words,
and in notebooks' JSON also across the ``"\\n",`` that separates source lines. This file and
``tests/test_prose_numbers.py`` (which plants some of them back to test the prose check) are
not searched.
"""

import functools
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: (phrase, the issue that refuted it, what was found)
REFUTED = [
    ("no head follows the referent", 45,
     "11: issue 31 corrected the reading of the noun swap as support for it; the minimal pairs "
     "show only that no head with a large weight on either noun moves its preference"),
    ("no fixed position gives the copy away", 45, "15's task, corrected by issue 31"),
    ("no position gives it away", 45, "15's task comment, corrected by issue 31"),
    ("with GPT-2's 0.02 a 1,500-step run did not leave the plateau", 45,
     "15, corrected by issue 31 (no such run is stored); 0.02 is GPT-1's paper's scale"),
    ("checked against the table the notebook computed", 45, "15's exercise 3, issue 31"),
    ("keeping them buys nothing", 45,
     "16: keeping character 0 beside a window of 8 wins back +0.0025 +- 0.0004 nats"),
    ("calibrated on one review that timed four notebooks", 45,
     "the study times: that review estimated them; it timed nothing"),
    ("evicting the first characters should cost no more", 45,
     "16: untested, and the control refutes it"),
    ("a third or more of the attention lands on the first token", 45,
     "17: false for layers 11 (0.063), 12 (0.005) and 17 (0.298)"),
    ("a third or more of the attention lands on position 0", 45,
     "17's summary: false for layers 11, 12 and 17"),
    ("a different word in every text", 45, "17: the 32 texts start with 27 distinct tokens"),
    ("one sink wins most of it back", 45,
     "17: Xiao et al. conclude that four initial tokens restore the model, one or two not fully"),
    ("one sink token wins most of it back", 45, "17's summary: the same, credited to Xiao et al."),
    ("four sinks add little to one", 45, "17: not what Xiao et al. report"),
    ("look one to three characters back", 45,
     "14: its layer-1 heads put 0.18-0.21 of their weight on the character itself"),
    ("keep just the first token beside the same window and most of the loss comes back", 45,
     "17: the same claim, credited to Xiao et al."),
    ("128 times less", 45, "18: the cell above prints 255.5 (n / d_k = 256)"),
    ("a sixteenth of the bytes", 45, "18: the explorer's read-out gives 14.22 times fewer"),
]
TEXT_SUFFIXES = {".py", ".md", ".ipynb", ".toml", ".txt", ".json", ".cfg", ".yml", ".yaml",
                 ".cff", ".sh", ".ini", ".html", ".rst", ""}
#: Not searched: the tests. They quote a refuted claim to test that it stays refuted (as this
#: file's list does); what a learner, a teacher or a maintainer reads (the notebooks, docs,
#: attn_core's docstrings and comments, tools/) is searched.
NOT_SEARCHED_UNDER = "tests/"


@functools.lru_cache(maxsize=1)
def _tracked():
    return tuple(tracked_text_files())


def tracked_text_files(root=ROOT):
    names = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.split("\n")
    for name in names:
        path = root / name
        searched = name and not name.startswith(NOT_SEARCHED_UNDER)
        if searched and path.suffix in TEXT_SUFFIXES and path.is_file():
            yield name, path


def phrase_pattern(phrase):
    gap = r'(?:\s|\\n",\s*")+'  # whitespace, or a line break between notebook source lines
    return re.compile(gap.join(re.escape(w) for w in phrase.split()), re.IGNORECASE)


@functools.cache
def _text(path):
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return ""


@functools.cache
def _lower(path):
    return _text(path).lower()


def occurrences(phrase, files):
    pattern = phrase_pattern(phrase)
    longest = max(phrase.lower().split(), key=len)
    found = []
    for name, path in files:
        text = _text(path)
        if longest not in _lower(path):
            continue
        for m in pattern.finditer(text):
            found.append(f"{name}:{text[:m.start()].count(chr(10)) + 1}")
    return found


def test_the_search_finds_a_phrase_across_a_line_break_and_in_notebook_json(tmp_path):
    (tmp_path / "a.md").write_text("the model: keeping\n   them buys nothing at all")
    (tmp_path / "b.ipynb").write_text('"source": ["and keeping them\\n",\n    "buys nothing"]')
    (tmp_path / "c.md").write_text("keeping them buys something")
    files = [(p.name, p) for p in sorted(tmp_path.iterdir())]
    assert occurrences("keeping them buys nothing", files) == ["a.md:1", "b.ipynb:1"]


@pytest.mark.parametrize("phrase, issue, why", REFUTED, ids=[p for p, _, _ in REFUTED])
def test_no_tracked_file_repeats_a_refuted_claim(phrase, issue, why):
    found = occurrences(phrase, _tracked())
    assert found == [], f"refuted in issue {issue} ({why}), still in: {', '.join(found)}"
