"""Install the course's JupyterLab settings into an environment (``make setup``, Binder's
postBuild, the classroom's environment).

The settings live in ``share/jupyter/lab/settings/overrides.d/attention-course.json``, the
path they take under the environment's prefix, where JupyterLab reads default overrides
(``{sys.prefix}/share/jupyter/lab/settings/overrides.d/*.json``; a learner's own settings
still win). They turn off JupyterLab's "Would you like to receive official Jupyter news?"
pop-up, which otherwise covers an explorer's read-outs the first time a learner opens the
lab, and its update check (a request to a website); nothing else.

    python tools/lab_settings.py            # into this interpreter's environment
    python tools/lab_settings.py --prefix P # into the environment at P
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Where the file sits in the repository and, under an environment's prefix, where it goes.
RELATIVE = Path("share/jupyter/lab/settings/overrides.d/attention-course.json")
SOURCE = ROOT / RELATIVE


def install(prefix=sys.prefix):
    """Copy the settings under ``prefix``; returns the path written."""
    target = Path(prefix) / RELATIVE
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SOURCE, target)
    return target


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefix", default=sys.prefix, help="the environment (sys.prefix)")
    print(f"JupyterLab settings for learners: {install(parser.parse_args(argv).prefix)}")


if __name__ == "__main__":
    main()
