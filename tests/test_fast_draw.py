"""attn_core.figures.fast_draw: the faster redraws give matplotlib's own pixels.

The reference is a figure made the same way and drawn by matplotlib alone (no
``fast_redraws``): after every change, both canvases are drawn in full and compared pixel for
pixel, so a gather that picked a wrong cell, or a text copied back over other pixels than it
was drawn on, fails here.
"""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from attn_core.figures import fast_draw  # noqa: E402
from attn_core.figures.fast_draw import NearestImage, SpriteText, fast_redraws  # noqa: E402


def _figure(figsize=(5.3, 3.7), dpi=160):
    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def _pixels(fig):
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba()).copy()


#: (shape, imshow keywords, axes limits or None): square and not, both origins, both aspects,
#: an extent of its own, and limits that cut the image (its clipped part is not drawn); the
#: axes are placed off the pixel grid, or on it (None below: the model explorer's map, 538
#: pixels for 12 cells, where pixel centres fall exactly on cell borders).
GEOMETRIES = [
    ((12, 12), {"aspect": "auto"}, "whole pixels"),
    ((72, 12), {"aspect": "auto"}, "whole pixels"),
    ((12, 12), {"aspect": "auto"}, None),
    ((72, 12), {"aspect": "auto"}, None),
    ((7, 19), {"aspect": "equal"}, None),
    ((9, 9), {"aspect": "equal", "origin": "lower"}, None),
    ((10, 6), {"aspect": "auto", "extent": (0.0, 3.7, -1.3, 5.0)}, None),
    ((24, 24), {"aspect": "equal"}, ((-0.5, 15.5), (15.5, -0.5))),
    ((13, 5), {"aspect": "auto", "origin": "lower"}, ((1.2, 3.9), (2.1, 11.7))),
]


def _image_pair(shape, kwargs, limits, data):
    """The same image on two figures; the second's redrawn by NearestImage."""
    images = []
    for fast in (False, True):
        fig = _figure()  # 848 x 592 pixels
        rect = ((151 / 848, 49 / 592, 538 / 848, 538 / 592) if limits == "whole pixels"
                else (0.137, 0.113, 0.611, 0.771))
        ax = fig.add_axes(rect)
        image = ax.imshow(data, cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest",
                          **kwargs)
        if limits not in (None, "whole pixels"):
            ax.set_xlim(*limits[0])
            ax.set_ylim(*limits[1])
        if fast:
            fast_redraws(image)
        images.append(image)
    return images


@pytest.mark.parametrize("shape, kwargs, limits", GEOMETRIES)
def test_a_nearest_image_draws_matplotlibs_pixels_after_every_change(shape, kwargs, limits):
    rng = np.random.default_rng(sum(shape))
    plain, fast = _image_pair(shape, kwargs, limits, rng.random(shape))
    assert type(fast) is NearestImage
    for step in range(4):
        data = rng.random(shape)
        if step == 2:  # missing values: the colour map's "bad" colour
            data = np.ma.masked_invalid(np.where(rng.random(shape) < 0.3, np.nan, data))
        for image in (plain, fast):
            image.set_data(data)
        np.testing.assert_array_equal(_pixels(fast.figure), _pixels(plain.figure))
    assert fast._nearest_plan[1] is not None  # the gather drew these, not matplotlib


