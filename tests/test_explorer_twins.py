"""The dark twin of an explorer's frame (issue 47): made in a worker thread while the light
frame is encoded and sent, by a conversion whose openings look only around white and masked
pixels. Checked against the numpy reference ``notes.dark_rgb`` (openings over the whole box)
and against the light frame the learner has at every step."""

import io
import threading

import numpy as np
import pytest
from PIL import Image

from attn_core import explorers
from attn_core.explorers import base, notes
from attn_core.figures.base import MASKED_FACE_COLOR


def _pixels(png):
    image = Image.open(io.BytesIO(png))
    image.load()
    return np.asarray(image.convert("RGB"))


def _scene(seed, box):
    """An RGB frame of grey paper, ink and colours; inside ``box`` a heatmap of colours with
    white areas (blank cells, thin white numbers) and masked cells with their hatching, some of
    them touching the box's edges."""
    g = np.random.default_rng(seed)
    h, w = 90, 120
    rgb = np.full((h, w, 3), 255, np.uint8)
    rgb[g.random((h, w)) < 0.1] = 0  # ink specks on the paper
    left, top, right, bottom = box
    inner = rgb[top:bottom + 1, left:right + 1]
    inner[...] = g.integers(0, 256, size=(1, 1, 3))  # a colour
    for _ in range(6):  # cells of other colours, white (paper) and masked
        r, c = g.integers(-4, inner.shape[0] - 2), g.integers(-4, inner.shape[1] - 2)
        size = int(g.integers(2, 14))
        kind = g.integers(0, 3)
        face = [int(MASKED_FACE_COLOR[i:i + 2], 16) for i in (1, 3, 5)]
        inner[max(r, 0):r + size, max(c, 0):c + size] = (
            (255, 255, 255) if kind == 0 else face if kind == 1 else g.integers(0, 256, 3))
    inner[g.random(inner.shape[:2]) < 0.02] = 255  # thin white marks (numbers, halos)
    inner[g.random(inner.shape[:2]) < 0.02] = 90  # grey hatching
    return rgb


@pytest.mark.parametrize("seed", range(12))
def test_dark_image_equals_the_numpy_reference(seed):
    """The openings, made only around the white and the masked pixels, give the same frame
    as the reference, which opens the whole box (boxes at the frame's edge included)."""
    boxes = [(10, 8, 100, 80), (0, 0, 119, 89), (30, 0, 119, 40), (5, 20, 25, 89)]
    box = boxes[seed % len(boxes)]
    rgb = _scene(seed, box)
    keep = np.zeros(rgb.shape[:2], bool)
    keep[box[1]:box[3] + 1, box[0]:box[2] + 1] = True
    got = np.asarray(notes.dark_image(Image.fromarray(rgb), [box]))
    np.testing.assert_array_equal(got, notes.dark_rgb(rgb, keep))
    light = Image.fromarray(rgb)
    same = notes.dark_image(light, [box], in_place=True)
    assert same is light and np.array_equal(np.asarray(same), got)


