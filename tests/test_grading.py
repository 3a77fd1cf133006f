"""A graded class on the classroom hub: nbgrader, five simulated students, each a system user.

The hub runs in its class mode (classroom/jupyterhub_config.py): every student and the teacher
is a Unix user of their own (classroom/users.py: a unique prefix per run, homes mode 0700, real
passwords), logs in at the hub's login form (PAM), and their server and kernels run as them.
The teacher generates notebook 07's assignment from the course's exercise cells
(tools/nbgrader_assignments.py) and releases, collects, autogrades and returns feedback with
nbgrader's own commands, run in the teacher's kernel. Students fetch, submit and fetch feedback
through nbgrader's Assignments panel API in their JupyterLab; their answers are saved through
the contents API, as JupyterLab's Save does:

* student 0 submits the solutions, student 1 typical mistakes (the mask applied after the
  softmax, ...), student 2 the notebook as fetched (empty), student 3 half of it after the due
  date, student 4 never fetches or submits;
* the gradebook's points are compared with the sum of the points of the tests each student's
  answers pass, from the generated assignment's point table (nbgrader metadata);
* the feedback HTML names the mistakes in the checks' words;
* code run in a student's kernel (as that student) tries to read another's home and
  submission, the hidden tests, the gradebook and the hub's database, and to log in as
  someone else, and fails at each; it tries to read, change and delete another's submission in
  the exchange (knowing its folder's name), and fails; it forges a submission in another's name
  (nbgrader's ``--student``), which ``collect`` refuses (classroom/class_exchange.py);
* the class's access rules: only the class's group logs in (a user of the machine outside it,
  with the right password, does not), the exchange and its inbound folder carry the sticky bit,
  submissions, homes and the hub's database are closed to others.

Needs root (it creates and removes system users: always, also when a step fails) and
``make classroom-env``; skipped without them, and fails under CI=true.
"""

import datetime as dt
import json
import os
import re
import secrets
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
from conftest import in_ci, load_module

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "07-causal-masking.ipynb"
ASSIGNMENT = "masking"
HUB_DEADLINE = 1800  # the hub stops by itself after this many seconds (runs took 207-376 s; a
# ceiling against a hang, generous for a busy machine)

pytestmark = pytest.mark.slow


H = load_module("classroom_hub_grading", ROOT / "classroom" / "hub.py")
U = load_module("classroom_users_grading", ROOT / "classroom" / "users.py")


# --- what each student writes in the answer cells (by exercise, 1-4) ---------------------------
def course_solutions():
    """The course's own solutions of notebook 07's exercises, without their check lines."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    out = []
    for cell in nb.cells:
        if "exercise" in cell.metadata.get("tags", []):
            text = "".join(cell.metadata["solution"])
            out.append("\n".join(line for line in text.splitlines()
                                 if not line.startswith("check_")))
    return out


SOLUTIONS = course_solutions()
MISTAKES = {
    # 1: the window one key too wide
    1: SOLUTIONS[0].replace("i - j < window", "i - j <= window"),
    # 2: the rows sum to 1 (what masking BEFORE the softmax gives)
    2: "q0 = np.zeros((5, 2))\nk0 = rng.standard_normal((5, 2))\nanswer = np.ones(5)",
    # 4: the mask applied after the softmax
    4: ("def masked_attention(q, k, v, mask):\n"
        "    w = softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))\n"
        "    return (w * mask) @ v\n"),
}
# (exercise number -> source) per student; which exercises are right follows from it.
ANSWERS = {
    0: {i + 1: s for i, s in enumerate(SOLUTIONS)},
    1: {1: MISTAKES[1], 2: MISTAKES[2], 3: SOLUTIONS[2], 4: MISTAKES[4]},
    2: {},
    3: {1: SOLUTIONS[0], 2: SOLUTIONS[1]},
}
RIGHT = {0: {1, 2, 3, 4}, 1: {3}, 2: set(), 3: {1, 2}}
#: What the feedback of student 1 must say, in the checks' words, per wrong exercise.
NAMED = {1: "yours sees one more", 2: "every row summing to 1 is what masking BEFORE the softmax",
         4: "the mask is applied after the softmax"}


def run_in(kernel, code, timeout=300):
    result = kernel.execute(code, timeout=timeout)
    assert result["status"] == "ok", result["errors"]
    return result["stdout"]


def shell(kernel, *cmd, timeout=300):
    """Run ``cmd`` as the kernel's user (a subprocess of the kernel); return its output."""
    code = ("import json, subprocess\n"
            f"r = subprocess.run({list(cmd)!r}, capture_output=True, text=True)\n"
            "print(json.dumps([r.returncode, r.stdout[-4000:], r.stderr[-8000:]]))")
    rc, out, err = json.loads(run_in(kernel, code, timeout).strip().splitlines()[-1])
    assert rc == 0, f"{cmd}: exit {rc}\n{out}\n{err}"
    return out + err


def open_kernel(user, name="work.ipynb"):
    user.save_notebook(name, nbformat.v4.new_notebook())
    return H.Kernel(user, name).__enter__()


