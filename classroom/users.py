"""The class's system users on one machine: one Unix user per student and for the teacher.

For the hub's class mode (``CLASSROOM_CLASS_GROUP``, classroom/jupyterhub_config.py): every
person gets a Unix user of their own, with a private primary group (the teacher's makes the
exchange's submissions readable by the teacher alone: classroom/class_exchange.py) and the
class's group (the hub lets only that group log in), a home under ``ROOT/homes/`` that no one
else can read (``useradd -K HOME_MODE=0700``; useradd's default makes homes world-readable), a
real password (PAM checks it at the hub's login form) and a mark in its comment field
(:func:`mark`). Needs root (useradd, chpasswd, userdel, groupadd from Debian's ``passwd``).

``remove`` touches only the class's own users: it refuses root, every system account (uid
outside UID_MIN..UID_MAX of /etc/login.defs) and every user that is not a member of the group
with the class's mark, before it runs any command; it deletes the group only when the group is
a normal one (gid from GID_MIN) that no user is left in. ``add`` checks every name first
(:data:`NAME_RULE`).

    python classroom/users.py add  --root DIR --group attn-class teacher ada grace ...
    python classroom/users.py remove --group attn-class teacher ada grace ...

``add`` prints each new user's password once, and writes them to ``ROOT/passwords.txt``
(mode 0600, root's): hand them out, then delete the file.
"""

import argparse
import grp
import os
import pwd
import re
import secrets
import stat
import subprocess
import sys
from pathlib import Path

#: What ``add`` accepts as a user or group name (Debian's portable rule, shorter than 32).
NAME_RULE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
NAME_HELP = ("1 to 32 characters: a lower-case letter or '_' first, then lower-case letters, "
             "digits, '_' or '-'")


def mark(group):
    """The comment (GECOS field) of every user ``add`` creates for ``group``."""
    return f"attention course class {group}"


def login_defs(path="/etc/login.defs"):
    """UID_MIN, UID_MAX, GID_MIN of ``path`` (Debian's defaults where it does not say)."""
    found = {"UID_MIN": 1000, "UID_MAX": 60000, "GID_MIN": 1000}
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[0] in found and parts[1].isdigit():
            found[parts[0]] = int(parts[1])
    return found


def check_name(name, what="user name"):
    """Raise ValueError unless ``name`` follows :data:`NAME_RULE`."""
    if not isinstance(name, str) or not NAME_RULE.fullmatch(name):
        raise ValueError(f"{what} {name!r} is not allowed: {NAME_HELP}")
    return name


def run(*cmd, **kwargs):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60, **kwargs)


def exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def group_exists(group):
    try:
        grp.getgrnam(group)
        return True
    except KeyError:
        return False


def prepare_root(root):
    """``root`` (mode 0711: others may pass through, not list) with ``homes/`` likewise, and the
    nbgrader exchange ``exchange/`` (1777: anyone writes, no one removes another's files)."""
    root = Path(root)
    for path, mode in ((root, 0o711), (root / "homes", 0o711), (root / "exchange", 0o1777)):
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, mode)
    return root


#: The course's folders in the exchange and their modes, as nbgrader's release makes them
#: (classroom/class_exchange.py's inbound: sticky and setgid, others enter and create only).
COURSE_FOLDERS = (("", 0o755), ("outbound", 0o755), ("inbound", 0o3733))


def prepare_course(exchange, course, teacher):
    """Create ``exchange/course`` with its ``outbound`` and ``inbound`` folders, the teacher's
    (owner and private group) with nbgrader's modes, before any student can log in.

    nbgrader's first ``release_assignment`` makes them otherwise, and refuses to release into
    folders it does not own ("You don't own the directory"): a student who made
    ``exchange/course`` first (the exchange is 1777) would stop the class. One that is not
    the teacher's folder (someone else's, a link, a file) is renamed aside (returned, to be
    reported), never deleted; in the 1777 exchange its maker cannot move the teacher's
    back. Needs root. Returns the paths renamed aside."""
    check_name(teacher, "teacher")
    entry = pwd.getpwnam(teacher)
    if os.geteuid() != 0:
        raise PermissionError("preparing the course's exchange folders needs root")
    moved = []
    base = Path(exchange) / course
    for name, mode in COURSE_FOLDERS:
        path = base / name if name else base
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            info = None
        if info is not None and not (stat.S_ISDIR(info.st_mode) and info.st_uid == entry.pw_uid):
            aside = path.with_name(f"{path.name}.not-the-teachers-{secrets.token_hex(4)}")
            os.rename(path, aside)
            moved.append(aside)
            info = None
        if info is None:
            os.mkdir(path, 0o700)
            os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
        os.chmod(path, mode)  # the teacher's folder now: no one else can swap it
    return moved


