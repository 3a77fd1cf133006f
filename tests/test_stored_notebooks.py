"""The stored notebooks: run, error-free, free of live-widget state, and built on the template.

nbval checks that the stored outputs are still true; these tests check what nbval cannot:
that every code cell was stored with its outputs at all, and that every notebook has the
parts a learner relies on.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NUMBERED = [p for p in NOTEBOOKS if p.name[:2].isdigit()]
SECTIONS = sorted(p for p in NUMBERED if p.name != "00-index.ipynb")
APPENDICES = [p for p in NOTEBOOKS if p.name.startswith("appendix-")]
WIDGET_CALL = re.compile(r"\b(\w+_explorer|worked_example_lab)\(")


def cells(path, kind=None):
    nb = json.loads(path.read_text())
    return [c for c in nb["cells"] if kind is None or c["cell_type"] == kind]


def source(cell):
    return "".join(cell["source"])


def tags(cell):
    return cell.get("metadata", {}).get("tags", [])


def test_the_course_notebooks_are_numbered_in_order_without_gaps():
    # 00 the map, 01-09 the article's sections, 10 the recap, 11 the pretrained model,
    # 12 learning attention, then whatever the course adds after it; appendices last
    assert len(NUMBERED) >= 13
    # an inserted section (08b-...) shares its parent's two digits
    numbers = sorted({p.name[:2] for p in NUMBERED})
    assert numbers == [f"{i:02d}" for i in range(len(numbers))]
    assert set(NOTEBOOKS) == set(NUMBERED) | set(APPENDICES)


@pytest.mark.parametrize("path", APPENDICES, ids=lambda p: p.name)
def test_appendices_have_nav_title_and_summary(path):
    text = "\n".join(source(c) for c in cells(path, "markdown"))
    assert "nav" in tags(cells(path)[0]) and "nav" in tags(cells(path)[-1]), "nav line missing"
    assert re.search(r"^# Appendix · ", text, re.M), "title '# Appendix · ...' missing"
    assert "Summary" in text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_code_cell_was_run_and_none_stored_an_error(path):
    for i, cell in enumerate(cells(path, "code")):
        if source(cell).strip():
            assert cell["execution_count"] is not None, f"code cell {i} was stored unrun"
        errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
        assert not errors, f"code cell {i} stored an error: {errors[0].get('ename')}"
        streams = [o for o in cell["outputs"] if o.get("name") == "stderr"]
        assert not streams, f"code cell {i} stored stderr output: {streams[0]['text'][:200]}"


def test_no_notebook_stores_live_widget_state():
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "clean_outputs.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_explorer_cells_are_exempt_from_output_comparison_and_only_those(path):
    for i, cell in enumerate(cells(path, "code")):
        if WIDGET_CALL.search(source(cell)) and "import" not in source(cell):
            assert "nbval-ignore-output" in tags(cell), f"explorer cell {i} is compared by nbval"


@pytest.mark.parametrize("path", SECTIONS, ids=lambda p: p.name)
def test_section_notebooks_follow_the_template(path):
    md = [source(c) for c in cells(path, "markdown")]
    text = "\n".join(md)
    number = path.name.split("-", 1)[0]  # "03", or "08b" for an inserted section
    assert "nav" in tags(cells(path)[0]) and "nav" in tags(cells(path)[-1]), "nav line missing"
    assert re.search(rf"^# {number} · ", text, re.M), "title '# NN · ...' missing"
    for heading in ("Learning goals", "Try it", "Summary"):
        assert heading in text, f"{heading} section missing"
    # The recap's exercises are its quiz.
    assert re.search(r"^#+ .*(Exercises|quiz)", text, re.M), "Exercises section missing"
    setup = [c for c in cells(path, "code") if "%matplotlib inline" in source(c)]
    assert len(setup) == 1, "exactly one setup cell with %matplotlib inline expected"
    figures = [o for c in cells(path, "code") for o in c["outputs"]
               if "image/png" in o.get("data", {})]
    assert figures, "no stored figure: a reader without a kernel would see none"
