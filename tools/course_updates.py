"""Which of my notebooks kept my version where a course update conflicted (after nbgitpuller).

When a student follows the course's nbgitpuller link again, nbgitpuller commits the student's
changes and merges the course's new version with ``git merge -Xours``: where the course changed
the very lines the student had changed, the student's lines win, silently, and the course's
change to those lines never arrives. This lists, for every such merge in the student's copy,
the files where that happened, the course update they missed and how to see the course's
version. It redoes each merge in memory (``git merge-tree --write-tree``, git >= 2.38, which
changes nothing in the working copy) and reports the files that merge would have left
conflicted.

    python tools/course_updates.py                 # in the course folder (attention-course/)
    python tools/course_updates.py --repo PATH     # another copy
    python tools/course_updates.py --json          # for scripts

From a notebook cell: ``!python ../tools/course_updates.py`` (from ``notebooks/``).
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

NBGITPULLER = "nbgitpuller@nbgitpuller.link"  # the committer of nbgitpuller's commits


def git(repo, *args, check=True):
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=check, timeout=120)


def merges(repo):
    """nbgitpuller's merge commits in ``repo``'s history, newest first: (sha, parent1, parent2)."""
    out = git(repo, "log", "--merges", f"--committer={NBGITPULLER}", "--format=%H %P").stdout
    found = []
    for line in out.splitlines():
        sha, *parents = line.split()
        if len(parents) == 2:
            found.append((sha, *parents))
    return found


def conflicted(repo, ours, theirs):
    """The files a plain merge of ``theirs`` into ``ours`` leaves conflicted (none: [])."""
    result = git(repo, "merge-tree", "--write-tree", "--name-only", "--no-messages", ours, theirs,
                 check=False)
    if result.returncode == 0:
        return []
    if result.returncode != 1:
        raise RuntimeError(f"git merge-tree failed: {result.stderr.strip()}")
    return sorted(set(result.stdout.splitlines()[1:]) - {""})


def kept_versions(repo="."):
    """One dict per (merge, file) where the student's version was kept over the course's."""
    rows = []
    for sha, ours, theirs in merges(repo):
        files = conflicted(repo, ours, theirs)
        if not files:
            continue
        subject, date = git(repo, "log", "-1", "--format=%s%x00%cs", theirs).stdout.strip() \
            .split("\0")
        merged_on = git(repo, "log", "-1", "--format=%cs", sha).stdout.strip()
        for path in files:
            rows.append({"path": path, "merged": sha[:10], "merged_on": merged_on,
                         "update": theirs[:10], "update_subject": subject, "update_date": date})
    return rows


def report(rows):
    if not rows:
        return ("No conflicts: every course update reached your notebooks in full "
                "(where you had changed other lines, both your changes and the course's are in).")
    lines = ["Your version was kept where a course update changed the same lines as you did "
             "(nbgitpuller merges with -Xours): the course's change to those lines did not "
             "arrive.", ""]
    for row in rows:
        lines.append(f"* {row['path']}: update {row['update']} \"{row['update_subject']}\" "
                     f"({row['update_date']}), merged {row['merged_on']}.")
        lines.append(f"    the course's version: git show {row['update']}:{row['path']}"
                     f" > course-version{Path(row['path']).suffix}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=".", help="the course folder (a git clone)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    top = git(args.repo, "rev-parse", "--show-toplevel").stdout.strip()
    rows = kept_versions(top)
    print(json.dumps(rows, indent=1) if args.json else report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
