"""The explorers' HTML and the checks' feedback are readable in JupyterLab's light and dark
themes: every (text, background) colour pair they use has a WCAG contrast ratio >= 4.5:1.
The explorers' figures follow the theme too: a dark frame on the dark theme's page, its
text light, its images unchanged (they were white in the dark theme).

The CSS variables are resolved with the values of the JupyterLab theme packages installed
in the environment (and with the fallbacks, as on a page without JupyterLab's CSS).
"""

import functools
import io
import re
import sys
from pathlib import Path

import ipywidgets as W
import numpy as np
import pytest
from PIL import Image

from attn_core import explorers
from attn_core.checks import _base as checks_base
from attn_core.explorers import base, colors, notes, softmax_explorer, worked_example_lab

# The explorers' frames: make test runs these, make check leaves them out (make test-explorers).
pytestmark = pytest.mark.explorer

MIN_CONTRAST = 4.5
THEMES_DIR = Path(sys.prefix) / "share/jupyter/lab/themes/@jupyterlab"
THEMES = {"light": THEMES_DIR / "theme-light-extension/index.css",
          "dark": THEMES_DIR / "theme-dark-extension/index.css"}
NAMED = {"white": (255, 255, 255, 1.0), "black": (0, 0, 0, 1.0)}


def theme_variables(path):
    """``{--name: value}`` of a theme's CSS file (the last definition wins)."""
    text = path.read_text(encoding="utf-8")
    return {m.group(1): m.group(2).strip()
            for m in re.finditer(r"(--[\w-]+)\s*:\s*([^;{}]+);", text)}


def resolve(value, variables):
    """Replace ``var(--x, fallback)`` by the theme's value (or the fallback), recursively."""
    pattern = re.compile(r"var\(\s*(--[\w-]+)\s*(?:,\s*((?:[^()]|\([^()]*\))*))?\)")
    for _ in range(10):
        match = pattern.search(value)
        if match is None:
            return value.strip()
        name, fallback = match.group(1), match.group(2)
        new = variables.get(name, fallback)
        assert new is not None, f"{name} is neither defined by the theme nor given a fallback"
        value = value[:match.start()] + new + value[match.end():]
    raise AssertionError(f"variables nest too deep in {value!r}")


def parse_color(text):
    """``(r, g, b, alpha)`` of a CSS colour: #rgb, #rrggbb, rgb()/rgba(), white, black."""
    text = text.strip().lower()
    if text in NAMED:
        return NAMED[text]
    if text.startswith("#"):
        h = text[1:]
        if len(h) == 3:
            h = "".join(c * 2 for c in h)
        assert len(h) == 6, text
        return (int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16), 1.0)
    match = re.fullmatch(r"rgba?\(([^)]*)\)", text)
    assert match, f"cannot read the colour {text!r}"
    parts = [float(p) for p in match.group(1).split(",")]
    return (*parts[:3], parts[3] if len(parts) == 4 else 1.0)


def over(fg, bg):
    """``fg`` composited over the opaque ``bg`` (alpha blending)."""
    a = fg[3]
    return tuple(a * f + (1 - a) * b for f, b in zip(fg[:3], bg[:3], strict=True)) + (1.0,)


