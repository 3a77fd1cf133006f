"""The solutions built from the notebooks' exercise cells make every check say right.

tools/solutions.py replaces each exercise cell (tagged ``exercise``) by its solution kept in the
cell's metadata. Every notebook is executed by nbval in `make test` with its exercises answered
right after them, once per dispatch configuration (tools/solved_for_nbval.py: the copies keep
every cell and stored output of the course, which nbval compares, and probes read the
``correct`` attribute of every Feedback the kernel returned, so the verdicts are read, not
their printed text). Here: that
every placeholder is an exercise with a solution, that the copies are made as nbval needs
them, that the probes fail a wrong answer, and the test of answers shown above an exercise
(``answers_shown_above`` of tests/solution_leaks.py, which the probes call).
"""

import ast
import importlib.util
import re
from pathlib import Path

import nbformat
import pytest
from solution_leaks import NOTEBOOKS, ROOT, read, solutions

CHECK_CALL = re.compile(r"^check_\w+\(", re.MULTILINE)
PLACEHOLDER = re.compile(  # answer = None, a stub that raises, returns None or is `...`
    r"^\s*((answer\w*|prediction|difference) = None\b|raise NotImplementedError"
    r"|(return None|\.\.\.)\s*# your code here)", re.MULTILINE)


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

# The solved notebooks are executed by nbval in `make test`, once per dispatch configuration:
# tools/solved_for_nbval.py writes every notebook as shipped with its exercises answered and
# probed after them, and the probes assert there that every check says right and no answer is
# shown above its exercise (answers_shown_above, tests/solution_leaks.py). Here: that the
# copies are made so, and that the probes fail.
spec_solved = importlib.util.spec_from_file_location("course_solved_for_nbval",
                                                     ROOT / "tools" / "solved_for_nbval.py")
solved_for_nbval = importlib.util.module_from_spec(spec_solved)
spec_solved.loader.exec_module(solved_for_nbval)


def _tags(cell):
    return cell.get("metadata", {}).get("tags", [])


def _group(course, i, exercises):
    """Exercise cell ``i`` and the check cells right after it (indices in the course)."""
    group = [i]
    while (group[-1] + 1 < len(course.cells) and group[-1] + 1 not in exercises
           and course.cells[group[-1] + 1].cell_type == "code"
           and CHECK_CALL.search(course.cells[group[-1] + 1].source)):
        group.append(group[-1] + 1)
    return group


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
def test_the_solved_copy_keeps_every_course_cell_and_answers_each_exercise_after_it(path):
    """Every cell of the course, in order, with its source and stored outputs (so nbval
    compares all of them, the unanswered exercises' too); after each exercise and its check
    cells: the solution, a probe of its answers and each check again keeping its verdict,
    outputs ignored; every check cell of the course is answered so; the last cell asserts."""
    course, solved = read(path), solved_for_nbval.solved_copy(path)
    where = [k for k, c in enumerate(solved.cells) if solved_for_nbval.PROBE_TAG not in _tags(c)]
    assert [solved.cells[k] for k in where] == course.cells
    exercises = solutions.exercise_cells(course)
    answered_checks = set()
    for i in exercises:
        group = _group(course, i, set(exercises))
        solution = solutions.solution_of(course.cells[i])
        expected = [solved_for_nbval.keep_verdict(solution, i)
                    if CHECK_CALL.search(solution) else solution, None]
        expected += [solved_for_nbval.keep_verdict(course.cells[j].source, j) for j in group[1:]]
        after = solved.cells[where[group[-1]] + 1:where[group[-1]] + 1 + len(expected)]
        assert len(after) == len(expected)
        for cell, source in zip(after, expected):
            assert {"nbval-ignore-output", solved_for_nbval.PROBE_TAG} <= set(_tags(cell))
            if source is None:
                assert cell.source.startswith("# probe: the answers of the exercise above")
            else:
                assert cell.source == source
        answered_checks |= {j for j, source in zip([i, *group[1:]], [solution, *(
            course.cells[j].source for j in group[1:])]) if CHECK_CALL.search(source)}
        assert all(f"_probe_verdicts[{j}] = (" in c.source
                   for j, c in zip(group[1:], after[2:]))
    course_checks = {j for j, c in enumerate(course.cells) if c.cell_type == "code" and (
        CHECK_CALL.search(solutions.solution_of(c) if j in exercises else c.source))}
    assert answered_checks == course_checks and course_checks
    probes = [c for c in solved.cells if solved_for_nbval.PROBE_TAG in _tags(c)]
    assert len(probes) == 2 * len(exercises) + len(course_checks - set(exercises)) + 1
    assert solved.cells[-1].source.startswith("# probe: every check says right")
    assert "nbval-ignore-output" not in _tags(solved.cells[-1])


