"""How a GGUF file packs weights into bytes: one Q4_1 block and one Q8_0 block, by hand.

A quantized tensor is stored as blocks of 32 weights. Each block keeps one or two float16
numbers for the whole block and a small integer per weight:

* **Q8_0** (34 bytes a block): a scale ``d`` (float16) and 32 signed bytes ``q``;
  ``w = d * q``. About 8.5 bits a weight.
* **Q4_1** (20 bytes a block): a scale ``d`` and a minimum ``m`` (float16, in that order),
  then 16 bytes holding 32 unsigned 4-bit numbers ``q`` in 0..15; ``w = d * q + m``.
  Byte ``j`` holds weight ``j`` in its low nibble and weight ``j + 16`` in its high nibble.
  About 5 bits a weight.

These functions are the teaching version, written for reading; the model's loader uses
``gguf.quants.dequantize`` (llama.cpp's own reader), and the tests check that both agree.

Examples
--------
>>> import numpy as np
>>> block = np.array([0, 60, 0, 0] + [0x21] * 16, dtype=np.uint8)  # d = 1.0, m = 0.0
>>> dequantize_q4_1_block(block)[[0, 16]]
array([1., 2.], dtype=float32)
"""

import numpy as np

from .._validate import as_float_array, check_finite

#: Weights in one block of every format here.
BLOCK_SIZE = 32
#: Bytes of one block: float16 scale (2) + 32 signed bytes.
Q8_0_BYTES = 2 + BLOCK_SIZE
#: Bytes of one block: float16 scale (2) + float16 minimum (2) + 32 nibbles in 16 bytes.
Q4_1_BYTES = 2 + 2 + BLOCK_SIZE // 2


def _check_block(block, size, name):
    block = np.asarray(block)
    if block.dtype != np.uint8:
        raise TypeError(f"{name} must be a uint8 array of raw bytes; got dtype {block.dtype}")
    if block.shape[-1:] != (size,):
        raise ValueError(f"{name} must end in an axis of {size} bytes (one block); "
                         f"got shape {block.shape}")
    return block


def float16_at(block, offset):
    """The float16 stored little-endian at bytes ``offset``, ``offset + 1`` of each block.

    block : (..., nbytes) uint8 ndarray. Returns (...,) float32.
    """
    pair = np.ascontiguousarray(block[..., offset:offset + 2])  # (..., 2) bytes
    return pair.view("<f2")[..., 0].astype(np.float32)


def nibbles(packed):
    """Unpack ``(..., 16)`` bytes into ``(..., 32)`` 4-bit numbers: low nibbles first.

    Entry ``j`` is byte ``j``'s low nibble, entry ``j + 16`` its high nibble (GGML's order).
    """
    low = packed & np.uint8(0x0F)  # (..., 16): weights 0..15
    high = packed >> np.uint8(4)  # (..., 16): weights 16..31
    return np.concatenate([low, high], axis=-1)  # (..., 32)


def dequantize_q4_1_block(block):
    """The 32 weights of Q4_1 block(s): ``w = d * q + m``.

    Parameters
    ----------
    block : (..., 20) uint8 ndarray
        Raw bytes: scale ``d`` (float16), minimum ``m`` (float16), 16 bytes of nibbles.

    Returns
    -------
    w : (..., 32) float32 ndarray
    """
    block = _check_block(block, Q4_1_BYTES, "block")
    d = float16_at(block, 0)[..., None]  # (..., 1)
    m = float16_at(block, 2)[..., None]  # (..., 1)
    q = nibbles(block[..., 4:]).astype(np.float32)  # (..., 32)
    return d * q + m


def dequantize_q8_0_block(block):
    """The 32 weights of Q8_0 block(s): ``w = d * q``.

    block : (..., 34) uint8 ndarray: scale ``d`` (float16) then 32 signed bytes.
    Returns (..., 32) float32.
    """
    block = _check_block(block, Q8_0_BYTES, "block")
    d = float16_at(block, 0)[..., None]  # (..., 1)
    q = np.ascontiguousarray(block[..., 2:]).view(np.int8).astype(np.float32)  # (..., 32)
    return d * q


