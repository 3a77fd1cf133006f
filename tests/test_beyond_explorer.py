"""The beyond-the-quadratic explorer of notebook 18: what it shows against loops written here."""

import numpy as np
import pytest
from test_explorers import drive

from attn_core.explorers import beyond_explorer
from attn_core.explorers.beyond_quadratic import D_HEAD, HEADS, LAYERS, MAX_TOKENS, NS


def loop_allowed(method, i, j, size):
    """May query i attend to key j under ``method`` (causal), written from the papers."""
    if j > i:
        return False
    d = i - j
    return {"full": True, "linear": True, "latent cache (MLA)": True,
            "sliding window": d < size,
            "strided": d < size or d % size == 0,
            "fixed": i // size == j // size or j % size == size - 1,
            "local + global": d <= size or j == 0}[method]


def check_shown(ex, method, n, size):
    shown = ex.shown()
    mask = np.array([[loop_allowed(method, i, j, size) for j in range(n)] for i in range(n)])
    if n <= 128:
        np.testing.assert_array_equal(shown["pattern"], mask.astype(float))
    else:  # block shares of allowed cells
        f = n // 128
        np.testing.assert_allclose(shown["pattern"][5, 3], mask[5 * f:6 * f, 3 * f:4 * f].mean())
    assert shown["cells"] == mask.sum() and shown["full_cells"] == n * (n + 1) // 2
    full_cost, cost = shown["cost"]
    i = NS.index(n)
    assert cost[i] == pytest.approx(full_cost[i] * mask.sum() / (n * (n + 1) / 2))
    full_mem, mem = shown["memory"]
    per_token = 2 * LAYERS * HEADS * D_HEAD * 2  # keys and values of every head, float16
    assert full_mem[-1] * 2**20 == MAX_TOKENS * per_token == shown["full_kept"]
    return mem * 2**20


def test_patterns_cost_and_memory_follow_the_loops():
    ex = beyond_explorer(method="sliding window", n=64, size=8)
    mem = check_shown(ex, "sliding window", 64, 8)
    assert mem[-1] == 8 * 2 * LAYERS * HEADS * D_HEAD * 2  # a window keeps 8 tokens
    assert ex.shown()["hops"] == 9  # ceil(62 / 7)
    for name, value, method, n, size in (("method", "strided", "strided", 64, 8),
                                         ("size", 4, "strided", 64, 4),
                                         ("method", "fixed", "fixed", 64, 4),
                                         ("n", 256, "fixed", 256, 4),
                                         ("method", "local + global", "local + global", 256, 4),
                                         ("method", "full", "full", 256, 4)):
        drive(ex, ex.controls[name], value)
        mem = check_shown(ex, method, n, size)
    assert mem[-1] == MAX_TOKENS * 2 * LAYERS * HEADS * D_HEAD * 2


def test_linear_and_latent_keep_what_their_formulas_say():
    ex = beyond_explorer(method="linear", n=32)
    _, mem = ex.shown()["memory"]
    np.testing.assert_allclose(mem * 2**20, LAYERS * HEADS * (D_HEAD**2 + D_HEAD) * 2)
    full_cost, cost = ex.shown()["cost"]
    assert cost[0] > full_cost[0] and cost[-1] < full_cost[-1]  # linear wins at long n only
    assert "never built" in ex.shown()["readout"]
    drive(ex, ex.controls["method"], "latent cache (MLA)")
    assert ex.shown()["kept"] == MAX_TOKENS * LAYERS * (512 + 64) * 2


@pytest.mark.parametrize("kwargs, exc, pattern", [
    ({"method": "dense"}, ValueError, "method"),
    ({"n": 100}, ValueError, "n"),
    ({"size": 3}, ValueError, "size"),
])
def test_bad_arguments_get_a_clear_error(kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        beyond_explorer(**kwargs)