def test_a_frame_without_images_converts_only_its_changed_pixels():
    """DarkFrames on a canvas with no image (issue 48's line charts): each dark frame equals
    ``dark_rgb`` of the whole light frame (nothing kept), after edits of lines, single pixels
    and greys at the edge of GREY_CHROMA, and converts only the pixels that changed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from attn_core.explorers.colors import GREY_CHROMA

    fig = Figure(figsize=(3, 2), dpi=60)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.15, 0.15, 0.8, 0.75))
    (line,) = ax.plot([0, 1, 2], [0, 1, 0], color="tab:orange", alpha=0.4)
    ax.set_title("T")
    agg, frames = fig.canvas, notes.DarkFrames()
    g = np.random.default_rng(5)
    for step in range(10):
        line.set_ydata(g.random(3))
        agg.draw()
        buf = np.asarray(agg.buffer_rgba())
        r, c = g.integers(0, buf.shape[0] - 2), g.integers(0, buf.shape[1] - 2)
        level = int(g.integers(0, 256 - GREY_CHROMA))
        buf[r, c, :3] = (level, level + GREY_CHROMA, level)  # a grey, just
        buf[r + 1, c, :3] = (level, level + GREY_CHROMA + 1, level)  # a colour, just
        before = None if frames._light is None else frames._light.copy()
        png = frames.png(agg)
        light = np.array(buf[..., :3])
        want = notes.dark_rgb(light, np.zeros(light.shape[:2], bool))
        np.testing.assert_array_equal(_pixels(png), want, err_msg=f"step {step}")
        if before is not None:
            words = np.ascontiguousarray(buf).view(np.uint32)[..., 0]
            assert frames.converted == int((words != before).sum()) < words.size


def test_the_dark_twin_is_made_in_a_worker_and_stays_right(monkeypatch):
    """Each change's twin is made in the worker thread (not the caller's), and after every
    change it is the dark conversion of the light frame the learner has."""
    threads = []
    convert = notes.DarkFrames.png

    def spy(self, canvas):
        threads.append(threading.current_thread())
        return convert(self, canvas)

    monkeypatch.setattr(notes.DarkFrames, "png", spy)
    ex = explorers.heads_explorer()
    for h in ex.controls["h"].options[::-1]:
        ex.controls["h"].value = h
        light = _pixels(ex.png)
        boxes = notes.image_boxes(ex.figure)
        np.testing.assert_array_equal(_pixels(bytes(ex.image_dark.value)),
                                      np.asarray(notes.dark_image(Image.fromarray(light), boxes)),
                                      err_msg=f"h = {h}")
    assert threads and all(t is not threading.main_thread() for t in threads)
    assert ex.errors == []


def test_an_error_in_the_twin_is_shown_and_the_next_change_recovers(monkeypatch):
    """A twin that fails is reported as any update error (the red box, ``.errors``), after the
    light frame was sent; the next change makes both frames again."""
    ex = explorers.softmax_explorer()
    slider = ex.controls["temperature"]

    def broken(self, canvas):
        raise RuntimeError("no twin")

    with monkeypatch.context() as m:
        m.setattr(notes.DarkFrames, "png", broken)
        before = ex.png
        with pytest.raises(RuntimeError, match="no twin"):
            slider.value = slider.max
        assert ex.png != before  # the light frame went out first
        assert ex.errors and "no twin" in ex.error_box.value
    slider.value = slider.min
    light = _pixels(ex.png)
    np.testing.assert_array_equal(
        _pixels(bytes(ex.image_dark.value)),
        np.asarray(notes.dark_image(Image.fromarray(light), notes.image_boxes(ex.figure))))
    assert ex.error_box.layout.display == "none"


def test_light_frames_only_makes_no_twin(monkeypatch):
    """Inside ``light_frames_only`` (the static edition's build) no twin is made at all."""
    calls = []
    monkeypatch.setattr(notes.DarkFrames, "png", lambda self, canvas: calls.append(1))
    with base.light_frames_only():
        ex = explorers.scaling_explorer()
        ex.controls["d_k"].index = len(ex.controls["d_k"].options) - 1
    assert calls == [] and ex.errors == []


def test_the_heads_mosaic_titles_and_labels_are_light_on_the_dark_page():
    """The head titles and the token labels written on the mosaic's paper (issue 47, seen in
    the page's dark screenshot): in the dark frame no pixel of their boxes is brighter than
    the dark theme's ink (they were dark ink ringed by white paper); the cells keep their
    colours."""
    from attn_core.explorers import colors

    ex = explorers.heads_explorer(h=8)
    dark = _pixels(bytes(ex.image_dark.value))
    light = _pixels(ex.png)
    renderer = ex.figure.canvas.get_renderer()
    height = dark.shape[0]
    texts = [t for t in (*ex.mosaic.titles, *ex.mosaic.col_labels) if t.get_visible()]
    assert len(texts) >= 8
    for t in texts:
        box = t.get_window_extent(renderer)
        part = dark[height - int(np.ceil(box.y1)):height - int(np.floor(box.y0)),
                    int(np.floor(box.x0)):int(np.ceil(box.x1))]
        assert part.max() <= max(colors.DARK_INK), (t.get_text(), part.max())
    cells = notes.image_boxes(ex.figure) == []  # the mosaic is themed: no box kept as it is
    colourful = (light.max(-1).astype(int) - light.min(-1)) > 60
    assert cells and np.array_equal(dark[colourful], light[colourful])


def test_a_frame_mostly_redrawn_is_converted_by_its_crop_and_stays_right():
    """When most of a frame without images changes (the heads mosaic redrawn), the changed
    rectangle is converted whole (faster than pixel by pixel there), to the same pixels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2), dpi=60)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    patch = ax.fill_between([0, 0.9], 0, 1, color="tab:blue")
    ax.set_xlim(0, 1), ax.set_ylim(0, 1)
    agg, frames = fig.canvas, notes.DarkFrames()
    for color in ("tab:blue", "tab:orange", "white", "0.3"):
        patch.set_color(color)
        agg.draw()
        buf = np.asarray(agg.buffer_rgba())
        before = None if frames._light is None else frames._light.copy()
        png = frames.png(agg)
        light = np.array(buf[..., :3])
        np.testing.assert_array_equal(_pixels(png), notes.dark_rgb(
            light, np.zeros(light.shape[:2], bool)), err_msg=color)
        if before is not None:
            words = np.ascontiguousarray(buf).view(np.uint32)[..., 0]
            changed = int((words != before).sum())
            assert changed * notes._GREYS_SHARE >= words.size  # most of the frame
            assert frames.converted > changed  # by the crop, not pixel by pixel
