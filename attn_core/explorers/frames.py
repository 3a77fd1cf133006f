"""An explorer's frames: the fast canvas, their PNG encoding, and the dark twin's worker.

Re-exported by :mod:`attn_core.explorers.base` (explorers and tests import these names from
there). See base's module docstring, "Speed", for why each piece is here.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import weakref

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .png import PngStream, raw_rgb

__all__ = ["DPI", "SCALE", "css_width", "light_frames_only", "raw_frames"]

#: CSS pixels per figure inch: a frame is shown ``figsize * DPI`` CSS pixels large.
DPI = 80
#: Device pixels per CSS pixel the frames are drawn for: 2 is sharp on a HiDPI ("2x")
#: screen; a 1x screen shows the same PNG scaled down by the browser, still crisp.
SCALE = 2

# --- fast figures: a fixed layout, a cached background, only changed artists drawn -------


def _png(canvas):
    """PNG bytes of the Agg canvas' current pixels (:class:`attn_core.explorers.png.PngStream`,
    one per canvas: rows "Up"-filtered, zlib level 1, only the bands of rows changed since the
    canvas' last frame compressed again); inside :func:`raw_frames`, the pixels unencoded
    (:func:`attn_core.explorers.png.raw_rgb`)."""
    if _raw:
        return raw_rgb(canvas.buffer_rgba())
    return _STREAMS.setdefault(canvas, PngStream()).png(canvas.buffer_rgba())


#: Agg canvas -> the PngStream of its frames.
_STREAMS = weakref.WeakKeyDictionary()


#: Whether frames are kept unencoded (see :func:`raw_frames`).
_raw = False


@contextlib.contextmanager
def raw_frames():
    """Inside, an explorer's ``.png`` (its image's value) holds the frame's raw RGB pixels
    (:func:`attn_core.explorers.png.raw_rgb`), not a PNG: for the static edition's build,
    which encodes every frame as a palette PNG of its own (``tools/static_explorers.py``); the
    PNG's encoding and decoding in between were a sixth of its time. Never in a kernel: a
    browser cannot show these bytes."""
    global _raw
    before, _raw = _raw, True
    try:
        yield
    finally:
        _raw = before


#: Whether an update also draws the dark theme's frame (see :func:`light_frames_only`).
_dark_twin = True
#: Where the dark twin of a frame is made while the light one is encoded and sent: Pillow,
#: numpy and zlib release the GIL, so on two cores the twin adds little to an update's time
#: (issue 47). One worker: the twins of one canvas are made in turn.
_TWINS = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="attn-dark")


@contextlib.contextmanager
def light_frames_only():
    """Inside, explorers draw only the light frame (``.image``); ``.image_dark`` keeps its
    last picture. For the static edition's build, which shows only the light frames: the
    dark twin was a third of each frame's cost there, thrown away."""
    global _dark_twin
    before, _dark_twin = _dark_twin, False
    try:
        yield
    finally:
        _dark_twin = before


def css_width(figure):
    """The width in CSS pixels a frame of ``figure`` is shown at: its pixels / SCALE."""
    return round(figure.get_figwidth() * figure.dpi / SCALE)


