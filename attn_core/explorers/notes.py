"""Where an explorer's errors and notes go: beside the control that caused them.

:class:`_Controls` (an explorer's ``.controls``) remembers which control the learner changed
last, so that :class:`~attn_core.explorers.base.Explorer` shows an error right below that
control's row (an error shown below a tall figure is off the screen: nothing seems to
happen). Number boxes clamp an entry outside their range without a word; the note of
:func:`_range_note`, put beside them, says so.
"""

from __future__ import annotations

import html

import ipywidgets as W

from .colors import HIGHLIGHT_BACKGROUND, HIGHLIGHT_TEXT, MUTED_COLOR

#: Number boxes: ipywidgets sets an entry outside ``min``..``max`` to the nearest end.
_NUMBER_BOXES = (W.BoundedIntText, W.BoundedFloatText)
_NOTE_CSS = f"font-family:sans-serif;font-size:12px;color:{MUTED_COLOR}"
_CLAMP_CSS = (f"font-family:sans-serif;font-size:12px;background:{HIGHLIGHT_BACKGROUND};"
              f"color:{HIGHLIGHT_TEXT};padding:0 4px")


def _holds(container, widget):
    """True if ``widget`` is ``container`` or inside it (through any ``children``)."""
    if container is widget:
        return True
    return any(_holds(child, widget) for child in getattr(container, "children", ()))


def _label(name, box):
    return box.description or name


def _range_note(boxes, changed):
    """The note beside a row of number boxes: their range, and what happens outside it;
    if the box ``changed`` sits at an end, that it may have been set there."""
    lows = {b.min for _, b in boxes}
    highs = {b.max for _, b in boxes}
    if len(lows) == 1 and len(highs) == 1:
        low, high = lows.pop(), highs.pop()
        span = f"{'each box holds' if len(boxes) > 1 else 'the box holds'} {low:g} to {high:g}"
    else:
        span = "; ".join(f"{_label(n, b)}: {b.min:g} to {b.max:g}" for n, b in boxes)
    text = (f'<span style="{_NOTE_CSS}">{html.escape(span)}: a number outside is set to the '
            "nearest end</span>")
    if changed is not None and changed.value in (changed.min, changed.max):
        end = "largest" if changed.value == changed.max else "smallest"
        name = next(_label(n, b) for n, b in boxes if b is changed)
        text += (f'<br><span class="clamped" style="{_CLAMP_CSS}">{html.escape(name)} is '
                 f"{changed.value:g}, the {end} it holds: an entry beyond it was set to "
                 f"{changed.value:g}</span>")
    return text


class _Controls(dict):
    """The explorer's controls by name; remembers which one the learner changed last
    (``explorer._cause``), so that an error can be shown beside that control.

    The recorder is attached when a control is added, before the explorer's own handlers,
    so it has run by the time any handler fails.
    """

    def __init__(self, explorer):
        super().__init__()
        self._explorer = explorer

    def __setitem__(self, name, widget):
        super().__setitem__(name, widget)

        def record(*_args, name=name):
            if not self._explorer._busy:  # not the explorer's own change of a control
                self._explorer._cause = name

        if isinstance(widget, W.Button):
            widget.on_click(record)
        elif hasattr(widget, "value"):
            widget.observe(record, names="value")


def note_ranges(explorer, rows):
    """``rows`` with a note beside every row of number boxes (``explorer.range_notes``).

    A box sets an entry outside its range to the nearest end without a word (1000000
    becomes 20), so the note says so, and says it again, marked, when a box sits at an end.
    """
    rows = list(rows)
    for i, row in enumerate(rows):
        boxes = [(n, w) for n, w in explorer.controls.items()
                 if isinstance(w, _NUMBER_BOXES) and _holds(row, w)]
        if not boxes:
            continue
        note = W.HTML(_range_note(boxes, None), layout=W.Layout(margin="2px 0 2px 4px"))
        for name, box in boxes:
            explorer.range_notes[name] = note
            box.observe(lambda change, b=boxes, n=note: setattr(
                n, "value", _range_note(b, change["owner"])), names="value")
        if isinstance(row, W.HBox):  # in the row, beside the boxes
            row.children = (*row.children, note)
        else:  # the box is a row of its own: the note just below it
            rows[i] = W.VBox([row, note])
    return tuple(rows)
