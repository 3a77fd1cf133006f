"""Tests of notebook 16's exercise checks, against plain arithmetic and plain Python loops;
each check must tell the right answer from the misconceptions its hints name."""

import numpy as np

from attn_core.checks.todays_attention import (
    check_gqa_cache_bytes,
    check_receptive_field,
    check_repeat_kv,
)

from reference import assert_not_yet, assert_unanswered, numbers_in

SHAPE = {"layers": 80, "n_heads": 64, "n_kv_heads": 8, "d_head": 128}


def test_gqa_cache_bytes_right_and_the_usual_slips():
    n = 4096
    per_token = 2 * 80 * 8 * 128 * 2  # K and V, layers, key/value heads, d_head, 2 bytes
    right = n * per_token
    assert check_gqa_cache_bytes(right, n, **SHAPE)
    assert_unanswered(check_gqa_cache_bytes(None, n, **SHAPE))
    multi_head = n * 2 * 80 * 64 * 128 * 2
    fb = check_gqa_cache_bytes(multi_head, n, **SHAPE)
    assert_not_yet(fb)
    assert "multi-head" in fb.message
    for slip in (right // 2, right // 80, right / 2**30, right + 10**6, "lots"):
        fb = check_gqa_cache_bytes(slip, n, **SHAPE)
        assert_not_yet(fb)
        assert float(right) not in numbers_in(fb.message)


def loop_reach(window, layers, n):
    """Positions the last token depends on, by following attention steps in plain Python."""
    reached = {n - 1}
    for _ in range(layers):
        reached = {j for i in reached for j in range(max(0, i - window + 1), i + 1)}
    return len(reached)


def test_receptive_field_right_and_the_usual_slips():
    for window, layers in ((4, 3), (5, 2), (2, 6)):
        expected = loop_reach(window, layers, 100)
        assert check_receptive_field(expected, window, layers)
        for slip, word in ((window, "one layer"), (window * layers, "overlap"),
                           (expected - 1, "itself"), (expected + 3, "")):
            fb = check_receptive_field(slip, window, layers)
            assert_not_yet(fb)
            assert word in fb.message
            assert float(expected) not in numbers_in(fb.message)
    assert_unanswered(check_receptive_field(None, 4, 3))


def test_repeat_kv_accepts_a_loop_and_catches_tiling_and_wrong_shapes():
    def loop(k, groups):
        return np.stack([k[i // groups] for i in range(k.shape[0] * groups)])

    assert check_repeat_kv(loop)
    assert_unanswered(check_repeat_kv(None))
    assert_unanswered(check_repeat_kv(lambda k, groups: None))
    assert_not_yet(check_repeat_kv(3))
    fb = check_repeat_kv(lambda k, groups: np.tile(k, (groups, 1, 1)))
    assert_not_yet(fb)
    assert "tiles" in fb.message
    fb = check_repeat_kv(lambda k, groups: k)  # no repeat at all
    assert_not_yet(fb)
    assert "nothing is repeated" in fb.message
    fb = check_repeat_kv(lambda k, groups: np.repeat(k, groups, axis=1))
    assert_not_yet(fb)
    assert "tokens are repeated" in fb.message
    fb = check_repeat_kv(lambda k, groups: 1 / 0)
    assert_not_yet(fb)
    assert "ZeroDivisionError" in fb.message

    def stub(k, groups):
        raise NotImplementedError

    assert_unanswered(check_repeat_kv(stub))
