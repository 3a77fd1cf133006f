"""tools/course_updates.py: after an nbgitpuller update, which files kept the student's version.

Here the update is made with the very git commands nbgitpuller runs (classroom/.venv's
nbgitpuller/pull.py: ``commit -am "Automatic commit by nbgitpuller"`` and ``merge -Xours``
with nbgitpuller's committer), on a course of two small files: the course changes one line of
each; the student had changed the same line of one file and another line of the other. Only
the first must be listed. tests/test_classroom.py checks the same after the real nbgitpuller.
"""

import subprocess
from pathlib import Path

from conftest import load_module

ROOT = Path(__file__).resolve().parents[1]
U = load_module("course_updates", ROOT / "tools" / "course_updates.py")

PULLER = ["-c", "user.email=nbgitpuller@nbgitpuller.link", "-c", "user.name=nbgitpuller"]


def git(cwd, *args):
    return subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.org", *args],
                          cwd=cwd, check=True, capture_output=True, text=True, timeout=60).stdout


def lines(n, tag):
    return "".join(f"{tag} line {i}\n" for i in range(n))


def nbgitpuller_update(clone):
    """What nbgitpuller's update does once the course has a new commit."""
    git(clone, "fetch")
    git(clone, "reset", "--mixed")
    if git(clone, "status", "--porcelain", "--untracked-files=no").strip():
        git(clone, *PULLER, "commit", "-am", "Automatic commit by nbgitpuller", "--allow-empty")
    git(clone, *PULLER, "merge", "-Xours", "origin/main")


def edit(path, index, text):
    rows = path.read_text().splitlines(keepends=True)
    rows[index] = text
    path.write_text("".join(rows))


def test_lists_the_files_where_the_students_lines_won(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    (course / "a.ipynb").write_text(lines(20, "a"))
    (course / "b.ipynb").write_text(lines(20, "b"))
    git(course, "init", "-q", "-b", "main")
    git(course, "add", "-A")
    git(course, "commit", "-qm", "the course")
    student = tmp_path / "student"
    git(tmp_path, "clone", "-q", str(course), str(student))
    assert U.kept_versions(student) == []

    edit(student / "a.ipynb", 5, "the student's line 5\n")   # the line the course changes
    edit(student / "b.ipynb", 2, "the student's line 2\n")   # another line than the course's
    edit(course / "a.ipynb", 5, "the course's new line 5\n")
    edit(course / "b.ipynb", 15, "the course's new line 15\n")
    git(course, "commit", "-qam", "course update: lines 5 and 15")
    nbgitpuller_update(student)

    a, b = (student / "a.ipynb").read_text(), (student / "b.ipynb").read_text()
    assert "the student's line 5" in a and "the course's new line 5" not in a  # -Xours won
    assert "the student's line 2" in b and "the course's new line 15" in b     # both arrived
    rows = U.kept_versions(student)
    assert [r["path"] for r in rows] == ["a.ipynb"]
    assert rows[0]["update_subject"] == "course update: lines 5 and 15"
    text = U.report(rows)
    assert "a.ipynb" in text and "b.ipynb" not in text
    # The command it suggests shows the course's version of that file.
    show = text.split("the course's version: ")[1].split(" > ")[0].split()
    assert "the course's new line 5" in git(student, *show[1:])

    # A later update without a conflict adds nothing; the earlier conflict is still listed.
    edit(course / "b.ipynb", 18, "the course's new line 18\n")
    git(course, "commit", "-qam", "course update: line 18")
    nbgitpuller_update(student)
    assert [r["path"] for r in U.kept_versions(student)] == ["a.ipynb"]
    assert U.main(["--repo", str(student)]) == 0


def test_no_update_no_conflict(tmp_path):
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "x.txt").write_text("x\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "x")
    assert U.kept_versions(tmp_path) == []
    assert U.report([]).startswith("No conflicts")