def answer(student, nb_path, answers):
    """Put ``answers`` (exercise number -> source) into the answer cells and save."""
    nb = student.read(nb_path)
    cells = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution")]
    assert len(cells) == 4
    for number, source in answers.items():
        cells[number - 1]["source"] = source
    student.save_notebook(nb_path, nb)


@pytest.fixture(scope="module")
def graded_class():
    missing = H.missing_tools()
    if os.geteuid() != 0:
        missing.append("root (to create the class's system users)")
    tools = ["useradd", "userdel", "chpasswd", "groupadd"]
    if U.closed_ancestors(ROOT):
        tools += ["setfacl", "getfacl"]  # (acl) to let the class pass to this checkout
    for tool in tools:
        if not shutil.which(tool):
            missing.append(tool)
    if missing:
        reason = "the grading test needs " + " and ".join(missing)
        if in_ci():
            pytest.fail(f"{reason}, but CI=true: .ci/run must provide them", pytrace=False)
        pytest.skip(reason)
    prefix = "g" + secrets.token_hex(3)  # unique per run: never someone else's account
    group, teacher_name = f"{prefix}class", f"{prefix}teacher"
    names = [f"{prefix}s{i}" for i in range(5)]
    outsider, outside_group = f"{prefix}x", f"{prefix}other"  # a user of the machine, not the class
    root = Path(tempfile.mkdtemp(prefix="attn-grading-", dir="/tmp"))  # not under 0700 tmp dirs
    hub = None
    kernels = []
    opened = []
    try:
        passwords = U.add_users(root, group, [teacher_name, *names])
        passwords.update(U.add_users(root, outside_group, [outsider]))
        # The class's servers run classroom/.venv and attn_core from this checkout: if it is
        # under a folder others may not pass (root's home), let the class's group pass, for now.
        opened = U.grant_traverse(group, ROOT)
        hub = H.Hub(root, class_group=group, teacher=teacher_name, deadline=HUB_DEADLINE)
        hub.start()
        teacher = hub.student(teacher_name, passwords[teacher_name])
        students = [hub.student(n, passwords[n]) for n in names]
        everyone = [teacher, *students]

        def arrive(user):
            assert user.log_in() == user.name
            user.start_server()

        with ThreadPoolExecutor(3) as pool:
            list(pool.map(arrive, everyone))
        # The course's exchange folders as the hub left them, before the teacher's first
        # release (a student who made them first would stop the release).
        before_release = {name: exchange_folder(root / "exchange" / "attention" / name)
                          for name in ("", "outbound", "inbound")}
        t = open_kernel(teacher)
        kernels.append(t)
        tool = ROOT / "tools" / "nbgrader_assignments.py"
        log = [shell(t, "python", str(tool), "07", "--course", str(teacher.home / "course"),
                     "--assignment", ASSIGNMENT)]
        for cmd in (["db", "assignment", "add", ASSIGNMENT],
                    ["generate_assignment", ASSIGNMENT],
                    ["release_assignment", ASSIGNMENT]):
            log.append(shell(t, "nbgrader", *cmd, "--CourseDirectory.root=" +
                             str(teacher.home / "course")))
        listed = {}
        for i, s in enumerate(students[:4]):
            fetched = s.assignments("fetch", ASSIGNMENT)
            entry = next(a for a in fetched["value"] if a["assignment_id"] == ASSIGNMENT)
            listed[i] = entry["notebooks"][0]["path"]
        course_dir = f"--CourseDirectory.root={teacher.home / 'course'}"
        for i in range(3):
            answer(students[i], listed[i], ANSWERS[i])
            assert students[i].assignments("submit", ASSIGNMENT)["success"]
        # Student 1 forges a later submission in student 2's name (their own answers, which
        # score more than student 2's empty notebook): nbgrader's own option for it.
        forger = open_kernel(students[1], "forge.ipynb")
        kernels.append(forger)
        time.sleep(1.1)
        log.append(shell(forger, "nbgrader", "submit", ASSIGNMENT, f"--student={names[2]}"))
        # The due date: now; student 3 submits after it.
        time.sleep(1.5)
        due = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        log.append(shell(t, "nbgrader", "db", "assignment", "add", ASSIGNMENT,
                         f"--duedate={due}", course_dir))
        time.sleep(1.5)
        answer(students[3], listed[3], ANSWERS[3])
        assert students[3].assignments("submit", ASSIGNMENT)["success"]

        log.append(shell(t, "nbgrader", "collect", ASSIGNMENT, course_dir))
        t0 = time.perf_counter()
        log.append(shell(t, "nbgrader", "autograde", ASSIGNMENT, course_dir))
        autograde_seconds = time.perf_counter() - t0
        for cmd in ("generate_feedback", "release_feedback"):
            log.append(shell(t, "nbgrader", cmd, ASSIGNMENT, course_dir))
        gradebook = json.loads(run_in(t, GRADEBOOK.format(
            db=teacher.home / "course" / "gradebook.db", assignment=ASSIGNMENT)).strip())
        feedback = {}
        for i, s in enumerate(students[:4]):
            assert s.assignments("fetch_feedback", ASSIGNMENT)["success"]
            feedback[i] = sorted(s.home.glob(f"attention/{ASSIGNMENT}/feedback/*/*.html"))
        record(gradebook, feedback, students, autograde_seconds)
        yield {"hub": hub, "teacher": teacher, "students": students, "passwords": passwords,
               "root": root, "gradebook": gradebook, "feedback": feedback, "log": log,
               "autograde_seconds": autograde_seconds, "kernels": kernels, "prefix": prefix,
               "outsider": outsider, "before_release": before_release, "group": group}
    except Exception:
        if hub is not None:
            print(hub.log_tail())
            keep = ROOT / "artifacts" / "grading"
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(hub.log_path, keep / "hub.log")  # the state folder is removed below
        raise
    finally:
        for kernel in kernels:
            try:
                kernel.__exit__(None, None, None)
            except Exception:  # noqa: BLE001  (the hub stops every kernel anyway)
                pass
        if hub is not None:
            hub.stop()
        U.revoke_traverse(group, opened)
        U.remove_users(group, [teacher_name, *names])
        U.remove_users(outside_group, [outsider])
        shutil.rmtree(root, ignore_errors=True)


