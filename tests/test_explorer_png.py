"""The explorers' PNG writer (attn_core.explorers.png) against Pillow's PNG reader."""

import io
import zlib

import numpy as np
import pytest
from PIL import Image

from attn_core.explorers import scaling_explorer
from attn_core.explorers.png import rgb_png


def decoded(png):
    image = Image.open(io.BytesIO(png))
    image.load()  # a broken stream or CRC fails here
    return image


@pytest.mark.parametrize("shape", [(1, 1, 3), (7, 5, 3), (33, 64, 4), (2, 300, 4)])
def test_every_pixel_comes_back_through_pillow(shape):
    pixels = np.random.default_rng(sum(shape)).integers(0, 256, size=shape, dtype=np.uint8)
    image = decoded(rgb_png(pixels))
    assert image.mode == "RGB" and image.size == (shape[1], shape[0])  # random alpha: dropped
    np.testing.assert_array_equal(np.asarray(image), pixels[:, :, :3])


@pytest.mark.parametrize("shape", [(1, 1, 4), (33, 64, 4), (2, 300, 4)])
def test_an_opaque_frame_is_written_whole_as_rgba(shape):
    """An opaque frame (the canvas' RGBA, alpha 255) is written as RGBA, its rows whole; a
    single pixel of alpha 254 sends it back to RGB, so no alpha ever reaches the browser."""
    pixels = np.random.default_rng(sum(shape)).integers(0, 256, size=shape, dtype=np.uint8)
    pixels[..., 3] = 255
    image = decoded(rgb_png(pixels))
    assert image.mode == "RGBA"
    np.testing.assert_array_equal(np.asarray(image), pixels)
    pixels[-1, -1, 3] = 254
    image = decoded(rgb_png(pixels))
    assert image.mode == "RGB"
    np.testing.assert_array_equal(np.asarray(image), pixels[:, :, :3])
    strided = np.zeros((shape[0], shape[1], 8), np.uint8)[:, :, ::2]  # not contiguous
    strided[...] = pixels
    np.testing.assert_array_equal(np.asarray(decoded(rgb_png(strided)))[..., :3],
                                  pixels[:, :, :3])


def test_every_level_decodes_and_higher_levels_compress_more():
    flat = np.zeros((64, 64, 3), dtype=np.uint8)
    flat[16:48, 16:48] = (200, 30, 90)
    sizes = [len(rgb_png(flat, level)) for level in (0, 1, 9)]
    for level in (0, 1, 9):
        np.testing.assert_array_equal(np.asarray(decoded(rgb_png(flat, level))), flat)
    assert sizes[0] > 64 * 64 * 3 > sizes[1] >= sizes[2]


def test_an_explorers_frame_is_its_canvas_pixels():
    ex = scaling_explorer()
    rgba = np.asarray(ex.canvas.figure.canvas.buffer_rgba())
    np.testing.assert_array_equal(np.asarray(decoded(ex.png).convert("RGB")), rgba[:, :, :3])
    dark = np.asarray(decoded(bytes(ex.image_dark.value)).convert("RGB"))
    assert dark.shape == rgba[:, :, :3].shape and (dark != rgba[:, :, :3]).any()


@pytest.mark.parametrize("pixels, message", [
    (np.zeros((4, 4), np.uint8), r"\(h, w, 3\) or \(h, w, 4\) uint8.*shape \(4, 4\)"),
    (np.zeros((4, 4, 3), np.float64), r"dtype float64"),
    (np.zeros((0, 4, 3), np.uint8), r"h, w >= 1.*shape \(0, 4, 3\)"),
    (np.zeros((4, 4, 2), np.uint8), r"shape \(4, 4, 2\)"),
])
def test_bad_pixels_are_named(pixels, message):
    with pytest.raises(ValueError, match=f"pixels must be.*{message}"):
        rgb_png(pixels)


@pytest.mark.parametrize("level", [-1, 10, 1.0, "1"])
def test_bad_level_is_named(level):
    with pytest.raises(ValueError, match="level must be an int from 0 to 9"):
        rgb_png(np.zeros((2, 2, 3), np.uint8), level)


