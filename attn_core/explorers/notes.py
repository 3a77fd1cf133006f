"""Where an explorer's errors and notes go: beside the control that caused them.

:class:`_Controls` (an explorer's ``.controls``) remembers which control the learner changed
last, so that :class:`~attn_core.explorers.base.Explorer` shows an error right below that
control's row (an error shown below a tall figure is off the screen: nothing seems to
happen). Number boxes clamp an entry outside their range without a word; the note of
:func:`_range_note`, put beside them, says so. A selection slider's value is shown by a plain
label beside it (:func:`value_note`).
"""

from __future__ import annotations

import html

import ipywidgets as W
import numpy as np
from PIL import Image, ImageChops, ImageDraw

from ..figures.base import MASKED_FACE_COLOR, THEMED_IMAGE
from .colors import (
    DARK_INK,
    DARK_PAGE,
    GREY_CHROMA,
    HIGHLIGHT_BACKGROUND,
    HIGHLIGHT_TEXT,
    MUTED_COLOR,
)
from .png import PngStream

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


#: CSS class of the label that shows a selection slider's value (:func:`value_note`).
READOUT_CLASS = "attn-readout"


def value_note(slider):
    """``slider`` and a plain label showing its option, side by side (an HBox).

    ipywidgets' own read-out of a selection slider is editable text that nothing reads back:
    what a learner types there stays on screen, a blank or wrong value. Make the slider with
    ``readout=False`` and show it in this row; it still takes the arrow keys.
    """
    label = W.Label(value=slider.label, layout=W.Layout(min_width="40px"))
    label.add_class(READOUT_CLASS)
    slider.observe(lambda change: setattr(label, "value", change["new"]), names="label")
    return W.HBox([slider, label])


def _dark_lut():
    """Grey level -> its dark-theme level, per channel: 255 (paper) -> DARK_PAGE, 0 (ink) ->
    DARK_INK; 768 entries, as Pillow's ``point`` takes them for an RGB image."""
    darkness = (255 - np.arange(256)) / 255.0
    page, ink = np.array(DARK_PAGE, float), np.array(DARK_INK, float)
    return (page + darkness[:, None] * (ink - page)).round().astype(np.uint8)  # (256, 3)


_DARK_LUT = _dark_lut()
#: The same as a palette: grey level (index) -> its dark RGB.
_DARK_PALETTE = _DARK_LUT.ravel().tolist()
_GREY_POINT = [255 if v <= GREY_CHROMA else 0 for v in range(256)]
#: A white area inside an image at least this many pixels across (odd) is paper, not a number.
PAPER_OPENING = 7
#: The masked cells' face (``figures.base.MASKED_FACE_COLOR``) as one grey level.
MASKED_LEVEL = int(MASKED_FACE_COLOR[1:3], 16)
#: Inside an image, the greys up to this many pixels from a masked area (as large as
#: PAPER_OPENING) follow it into the dark theme: its hatching, their anti-aliased edges and
#: the text written on masked cells.
MASKED_MARGIN = 3


