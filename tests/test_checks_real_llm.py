"""Tests of notebook 17's exercise checks: each accepts a right answer written independently
(plain Python loops and ``math``, or struct for the bytes) and names every slip it lists."""

import math
import struct

import numpy as np
import pytest

from attn_core.checks.real_llm import check_dequantize_q4_1, check_rms_norm, check_swiglu

from reference import assert_not_yet, assert_unanswered


def loop_rms_norm(x, g, eps):
    x = np.asarray(x, dtype=float)
    out = np.empty_like(x)
    for idx in np.ndindex(x.shape[:-1]):
        row = [float(v) for v in x[idx]]
        rms = math.sqrt(sum(v * v for v in row) / len(row) + eps)
        out[idx] = [v / rms * float(gi) for v, gi in zip(row, g)]
    return out


def loop_swiglu(x, w_gate, w_up, w_down):
    x = np.asarray(x, dtype=float)
    out = np.empty(x.shape[:-1] + (w_down.shape[1],))
    for idx in np.ndindex(x.shape[:-1]):
        hidden = []
        for j in range(w_gate.shape[1]):
            a = sum(float(x[idx][i]) * float(w_gate[i, j]) for i in range(x.shape[-1]))
            b = sum(float(x[idx][i]) * float(w_up[i, j]) for i in range(x.shape[-1]))
            hidden.append(a / (1 + math.exp(-a)) * b)
        out[idx] = [sum(h * float(w_down[j, c]) for j, h in enumerate(hidden))
                    for c in range(w_down.shape[1])]
    return out


def struct_q4_1(block):
    block = np.asarray(block)
    out = np.empty(block.shape[:-1] + (32,))
    for idx in np.ndindex(block.shape[:-1]):
        raw = bytes(block[idx].tolist())
        d, m = struct.unpack("<ee", raw[:4])
        out[idx] = [d * (raw[4 + j % 16] >> (4 * (j // 16)) & 15) + m for j in range(32)]
    return out


def _stub(*args):
    raise NotImplementedError


@pytest.mark.parametrize("check, right", [(check_rms_norm, loop_rms_norm),
                                          (check_swiglu, loop_swiglu),
                                          (check_dequantize_q4_1, struct_q4_1)])
def test_right_answers_pass_and_stubs_are_unanswered(check, right):
    assert check(right)
    assert_unanswered(check(None))
    assert_unanswered(check(_stub))


def _ms(x):
    return np.mean(x * x, axis=-1, keepdims=True)


@pytest.mark.parametrize("slip, words", [
    (lambda x, g, e: loop_rms_norm(x - x.mean(-1, keepdims=True), g, e), "layer norm"),
    (lambda x, g, e: x / (np.sqrt(_ms(x)) + e) * g, "after the square root"),
    (lambda x, g, e: x / (_ms(x) + e) * g, "square root is missing"),
    (lambda x, g, e: x / np.sqrt(_ms(x) + e), "gain"),
    (lambda x, g, e: x / np.sqrt(np.mean(x * x, axis=0, keepdims=True) + e) * g, "axis 0"),
])
def test_rms_norm_names_each_slip(slip, words):
    fb = check_rms_norm(slip, hint=True)
    assert_not_yet(fb)
    assert words in fb.message


def _silu(z):
    return z / (1 + np.exp(-z))


@pytest.mark.parametrize("slip, words", [
    (lambda x, g, u, d: (_silu(x @ u) * (x @ g)) @ d, "swapped"),
    (lambda x, g, u, d: (0.5 * (x @ g) * (1 + np.vectorize(math.erf)((x @ g) / math.sqrt(2)))
                         * (x @ u)) @ d, None),
    (lambda x, g, u, d: (1 / (1 + np.exp(-(x @ g))) * (x @ u)) @ d, "sigmoid of the gate"),
    (lambda x, g, u, d: _silu((x @ g) * (x @ u)) @ d, "product"),
    (lambda x, g, u, d: _silu(x @ g) @ d, "up projection is missing"),
])
def test_swiglu_names_each_slip(slip, words):
    fb = check_swiglu(slip, hint=True)
    assert_not_yet(fb)
    if words:
        assert words in fb.message


def test_swiglu_names_gelu_tanh():
    def gelu_tanh(z):
        return 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))

    fb = check_swiglu(lambda x, g, u, d: (gelu_tanh(x @ g) * (x @ u)) @ d)
    assert_not_yet(fb)
    assert "GELU" in fb.message


def _q4(order="halves", swap=False, signed=False, no_min=False):
    def fn(block):
        block = np.asarray(block)
        out = np.empty(block.shape[:-1] + (32,))
        for idx in np.ndindex(block.shape[:-1]):
            raw = bytes(block[idx].tolist())
            d, m = struct.unpack("<ee", raw[:4])
            if swap:
                d, m = m, d
            lows = [b & 15 for b in raw[4:]]
            highs = [b >> 4 for b in raw[4:]]
            q = {"halves": lows + highs, "high": highs + lows,
                 "pairs": [v for pair in zip(lows, highs) for v in pair]}[order]
            out[idx] = [d * (v - 8) if signed else d * v + (0 if no_min else m) for v in q]
        return out
    return fn


@pytest.mark.parametrize("slip, words", [
    (_q4(swap=True), "swapped"), (_q4(order="pairs"), "interleaved"),
    (_q4(order="high"), "high nibbles come first"), (_q4(no_min=True), "minimum is not added"),
    (_q4(signed=True), "centred on 8"),
])
def test_dequantize_q4_1_names_each_slip(slip, words):
    fb = check_dequantize_q4_1(slip, hint=True)
    assert_not_yet(fb)
    assert words in fb.message
    assert "Hint" in fb.message and "def " not in fb.message


def _one_block_only(block):
    """Right on one block of 20 bytes; a batch is read as one long row (its batch axes
    ignored): the slip issue 45 found the feedback answering with transposes."""
    b = np.asarray(block).reshape(-1)
    d, m = b[0:2].view("<f2")[0], b[2:4].view("<f2")[0]
    q = np.concatenate([b[4:20] & 15, b[4:20] >> 4]).astype(float)
    return float(d) * q + float(m)


def test_a_decoder_that_ignores_the_batch_axes_is_told_about_bytes_not_transposes():
    fb = check_dequantize_q4_1(_one_block_only)
    assert_not_yet(fb)
    assert "batch of blocks" in fb.message and "last axis" in fb.message
    assert "transpose" not in fb.message
