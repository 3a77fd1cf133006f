"""Drop live-widget state from stored notebooks, keeping every other output as it is.

Executing a notebook stores two things about each widget: its model state (in the notebook
metadata, with the PNG bytes of every explorer) and a ``widget-view`` output pointing at
that model. Both change on every run and neither is what a reader without a kernel should
see: that reader gets the static figure drawn just above each explorer, and the explorer's
plain-text description. So this keeps the ``text/plain`` part of widget outputs and removes
the rest; running the notebook brings the live widget back.

Usage: python tools/clean_outputs.py [NOTEBOOK ...]   (default: every notebooks/*.ipynb)
       python tools/clean_outputs.py --check          (exit 1 if a notebook holds widget state)
"""

import argparse
import sys
from pathlib import Path

import nbformat

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
ROOT = Path(__file__).resolve().parents[1]


def clean(nb):
    """Remove widget state and widget-view outputs from ``nb`` in place; True if it changed."""
    changed = nb.metadata.pop("widgets", None) is not None
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data:
                del data[WIDGET_VIEW]
                changed = True
    return changed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    stale = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        if clean(nb):
            stale.append(path)
            if not args.check:
                nbformat.write(nb, path)
    for path in stale:
        print(f"{'holds widget state' if args.check else 'cleaned'}: {path}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
