"""causal_mask, padding_mask and window_mask against their definitions, written as loops."""


import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_core import attention, causal_mask, padding_mask, window_mask

import reference as ref

SEED = 20240603


# --- definitions ---------------------------------------------------------------------------


@ref.PROPERTY
@given(st.integers(1, 40))
def test_causal_mask_is_j_le_i(n):
    m = causal_mask(n)
    assert m.shape == (n, n) and m.dtype == np.bool_
    np.testing.assert_array_equal(m, ref.causal_mask(n))


@ref.PROPERTY
@given(st.integers(1, 30), st.integers(1, 40))
def test_window_mask_is_i_minus_window_lt_j_le_i(n, window):
    m = window_mask(n, window)
    assert m.shape == (n, n) and m.dtype == np.bool_
    np.testing.assert_array_equal(m, ref.window_mask(n, window))
    assert (m.sum(axis=-1) <= window).all()
    assert m.diagonal().all()  # every token sees itself


@ref.PROPERTY
@given(st.integers(1, 30), st.data())
def test_window_at_least_n_equals_causal(n, data):
    window = data.draw(st.integers(n, n + 10))
    np.testing.assert_array_equal(window_mask(n, window), causal_mask(n))


def test_window_one_is_the_identity():
    np.testing.assert_array_equal(window_mask(5, 1), np.eye(5, dtype=bool))


@ref.PROPERTY
@given(st.integers(1, 12), st.data())
def test_padding_mask_is_j_lt_length(n, data):
    lengths = data.draw(st.lists(st.integers(0, n), min_size=1, max_size=5))
    m = padding_mask(lengths, n)
    assert m.shape == (len(lengths), 1, n) and m.dtype == np.bool_
    np.testing.assert_array_equal(m, ref.padding_mask(lengths, n))


def test_padding_mask_of_one_length_and_of_a_2d_batch():
    np.testing.assert_array_equal(padding_mask(2, 4), [[True, True, False, False]])
    lengths = np.array([[1, 3], [0, 4]])
    m = padding_mask(lengths, 4)
    assert m.shape == (2, 2, 1, 4)
    for a in range(2):
        for b in range(2):
            np.testing.assert_array_equal(m[a, b, 0], [j < lengths[a, b] for j in range(4)])


@ref.PROPERTY
@given(st.integers(1, 8), st.integers(1, 4), st.data())
def test_padding_mask_broadcasts_against_b_n_n(n, b, data):
    lengths = data.draw(st.lists(st.integers(0, n), min_size=b, max_size=b))
    pad = padding_mask(lengths, n)
    combined = pad & causal_mask(n)
    assert np.broadcast_shapes(pad.shape, (b, n, n)) == (b, n, n)
    assert combined.shape == (b, n, n)
    for s in range(b):
        for i in range(n):
            for j in range(n):
                assert combined[s, i, j] == (j <= i and j < lengths[s])


@ref.PROPERTY
@given(st.integers(1, 10), st.integers(1, 12), st.data())
def test_masks_combine_with_and_and_or(n, window, data):
    length = data.draw(st.integers(0, n))
    w, c, p = window_mask(n, window), causal_mask(n), padding_mask(length, n)
    both = w & p
    either = w | p
    for i in range(n):
        for j in range(n):
            allowed_w = 0 <= i - j < window
            assert both[i, j] == (allowed_w and j < length)
            assert either[i, j] == (allowed_w or j < length)
    np.testing.assert_array_equal(c & w, w)  # a window is already causal


def test_padding_mask_in_attention_ignores_padded_keys():
    g = np.random.default_rng(SEED)
    q, k, v = (g.standard_normal((2, 5, 3)) for _ in range(3))
    lengths = [3, 5]
    out, weights = attention(q, k, v, mask=padding_mask(lengths, 5))
    assert (weights[0, :, 3:] == 0).all()
    # the padded keys and values can be anything: sequence 0 only sees its first 3 tokens
    ref_out, _, _ = ref.attention(q[0, :, :], k[0, :3], v[0, :3])
    np.testing.assert_allclose(out[0], ref_out, rtol=1e-12, atol=1e-12)


def test_padding_mask_for_heads_needs_a_head_axis():
    """The documented recipe for (b, h, n, n) weights: mask[:, None] broadcasts."""
    pad = padding_mask([2, 4, 1], 4)
    assert np.broadcast_shapes(pad[:, None].shape, (3, 2, 4, 4)) == (3, 2, 4, 4)


# --- bad input -------------------------------------------------------------------------------

BAD_INPUT = [
    pytest.param(lambda: window_mask(4, 0), ValueError,
                 r"^window must be an integer >= 1, got 0$", id="window-zero"),
    pytest.param(lambda: window_mask(4, -2), ValueError,
                 r"^window must be an integer >= 1, got -2$", id="window-negative"),
    pytest.param(lambda: window_mask(4, 2.0), TypeError,
                 r"^window must be an integer >= 1, got 2\.0$", id="window-float"),
    pytest.param(lambda: causal_mask(0), ValueError,
                 r"^n must be an integer >= 1, got 0$", id="causal-n-zero"),
    pytest.param(lambda: causal_mask(True), TypeError,
                 r"^n must be an integer >= 1, got True$", id="causal-n-bool"),
    pytest.param(lambda: window_mask(0, 2), ValueError,
                 r"^n must be an integer >= 1, got 0$", id="window-n-zero"),
    pytest.param(lambda: padding_mask([2, 5], 4), ValueError,
                 r"^lengths must be between 0 and n=4, got a length of 5$", id="length-too-long"),
    pytest.param(lambda: padding_mask([-1, 2], 4), ValueError,
                 r"^lengths must be between 0 and n=4, got a length of -1$", id="length-negative"),
    pytest.param(lambda: padding_mask(7, 4), ValueError,
                 r"^lengths must be between 0 and n=4, got a length of 7$", id="scalar-too-long"),
    pytest.param(lambda: padding_mask([1.5, 2], 4), TypeError,
                 r"^lengths must be integers, got dtype float64", id="length-float"),
    pytest.param(lambda: padding_mask([1, 2], 0), ValueError,
                 r"^n must be an integer >= 1, got 0$", id="padding-n-zero"),
]


@pytest.mark.parametrize(("call", "exc_type", "pattern"), BAD_INPUT)
def test_bad_input_gets_a_clear_error(call, exc_type, pattern):
    ref.assert_clear_error(call, exc_type, pattern)


def test_window_mask_with_sinks_against_a_loop():
    from attn_core.masks import window_mask
    for n in range(1, 8):
        for w in range(1, 5):
            for s in range(0, 4):
                expect = [[j <= i and (i - j < w or j < s) for j in range(n)] for i in range(n)]
                assert window_mask(n, w, n_sink=s).tolist() == expect


def test_receptive_field_rejects_a_mask_without_its_diagonal():
    import pytest

    from attn_core.masks import receptive_field
    with pytest.raises(ValueError, match="attend to itself"):
        receptive_field(np.zeros((3, 3), dtype=bool), 2)
    with pytest.raises(ValueError, match="square"):
        receptive_field(np.ones((2, 3), dtype=bool), 2)
