"""The KV-cache explorer of notebook 16: what it shows against loops written here."""

import numpy as np
import pytest
from test_explorers import drive

from attn_core.explorers import kv_cache_explorer
from attn_core.explorers.kv_cache import D_HEAD, LAYERS, MAX_CTX


def loop_sharing(h, kv):
    g = h // kv
    return np.array([[i // g == j for j in range(kv)] for i in range(h)])


def loop_pattern(n, window, sinks):
    return np.array([[(1 if 0 <= i - j < window else 2 if j < sinks and j <= i else 0)
                      for j in range(n)] for i in range(n)])


def loop_bytes(tokens, heads):
    return 2 * LAYERS * heads * tokens * D_HEAD * 2  # keys and values, float16


def check_shown(ex):
    c = ex.controls
    h, kv = c["n_heads"].value, c["n_kv_heads"].value
    n, window, sinks = c["n_ctx"].value, c["window"].value, c["n_sink"].value
    shown = ex.shown()
    assert np.array_equal(shown["sharing"], loop_sharing(h, kv))
    assert np.array_equal(shown["pattern"], loop_pattern(n, window, sinks))
    assert shown["blank_beyond"]
    mha, full, rolling = shown["curves"]
    t = np.arange(1, n + 1)
    np.testing.assert_allclose(mha * 2**20, [loop_bytes(x, h) for x in t])
    np.testing.assert_allclose(full * 2**20, [loop_bytes(x, kv) for x in t])
    np.testing.assert_allclose(rolling * 2**20, [loop_bytes(min(x, window + sinks), kv)
                                                 for x in t])
    assert shown["full"] == loop_bytes(n, kv) and shown["mha"] == loop_bytes(n, h)
    assert shown["rolling"] == loop_bytes(min(n, window + sinks), kv)
    return shown


def test_every_control_changes_what_is_shown_to_what_the_loops_say():
    ex = kv_cache_explorer()
    check_shown(ex)
    c = ex.controls
    for name, value in (("n_kv_heads", 1), ("n_kv_heads", 8), ("window", 3), ("n_sink", 2),
                        ("n_ctx", MAX_CTX), ("window", MAX_CTX), ("n_ctx", 2)):
        drive(ex, c[name], value)
        check_shown(ex)
    assert "multi-head" in ex.shown()["readout"]  # 8 of 8: plain multi-head attention


def test_changing_the_query_heads_keeps_a_key_value_count_that_divides_them():
    ex = kv_cache_explorer(n_heads=8, n_kv_heads=4)
    drive(ex, ex.controls["n_heads"], 6)
    assert ex.controls["n_kv_heads"].options == (1, 2, 3, 6)
    assert ex.controls["n_kv_heads"].value == 3  # the largest divisor not above 4
    check_shown(ex)
    drive(ex, ex.controls["n_heads"], 1)
    assert ex.controls["n_kv_heads"].value == 1
    assert "multi-head" in ex.shown()["readout"]
    check_shown(ex)


@pytest.mark.parametrize("kwargs, exc, pattern", [
    ({"n_heads": 5}, ValueError, "n_heads"),
    ({"n_heads": 8, "n_kv_heads": 3}, ValueError, "n_kv_heads"),
    ({"window": 0}, ValueError, "window"),
    ({"n_ctx": MAX_CTX + 1}, ValueError, "n_ctx"),
    ({"n_sink": 1.5}, TypeError, "n_sink"),
])
def test_bad_arguments_get_a_clear_error(kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        kv_cache_explorer(**kwargs)
