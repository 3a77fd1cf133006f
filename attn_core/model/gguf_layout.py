"""Where a GGUF file keeps its tensors: the header read by hand, and a tensor's raw bytes.

A GGUF file is a header followed by the tensors' bytes:

* ``"GGUF"``, a version (uint32), the number of tensors and of metadata entries (uint64);
* the metadata: each a key (a string: uint64 length, then UTF-8 bytes), a value type
  (uint32) and the value (numbers, a string, or an array: element type, count, elements);
* for each tensor: its name, its number of dimensions, the dimensions (innermost first), its
  type (0 = F32, 2 = Q4_0, 3 = Q4_1, 8 = Q8_0, ...) and its offset in the data section;
* padding to ``general.alignment`` (32 bytes by default), then the data section.

:func:`tensor_table` skips the metadata's values (the tokenizer's 49,152 tokens take most of
the header) and returns, for each tensor, where its bytes are: enough to read one block of the
model's weights straight from disk (notebook 17) without decoding the whole file.
:func:`read_header` reads the values too (:mod:`attn_core.model.llm_file` loads the model with
it). ``gguf.GGUFReader`` (llama.cpp's) does all of this and more, but it makes a numpy view of
every part of every value (a million views for SmolLM2's vocabulary: 7 s); this reader makes
plain Python values, 40 times faster. Tests check that both agree, value for value.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["BLOCK_BYTES", "TYPE_NAMES", "Header", "TensorInfo", "raw_tensor", "read_header",
           "tensor_table"]

#: The tensor types of SmolLM2's file, by GGUF's type number.
TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 8: "Q8_0"}
#: (weights, bytes) of one block of each type (F32 and F16: one weight).
BLOCK_BYTES = {"F32": (1, 4), "F16": (1, 2), "Q4_0": (32, 18), "Q4_1": (32, 20),
               "Q8_0": (32, 34)}
#: Size in bytes of each metadata value type (8 = string, 9 = array are read apart).
_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
#: The struct format of each of those types (little-endian): uint8, int8, ..., bool, float64.
_FORMAT = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
           12: "d"}
_ALIGNMENT_KEY = "general.alignment"


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of the file: ``name``, ``shape`` (outermost first, as numpy writes it),
    ``kind`` (``"Q4_1"``, ...), ``start`` and ``nbytes`` in the file."""

    name: str
    shape: tuple
    kind: str
    start: int
    nbytes: int

    @property
    def n_weights(self):
        return int(np.prod(self.shape))


class _Cursor:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values

    def string(self):
        n = self.take("Q")
        text = bytes(self.data[self.at:self.at + n]).decode("utf-8")
        self.at += n
        return text

    def value(self, kind):
        """A metadata value of type ``kind``: a number, a bool, a string or a list of them."""
        if kind == 8:
            return self.string()
        if kind == 9:
            inner, count = self.take("I"), self.take("Q")
            if inner in _FORMAT:  # numbers: one unpack for the whole array
                size = _SCALAR[inner] * count
                values = struct.unpack_from(f"<{count}{_FORMAT[inner]}", self.data, self.at)
                self.at += size
                return list(values)
            return [self.value(inner) for _ in range(count)]
        if kind in _FORMAT:
            return self.take(_FORMAT[kind])
        raise ValueError(f"unknown GGUF value type {kind}")

    def skip_value(self, kind):
        if kind == 8:
            n = self.take("Q")  # read the length first: it moves the cursor
            self.at += n
        elif kind == 9:
            inner, count = self.take("I"), self.take("Q")
            if inner in _SCALAR:
                self.at += _SCALAR[inner] * int(count)
            else:
                for _ in range(count):
                    self.skip_value(inner)
        elif kind in _SCALAR:
            self.at += _SCALAR[kind]
        else:
            raise ValueError(f"unknown GGUF value type {kind}")


@dataclass(frozen=True)
class Header:
    """A GGUF file's header: ``metadata`` ({key: value}; empty when its values were skipped)
    and ``tensors`` (a :class:`TensorInfo` per tensor, in the file's order)."""

    metadata: dict
    tensors: list


def read_header(path, values=True):
    """The :class:`Header` of the GGUF file ``path``.

    Parameters
    ----------
    path : path-like
    values : bool
        Read the metadata's values (numbers, strings, lists of them, as Python values);
        False skips them (only ``general.alignment`` is needed to place the tensors).

    Returns
    -------
    Header

    Raises
    ------
    ValueError
        The file does not start with ``GGUF``, is cut short, or holds an unknown value type
        or a string that is not UTF-8.
    """
    with open(Path(path), "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file (it does not start with 'GGUF')")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            try:
                return _parse(data, values)
            except struct.error as e:
                raise ValueError(f"{path} is cut short or is not a GGUF file: {e}") from None
            except ValueError as e:  # an unknown value type, a bad alignment
                raise ValueError(f"{path}: {e}") from None


def _parse(data, values):
    cur = _Cursor(data)
    cur.at = 4
    _version, n_tensors, n_kv = cur.take("I"), cur.take("Q"), cur.take("Q")
    alignment, metadata = 32, {}
    for _ in range(n_kv):
        key, kind = cur.string(), cur.take("I")
        if key == _ALIGNMENT_KEY:
            alignment = cur.value(kind)
            if values:
                metadata[key] = alignment
        elif values:
            metadata[key] = cur.value(kind)
        else:
            cur.skip_value(kind)
    infos = []
    for _ in range(n_tensors):
        name, n_dims = cur.string(), cur.take("I")
        dims = [cur.take("Q") for _ in range(n_dims)]
        kind, offset = TYPE_NAMES.get(cur.take("I"), "other"), cur.take("Q")
        infos.append((name, tuple(reversed(dims)), kind, offset))
    if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment < 1:
        raise ValueError(f"its {_ALIGNMENT_KEY} must be a whole number >= 1, got {alignment!r}")
    base = -(-cur.at // alignment) * alignment  # the data section starts aligned
    table = []
    for name, shape, kind, offset in infos:
        per_block, nbytes = BLOCK_BYTES.get(kind, (0, 0))
        size = int(np.prod(shape)) // per_block * nbytes if per_block else 0
        table.append(TensorInfo(name, shape, kind, base + offset, size))
    return Header(metadata, table)


def tensor_table(path):
    """Every tensor's :class:`TensorInfo`, in the file's order.

    Only the header is read, its metadata's values skipped. A file that does not start with
    ``GGUF`` is a ValueError.
    """
    return read_header(path, values=False).tensors


def raw_tensor(path, name):
    """The raw bytes of tensor ``name`` (uint8, memory-mapped), and its :class:`TensorInfo`."""
    info = next((t for t in tensor_table(path) if t.name == name), None)
    if info is None:
        raise ValueError(f"{path} has no tensor named {name!r}")
    data = np.memmap(Path(path), dtype=np.uint8, mode="r")
    return data[info.start:info.start + info.nbytes], info
