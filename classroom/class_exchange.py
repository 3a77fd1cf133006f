"""nbgrader's exchange for the class mode: submissions private to their author and the teacher,
and unforgeable.

nbgrader's default exchange leaves each submission world-readable (folder mode 0777, files
0644, hidden only by a random name) in an ``inbound`` folder without the sticky bit, and its
``collect`` files a folder under the student name the folder claims, whoever wrote it (it only
logs "cheating attempt?"). In the class mode (classroom/jupyterhub_config.py) every person is a
Unix user of their own with a private primary group (classroom/users.py), so the file system can
enforce what nbgrader only hopes for:

* ``inbound`` (made the teacher's by the hub at its start, with the course's folder and
  ``outbound``: classroom/users.py ``prepare_course``; kept so by the teacher's
  ``release_assignment``) is mode 3733, group the teacher's private group: students may enter
  and create, not list; the sticky bit stops anyone but an entry's owner from removing or
  renaming it; setgid gives every entry the teacher's group.
* a submission (:class:`PrivateSubmit`) is created under umask 027 and left at folders 0750,
  files 0640: its author and the teacher's group (the teacher alone) read it, no one else does,
  and no one but its author can change it.
* ``collect`` (:class:`OwnerCheckedCollect`) files an entry only when the entry and everything
  in it belong to the Unix user the entry's name claims and it holds only regular files and
  folders (no symbolic link that would make the teacher copy a file of theirs, such as the
  source notebook with its solutions and hidden tests, into a submission). Any other entry, and
  an entry whose name nbgrader cannot read a time from, is skipped with a warning that names
  it; it never shadows the student's own and never stops the collect of the others.

How ``collect`` makes that hold for WHAT IS COPIED, not only for what was looked at: the entry
belongs to the student, who may change it at any moment, also while the teacher copies it (a
check by name with ``lstat`` followed by a copy by name can be raced: swap a file for a link in
between). So the check and the copy are one operation on open file descriptors
(:func:`copy_own_tree`): every folder and file is opened relative to its parent's descriptor,
by one name, with ``O_NOFOLLOW`` (a symbolic link is not opened but refused); ``fstat`` of
that descriptor gives its type and owner, checked before a byte is read; and the bytes copied
are read from that same descriptor. Whatever the student does meanwhile, what is copied is an
object that was, when opened, a regular file or folder of theirs (a hard link to someone
else's file is refused too: it has its owner's uid). The verified copy goes into a private
staging folder of the teacher's (``tempfile``, mode 0700); only entries copied whole are
handed to nbgrader's own ``collect``, which files them from there, so a refused entry leaves
the student's earlier collected submission as it was. (A selection by ``lstat`` comes first,
:func:`entry_owner_problem`, so that a forged entry under a student's name is never picked
as their newest; it decides which entry is copied, not what.)

Used through ``c.ExchangeFactory`` in the nbgrader configuration the hub writes in the class mode.
"""

import errno
import os
import pwd
import shutil
import stat
import tempfile
from stat import S_IRGRP, S_IRUSR, S_IRWXU, S_ISGID, S_ISVTX, S_IWUSR, S_IXGRP

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment
from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.utils import ignore_patterns, parse_utc

#: Modes of a submission's folders and files: the author, and the teacher through the group.
FOLDER_MODE = S_IRWXU | S_IRGRP | S_IXGRP  # 0750
FILE_MODE = S_IRUSR | S_IWUSR | S_IRGRP  # 0640
#: ``inbound``: others may enter and create (not list); sticky; setgid (entries get its group).
INBOUND_MODE = 0o733 | S_ISVTX | S_ISGID  # 3733
#: The name ``collect`` gives an entry it refuses (no student id can start with it: a '\0').
REFUSED = "\0refused:"
#: How every file and folder of an entry is opened by ``collect``: a symbolic link is not
#: followed but refused (ELOOP), a FIFO does not block, no terminal is taken.
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
#: Folders nested deeper than this in an entry are refused (each level holds a descriptor).
MAX_DEPTH = 32


class PrivateRelease(ExchangeReleaseAssignment):
    """nbgrader's release, with ``inbound`` made 3733 (sticky added to nbgrader's 2733)."""

    def init_dest(self):
        super().init_dest()
        os.chmod(self.inbound_path, INBOUND_MODE)


