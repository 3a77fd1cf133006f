"""Generate nbgrader source assignments from the course's notebooks (never edit them by hand).

The exercise cells stay the one source (tools/solutions.py reads them): every cell tagged
``exercise`` has its stub as source and its solution in ``metadata["solution"]``, and the
course's check call (``check_...(...)``) ends the exercise cell or fills the cell after it.
From those this writes ``COURSE/source/ASSIGNMENT/NN-name.ipynb`` for nbgrader:

* an **answer cell** (nbgrader "autograded answer") for each exercise: the lines the stub and
  the solution share stay as they are, the solution's own lines go between nbgrader's
  ``### BEGIN SOLUTION`` / ``### END SOLUTION`` markers (the released notebook shows
  ``# YOUR CODE HERE`` there), and a placeholder the stub had (``answer = None``) stays in front
  of them, so that an empty answer still reaches the check as "no answer yet";
* an **autograded test cell** for each check call, worth ``POINTS[check name]`` points (1 by
  default): it runs the course's check, shows its message as the course does (a wrapped
  paragraph; what the student reads in the feedback after grading: the same "✘ Not yet.
  Hint: ..." that names the mistake in the course) and fails unless the check says right;
* **hidden tests** where the check's verdict would give the answer away: an exercise whose
  answer is a value (``answer = None`` in the stub: a list of positions, five row sums) has a
  small space of answers, and a right/wrong oracle in the released notebook would let a student
  try them all. Its test cell shows only whether an answer is there; the check itself sits
  between ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS`` and runs at grading only.
  Exercises that ask for a function keep their check visible: its hints name mistakes, never
  the code;
* every other cell read-only (nbgrader "locked"; the autograder restores it), the navigation
  line dropped.

By default an assignment is the notebook's exercises section: the title, the first code cell
(imports, the seeded generator) and the cells from the ``## Exercises`` heading before the first
exercise to the next ``## `` heading after the last one; ``--whole`` keeps every cell (for a
notebook whose exercises read earlier results; grading then runs the whole notebook).

    python tools/nbgrader_assignments.py 07 --course DIR        # DIR/source/07-causal-masking/
    python tools/nbgrader_assignments.py 07 --course DIR --assignment masking --whole
"""

import argparse
import ast
import re
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))

import solutions  # noqa: E402  (tools/solutions.py: the one reader of exercise cells)

NOTEBOOKS = solutions.NOTEBOOKS
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
#: Points of each check's test cell; a check not listed is worth 1 point. A function to write
#: from scratch is worth more than a value to compute with the course's functions.
POINTS = {
    "check_masked_attention": 3,
    "check_sliding_window_mask": 2,
}
#: A stub line that holds a placeholder value (kept in front of the solution markers).
PLACEHOLDER = re.compile(r"^\s*\w+ = (None|\.\.\.)\b")
#: The test cell's code: the check's message is the cell's output, then the verdict.
VERDICT = """\
from IPython.display import display

feedback = {call}
display(feedback)  # the course's own message: right, or the hint that names the mistake
assert feedback.correct, "not yet right (the message above says why)\""""
PRESENCE = """\
# The check runs when the teacher grades (a hidden test): its verdict would give the answer away.
assert {name} is not None, "no answer yet: replace the placeholder with your answer\""""


#: What ``--assignment`` may be: a folder name nbgrader can split on '+' and put in a path.
ASSIGNMENT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


def check_call(source):
    """``(call source, checked name or None, check name)`` of the cell's last statement, when it
    is a top-level call of a ``check_...`` function; None otherwise."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    if not tree.body:
        return None
    last = tree.body[-1]
    if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
            and isinstance(last.value.func, ast.Name)
            and last.value.func.id.startswith("check_")):
        return None
    args = last.value.args
    checked = args[0].id if args and isinstance(args[0], ast.Name) else None
    return ast.get_source_segment(source, last), checked, last.value.func.id, last.lineno


def split_check(source):
    """``(source without its trailing check call, the call or None)``."""
    found = check_call(source)
    if found is None:
        return source, None
    call, checked, name, lineno = found
    lines = source.splitlines()
    return "\n".join(lines[:lineno - 1]).rstrip(), (call, checked, name)


def answer_source(stub, solution):
    """The answer cell: shared lines as they are, the solution's own between the markers."""
    a, b = stub.splitlines(), solution.splitlines()
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    own = b[head:len(b) - tail]
    if not own:
        raise ValueError(f"the solution adds nothing to the stub:\n{stub}")
    indent = re.match(r"\s*", own[0]).group(0)
    kept = [line for line in a[head:len(a) - tail] if PLACEHOLDER.match(line)]
    return "\n".join(b[:head] + kept + [indent + BEGIN_SOLUTION, *own, indent + END_SOLUTION]
                     + b[len(b) - tail:])


def gives_answer_away(stub):
    """A value to compute (a placeholder in the stub), not a function to write."""
    return any(PLACEHOLDER.match(line) for line in stub.splitlines())


def graded_call(call):
    """The check call with ``hint=True``: a graded answer is the student's last try, so its
    feedback names the mistake and gives the hint at once (the course's checks otherwise hold
    the hint back until a second try)."""
    if not call.endswith(")"):
        raise ValueError(f"call must be a check call ending in ')', got {call!r}")
    head = call[:-1].rstrip().rstrip(",")
    return f"{head}hint=True)" if head.endswith("(") else f"{head}, hint=True)"


