"""tools/nbgrader_assignments.py: nbgrader source assignments generated from the exercise cells.

The generated notebook is checked against the course notebook it comes from (its exercise
cells, their ``metadata["solution"]`` and their check calls, read here with ``ast`` and plain
string operations, not with the tool's functions), run in a kernel with the solutions in place
(every autograded test passes), and regenerated from a changed exercise (the change shows).
nbgrader's own release/autograde of these notebooks is tested in tests/test_grading.py.
"""

import ast
import copy
import re
from pathlib import Path

import nbformat
import pytest
from conftest import load_module

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "07-causal-masking.ipynb"


A = load_module("course_nbgrader_assignments", ROOT / "tools" / "nbgrader_assignments.py")
WITH_EXERCISES = [p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
                  if any("exercise" in c.get("metadata", {}).get("tags", [])
                         for c in nbformat.read(p, as_version=4).cells)]


def grader(cell):
    return cell.metadata.get("nbgrader", {})


def checks_in(nb):
    """The names of the check functions the course notebook's exercises call, in order: the last
    line of the exercise cell or of the code cell after it."""
    names = []
    cells = nb.cells
    for i, cell in enumerate(cells):
        if "exercise" not in cell.metadata.get("tags", []):
            continue
        for source in (cell.source, *(c.source for c in cells[i + 1:i + 3] if
                                      c.cell_type == "code")):
            # the last statement starting a line with check_...( (a call may wrap lines)
            calls = re.findall(r"^(check_\w+)\(", source, re.M)
            rest = source.split(calls[-1] + "(")[-1].partition("\n")[2] if calls else ""
            if calls and not re.search(r"^\S", rest, re.M):  # nothing after it at the top level
                names.append(calls[-1])
                break
    return names


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
@pytest.mark.parametrize("whole", [False, True], ids=["section", "whole"])
def test_every_exercise_becomes_an_answer_and_a_graded_test(path, whole):
    nb = nbformat.read(path, as_version=4)
    out, points = A.assignment(nb, whole=whole)
    answers = [c for c in out.cells if grader(c).get("solution")]
    tests = [c for c in out.cells if grader(c).get("grade")]
    exercises = [c for c in nb.cells if "exercise" in c.metadata.get("tags", [])]
    assert len(answers) == len(exercises)
    names = checks_in(nb)
    assert len(names) == len(exercises) == len(tests)
    for answer, exercise, test, name in zip(answers, exercises, tests, names):
        solution = "".join(exercise.metadata["solution"])
        # The solution's own lines are between the markers, in order, and nowhere else.
        inside = answer.source.split(A.BEGIN_SOLUTION)[1].split(A.END_SOLUTION)[0]
        stub_lines = set(exercise.source.splitlines())
        own = [line for line in solution.splitlines()
               if line.strip() and line not in stub_lines and not line.startswith("check_")]
        lines = iter(inside.splitlines())
        assert all(line in lines for line in own), (own, inside)  # in order
        assert "check_" not in answer.source.split(A.END_SOLUTION)[1]
        # The test cell calls the course's check and is worth the table's points.
        assert f"feedback = {name}(" in test.source
        # graded once: the feedback gives the hint with the diagnosis, never "ask again"
        assert "hint=True)" in test.source
        assert grader(test)["points"] == A.POINTS.get(name, 1) == points[grader(test)["grade_id"]]
        assert grader(test)["locked"] and not grader(test)["solution"]
        # A value answer's check is hidden; a function's check is visible.
        value = re.search(r"^\s*\w+ = None\b", exercise.source, re.M) is not None
        assert (A.BEGIN_HIDDEN in test.source) == value, (name, test.source)
        if value:
            visible = test.source.split(A.BEGIN_HIDDEN)[0]
            assert name not in visible
    # Everything else is read-only, and the navigation line is gone.
    for cell in out.cells:
        if not (grader(cell).get("solution") or grader(cell).get("grade")):
            assert grader(cell)["locked"] is True
        assert "nav" not in cell.metadata.get("tags", [])
    ids = [grader(c)["grade_id"] for c in out.cells]
    assert len(ids) == len(set(ids))
    for cell in out.cells:
        if cell.cell_type == "code":
            ast.parse(cell.source.replace("%matplotlib inline", ""))