class PrivateSubmit(ExchangeSubmit):
    """nbgrader's submit, leaving the submission readable by its author and the teacher only."""

    def set_perms(self, dest, fileperms, dirperms):
        super().set_perms(dest, fileperms=FILE_MODE, dirperms=FOLDER_MODE)

    def do_copy(self, src, dest, log=None):
        if os.path.dirname(dest) != self.inbound_path:  # the copy into the student's cache
            return super().do_copy(src, dest, log)
        # The entry: made first, it gets the teacher's group and setgid from inbound, and so
        # does every file made in it while it keeps setgid. copytree ends by copying the source
        # folder's mode onto it, which clears setgid (its author is not in the teacher's
        # group): the two files nbgrader writes after the copy are therefore made now, empty
        # (nbgrader's later writes reuse them, group kept).
        if self.get_size(src) > 1000 * self.coursedir.max_dir_size:
            raise RuntimeError(f"the submission is larger than the exchange's limit of "
                               f"{self.coursedir.max_dir_size} kB")
        os.mkdir(dest, FOLDER_MODE)
        for name in ("timestamp.txt", "submission_secret.txt"):
            with open(os.path.join(dest, name), "x"):
                pass
        shutil.copytree(src, dest, dirs_exist_ok=True, ignore=ignore_patterns(
            exclude=self.coursedir.ignore, include=self.coursedir.include,
            max_file_size=self.coursedir.max_file_size, log=self.log))

    def copy_files(self):
        old = os.umask(0o027)  # nothing of the copy is ever readable by others
        try:
            super().copy_files()  # ends by opening the folder to 0777 for the teacher ...
        finally:
            os.umask(old)
        # ... which the setgid inbound makes needless: close it again (with the cache copy in
        # between, the folder was open a moment under a random name no one can list).
        dest = os.path.join(self.inbound_path, self.assignment_filename)
        os.chmod(dest, FOLDER_MODE)


def owner_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def entry_owner_problem(path, claimed):
    """Why the inbound entry ``path`` is not ``claimed``'s own work (``None`` when it is).

    The entry and everything in it must belong to the Unix user ``claimed`` and be regular
    files or folders.
    """
    try:
        uid = pwd.getpwnam(claimed).pw_uid
    except KeyError:
        return f"no user {claimed!r} on this machine"
    for folder, dirs, files in os.walk(path):
        for name in [None, *dirs, *files]:
            item = folder if name is None else os.path.join(folder, name)
            info = os.lstat(item)
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                return f"{item} is not a regular file or folder"
            if info.st_uid != uid:
                return f"{item} belongs to {owner_name(info.st_uid)}, not to {claimed}"
    return None


class Refused(Exception):
    """Why an entry is not copied (raised by :func:`copy_own_tree`)."""