def exchange_folder(path):
    """``(owner, mode)`` of ``path`` (None when it does not exist or is no folder)."""
    import pwd
    import stat

    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(info.st_mode):
        return None
    return pwd.getpwuid(info.st_uid).pw_name, oct(stat.S_IMODE(info.st_mode))


GRADEBOOK = """\
import json
from nbgrader.api import Gradebook
out = {{}}
with Gradebook("sqlite:///{db}") as gb:
    for sub in gb.assignment_submissions("{assignment}"):
        nb = sub.notebooks[0]
        out[sub.student.id] = {{
            "score": sub.score, "max_score": sub.max_score, "late": sub.total_seconds_late > 0,
            "cells": {{g.name: g.score for g in nb.grades}}}}
print(json.dumps(out))
"""


def record(gradebook, feedback, students, seconds):
    """The class's gradebook and student 1's feedback, for the record (artifacts/grading/)."""
    out = ROOT / "artifacts" / "grading"
    out.mkdir(parents=True, exist_ok=True)
    names = {s.name: f"student {i}" for i, s in enumerate(students)}
    book = {names[k]: v for k, v in gradebook.items()}
    (out / "gradebook.json").write_text(json.dumps(
        {"autograde_seconds_4_submissions": round(seconds, 1), "gradebook": book}, indent=1),
        encoding="utf-8")
    for i, paths in feedback.items():
        for path in paths:
            shutil.copy(path, out / f"feedback-student{i}.html")


