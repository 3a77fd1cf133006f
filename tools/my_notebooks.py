"""The learner's working copy: ``my-notebooks/``, made from the course's ``notebooks/``.

``make lab`` runs this before it opens JupyterLab on ``my-notebooks/00-index.ipynb``. The
learner runs, edits and saves the copies; the course's own notebooks in ``notebooks/``
(which git tracks, the tests read and ``git pull`` updates) are never touched, so using the
course never makes ``make test`` fail and never blocks an update. ``my-notebooks/`` is
ignored by git.

* First run: ``my-notebooks/`` is created with a copy of every file in ``notebooks/``.
* Later runs copy only the files the learner does not have yet (a notebook added to the
  course by a ``git pull``). A file the learner has is NEVER overwritten; when the course's
  version of it changed since it was copied, this says so and how to take the new one.
* ``--fresh NAME`` takes the course's current version of one notebook: the learner's copy is
  first renamed to ``NAME.mine-YYYYmmdd-HHMMSS.ipynb`` beside it (nothing is deleted).

Links between notebooks are relative (``04-scaling.ipynb``) and ``attn_core`` is installed
in the environment, so the copies work exactly like the originals.

Usage (from anywhere)::

    python tools/my_notebooks.py                      # create / complete my-notebooks/
    python tools/my_notebooks.py --fresh 04-scaling   # the course's version of one notebook
"""

import argparse
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COURSE_DIR = ROOT / "notebooks"
WORK_DIR = ROOT / "my-notebooks"
# What was copied, and the course file's SHA-256 at that moment (to tell "the course changed
# it since" from "you changed it").
RECORD = ".copied-from-course.json"
SKIP = {".ipynb_checkpoints", "__pycache__"}


def digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def course_files(course_dir):
    """Every file of the course folder, as paths relative to it (checkpoints left out)."""
    course_dir = Path(course_dir)
    return sorted(p.relative_to(course_dir) for p in course_dir.rglob("*")
                  if p.is_file() and not SKIP.intersection(p.relative_to(course_dir).parts))


def read_record(work_dir):
    path = Path(work_dir) / RECORD
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def write_record(work_dir, record):
    text = json.dumps(record, indent=1, sort_keys=True) + "\n"
    (Path(work_dir) / RECORD).write_text(text, encoding="utf-8")


def sync(course_dir=COURSE_DIR, work_dir=WORK_DIR):
    """Copy into ``work_dir`` the course files it lacks; never overwrite one.

    Returns ``(copied, updated_in_course)``: the relative paths copied now, and those the
    learner has whose course version changed since they were copied.
    """
    course_dir, work_dir = Path(course_dir), Path(work_dir)
    if not course_dir.is_dir():
        raise FileNotFoundError(f"course_dir: no folder {course_dir}")
    work_dir.mkdir(parents=True, exist_ok=True)
    record = read_record(work_dir)
    copied, updated = [], []
    for rel in course_files(course_dir):
        src, dst = course_dir / rel, work_dir / rel
        key = rel.as_posix()
        if dst.exists():
            if key in record and record[key] != digest(src):
                updated.append(rel)
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        record[key] = digest(src)
        copied.append(rel)
    write_record(work_dir, record)
    return copied, updated


def notebook_name(name):
    """'04-scaling', '04-scaling.ipynb' or 'notebooks/04-scaling.ipynb' -> '04-scaling.ipynb'."""
    name = Path(str(name)).name
    return name if name.endswith(".ipynb") else f"{name}.ipynb"


def fresh(name, course_dir=COURSE_DIR, work_dir=WORK_DIR, stamp=None):
    """Replace the learner's copy of one notebook by the course's; keep theirs renamed.

    Returns the path the learner's copy was moved to, or None if they had none.
    """
    course_dir, work_dir = Path(course_dir), Path(work_dir)
    name = notebook_name(name)
    src = course_dir / name
    if not src.is_file():
        known = ", ".join(p.stem for p in sorted(course_dir.glob("*.ipynb")))
        raise FileNotFoundError(f"name: the course has no notebook {name!r} (it has: {known})")
    work_dir.mkdir(parents=True, exist_ok=True)
    dst = work_dir / name
    kept = None
    if dst.exists():
        stamp = stamp or time.strftime("%Y%m%d-%H%M%S")
        kept = dst.with_name(f"{dst.stem}.mine-{stamp}.ipynb")
        dst.rename(kept)
    shutil.copy2(src, dst)
    record = read_record(work_dir)
    record[name] = digest(src)
    write_record(work_dir, record)
    return kept


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fresh", metavar="NAME",
                        help="take the course's version of this notebook (yours is kept, renamed)")
    parser.add_argument("--course", type=Path, default=COURSE_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, default=WORK_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        if args.fresh:
            kept = fresh(args.fresh, args.course, args.work)
            name = notebook_name(args.fresh)
            if kept:
                print(f"your copy is now {kept.name}; {args.work.name}/{name} is the course's")
            else:
                print(f"copied the course's {name} into {args.work.name}/")
            return 0
        copied, updated = sync(args.course, args.work)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if copied:
        print(f"{args.work.name}/: copied {len(copied)} file(s) from the course: "
              + ", ".join(p.as_posix() for p in copied))
    for rel in updated:
        stem = Path(rel).stem
        print(f"note: the course updated {rel.as_posix()} since you copied it; yours is kept. "
              f"For the new version: make fresh NB={stem} "
              f"(python tools/my_notebooks.py --fresh {stem}); yours is then renamed, not lost.")
    print(f"your notebooks: {args.work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
