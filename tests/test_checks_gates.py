"""Tests of notebook 19's exercise checks, against plain Python loops and arithmetic; each
check must tell the right answer from the misconceptions its hints name."""

import numpy as np

from attn_core.checks.gates import check_decay_mask, check_delta_step, check_hybrid_cache_bytes

from reference import assert_not_yet, assert_unanswered


def loop_step(s, k, v, beta):
    s = np.array(s, dtype=float)
    old = [sum(k[i] * s[i][c] for i in range(len(k))) for c in range(len(v))]
    for i in range(len(k)):
        for c in range(len(v)):
            s[i][c] += beta * k[i] * (v[c] - old[c])
    return s


def loop_mask(g):
    n = len(g)
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1):
            out[i, j] = np.prod([g[t] for t in range(j + 1, i + 1)])
    return out


def test_delta_step_accepts_a_loop_and_names_the_slips():
    assert check_delta_step(loop_step)
    assert_unanswered(check_delta_step(None))
    slips = {"linear attention": lambda s, k, v, b: s + b * np.outer(k, v),
             "scaled by beta": lambda s, k, v, b: s + np.outer(k, v - k @ s),
             "the whole correction": lambda s, k, v, b: s + np.outer(k, v - b * (k @ s))}
    for word, fn in slips.items():
        fb = check_delta_step(fn)
        assert_not_yet(fb)
        assert word in fb.message


def test_decay_mask_accepts_a_loop_and_names_the_slips():
    assert check_decay_mask(loop_mask)
    assert_unanswered(check_decay_mask(None))
    slips = {"own token": lambda g: loop_mask(g) * np.tril(np.broadcast_to(g, (len(g),) * 2)),
             "transposed": lambda g: loop_mask(g).T,
             "RetNet": lambda g: np.tril(g[-1] ** np.subtract.outer(np.arange(len(g)),
                                                                    np.arange(len(g))))}
    for word, fn in slips.items():
        fb = check_decay_mask(fn)
        assert_not_yet(fb)
        assert word in fb.message, (word, fb.message)


EX = dict(n=1000, layers=8, every=4, state_heads=4, d_k=16, d_v=32, kv_heads=2, d_head=64)


def test_hybrid_cache_bytes_is_counted_by_hand_and_names_the_slips():
    soft, delta = 2, 6  # one layer in 4 is softmax
    cache = soft * 2 * 1000 * 2 * 64 * 2  # layers, k and v, tokens, kv heads, d_head, bytes
    state = delta * 4 * 16 * 32 * 2
    assert check_hybrid_cache_bytes(cache + state, **EX)
    assert_unanswered(check_hybrid_cache_bytes(None, **EX))
    slips = {"every layer": 8 * 2 * 1000 * 2 * 64 * 2, "once": cache + 1000 * state,
             "value beside": cache // 2 + state, "swapped": 3 * cache + soft * 4 * 16 * 32 * 2,
             "numbers, not bytes": (cache + state) // 2}
    for word, value in slips.items():
        fb = check_hybrid_cache_bytes(value, **EX)
        assert_not_yet(fb)
        assert word in fb.message, (word, fb.message)