def test_a_slider_move_never_calls_pillows_png_writer(monkeypatch):
    """Pillow's writer chose a filter for every row, most of a slider's answer (issue 31): an
    update now encodes its light and dark frames with rgb_png only."""
    def refuse(*args, **kwargs):
        raise AssertionError("an explorer update called Pillow's PNG writer")

    ex = scaling_explorer()
    Image.init()  # Pillow's registry of writers: Image.save looks the format up there
    monkeypatch.setitem(Image.SAVE, "PNG", refuse)
    before = (ex.png, bytes(ex.image_dark.value))
    ex.controls["d_k"].index = len(ex.controls["d_k"].options) - 1
    assert ex.errors == [] and (ex.png, bytes(ex.image_dark.value)) != before


def test_a_raw_frame_round_trips_and_is_refused_where_malformed():
    from attn_core.explorers.png import RAW_MAGIC, from_raw, raw_rgb

    rgba = np.random.default_rng(3).integers(0, 256, size=(5, 7, 4), dtype=np.uint8)
    frame = raw_rgb(rgba)
    assert frame.startswith(RAW_MAGIC) and not frame.startswith(b"\x89PNG")
    np.testing.assert_array_equal(from_raw(frame), rgba[..., :3])
    with pytest.raises(ValueError, match="does not start with RAW_MAGIC"):
        from_raw(rgb_png(rgba))
    with pytest.raises(ValueError, match="needs .* bytes, got"):
        from_raw(frame[:-1])
    with pytest.raises(ValueError, match=r"pixels must be .* got shape \(5, 7\)"):
        raw_rgb(rgba[..., 0])


def idat_rows(png):
    """The filtered rows of a PNG's one IDAT chunk, through ``zlib.decompress``, which checks
    the stream's Adler-32 (PngStream combines the bands' sums: a wrong one fails here)."""
    at = png.index(b"IDAT")
    length = int.from_bytes(png[at - 4:at], "big")
    return zlib.decompress(png[at + 4:at + 4 + length])


def test_a_png_stream_gives_every_frame_whole_recompressing_only_changed_bands():
    """PngStream (issue 47) against Pillow's reader on successive edits of one frame: each PNG
    decodes to that frame's pixels; a change inside one band re-compresses that band only (and
    the band below, whose first row is filtered against the changed one); a new size or a
    frame that stops being opaque compresses every row."""
    from attn_core.explorers.png import BAND_ROWS, PngStream

    g = np.random.default_rng(7)
    frame = np.full((5 * BAND_ROWS + 3, 40, 4), 255, np.uint8)
    frame[10:30, 5:25, :3] = (30, 120, 200)
    stream = PngStream()
    edits = [(slice(0, 1), slice(0, 1)), (slice(BAND_ROWS + 2, BAND_ROWS + 4), slice(3, 9)),
             (slice(-2, None), slice(-5, None)), (slice(BAND_ROWS - 1, BAND_ROWS), slice(0, 40)),
             (slice(None), slice(None))]
    for k, (rows, cols) in enumerate([(slice(None), slice(None)), *edits]):
        if k:
            frame[rows, cols, :3] = g.integers(0, 256, size=frame[rows, cols, :3].shape)
        png = stream.png(frame)
        image = decoded(png)
        assert image.mode == "RGBA"
        np.testing.assert_array_equal(np.asarray(image), frame, err_msg=f"edit {k}")
        assert len(idat_rows(png)) == frame.shape[0] * (1 + 4 * frame.shape[1])
        if k == 0 or k == len(edits):
            assert stream.recompressed == frame.shape[0]
        elif k == 2:  # two rows inside the second band, the third row unchanged after them
            assert stream.recompressed == BAND_ROWS
        elif k == 4:  # the last row of the first band: its band and the second (filtered)
            assert stream.recompressed == 2 * BAND_ROWS
    frame[0, 0, 3] = 0  # not opaque any more: RGB, every row
    image = decoded(stream.png(frame))
    assert image.mode == "RGB" and stream.recompressed == frame.shape[0]
    np.testing.assert_array_equal(np.asarray(image), frame[..., :3])
    smaller = frame[:BAND_ROWS + 1, :9, :3]
    np.testing.assert_array_equal(np.asarray(decoded(stream.png(smaller))), smaller)
    assert stream.recompressed == smaller.shape[0]


