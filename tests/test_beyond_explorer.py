"""The beyond-the-quadratic explorer of notebook 18: what it shows against loops written here."""

import numpy as np
import pytest
from test_explorers import drive

from attn_core.explorers import beyond_explorer
from attn_core.explorers.beyond_quadratic import D_HEAD, HEADS, LAYERS, MAX_TOKENS, NS

# The explorers' frames: make test runs these, make check leaves them out (make test-explorers).
pytestmark = pytest.mark.explorer


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


def _hops_by_hand(mask):
    """Layers for token 1's information to reach the last token (0: more than 64), a loop."""
    reached = np.zeros(len(mask), dtype=bool)
    reached[1] = True
    for layer in range(1, 65):
        reached = reached | (mask & reached[None, :]).any(axis=1)
        if reached[-1]:
            return layer
    return 0


def test_the_readout_numbers_follow_every_control_change():
    """Issue 33: every method, both ends of n and of the size; after each change the pattern,
    its cells, the FLOPs ratio, the hops, the bytes kept and the curves are those of the
    controls' values now (a read-out one change behind fails here)."""
    from attn_core.explorers.beyond_quadratic import D_C, D_MODEL, D_ROPE, HORIZON, METHODS, SIZES
    ex = beyond_explorer(method="full", n=64, size=8)
    c = ex.controls
    moves = ([("method", m) for m in METHODS if m != "BigBird"]
             + [("n", NS[0]), ("size", SIZES[0]), ("method", "sliding window"),
                ("size", SIZES[-1]), ("method", "strided"), ("n", 128), ("size", SIZES[0]),
                ("method", "fixed"), ("method", "local + global"), ("n", NS[0]),
                ("method", "linear"), ("n", NS[-1]), ("n", 32), ("method", "latent cache (MLA)"),
                ("method", "full")])
    per_token = 2 * LAYERS * HEADS * D_HEAD * 2  # keys and values of every head, float16
    for name, value in moves:
        drive(ex, c[name], value)
        method, n, size = c["method"].value, c["n"].value, c["size"].value
        shown, where = ex.shown(), (name, value, method, n, size)
        if method != "linear":  # the pattern, cells, cost and full cache against the loops
            check_shown(ex, method, n, size)
        mem = shown["memory"][1] * 2**20
        dense = method in ("full", "linear", "latent cache (MLA)")
        mask = None if dense else np.array([[loop_allowed(method, i, j, size) for j in range(n)]
                                            for i in range(n)])
        full = 4 * (n * (n + 1) // 2) * D_MODEL + 5 * HEADS * (n * (n + 1) // 2)
        if method == "linear":
            ratio = n * D_MODEL * (6 + 4 * D_HEAD) / full
        else:
            ratio = 1.0 if dense else mask.sum() / (n * (n + 1) / 2)
        assert f"FLOPs {ratio:.3f} of full attention's" in shown["readout"], where
        full_cost, cost = shown["cost"]
        assert cost[NS.index(n)] == pytest.approx(full_cost[NS.index(n)] * ratio), where
        assert full_cost[NS.index(n)] == full, where
        hops = 1 if dense else _hops_by_hand(mask)
        assert shown["hops"] == hops, where
        t = MAX_TOKENS - 1  # after the last token: keys some query from t on still reads
        if method == "linear":
            kept = LAYERS * HEADS * (D_HEAD**2 + D_HEAD) * 2
        elif method == "latent cache (MLA)":
            kept = MAX_TOKENS * LAYERS * (D_C + D_ROPE) * 2
        elif method == "full":
            kept = MAX_TOKENS * per_token
        else:
            kept = per_token * sum(any(loop_allowed(method, i, j, size)
                                       for i in range(t, MAX_TOKENS + HORIZON))
                                   for j in range(t + 1))
        assert shown["kept"] == kept == round(mem[-1]), where
        assert f"{method}, n = {n}:" in shown["readout"], where


def test_in_a_kernel_every_states_curves_are_computed_in_a_thread(monkeypatch):
    """In a kernel the explorer computes every method's and size's curves in a thread after
    it is shown (a first visit then finds them ready); elsewhere it starts no thread."""
    import threading

    from attn_core.explorers import beyond_quadratic as bq

    bq.cost_curve.cache_clear()
    bq.memory_curve.cache_clear()
    bq.beyond_explorer()
    assert not [t for t in threading.enumerate() if t.name == "beyond-curves"]
    monkeypatch.setattr(bq, "_in_kernel", lambda: True)
    bq.beyond_explorer(method="fixed")
    for t in [t for t in threading.enumerate() if t.name == "beyond-curves"]:
        t.join(60)
    every = len(bq.METHODS) * len(bq.SIZES)
    assert bq.memory_curve.cache_info().currsize == every
    assert bq.cost_curve.cache_info().currsize == every
    ours = bq.memory_curve("fixed", 8)
    bq.memory_curve.cache_clear()
    for a, b in zip(ours, bq.memory_curve("fixed", 8)):
        np.testing.assert_array_equal(a, b)


def test_the_size_slider_is_off_for_the_methods_it_does_not_change():
    """Issue 47: full attention, linear attention and the latent cache have no window,
    stride or block; the slider is disabled for them, and the read-out says why."""
    from attn_core.explorers.beyond_quadratic import METHODS
    ex = beyond_explorer(method="strided", n=64, size=8)
    c = ex.controls
    for method in METHODS + ("sliding window",):
        drive(ex, c["method"], method)
        sizeless = method in ("full", "linear", "latent cache (MLA)")
        assert c["size"].disabled is sizeless, method
        assert ("this method has none" in ex.shown()["readout"]) is sizeless, method


def test_the_docstring_gives_the_sliders_range_of_n():
    import re

    text = " ".join(beyond_explorer.__doc__.split())
    low, high = (int(x.replace(",", "")) for x in
                 re.search(r'"n"``\s*\((\S+) to (\S+?):', text).groups())
    assert (low, high) == (NS[0], NS[-1])


def test_a_new_length_redraws_only_the_pattern_and_its_position_labels():
    """Issue 47: the labels 0, n/2 and n are texts drawn with the image, so a new n never
    redraws the whole figure (one background for every state), and each frame equals the
    frame of an explorer built at that length (a fresh full draw)."""
    ex = beyond_explorer(method="sliding window", n=64, size=8)
    for n in (16, 1024, 128, 256):
        ex.controls["n"].value = n
        labels = [t.get_text() for t in ex.art.positions]
        assert labels == ["0", str(n // 2), str(n)] * 2
        fresh = beyond_explorer(method="sliding window", n=n, size=8)
        assert np.array_equal(pixels(ex.png), pixels(fresh.png)), n
    assert ex.canvas.full_draws == 1
    # the axes' own tick labels are transparent placeholders that hold the room
    assert all(t.get_color() == "none" for t in ex.art.axes[0].get_xticklabels())


def pixels(png):
    import io

    from PIL import Image
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
