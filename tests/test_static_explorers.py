"""tools/static_explorers.py runs the notebooks' code in the test process: it must leave the
process as it found it (numpy's print options: the notebooks' setup cells set them, and under
pytest-xdist attn_core's doctests ran after the build in the same worker and printed
``1.3000`` for ``1.3``)."""

import importlib.util
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

# The explorers' frames: make test runs these, make check leaves them out (make test-explorers).
pytestmark = pytest.mark.explorer


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


# --- which cells build an explorer (cells_to_run: the static edition and the browser test) ---

#: What a cell can do that outlives it and could change an explorer built after it.
LASTING_STATE = re.compile(
    r"set_printoptions|rcParams|style\.use|\bmpl\.rc\(|matplotlib\.rc\(|seterr|random\.seed"
    r"|^\s*blas_threads\(\)|\bblas\s*=\s*blas_threads|setattr\(|os\.environ|"
    r"^\s*(examples|figures|attn_core)\.\w+\s*=", re.M)


def notebook_of(*sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    return nb


def test_a_call_without_arguments_needs_only_the_cells_that_import_it():
    tool = load_tool()
    nb = notebook_of("%matplotlib inline\nimport numpy as np\nfrom attn_core.explorers "
                     "import mask_explorer", "x = np.ones(3)", "from attn_core import figures",
                     "mask_explorer()  # try it")
    assert tool.cells_to_run(nb) == [0, 3]
    for call in ("mask_explorer(n=4)", "mask_explorer(x)", "mask_explorer(*[])",
                 "mask_explorer()\nx"):
        nb.cells[3].source = call
        assert tool.cells_to_run(nb) == [0, 1, 2, 3], call


def test_no_cell_an_explorer_is_built_without_sets_lasting_state():
    """The cells ``cells_to_run`` leaves out may compute anything but may not change what
    outlives them (print options, matplotlib's settings, the BLAS threads, a module's
    attributes): an explorer built without them would differ from the notebook's."""
    tool = load_tool()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        run = tool.cells_to_run(nb)
        left_out = [i for i in range(run[-1] if run else 0)
                    if nb.cells[i].cell_type == "code" and i not in run]
        for i in left_out:
            found = LASTING_STATE.search(nb.cells[i].source)
            assert not found, f"{path.name} cell {i} sets {found[0]!r}, yet is left out"


def test_the_explorer_built_from_the_setup_cell_alone_is_the_notebooks():
    """Notebook 05's softmax explorer, from the cells ``cells_to_run`` names and from every cell
    before it: the same frames and read-outs in every position the static edition records."""
    tool = load_tool()
    nb = nbformat.read(ROOT / "notebooks" / "05-softmax.ipynb", as_version=4)
    run = tool.cells_to_run(nb)
    assert len(run) == 2, run
    everything = nbformat.from_dict(nb)
    index = run[-1]
    everything.cells[index].source = "x = 1  # not a call\n" + nb.cells[index].source
    assert tool.cells_to_run(everything)[-1] == index  # now every cell before it runs
    assert len(tool.cells_to_run(everything)) > 10
    sliced = tool.build_explorers(nb)[index]
    ns = {}
    with np.printoptions():
        for i in tool.cells_to_run(everything)[:-1]:
            exec(tool._code(nb.cells[i]), ns)  # noqa: S102 (the course's own cells)
        full = eval(nb.cells[index].source.strip(), ns)  # noqa: S307
    assert (tool.record_frames("softmax_explorer", sliced)
            == tool.record_frames("softmax_explorer", full))


def test_raw_frames_give_the_very_palette_pngs_of_the_png_frames():
    """The static build keeps frames unencoded (``raw_frames``): every recorded frame of the
    scaling explorer is byte for byte the palette PNG the PNG path gave, and a raw frame holds
    the canvas' own pixels."""
    from attn_core.explorers import scaling_explorer
    from attn_core.explorers.base import light_frames_only, raw_frames
    from attn_core.explorers.png import from_raw

    tool = load_tool()
    with light_frames_only():
        png = tool.record_frames("scaling_explorer", scaling_explorer())
        with raw_frames():
            ex = scaling_explorer()
            raw = tool.record_frames("scaling_explorer", ex)
            pixels = from_raw(ex.png)
    assert raw == png and len(raw["images"]) > 5
    canvas = np.asarray(ex.canvas.figure.canvas.buffer_rgba())
    np.testing.assert_array_equal(pixels, canvas[..., :3])
    assert scaling_explorer().png.startswith(b"\x89PNG")  # outside, PNGs as before


def test_a_clock_reading_never_reaches_a_precomputed_page():
    """The cost explorer's measured time (and the model explorer's, marked the same way) is
    this machine's, now: the read-outs the static edition stores say what a kernel would
    measure instead, and two recordings of the explorer give the same read-outs."""
    from attn_core.explorers import cost_explorer
    from attn_core.explorers.base import CLOCK_ATTR, clocked, without_clock

    tool = load_tool()
    ex = cost_explorer()
    assert CLOCK_ATTR in ex.readout.value and " ms per attention call" in ex.readout.value
    shown = tool.readouts(ex)
    assert " ms per attention call" not in shown and "measured when a kernel runs" in shown
    ex.controls["n"].value = 64  # another length, timed now
    assert tool.readouts(ex) == tool.readouts(ex) and "measured when" in tool.readouts(ex)
    marked = "<p>a " + clocked("b", "12 ms", "timed live", style="color:red") + " z</p>"
    assert without_clock(marked) == ('<p>a <b style="color:red" data-clock="timed live">'
                                     "timed live</b> z</p>")
    assert without_clock("<p>no clock</p>") == "<p>no clock</p>"