def test_a_check_cell_that_follows_no_exercise_is_refused(tmp_path):
    nb = nbformat.v4.new_notebook()
    ex = nbformat.v4.new_code_cell("answer = None")
    ex.metadata = {"tags": ["exercise"], "solution": ["answer = 64"]}
    nb.cells = [ex, nbformat.v4.new_markdown_cell("A word between."),
                nbformat.v4.new_code_cell("check_cells(answer, n=8, h=1)")]
    nbformat.write(nb, tmp_path / "99-fake.ipynb")
    with pytest.raises(ValueError, match="cell 2 calls a check but does not follow"):
        solved_for_nbval.solved_copy(tmp_path / "99-fake.ipynb")


def test_notebooks_without_exercises_are_copied_unchanged():
    for path in NOTEBOOKS:
        if path not in WITH_EXERCISES:
            assert solved_for_nbval.solved_copy(path) == read(path), path.name


def _fake_course(tmp_path, solution, question="**1.** How many cells has an 8 x 8 matrix?",
                 leaks=True):
    """A course notebook of one exercise whose solution is ``solution``, and its solved copy."""
    nb = nbformat.v4.new_notebook()
    ex = nbformat.v4.new_code_cell("answer = None  # your code here\ncheck_cells(answer, n=8, h=1)")
    ex.metadata = {"tags": ["exercise"], "solution": [solution]}
    nb.cells = [nbformat.v4.new_code_cell("from attn_core.checks import check_cells"),
                nbformat.v4.new_markdown_cell(question), ex]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    path = tmp_path / "99-fake.ipynb"
    nbformat.write(nb, path)
    return solved_for_nbval.solved_copy(path, leaks=leaks)


