"""The explorers' PNG encoder: RGB pixels to PNG bytes, as fast as a slider needs.

Encoding the frame was the largest part of a slider's answer (about half of it for the
real-model explorers: 25 ms of a 1568 x 832 frame, twice, light and dark). Pillow's PNG
writer picks a filter for every row, and that choice, not zlib, is most of its time; it has
no option to skip it. The explorers' frames are flat colours and anti-aliased text: this
writer gives every row the same filter ("Up": each byte minus the one above it, one numpy
subtraction) and compresses with zlib at level 1. Until issue 47 it stored the rows
unfiltered as RGB, and dropping the fourth byte of each of the canvas' RGBA pixels cost more
than zlib itself; an opaque frame is now written as RGBA, its rows copied whole (the alpha
bytes filter to zeros): 1.3 to 1.6 times faster than that writer on every explorer's first
frame, the files 7% smaller to 28% larger (``benchmarks/bench_explorers.py --png`` measures
it against that writer and Pillow, CPU time, interleaved). The file is a plain 8-bit RGB or
RGBA PNG (any viewer, Pillow, the browser read it; ``tests/test_explorer_png.py`` decodes it
with Pillow and compares every pixel).

zlib releases the GIL while it compresses, so a sampling thread (the GPT explorer) keeps
running meanwhile.

A slider move changes part of a frame (bars, a map, a few cells). :class:`PngStream` encodes
one canvas' successive frames: the rows are compressed in bands of ``BAND_ROWS``, each band a
deflate stream of its own ended by a sync flush (byte-aligned, no reference to the band
before), so a band whose filtered rows did not change keeps its compressed bytes from the last
frame; the PNG's one zlib stream is the bands joined, a final empty block and the checksum
of all rows (issue 47). The bytes differ from :func:`rgb_png`'s, the pixels are the same.
"""

import struct
import sys
import threading
import zlib

import numpy as np

__all__ = ["BAND_ROWS", "PngStream", "RAW_MAGIC", "adler32_combine", "from_raw", "raw_rgb",
           "rgb_png", "ZLIB_LEVEL"]

#: zlib's level: 1 is several times faster than the default 6, the files barely larger.
ZLIB_LEVEL = 1
_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind, data):
    """One PNG chunk: length, type, data, CRC-32 of type and data."""
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def rgb_png(pixels, level=ZLIB_LEVEL):
    """PNG bytes of an image.

    Parameters
    ----------
    pixels : (h, w, 3) or (h, w, 4) uint8 array_like
        RGB, or RGBA/RGBX whose fourth channel is dropped (the frames are opaque), e.g. an
        Agg canvas' ``buffer_rgba()``.
    level : int
        zlib's compression level, 0 (none) to 9.

    Returns
    -------
    bytes
        An 8-bit PNG of the RGB pixels, every row "Up"-filtered: RGB, or RGBA when the fourth
        channel is 255 everywhere (an opaque frame: its rows are copied whole, where dropping
        the fourth byte of every pixel cost more than zlib).

    Notes
    -----
    PNG's "Up" filter stores each byte minus the byte above it (modulo 256): one numpy
    subtraction, and the flat areas of a frame become runs of zeros.
    """
    rows, header = _filtered(pixels, level)
    return _png(header, zlib.compress(rows.data, level))


def _filtered(pixels, level):
    """The checked pixels' rows, "Up"-filtered ((h, 1 + w * channels) uint8), and the IHDR
    chunk's data (:func:`rgb_png`)."""
    a = _checked(pixels, level)
    height, width = a.shape[:2]
    if a.shape[2] == 4 and not _opaque(a):
        a = a[:, :, :3]
    channels = a.shape[2]
    flat = np.ascontiguousarray(a).reshape(height, width * channels)  # (h, w * channels)
    rows = np.empty((height, 1 + width * channels), dtype=np.uint8)
    rows[:, 0] = UP_FILTER
    rows[0, 1:] = flat[0]  # the row above the first is zeros
    np.subtract(flat[1:], flat[:-1], out=rows[1:, 1:])  # uint8: modulo 256, as PNG wants
    color_type = 6 if channels == 4 else 2  # RGBA or RGB
    return rows, struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)  # no interlace


def _png(header, idat):
    return (_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", idat)
            + _chunk(b"IEND", b""))


#: Rows per band of :class:`PngStream`: a band is re-compressed when one of its rows changed.
BAND_ROWS = 16
#: A zlib stream's header (deflate, 32 KiB window; a multiple of 31, as zlib wants) and a
#: deflate stream's final block, empty (fixed codes: BFINAL, the end-of-block code).
_ZLIB_HEADER, _FINAL_BLOCK = b"\x78\x01", b"\x03\x00"


