"""tools/static_explorers.py runs the notebooks' code in the test process: it must leave the
process as it found it (numpy's print options: the notebooks' setup cells set them, and under
pytest-xdist attn_core's doctests ran after the build in the same worker and printed
``1.3000`` for ``1.3``)."""

import importlib.util
from pathlib import Path

import nbformat
import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def load_tool():
    spec = importlib.util.spec_from_file_location("static_explorers",
                                                  ROOT / "tools" / "static_explorers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_building_the_explorers_leaves_numpys_print_options_alone():
    notebook = nbformat.read(ROOT / "notebooks" / "04-scaling.ipynb", as_version=4)
    setup = "".join(c.source for c in notebook.cells if c.cell_type == "code")
    assert "set_printoptions" in setup  # the notebook does change them (else this tests nothing)
    before = np.get_printoptions()
    built = load_tool().build_explorers(notebook)
    assert built, "no explorer built from notebook 04"
    assert np.get_printoptions() == before