def test_a_gather_that_differs_from_matplotlibs_picture_is_never_used():
    _, image = _image_pair((6, 6), {"aspect": "auto"}, None,
                           np.random.default_rng(0).random((6, 6)))
    fig = image.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    made = list(super(NearestImage, image).make_image(renderer, 1.0))
    assert fast_draw._gather_plan(image, tuple(made), renderer, 1.0) is not None
    made[0] = made[0].copy()
    made[0][made[0].shape[0] // 2, 0, 0] ^= 1  # one byte of one pixel
    assert fast_draw._gather_plan(image, tuple(made), renderer, 1.0) is None


def test_a_sprite_text_draws_matplotlibs_pixels_and_never_copies_over_other_pixels(monkeypatch):
    """Strings repeat (their pixels are copied back) and the image under one text changes
    (then it must be drawn again)."""
    monkeypatch.setattr(fast_draw, "_SPRITES", type(fast_draw._SPRITES)())
    drawn = []
    plain_draw = Text.draw
    monkeypatch.setattr(Text, "draw", lambda self, r: (drawn.append(self), plain_draw(self, r)))
    rng = np.random.default_rng(1)
    figs, texts, images = [], [], []
    first = rng.random((4, 4))
    for fast in (False, True):
        fig = _figure()
        ax = fig.add_axes((0.1, 0.1, 0.8, 0.7))
        images.append(ax.imshow(first, interpolation="nearest", aspect="auto"))
        above = ax.text(0.5, 1.02, "", transform=ax.transAxes, ha="center", va="bottom",
                        fontsize=10)
        inside = ax.text(0.3, 0.5, "", transform=ax.transAxes, fontsize=9, color="white",
                         rotation=90)
        if fast:
            fast_redraws(above, inside)
        figs.append(fig)
        texts.append((above, inside))
    assert all(type(t) is SpriteText for t in texts[1])
    strings = ["layer 1, head 1", "layer 2, head 7", "layer 1, head 1", "row of 'it' (8)",
               "layer 2, head 7", "layer 1, head 1"]
    for k, s in enumerate(strings):
        data = rng.random((4, 4)) if k % 2 else None
        for (above, inside), image in zip(texts, images):
            above.set_text(s)
            inside.set_text(s)
            if data is not None:
                image.set_data(data)
        np.testing.assert_array_equal(_pixels(figs[1]), _pixels(figs[0]))
    title = texts[1][0]
    assert sum(t is title for t in drawn) == 3  # each string drawn once, then copied back


def test_fast_redraws_leaves_other_artists_alone():
    fig = _figure()
    ax = fig.add_axes((0.1, 0.1, 0.8, 0.8))
    smooth = ax.imshow(np.eye(3), interpolation="bilinear")
    boxed = ax.text(0, 0, "a", bbox={"facecolor": "w"})
    (line,) = ax.plot([0, 1], [0, 1])
    fast_redraws(smooth, boxed, line)
    assert [type(a).__name__ for a in (smooth, boxed, line)] == ["AxesImage", "Text", "Line2D"]


def test_the_heads_mosaic_draws_matplotlibs_pixels_for_every_head_count():
    """The heads explorer's mosaic (figures.head_mosaic, a NearestImage since issue 47: its
    resampling was most of a change): transparent gaps between the maps, a new tiling per
    head count; the same pixels as matplotlib alone draws."""
    from matplotlib.image import AxesImage

    from attn_core.explorers.heads import HEADS_AXES_RECT, HEADS_FIGSIZE
    from attn_core.figures import head_mosaic, update_head_mosaic

    rng = np.random.default_rng(3)
    tokens = ["the", "cat", "sat", "on", "a", "mat", "and", "then", "slept", "."]
    arts = []
    for fast in (False, True):
        fig = _figure(HEADS_FIGSIZE)
        art = head_mosaic(rng.random((1, 10, 10)), tokens, ax=fig.add_axes(HEADS_AXES_RECT))
        if not fast:
            art.image.__class__ = AxesImage  # matplotlib's own resampling
        arts.append(art)
    plain, fast = arts
    assert type(fast.image) is NearestImage
    for heads in (1, 2, 8, 16, 4, 2):
        weights = rng.random((heads, 10, 10))
        for art in arts:
            update_head_mosaic(art, weights)
        np.testing.assert_array_equal(_pixels(fast.ax.figure), _pixels(plain.ax.figure),
                                      err_msg=f"{heads} heads")
        assert fast.image._nearest_plan[1] is not None  # the gather drew them
