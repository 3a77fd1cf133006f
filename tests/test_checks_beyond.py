"""Tests of notebook 18's exercise checks, against plain arithmetic and plain Python loops;
each check must tell the right answer from the misconceptions its hints name."""

import math

import numpy as np

from attn_core.checks.beyond import (
    check_layers_to_connect,
    check_linear_recurrence,
    check_mla_cache_bytes,
)

from reference import assert_not_yet, assert_unanswered, numbers_in


def phi(x):
    return np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))


def loop_recurrence(q, k, v):
    s, z, out = np.zeros((q.shape[1], v.shape[1])), np.zeros(q.shape[1]), []
    for t in range(len(q)):
        s = s + np.outer(phi(k[t]), v[t])
        z = z + phi(k[t])
        out.append(phi(q[t]) @ s / (phi(q[t]) @ z))
    return np.array(out)


def test_linear_recurrence_accepts_a_loop_and_names_the_slips():
    assert check_linear_recurrence(loop_recurrence)
    assert_unanswered(check_linear_recurrence(None))

    def read_first(q, k, v):
        s, z, out = np.zeros((q.shape[1], v.shape[1])), np.zeros(q.shape[1]), []
        for t in range(len(q)):
            den = phi(q[t]) @ z
            out.append(phi(q[t]) @ s / den if den > 0 else np.zeros(v.shape[1]))
            s = s + np.outer(phi(k[t]), v[t])
            z = z + phi(k[t])
        return np.array(out)

    def no_norm(q, k, v):
        s, out = np.zeros((q.shape[1], v.shape[1])), []
        for t in range(len(q)):
            s = s + np.outer(phi(k[t]), v[t])
            out.append(phi(q[t]) @ s)
        return np.array(out)

    def all_keys(q, k, v):
        s, z = phi(k).T @ v, phi(k).sum(axis=0)
        return np.array([phi(qt) @ s / (phi(qt) @ z) for qt in q])

    for fn, word in ((read_first, "itself"), (no_norm, "normaliser"), (all_keys, "every key")):
        fb = check_linear_recurrence(fn)
        assert_not_yet(fb)
        assert word in fb.message


SHAPE = dict(layers=60, n_heads=128, d_head=128, d_c=512, d_rope=64)


def test_mla_cache_bytes_right_and_the_usual_slips():
    n = 4096
    right = n * 60 * (512 + 64) * 2  # tokens, layers, latent + rotary key, 2 bytes
    assert check_mla_cache_bytes(right, n, **SHAPE)
    assert_unanswered(check_mla_cache_bytes(None, n, **SHAPE))
    cases = ((n * 2 * 60 * 128 * 128 * 2, "multi-head"), (2 * right, "once"),
             (n * 60 * 512 * 2, "rotary"), (n * 60 * 128 * 576 * 2, "not per head"),
             (n * 60 * (512 + 128 * 64) * 2, "shared"), (right // 60, "one layer"),
             (right / 2**20, "bytes"), (right + 10, ""), ("much", ""))
    for slip, word in cases:
        fb = check_mla_cache_bytes(slip, n, **SHAPE)
        assert_not_yet(fb)
        assert word in fb.message
        assert float(right) not in numbers_in(fb.message)


def hops_by_search(allowed, i, j):
    """Fewest attention steps from input j to output i through positions 0..i (BFS)."""
    frontier, seen, depth = {j}, {j}, 0
    while i not in seen:
        depth += 1
        frontier = {b for b in range(i + 1) for a in frontier if allowed(b, a)} - seen
        seen |= frontier
    return depth


def test_layers_to_connect_right_and_the_usual_slips():
    rules = {"window": lambda s: lambda b, a: 0 <= b - a < s,
             "strided": lambda s: lambda b, a: 0 <= b - a and (b - a < s or (b - a) % s == 0)}
    for pattern, size, i, j in (("window", 4, 40, 3), ("strided", 8, 60, 3),
                                ("strided", 8, 60, 12), ("window", 5, 9, 9)):
        expected = hops_by_search(rules[pattern](size), i, j) if i != j else 1
        assert check_layers_to_connect(expected, pattern, size, i, j)
        assert_not_yet(check_layers_to_connect(expected + 1, pattern, size, i, j))
    fb = check_layers_to_connect(math.ceil(57 / 7), "strided", 8, 60, 3)
    assert "window" in fb.message
    fb = check_layers_to_connect(1, "strided", 8, 60, 3)
    assert "not enough" in fb.message
    assert_unanswered(check_layers_to_connect(None, "fixed", 4, 20, 2))


def test_mla_cache_bytes_names_a_float32_count():
    n = 4096
    right = n * 60 * (512 + 64) * 2
    fb = check_mla_cache_bytes(n * 60 * (512 + 64) * 4, n, **SHAPE)  # 4 bytes a number
    assert_not_yet(fb)
    assert "float32" in fb.message and "4 bytes" in fb.message
    fb = check_mla_cache_bytes(2 * right, n, **SHAPE, dtype="float32")  # right for float32
    assert fb


def test_layers_to_connect_names_each_patterns_own_slip():
    distance, size = 57, 8
    window = check_layers_to_connect(math.ceil(distance / size), "window", size, 60, 3)
    assert_not_yet(window)
    assert "stride" not in window.message and "w - 1" in window.message
    fixed = check_layers_to_connect(math.ceil(distance / (size - 1)), "fixed", size, 60, 3)
    local = check_layers_to_connect(math.ceil(distance / (size - 1)), "local+global", size,
                                    60, 3)
    assert_not_yet(fixed)
    assert_not_yet(local)
    assert "summary" in fixed.message and "global" in local.message
    assert fixed.message != local.message
    fixed = check_layers_to_connect(math.ceil(distance / size), "fixed", size, 60, 3)
    local = check_layers_to_connect(math.ceil(distance / size), "local+global", size, 60, 3)
    assert "stride" not in fixed.message + local.message
    assert fixed.message != local.message


def test_layers_to_connect_refuses_positions_outside_the_sequence():
    import pytest
    for i, j in ((60, -1), (-1, 0), (3, 60), (60, 61)):
        with pytest.raises(ValueError, match="j|i"):
            check_layers_to_connect(9, "window", 8, i=i, j=j)
    with pytest.raises(TypeError):
        check_layers_to_connect(9, "window", 8, i=60.5, j=3)


def test_linear_recurrence_names_a_wrong_feature_map():
    def with_phi(f):
        def fn(q, k, v):
            s, z, out = np.zeros((q.shape[1], v.shape[1])), np.zeros(q.shape[1]), []
            for t in range(len(q)):
                s = s + np.outer(f(k[t]), v[t])
                z = z + f(k[t])
                out.append(f(q[t]) @ s / (f(q[t]) @ z))
            return np.array(out)
        return fn

    def elu(x):
        return np.where(x > 0, x, np.exp(np.minimum(x, 0)) - 1)

    for f, word in ((np.exp, "is exp,"), (elu, "without the + 1")):
        fb = check_linear_recurrence(with_phi(f))
        assert_not_yet(fb)
        assert word in fb.message