@pytest.mark.slow  # runs a notebook in a Jupyter kernel: make test's, not make check's
@pytest.mark.parametrize("solution, error", [
    ("answer = 64\ncheck_cells(answer, n=8, h=1)", None),
    ("answer = 65\ncheck_cells(answer, n=8, h=1)", "not right"),
    ("answer = 64\nprint(answer)", "AssertionError"),  # the check cell lost its check
], ids=["right", "wrong", "no-verdict"])
def test_the_probes_fail_a_wrong_or_unchecked_answer(tmp_path, solution, error):
    from nbclient import NotebookClient

    solved = _fake_course(tmp_path, solution)
    NotebookClient(solved, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    final = solved.cells[-1].outputs
    errors = [o for o in final if o.output_type == "error"]
    if error is None:
        assert not errors and "every check right" in final[0]["text"], final
    else:
        assert errors and error in (errors[0]["ename"] + ": " + errors[0]["evalue"]), final


@pytest.mark.slow  # runs a notebook in a Jupyter kernel: make test's, not make check's
def test_the_last_probe_finds_an_answer_shown_above_and_a_copy_with_env_leaves_it_out(tmp_path):
    """The answer (256 cells) printed in the question: the copy without ``--env`` fails on it;
    a copy with ``--env`` (``leaks=False``, what ``build`` makes) checks the verdicts only."""
    from nbclient import NotebookClient

    said = "**1.** A 16 x 16 matrix has 256 cells. How many has it with one head?"
    runs = {}
    for leaks in (True, False):
        solved = _fake_course(tmp_path, "answer = 256\ncheck_cells(answer, n=16, h=1)",
                              question=said, leaks=leaks)
        NotebookClient(solved, timeout=120, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
        runs[leaks] = solved.cells[-1].outputs
    errors = [o for o in runs[True] if o.output_type == "error"]
    assert errors and "answer = 256 shown above as '256'" in errors[0]["evalue"], runs[True]
    assert [o.get("text") for o in runs[False]] == [solved_for_nbval.FINAL_WORDS[False] + "\n"]
    env_copy = solved_for_nbval.build(tmp_path / "env", [tmp_path / "99-fake.ipynb"],
                                      {"ATTN_CORE_PERTURB_INIT": "1"})
    assert "answers_shown_above" not in read(env_copy[0]).cells[-1].source


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


@pytest.mark.slow  # runs a notebook in a Jupyter kernel: make test's, not make check's
def test_a_copy_with_an_environment_sets_it_before_numpy_and_proves_the_dispatch(tmp_path):
    """``--env``: the copy's first cell sets the variables before numpy loads, so the kernel
    runs as a process started with them (here numpy's AVX2 target, X86_V3, switched off: the
    notebook's own cell sees it off), and fails if numpy was imported before it. A name numpy
    does not dispatch on (AVX2, a feature: numpy leaves it on) is not held against the run,
    as AVX512_SKX is not on an AVX-512 machine; a list of such names alone proves nothing
    and fails."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import os\nfrom numpy._core._multiarray_umath import __cpu_features__\n"
        "print(__cpu_features__.get('X86_V3'), os.environ['NPY_DISABLE_CPU_FEATURES'])")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, tmp_path / "98-env.ipynb")
    env = {"NPY_DISABLE_CPU_FEATURES": "X86_V3 AVX2"}
    [copy_path] = solved_for_nbval.build(tmp_path / "out", [tmp_path / "98-env.ipynb"], env)
    copy = read(copy_path)
    assert "X86_V3" in copy.cells[0].source and len(copy.cells) == 2
    NotebookClient(copy, timeout=120, kernel_name="python3").execute()
    assert copy.cells[1].outputs[0]["text"] == "False X86_V3 AVX2\n"

    [none] = solved_for_nbval.build(tmp_path / "none", [tmp_path / "98-env.ipynb"],
                                    {"NPY_DISABLE_CPU_FEATURES": "AVX2"})
    none = read(none)
    NotebookClient(none, timeout=120, kernel_name="python3", allow_errors=True).execute()
    errors = [o for o in none.cells[0].outputs if o.output_type == "error"]
    assert errors and "is a dispatch target of this numpy" in errors[0]["evalue"]

    late = read(copy_path)
    late.cells.insert(0, nbformat.v4.new_code_cell("import numpy"))
    NotebookClient(late, timeout=120, kernel_name="python3", allow_errors=True).execute()
    errors = [o for o in late.cells[1].outputs if o.output_type == "error"]
    assert errors and "imported before the environment was set: ['numpy']" in errors[0]["evalue"]


def test_a_copy_made_from_a_relative_path_reads_its_course_notebook_from_anywhere(
        tmp_path, monkeypatch):
    """The Makefile names the nudged notebooks relative to the checkout; the copy's last probe
    reads the course notebook from the kernel's folder (build/nudged/), so it needs the full
    path (it once failed there with FileNotFoundError)."""
    monkeypatch.chdir(ROOT)
    [copy] = solved_for_nbval.build(tmp_path, [Path("notebooks/05-softmax.ipynb")])
    assert repr(str(ROOT / "notebooks" / "05-softmax.ipynb")) in read(copy).cells[-1].source


# --- no cell below an exercise depends on whether it was answered ----------------------------

def _code(source):
    """A cell's source as Python (IPython's % and ! lines blanked)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.splitlines())


def _imported(nb):
    """Names the notebook binds by an import (modules and what is imported from them)."""
    names = set()
    for cell in nb.cells:
        if cell.cell_type == "code":
            for node in ast.walk(ast.parse(_code(cell.source))):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


