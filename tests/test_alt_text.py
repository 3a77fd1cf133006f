"""Figures carry alt text: in a kernel's output metadata and in the static page's <img>."""

import re
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from matplotlib.figure import Figure
from nbclient import NotebookClient

from attn_core import figures

ROOT = Path(__file__).resolve().parents[1]


def test_alt_text_is_made_from_what_the_figure_draws():
    art = figures.heatmap(np.eye(3), list("abc"), list("xyz"), title="weights")
    text = figures.alt_text(art.ax.figure)
    assert text.startswith("Figure") and text.endswith(".")
    assert "heatmap" in text and "weights" in text
    assert figures.figure_metadata(art.ax.figure) == {
        "image/png": {"alt": text}, "needs_background": "light"}
    figures.set_alt_text(art.ax.figure, "Three tokens, each attending only to itself.")
    assert figures.alt_text(art.ax.figure) == "Three tokens, each attending only to itself."
    with pytest.raises(ValueError, match="text must be a non-empty sentence"):
        figures.set_alt_text(Figure(), " ")
    with pytest.raises(TypeError, match="fig must be a matplotlib Figure"):
        figures.set_alt_text("fig", "text")


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """A two-cell notebook run by a real kernel, as a course notebook runs."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "%matplotlib inline\nimport matplotlib.pyplot as plt\nimport numpy as np\n"
            "from attn_core.figures import heatmap"),
        nbformat.v4.new_code_cell(
            'heatmap(np.eye(2), ["a", "b"], ["a", "b"], title="two tokens & <self>")\n'
            "plt.show()"),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    return nb


@pytest.mark.slow  # runs a notebook in a Jupyter kernel: make test's, not make check's
def test_a_figure_shown_by_a_kernel_carries_its_alt_text(executed):
    outputs = [o for o in executed.cells[1].outputs if "image/png" in o.get("data", {})]
    assert len(outputs) == 1, executed.cells[1].outputs
    meta = outputs[0]["metadata"]
    assert meta["image/png"]["alt"].startswith("Figure: a heatmap titled “two tokens & <self>”")
    assert meta["needs_background"] == "light"  # a light panel in JupyterLab's dark theme


@pytest.mark.slow  # runs a notebook in a Jupyter kernel: make test's, not make check's
def test_the_static_pages_img_has_the_alt_text(executed):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import build_html
    finally:
        sys.path.remove(str(ROOT / "tools"))
    page, _ = build_html.exporter().from_notebook_node(executed)
    imgs = re.findall(r"<img [^>]*>", page)
    assert len(imgs) == 1
    alt = re.search(r'alt="([^"]*)"', imgs[0])
    assert alt and alt.group(1).startswith(
        "Figure: a heatmap titled “two tokens &amp; &lt;self&gt;”"), imgs[0]
    assert "jp-needs-light-background" in imgs[0]
