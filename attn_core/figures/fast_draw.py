"""Faster redraws of the artists an explorer changes on every slider move: the same pixels.

An explorer redraws its changing artists over a cached background
(:class:`attn_core.explorers.base._Canvas`). Two of them cost most of a model explorer's
redraw (issue 47), and both are made cheaper here without changing a pixel:

* an image drawn with ``interpolation="nearest"``: matplotlib resamples the data to the
  screen's pixels on every draw (about 10 ms for a 540 x 540 pixel map). Each screen pixel
  shows one cell, and which one depends only on the geometry, so :class:`NearestImage`
  asks matplotlib once which cell each pixel shows (it draws the cells' numbers as colours),
  checks that gathering the cells' colours gives matplotlib's own picture pixel for pixel (if
  not, matplotlib draws as before), and then colours the cells and gathers them: one numpy
  index per frame.
* a text: matplotlib lays out and renders each glyph on every draw (about 0.25 ms a glyph
  here), and a title naming the layer and head takes one of a few values, a label ("[CLS]",
  a head's number) comes back in every sentence. :class:`SpriteText` keeps the pixels of
  each text drawn together with the pixels that were under it; when the same string in the
  same style is drawn at the same place within a pixel over the same pixels, in any figure,
  they are copied back.

Both are made by :func:`fast_redraws`, which changes the class of existing artists in place
(every property the figure set stays as it was); both behave exactly like their base class
on any renderer other than Agg's.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.image import AxesImage
from matplotlib.text import Text

__all__ = ["NearestImage", "SpriteText", "fast_redraws"]

#: Texts whose pixels :class:`SpriteText` keeps (a few kB each): every title of the model
#: explorer (72 heads, 64 queries) and the labels of many sentences.
SPRITES_KEPT = 2048
#: Pixels around a text's box that its anti-aliased glyphs may reach.
SPRITE_PAD_PX = 3


#: Gathers kept for geometries drawn before (a new sentence of the same length and labels
#: puts its maps where the last one was): geometry -> (index, left, bottom, trans).
_PLANS = {}
PLANS_KEPT = 64


class NearestImage(AxesImage):
    """An ``AxesImage`` shown with ``interpolation="nearest"`` whose resampling is one
    gather: for every screen pixel, the cell it shows (the same picture, pixel for pixel)."""

    def make_image(self, renderer, magnification=1.0, unsampled=False):
        data = self.get_array()
        if (unsampled or self.get_interpolation() != "nearest" or data is None
                or data.ndim != 2 or not isinstance(renderer, RendererAgg)):
            return super().make_image(renderer, magnification, unsampled)
        key = (*self._geometry(magnification), renderer.width, renderer.height)
        plan = getattr(self, "_nearest_plan", None)
        if (plan is None or plan[0] != key) and key in _PLANS:  # another image drawn so
            plan = self._nearest_plan = (key, _PLANS[key])
        if plan is None or plan[0] != key:
            made = super().make_image(renderer, magnification, unsampled)
            self._nearest_plan = (key, _gather_plan(self, made, renderer, magnification))
            if self._nearest_plan[1] is not None:
                _PLANS[key] = self._nearest_plan[1]
                while len(_PLANS) > PLANS_KEPT:
                    _PLANS.pop(next(iter(_PLANS)))
            return made
        gather = plan[1]
        if gather is None:  # matplotlib's picture was not a plain gather: draw as it does
            return super().make_image(renderer, magnification, unsampled)
        index, left, bottom, trans = gather
        return _gathered(self.to_rgba(data, bytes=True), index), left, bottom, trans

    def _geometry(self, magnification):
        """What decides which cell each pixel shows: shape, place, clip, magnification."""
        clip = self.get_clip_box()
        return (self.get_array().shape, self.origin, tuple(self.get_extent()),
                tuple(self.get_window_extent().bounds), tuple(self.axes.bbox.bounds),
                None if clip is None else tuple(clip.bounds), float(magnification),
                self.get_alpha() if np.ndim(self.get_alpha()) == 0 else id(self.get_alpha()),
                self.get_interpolation_stage())


def _gathered(rgba, index):
    """``rgba`` (h, w, 4) uint8 cells gathered at ``index`` (H, W) flat cell numbers:
    (H, W, 4) uint8 pixels."""
    words = np.ascontiguousarray(rgba).view(np.uint32).reshape(-1)  # (h * w,) one per cell
    return words[index].view(np.uint8).reshape(*index.shape, 4)


def _gather_plan(image, made, renderer, magnification):
    """``(index, left, bottom, trans)`` reproducing matplotlib's picture ``made`` of
    ``image``, or None when a gather does not give the same pixels.

    Which cell each pixel shows is asked of matplotlib itself: the same image is drawn once
    with every cell's number as its colour (RGBA data are not colour-mapped, and "nearest"
    copies a cell's colour whole), and the pixels are read back as numbers.
    """
    pixels, left, bottom, trans = made
    data = image.get_array()
    h, w = data.shape
    if pixels is None or h * w >= 2 ** 24:
        return None
    codes = np.arange(h * w, dtype=np.uint32).reshape(h, w)
    probe = np.empty((h, w, 4), dtype=np.uint8)
    for channel in range(3):  # the cell's number, 8 bits a channel; opaque
        probe[..., channel] = (codes >> (8 * channel)) & 0xFF
    probe[..., 3] = 0xFF
    image.set_data(probe)
    try:
        coded = AxesImage.make_image(image, renderer, magnification)
    finally:
        image.set_data(data)
    shown = coded[0]
    if (shown is None or shown.shape != pixels.shape or coded[1:3] != (left, bottom)
            or (shown[..., 3] != 0xFF).any()):
        return None
    index = (shown[..., 0].astype(np.int64) | (shown[..., 1].astype(np.int64) << 8)
             | (shown[..., 2].astype(np.int64) << 16))  # (H, W) cell numbers
    if index.max() >= h * w:
        return None
    if not np.array_equal(_gathered(image.to_rgba(data, bytes=True), index), pixels):
        return None
    return index, left, bottom, trans


class SpriteText(Text):
    """A ``Text`` that copies back the pixels of a string drawn before (by any SpriteText,
    in any figure) with the same style at the same place within a pixel, over the same
    pixels (:data:`_SPRITES`: the ``SPRITES_KEPT`` most recent)."""

    def draw(self, renderer):
        if not self.get_visible() or not isinstance(renderer, RendererAgg):
            return super().draw(renderer)
        box = self.get_window_extent(renderer)
        buffer = np.asarray(renderer.buffer_rgba())  # (height, width, 4), row 0 on top
        height, width = buffer.shape[:2]
        top = max(int(np.floor(height - box.y1)) - SPRITE_PAD_PX, 0)
        bottom = min(int(np.ceil(height - box.y0)) + SPRITE_PAD_PX, height)
        left = max(int(np.floor(box.x0)) - SPRITE_PAD_PX, 0)
        right = min(int(np.ceil(box.x1)) + SPRITE_PAD_PX, width)
        if top >= bottom or left >= right:
            return super().draw(renderer)
        region = buffer[top:bottom, left:right]
        # the glyphs' pixels within the region depend on the string, the style and where the
        # box starts within a pixel (FreeType places glyphs to 1/64 of a pixel)
        key = (self.get_text(), self._sprite_style(), renderer.dpi, region.shape,
               _sub_pixel(box.x0 - left), _sub_pixel(height - box.y1 - top),
               _sub_pixel(box.width), _sub_pixel(box.height))
        kept = _SPRITES.get(key)
        if kept is not None and np.array_equal(kept[0], region):
            region[...] = kept[1]
            _SPRITES.move_to_end(key)
            self.stale = False
            return None
        under = region.copy()
        super().draw(renderer)
        _SPRITES[key] = (under, region.copy())
        while len(_SPRITES) > SPRITES_KEPT:
            _SPRITES.popitem(last=False)
        return None

    def _sprite_style(self):
        """Everything besides the string and its box that changes the glyphs' pixels."""
        return (str(self.get_color()), self.get_alpha(), self.get_fontsize(),
                tuple(self.get_fontfamily()), self.get_fontweight(), self.get_fontstyle(),
                self.get_rotation(), self.get_horizontalalignment(),
                self.get_verticalalignment(), self.get_rotation_mode(),
                self.get_bbox_patch() is None, self.get_path_effects() == [])


#: The pixels drawn by SpriteTexts: key -> (the pixels under the text, the pixels after).
_SPRITES = OrderedDict()


def _sub_pixel(value):
    """``value`` (pixels) to 1/1024 of a pixel, for a key (float noise below that)."""
    return round(float(value) * 1024)


def fast_redraws(*artists):
    """Make each artist redraw faster, the same pixels: a nearest-neighbour ``AxesImage``
    becomes a :class:`NearestImage`, a ``Text`` without a box or path effects a
    :class:`SpriteText`; anything else is left as it is.

    Parameters
    ----------
    *artists : Artist

    Returns
    -------
    tuple of Artist
        The same objects.
    """
    for a in artists:
        if type(a) is AxesImage and a.get_interpolation() == "nearest":
            a.__class__ = NearestImage
        elif type(a) is Text and a.get_bbox_patch() is None and not a.get_path_effects():
            a.__class__ = SpriteText
    return artists