def blocks_of(raw, block_bytes):
    """A tensor's raw bytes ``(rows, row_bytes)`` or flat, cut into ``(n_blocks, block_bytes)``."""
    raw = np.asarray(raw)
    if raw.dtype != np.uint8 or raw.size % block_bytes:
        raise ValueError(f"raw must be uint8 bytes, a whole number of {block_bytes}-byte "
                         f"blocks; got dtype {raw.dtype} and {raw.size} bytes")
    return raw.reshape(-1, block_bytes)  # (n_blocks, block_bytes)


def quantize_q4_1(w):
    """Round float weights to Q4_1 and back: what storing them in Q4_1 keeps.

    Per block of 32: ``d = (max - min) / 15``, ``m = min``, ``q = round((w - m) / d)``
    clipped to 0..15 (computed in float32, as llama.cpp does); ``d`` and ``m`` are then
    rounded to float16, as the file stores them.

    w : (..., k) float ndarray with k a multiple of 32. Returns the same shape, float32.
    A NaN or inf weight, or a block whose ``d`` or ``m`` is beyond float16's range (the
    file could not store it), is a ValueError.
    """
    w, blocks = _blocks(w)
    lo, hi = blocks.min(axis=-1, keepdims=True), blocks.max(axis=-1, keepdims=True)
    with np.errstate(over="ignore"):  # (hi - lo beyond float32: d inf, refused just below)
        d = (hi - lo) / np.float32(15)  # (n_blocks, 1)
    d16, m16 = _float16(d, "scale d"), _float16(lo, "minimum m")
    inv = np.divide(1, d, out=np.zeros_like(d), where=d != 0)
    q = np.clip(np.trunc((blocks - lo) * inv + np.float32(0.5)), 0, 15)  # (n_blocks, 32)
    return (d16 * q + m16).reshape(w.shape)


def quantize_q8_0(w):
    """Round float weights to Q8_0 and back: ``d = max|w| / 127``, ``q = round(w / d)``.

    ``q`` is rounded half away from zero with ``d`` in float32 (as llama.cpp does); ``d`` is
    then rounded to float16, as the file stores it.

    w : (..., k) float ndarray with k a multiple of 32. Returns the same shape, float32.
    A NaN or inf weight, or a block whose ``d`` is beyond float16's range, is a ValueError.
    """
    w, blocks = _blocks(w)
    d = np.abs(blocks).max(axis=-1, keepdims=True) / np.float32(127)  # (n_blocks, 1)
    d16 = _float16(d, "scale d")
    x = blocks * np.divide(1, d, out=np.zeros_like(d), where=d != 0)  # (n_blocks, 32)
    q = np.sign(x) * np.floor(np.abs(x) + np.float32(0.5))
    return (d16 * q).reshape(w.shape)


def _blocks(w):
    w = as_float_array(w, "w")  # NaN and inf refused
    with np.errstate(over="ignore"):
        w = w.astype(np.float32, copy=False)
    check_finite(w, "w in float32 (as a file's weights are read)")
    if w.ndim == 0 or w.shape[-1] % BLOCK_SIZE:
        raise ValueError(f"w's last axis must be a multiple of {BLOCK_SIZE}; got shape "
                         f"{w.shape}")
    return w, w.reshape(-1, BLOCK_SIZE)  # (n_blocks, 32)


def _float16(x, what):
    """``x`` rounded to float16, as the file stores it, back in float32; a ValueError when a
    value is beyond float16's range (it would be stored as inf)."""
    with np.errstate(over="ignore"):
        x16 = x.astype(np.float16)
    if not np.isfinite(x16).all():
        raise ValueError(f"w is too large for this format: a block's {what} is "
                         f"{float(np.abs(x).max()):.4g}, beyond float16's largest number "
                         f"{float(np.finfo(np.float16).max):g} (the file stores it in float16)")
    return x16.astype(np.float32)


def relative_error(w, w_hat):
    """``||w_hat - w|| / ||w||`` (Frobenius): the share of the weights lost to rounding."""
    w = np.asarray(w, dtype=np.float64)
    return float(np.linalg.norm(np.asarray(w_hat, dtype=np.float64) - w) / np.linalg.norm(w))


def bits_per_weight(block_bytes):
    """Storage of one weight in a format whose blocks of 32 take ``block_bytes`` bytes."""
    return 8 * block_bytes / BLOCK_SIZE