def point_table(graded_class):
    """``{grade_id: points}`` from the generated source assignment's nbgrader metadata."""
    teacher = graded_class["teacher"]
    path = teacher.home / "course" / "source" / ASSIGNMENT / NOTEBOOK.name
    nb = nbformat.read(path, as_version=4)
    return [(c.metadata.nbgrader["grade_id"], c.metadata.nbgrader["points"]) for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade")]


def test_the_gradebook_gives_each_student_the_points_of_their_right_answers(graded_class):
    table = point_table(graded_class)
    assert len(table) == 4
    total = sum(points for _, points in table)
    book = graded_class["gradebook"]
    students = graded_class["students"]
    assert set(book) == {s.name for s in students[:4]}  # student 4 never submitted
    for i, s in enumerate(students[:4]):
        expected = sum(points for n, (_, points) in enumerate(table, 1) if n in RIGHT[i])
        entry = book[s.name]
        assert entry["max_score"] == total
        assert entry["score"] == expected, (s.name, entry)
        for n, (grade_id, points) in enumerate(table, 1):
            assert entry["cells"][grade_id] == (points if n in RIGHT[i] else 0), (s.name, n)
        assert entry["late"] is (i == 3)


def feedback_text(graded_class, i):
    (path,) = graded_class["feedback"][i]
    html = Path(path).read_text(encoding="utf-8")
    import html as html_module

    return html_module.unescape(re.sub(r"<[^>]+>", " ", html))


def test_the_feedback_names_the_mistakes_in_the_checks_words(graded_class):
    text = feedback_text(graded_class, 1)
    words = " ".join(text.split())
    for phrase in NAMED.values():  # a message's first word is capitalised
        assert phrase.lower() in words.lower(), phrase
    assert "add hint=True" not in words  # graded once: the hint comes with the diagnosis
    assert "✔ Right." in text  # exercise 3
    solved = feedback_text(graded_class, 0)
    assert solved.count("✔ Right.") >= 4 and "✘ Not yet." not in solved
    empty = feedback_text(graded_class, 2)
    assert "No answer yet" in empty or "no answer yet" in empty


PROBE = """\
import glob, json, os, subprocess, requests
out = {{"uid": os.getuid()}}
def attempt(name, fn):
    try:
        fn()
        out[name] = "READ"
    except (PermissionError, FileNotFoundError) as e:
        out[name] = type(e).__name__
attempt("own home", lambda: os.listdir({own!r}))
attempt("other's home", lambda: os.listdir({other_home!r}))
attempt("other's notebook", lambda: open({other_nb!r}).read())
attempt("inbound listing", lambda: os.listdir({inbound!r}))
out["inbound guess"] = glob.glob({inbound!r} + "/{other}+*")
attempt("hidden tests (source)", lambda: open({source!r}).read())
attempt("teacher's course", lambda: os.listdir({course!r}))
attempt("gradebook", lambda: open({gradebook!r}, "rb").read(1))
attempt("hub database", lambda: open({hubdb!r}, "rb").read(1))
s = requests.Session()
page = s.get({hub!r} + "/hub/login")
r = s.post({hub!r} + "/hub/login?next=", allow_redirects=False,
           data={{"username": {other!r}, "password": {password!r},
                 "_xsrf": s.cookies.get("_xsrf")}})
out["hub login as other"] = r.status_code
r = requests.get({hub!r} + "/user/{other}/api/contents", allow_redirects=False,
                 headers={{"Authorization": "token " + os.environ["JUPYTERHUB_API_TOKEN"]}})
out["other's server with own token"] = r.status_code
r = subprocess.run(["su", {other!r}, "-c", "id"], capture_output=True, text=True,
                   stdin=subprocess.DEVNULL)
out["su other"] = r.returncode
print(json.dumps(out))
"""


def test_a_students_kernel_cannot_read_others_work_or_grading_nor_log_in_as_another(
        graded_class):
    import pwd

    students, teacher = graded_class["students"], graded_class["teacher"]
    me, other = students[1], students[0]
    root = graded_class["root"]
    other_nb = next(other.home.rglob("07-causal-masking.ipynb"))
    kernel = open_kernel(me, "probe.ipynb")
    graded_class["kernels"].append(kernel)
    code = PROBE.format(
        own=str(me.home), other_home=str(other.home), other_nb=str(other_nb),
        inbound=str(root / "exchange" / "attention" / "inbound"), other=other.name,
        source=str(teacher.home / "course" / "source" / ASSIGNMENT / NOTEBOOK.name),
        course=str(teacher.home / "course"),
        gradebook=str(teacher.home / "course" / "gradebook.db"),
        hubdb=str(root / "jupyterhub.sqlite"), hub=graded_class["hub"].url,
        password=graded_class["passwords"][me.name])
    got = json.loads(run_in(kernel, code).strip().splitlines()[-1])
    print(json.dumps(got, indent=1))
    assert got["uid"] == pwd.getpwnam(me.name).pw_uid != 0  # the kernel runs as the student
    assert got["own home"] == "READ"  # the probe itself works
    for key in ("other's home", "other's notebook", "inbound listing", "hidden tests (source)",
                "teacher's course", "gradebook", "hub database"):
        assert got[key] == "PermissionError", (key, got[key])
    assert got["inbound guess"] == []
    assert got["hub login as other"] != 302  # the hub's login form refused the wrong password
    assert got["other's server with own token"] in (302, 403, 404)
    assert got["su other"] != 0
    # The files really are there (the denials are permissions, not missing files).
    assert Path(teacher.home / "course" / "gradebook.db").is_file()
    assert "BEGIN HIDDEN TESTS" in (teacher.home / "course" / "source" / ASSIGNMENT /
                                    NOTEBOOK.name).read_text(encoding="utf-8")
    released = root / "exchange" / "attention" / "outbound" / ASSIGNMENT / NOTEBOOK.name
    assert "BEGIN HIDDEN TESTS" not in released.read_text(encoding="utf-8")
    assert "check_visible_positions(" not in released.read_text(encoding="utf-8")


def test_homes_are_private_and_the_class_users_are_real(graded_class):
    import pwd
    import stat

    for user in [graded_class["teacher"], *graded_class["students"]]:
        entry = pwd.getpwnam(user.name)
        assert entry.pw_name.startswith(graded_class["prefix"])
        mode = stat.S_IMODE(os.stat(entry.pw_dir).st_mode)
        assert mode & 0o077 == 0, (user.name, oct(mode))
        assert os.stat(entry.pw_dir).st_uid == entry.pw_uid


def inbound(graded_class):
    return graded_class["root"] / "exchange" / "attention" / "inbound"


def entries_of(graded_class, name):
    return sorted(inbound(graded_class).glob(f"{name}+{ASSIGNMENT}+*"))


TAMPER = """\
import json, os, shutil
out = {{}}
def attempt(name, fn):
    try:
        fn()
        out[name] = "DONE"
    except (PermissionError, FileNotFoundError) as e:
        out[name] = type(e).__name__
entry = {entry!r}
attempt("list", lambda: os.listdir(entry))
attempt("read", lambda: open(os.path.join(entry, {notebook!r})).read())
attempt("overwrite", lambda: open(os.path.join(entry, {notebook!r}), "w").write("{{}}"))
attempt("add a file", lambda: open(os.path.join(entry, "extra.txt"), "w").write("x"))
attempt("rename away", lambda: os.rename(entry, entry + "-gone"))
attempt("delete", lambda: shutil.rmtree(entry))
print(json.dumps(out))
"""


def test_a_student_cannot_read_change_or_delete_anothers_submission(graded_class):
    students = graded_class["students"]
    me, other = students[3], students[0]
    (entry,) = entries_of(graded_class, other.name)
    before = {p.name: p.read_bytes() for p in entry.iterdir()}
    kernel = open_kernel(me, "tamper.ipynb")
    graded_class["kernels"].append(kernel)
    got = json.loads(run_in(kernel, TAMPER.format(entry=str(entry), notebook=NOTEBOOK.name))
                     .strip().splitlines()[-1])
    print(got)
    for key in ("list", "read", "overwrite", "add a file", "rename away", "delete"):
        assert got[key] == "PermissionError", (key, got[key])
    assert {p.name: p.read_bytes() for p in entry.iterdir()} == before


def test_a_forged_submission_is_not_collected(graded_class):
    import pwd

    students, teacher = graded_class["students"], graded_class["teacher"]
    victim, forger = students[2], students[1]
    entries = entries_of(graded_class, victim.name)
    owners = {pwd.getpwuid(e.stat().st_uid).pw_name: e for e in entries}
    assert set(owners) == {victim.name, forger.name}  # the forgery is there, under the name
    genuine = (owners[victim.name] / "timestamp.txt").read_text(encoding="utf-8")
    forged = (owners[forger.name] / "timestamp.txt").read_text(encoding="utf-8")
    assert forged > genuine  # it is the newer: collect would take it, were it not refused
    collected = teacher.home / "course" / "submitted" / victim.name / ASSIGNMENT
    assert (collected / "timestamp.txt").read_text(encoding="utf-8") == genuine
    assert graded_class["gradebook"][victim.name]["score"] == 0  # their own, empty, notebook
    collect_log = next(text for text in graded_class["log"] if "Not collected" in text)
    assert owners[forger.name].name in collect_log and forger.name in collect_log


def test_the_class_access_rules(graded_class):
    """Every rule is checked, and every broken one named (not only the first)."""
    import grp
    import pwd
    import stat

    import requests

    root, teacher = graded_class["root"], graded_class["teacher"]
    broken = []

    def rule(ok, what):
        if not ok:
            broken.append(what)

    mode = stat.S_IMODE(os.stat(root / "exchange").st_mode)
    rule(mode == 0o1777, f"exchange/ is {oct(mode)}, not 1777 (sticky: only an entry's owner "
                         "removes it)")
    box = inbound(graded_class)
    info = os.stat(box)
    owner = pwd.getpwnam(teacher.name)
    rule(stat.S_IMODE(info.st_mode) == 0o3733,
         f"inbound is {oct(stat.S_IMODE(info.st_mode))}, not 3733 (sticky, setgid, unlistable)")
    rule((info.st_uid, info.st_gid) == (owner.pw_uid, owner.pw_gid),
         "inbound is not the teacher's, in the teacher's group")
    rule(grp.getgrgid(owner.pw_gid).gr_mem == [] and not [
        u for u in pwd.getpwall() if u.pw_gid == owner.pw_gid and u.pw_name != teacher.name],
        "the teacher's group has other members")
    for student in graded_class["students"][:4]:
        for entry in entries_of(graded_class, student.name):
            for path in [entry, *entry.rglob("*")]:
                item = os.lstat(path)
                rule(item.st_mode & 0o007 == 0, f"{path} is open to others ({oct(item.st_mode)})")
                rule(item.st_gid == owner.pw_gid and not item.st_mode & 0o020,
                     f"{path} is not the teacher's group's to read only")
    hubdb = os.stat(root / "jupyterhub.sqlite")
    rule(hubdb.st_uid == 0 and hubdb.st_mode & 0o077 == 0,
         f"the hub's database is {oct(hubdb.st_mode)}")
    for user in [teacher, *graded_class["students"]]:
        entry = pwd.getpwnam(user.name)
        home = os.stat(entry.pw_dir)
        rule(stat.S_IMODE(home.st_mode) & 0o077 == 0 and home.st_uid == entry.pw_uid,
             f"{user.name}'s home is {oct(home.st_mode)}")
    # Who may log in: a user of the machine outside the class's group, with their right
    # password, is refused; a student of the class gets in.
    outsider = graded_class["outsider"]
    hub_url = graded_class["hub"].url
    refused = H.login_form(requests.Session(), hub_url, outsider,
                           graded_class["passwords"][outsider])
    rule(refused.status_code != 302, "a user outside the class's group logged in")
    member = students_name(graded_class)
    let_in = H.login_form(requests.Session(), hub_url, member, graded_class["passwords"][member])
    rule(let_in.status_code == 302, f"a student of the class could not log in "
                                    f"({let_in.status_code})")
    assert not broken, "\n".join(broken)


def students_name(graded_class):
    return graded_class["students"][4].name


# --- collect files only what is the student's own, checked on what it copies ------------------
# (classroom/class_exchange.py). Student 4 never submits through nbgrader: these tests plant
# entries in their name (as root, owned as a student's would be) or let a process of theirs
# race the collect, and run the teacher's collect in the teacher's kernel, with the class's
# own nbgrader configuration, for student 4 only (the other students' work is untouched).

TEACHER_COLLECT = """\
import os, shutil
from pathlib import Path
from traitlets.config.loader import PyFileConfigLoader
from nbgrader.apps import NbGraderAPI

_config = PyFileConfigLoader("nbgrader_config.py",
                             path=os.environ["JUPYTER_CONFIG_PATH"]).load_config()
_config.CourseDirectory.student_id = {student!r}
_api = NbGraderAPI(config=_config)
_dest = Path({course!r}) / "submitted" / {student!r} / {assignment!r}
_source = (Path({course!r}) / "source" / {assignment!r} / {notebook!r}).read_bytes()
_released = Path({released!r}).read_bytes()


def collect_once():  # one collect of student 4's newest entry: what was filed, log, success
    shutil.rmtree(_dest, ignore_errors=True)  # so that every collect copies afresh
    result = _api.collect({assignment!r})
    files = sorted(p for p in _dest.rglob("*") if p.is_file()) if _dest.exists() else []
    teachers = [p.name for p in files if p.read_bytes() == _source or any(
        marker in p.read_bytes() for marker in (b"BEGIN HIDDEN TESTS", b"BEGIN SOLUTION"))]
    nb = _dest / {notebook!r}
    if teachers:
        kind = "the teacher's source"
    elif not result["success"]:
        kind = "the collect failed"
    elif not nb.exists():
        kind = "nothing"
    else:
        kind = "the student's" if nb.read_bytes() == _released else "something else"
    filed = sorted(p.name for p in _dest.rglob("*")) if _dest.exists() else None
    return {{"kind": kind, "filed": filed, "log": result.get("log", ""),
            "success": result["success"], "error": result.get("error", "")}}
"""


@pytest.fixture(scope="module")
def teacher_collect(graded_class):
    """The teacher's kernel, with ``collect_once()`` for student 4 defined in it."""
    teacher, student = graded_class["teacher"], graded_class["students"][4]
    course = teacher.home / "course"
    kernel = graded_class["kernels"][0]
    run_in(kernel, TEACHER_COLLECT.format(
        student=student.name, course=str(course), assignment=ASSIGNMENT, notebook=NOTEBOOK.name,
        released=str(released_notebook(graded_class))))
    yield kernel
    for entry in entries_of(graded_class, student.name):
        shutil.rmtree(entry)
    shutil.rmtree(course / "submitted" / student.name, ignore_errors=True)


def released_notebook(graded_class):
    return graded_class["root"] / "exchange" / "attention" / "outbound" / ASSIGNMENT / NOTEBOOK.name


def source_notebook(graded_class):
    return (graded_class["teacher"].home / "course" / "source" / ASSIGNMENT / NOTEBOOK.name)


def collect_once(kernel, check=True):
    got = json.loads(run_in(kernel, "import json\nprint(json.dumps(collect_once()))")
                     .strip().splitlines()[-1])
    if check:  # one student never stops the collect
        assert got["success"], got["error"] + got["log"]
    return got


def nbgrader_time(seconds_ago=0):
    """A submission time as nbgrader writes it in an entry's name."""
    when = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds_ago)
    return when.strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def plant_entry(graded_class, student, items, name=None):
    """An entry in ``student``'s name in inbound, owned as their submission would be (theirs,
    the teacher's group, 0750/0640); ``items``: {relative path: bytes, or ("link", target),
    or (bytes, owner's name)}. Returns its path."""
    import pwd

    gid = pwd.getpwnam(graded_class["teacher"].name).pw_gid
    uid = pwd.getpwnam(student.name).pw_uid
    entry = inbound(graded_class) / (
        name or f"{student.name}+{ASSIGNMENT}+{nbgrader_time()}+{secrets.token_hex(4)}")
    entry.mkdir(mode=0o750)
    os.chown(entry, uid, gid)
    for rel, what in {"timestamp.txt": nbgrader_time().encode(), **items}.items():
        path = entry / rel
        if isinstance(what, tuple) and what[0] == "link":
            os.symlink(what[1], path)
            os.lchown(path, uid, gid)
            continue
        data, owner = what if isinstance(what, tuple) else (what, student.name)
        path.write_bytes(data)
        os.chmod(path, 0o640)
        os.chown(path, pwd.getpwnam(owner).pw_uid, gid)
    return entry


