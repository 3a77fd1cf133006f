"""What every explorer shares: the base class, the fast PNG canvas, the error box, the tables.

Every explorer (one module each in :mod:`attn_core.explorers`) is a small subclass of
:class:`Explorer` whose constructor is wrapped by a function of the same idea
(``scaling_explorer()``, ``mask_explorer()``, ...). The object holds

* ``.controls`` -- a dict, name -> ipywidget (sliders, dropdowns, number boxes, buttons);
* ``.figure`` -- the matplotlib Figure (Agg, no pyplot manager), changed in place;
* ``.image`` -- the ``ipywidgets.Image`` whose value is the PNG the learner sees;
* ``.widget`` -- the container to display (the object also displays itself);
* ``.errors`` -- every exception raised while updating (also shown in a red box right
  below the row of the control that caused it; a number box's range is noted beside it);
* ``.shown()`` -- what is on screen, read back from the artists and the HTML tables.

Speed. A slider move must answer within about 50 ms. Re-drawing a figure from scratch
costs hundreds of milliseconds on a small machine (most of it text layout), so:

* the figure is built once, its layout is fixed after the first draw, and every update
  changes artists in place (the ``update_*`` functions of :mod:`attn_core.figures`);
* only the artists that change (images, bars, lines, outlines) are drawn again, over a
  cached copy of the static background (axes, ticks, labels): "blitting"; an artist drawn
  over others that did not change (a marker) is drawn over the kept last frame of those
  (``_show``'s ``over`` and ``layer_key``);
* the PNG is encoded straight from the Agg buffer with a fast zlib level, and only the
  rows that changed since the canvas' last frame are filtered again and only their bands
  compressed again (:class:`attn_core.explorers.png.PngStream`);
* the dark theme's twin of the frame is made in a worker thread while the light frame is
  sent (Pillow, numpy and zlib release the GIL), from the last twin, only the
  changed rectangle converted again, or only the changed pixels in a frame without images
  (:class:`attn_core.explorers.notes.DarkFrames`);
* numbers are shown in HTML tables (crisp, and nearly free), not as matplotlib text;
* sliders send their value when released (``continuous_update=False``), so a drag never
  queues stale redraws, and an update whose inputs did not change draws nothing.

Maths comes only from :mod:`attn_core`; pictures only from :mod:`attn_core.figures`.
The explorers are the only modules that import ipywidgets.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import sys
import traceback

import ipywidgets as W
import numpy as np

from ..threads import blas_threads, on_learner_threads
from . import frames as _frames
from .clock import CLOCK_ATTR, clocked, without_clock  # noqa: F401  (re-exported)
from .colors import *  # noqa: F403  (re-exported: tests check these colour pairs)
from .colors import _ERROR_CSS, THEME_CSS
from .frames import (  # noqa: F401  (re-exported: the explorers import these from base)
    _STREAMS,
    _TWINS,
    DPI,
    SCALE,
    _Canvas,
    _png,
    css_width,
    light_frames_only,
    raw_frames,
)
from .notes import DarkFrames, _Controls, _holds, note_ranges, value_note

# re-exported: the explorers and tests import the table helpers from base
from .tables import (  # noqa: F401
    HIDDEN_TEXT,
    TABLE_FMT,
    _cell_value,
    _fmt,
    _table,
    _text_of,
    read_tables,
)

__all__ = [
    "DPI",
    "SCALE",
    "Explorer",
    "CLOCK_ATTR",
    "clocked",
    "light_frames_only",
    "raw_frames",
    "without_clock",
    "css_width",
    "read_tables",
]

#: Labels of controls are never cut off.
STYLE = {"description_width": "initial"}
SLIDER_WIDTH = "420px"


def _in_kernel():
    """True inside a running Jupyter kernel (an IPython shell with a kernel, handling a message
    in its event loop): there an explorer may work in a thread (the GPT explorer's
    continuation, the beyond explorer's curves), so that the kernel answers the control's
    message at once and is free for the next one; elsewhere (tests, scripts, benchmarks, and
    a thread where another library keeps an event loop, such as Playwright's synchronous API)
    everything is done at once, in order."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def _heatmap_dynamic(art):
    items = [art.image, *art.highlights]
    if art.mask_patch is not None:
        items.append(art.mask_patch)
    if art.texts is not None:
        items.extend(t for t in art.texts.ravel() if t.get_visible())
    return items


def _bars_dynamic(art):
    return [*art.bars.patches, *(t for t in art.value_texts if t.get_visible()),
            *([art.sum_text] if art.sum_text.get_visible() else [])]


def _marker_dynamic(art):
    return [art.line, art.guide, art.marker, *([art.text] if art.text.get_visible() else [])]


def _hide(*artists):
    for a in artists:
        a.set_visible(False)


def _image_array(art):
    """The values an image shows (masked cells keep their value, e.g. -inf)."""
    return np.array(np.ma.getdata(art.image.get_array()), dtype=float)


def _row(*children, wrap=True):
    return W.HBox(list(children), layout=W.Layout(flex_flow="row wrap" if wrap else "row",
                                                  align_items="flex-start"))


# --- the base class ----------------------------------------------------------------------


class Explorer:
    """Controls, a figure shown as a PNG, HTML read-outs, and visible errors.

    Subclasses build their controls and figure, then call :meth:`_start`. Every change
    of a control runs :meth:`_update` through :meth:`_guard`, which records any exception
    in ``.errors``, shows it in a red box inside the widget (ipywidgets would only log
    it), and raises it again. Constructors and updates run on the learner's BLAS threads.
    """

    title = "explorer"
    #: False for an explorer whose updates make no matrix product (they read stored numbers
    #: and draw): its updates skip :func:`attn_core.threads.blas_threads`, whose look at every
    #: loaded library cost about 2 ms of each change (its constructor still runs inside it).
    updates_use_blas = True

    def __init_subclass__(cls, **kwargs):  # the constructor computes the first picture
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = on_learner_threads(cls.__dict__["__init__"])

    def __init__(self):
        self.controls = _Controls(self)
        self.errors = []
        self._cause = None  # the name of the control changed last (see _Controls)
        self._rows = ()  # the rows given to _start, in order
        self.range_notes = {}  # number box name -> the note beside it (see _note_ranges)
        self.updates = 0
        # Shown at its own CSS size (set by _show), never stretched to the output's width.
        self.image = W.Image(format="png", layout=W.Layout(width="auto", height="auto",
                                                           max_width="100%"))
        # The same figure for JupyterLab's dark theme; CSS shows the one of the theme.
        self.image_dark = W.Image(format="png", layout=W.Layout(width="auto", height="auto",
                                                                max_width="100%"))
        self.image.add_class("attn-light")
        self.image_dark.add_class("attn-dark")
        self.theme_style = W.HTML(THEME_CSS, layout=W.Layout(display="none"))
        self.error_box = W.HTML(layout=W.Layout(display="none"))
        self.widget = None
        self._dark_frames = {}  # Agg canvas -> its DarkFrames (each dark frame from the last)
        self._busy = False
        self._last_key = None
        self.canvas = None

    # wiring
    def _watch(self, *names):
        for name in names:
            self.controls[name].observe(self._on_change, names="value")

    def _on_change(self, change=None):
        if self._busy:  # a control is being changed by the explorer itself
            return
        owner = (change or {}).get("owner")  # e.g. a cell button inside a control's grid
        self._cause = next((n for n, w in self.controls.items() if owner is not None
                            and _holds(w, owner)), self._cause)
        self._guard(self._update)

    def _guard(self, fn, *args):
        try:
            with blas_threads() if self.updates_use_blas else contextlib.nullcontext():
                fn(*args)
        except Exception as exc:
            self._report(exc)
            raise
        if self.error_box.layout.display != "none":
            self.error_box.value = ""
            self.error_box.layout.display = "none"

    def _report(self, exc):
        """Record ``exc`` and show it right below the row of the control that caused it."""
        self.errors.append(exc)
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        self.error_box.value = (
            f'<div style="{_ERROR_CSS}"><b>This explorer hit an error; the figure may be out '
            f"of date.</b>\n{html.escape(detail)}</div>")
        self.error_box.layout.display = ""
        self._place_error_box(self._cause)

    def row_of(self, name):
        """Index in ``_start``'s rows of the row holding control ``name`` (None: no row)."""
        widget = self.controls.get(name)
        for i, row in enumerate(self._rows):
            if widget is not None and _holds(row, widget):
                return i
        return None

    def _place_error_box(self, name):
        """Put the error box just after the row of control ``name`` (the first row of
        controls when ``name`` is None or in no row): beside its cause, not below the figure."""
        if self.widget is None:
            return
        i = self.row_of(name)
        if i is None:
            i = next((j for j, row in enumerate(self._rows)
                      if any(_holds(row, w) for w in self.controls.values())), 0)
        children = (*self._rows[:i + 1], self.error_box, *self._rows[i + 1:])
        if tuple(self.widget.children) != children:
            self.widget.children = children

    def _start(self, *rows):
        if self.image in rows:  # its dark twin right after it (only one shows)
            i = rows.index(self.image)
            rows = (*rows[:i + 1], self.image_dark, *rows[i + 1:], self.theme_style)
        self._rows = note_ranges(self, rows)
        self.widget = W.VBox([*self._rows])
        self._place_error_box(None)
        self._guard(self._update)

    # drawing
    def _show(self, canvas, dynamic, static_key=None, over=(), layer_key=None):
        """Draw the frame (:meth:`_Canvas.draw`) and show it: its dark twin is made in a worker
        thread while the light frame is sent (:meth:`_set_png`). Started after the light frame
        is encoded: on a busy machine the two would share a core, and the light frame would
        come later."""
        canvas.draw(dynamic, static_key, over, layer_key)
        png = _png(canvas.figure.canvas)
        self._set_png(canvas, png, self._twin(canvas))

    def _twin(self, canvas):
        """The dark twin of the canvas' current pixels, being made in :data:`_TWINS` (a
        future of its PNG bytes), or None when no dark frame is drawn."""
        if not _frames._dark_twin:
            return None
        agg = canvas.figure.canvas
        return _TWINS.submit(self._dark_frames.setdefault(agg, DarkFrames()).png, agg)

    def _set_png(self, canvas, png, twin=None):
        """Show ``png`` (the canvas' pixels) and its dark-theme twin, at the figure's size.

        ``twin``: the twin's PNG being made (:meth:`_twin`), awaited after the light frame is
        sent; None: made here, after it."""
        width = f"{css_width(canvas.figure)}px"
        try:
            for image in (self.image, self.image_dark):
                if image.layout.width != width:
                    image.layout.width = width
            changed = png != self.image.value
            if changed:
                self.image.value = png  # sent now: the twin is still being made
        finally:
            dark = twin.result() if twin is not None else None
        if changed and _frames._dark_twin:
            if dark is None:
                agg = canvas.figure.canvas
                dark = self._dark_frames.setdefault(agg, DarkFrames()).png(agg)
            self.image_dark.value = dark

    def _update(self):  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    # what tests and notebooks read
    @property
    def figure(self):
        """The matplotlib Figure currently shown."""
        return self.canvas.figure

    @property
    def png(self):
        """The PNG bytes the learner currently receives."""
        return bytes(self.image.value)

    def naive_png(self):
        """The same figure rendered the slow way (full draw, tight box), for benchmarks."""
        return self.canvas.naive_png()

    def shown(self):  # pragma: no cover - every subclass defines it
        """What is on screen, read back from the artists and the HTML."""
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self):
        return f"<{type(self).__name__}: {', '.join(self.controls)}>"


def _slider(cls, description, **kwargs):
    return cls(description=description, style=STYLE, layout=W.Layout(width=SLIDER_WIDTH),
               continuous_update=False, **kwargs)


def _choice_slider(description, options, value):
    """``(slider, row)``: a selection slider, its value in a label beside it (value_note)."""
    slider = _slider(W.SelectionSlider, description, options=options, value=value, readout=False)
    return slider, value_note(slider)