@pytest.mark.slow  # runs a notebook in a Jupyter kernel: make test's, not make check's
def test_the_solved_assignment_passes_every_test_in_a_kernel():
    """Run the generated source (solutions in place) as nbgrader's autograder would: every
    graded cell ends without an error and shows the course's "✔ Right." message."""
    from nbclient import NotebookClient

    out, points = A.assignment(nbformat.read(NOTEBOOK, as_version=4))
    NotebookClient(out, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    graded = [c for c in out.cells if grader(c).get("grade")]
    assert len(graded) == len(points) == 4
    for cell in out.cells:
        if cell.cell_type == "code":
            assert not [o for o in cell.outputs if o.output_type == "error"], cell.source
    for cell in graded:
        text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "")
                       for o in cell.outputs)
        assert text.startswith("✔ Right."), (cell.source, text)


def test_a_changed_exercise_changes_the_generated_assignment():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    before, _ = A.assignment(nb)
    changed = copy.deepcopy(nb)
    ex = [c for c in changed.cells if "exercise" in c.metadata.get("tags", [])]
    # a new line in the first solution, and another check argument in the third exercise
    ex[0].metadata["solution"] = ["".join(ex[0].metadata["solution"]).replace(
        "    return", "    # a changed solution line\n    return")]
    ex[2].source = ex[2].source.replace("window=3)", "window=2)")
    ex[2].metadata["solution"] = ["".join(ex[2].metadata["solution"]).replace(
        "window=3)", "window=2)")]
    after, _ = A.assignment(changed)
    diff = [(b.source, a.source) for b, a in zip(before.cells, after.cells) if b.source != a.source]
    assert len(before.cells) == len(after.cells)
    assert len(diff) == 2, diff
    assert "# a changed solution line" in diff[0][1] and A.BEGIN_SOLUTION in diff[0][1]
    assert "window=2, hint=True)" in diff[1][1] and "window=3, hint=True)" in diff[1][0]


def test_writes_the_course_source_folder(tmp_path):
    target, points = A.write(NOTEBOOK, tmp_path, "masking")
    assert target == tmp_path / "source" / "masking" / NOTEBOOK.name
    again = nbformat.read(target, as_version=4)
    assert {grader(c)["grade_id"]: grader(c)["points"] for c in again.cells
            if grader(c).get("grade")} == points
    assert sorted(p.name for p in target.parent.iterdir()) == [NOTEBOOK.name]


def test_a_notebook_without_exercises_is_refused_with_a_sentence(tmp_path, capsys):
    """It was an IndexError from deep inside; now the tool says which notebook and why."""
    plain = next(p for p in sorted(A.NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))
                 if not A.solutions.exercise_cells(nbformat.read(p, as_version=4)))
    for whole in ([], ["--whole"]):
        with pytest.raises(SystemExit) as info:
            A.main([plain.stem[:2], "--course", str(tmp_path), *whole])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert f"{plain.name}: it has no exercise (no cell tagged 'exercise')" in err, err
        assert "Traceback" not in err
    assert not (tmp_path / "source").exists()
    with pytest.raises(ValueError, match="no exercise"):
        A.assignment(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]))


@pytest.mark.parametrize("name", ["a+b", "../up", "", "x/y", ".hidden", "a" * 65])
def test_a_bad_assignment_name_is_refused(tmp_path, capsys, name):
    with pytest.raises(SystemExit):
        A.main(["07", "--course", str(tmp_path), "--assignment", name])
    assert f"--assignment {name!r} is not allowed" in capsys.readouterr().err
    assert not (tmp_path / "source").exists()
