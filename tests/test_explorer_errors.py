"""Every explorer shows an error beside the control that caused it, and says beside every
number box that the box clamps.

The explorers are found in ``attn_core.explorers.__all__`` (every ``*_explorer`` and
``*_lab`` factory), so an explorer added later is checked too. The widget tree is walked
here, independently of the base class: an error must be the very next widget after the row
that holds the control (above the figure), and a number box's note must sit in the box's
own row (or right below it) and say what happens to an entry outside the range.
"""

import functools

import ipywidgets as W
import pytest

from attn_core import explorers

# The explorers' frames: make test runs these, make check leaves them out (make test-explorers).
pytestmark = pytest.mark.explorer

FACTORIES = sorted(n for n in explorers.__all__ if n.endswith(("_explorer", "_lab")))
NUMBER_BOXES = (W.BoundedIntText, W.BoundedFloatText)


def holds(container, widget):
    return container is widget or any(holds(c, widget)
                                      for c in getattr(container, "children", ()))


def row_index(ex, widget):
    """Index of the top-level child of ``ex.widget`` that holds ``widget``."""
    found = [i for i, row in enumerate(ex.widget.children) if holds(row, widget)]
    assert len(found) == 1, f"{widget} is not in exactly one row"
    return found[0]


def another_value(widget):
    """A valid value different from the current one, as a learner would choose."""
    if isinstance(widget, W.Text):
        return ""  # an empty text: a real error in the model and GPT explorers
    if isinstance(widget, (W.ToggleButton, W.Checkbox)):
        return not widget.value
    if hasattr(widget, "options"):
        values = [o[1] if isinstance(o, tuple) else o for o in widget.options]
        return next(v for v in values if v != widget.value)
    if hasattr(widget, "max"):
        return widget.max if widget.value != widget.max else widget.min
    raise AssertionError(f"no way to change {widget}")


#: Controls that are containers of other buttons, and how a learner makes them appear.
SETUP = {("mask_explorer", "custom"): {"kind": "custom"}}
#: Buttons that act on text typed but not yet sent (the box keeps it until Enter).
TYPED = {("model_explorer", "run"): {"sentence": ""}}


@functools.cache
def built(factory):
    """One explorer per factory for the module (restored after each use: see ``restore``)."""
    return getattr(explorers, factory)()


def failing(*args, **kwargs):
    raise RuntimeError("injected failure")


def settings(ex):
    """Every control's value (buttons and grids of buttons have none)."""
    return {n: w.value for n, w in ex.controls.items()
            if hasattr(w, "value") and not isinstance(w, W.Button)}


def restore(ex, start):
    """Put every control back as it was (the explorer not reacting), the error box back in
    its first place: the next control is tried as if from a fresh explorer (one per factory:
    building the real LLM's explorer anew for each control took 12 s)."""
    ex._busy = True
    try:
        for name, value in start.items():
            if ex.controls[name].value != value:
                ex.controls[name].value = value
    finally:
        ex._busy = False
    ex.errors.clear()
    ex._cause = None
    ex._place_error_box(None)
    assert settings(ex) == start


@pytest.mark.parametrize("factory", FACTORIES)
def test_an_error_is_shown_next_to_the_control_that_caused_it(factory):
    ex = built(factory)
    start = settings(ex)
    for name in list(ex.controls):
        widget = ex.controls[name]
        for other, value in SETUP.get((factory, name), {}).items():
            ex.controls[other].value = value
        ex._busy = True  # typed, not sent: the explorer does not react yet
        for other, value in TYPED.get((factory, name), {}).items():
            ex.controls[other].value = value
        ex._busy = False
        if isinstance(widget, W.Box):  # a grid of buttons: press its first one
            assert widget.children, f"{factory}: {name!r} is an empty container"
            widget = widget.children[0]
        children = list(ex.widget.children)
        figure = children.index(ex.image) if ex.image in children else len(children)
        was_disabled = getattr(widget, "disabled", False)
        if was_disabled:
            widget.disabled = False  # e.g. a reveal button, enabled once a prediction is asked
        ex.errors.clear()
        ex._update = failing  # the next update fails, whatever it would draw
        try:
            if isinstance(widget, W.Button):
                widget.click()
            else:
                try:
                    widget.value = another_value(widget)
                except RuntimeError:
                    pass  # a slider's failure is raised after it is shown
        finally:
            del ex._update
        assert ex.errors, f"{factory}: changing {name!r} with a failing update showed nothing"
        assert ex.error_box.layout.display != "none", f"{factory}: {name!r}: box hidden"
        kids = list(ex.widget.children)
        row = row_index(ex, widget)
        assert kids.index(ex.error_box) == row + 1, (
            f"{factory}: the error of {name!r} is child {kids.index(ex.error_box)}, "
            f"its control's row is child {row}")
        if row < figure:  # a control above the figure: its error above the figure too
            assert kids.index(ex.error_box) < kids.index(ex.image), f"{factory}: {name!r}"
        widget.disabled = was_disabled
        restore(ex, start)


def note_beside(ex, box):
    """The HTML widgets in the top-level row holding the box, or right after that row."""
    kids = list(ex.widget.children)
    i = row_index(ex, box)
    beside = [w for w in getattr(kids[i], "children", ()) if isinstance(w, W.HTML)]
    return beside + [w for w in kids[i + 1:i + 2] if isinstance(w, W.HTML)]


WITH_BOXES = ["softmax_explorer", "worked_example_lab"]


def test_every_explorer_with_number_boxes_is_listed():
    found = sorted(f for f in FACTORIES
                   if any(isinstance(w, NUMBER_BOXES)
                          for w in built(f).controls.values()))
    assert found == WITH_BOXES


@pytest.mark.parametrize("factory", WITH_BOXES)
def test_number_boxes_say_beside_them_that_they_clamp(factory):
    ex = getattr(explorers, factory)()
    boxes = {n: w for n, w in ex.controls.items() if isinstance(w, NUMBER_BOXES)}
    for name, box in boxes.items():
        text = " ".join(n.value for n in note_beside(ex, box))
        assert f"{box.min:g} to {box.max:g}" in text and "nearest end" in text, (name, text)
    name, box = next(iter(boxes.items()))
    box.value = 1_000_000  # as typed: ipywidgets sets it to the box's maximum
    assert box.value == box.max
    text = " ".join(n.value for n in note_beside(ex, box))
    assert f"the largest it holds: an entry beyond it was set to {box.max:g}" in text, text
    box.value = -1_000_000
    text = " ".join(n.value for n in note_beside(ex, box))
    assert f"the smallest it holds: an entry beyond it was set to {box.min:g}" in text, text
    box.value = (box.min + box.max) / 2
    assert "was set to" not in " ".join(n.value for n in note_beside(ex, box))


def test_the_scaling_explorer_counts_rows_and_keys_alike():
    """Its bars are titled "softmax of row 1" (counted from 1, as the prose counts), so the
    keys under them are numbered from 1 too (they were 0 to 15)."""
    ex = explorers.scaling_explorer()
    ax = ex.bars.ax
    assert ax.get_title(loc="left").endswith("row 1") or "row 1" in ax.get_title()
    ticks = ax.get_xticks()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == [str(int(round(x)) + 1) for x in ticks], labels
    assert labels[0] == "1" and int(labels[-1]) <= len(ex.bars.bars.patches)
