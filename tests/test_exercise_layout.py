"""Nothing under an exercise gives its answer away before the learner has tried.

Issue 31: in notebook 16 the cell right under exercise 3 printed what ``repeat_kv`` returns,
the expected output of the function the exercise asks for. No code cell may run right under
an exercise cell (after its check, for a code exercise): a worked example belongs before the
exercise or in the solutions.
"""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
def _exercise_followed_by_code(cells):
    """Indices of exercise cells whose next cell (after the check, for a code exercise) is a
    plain code cell: a cell that runs right under an exercise, where its output is read before
    the learner has answered (issue 31: 16 ex 3 printed the expected repeat_kv output)."""
    import re

    found = []
    for i, cell in enumerate(cells[:-1]):
        if "exercise" not in cell.get("metadata", {}).get("tags", []):
            continue
        j = i + 1
        if cells[j].cell_type == "code" and re.search(r"\bcheck_\w+\(", cells[j].source):
            j += 1
        nxt = cells[j] if j < len(cells) else None
        if nxt is not None and nxt.cell_type == "code" \
                and "exercise" not in nxt.get("metadata", {}).get("tags", []):
            found.append(i)
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("[0-9][0-9]*-*.ipynb")),
                         ids=lambda p: p.stem)
def test_no_code_runs_right_under_an_exercise(path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    assert _exercise_followed_by_code(nb.cells) == [], path.name


def test_the_giveaway_check_sees_16s_old_repeat_kv_cell():
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / "16-todays-attention.ipynb", as_version=4)
    i = max(j for j, c in enumerate(nb.cells) if "exercise" in c.metadata.get("tags", []))
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell("print(repeat_kv(k_demo, 2))"))
    assert _exercise_followed_by_code(nb.cells) == [i]
