"""The solutions built from the notebooks' exercise cells make every check say right.

tools/solutions.py replaces each exercise cell (tagged ``exercise``) by its solution kept in the
cell's metadata. Here every solved notebook is executed in a fresh kernel (nbclient), and a
last cell reads the ``correct`` attribute of every Feedback the kernel returned (IPython's
``Out``), so the test reads the checks' verdicts, not their printed text.
"""

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


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
def test_solutions_notebook_runs_and_every_check_says_right(path):
    from nbclient import NotebookClient

    solved = solutions.solve(read(path), path.stem)
    solved.cells.append(nbformat.v4.new_code_cell(PROBE))
    NotebookClient(solved, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    verdicts = json.loads(solved.cells[-1].outputs[0]["text"])
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
