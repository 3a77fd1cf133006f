"""classroom/users.py refuses, before it runs any command, to remove root, a system account or
a user the class did not create, and to add a user whose name useradd would refuse (issue 33).

No command is run here: ``subprocess.run`` is replaced by a recorder, and the users and groups
are the machine's own (root, daemon, nobody) or stand-ins given to ``pwd``/``grp``.
"""

import grp
import pwd
from pathlib import Path

import pytest
from conftest import load_module

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def users(monkeypatch):
    """classroom/users.py with every command recorded instead of run."""
    module = load_module("classroom_users_refusals", ROOT / "classroom" / "users.py")
    calls = []

    def record(cmd, *args, **kwargs):
        calls.append(list(cmd))
        raise AssertionError(f"a command was run: {cmd}")

    monkeypatch.setattr(module.subprocess, "run", record)
    module.calls = calls
    return module


def fake_accounts(monkeypatch, module, users, groups):
    """Stand-in passwd and group databases: ``users`` {name: (uid, gid, gecos)},
    ``groups`` {name: (gid, members)}."""
    def getpwnam(name):
        if name not in users:
            raise KeyError(name)
        uid, gid, gecos = users[name]
        return pwd.struct_passwd((name, "x", uid, gid, gecos, f"/home/{name}", "/bin/bash"))

    def getgrnam(name):
        if name not in groups:
            raise KeyError(name)
        gid, members = groups[name]
        return grp.struct_group((name, "x", gid, list(members)))

    monkeypatch.setattr(module.pwd, "getpwnam", getpwnam)
    monkeypatch.setattr(module.pwd, "getpwall", lambda: [getpwnam(n) for n in users])
    monkeypatch.setattr(module.grp, "getgrnam", getgrnam)


DEFS = {"UID_MIN": 1000, "UID_MAX": 60000, "GID_MIN": 1000}


@pytest.mark.parametrize("argv, reason", [
    (["remove", "--group", "root", "root"], "root is never removed"),
    (["remove", "--group", "root", "daemon"], "daemon is a system account"),
    (["remove", "--group", "root", "nobody"], "nobody is a system account"),
    (["remove", "--group", "sudo", "nosuchuser"], "group 'sudo' is a system group"),
])
def test_remove_refuses_root_and_system_accounts_before_any_command(users, argv, reason,
                                                                    capsys):
    if argv[-1] != "nosuchuser":
        pwd.getpwnam(argv[-1])  # the account really is on this machine
    with pytest.raises(SystemExit) as info:
        users.main(argv)
    assert info.value.code != 0
    err = capsys.readouterr().err
    assert "refused, nothing was removed" in err and reason in err
    assert users.calls == []


def test_remove_refuses_a_normal_user_the_class_did_not_create(users, monkeypatch):
    group = "attnclass"
    fake_accounts(monkeypatch, users, users={
        "ada": (1001, 1001, users.mark(group)),  # the class's: member, marked
        "alice": (1002, 1002, "Alice Admin"),  # a person of the machine, in the group
        "bob": (1003, 1003, users.mark(group)),  # marked, but not in the group
        "evil": (0, 0, users.mark(group)),  # uid 0 under another name
        "svc": (60001, 60001, users.mark(group)),  # above UID_MAX
    }, groups={group: (1500, ["ada", "alice", "evil", "svc"]), "root": (0, [])})
    monkeypatch.setattr(users, "login_defs", lambda path="/etc/login.defs": DEFS)
    problems = users.refusals(group, ["ada", "alice", "bob", "evil", "svc", "gone"])
    assert problems == [
        "alice was not created for the class 'attnclass' by this tool (not in the group, or no "
        "mark 'attention course class attnclass')",
        "bob was not created for the class 'attnclass' by this tool (not in the group, or no "
        "mark 'attention course class attnclass')",
        "evil has uid 0 (root's)",
        "svc is a system account (uid 60001, outside UID_MIN..UID_MAX 1000..60000 of "
        "/etc/login.defs)",
    ]
    with pytest.raises(ValueError, match="refused, nothing was removed"):
        users.remove_users(group, ["ada", "alice"])  # one bad name: nothing happens to ada
    assert users.calls == []


