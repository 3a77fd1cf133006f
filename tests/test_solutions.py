"""The solutions built from the notebooks' exercise cells make every check say right.

tools/solutions.py replaces each exercise cell (tagged ``exercise``) by its solution kept in the
cell's metadata. Here every solved notebook is executed in a fresh kernel (nbclient), and a
last cell reads the ``correct`` attribute of every Feedback the kernel returned (IPython's
``Out``), so the test reads the checks' verdicts, not their printed text.
"""

import functools
import importlib.util
import json
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("course_solutions", ROOT / "tools" / "solutions.py")
solutions = importlib.util.module_from_spec(spec)
spec.loader.exec_module(solutions)

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*-*.ipynb"))
CHECK_CALL = re.compile(r"^check_\w+\(", re.MULTILINE)
PLACEHOLDER = re.compile(  # answer = None, a stub that raises, returns None or is `...`
    r"^\s*((answer\w*|prediction|difference) = None\b|raise NotImplementedError"
    r"|(return None|\.\.\.)\s*# your code here)", re.MULTILINE)
PROBE = """\
import json as _json
from attn_core.checks._base import Feedback as _Feedback
print(_json.dumps({k: bool(v.correct) for k, v in Out.items() if isinstance(v, _Feedback)}))
"""


def read(path):
    return nbformat.read(path, as_version=4)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_placeholder_is_an_exercise_with_a_solution(path):
    """No exercise is left out of the solutions: each placeholder cell is tagged and solved."""
    nb = read(path)
    tagged = set(solutions.exercise_cells(nb))
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and PLACEHOLDER.search(cell.source):
            assert i in tagged, f"{path.name} cell {i} has a placeholder but no exercise tag"
    for i in tagged:
        solution = solutions.solution_of(nb.cells[i])
        assert not PLACEHOLDER.search(solution), f"{path.name} cell {i}: solution unanswered"
        assert solution.strip() != nb.cells[i].source.strip()


def test_solve_keeps_the_solution_out_of_the_course_and_in_the_copy():
    path = ROOT / "notebooks" / "05-softmax.ipynb"
    nb = read(path)
    solved = solutions.solve(nb, path.stem)
    assert not any("solution" in c.metadata for c in solved.cells)
    assert not any("nav" in c.metadata.get("tags", []) for c in solved.cells)
    assert "../notebooks/05-softmax.ipynb" in solved.cells[1].source
    sources = [c.source for c in solved.cells]
    for i in solutions.exercise_cells(nb):
        assert solutions.solution_of(nb.cells[i]) in sources
    assert any("solution" in c.metadata for c in read(path).cells)  # the course is untouched


WITH_EXERCISES = [p for p in NOTEBOOKS if solutions.exercise_cells(read(p))]

#: After each solved exercise cell: keep the answers its solution assigned (answer, answer_1,
#: ..., prediction, difference) as JSON values, for the test that looks for them above it.
ANSWER_PROBE = """\
# probe: answers
_probe_answers = globals().get("_probe_answers", [])
_probe_answers.append({{_n: (globals()[_n].tolist() if hasattr(globals()[_n], "tolist")
                             else globals()[_n]) for _n in {names!r}
                        if isinstance(globals().get(_n), (bool, int, float, str, tuple, list))
                        or hasattr(globals().get(_n), "tolist")}})
"""
ANSWER_NAME = re.compile(r"^(answer\w*|prediction|difference)\s*=", re.MULTILINE)
ANSWERS_OUT = "print(_json.dumps(globals().get('_probe_answers', [])))"


@functools.cache
def run_solved(path):
    """The solved notebook, executed once per test session: ``(verdicts, answers, solved)``.

    ``verdicts`` maps check cells' execution counts to the Feedback's truth; ``answers`` holds,
    per exercise in order, the values its solution assigned."""
    from nbclient import NotebookClient

    solved = solutions.solve(read(path), path.stem)
    exercise_ids = {c.get("id") for c in read(path).cells
                    if solutions.TAG in c.get("metadata", {}).get("tags", [])}
    cells = []
    for cell in solved.cells:
        cells.append(cell)
        if cell.get("id") in exercise_ids:
            names = sorted(set(ANSWER_NAME.findall(cell.source)))
            cells.append(nbformat.v4.new_code_cell(ANSWER_PROBE.format(names=names)))
    solved.cells = cells + [nbformat.v4.new_code_cell(PROBE + ANSWERS_OUT)]
    NotebookClient(solved, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    verdicts_text, answers_text = solved.cells[-1].outputs[0]["text"].splitlines()[:2]
    solved.cells = [c for c in solved.cells if not c.source.startswith("# probe: answers")]
    return json.loads(verdicts_text), json.loads(answers_text), solved


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
def test_solutions_notebook_runs_and_every_check_says_right(path):
    verdicts, _, solved = run_solved(path)
    checked = {str(c.execution_count) for c in solved.cells[:-1]
               if c.cell_type == "code" and CHECK_CALL.search(c.source)}
    assert checked, "no check cell found"
    missing = checked - set(verdicts)
    assert not missing, f"check cells whose result is not a Feedback: {sorted(missing)}"
    wrong = [n for n in checked if not verdicts[n]]
    texts = {str(c.execution_count): "".join(o.get("data", {}).get("text/plain", "")
                                             for o in c.outputs)
             for c in solved.cells if c.cell_type == "code"}
    assert not wrong, "checks not right: " + "; ".join(texts[n] for n in wrong)


def test_static_edition_links_to_solutions_only_when_built(tmp_path):
    spec_html = importlib.util.spec_from_file_location("course_html",
                                                       ROOT / "tools" / "build_html.py")
    build_html = importlib.util.module_from_spec(spec_html)
    spec_html.loader.exec_module(build_html)
    path = ROOT / "notebooks" / "05-softmax.ipynb"
    before = len(read(path).cells)
    assert len(build_html.link_solutions(read(path), path.stem, tmp_path).cells) == before
    nbformat.write(solutions.solve(read(path), path.stem), tmp_path / path.name)
    linked = build_html.link_solutions(read(path), path.stem, tmp_path)
    assert len(linked.cells) == before + 1
    assert "(solutions/05-softmax.html)" in "".join(c.source for c in linked.cells)


# --- no exercise's answer is printed above it ----------------------------------------------

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


def _course_prose(skip):
    """Every markdown cell of the course, but the question's own (``skip``: (stem, index))."""
    text = []
    for path in NOTEBOOKS:
        for i, cell in enumerate(read(path).cells):
            if cell.cell_type == "markdown" and (path.stem, i) != skip:
                text.append(cell.source)
    return "\n".join(text)


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


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
def test_no_answer_is_shown_above_its_exercise(path):
    """Every exercise's answer, as its solution computes it, appears nowhere above it: not in a
    stored output, not in the prose; a multiple-choice answer's option is not a sentence of
    the course's own prose (six words in a row), nor the one long, explaining option."""
    _, answers, _ = run_solved(path)
    assert len(answers) == len(solutions.exercise_cells(read(path)))
    leaks = answers_shown_above(path, answers)
    assert not leaks, f"{path.name}: " + "; ".join(f"exercise {n}: {why}" for n, why in leaks)