def add_users(root, group, names, passwords=None):
    """Create ``group`` and one user per name (home ``root/homes/NAME``, mode 0700, bash);
    return ``{name: password}`` (random ones unless given)."""
    check_name(group, "group name")
    for name in names:
        check_name(name)
        if exists(name) or group_exists(name):
            raise FileExistsError(f"a system user or group {name!r} exists already")
    if len(set(names)) != len(names):
        raise ValueError(f"a name is given twice: {sorted(names)}")
    if os.geteuid() != 0:
        raise PermissionError("creating system users needs root")
    root = prepare_root(root)
    if not group_exists(group):
        run("groupadd", group)
    made = {}
    for name in names:
        password = (passwords or {}).get(name) or secrets.token_urlsafe(12)
        run("useradd", "--create-home", "--home-dir", str(root / "homes" / name),
            "--key", "HOME_MODE=0700", "--user-group", "--groups", group,
            "--comment", mark(group), "--shell", "/bin/bash", name)
        os.chmod(root / "homes" / name, 0o700)  # an older useradd ignores HOME_MODE
        run("chpasswd", input=f"{name}:{password}\n")
        made[name] = password
    return made


def closed_ancestors(path):
    """The folders from ``/`` to ``path`` that others may not pass through (no o+x)."""
    path = Path(path).resolve()
    return [p for p in [*reversed(path.parents), path] if not os.stat(p).st_mode & 0o001]


def grant_traverse(group, path):
    """Let ``group`` pass through (x only, by an ACL entry) every folder on the way to ``path``
    that others may not pass (e.g. a checkout under root's 0700 home): the class's servers run
    the course's venv from there. Returns what to give :func:`revoke_traverse`."""
    changed = []
    for folder in closed_ancestors(path):
        extended = run("getfacl", "--skip-base", "--absolute-names", str(folder)).stdout.strip()
        run("setfacl", "-m", f"g:{group}:--x", str(folder))
        changed.append((folder, bool(extended)))
    return changed


def revoke_traverse(group, changed):
    """Undo :func:`grant_traverse` (a folder that had no ACL before gets none again)."""
    for folder, extended in changed:
        cmd = ["setfacl", "-x", f"g:{group}"] if extended else ["setfacl", "-b"]
        subprocess.run([*cmd, str(folder)], capture_output=True, timeout=30)


def refusals(group, names, defs=None):
    """Why ``remove`` must not touch these users or this group: one line each (empty: none).

    Refused: root (uid 0, whatever its name), a uid outside UID_MIN..UID_MAX (system accounts),
    a user not in ``group`` or without the class's :func:`mark`, and a group with a gid below
    GID_MIN. Users that do not exist are not refused (there is nothing to remove).
    """
    defs = defs or login_defs()
    out = []
    if group == "root" or (group_exists(group) and grp.getgrnam(group).gr_gid < defs["GID_MIN"]):
        out.append(f"group {group!r} is a system group (gid below GID_MIN {defs['GID_MIN']})")
    members = set(grp.getgrnam(group).gr_mem) if group_exists(group) else set()
    for name in names:
        if name == "root":
            out.append("root is never removed")
            continue
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if entry.pw_uid == 0:
            out.append(f"{name} has uid 0 (root's)")
        elif not defs["UID_MIN"] <= entry.pw_uid <= defs["UID_MAX"]:
            out.append(f"{name} is a system account (uid {entry.pw_uid}, outside UID_MIN.."
                       f"UID_MAX {defs['UID_MIN']}..{defs['UID_MAX']} of /etc/login.defs)")
        elif name not in members or entry.pw_gecos != mark(group):
            out.append(f"{name} was not created for the class {group!r} by this tool "
                       f"(not in the group, or no mark {mark(group)!r})")
    return out


def remove_users(group, names):
    """Remove the class's users (and their homes), then the group if no one is left in it;
    what does not exist is skipped. Refuses everything (ValueError, nothing run) when any name
    or the group is not the class's own (:func:`refusals`)."""
    problems = refusals(group, names)
    if problems:
        raise ValueError("refused, nothing was removed:\n  " + "\n  ".join(problems))
    for name in names:
        if exists(name):
            subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True, timeout=30)
            subprocess.run(["userdel", "--remove", name], capture_output=True, timeout=60)
    if group_exists(group):
        gid = grp.getgrnam(group).gr_gid
        if not grp.getgrnam(group).gr_mem and not any(u.pw_gid == gid for u in pwd.getpwall()):
            subprocess.run(["groupdel", group], capture_output=True, timeout=60)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["add", "remove"])
    parser.add_argument("names", nargs="+")
    parser.add_argument("--group", required=True, help="the class's group (the hub's login)")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent / "state",
                        help="where homes/ and exchange/ are (default classroom/state)")
    args = parser.parse_args(argv)
    try:
        if args.action == "remove":
            remove_users(args.group, args.names)
            return 0
        made = add_users(args.root, args.group, args.names)
    except (ValueError, FileExistsError, PermissionError) as exc:
        parser.error(str(exc))
    lines = [f"{name}:{password}" for name, password in made.items()]
    secret = args.root / "passwords.txt"
    secret.touch(mode=0o600)
    with open(secret, "a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"(also in {secret}, mode 0600: hand them out, then delete it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