def test_collect_files_a_students_own_entry_and_refuses_a_link_or_anothers_file_inside(
        graded_class, teacher_collect):
    """The audit's planted bug "collect checks only the entry folder's owner, not its files":
    an entry of the student's own, with a link to the teacher's source notebook inside, or
    with a file of another student's inside, is refused, named, and nothing of it filed."""
    students = graded_class["students"]
    me, other = students[4], students[3]
    released = released_notebook(graded_class).read_bytes()
    own = plant_entry(graded_class, me, {NOTEBOOK.name: released})
    got = collect_once(teacher_collect)
    assert got["kind"] == "the student's", got  # the control: a clean entry is filed
    assert got["filed"] == sorted([NOTEBOOK.name, "timestamp.txt"])
    shutil.rmtree(own)
    source = source_notebook(graded_class)

    def nested(entry):  # a folder of the student's own, with another student's file inside
        (entry / "data").mkdir()
        os.chown(entry / "data", *owner_ids(graded_class, me))
        plant_file(entry / "data" / "answers.txt", b"x", graded_class, other)

    cases = {  # label: (the entry's files, what else is put in it)
        "a link to the teacher's source": ({NOTEBOOK.name: released,
                                            "extra.ipynb": ("link", source)}, None),
        "a link in place of the notebook": ({NOTEBOOK.name: ("link", source)}, None),
        "another student's file": ({NOTEBOOK.name: (released, other.name)}, None),
        "another student's file in a folder": ({NOTEBOOK.name: released}, nested),
    }
    for label, (items, more) in cases.items():
        entry = plant_entry(graded_class, me, items)
        if more is not None:
            more(entry)
        got = collect_once(teacher_collect)
        assert got["kind"] == "nothing" and got["filed"] is None, (label, got)
        assert "Not collected" in got["log"] and entry.name in got["log"], (label, got["log"])
        shutil.rmtree(entry)