class _Canvas:
    """A Figure on an Agg canvas that re-renders only its changing ("dynamic") artists.

    The first render lets constrained layout place everything, then fixes the layout, so
    nothing moves afterwards. The static part (axes, ticks, labels, colour bars) is drawn
    once per ``static_key`` and kept as a pixel buffer; each frame restores it and draws
    only the dynamic artists on top. A caller that changes static content (limits, tick
    labels) must pass a new ``static_key``.
    """

    def __init__(self, figsize, dpi=DPI * SCALE, layout="constrained"):
        self.figure = Figure(figsize=figsize, dpi=dpi, layout=layout)
        FigureCanvasAgg(self.figure)
        self._backgrounds = {}
        self._layer = None  # (static_key, layer_key, pixels): the last frame drawn under `over`
        self._layout_fixed = layout is None  # None: the caller places the axes itself
        self.full_draws = 0

    def invalidate(self):
        """Forget every cached background (after a change to static artists)."""
        self._backgrounds.clear()
        self._layer = None

    def fix_layout(self):
        """Let constrained layout place everything once, then keep it (idempotent)."""
        if not self._layout_fixed:
            self.figure.get_layout_engine().execute(self.figure)
            self.figure.set_layout_engine("none")
            self._layout_fixed = True

    def ensure_background(self, dynamic, static_key=None):
        """Draw and keep the static part for ``static_key`` unless it is cached already.

        Returns True when it had to draw (a full draw, the slow path).
        """
        self.fix_layout()
        if static_key in self._backgrounds:
            return False
        shown = [a for a in dynamic if a.get_visible()]
        for a in shown:
            a.set_visible(False)
        try:
            self.figure.canvas.draw()
        finally:
            for a in shown:
                a.set_visible(True)
        self._backgrounds[static_key] = self.figure.canvas.copy_from_bbox(self.figure.bbox)
        self.full_draws += 1
        return True

    def draw(self, dynamic, static_key=None, over=(), layer_key=None):
        """Draw the frame's pixels (no PNG): the background of ``static_key``, then the
        artists ``dynamic`` on top, then ``over``.

        With a ``layer_key``, the pixels before ``over`` are kept (one layer, the last); a
        later draw with the same keys restores them and draws only ``over`` (a marker moved
        over lines that did not change). ``over`` lies above every ``dynamic`` artist.
        """
        canvas = self.figure.canvas
        renderer = canvas.get_renderer()
        layer = self._layer
        if (layer_key is not None and layer is not None and layer[:2] == (static_key, layer_key)
                and static_key in self._backgrounds):
            canvas.restore_region(layer[2])
        else:
            if not self.ensure_background([*dynamic, *over], static_key):
                canvas.restore_region(self._backgrounds[static_key])
            for a in sorted(dynamic, key=lambda a: a.get_zorder()):  # as matplotlib orders them
                if a.get_visible():
                    a.draw(renderer)
            if layer_key is not None:
                self._layer = (static_key, layer_key, canvas.copy_from_bbox(self.figure.bbox))
        for a in sorted(over, key=lambda a: a.get_zorder()):
            if a.get_visible():
                a.draw(renderer)

    def render(self, dynamic, static_key=None):
        """Draw and return the PNG bytes; ``dynamic`` is a list of artists to draw on top."""
        self.draw(dynamic, static_key)
        return _png(self.figure.canvas)

    def naive_png(self):
        """What the inline backend does on every change: a full draw with a tight box."""
        out = io.BytesIO()
        self.figure.savefig(out, format="png", dpi=self.figure.dpi, bbox_inches="tight")
        return out.getvalue()


class _HalvesCanvas(_Canvas):
    """A canvas whose top and bottom halves are redrawn apart (the bars, the map).

    Both halves' dynamic artists are drawn on a full render (a new background); after that,
    :meth:`render_halves` restores only the halves that changed from the cached background
    and draws their artists, leaving the other half's pixels as the last frame left them.
    """

    _cut = None

    def render_halves(self, top, bottom, split_y, changed, static_key):
        """PNG bytes after redrawing the ``changed`` halves (``"top"``, ``"bottom"``).

        ``split_y()`` gives the height (display pixels from the bottom) between the halves;
        it is asked once, when the layout is fixed.
        """
        canvas = self.figure.canvas
        if self.ensure_background([*top, *bottom], static_key):
            changed = ("top", "bottom")
        background = self._backgrounds[static_key]
        width, height = canvas.get_width_height()
        if self._cut is None:
            self._cut = int(round(height - split_y()))  # Agg's rows are counted from the top
        cut = self._cut
        boxes = {"top": (0, 0, width, cut), "bottom": (0, cut, width, height)}
        renderer = canvas.get_renderer()
        for half, artists in (("top", top), ("bottom", bottom)):
            if half in changed:
                # xy: where the saved region's corner goes (the whole figure's: 0, 0)
                canvas.restore_region(background, bbox=boxes[half], xy=(0, 0))
                for a in artists:
                    if a.get_visible():
                        a.draw(renderer)
        return _png(canvas)