def _open_own(name, dir_fd, path, uid):
    """``(fd, stat)`` of ``name`` in the folder ``dir_fd``: opened without following a link,
    and a regular file or folder owned by ``uid`` (checked on the open descriptor); else
    :class:`Refused` naming ``path``."""
    before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not (stat.S_ISREG(before.st_mode) or stat.S_ISDIR(before.st_mode)):
        raise Refused(f"{path} is not a regular file or folder")
    try:
        fd = os.open(name, OPEN_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # it became a link since the stat above
            raise Refused(f"{path} is not a regular file or folder") from None
        raise Refused(f"{path} could not be opened ({exc.strerror})") from None
    info = os.fstat(fd)  # what was opened, whatever the name points at now
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        os.close(fd)
        raise Refused(f"{path} is not a regular file or folder")
    if info.st_uid != uid:
        os.close(fd)
        raise Refused(f"{path} belongs to {owner_name(info.st_uid)}, not to "
                      f"{owner_name(uid)}")
    return fd, info


def _copy_file(fd, info, dest, budget):
    """Copy the open file ``fd`` to the new file ``dest``; ``budget`` [bytes left] shrinks."""
    with open(dest, "xb") as out:
        while chunk := os.read(fd, 1 << 20):
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise Refused("the entry is larger than the exchange's limit")
            out.write(chunk)
    os.chmod(dest, stat.S_IMODE(info.st_mode) & 0o777 | 0o600)
    os.utime(dest, ns=(info.st_atime_ns, info.st_mtime_ns))


def _copy_folder(fd, info, dest, path, uid, ignore, budget, depth):
    if depth > MAX_DEPTH:
        raise Refused(f"{path} is nested more than {MAX_DEPTH} folders deep")
    os.mkdir(dest, 0o700)
    names = sorted(os.listdir(fd))
    skipped = set(ignore(path, names)) if ignore is not None else set()
    for name in names:
        if name in skipped:
            continue
        child, child_info = _open_own(name, fd, os.path.join(path, name), uid)
        try:
            if stat.S_ISDIR(child_info.st_mode):
                _copy_folder(child, child_info, os.path.join(dest, name),
                             os.path.join(path, name), uid, ignore, budget, depth + 1)
            else:
                _copy_file(child, child_info, os.path.join(dest, name), budget)
        finally:
            os.close(child)
    os.chmod(dest, stat.S_IMODE(info.st_mode) & 0o777 | 0o700)
    os.utime(dest, ns=(info.st_atime_ns, info.st_mtime_ns))


def copy_own_tree(src, dest, claimed, ignore=None, max_bytes=None):
    """Copy the inbound entry ``src`` to ``dest`` (a new path), checking on every open
    descriptor that it is a regular file or folder of the user ``claimed`` (see the module's
    docstring). ``ignore(folder, names)``: names not to copy (nbgrader's ``ignore_patterns``);
    ``max_bytes``: the most the entry may hold. Raises :class:`Refused` (``dest`` removed)."""
    try:
        uid = pwd.getpwnam(claimed).pw_uid
    except KeyError:
        raise Refused(f"no user {claimed!r} on this machine") from None
    budget = [float("inf") if max_bytes is None else max_bytes]
    parent, name = os.path.split(os.path.abspath(src))
    top = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd, info = _open_own(name, top, src, uid)
    finally:
        os.close(top)
    try:
        if not stat.S_ISDIR(info.st_mode):
            raise Refused(f"{src} is not a folder")
        _copy_folder(fd, info, dest, src, uid, ignore, budget, 0)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    finally:
        os.close(fd)


class OwnerCheckedCollect(ExchangeCollect):
    """nbgrader's collect, filing only entries that belong to the student their name claims,
    checked on what is copied (see the module's docstring)."""

    def _path_to_record(self, path):
        try:
            record = super()._path_to_record(path)
        except Exception as exc:  # noqa: BLE001  (nbgrader's timestamp parser: any error)
            name = os.path.basename(path)
            self.log.warning("Not collected (no time can be read from its name: %s): %s",
                             exc, path)
            return {"username": REFUSED + name, "filename": name,
                    "timestamp": parse_utc("2000-01-01 00:00:00 UTC")}
        problem = entry_owner_problem(path, record["username"])
        if problem:
            self.log.warning("Not collected (not %s's own submission): %s",
                             record["username"], problem)
            record["username"] = REFUSED + record["filename"]  # a group of its own, dropped
        return record

    def init_src(self):
        super().init_src()
        self.src_records = [r for r in self.src_records if not r["username"].startswith(REFUSED)]

    def copy_files(self):
        ignore = ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                 max_file_size=self.coursedir.max_file_size, log=self.log)
        with tempfile.TemporaryDirectory(prefix="nbgrader-collect-") as staging:
            kept = []
            for record in self.src_records:
                src = os.path.join(self.inbound_path, record["filename"])
                try:
                    copy_own_tree(src, os.path.join(staging, record["filename"]),
                                  record["username"], ignore,
                                  1000 * self.coursedir.max_dir_size)
                except (Refused, OSError) as exc:
                    self.log.warning("Not collected (not %s's own submission): %s: %s",
                                     record["username"], src, exc)
                    continue
                kept.append(record)
            # nbgrader's own collect files the verified copies: they are the teacher's, so its
            # owner check (already done, on the originals) would only warn about each.
            self.src_records = kept
            inbound, check = self.inbound_path, self.check_owner
            self.inbound_path, self.check_owner = staging, False
            try:
                super().copy_files()
            finally:
                self.inbound_path, self.check_owner = inbound, check