def owner_ids(graded_class, student):
    import pwd

    return pwd.getpwnam(student.name).pw_uid, pwd.getpwnam(graded_class["teacher"].name).pw_gid


def plant_file(path, data, graded_class, owner):
    path.write_bytes(data)
    os.chmod(path, 0o640)
    os.chown(path, *owner_ids(graded_class, owner))


RACER = """\
import os, sys
entry, released, source, stop = sys.argv[1:5]
home = os.path.expanduser("~")
notebook = os.path.join(entry, os.path.basename(released))
mine = open(released, "rb").read()  # the notebook as fetched: the student's own copy
os.mkdir(entry, 0o750)
for path, data in ((os.path.join(entry, "timestamp.txt"), sys.argv[5].encode()),
                   (notebook, mine)):
    with open(path, "wb") as fh:
        fh.write(data)
print("ready", flush=True)
link, regular = os.path.join(home, ".swap-link"), os.path.join(home, ".swap-file")
swaps = 0
while not os.path.exists(stop):  # swap the notebook: a link to the source, then own again
    os.symlink(source, link)
    os.replace(link, notebook)
    with open(regular, "wb") as fh:
        fh.write(mine)
    os.replace(regular, notebook)
    swaps += 1
print(swaps, flush=True)
"""
#: Collects run while the student races them (the audit's attack got the source notebook
#: filed after 8 collects in one run and 2 in another).
RACED_COLLECTS = 60