def test_source(call, checked, hidden):
    verdict = VERDICT.format(call=graded_call(call))
    if not hidden:
        return verdict
    return "\n".join([PRESENCE.format(name=checked), BEGIN_HIDDEN, verdict, END_HIDDEN])


def grader_meta(kind, grade_id, points=0):
    meta = {"grade": kind == "test", "solution": kind == "answer", "locked": kind != "answer",
            "grade_id": grade_id, "schema_version": 3, "task": False}
    if kind == "test":
        meta["points"] = points
    return meta


def exercise_section(nb):
    """Indices of the cells an assignment keeps (title, first code cell, exercises section)."""
    exercises = solutions.exercise_cells(nb)
    heads = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "markdown" and c.source.startswith("## ")]
    start = max([i for i in heads if i < exercises[0]], default=0)
    end = min([i for i in heads if i > exercises[-1]], default=len(nb.cells))
    title = [i for i, c in enumerate(nb.cells[:start])
             if c.cell_type == "markdown" and c.source.startswith("# ")][:1]
    setup = [i for i, c in enumerate(nb.cells[:start]) if c.cell_type == "code"][:1]
    return title + setup + list(range(start, end))


def assignment(nb, whole=False):
    """The nbgrader source notebook of ``nb`` and its point table ``{grade_id: points}``."""
    exercises = set(solutions.exercise_cells(nb))
    if not exercises:
        raise ValueError(f"it has no exercise (no cell tagged {solutions.TAG!r}): nothing to "
                         "grade; an assignment is made from a notebook's Exercises section")
    keep = range(len(nb.cells)) if whole else exercise_section(nb)
    cells, points, pending = [], {}, None
    for i in keep:
        cell = nbformat.from_dict(nb.cells[i])
        tags = cell.get("metadata", {}).get("tags", [])
        if solutions.NAV_TAG in tags:
            continue
        meta = {k: v for k, v in cell.metadata.items() if k in ("tags",)}
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        number = len(points) + 1
        if i in exercises:
            stub, call = split_check(cell.source)
            solution, _ = split_check(solutions.solution_of(cell))
            cell.source = answer_source(stub, solution)
            cell.metadata = {**meta, "nbgrader": grader_meta("answer", f"answer-{number}")}
            cells.append(cell)
            pending = (stub, call)
            if call is None:  # the check is in the next cell
                continue
        elif pending is not None and cell.cell_type == "code" and check_call(cell.source):
            rest, call = split_check(cell.source)
            pending = (pending[0], call, rest)
        else:
            cell.metadata = {**meta, "nbgrader": grader_meta("locked", f"cell-{i}")}
            cells.append(cell)
            continue
        stub, (call, checked, name), *rest = pending
        hidden = gives_answer_away(stub)
        grade_id = f"test-{number}-{name}"
        points[grade_id] = POINTS.get(name, 1)
        source = "\n\n".join([*(r for r in rest if r), test_source(call, checked, hidden)])
        test = nbformat.v4.new_code_cell(source, metadata={
            "nbgrader": grader_meta("test", grade_id, points[grade_id])})
        cells.append(test)
        pending = None
    if pending is not None:
        raise ValueError("an exercise has no check call after it")
    out = nbformat.v4.new_notebook(cells=cells, metadata=nb.metadata)
    out.metadata.pop("widgets", None)
    return out, points


def find(prefix):
    matches = [p for p in sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb")) if p.stem.startswith(prefix)]
    if len(matches) != 1:
        raise SystemExit(f"{prefix!r} names {len(matches)} notebooks: {[p.name for p in matches]}")
    return matches[0]


def write(path, course, name=None, whole=False):
    """Write the source assignment of the notebook ``path`` under ``course/source/``; return
    ``(notebook path, points)``; the points are also in each test cell's nbgrader metadata."""
    nb, points = assignment(nbformat.read(path, as_version=4), whole=whole)
    folder = Path(course) / "source" / (name or path.stem)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / path.name
    nbformat.write(nb, target)
    return target, points


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", help="notebook name prefixes, e.g. 07")
    parser.add_argument("--course", required=True, type=Path,
                        help="the nbgrader course directory (its source/ is written)")
    parser.add_argument("--assignment", help="assignment name (default: the notebook's name)")
    parser.add_argument("--whole", action="store_true", help="keep every cell of the notebook")
    args = parser.parse_args(argv)
    if args.assignment is not None and not ASSIGNMENT_NAME.fullmatch(args.assignment):
        parser.error(f"--assignment {args.assignment!r} is not allowed: letters, digits, '_', "
                     "'-' and '.' (not first), at most 64 (nbgrader splits names on '+')")
    if args.assignment is not None and len(args.notebooks) > 1:
        parser.error("--assignment names one assignment: give one notebook with it")
    for prefix in args.notebooks:
        path = find(prefix)
        try:
            target, points = write(path, args.course, args.assignment, args.whole)
        except ValueError as e:
            parser.error(f"{path.name}: {e}")
        print(f"{target}: {len(points)} autograded tests, {sum(points.values())} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
