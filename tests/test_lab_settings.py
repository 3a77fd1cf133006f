"""The course ships JupyterLab settings for learners: no "Jupyter news" pop-up (it covers an
explorer's read-outs on a learner's first session) and no update check.

Checked where learners get JupyterLab: this environment (``make setup``, which ``make lab``
runs), Binder's image (binder/postBuild) and the classroom's environments (the image is
Binder's; ``make classroom-env`` for the local hub). The settings are read back with
JupyterLab's own settings code, as the server serves them to a first session (no user
settings). The browser test (tests/test_browser.py) sees them take effect in a page.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from jupyterlab.commands import get_app_dir
from jupyterlab_server.settings_utils import _get_overrides, get_settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import lab_settings  # noqa: E402

NOTIFICATION = "@jupyterlab/apputils-extension:notification"


def served_defaults(app_dir, user_dir):
    """The notification plugin's defaults as JupyterLab serves them (overrides applied)."""
    settings_dir = os.path.join(app_dir, "settings")
    overrides, error = _get_overrides(settings_dir)
    assert not error, error
    found, _ = get_settings(settings_dir, os.path.join(app_dir, "schemas"), str(user_dir),
                            schema_name=NOTIFICATION, overrides=overrides)
    props = found["schema"]["properties"]
    return {k: props[k]["default"] for k in ("fetchNews", "checkForUpdates",
                                                 "doNotDisturbMode")}


def test_the_shipped_file_turns_off_the_news_and_nothing_else():
    shipped = json.loads(lab_settings.SOURCE.read_text())
    assert shipped == {NOTIFICATION: {"fetchNews": "false", "checkForUpdates": False}}


def test_a_first_session_in_this_environment_gets_them(tmp_path):
    """``make setup`` installed them: a fresh user (no settings of their own) is never
    asked about the news, and other notifications (errors) still show."""
    served = served_defaults(get_app_dir(), tmp_path)
    assert served == {"fetchNews": "false", "checkForUpdates": False,
                      "doNotDisturbMode": False}, served


def test_the_installer_writes_where_jupyterlab_reads(tmp_path):
    prefix = tmp_path / "env"
    written = lab_settings.install(prefix)
    assert written == prefix / "share/jupyter/lab/settings/overrides.d/attention-course.json"
    overrides, error = _get_overrides(str(prefix / "share/jupyter/lab/settings"))
    assert overrides == json.loads(lab_settings.SOURCE.read_text()) and not error
    out = subprocess.run([sys.executable, str(ROOT / "tools/lab_settings.py"), "--prefix",
                          str(tmp_path / "other")], capture_output=True, text=True, check=True)
    assert (tmp_path / "other" / lab_settings.RELATIVE).exists(), out.stdout


def test_make_lab_binder_and_the_classroom_install_them():
    makefile = (ROOT / "Makefile").read_text()
    setup = re.search(r"^\$\(SETUP_STAMP\):.*?(?=^\S)", makefile, re.S | re.M).group(0)
    assert "$(PY) tools/lab_settings.py" in setup  # make setup, run by make lab
    assert re.search(r"^lab: setup", makefile, re.M)
    classroom = re.search(r"^\$\(CLASSROOM_STAMP\):.*?(?=^\S)", makefile, re.S | re.M).group(0)
    assert "$(CLASSROOM_PY) tools/lab_settings.py" in classroom
    post = (ROOT / "binder/postBuild").read_text()
    assert re.search(r"^python tools/lab_settings.py$", post, re.M)  # Binder's, the hub's image