def test_a_student_racing_the_collect_gets_nothing_of_the_teachers_filed(graded_class,
                                                                          teacher_collect):
    """A process of the student's swaps one file of their entry between their own copy and a
    link to the teacher's source notebook (solutions, hidden tests) for the whole of
    RACED_COLLECTS collects: no collect files anything of the teacher's."""
    import grp
    import pwd
    import subprocess

    me = graded_class["students"][4]
    entry = inbound(graded_class) / f"{me.name}+{ASSIGNMENT}+{nbgrader_time()}+race"
    stop = graded_class["root"] / f"stop-racer-{secrets.token_hex(3)}"
    user = pwd.getpwnam(me.name)
    racer = subprocess.Popen(
        ["/usr/bin/python3.11", "-I", "-c", RACER, str(entry),
         str(released_notebook(graded_class)), str(source_notebook(graded_class)), str(stop),
         nbgrader_time()],
        user=user.pw_uid, group=user.pw_gid,
        extra_groups=[grp.getgrnam(graded_class["group"]).gr_gid], cwd=user.pw_dir,
        env={"HOME": user.pw_dir, "PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        assert racer.stdout.readline().strip() == "ready", racer.stderr.read()
        kinds = [collect_once(teacher_collect, check=False)["kind"]
                 for _ in range(RACED_COLLECTS)]
    finally:
        stop.touch()
        out, err = racer.communicate(timeout=60)
        stop.unlink()
        shutil.rmtree(entry, ignore_errors=True)
    swaps = int(out.split()[-1])
    counts = {kind: kinds.count(kind) for kind in set(kinds)}
    print(f"{RACED_COLLECTS} collects against {swaps} swaps: {counts}")
    assert racer.returncode == 0, err
    assert "the teacher's source" not in counts, counts
    assert "the collect failed" not in counts and "something else" not in counts, counts
    # The race was live: some collects met the link (and refused the entry).
    assert counts.get("nothing", 0) >= 1 and swaps > RACED_COLLECTS, (counts, swaps)


def test_an_entry_whose_name_holds_no_time_does_not_stop_the_collect(graded_class,
                                                                     teacher_collect):
    """``<student>+<assignment>+not-a-time+x`` made nbgrader's timestamp parser raise and the
    teacher's ``nbgrader collect`` exit 1 for the whole class: it is skipped, named."""
    me = graded_class["students"][4]
    released = released_notebook(graded_class).read_bytes()
    bad = plant_entry(graded_class, me, {NOTEBOOK.name: released},
                      name=f"{me.name}+{ASSIGNMENT}+not-a-time+x")
    good = plant_entry(graded_class, me, {NOTEBOOK.name: released})
    course = graded_class["teacher"].home / "course"
    shutil.rmtree(course / "submitted" / me.name, ignore_errors=True)  # what the others filed
    try:
        out = shell(teacher_collect, "nbgrader", "collect", ASSIGNMENT,  # exit 0, or it raises
                    f"--CourseDirectory.root={course}",
                    f"--CourseDirectory.student_id={me.name}")
        assert "Not collected" in out and bad.name in out, out
        filed = course / "submitted" / me.name / ASSIGNMENT / NOTEBOOK.name
        assert filed.read_bytes() == released  # the good entry was collected
    finally:
        shutil.rmtree(bad)
        shutil.rmtree(good)
        shutil.rmtree(course / "submitted" / me.name, ignore_errors=True)


SQUAT = """\
import json, os
out = {{}}
course = {course!r}
def attempt(name, fn):
    try:
        fn()
        out[name] = "DONE"
    except OSError as e:
        out[name] = type(e).__name__
attempt("make the course", lambda: os.mkdir(course))
attempt("make inbound", lambda: os.makedirs(os.path.join(course, "inbound")))
attempt("make outbound", lambda: os.makedirs(os.path.join(course, "outbound")))
print(json.dumps(out))
"""


def run_as(graded_class, student, code):
    """``code`` run by a Python process of ``student``'s (their uid and groups); its last line
    of output, as JSON."""
    import grp
    import pwd
    import subprocess

    user = pwd.getpwnam(student.name)
    r = subprocess.run(["/usr/bin/python3.11", "-I", "-c", code], user=user.pw_uid,
                       group=user.pw_gid, cwd=user.pw_dir, capture_output=True, text=True,
                       extra_groups=[grp.getgrnam(graded_class["group"]).gr_gid],
                       env={"HOME": user.pw_dir, "PATH": "/usr/bin:/bin"}, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_course_folders_are_the_teachers_before_any_release(graded_class):
    """The hub made exchange/attention, its outbound and inbound the teacher's (modes 0755,
    0755, 3733) before the teacher's first release: a student cannot make them first."""
    teacher = graded_class["teacher"].name
    assert graded_class["before_release"] == {
        "": (teacher, "0o755"), "outbound": (teacher, "0o755"), "inbound": (teacher, "0o3733")}


def test_a_student_cannot_squat_the_course_folders_and_the_release_works(graded_class):
    """In a fresh exchange (1777, as the class has): a student who makes the course's folders
    before the class is set up has them renamed aside when it is (``prepare_course``, what the
    hub runs at its start); after it they cannot make, replace or move them; and the teacher's
    release into that exchange works."""
    teacher, student = graded_class["teacher"], graded_class["students"][4]
    exchange = graded_class["root"] / f"exchange-{secrets.token_hex(3)}"
    exchange.mkdir()
    os.chmod(exchange, 0o1777)
    course = exchange / "attention"
    try:
        squat = run_as(graded_class, student, SQUAT.format(course=str(course)))
        assert set(squat.values()) == {"DONE"}, squat  # before the class: the student's
        moved = U.prepare_course(exchange, "attention", teacher.name)
        assert [p.parent for p in moved] == [exchange] and not os.path.islink(moved[0])
        for name in ("", "outbound", "inbound"):
            assert exchange_folder(course / name)[0] == teacher.name, name
        again = run_as(graded_class, student, SQUAT.format(course=str(course)) + (
            "attempt('move the course', lambda: os.rename(course, course + '-x'))\n"
            "attempt('move inbound', lambda: os.rename(os.path.join(course, 'inbound'), "
            "os.path.join(course, 'x')))\nprint(json.dumps(out))\n"))
        assert again == {"make the course": "FileExistsError", "make inbound": "FileExistsError",
                         "make outbound": "FileExistsError",
                         "move the course": "PermissionError",
                         "move inbound": "PermissionError"}, again
        t = graded_class["kernels"][0]
        shell(t, "nbgrader", "release_assignment", ASSIGNMENT, f"--Exchange.root={exchange}",
              f"--CourseDirectory.root={teacher.home / 'course'}")
        assert (course / "outbound" / ASSIGNMENT / NOTEBOOK.name).is_file()
        assert exchange_folder(course / "inbound") == (teacher.name, "0o3733")
    finally:
        shutil.rmtree(exchange)
