"""Start the classroom hub on 127.0.0.1 for trying it out (``make classroom``).

Prints the hub's address, the shared password of the try-out login, and two nbgitpuller links:
the one to hand out (the public repository, from ``REPO`` in tools/nav.py) and one that works
offline (a mirror of this checkout in the state folder, refreshed at every start). Stop it with
Ctrl-C, or give ``--minutes`` to have it stop by itself.

That is the try-out (any user name, one shared password, every server the hub's own user). For
a class on one machine, as root: create the users first (``classroom/users.py add --group G
--root DIR teacher ada ...``), then ``classroom/run.py --class-group G --teacher teacher --state
DIR``: each person logs in with their own password and works as their own Unix user.
"""

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hub as classroom  # noqa: E402  (the module next to this file)


def public_link(hub_url):
    """The nbgitpuller link to the course's public repository (REPO in tools/nav.py), or a
    line saying there is none yet."""
    address = classroom.repo_address()
    if address is None:
        return ("The course has no public repository yet (REPO in tools/nav.py is None): "
                "no public nbgitpuller link.")
    return ("The course's nbgitpuller link (the public repository from tools/nav.py):\n    "
            + classroom.nbgitpuller_link(hub_url, address, "main"))


def local_course(state):
    """A mirror of this checkout's git repository in ``state``; the branch checked out here."""
    mirror = state / "course.git"
    if mirror.exists():
        subprocess.run(["git", "remote", "update", "--prune"], cwd=mirror, check=True,
                       capture_output=True, timeout=120)
    else:
        subprocess.run(["git", "clone", "-q", "--mirror", str(classroom.ROOT), str(mirror)],
                       check=True, timeout=120)
    branch = subprocess.run(["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=classroom.ROOT,
                            capture_output=True, text=True, timeout=30).stdout.strip()
    return f"file://{mirror}", (branch if branch and branch != "HEAD" else "main")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000, help="the hub's port on 127.0.0.1")
    parser.add_argument("--minutes", type=float, default=0,
                        help="stop by itself after this many minutes (0: run until Ctrl-C)")
    parser.add_argument("--password", default="attention",
                        help="the shared password of the try-out login (DummyAuthenticator)")
    parser.add_argument("--state", type=Path, default=classroom.HERE / "state",
                        help="database, cookie secret and students' homes (classroom/state)")
    parser.add_argument("--class-group", default="",
                        help="the class mode: the system group whose users may log in (PAM)")
    parser.add_argument("--teacher", default="teacher", help="the hub's admin (the teacher)")
    args = parser.parse_args(argv)
    problem = argument_problem(args)
    if problem:
        parser.error(problem)

    missing = classroom.missing_tools()
    if missing:
        sys.exit("missing: " + "; ".join(missing))
    state = args.state.resolve()
    state.mkdir(parents=True, exist_ok=True)
    repo, branch = local_course(state)
    hub = classroom.Hub(state, port=args.port, password=args.password,
                        deadline=args.minutes * 60 if args.minutes else None,
                        class_group=args.class_group or None, teacher=args.teacher)
    print(f"starting JupyterHub on {hub.url} (log: {state / 'hub.log'}) ...", flush=True)
    hub.start()
    login = (f"Class mode: the users of group {args.class_group} log in with their own passwords "
             f"({args.teacher} is the admin)." if args.class_group else
             f"Try-out: log in with any user name and the password {args.password!r} "
             f"({args.teacher!r} is the admin); every server is this user's process.")
    print(f"""
  The classroom hub is running at {hub.url}/
  {login}

  {public_link(hub.url)}
  The same link with this checkout as the course (works offline; branch {branch}):
    {classroom.nbgitpuller_link(hub.url, repo, branch)}

  Students' homes: {state / 'homes'}/NAME
  Stop with Ctrl-C{f' (or it stops by itself in {args.minutes:g} min)' if args.minutes else ''}.
""", flush=True)
    try:
        hub.proc.wait()
    except KeyboardInterrupt:
        print("stopping the hub and every student's server ...", flush=True)
    finally:
        hub.stop()


def argument_problem(args):
    """What is wrong with the command line (None when nothing is): a port outside
    1024..65535, negative minutes, and in the class mode a group that does not exist, a
    teacher who is not a member of it, or a hub not run as root (it starts servers as the
    students)."""
    import grp
    import math
    import os
    import pwd

    if not 1024 <= args.port <= 65535:
        return f"--port must be in 1024..65535, got {args.port}"
    if not math.isfinite(args.minutes) or args.minutes < 0:
        return f"--minutes must be a number >= 0 (0: until Ctrl-C), got {args.minutes}"
    if not args.class_group:
        return None
    try:
        members = set(grp.getgrnam(args.class_group).gr_mem)
    except KeyError:
        return (f"--class-group {args.class_group!r} is not a group of this machine: create "
                "the class first (classroom/users.py add --group ...)")
    try:
        pwd.getpwnam(args.teacher)
    except KeyError:
        return f"--teacher {args.teacher!r} is not a user of this machine"
    if args.teacher not in members:
        return f"--teacher {args.teacher!r} is not in the class's group {args.class_group!r}"
    if os.geteuid() != 0:
        return "the class mode starts each student's server as that student: run it as root"
    return None


if __name__ == "__main__":
    main()
