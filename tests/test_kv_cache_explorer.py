"""The KV-cache explorer of notebook 16: what it shows against loops written here."""

import numpy as np
import pytest
from test_explorers import drive

from attn_core.explorers import kv_cache_explorer
from attn_core.explorers.kv_cache import D_HEAD, LAYERS, MAX_CTX

from reference import assert_same_frames

# The explorers' frames: make test runs these, make check leaves them out (make test-explorers).
pytestmark = pytest.mark.explorer


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


@pytest.mark.parametrize("h, kv, sinks, words, wrong", [
    (1, 1, 1, ["single-head", "1 query head,", "1 key/value head;", "+ 1 sink)"],
     ["multi-head:", "query heads", "key/value heads", "1 sinks"]),
    (8, 8, 0, ["multi-head", "8 query heads", "8 key/value heads", "+ 0 sinks"], []),
    (8, 1, 4, ["multi-query", "1 key/value head;", "+ 4 sinks"], ["1 key/value heads"]),
    (4, 2, 2, ["grouped-query (2 query heads per key/value head)"], []),
])
def test_the_readout_names_the_attention_and_counts_in_good_english(h, kv, sinks, words, wrong):
    """Issue 31: "1 query heads", "+ 1 sinks", and one query head with one key/value head
    called multi-head."""
    ex = kv_cache_explorer(n_heads=h, n_kv_heads=kv, n_sink=sinks)
    text = ex.shown()["readout"]
    assert all(w in text for w in words), text
    assert not any(w in text for w in wrong), text


def _line_pixels(ex, line):
    """How many pixels of ``line``'s colour the light frame shows inside the memory panel,
    its frame and its legend left out."""
    import io

    from matplotlib.colors import to_rgb
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(ex.png)).convert("RGB")).astype(int)
    height = rgb.shape[0]
    inside = np.zeros(rgb.shape[:2], dtype=bool)
    mem = ex.art.axes[2]
    box = mem.get_window_extent()
    inside[height - int(box.y1) + 4:height - int(box.y0) - 4, int(box.x0) + 4:int(box.x1) - 4] = 1
    legend = mem.get_legend().get_window_extent()
    inside[height - int(legend.y1) - 2:height - int(legend.y0) + 2,
           int(legend.x0) - 2:int(legend.x1) + 2] = 0
    want = np.round(np.array(to_rgb(line.get_color())) * 255).astype(int)
    return int(((np.abs(rgb - want).sum(axis=-1) <= 6) & inside).sum())


@pytest.mark.parametrize("kv, window", [(8, 24), (8, 6), (2, 24)])
def test_every_curve_in_the_legend_stays_visible_when_curves_coincide(kv, window):
    """With equal head counts (and a window as long as the context) the three memory curves
    are the same numbers: each must still show, or the legend names a line nobody sees."""
    ex = kv_cache_explorer(n_heads=8, n_kv_heads=kv, window=window, n_ctx=24)
    for line in ex.art.lines:
        assert _line_pixels(ex, line) > 100, line.get_label()


def test_the_readout_numbers_follow_every_control_change():
    """Issue 33: each control in turn through its ends and a middle value; after every change
    the maps, the three curves, the bytes at the context length and the GiB / MiB at 32,768
    tokens, the window, sinks and head counts of the read-out are those of the controls' values
    now, counted by hand (a read-out one change behind fails here)."""
    ex = kv_cache_explorer()
    c = ex.controls
    moves = ([("n_heads", h) for h in (16, 1, 6, 12)] + [("n_kv_heads", kv) for kv in (1, 12, 4)]
             + [("window", w) for w in (1, MAX_CTX, 5)] + [("n_sink", s) for s in (4, 0, 1)]
             + [("n_ctx", n) for n in (2, MAX_CTX, 9)] + [("n_heads", 2), ("window", 2)])
    for name, value in moves:
        drive(ex, c[name], value)
        h, kv = c["n_heads"].value, c["n_kv_heads"].value
        n, window, sinks = c["n_ctx"].value, c["window"].value, c["n_sink"].value
        assert h % kv == 0 and (name != "n_kv_heads" or kv == value)
        text = check_shown(ex)["readout"]
        gib, mib = 2**30, 2**20
        numbers = (f"at 32,768 tokens: multi-head {loop_bytes(32768, h) / gib:.2f} GiB, "
                   f"this model {loop_bytes(32768, kv) / gib:.2f} GiB, rolling "
                   f"{loop_bytes(min(32768, window + sinks), kv) / mib:.1f} MiB")
        assert numbers in text, (name, value, text)
        assert f"after {n} tokens:" in text, (name, value, text)
        assert f"(window {window} + {sinks} sink" in text, (name, value, text)
        assert f"{h} query head" in text and f"{kv} key/value head" in text, (name, value)


def test_after_changes_the_frames_are_a_fresh_explorers_at_that_state():
    ex = kv_cache_explorer()
    c = ex.controls
    for name, value in [("n_ctx", 24), ("window", 3), ("n_sink", 2), ("n_heads", 12),
                        ("n_kv_heads", 4), ("n_ctx", 20), ("window", 9)]:
        c[name].value = value
    fresh = kv_cache_explorer(n_heads=12, n_kv_heads=4, window=9, n_sink=2, n_ctx=20)
    assert ex.errors == []
    assert_same_frames(ex, fresh)