class PngStream:
    """One canvas' successive frames as PNG bytes, only the changed bands compressed again.

    ``png(pixels)`` takes what :func:`rgb_png` takes and gives a PNG of the same pixels (the
    same filter, colour type and zlib level); ``recompressed`` is the number of rows it
    compressed (all of them for a first frame or a new size). Safe to call from two threads.

    Only the rows that changed since the last frame are worked on: they are found by one
    comparison with a copy of the last frame's pixels, filtered again with the row below each
    (whose "Up" filter reads them), checked for opacity, and their bands compressed again; the
    checksum of all rows is combined from each band's (:func:`adler32_combine`). A change of a
    few rows costs a few rows, not a pass over the whole frame for each step (issue 48's
    explorer: the frame's filter, opacity check and checksum were most of its encoding). The
    bytes are those a new stream gives for the same pixels (tested).
    """

    def __init__(self, level=ZLIB_LEVEL):
        self.level = level
        self._pixels = None  # (h, w, c) uint8: a copy of the last frame's pixels, as given
        self._rows = None  # (h, 1 + w * channels) uint8: the last frame's filtered rows
        self._header = None
        self._bands = []  # compressed bytes per band of BAND_ROWS rows
        self._sums = []  # Adler-32 of each band's filtered rows
        self._png = None
        self._lock = threading.Lock()
        self.recompressed = 0

    def png(self, pixels):
        """PNG bytes of ``pixels`` ((h, w, 3) or (h, w, 4) uint8, as :func:`rgb_png`)."""
        a = _checked(pixels, self.level)
        with self._lock:
            changed = self._changed_rows(a)
            if changed is None:  # a first frame, a new shape, or the opacity changed
                rows, header = _filtered(a, self.level)
                self._pixels, self._rows, self._header = a.copy(), rows, header
                self._bands = [b""] * len(range(0, rows.shape[0], BAND_ROWS))
                self._sums = [1] * len(self._bands)
                bands = range(len(self._bands))
            elif changed.size == 0:
                self.recompressed = 0
                return self._png
            else:
                bands = self._refilter(a, changed)
            self.recompressed = 0
            for k in bands:
                part = self._rows[k * BAND_ROWS:(k + 1) * BAND_ROWS]
                band = zlib.compressobj(self.level, zlib.DEFLATED, -15)
                self._bands[k] = band.compress(part.data) + band.flush(zlib.Z_SYNC_FLUSH)
                self._sums[k] = zlib.adler32(part.data)
                self.recompressed += part.shape[0]
            total, row_bytes = self._sums[0], self._rows.shape[1]
            for k in range(1, len(self._sums)):
                n = min(BAND_ROWS, self._rows.shape[0] - k * BAND_ROWS)
                total = adler32_combine(total, self._sums[k], n * row_bytes)
            idat = b"".join([_ZLIB_HEADER, *self._bands, _FINAL_BLOCK, struct.pack(">I", total)])
            self._png = _png(self._header, idat)
            return self._png

    def _changed_rows(self, a):
        """Indices of the rows of ``a`` that differ from the last frame's, or None when the
        stream must start again (no last frame, another shape, opacity gained or lost)."""
        last = self._pixels
        if last is None or last.shape != a.shape:
            return None
        height = a.shape[0]
        changed = np.flatnonzero(
            (_row_words(a).reshape(height, -1) != _row_words(last).reshape(height, -1))
            .any(axis=1))
        channels = (self._rows.shape[1] - 1) // a.shape[1]
        if a.shape[2] == 4 and changed.size and _opaque(a[changed]) != (channels == 4):
            return None
        return changed

    def _refilter(self, a, changed):
        """Take the rows ``changed`` of ``a`` in: filter them and the row below each again;
        return the indices of the bands that hold them."""
        height = a.shape[0]
        channels = (self._rows.shape[1] - 1) // a.shape[1]
        redo = np.union1d(changed, changed[changed + 1 < height] + 1)  # sorted rows
        if 2 * changed.size > height:  # most rows: one pass over the frame, no gathers
            np.copyto(self._pixels, a)
            flat = self._pixels[:, :, :channels].reshape(height, -1)
            self._rows[0, 1:] = flat[0]
            np.subtract(flat[1:], flat[:-1], out=self._rows[1:, 1:])
        else:
            self._pixels[changed] = a[changed]

            def flat(rows):  # (len(rows), w * channels): those rows as the PNG stores them
                return self._pixels[rows][:, :, :channels].reshape(len(rows), -1)

            above = redo[redo > 0]
            self._rows[above, 1:] = flat(above) - flat(above - 1)  # uint8: modulo 256
            if redo[0] == 0:
                self._rows[0, 1:] = flat([0])[0]
        return np.unique(redo // BAND_ROWS).tolist()


def _checked(pixels, level):
    """``pixels`` as an (h, w, 3|4) uint8 array, and ``level``, checked (:func:`rgb_png`)."""
    a = np.asarray(pixels)
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] not in (3, 4) or 0 in a.shape[:2]:
        raise ValueError(f"pixels must be an (h, w, 3) or (h, w, 4) uint8 array with h, w >= 1, "
                         f"got shape {a.shape} and dtype {a.dtype}")
    if not (isinstance(level, int) and 0 <= level <= 9):
        raise ValueError(f"level must be an int from 0 to 9, got {level!r}")
    return a


