"""The explorers' PNG encoder: RGB pixels to PNG bytes, as fast as a slider needs.

Encoding the frame was the largest part of a slider's answer (about half of it for the
real-model explorers: 25 ms of a 1568 x 832 frame, twice, light and dark). Pillow's PNG
writer picks a filter for every row, and that choice, not zlib, is most of its time; it has
no option to skip it. The explorers' frames are flat colours and anti-aliased text, which
compress as well without a filter: this writer stores every row unfiltered (PNG filter
type 0) and compresses with zlib at level 1. On that frame: 13 ms and 145 kB, against
Pillow's 25 ms and 147 kB; 1.6 to 1.9 times faster on every explorer's frame, the files 9%
smaller to 24% larger (``benchmarks/bench_explorers.py --png`` measures both on every
explorer). The file is a plain 8-bit RGB PNG (any viewer, Pillow, the browser read it;
``tests/test_explorer_png.py`` decodes it with Pillow and compares every pixel).

zlib releases the GIL while it compresses, so a sampling thread (the GPT explorer) keeps
running meanwhile.
"""

import struct
import zlib

import numpy as np

__all__ = ["RAW_MAGIC", "from_raw", "raw_rgb", "rgb_png", "ZLIB_LEVEL"]

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
        An 8-bit RGB PNG, every row unfiltered.
    """
    a = np.asarray(pixels)
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] not in (3, 4) or 0 in a.shape[:2]:
        raise ValueError(f"pixels must be an (h, w, 3) or (h, w, 4) uint8 array with h, w >= 1, "
                         f"got shape {a.shape} and dtype {a.dtype}")
    if not (isinstance(level, int) and 0 <= level <= 9):
        raise ValueError(f"level must be an int from 0 to 9, got {level!r}")
    height, width = a.shape[:2]
    rows = np.empty((height, 1 + 3 * width), dtype=np.uint8)
    rows[:, 0] = 0  # filter type 0 (None) for every row
    rows[:, 1:].reshape(height, width, 3)[...] = a[:, :, :3]
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bit, RGB, no interlace
    return (_SIGNATURE + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(rows.data, level)) + _chunk(b"IEND", b""))


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