def test_an_explorers_frames_after_changes_are_its_canvas_pixels():
    """Through the explorer (one PngStream per canvas): after each change the light PNG is
    the canvas' pixels, and a change of part of the figure re-compresses part of the rows."""
    from attn_core.explorers import base, softmax_explorer

    ex = softmax_explorer()
    slider = ex.controls["temperature"]
    parts = []
    for value in (slider.min, slider.max, 1.0):
        slider.value = value
        rgba = np.asarray(ex.canvas.figure.canvas.buffer_rgba())
        np.testing.assert_array_equal(np.asarray(decoded(ex.png))[..., :3], rgba[..., :3])
        stream = base._STREAMS[ex.canvas.figure.canvas]
        parts.append(stream.recompressed / rgba.shape[0])
    assert ex.errors == [] and min(parts) < 1.0, parts


def test_a_png_stream_gives_the_bytes_a_new_stream_gives():
    """PngStream works only on the rows changed since its last frame (issue 48's explorer):
    after any edit, its PNG is byte for byte the PNG a new stream makes of the same pixels
    (which compresses every row), and decodes to them; an edit of no pixel recompresses no
    row. Edits: single pixels, the first and last rows, band borders, most rows, alpha lost
    and regained, RGB frames."""
    from attn_core.explorers.png import BAND_ROWS, PngStream

    g = np.random.default_rng(11)
    for channels in (4, 3):
        frame = np.full((3 * BAND_ROWS + 5, 23, channels), 255, np.uint8)
        frame[4:20, 3:9, :3] = (200, 40, 10)
        stream = PngStream()
        stream.png(frame)
        for step in range(40):
            kind = step % 5
            if kind == 0:  # one pixel anywhere
                r, c = g.integers(0, frame.shape[0]), g.integers(0, frame.shape[1])
                frame[r, c, :3] = g.integers(0, 256, 3)
            elif kind == 1:  # the first or the last row
                frame[0 if step % 2 else -1, :, :3] = g.integers(0, 256, (frame.shape[1], 3))
            elif kind == 2:  # rows around a band border
                top = BAND_ROWS * g.integers(1, 3) - 1
                frame[top:top + 2, 2:7, :3] = g.integers(0, 256, (2, 5, 3))
            elif kind == 3 and channels == 4:  # alpha lost, then regained
                frame[g.integers(0, frame.shape[0]), 0, 3] = 0 if step % 10 == 3 else 255
            elif kind == 3:  # most rows
                frame[1:-1, g.integers(0, frame.shape[1]), :] = g.integers(0, 256, 3)
            png = stream.png(frame)
            assert png == PngStream().png(frame), f"{channels} channels, step {step}"
            image = np.asarray(decoded(png))
            opaque = channels == 3 or (frame[..., 3] == 255).all()
            np.testing.assert_array_equal(image, frame if opaque and channels == 4
                                          else frame[..., :3])
            if kind == 4:  # nothing changed
                assert stream.recompressed == 0


@pytest.mark.parametrize("sizes", [(0, 0), (1, 0), (0, 5), (7, 1), (5000, 70000), (65521, 3)])
def test_adler32_combine_equals_zlibs_checksum_of_the_joined_bytes(sizes):
    import zlib

    from attn_core.explorers.png import adler32_combine

    g = np.random.default_rng(sum(sizes))
    first, second = (g.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes)
    for one, two in ((first, second), (b"\xff" * sizes[0], b"\xff" * sizes[1])):
        assert adler32_combine(zlib.adler32(one), zlib.adler32(two), len(two)) == zlib.adler32(
            one + two)
