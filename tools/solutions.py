"""Build the solutions notebooks from the course notebooks (one source for both).

Every exercise cell of a course notebook is tagged ``exercise`` and carries its solution in
its metadata: ``metadata["solution"]`` holds the source lines of the same cell answered (a
stub's function written out, an ``answer = None`` line replaced by the code that computes the
answer). JupyterLab and the static edition never render cell metadata, so the learner sees
only the stub. This script writes ``solutions/NN-name.ipynb`` for every notebook that has
exercises: each exercise cell's source replaced by its solution, the navigation line replaced
by a link back to the notebook, and the whole notebook executed (outputs stored, widget state
dropped) so that every check cell shows its verdict.

    python tools/solutions.py                  # all notebooks -> solutions/
    python tools/solutions.py --no-execute     # write the notebooks without running them
    python tools/solutions.py 05-softmax       # only the notebooks whose names start so
    python tools/solutions.py --force          # run them even when up to date

A solution is up to date when its notebook holds, in ``metadata["solutions"]["inputs"]``, the
hash of everything its outputs come from (:func:`inputs_hash`: the solved notebook before it
runs, the attn_core package with its data, the lock of the environment); ``make html`` then
re-runs only the notebooks that changed. The kernel talks to this script over IPC (a Unix
socket in a private temporary folder) where the platform has it, not over TCP: nothing is sent
over the network, and the kernel's warning about unencrypted TCP does not apply.
"""

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
OUT = ROOT / "solutions"
TAG = "exercise"
NAV_TAG = "nav"


def exercise_cells(nb):
    """The indices of the cells tagged ``exercise``."""
    return [i for i, c in enumerate(nb.cells) if TAG in c.get("metadata", {}).get("tags", [])]


def solution_of(cell):
    """The solution source of an exercise cell; ValueError if it has none."""
    solution = cell.get("metadata", {}).get("solution")
    if not solution:
        raise ValueError(f"exercise cell {cell.get('id')} has no metadata['solution']")
    return "".join(solution) if isinstance(solution, list) else str(solution)


def title_of(nb, fallback):
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("# "):
            return cell.source.splitlines()[0][2:].strip()
    return fallback


def solve(nb, name):
    """A copy of ``nb`` with every exercise answered, its nav line a link back to ``name``."""
    solved = nbformat.from_dict(nb)
    cells = []
    for cell in solved.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if NAV_TAG in tags:
            continue
        if TAG in tags:
            cell.source = solution_of(cell)
            cell.metadata.pop("solution", None)
            cell.outputs, cell.execution_count = [], None
        elif cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cells.append(cell)
    head = nbformat.v4.new_markdown_cell(
        f"**Solutions** to [{title_of(nb, name)}](../notebooks/{name}.ipynb): every exercise "
        "answered, every check run. Try the exercises in the notebook first; these answers are "
        "built from the notebook's own source by `make solutions` (tools/solutions.py).",
        metadata={"tags": ["solutions-header"]})
    solved.cells = cells[:1] + [head] + cells[1:] if cells and cells[0].source.startswith("# ") \
        else [head] + cells
    solved.metadata.pop("widgets", None)
    return solved


#: What a solution's outputs depend on besides its notebook: the package it imports (code and
#: stored data) and the locked environment.
DEPENDS_ON = (ROOT / "attn_core", ROOT / "requirements.lock")


def inputs_hash(solved):
    """SHA-256 of the solved notebook (before it runs; its cells' kinds, sources and metadata,
    not their random ids) and of every file in DEPENDS_ON."""
    cells = [(c.cell_type, c.source, c.get("metadata", {})) for c in solved.cells]
    digest = hashlib.sha256(json.dumps([cells, solved.metadata], sort_keys=True).encode("utf-8"))
    for root in DEPENDS_ON:
        files = sorted(root.rglob("*")) if root.is_dir() else [root]
        for path in files:
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(path.relative_to(ROOT).as_posix().encode("utf-8"))
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def is_up_to_date(target, key):
    """True if ``target`` exists, was executed, and was made from inputs hashing to ``key``."""
    if not Path(target).exists():
        return False
    try:
        made = nbformat.read(target, as_version=4).metadata.get("solutions", {})
    except Exception:  # an unreadable or half-written file is not up to date
        return False
    return made.get("inputs") == key and made.get("executed") is True


def _kernel_manager():
    """A kernel manager on IPC transport (Unix sockets in a private folder) where there is
    IPC, else the default TCP one."""
    from jupyter_client import KernelManager

    if os.name != "posix":
        return KernelManager(kernel_name="python3"), None
    folder = tempfile.TemporaryDirectory(prefix="course-kernel-")
    return KernelManager(kernel_name="python3", transport="ipc",
                         ip=os.path.join(folder.name, "kernel")), folder


def execute(nb, timeout=120):
    """Run ``nb`` in a fresh kernel whose working directory is notebooks/ (as the course's)."""
    from nbclient import NotebookClient

    km, folder = _kernel_manager()
    try:
        NotebookClient(nb, km=km, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    finally:
        if km.has_kernel:  # ours, not the client's: shut it down before its sockets go
            km.shutdown_kernel(now=False)
        if folder is not None:
            folder.cleanup()
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    return nb


def with_exercises(prefixes=()):
    """The course notebooks that hold at least one exercise cell (optionally by name prefix)."""
    found = []
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]*-*.ipynb")):
        if prefixes and not any(path.stem.startswith(p) for p in prefixes):
            continue
        nb = nbformat.read(path, as_version=4)
        if exercise_cells(nb):
            found.append((path, nb))
    return found


def build(out=OUT, run=True, prefixes=(), timeout=120, quiet=False, force=False):
    """Write (and with ``run``, execute) the solutions; return the paths of every solution
    notebook, those skipped as up to date included (``force``: run them all)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path, nb in with_exercises(prefixes):
        solved = solve(nb, path.stem)
        target = out / path.name
        shown = target.relative_to(ROOT) if target.is_relative_to(ROOT) else target
        key = inputs_hash(solved)
        if run and not force and is_up_to_date(target, key):
            written.append(target)
            if not quiet:
                print(f"{shown}: up to date")
            continue
        if run:
            execute(solved, timeout)
        solved.metadata["solutions"] = {"inputs": key, "executed": run}
        nbformat.write(solved, target)
        written.append(target)
        if not quiet:
            print(f"{shown}: {len(exercise_cells(nb))} exercises answered"
                  + ("" if run else " (not executed)"))
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="notebook name prefixes (default: all)")
    parser.add_argument("--out", default=str(OUT), help="output folder (default: solutions/)")
    parser.add_argument("--no-execute", action="store_true", help="do not run the notebooks")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per cell")
    parser.add_argument("--force", action="store_true",
                        help="run every notebook, even those whose solution is up to date")
    args = parser.parse_args(argv)
    build(args.out, run=not args.no_execute, prefixes=tuple(args.names), timeout=args.timeout,
          force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
