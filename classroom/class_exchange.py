"""nbgrader's exchange for the class mode: submissions private to their author and the teacher,
and unforgeable.

nbgrader's default exchange leaves each submission world-readable (folder mode 0777, files
0644, hidden only by a random name) in an ``inbound`` folder without the sticky bit, and its
``collect`` files a folder under the student name the folder claims, whoever wrote it (it only
logs "cheating attempt?"). In the class mode (classroom/jupyterhub_config.py) every person is a
Unix user of their own with a private primary group (classroom/users.py), so the file system can
enforce what nbgrader only hopes for:

* ``inbound`` (created by the teacher's ``release_assignment``) is mode 3733, group the
  teacher's private group: students may enter and create, not list; the sticky bit stops anyone
  but an entry's owner from removing or renaming it; setgid gives every entry the teacher's
  group.
* a submission (:class:`PrivateSubmit`) is created under umask 027 and left at folders 0750,
  files 0640: its author and the teacher's group (the teacher alone) read it, no one else does,
  and no one but its author can change it.
* ``collect`` (:class:`OwnerCheckedCollect`) takes an entry only when the entry and everything in
  it belong to the Unix user the entry's name claims and it holds only regular files and folders
  (no symbolic link that would make the teacher copy a file of theirs into a submission); any
  other entry is skipped with a warning that names it, and never shadows the student's own.

Used through ``c.ExchangeFactory`` in the nbgrader configuration the hub writes in the class mode.
"""

import os
import pwd
import shutil
import stat
from stat import S_IRGRP, S_IRUSR, S_IRWXU, S_ISGID, S_ISVTX, S_IWUSR, S_IXGRP

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment
from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.utils import ignore_patterns

#: Modes of a submission's folders and files: the author, and the teacher through the group.
FOLDER_MODE = S_IRWXU | S_IRGRP | S_IXGRP  # 0750
FILE_MODE = S_IRUSR | S_IWUSR | S_IRGRP  # 0640
#: ``inbound``: others may enter and create (not list); sticky; setgid (entries get its group).
INBOUND_MODE = 0o733 | S_ISVTX | S_ISGID  # 3733
#: The name ``collect`` gives an entry it refuses (no student id can start with it: a '\0').
REFUSED = "\0refused:"


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
                try:
                    owner = pwd.getpwuid(info.st_uid).pw_name
                except KeyError:
                    owner = f"uid {info.st_uid}"
                return f"{item} belongs to {owner}, not to {claimed}"
    return None


class OwnerCheckedCollect(ExchangeCollect):
    """nbgrader's collect, taking only entries that belong to the student their name claims."""

    def _path_to_record(self, path):
        record = super()._path_to_record(path)
        problem = entry_owner_problem(path, record["username"])
        if problem:
            self.log.warning("Not collected (not %s's own submission): %s",
                             record["username"], problem)
            record["username"] = REFUSED + record["filename"]  # a group of its own, dropped
        return record

    def init_src(self):
        super().init_src()
        self.src_records = [r for r in self.src_records if not r["username"].startswith(REFUSED)]