def dark_image(light, keep_boxes, in_place=False):
    """The dark theme's frame of a light one (Pillow RGB images): greys outside
    ``keep_boxes`` get their lightness inverted into [DARK_PAGE, DARK_INK] (white paper ->
    the dark page, black ink -> light ink); colours, and everything inside the boxes
    (images: a heatmap's cells and their numbers), stay, except white areas at least
    ``PAPER_OPENING`` pixels across (blank paper inside an image) and masked areas as large
    (``MASKED_FACE_COLOR``: masked and uncomputed cells), with the greys up to
    ``MASKED_MARGIN`` pixels around them (hatching, text on the cells): those turn dark too
    (issue 47: they were bright blocks, a tenth of some dark frames).

    keep_boxes : (left, top, right, bottom) pixel boxes. ``in_place``: the dark greys are
    pasted into ``light`` itself (returned), not a copy. All in Pillow's C loops but the
    openings (numpy, each on the smallest part of a box that can hold a result): a frame
    costs about as much as encoding its PNG.
    """
    r, g, b = light.split()
    low = ImageChops.darker(ImageChops.darker(r, g), b)
    chroma = ImageChops.subtract(ImageChops.lighter(ImageChops.lighter(r, g), b), low)
    grey = chroma.point(_GREY_POINT)  # 255 where a pixel is a grey
    is_grey = np.asarray(grey) == 255 if keep_boxes else None
    draw = ImageDraw.Draw(grey)
    for box in keep_boxes:
        draw.rectangle(box, fill=0)
    # Paper inside an image (its blank cells beyond the data, gaps between maps) is paper
    # too: pure white areas at least PAPER_OPENING pixels across; white numbers and halos on
    # the cells are thinner, and the opening (erode, then dilate) leaves them out. Masked
    # areas as large, and the greys around them, likewise.
    if keep_boxes:
        green, low = np.asarray(g), np.asarray(low)
        white = low == 255
        masked = is_grey & (green == MASKED_LEVEL) & (low >= MASKED_LEVEL - GREY_CHROMA)
        paper = np.zeros(white.shape, dtype=bool)
        for left, top, right, bottom in keep_boxes:
            inside = (slice(max(top, 0), bottom + 1), slice(max(left, 0), right + 1))
            found = np.zeros(white[inside].shape, dtype=bool)  # this box's paper
            for kind, reach in ((white, PAPER_OPENING // 2), (masked, PAPER_OPENING)):
                part = _around(kind[inside], reach)
                if part is None:
                    continue
                at = _within(inside, part)
                found[part] |= (_opened(white[at], PAPER_OPENING) if kind is white
                                else _near_masked(masked[at], is_grey[at]))
            paper[inside] = found
        if paper.any():
            grey = ImageChops.lighter(grey, Image.fromarray(paper.astype(np.uint8) * 255))
    swapped = g.convert("P")  # the grey levels as palette indices: one lookup for R, G, B
    swapped.putpalette(_DARK_PALETTE)
    out = light if in_place else light.copy()
    out.paste(swapped.convert("RGB"), None, grey)
    return out


def _around(mask, reach):
    """The smallest (rows, columns) slices of the 2-D bool ``mask`` holding every True pixel
    and ``reach`` pixels around it (within the mask); None when nothing is True. An opening
    of ``mask`` (erode, then dilate, each by at most ``reach``) and what it grows by at most
    ``reach`` less the erosion's share are the same inside these slices as over all of it."""
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(mask[rows[0]:rows[-1] + 1].any(axis=0))
    height, width = mask.shape
    return (slice(max(int(rows[0]) - reach, 0), min(int(rows[-1]) + 1 + reach, height)),
            slice(max(int(cols[0]) - reach, 0), min(int(cols[-1]) + 1 + reach, width)))


def _within(outer, inner):
    """Slices ``inner`` (relative to the region ``outer``, a pair of slices) as slices of the
    whole array."""
    return tuple(slice(o.start + i.start, o.start + i.stop) for o, i in zip(outer, inner))


def _along(m, axis, combine, fill, size):
    """Combine each pixel of the bool array ``m`` with its ``size - 1`` neighbours along
    ``axis`` (``size`` odd; beyond the edge: ``fill``)."""
    pad = size // 2
    widths = [(0, 0), (0, 0)]
    widths[axis] = (pad, pad)
    padded = np.pad(m, widths, constant_values=fill)
    out = m.copy()
    n = m.shape[axis]
    for shift in range(size):
        combine(out, padded[(slice(None),) * axis + (slice(shift, shift + n),)], out=out)
    return out


def _opened(mask, size):
    """Binary opening of the bool array ``mask`` by a ``size`` x ``size`` square (odd): the
    pixels of the white areas a whole square fits in. Separable, one axis at a time."""
    eroded = _along(_along(mask, 0, np.logical_and, True, size), 1, np.logical_and, True, size)
    return _grown(eroded, size // 2)


def _near_masked(masked, is_grey):
    """The pixels that follow a masked area into the dark theme: its face where a
    PAPER_OPENING square fits, the greys up to MASKED_MARGIN pixels from there, and the
    face's own pixels up to PAPER_OPENING from there (the corners between hatching and cells
    a square does not fit in). Bool arrays of one shape."""
    large = _opened(masked, PAPER_OPENING)
    return ((_grown(large, MASKED_MARGIN) & is_grey)
            | (_grown(large, PAPER_OPENING) & masked))


def _grown(mask, by):
    """The bool array ``mask`` dilated by a square reaching ``by`` pixels on every side."""
    size = 2 * by + 1
    return _along(_along(mask, 0, np.logical_or, False, size), 1, np.logical_or, False, size)


def dark_greys(rgb):
    """:func:`dark_image` of pixels outside every image, one by one: each grey (chroma at most
    ``GREY_CHROMA``) to the dark theme's grey of its level, colours unchanged.

    Parameters
    ----------
    rgb : (k, 3) uint8 array

    Returns
    -------
    (k, 3) uint8 array
        A new array.
    """
    chroma = rgb.max(axis=1) - rgb.min(axis=1)  # (k,) uint8: max >= min, no wrap
    out = rgb.copy()
    grey = chroma <= GREY_CHROMA
    out[grey] = _DARK_LUT[rgb[grey, 1]]
    return out


def dark_rgb(rgb, keep):
    """:func:`dark_image` for arrays (a reference for tests): rgb (h, w, 3) uint8, keep
    (h, w) bool (True: left as is). Returns a new (h, w, 3) uint8 array."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    chroma = np.maximum(np.maximum(r, g), b) - np.minimum(np.minimum(r, g), b)
    is_grey = chroma <= GREY_CHROMA
    white = (rgb == 255).all(axis=-1)
    low = rgb.min(axis=-1)
    masked = is_grey & (g == MASKED_LEVEL) & (low >= MASKED_LEVEL - GREY_CHROMA)
    paper = np.zeros_like(white)
    rows, cols = np.nonzero(keep)
    if rows.size:  # one box here: the bounding box of keep
        inside = (slice(rows.min(), rows.max() + 1), slice(cols.min(), cols.max() + 1))
        near = _near_masked(masked[inside], is_grey[inside])
        paper[inside] = (_opened(white[inside], PAPER_OPENING) | near) & keep[inside]
    grey = (is_grey & ~keep) | paper
    out = np.array(rgb)
    out[grey] = _DARK_LUT[g[grey]]
    return out


def image_boxes(figure):
    """Pixel boxes (left, top, right, bottom; inclusive) of every visible image's window.

    An image whose gid is :data:`attn_core.figures.THEMED_IMAGE` is left out: its cells are
    only paper, masked grey and plain colours, with no numbers on them, so it follows the
    theme like the rest of the figure (its blank and masked cells turn dark in the dark
    frame, its colours stay)."""
    height = figure.canvas.get_width_height(physical=True)[1]
    boxes = []
    for ax in figure.axes:
        for im in ax.images:
            if im.get_gid() == THEMED_IMAGE:
                continue
            box = type(ax.bbox).intersection(im.get_window_extent(), ax.bbox)
            if im.get_visible() and box is not None:
                boxes.append((int(np.floor(box.x0)), height - int(np.ceil(box.y1)),
                              int(np.ceil(box.x1)) - 1, height - int(np.floor(box.y0)) - 1))
    return boxes


def dark_png(canvas):
    """The dark theme's PNG of an Agg canvas' current pixels (:func:`dark_image`)."""
    return DarkFrames().png(canvas)


#: How far the paper and masked openings (:func:`_opened`: erode, then dilate; the masked
#: area then grown, :func:`_near_masked`) reach: a pixel's result depends on the pixels up to this
#: many away.
_OPENING_REACH = 2 * (PAPER_OPENING // 2) + max(MASKED_MARGIN, PAPER_OPENING)


#: Pixel by pixel (:func:`dark_greys`) while fewer than one in this many of a frame's pixels
#: changed; above, the changed rectangle is converted whole (the heads mosaic redrawn entirely:
#: 52 ms by pixels against about 20 by the crop, measured on the 2-core machine).
_GREYS_SHARE = 4


class DarkFrames:
    """The dark twins of one canvas' successive frames, each made from the one before.

    A slider move redraws part of a frame (a map, a highlight, a few labels): only the
    rectangle of pixels that changed since the last frame, widened by what the paper opening
    reaches, is converted again (:func:`dark_image` on a crop); the rest is the last dark
    frame's. In a frame without images nothing depends on a pixel's neighbours, so only the
    changed pixels themselves are converted (:func:`dark_greys`: a few lines redrawn across
    both panels of a chart are a few pixels, their rectangle most of the frame). A first
    frame, a new size or moved images convert the whole frame. Every frame equals
    ``dark_image`` of the whole light frame, pixel for pixel (tested).
    """

    def __init__(self):
        self._light = None  # (h, w) uint32: the light pixels the dark frame was made from
        self._dark = None  # (h, w, 3) uint8: the dark frame (RGB: a crop is pasted in one copy)
        self._boxes = None
        self._png = None
        self._stream = PngStream()  # only the changed bands of rows compressed again
        self.converted = 0  # pixels converted by the last call (for tests and benchmarks)

    def png(self, canvas):
        """PNG bytes of the dark twin of the canvas' current pixels."""
        rgba = np.asarray(canvas.buffer_rgba())  # (h, w, 4) uint8
        height, width = rgba.shape[:2]
        words = np.ascontiguousarray(rgba).view(np.uint32)[..., 0]  # (h, w): one per pixel
        boxes = image_boxes(canvas.figure)
        if self._light is None or self._light.shape != words.shape or boxes != self._boxes:
            self._dark = np.empty((height, width, 3), dtype=np.uint8)
            self._convert(rgba, (0, 0, width, height), boxes)
            self._light, self._boxes = words.copy(), boxes
        else:
            changed = words != self._light  # (h, w) bool
            rows = np.flatnonzero(changed.any(axis=1))
            if rows.size == 0:
                self.converted = 0
                return self._png
            if not boxes and np.count_nonzero(changed) * _GREYS_SHARE < changed.size:
                # no image, and a part of the frame changed: each pixel's dark colour is its
                # light colour's (most of the frame: the crop's conversion is faster)
                at = np.flatnonzero(changed[rows[0]:rows[-1] + 1]) + rows[0] * width
                self._dark.reshape(-1, 3)[at] = dark_greys(rgba.reshape(-1, 4)[at, :3])
                self._light.reshape(-1)[at] = words.reshape(-1)[at]
                self.converted = at.size
            else:
                cols = np.flatnonzero(changed[rows[0]:rows[-1] + 1].any(axis=0))
                region = (int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1)
                self._convert(rgba, region, boxes)
                self._light = words.copy()
        self._png = self._stream.png(self._dark)
        return self._png

    def _convert(self, rgba, region, boxes):
        """Convert ``region`` (left, top, right, bottom; exclusive) and all it influences."""
        height, width = rgba.shape[:2]
        reach = _OPENING_REACH

        def widen(box):  # by ``reach`` on every side, within the frame
            left, top, right, bottom = box
            return (max(left - reach, 0), max(top - reach, 0), min(right + reach, width),
                    min(bottom + reach, height))

        paste = widen(region)  # every pixel whose dark value may have changed
        left, top, right, bottom = crop = widen(paste)  # and every pixel those depend on
        light = Image.frombytes("RGB", (right - left, bottom - top),
                                rgba[top:bottom, left:right].tobytes(), "raw", "RGBX")
        shifted = [(max(bl - left, 0), max(bt - top, 0), min(br - left, right - left - 1),
                    min(bb - top, bottom - top - 1))
                   for bl, bt, br, bb in boxes
                   if bl < right and br >= left and bt < bottom and bb >= top]
        dark = np.asarray(dark_image(light, shifted, in_place=True))  # (crop h, crop w, 3)
        pl, pt, pr, pb = paste
        self._dark[pt:pb, pl:pr] = dark[pt - top:pb - top, pl - left:pr - left]
        self.converted = (crop[2] - crop[0]) * (crop[3] - crop[1])