def _row_words(a):
    """The (h, w, c) uint8 array ``a`` seen as rows of the widest unsigned integers that
    divide a row's bytes (a comparison of rows reads 8 bytes at a time where it can)."""
    height, row_bytes = a.shape[0], a.shape[1] * a.shape[2]
    a = np.ascontiguousarray(a).reshape(height, row_bytes)
    for size in (8, 4, 2):
        if row_bytes % size == 0:
            return a.view(f"<u{size}")
    return a


#: Adler-32's modulus (RFC 1950).
_ADLER_BASE = 65521


def adler32_combine(first, second, length):
    """Adler-32 of two byte strings joined, from the Adler-32 of each and the second's length
    (zlib's ``adler32_combine``, which Python's zlib module does not offer).

    Parameters
    ----------
    first, second : int
        ``zlib.adler32`` of the first and of the second string.
    length : int
        The second string's length in bytes.

    Returns
    -------
    int
        ``zlib.adler32(first_string + second_string)``.
    """
    rem = length % _ADLER_BASE
    a1, b1 = first & 0xFFFF, first >> 16
    a2, b2 = second & 0xFFFF, second >> 16
    a = (a1 + a2 - 1) % _ADLER_BASE
    b = (rem * a1 + b1 + b2 - rem) % _ADLER_BASE
    return (b << 16) | a


#: PNG's filter type 2: each byte minus the one above it.
UP_FILTER = 2


def _opaque(rgba):
    """Whether the (h, w, 4) uint8 pixels' fourth channel is 255 everywhere (one pass over
    32-bit words: alpha is their top byte on a little-endian machine, the lowest otherwise)."""
    if not rgba.flags.c_contiguous:
        return bool((rgba[:, :, 3] == 255).all())
    words = rgba.view(np.uint32)
    alpha = np.uint32(0xFF000000 if sys.byteorder == "little" else 0xFF)
    return bool(((words & alpha) == alpha).all())


#: The first bytes of a raw frame (:func:`raw_rgb`): never those of a PNG.
RAW_MAGIC = b"attn-raw-rgb\0"


def raw_rgb(pixels):
    """The frame's RGB pixels, unencoded: ``RAW_MAGIC``, height and width (uint32 each), rows.

    For a caller that encodes every frame its own way anyway (the static edition's build:
    :func:`attn_core.explorers.base.raw_frames`); :func:`from_raw` reads it back.

    Parameters
    ----------
    pixels : (h, w, 3) or (h, w, 4) uint8 array_like (the fourth channel is dropped)

    Returns
    -------
    bytes
    """
    a = np.asarray(pixels)
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] not in (3, 4) or 0 in a.shape[:2]:
        raise ValueError(f"pixels must be an (h, w, 3) or (h, w, 4) uint8 array with h, w >= 1, "
                         f"got shape {a.shape} and dtype {a.dtype}")
    rgb = np.ascontiguousarray(a[:, :, :3])
    return RAW_MAGIC + struct.pack("<II", *a.shape[:2]) + rgb.tobytes()


def from_raw(data):
    """The (h, w, 3) uint8 pixels of a :func:`raw_rgb` frame (a ValueError for anything else)."""
    data = bytes(data)
    head = len(RAW_MAGIC) + 8
    if not data.startswith(RAW_MAGIC) or len(data) < head:
        raise ValueError("data is not a raw frame of raw_rgb (it does not start with RAW_MAGIC)")
    height, width = struct.unpack_from("<II", data, len(RAW_MAGIC))
    size = head + 3 * height * width
    if len(data) != size:
        raise ValueError(f"a raw frame of {height} x {width} pixels needs {size} bytes, "
                         f"got {len(data)}")
    return np.frombuffer(data, dtype=np.uint8, offset=head).reshape(height, width, 3)