def test_remove_runs_only_for_the_class_users_and_keeps_a_group_still_in_use(users,
                                                                           monkeypatch):
    group = "attnclass"
    fake_accounts(monkeypatch, users, users={"ada": (1001, 1001, users.mark(group)),
                                             "gus": (1004, 1500, "someone else")},
                  groups={group: (1500, ["ada"])})
    monkeypatch.setattr(users, "login_defs", lambda path="/etc/login.defs": DEFS)
    ran = []
    monkeypatch.setattr(users.subprocess, "run", lambda cmd, *a, **k: ran.append(cmd))
    users.remove_users(group, ["ada"])
    assert ran == [["pkill", "-KILL", "-u", "ada"], ["userdel", "--remove", "ada"]]
    # (gus's primary group is the class's: the group is left alone, and so is gus)


def test_login_defs_are_read_from_the_file(users, tmp_path):
    path = tmp_path / "login.defs"
    path.write_text("# comment\nUID_MIN\t\t 2000\nUID_MAX 30000\nGID_MIN\t500\n", "utf-8")
    assert users.login_defs(path) == {"UID_MIN": 2000, "UID_MAX": 30000, "GID_MIN": 500}
    assert users.login_defs(tmp_path / "absent") == DEFS


@pytest.mark.parametrize("name", ["Ada", "ada lovelace", "-rf", "1ada", "", "a" * 33, "ada:x",
                                  "ada/..", "ada\n"])
def test_add_refuses_a_name_useradd_would_refuse_and_says_what_is_allowed(users, name, capsys,
                                                                         tmp_path):
    with pytest.raises(SystemExit):
        users.main(["add", "--root", str(tmp_path), "--group", "attnclass", "--", "ada2", name])
    err = capsys.readouterr().err
    assert f"user name {name!r} is not allowed" in err
    assert "a lower-case letter or '_' first, then lower-case letters, digits" in err
    assert users.calls == [] and not (tmp_path / "homes").exists()
    with pytest.raises(ValueError, match="group name 'Class A' is not allowed"):
        users.add_users(tmp_path, "Class A", ["ada"])


def test_add_refuses_an_existing_account_before_creating_anyone(users, tmp_path):
    with pytest.raises(FileExistsError, match="'root' exists already"):
        users.add_users(tmp_path, "attnclass", ["zz-new-one", "root"])
    assert users.calls == []


def run_module():
    import sys

    sys.path.insert(0, str(ROOT / "classroom"))
    try:
        return load_module("classroom_run_arguments", ROOT / "classroom" / "run.py")
    finally:
        sys.path.remove(str(ROOT / "classroom"))


@pytest.mark.parametrize("argv, message", [
    (["--port", "80"], "--port must be in 1024..65535"),
    (["--minutes", "-1"], "--minutes must be a number >= 0"),
    (["--minutes", "nan"], "--minutes must be a number >= 0"),
    (["--class-group", "no-such-class-zz"], "'no-such-class-zz' is not a group of this machine"),
    (["--class-group", "root", "--teacher", "no-such-teacher-zz"],
     "--teacher 'no-such-teacher-zz' is not a user"),
    (["--class-group", "root", "--teacher", "daemon"], "'daemon' is not in the class's group"),
])
def test_run_refuses_a_bad_command_line_before_starting_anything(argv, message, capsys,
                                                                  monkeypatch):
    module = run_module()
    monkeypatch.setattr(module.classroom, "missing_tools",
                        lambda: pytest.fail("got past the argument checks"))
    with pytest.raises(SystemExit) as info:
        module.main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err
