"""The class's system users on one machine: one Unix user per student and for the teacher.

For the hub's class mode (``CLASSROOM_CLASS_GROUP``, classroom/jupyterhub_config.py): every
person gets a Unix user of their own, in the class's group (the hub lets only that group log
in), a home under ``ROOT/homes/`` that no one else can read (``useradd -K HOME_MODE=0700``;
useradd's default makes homes world-readable) and a real password (PAM checks it at the hub's
login form). Needs root (useradd, chpasswd, userdel, groupadd from Debian's ``passwd``).

    python classroom/users.py add  --root DIR --group attn-class teacher ada grace ...
    python classroom/users.py remove --group attn-class teacher ada grace ...

``add`` prints each new user's password once, and writes them to ``ROOT/passwords.txt``
(mode 0600, root's): hand them out, then delete the file.
"""

import argparse
import grp
import os
import pwd
import secrets
import subprocess
import sys
from pathlib import Path


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


def add_users(root, group, names, passwords=None):
    """Create ``group`` and one user per name (home ``root/homes/NAME``, mode 0700, bash);
    return ``{name: password}`` (random ones unless given)."""
    if os.geteuid() != 0:
        raise PermissionError("creating system users needs root")
    root = prepare_root(root)
    if not group_exists(group):
        run("groupadd", group)
    made = {}
    for name in names:
        if exists(name):
            raise FileExistsError(f"a system user {name!r} exists already")
        password = (passwords or {}).get(name) or secrets.token_urlsafe(12)
        run("useradd", "--create-home", "--home-dir", str(root / "homes" / name),
            "--key", "HOME_MODE=0700", "--gid", group, "--shell", "/bin/bash", name)
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


def remove_users(group, names):
    """Remove the users (and their homes) and the group; what does not exist is skipped."""
    for name in names:
        if exists(name):
            subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True, timeout=30)
            subprocess.run(["userdel", "--remove", name], capture_output=True, timeout=60)
    if group_exists(group):
        subprocess.run(["groupdel", group], capture_output=True, timeout=60)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["add", "remove"])
    parser.add_argument("names", nargs="+")
    parser.add_argument("--group", required=True, help="the class's group (the hub's login)")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent / "state",
                        help="where homes/ and exchange/ are (default classroom/state)")
    args = parser.parse_args(argv)
    if args.action == "remove":
        remove_users(args.group, args.names)
        return 0
    made = add_users(args.root, args.group, args.names)
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
