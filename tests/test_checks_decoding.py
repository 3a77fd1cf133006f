"""Tests of notebook 13's exercise checks, against plain arithmetic and plain Python loops."""

import math

import numpy as np
from reference import assert_not_yet, assert_unanswered, numbers_in

from attn_core.checks.decoding import check_decode_row, check_kv_cache_bytes, check_longest_context

SHAPE = {"layers": 40, "heads": 40, "d_head": 128}


def test_kv_cache_bytes_right_and_the_usual_slips():
    n = 8192
    per_token = 2 * 40 * 40 * 128 * 2  # K and V, layers, heads, d_head, 2 bytes
    assert check_kv_cache_bytes(n * per_token, n, **SHAPE)
    assert_unanswered(check_kv_cache_bytes(None, n, **SHAPE))
    for slip in (n * per_token // 2, n * per_token // 40, n * per_token // 2 // 1,
                 n * per_token / 2**30, n * per_token + 10**6, "lots"):
        fb = check_kv_cache_bytes(slip, n, **SHAPE)
        assert_not_yet(fb)
        assert float(n * per_token) not in numbers_in(fb.message)
    assert check_kv_cache_bytes(n * 2 * 40 * 40 * 128 * 4, n, **SHAPE, dtype="float32")


def test_longest_context_right_and_rounding():
    budget = 20 * 2**30
    per_token = 2 * 40 * 40 * 128 * 2
    best = budget // per_token
    assert best * per_token <= budget < (best + 1) * per_token
    assert check_longest_context(best, budget, **SHAPE)
    assert_unanswered(check_longest_context(None, budget, **SHAPE))
    for slip in (best + 1, budget / per_token, 2 * best, best // 2, "x"):
        fb = check_longest_context(slip, budget, **SHAPE)
        assert_not_yet(fb)
        assert float(best) not in numbers_in(fb.message)


def loop_decode_row(q_t, K, V):
    """One decoding step in plain Python: scores, softmax, weighted sum."""
    d_k = len(q_t)
    s = [sum(a * b for a, b in zip(q_t, k)) / math.sqrt(d_k) for k in K]
    m = max(s)
    e = [math.exp(x - m) for x in s]
    total = sum(e)
    return [sum(e[j] / total * V[j][c] for j in range(len(V))) for c in range(len(V[0]))]


def test_decode_row_accepts_a_correct_function_and_catches_wrong_ones():
    assert check_decode_row(loop_decode_row)
    assert_unanswered(check_decode_row(None))
    assert_not_yet(check_decode_row(42))

    def placeholder(q_t, K, V):
        return None

    assert_unanswered(check_decode_row(placeholder))

    def unscaled(q_t, K, V):
        return loop_decode_row(np.asarray(q_t) * math.sqrt(len(q_t)), K, V)

    def last_only(q_t, K, V):
        return V[-1]

    def mean_of_values(q_t, K, V):
        return np.mean(V, axis=0)

    def all_rows(q_t, K, V):
        return np.tile(loop_decode_row(q_t, K, V), (len(K), 1))

    def crashes(q_t, K, V):
        raise RuntimeError("boom")

    fb = check_decode_row(unscaled)
    assert_not_yet(fb)
    assert "not scaled" in fb.message
    for wrong in (last_only, mean_of_values, all_rows, crashes):
        assert_not_yet(check_decode_row(wrong))
