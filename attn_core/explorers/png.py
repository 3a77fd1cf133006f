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
    a = np.asarray(pixels)
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] not in (3, 4) or 0 in a.shape[:2]:
        raise ValueError(f"pixels must be an (h, w, 3) or (h, w, 4) uint8 array with h, w >= 1, "
                         f"got shape {a.shape} and dtype {a.dtype}")
    if not (isinstance(level, int) and 0 <= level <= 9):
        raise ValueError(f"level must be an int from 0 to 9, got {level!r}")
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
    The zlib stream's Adler-32 is the bands' own sums combined (:func:`adler32_combine`): only
    a band compressed again is summed again (summing the whole frame took 2 ms of a large
    frame's 10-12).
    """

    def __init__(self, level=ZLIB_LEVEL):
        self.level = level
        self._rows = None  # (h, 1 + w * channels) uint8: the last frame's filtered rows
        self._header = None
        self._bands = []  # compressed bytes per band of BAND_ROWS rows
        self._sums = []  # the Adler-32 of each band's filtered rows
        self._lock = threading.Lock()
        self.recompressed = 0

    def png(self, pixels):
        """PNG bytes of ``pixels`` ((h, w, 3) or (h, w, 4) uint8, as :func:`rgb_png`)."""
        rows, header = _filtered(pixels, self.level)
        bands = range(0, rows.shape[0], BAND_ROWS)
        with self._lock:
            if header != self._header or self._rows is None:
                changed = [True] * len(bands)
                self._bands = [b""] * len(bands)
                self._sums = [1] * len(bands)
            else:
                differs = (rows != self._rows).any(axis=1)  # (h,) bool
                changed = np.logical_or.reduceat(differs, list(bands)).tolist()
            self.recompressed = 0
            for k, start in enumerate(bands):
                if changed[k]:
                    part = rows[start:start + BAND_ROWS]
                    band = zlib.compressobj(self.level, zlib.DEFLATED, -15)
                    self._bands[k] = band.compress(part.data) + band.flush(zlib.Z_SYNC_FLUSH)
                    self._sums[k] = zlib.adler32(part.data)
                    self.recompressed += part.shape[0]
            self._rows, self._header = rows, header
            total, band_bytes = 1, BAND_ROWS * rows.shape[1]
            for k, value in enumerate(self._sums):  # the last band may be shorter
                total = adler32_combine(total, value, band_bytes if k < len(bands) - 1
                                        else (rows.shape[0] - k * BAND_ROWS) * rows.shape[1])
            idat = b"".join([_ZLIB_HEADER, *self._bands, _FINAL_BLOCK, struct.pack(">I", total)])
        return _png(header, idat)


#: PNG's filter type 2: each byte minus the one above it.
UP_FILTER = 2


def _opaque(rgba):
    """Whether the (h, w, 4) uint8 pixels' fourth channel is 255 everywhere: the AND of all
    their 64-bit words (two pixels each) has both alpha bytes 255 exactly when every pixel's
    is (one pass, no array made; a strided or odd-sized array is checked channel by channel)."""
    if not rgba.flags.c_contiguous or rgba.size % 8:
        return bool((rgba[:, :, 3] == 255).all())
    alpha = 0xFF000000FF000000 if sys.byteorder == "little" else 0x000000FF000000FF
    return int(np.bitwise_and.reduce(rgba.reshape(-1).view(np.uint64))) & alpha == alpha


#: Adler-32's modulus.
_ADLER_BASE = 65521


def adler32_combine(first, second, length):
    """The Adler-32 of two byte strings joined, from each one's Adler-32 and the second's
    ``length`` (zlib's ``adler32_combine``, which Python's zlib does not offer): a frame's
    checksum from its bands' sums, only the changed bands summed again.

    Examples
    --------
    >>> a, b = b"attention ", b"is all you need"
    >>> adler32_combine(zlib.adler32(a), zlib.adler32(b), len(b)) == zlib.adler32(a + b)
    True
    """
    rem = length % _ADLER_BASE
    low = first & 0xFFFF
    high = (rem * low) % _ADLER_BASE
    low += (second & 0xFFFF) + _ADLER_BASE - 1
    high += (first >> 16) + (second >> 16) + _ADLER_BASE - rem
    return (low % _ADLER_BASE) | ((high % _ADLER_BASE) << 16)


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
