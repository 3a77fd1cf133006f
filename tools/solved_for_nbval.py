"""Every course notebook, as shipped and then answered, ready for nbval: one run per
dispatch configuration gives every guarantee that used to take two runs.

``make test`` runs nbval on these copies twice: with numpy's AVX-512 kernels on (the machine's
own dispatch) and switched off. Each copy is the course notebook with cells added, none changed:

* every cell of the course keeps its source and stored outputs, so nbval compares every stored
  output of the course, the exercise cells and the checks under them included: they run as a
  learner first meets them, unanswered ("No answer yet");
* right after each exercise and the check cells that follow it, answered copies of them run
  (tagged ``nbval-ignore-output``; they still fail on an error): the exercise with its solution
  (from ``metadata["solution"]``, tools/solutions.py), then each check keeping the Feedback it
  returned; a probe after the answered exercise keeps the values its solution assigned. The
  cells below then run with the exercise answered, as a learner who answered it has them;
* a last cell asserts that every answered check says right, that every exercise was probed,
  and that no answer is shown above its exercise (``answers_shown_above`` of
  tests/solution_leaks.py; in a copy with ``--env`` the last of these is left out: the text
  above each exercise is the same in every copy, and the copy without ``--env`` looks).

Notebooks without exercises are copied unchanged. A check cell that does not follow an exercise
is an error (it could only check the unanswered state). The copies are built, not kept
(``build/solved/``, git-ignored); the kernel runs them from that folder (no notebook reads a
file relative to its own).

A copy may also run with environment variables of its own (``--env NAME=VALUE``): its first cell
sets them before anything imports numpy or attn_core (and fails if something did), so one
pytest session runs the copies of both dispatch configurations and of the nudged weights side
by side, each kernel as a process started with them. With ``NPY_DISABLE_CPU_FEATURES`` that
cell also asserts that numpy runs none of the dispatch targets named (the run proves which
kernels ran; a name numpy does not dispatch on is left as the CPU has it, with a warning).

    python tools/solved_for_nbval.py               # -> build/solved/
    python tools/solved_for_nbval.py --out DIR [--env NAME=VALUE ...] [NOTEBOOK ...]
"""

import argparse
import ast
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import solutions  # noqa: E402  (tools/solutions.py: exercise_cells, solution_of, TAG)

OUT = ROOT / "build" / "solved"
IGNORE = "nbval-ignore-output"
PROBE_TAG = "solutions-probe"
CHECK_CALL = re.compile(r"^check_\w+\(", re.MULTILINE)
ANSWER_NAME = re.compile(r"^(answer\w*|prediction|difference)\s*=", re.MULTILINE)

#: Around a check cell's last expression (the check's call): keep the Feedback it returns.
#: (nbval runs cells without IPython's history, so ``Out`` cannot be read afterwards.)
VERDICT_KEEP = "_probe_verdicts = globals().get('_probe_verdicts', {})  # probe\n"
#: After an exercise cell: the answers its solution assigned, as JSON-like values.
ANSWER_PROBE = """\
# probe: the answers of the exercise above
_probe_answers = globals().get("_probe_answers", [])
_probe_answers.append({{_n: (globals()[_n].tolist() if hasattr(globals()[_n], "tolist")
                             else globals()[_n]) for _n in {names!r}
                        if isinstance(globals().get(_n), (bool, int, float, str, tuple, list))
                        or hasattr(globals().get(_n), "tolist")}})
"""
#: The last cell: every check right, every exercise probed, no answer shown above it.
FINAL_PROBE = """\
# probe: every check says right{leaks_title}
from attn_core.checks._base import Feedback as _Feedback

_probe_verdicts = globals().get("_probe_verdicts", {{}})
_probe_answers = globals().get("_probe_answers", [])
_wrong = {{i: str(v)[:300] for i, v in _probe_verdicts.items()
          if not (isinstance(v, _Feedback) and v.correct)}}
assert not _wrong, f"check cells (by index in the course notebook) not right: {{_wrong}}"
assert {checks} > 0, "no check cell found"
assert len(_probe_verdicts) == {checks}, f"check cells with no verdict: {{sorted(_probe_verdicts)}}"
assert len(_probe_answers) == {exercises}, _probe_answers
"""
#: ... with the answers looked for above their exercises (in the copies without ``--env``:
#: the course's text and its stored outputs are the same in every copy, so one look is enough).
LEAK_PROBE = """\
import importlib.util as _util
from pathlib import Path as _Path

_spec = _util.spec_from_file_location("_course_solution_leaks", {test!r})
_leaks_module = _util.module_from_spec(_spec)
_spec.loader.exec_module(_leaks_module)
_leaks = _leaks_module.answers_shown_above(_Path({course!r}), _probe_answers)
assert not _leaks, "; ".join(f"exercise {{n}}: {{why}}" for n, why in _leaks)
"""
FINAL_WORDS = {True: "every check right; no answer shown above its exercise",
               False: "every check right (answers above their exercises: looked for in the "
                      "copy without --env)"}


def _probe(source):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = [IGNORE, PROBE_TAG]
    return cell


def keep_verdict(source, index):
    """``source`` with its last expression's value kept as ``_probe_verdicts[index]`` (and
    still displayed); unchanged when the cell ends with a statement (no verdict: the last
    probe then fails)."""
    lines = source.splitlines()
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines)
    last = ast.parse(code).body[-1] if code.strip() else None
    if not isinstance(last, ast.Expr) or last.col_offset != 0:
        return source
    head = [VERDICT_KEEP.rstrip("\n"), *lines[:last.lineno - 1]]
    return "\n".join([*head, f"_probe_verdicts[{index}] = (",
                      *lines[last.lineno - 1:last.end_lineno], ")", f"_probe_verdicts[{index}]"])


