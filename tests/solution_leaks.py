"""No exercise's answer is printed above it: ``answers_shown_above``, which the last probe of
every solved copy calls inside the notebook's kernel (tools/solved_for_nbval.py).

Apart from tests/test_solutions.py so that the probe loads only this (nbformat and the
course's tools/solutions.py), not pytest and the tests: the probe runs in every notebook of
every ``make test``.
"""

import importlib.util
import re
from functools import cache
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("course_solutions_leaks",
                                               ROOT / "tools" / "solutions.py")
solutions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(solutions)

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*-*.ipynb"))


def read(path):
    return nbformat.read(path, as_version=4)


def _shown_above(nb, index):
    """The text a learner sees above cell ``index``: markdown, and every stored output."""
    parts = []
    for cell in nb.cells[:index]:
        if cell.cell_type == "markdown":
            parts.append(cell.source)
        for out in cell.get("outputs", []):
            parts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def _number_forms(value, decimals=2):
    """How a printed number could show the answer ``value``: at ``decimals`` (the fewest the
    question accepts) and 3 decimals, or a whole number of at least 3 digits (with or without
    thousands commas). Small whole numbers and round values (0, 0.5, 1) tell nothing."""
    value = float(value)
    if value.is_integer():
        return [f"{int(value)}", f"{int(value):,}"] if abs(value) >= 100 else []
    forms = {f"{value:.{d}f}" for d in range(decimals, 4)}
    return [f for f in forms if f.lstrip("-") not in ("0.00", "0.50", "1.00", "0.000", "0.500",
                                                        "1.000")]


def _found(forms, text):
    return [f for f in forms if re.search(rf"(?<![\d.]){re.escape(f)}(?![\d])", text)]


def _options(markdown):
    """Multiple-choice options of a question: letter -> text (``- b) text`` or ``b) text,``)."""
    found = dict(re.findall(r"^\s*-\s*([a-d])\)\s*(.+)$", markdown, re.MULTILINE))
    if not found:
        found = dict(re.findall(r"\b([a-d])\)\s*(.+?)(?=,\s*[a-d]\)|\.?\s*$)", markdown,
                                re.DOTALL))
    return found


#: A right option this long, and half as long again as every wrong one, stands out by its
#: length alone (it reads as the course's own explanation).
LONG_OPTION = 90


def _shingles(text, n=6):
    words = re.findall(r"[a-z0-9]+", re.sub(r"\$[^$]*\$", " ", text.lower()))
    return {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}


@cache
def _markdown_cells():
    """``(stem, index, source)`` of every markdown cell of the course, read once."""
    return tuple((path.stem, i, cell.source) for path in NOTEBOOKS
                 for i, cell in enumerate(read(path).cells) if cell.cell_type == "markdown")


def _course_prose(skip):
    """Every markdown cell of the course, but the question's own (``skip``: (stem, index))."""
    return "\n".join(source for stem, i, source in _markdown_cells() if (stem, i) != skip)


def answers_shown_above(path, answers):
    """``(exercise number, what gave it away)`` for each exercise whose answer is shown above."""
    nb = read(path)
    leaks = []
    for number, (index, values) in enumerate(zip(solutions.exercise_cells(nb), answers), 1):
        above = _shown_above(nb, index)
        for name, value in values.items():
            if isinstance(value, bool) or value is None:
                continue
            if isinstance(value, (int, float)):
                asked = re.search(r"(\d) decimals", nb.cells[index - 1].source)
                hits = _found(_number_forms(value, int(asked.group(1)) if asked else 2), above)
            elif isinstance(value, list) and value and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
                forms = [" +".join(re.escape(f"{float(x):.{d}f}") for x in value)
                         for d in (2, 3)]
                hits = [f for f in forms if len(value) > 1 and re.search(f, above)]
            elif isinstance(value, str) and re.fullmatch(r"[a-d]", value):
                options = _options(nb.cells[index - 1].source)
                option = options.get(value, "")
                prose = _course_prose(skip=(path.stem, index - 1))
                hits = sorted(_shingles(option) & _shingles(prose))[:1]
                others = [len(o) for k, o in options.items() if k != value]
                if not hits and others and len(option) > max(LONG_OPTION, 1.5 * max(others)):
                    hits = [f"the only long option ({len(option)} characters, the others at "
                            f"most {max(others)})"]
            else:
                hits = []
            if hits:
                leaks.append((number, f"{name} = {value!r} shown above as {hits[0]!r}"))
    return leaks