#: Methods that change their object in place: a random generator's draws, a list's, a dict's
#: or a set's edits, an array's fill and sort.
IN_PLACE = {"random", "integers", "normal", "standard_normal", "uniform", "choice",
            "permutation", "permuted", "shuffle", "exponential", "binomial", "poisson",
            "multinomial", "dirichlet", "beta", "gamma", "bytes", "append", "extend", "insert",
            "remove", "pop", "clear", "update", "setdefault", "add", "discard", "sort", "fill"}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _cell_scope(tree):
    """The nodes of ``tree`` in the cell's own (module) scope: not inside a function, a
    lambda, a class or a comprehension, whose names are their own."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, _SCOPES))


def _free_loads(node):
    """Names ``node`` reads from the cell's scope (a comprehension's or a function's own
    names excluded)."""
    if isinstance(node, _SCOPES):
        own = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
               and isinstance(n.ctx, ast.Store)}
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            own |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Load)} - own
    found = {node.id} if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) else set()
    for child in ast.iter_child_nodes(node):
        found |= _free_loads(child)
    return found


def _bound(node):
    """Names a statement binds in the cell's scope."""
    names = set()
    for n in _cell_scope(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
    return names


def _touched(source, modules):
    """Names a cell binds, and objects it changes in place (``rng.normal(...)``, ``x[0] = 1``:
    rng, x), modules excepted."""
    tree = ast.parse(_code(source))
    names = _bound(tree)
    for n in ast.walk(tree):  # in a comprehension or a function too: the object is outside
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in IN_PLACE and isinstance(n.func.value, ast.Name)):
            names.add(n.func.value.id)
        elif (isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx, ast.Store)
              and isinstance(n.value, ast.Name)):
            names.add(n.value.id)
    return names - modules


def _reads_before_binding(source, names):
    """Which of ``names`` a cell reads before (re)binding them, statement by statement; and
    ``names`` less those it binds."""
    read, left = set(), set(names)
    for statement in ast.parse(_code(source)).body:
        read |= _free_loads(statement) & left
        left -= _bound(statement)
    return read, left


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
def test_no_cell_below_an_exercise_reads_what_the_exercise_binds_or_changes(path):
    """nbval runs each notebook with its exercises answered right after them
    (tools/solved_for_nbval.py), while its stored outputs were made unanswered, as a learner
    first runs it. The cells below an exercise (past its checks) must not read a name the
    stub or its solution binds, nor an object either may change in place (a shared random
    generator drawn from), before binding it again: then they run, and print, the same in
    both states, and the answered run stands for the unanswered one."""
    assert not reads_below_exercises(read(path))


def reads_below_exercises(nb):
    """Each read, below an exercise, of what the exercise binds or changes (see above)."""
    modules = _imported(nb)
    exercises = solutions.exercise_cells(nb)
    found = []
    for i in exercises:
        group = _group(nb, i, set(exercises))
        cell = nb.cells[i]
        watched = (_touched(cell.source, modules) | _touched(solutions.solution_of(cell), modules))
        for j in range(group[-1] + 1, len(nb.cells)):
            if not watched:
                break
            if nb.cells[j].cell_type != "code":
                continue
            read_now, watched = _reads_before_binding(nb.cells[j].source, watched)
            found += [f"cell {j} reads {name!r} of exercise cell {i}" for name in sorted(read_now)]
    return found


@pytest.mark.parametrize("below, found", [
    ("print(answer)", ["cell 3 reads 'answer' of exercise cell 1"]),
    ("x = rng.normal()", ["cell 3 reads 'rng' of exercise cell 1"]),  # drawn from above
    ("y = [x for x in range(3)]", []),  # a comprehension's own x
    ("rng = np.random.default_rng(5)\nx = rng.normal()", []),  # bound again first
    ("def f(answer):\n    return answer", []),  # a function's own name
    ("total = lambda: draws", ["cell 3 reads 'draws' of exercise cell 1"]),
])
def test_reads_below_an_exercise_are_found(below, found):
    nb = nbformat.v4.new_notebook()
    ex = nbformat.v4.new_code_cell("answer = None  # your code")
    ex.metadata = {"tags": ["exercise"],
                   "solution": ["draws = [rng.normal() for _ in range(2)]\nanswer = draws[0]"]}
    nb.cells = [nbformat.v4.new_code_cell("import numpy as np\nrng = np.random.default_rng(0)"),
                ex, nbformat.v4.new_code_cell("check_x(answer)"),
                nbformat.v4.new_code_cell(below)]
    assert reads_below_exercises(nb) == found