def _answered(cell, source, index):
    """A copy of course cell ``index`` that runs ``source``, outputs ignored; a check call at
    its end keeps its verdict."""
    return _probe(keep_verdict(source, index) if CHECK_CALL.search(source) else source)


def solved_copy(path, leaks=True):
    """The notebook at ``path`` with each exercise answered and probed right after it (see
    the module); ValueError for a check cell that does not follow an exercise. ``leaks``:
    whether the last probe also looks for answers shown above their exercises."""
    nb = nbformat.read(path, as_version=4)
    exercises = set(solutions.exercise_cells(nb))
    if not exercises:
        return nb
    cells, pending, checks = [], [], 0
    for index, cell in enumerate(nb.cells):
        is_code = cell.cell_type == "code"
        follows = is_code and index not in exercises and CHECK_CALL.search(cell.source)
        if pending and not follows:  # the exercise's group is over: answer it here
            cells += pending
            pending = []
        cells.append(cell)
        if not is_code:
            continue
        if index in exercises:
            solution = solutions.solution_of(cell)
            names = sorted(set(ANSWER_NAME.findall(solution)))
            pending = [_answered(cell, solution, index),
                       _probe(ANSWER_PROBE.format(names=names))]
            checks += bool(CHECK_CALL.search(solution))
        elif follows:
            if not pending:
                raise ValueError(f"{Path(path).name}: cell {index} calls a check but does not "
                                 "follow an exercise cell (or another check right after one)")
            pending.append(_answered(cell, cell.source, index))
            checks += 1
    cells += pending
    source = FINAL_PROBE.format(checks=checks, exercises=len(exercises),
                                leaks_title=", and no answer is shown above its exercise"
                                if leaks else "")
    if leaks:
        source += LEAK_PROBE.format(test=str(ROOT / "tests" / "solution_leaks.py"),
                                    course=str(path))
    final = nbformat.v4.new_code_cell(f"{source}print({FINAL_WORDS[leaks]!r})\n")
    final.metadata["tags"] = [PROBE_TAG]
    final.execution_count = 1  # nbval compares only the outputs of cells that ran
    final.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                            text=FINAL_WORDS[leaks] + "\n")]
    nb.cells = cells + [final]
    nb.metadata.pop("widgets", None)
    return nb


#: The first cell of a copy with an environment of its own (``env``: {name: value}).
ENV_PROBE = """\
# probe: this copy runs with {env!r}, set before numpy is imported
import os as _os
import sys as _sys

_early = sorted({{_m.split(".")[0] for _m in _sys.modules}} & {{"numpy", "attn_core"}})
assert not _early, f"imported before the environment was set: {{_early}}"
_os.environ.update({env!r})
"""
#: ... and, when the environment switches numpy's dispatch targets off, the proof that it did.
DISPATCH_PROBE = """
import importlib.util as _util

from numpy._core._multiarray_umath import __cpu_dispatch__ as _dispatch

# numpy switches off only its dispatch targets (a name it does not dispatch on stays as the CPU
# has it, with an ImportWarning): those must be off, and at least one of them named
_spec = _util.spec_from_file_location("_course_cpu_dispatch", {tool!r})
_cpu = _util.module_from_spec(_spec)
_spec.loader.exec_module(_cpu)
_named = [_t for _t in {targets!r} if _t in _dispatch]
assert _named, f"none of {targets!r} is a dispatch target of this numpy ({{_dispatch}})"
_still = [_t for _t in _named if _t in _cpu.active_targets()]
assert not _still, f"switched off, still active: {{_still}}"
"""


def env_cell(env):
    """The copy's first cell: sets ``env`` ({name: value}) in the kernel before numpy loads."""
    source = ENV_PROBE.format(env=dict(env))
    off = env.get("NPY_DISABLE_CPU_FEATURES", "").replace(",", " ").split()
    if off:
        source += DISPATCH_PROBE.format(targets=off,
                                        tool=str(ROOT / "tools" / "cpu_dispatch.py"))
    return _probe(source)


def build(out=OUT, notebooks=None, env=None):
    """Write a copy of every course notebook (or of ``notebooks``) into ``out`` (emptied
    first), with ``env`` ({name: value}) set by its first cell if given (such a copy does not
    look for answers shown above their exercises again); returns the paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.ipynb"):
        old.unlink()
    written = []
    for path in notebooks or sorted((ROOT / "notebooks").glob("*.ipynb")):
        path = Path(path).resolve()  # the last probe reads the course notebook
        copy = solved_copy(path, leaks=not env)
        if env:
            copy.cells.insert(0, env_cell(env))
        target = out / path.name
        nbformat.write(copy, target)
        written.append(target)
    return written


def _name_value(text):
    name, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise argparse.ArgumentTypeError(f"--env expects NAME=VALUE, got {text!r}")
    return name, value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder (default build/solved)")
    parser.add_argument("--env", type=_name_value, action="append", default=[],
                        metavar="NAME=VALUE", help="set in each copy's kernel (repeatable)")
    parser.add_argument("notebooks", type=Path, nargs="*",
                        help="course notebooks to copy (default: all of notebooks/)")
    args = parser.parse_args(argv)
    written = build(args.out, args.notebooks or None, dict(args.env))
    print(f"{len(written)} notebooks for nbval in {args.out}"
          + (f", each with {dict(args.env)}" if args.env else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