def luminance(rgb):
    def channel(c):
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg, bg):
    """WCAG 2 contrast ratio of text ``fg`` on background ``bg`` (alpha composited)."""
    bg = over(bg, (255, 255, 255, 1.0))  # a translucent background sits on the page
    hi, lo = sorted((luminance(over(fg, bg)), luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_the_contrast_formula_on_known_pairs():
    black, white = (0, 0, 0, 1.0), (255, 255, 255, 1.0)
    assert contrast(black, white) == pytest.approx(21.0)
    assert contrast(white, white) == pytest.approx(1.0)
    assert contrast(parse_color("#777777"), white) == pytest.approx(4.48, abs=0.01)
    assert contrast(parse_color("#767676"), white) == pytest.approx(4.54, abs=0.01)  # WCAG lore
    assert contrast(parse_color("rgba(0,0,0,0.5)"), white) == pytest.approx(
        contrast(parse_color("#808080"), white), abs=0.05)  # alpha composited


def _pairs():
    pairs = dict(base.COLOR_PAIRS)
    feedback = re.search(r"color:(var\(.*?\)\))", checks_base.FEEDBACK_CSS).group(1)
    pairs["feedback"] = (feedback, base.PAGE_COLOR)
    return pairs


@pytest.mark.parametrize("theme", [*THEMES, "no theme (fallbacks)"])
def test_every_colour_pair_is_readable_in_each_theme(theme):
    if theme in THEMES:
        assert THEMES[theme].exists(), f"JupyterLab's {theme} theme is not installed"
        variables = theme_variables(THEMES[theme])
        assert "--jp-layout-color0" in variables  # the file was read
    else:
        variables = {}
    for name, (fg, bg) in _pairs().items():
        ratio = contrast(parse_color(resolve(fg, variables)), parse_color(resolve(bg, variables)))
        assert ratio >= MIN_CONTRAST, f"{theme}: {name} {fg} on {bg} is {ratio:.2f}:1"


def test_the_explorers_html_uses_only_the_checked_colours():
    """Every text colour and background in the read-outs is one of COLOR_PAIRS'."""
    allowed_text = {fg for fg, _ in base.COLOR_PAIRS.values()}
    allowed_back = {bg for _, bg in base.COLOR_PAIRS.values()}
    lab = worked_example_lab()
    markup = lab.tables.value + lab.arithmetic.value + softmax_explorer().readout.value
    assert base.HIGHLIGHT_BACKGROUND in markup  # the lab highlights the explained cell
    for style in re.findall(r'style="([^"]*)"', markup):
        for prop, value in re.findall(r"(?:^|;)\s*(color|background)\s*:\s*([^;]+)", style):
            allowed = allowed_text if prop == "color" else allowed_back
            assert value.strip() in allowed, f"{prop}:{value} is not a checked colour"
    highlighted = re.findall(r'<td[^>]*background:#F5C97A[^>]*>', markup)
    assert highlighted and all(f"color:{base.HIGHLIGHT_TEXT}" in td for td in highlighted)


# --- the explorers' figures follow the theme ---------------------------------------------------

FACTORIES = sorted(n for n in explorers.__all__ if n.endswith(("_explorer", "_lab")))


@functools.cache
def built(factory):
    """One explorer per factory for this file's two tests (building the real-model ones takes
    seconds): the first looks at its starting state, the second then moves its sliders."""
    return getattr(explorers, factory)()


def _pixels(png):
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def _colours(pixels, counts=False):
    """The distinct RGB colours of ``pixels`` (..., 3) as (k, 3), and how often each occurs.

    Each colour is packed into one integer first: numpy's unique over rows (``axis=0``)
    sorts them lexicographically, 20-30x slower on a frame of a few million pixels."""
    rgb = pixels.reshape(-1, 3).astype(np.uint32)
    values, seen = np.unique(rgb[:, 0] << 16 | rgb[:, 1] << 8 | rgb[:, 2], return_counts=True)
    unpacked = np.stack([values >> 16, values >> 8 & 255, values & 255], axis=-1)
    return (unpacked, seen) if counts else unpacked


def _commonest(pixels):
    values, counts = _colours(pixels, counts=True)
    return tuple(int(v) for v in values[np.argmax(counts)])


def test_the_dark_figure_colours_are_the_dark_themes():
    dark = theme_variables(THEMES["dark"])
    page = parse_color(resolve("var(--jp-layout-color0)", dark))[:3]
    assert tuple(colors.DARK_PAGE) == tuple(int(c) for c in page)
    ink = (*colors.DARK_INK, 1.0)
    assert contrast(ink, (*colors.DARK_PAGE, 1.0)) >= MIN_CONTRAST


@pytest.mark.parametrize("factory", FACTORIES)
def test_every_explorer_shows_a_dark_figure_in_the_dark_theme(factory):
    """Beside the light frame, a dark one: the dark theme's page behind it, its black text
    turned light (readable, >= 4.5:1), every image (heatmap cells, their numbers) unchanged;
    CSS by JupyterLab's theme attribute shows one of the two."""
    ex = built(factory)
    kids = list(ex.widget.children)
    assert kids[kids.index(ex.image) + 1] is ex.image_dark
    assert "attn-light" in ex.image._dom_classes and "attn-dark" in ex.image_dark._dom_classes
    css = " ".join(w.value for w in kids if isinstance(w, W.HTML))
    assert 'body:not([data-jp-theme-light="false"]) .attn-dark{display:none' in css
    assert 'body[data-jp-theme-light="false"] .attn-light{display:none' in css
    light, dark = _pixels(ex.png), _pixels(bytes(ex.image_dark.value))
    assert light.shape == dark.shape and ex.image_dark.layout.width == ex.image.layout.width
    assert _commonest(light) == (255, 255, 255)
    assert _commonest(dark) == tuple(colors.DARK_PAGE), _commonest(dark)
    keep = np.zeros(light.shape[:2], dtype=bool)
    for left, top, right, bottom in notes.image_boxes(ex.figure):
        keep[top:bottom + 1, left:right + 1] = True
    # inside an image, only greys change (blank paper, masked cells and their hatching and
    # text: issue 47), each to the dark theme's grey of its level; the colours stay
    grey = np.ptp(light, axis=-1) <= colors.GREY_CHROMA
    turned = keep & grey & (dark == notes._DARK_LUT[light[..., 1]]).all(-1)
    np.testing.assert_array_equal(dark[keep & ~turned], light[keep & ~turned])
    coloured = keep & ~grey
    np.testing.assert_array_equal(dark[coloured], light[coloured])
    ink = (light == 0).all(-1) & ~keep  # black text and lines outside the images
    assert ink.any(), "no black text found outside the images"
    assert (dark[ink] == colors.DARK_INK).all()
    # any grey left outside the images is readable on the dark page, as text must be
    text_like = (light.max(-1) < 120) & (np.ptp(light, axis=-1) <= colors.GREY_CHROMA) & ~keep
    for rgb in _colours(dark[text_like]):
        assert contrast((*rgb, 1.0), (*colors.DARK_PAGE, 1.0)) >= 3.0, rgb


#: A square of this many pixels that is paper-white in the dark frame is a light patch on the
#: dark page (a text glyph or a line is never this big and this white).
PATCH = 10


def _light_patches(dark):
    """Top-left corners of PATCH x PATCH squares (on a PATCH grid) that are all near-white."""
    h, w = dark.shape[:2]
    tiles = dark[:h - h % PATCH, :w - w % PATCH].reshape(h // PATCH, PATCH, w // PATCH, PATCH, 3)
    white = (tiles.min(axis=-1) >= 235).all(axis=(1, 3))
    return [(int(r) * PATCH, int(c) * PATCH) for r, c in np.argwhere(white)]


def _states(ex):
    """The explorer's starting state, then each slider at its lowest and its highest."""
    yield "start"
    for name, control in ex.controls.items():
        if getattr(control, "options", None):  # a selection: its first and last option
            for index in (0, len(control.options) - 1):
                control.index = index
                yield f"{name}={control.value}"
        elif hasattr(control, "min") and hasattr(control, "max"):
            for value in (control.min, control.max):
                control.value = value
                yield f"{name}={value}"


@pytest.mark.parametrize("factory", FACTORIES)
def test_no_region_of_a_dark_frame_stays_paper_white(factory):
    """Every region of the dark frame, not just its commonest colour: no patch of the dark
    frame is left white (issue 31: the KV-cache explorer's panels beyond the context and the
    head counts stayed white, most of both left panels at the start), at the start and with
    every slider at either end."""
    ex = built(factory)
    for state in _states(ex):
        dark = _pixels(bytes(ex.image_dark.value))
        patches = _light_patches(dark)
        assert not patches, (f"{factory} at {state}: {len(patches)} white {PATCH}px patches "
                             f"in the dark frame, e.g. at (row, column) {patches[:3]}")


@pytest.mark.parametrize("factory", FACTORIES)
def test_each_dark_frame_equals_the_whole_light_frame_converted(factory):
    """The dark frame is made from the last one, only the changed rectangle converted again
    (notes.DarkFrames, issue 47): at every state it equals ``dark_image`` of the whole light
    frame, pixel for pixel, and a change converts less than the whole frame at least once."""
    ex = built(factory)
    sizes = []
    for state in _states(ex):
        agg = ex.figure.canvas
        light = Image.fromarray(_pixels(ex.png))
        whole = np.asarray(notes.dark_image(light, notes.image_boxes(ex.figure)))
        np.testing.assert_array_equal(_pixels(bytes(ex.image_dark.value)), whole,
                                      err_msg=f"{factory} at {state}")
        frames = ex._dark_frames.get(agg)
        if frames is not None and state != "start":
            sizes.append(frames.converted / (light.width * light.height))
    if sizes:  # an explorer whose every control redraws all of it would have none below 1
        assert min(sizes) < 1.0, f"{factory}: every change converted the whole frame"


def test_dark_frames_follow_any_change_of_the_pixels():
    """DarkFrames against dark_image on random edits of a canvas: rectangles, a single pixel,
    white areas that open or close paper inside an image, the images moved."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2), dpi=50)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.1, 0.1, 0.6, 0.8))
    data = np.ones((6, 6))
    data[2:4, 2:4] = np.nan
    im = ax.imshow(data, cmap="viridis", vmin=0, vmax=2)
    ax.set_title("T")
    g = np.random.default_rng(0)
    frames = notes.DarkFrames()
    agg = fig.canvas
    for step in range(12):
        if step % 4 == 3:
            im.set_extent((-0.5, 5.5 + step % 3, 5.5, -0.5))  # the image moves: new boxes
        data = np.where(g.random((6, 6)) < 0.3, np.nan, g.random((6, 6)) * 2)
        im.set_data(data)
        agg.draw()
        buf = np.asarray(agg.buffer_rgba())
        if step % 2:  # and a few pixels changed by hand, white and black
            r, c = g.integers(0, buf.shape[0]), g.integers(0, buf.shape[1])
            buf[r:r + 9, c:c + 9, :3] = 255 * (step % 3 == 0)
        png = frames.png(agg)
        light = Image.fromarray(np.array(buf[..., :3]))
        whole = np.asarray(notes.dark_image(light, notes.image_boxes(fig)))
        np.testing.assert_array_equal(_pixels(png), whole, err_msg=f"step {step}")


@pytest.mark.parametrize("factory", ["gpt_explorer", "llm_explorer", "beyond_explorer",
                                     "mask_explorer"])
def test_masked_and_uncomputed_cells_are_dark_in_the_dark_frame(factory):
    """Issue 47: the masked cells (MASKED_FACE_COLOR, hatched) of 14's and 17's maps and 18's
    uncomputed cells stayed light grey in the dark frame, 10-15% of it. Now nearly every
    pixel of the masked face inside an image turns to the dark theme's grey of its level."""
    from attn_core.figures.base import MASKED_FACE_COLOR

    ex = getattr(explorers, factory)()
    light, dark = _pixels(ex.png), _pixels(bytes(ex.image_dark.value))
    face = np.array([int(MASKED_FACE_COLOR[i:i + 2], 16) for i in (1, 3, 5)])
    keep = np.zeros(light.shape[:2], dtype=bool)
    for left, top, right, bottom in notes.image_boxes(ex.figure):
        keep[top:bottom + 1, left:right + 1] = True
    masked = keep & (light == face).all(-1)
    assert masked.mean() > 0.01, f"{factory}: no masked cells in its first frame"
    still = masked & (dark == face).all(-1)
    assert still.sum() <= 0.01 * masked.sum(), (
        f"{factory}: {still.sum()} of {masked.sum()} masked pixels still light")
    # the hatching follows: no pixel of the masked areas' surroundings is brighter than the
    # dark ink (nothing there is lighter than the text)
    assert dark[masked].max() <= max(colors.DARK_INK)
