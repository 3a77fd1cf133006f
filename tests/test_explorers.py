"""The explorers, driven from Python: every control across its range, and what is shown
(read back from the artists and the HTML) compared with what attn_core computes.

Each explorer is built once per module (building costs a few full draws); every change
goes through ``drive``, which fails on any recorded error and checks that the PNG the
learner receives changed whenever what is shown changed.
"""

import io
import math

import ipywidgets as W
import numpy as np
import pytest
from PIL import Image

from attn_core import examples, explorers
from attn_core.attention import MASKED_SCORE, attention, scores
from attn_core.cost import attention_flops, score_matrix_bytes, score_matrix_cells
from attn_core.explorers.base import SCALE
from attn_core.figures.head_mosaics import mosaic_labels_shown
from attn_core.flash import flash_attention_steps
from attn_core.masks import causal_mask, padding_mask, window_mask
from attn_core.multihead import multi_head_attention
from attn_core.softmax import softmax, softmax_jacobian

# The explorers' frames: make test runs these, make check leaves them out (make test-explorers).
pytestmark = pytest.mark.explorer

TABLE_ATOL = 5e-4 + 1e-12  # tables show 3 decimals


def _snapshot(value):
    """A comparable copy of whatever shown() returns (arrays -> rounded tuples)."""
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return tuple(_snapshot(v) for v in value)
    if isinstance(value, np.ndarray):
        # 3 decimals: a change smaller than that need not change a pixel
        return (value.shape, tuple(np.round(np.nan_to_num(value.astype(float), nan=-7.0,
                                                          neginf=-9.0), 3).ravel()))
    return value


# What each explorer draws in its figure (the other keys of shown() are HTML read-outs).
FIGURE_KEYS = {
    "WorkedExampleLab": ("figure_weights", "highlight"),
    "ScalingExplorer": ("spread", "max_weight", "gradient", "row"),
    "SoftmaxExplorer": ("bars",),
    "MaskExplorer": ("mask", "weights", "hatched", "beyond_blanked", "labels_faded"),
    "HeadsExplorer": ("weights", "titles", "row_labels", "col_labels"),
    "CostExplorer": ("curve", "marker", "timed_points", "time_marker_visible"),
    "TilingExplorer": ("tile", "running_max", "running_sum", "partial", "final", "scores"),
    "KVCacheExplorer": ("sharing", "pattern", "curves"),
    "BeyondExplorer": ("pattern", "cost", "memory"),
    "RecallExplorer": ("lines", "memory"),
}


def drive(explorer, widget, value):
    """Set a control as the browser would; no error; the PNG changes when the figure did."""
    before_png, before = explorer.png, _snapshot(explorer.shown())
    widget.value = value
    assert explorer.errors == []
    assert explorer.error_box.layout.display == "none"
    shown = explorer.shown()
    after = _snapshot(shown)
    keys = FIGURE_KEYS[type(explorer).__name__]
    if any(before[k] != after[k] for k in keys) and not shown.get("figure_hidden", False):
        assert explorer.png != before_png, f"{widget} = {value!r}: the image did not change"
    return shown


def _png_ok(data):
    image = Image.open(io.BytesIO(data))
    image.load()
    return image.size


# --- shared behaviour -------------------------------------------------------------------

FACTORIES = ["worked_example_lab", "scaling_explorer", "softmax_explorer", "mask_explorer",
             "heads_explorer", "cost_explorer", "tiling_explorer", "kv_cache_explorer",
             "beyond_explorer", "recall_explorer"]


@pytest.fixture(scope="module")
def built():
    return {name: getattr(explorers, name)() for name in FACTORIES}


@pytest.mark.parametrize("name", FACTORIES)
def test_each_explorer_exposes_its_parts(built, name):
    ex = built[name]
    assert ex.errors == []
    assert ex.controls and all(isinstance(w, W.Widget) for w in ex.controls.values())
    assert isinstance(ex.widget, W.Box)
    assert ex.image in ex.widget.children
    assert ex.figure is ex.canvas.figure
    w, h = _png_ok(ex.png)
    w, h = w / SCALE, h / SCALE  # drawn at SCALE device pixels per CSS pixel (HiDPI)
    assert 200 < w <= 800 and 150 < h <= 560  # small, so it encodes quickly
    # shown at its own CSS size, never stretched to the output's width
    assert ex.image.layout.width == f"{round(w)}px" and ex.image.layout.max_width == "100%"
    bundle = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert ex.shown()


@pytest.mark.parametrize("name", FACTORIES)
def test_controls_are_labelled_and_keyboard_usable(built, name):
    for key, w in built[name].controls.items():
        if isinstance(w, (W.IntSlider, W.SelectionSlider, W.FloatLogSlider)):
            assert w.continuous_update is False, key  # a drag never queues stale redraws
        is_button = isinstance(w, (W.Button, W.ToggleButton))  # the text is on the button
        if getattr(w, "description", "") and hasattr(w, "style") and not is_button:
            assert w.style.description_width == "initial", key  # label never cut off
        if isinstance(w, W.ToggleButtons):  # each button as wide as its own label
            assert w.style.button_width == "auto", key
        assert not isinstance(w, W.Output)


def test_colour_maps_are_colour_blind_safe(built):
    from matplotlib.colors import ListedColormap, to_hex

    from attn_core import figures

    seen = set()
    for ex in built.values():
        for ax in ex.figure.axes:
            for image in ax.images:
                cmap = image.cmap
                if cmap.name == "unnamed":  # mask_grid: grey vs Okabe-Ito blue (kv_cache: + orange)
                    assert isinstance(cmap, ListedColormap)
                    assert {to_hex(c) for c in cmap.colors} - {to_hex(figures.SINK_COLOR)} == {
                        to_hex(figures.MASKED_FACE_COLOR), to_hex(figures.ALLOWED_COLOR)}
                elif cmap.name == "allowed_share":  # beyond_quadratic: grey to the same blue
                    assert [to_hex(cmap(x)) for x in (0.0, 1.0)] == [
                        to_hex(figures.MASKED_FACE_COLOR), to_hex(figures.ALLOWED_COLOR)]
                else:
                    seen.add(cmap.name.removesuffix("_r"))
    assert seen <= {"viridis", "cividis"}, seen


def test_an_error_in_an_update_is_recorded_shown_and_raised(monkeypatch):
    ex = explorers.softmax_explorer()

    def broken(*args, **kwargs):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(explorers.softmax, "softmax", broken)
    with pytest.raises(RuntimeError, match="injected failure"):
        ex.controls["temperature"].value = 2.0
    assert len(ex.errors) == 1 and isinstance(ex.errors[0], RuntimeError)
    assert ex.error_box.layout.display != "none"
    assert "injected failure" in ex.error_box.value
    monkeypatch.undo()
    ex.controls["temperature"].value = 3.0  # the next good update clears the box
    assert ex.error_box.layout.display == "none"


def test_an_error_from_a_button_is_surfaced_too(monkeypatch):
    lab = explorers.worked_example_lab()
    lab.controls["predict"].value = True
    monkeypatch.setattr(explorers.worked_example, "attention", lambda *a, **k: 1 / 0)
    lab.controls["reveal"].click()  # ipywidgets swallows a click handler's exception ...
    assert lab.errors and "ZeroDivisionError" in lab.error_box.value  # ... we show it


# --- 1. worked example ----------------------------------------------------------------------


def _check_lab(lab):
    shown = lab.shown()
    q, k, v = (shown["inputs"][n] for n in "QKV")
    out, weights = attention(q, k, v)
    expected = {"scores": scores(q, k, scale=1.0), "scaled": scores(q, k), "weights": weights,
                "output": out}
    for name, m in expected.items():
        table = shown[name]
        known = ~np.isnan(table)
        np.testing.assert_allclose(table[known], m[known], atol=TABLE_ATOL, rtol=0)
    np.testing.assert_allclose(shown["figure_weights"], weights, rtol=0, atol=1e-12)
    return shown, expected


def test_worked_lab_starts_from_the_articles_inputs(built):
    shown = built["worked_example_lab"].shown()
    for name, m in (("Q", examples.Q), ("K", examples.K), ("V", examples.V)):
        np.testing.assert_array_equal(shown["inputs"][name], m)


def test_worked_lab_every_input_cell_updates_every_intermediate(built):
    lab = built["worked_example_lab"]
    for box in [w for k, w in lab.controls.items() if "[" in k]:
        original = box.value
        for value in (box.min, round(original + 1.3, 2)):
            drive(lab, box, value)
            _check_lab(lab)
        drive(lab, box, original)
    _check_lab(lab)


def test_worked_lab_explains_every_cell_of_every_matrix(built):
    lab = built["worked_example_lab"]
    c = lab.controls
    drive(lab, c["predict"], False)
    for matrix in ("scores", "scaled", "weights", "output"):
        drive(lab, c["matrix"], matrix)
        cols = [o[1] for o in c["col"].options]
        assert cols == list(range(2 if matrix == "output" else 4))
        for i in range(4):
            drive(lab, c["row"], i)
            for j in cols:
                drive(lab, c["col"], j)
                shown, expected = _check_lab(lab)
                text = shown["arithmetic"]
                assert text.startswith(f"{matrix}[{i},{j}] = ")
                assert text.endswith(f"= {expected[matrix][i, j]:.3f}")
                if matrix == "scores":
                    q, k = shown["inputs"]["Q"], shown["inputs"]["K"]
                    assert f"{q[i, 0]:.2f}×" in text and f"{k[j, 1]:.2f}" in text
                highlighted = [(i, jj) for jj in range(4)] if matrix == "output" else [(i, j)]
                assert shown["highlight"] == highlighted
                table = shown[matrix]
                assert not np.isnan(table).any()


def test_worked_lab_predict_first_hides_until_revealed(built):
    lab = built["worked_example_lab"]
    c = lab.controls
    drive(lab, c["matrix"], "weights")
    drive(lab, c["row"], 1)
    drive(lab, c["col"], 2)
    drive(lab, c["predict"], True)
    shown = lab.shown()
    assert np.isnan(shown["weights"][1, 2]) and np.isnan(shown["weights"]).sum() == 1
    assert shown["arithmetic"].endswith("= ?") and shown["figure_hidden"]
    assert not c["reveal"].disabled
    c["reveal"].click()
    shown, expected = _check_lab(lab)
    assert not np.isnan(shown["weights"]).any() and not shown["figure_hidden"]
    assert shown["arithmetic"].endswith(f"{expected['weights'][1, 2]:.3f}")
    drive(lab, c["col"], 3)  # a new question hides again
    assert np.isnan(lab.shown()["weights"][1, 3])
    drive(lab, c["predict"], False)
    assert not lab.shown()["figure_hidden"]


# --- 2. scaling ---------------------------------------------------------------------------


def test_scaling_every_d_k_both_ways(built):
    ex = built["scaling_explorer"]
    c = ex.controls
    assert list(c["d_k"].options) == [2 ** p for p in range(11)]
    for scaled in (True, False):
        drive(ex, c["scaled"], scaled)
        for d_k in c["d_k"].options:
            shown = drive(ex, c["d_k"], d_k)
            q, k, _ = examples.random_qkv(ex.n, d_k, seed=examples.SEED)
            s = scores(q, k, scale=None if scaled else 1.0)
            row = softmax(s[0])
            np.testing.assert_allclose(shown["row"], row, rtol=0, atol=1e-12)
            expected = {"spread": s.std(), "max_weight": row.max(),
                        "gradient": np.linalg.norm(softmax_jacobian(row))}
            for name, value in expected.items():
                assert shown[name]["marker"][0] == d_k
                assert shown[name]["marker"][1] == pytest.approx(value, rel=1e-12, abs=1e-300)
                index = list(c["d_k"].options).index(d_k)
                assert shown[name]["y"][index] == pytest.approx(value, rel=1e-12, abs=1e-300)
            assert f"d_k = {d_k} " in shown["readout"]
    # the lesson itself: unscaled, the spread grows like sqrt(d_k); scaled, it stays ~1
    drive(ex, c["scaled"], False)
    spread = ex.shown()["spread"]["y"]
    assert spread[-1] / spread[0] > 10
    drive(ex, c["scaled"], True)
    assert 0.5 < ex.shown()["spread"]["y"][-1] < 2


# --- 3. softmax ---------------------------------------------------------------------------


def test_softmax_temperature_and_scores(built):
    ex = built["softmax_explorer"]
    c = ex.controls
    temps = np.logspace(c["temperature"].min, c["temperature"].max, 9)
    for t in temps:
        shown = drive(ex, c["temperature"], float(t))
        row = np.array([c[f"score {i}"].value for i in range(ex.n)])
        expected = softmax(row / c["temperature"].value)
        np.testing.assert_allclose(shown["bars"], expected, rtol=0, atol=1e-12)
        np.testing.assert_allclose(shown["weights"], expected, atol=TABLE_ATOL, rtol=0)
        assert shown["sum"] == pytest.approx(1.0, abs=1e-6)
        assert shown["sum_text"] == "row sum = 1.00"
    for i in range(ex.n):
        box = c[f"score {i}"]
        for value in (box.min, -1.5, 0.0, 7.25, box.max):
            shown = drive(ex, box, value)
            row = np.array([c[f"score {j}"].value for j in range(ex.n)])
            np.testing.assert_allclose(shown["bars"], softmax(row / c["temperature"].value),
                                       rtol=0, atol=1e-12)
            assert shown["sum"] == pytest.approx(1.0, abs=1e-6)


# --- 4. masks -----------------------------------------------------------------------------


def _expected_mask(ex):
    c = ex.controls
    n, kind = c["n"].value, c["kind"].value
    return {"none": lambda: np.ones((n, n), bool), "causal": lambda: causal_mask(n),
            "padding": lambda: np.broadcast_to(padding_mask(c["length"].value, n), (n, n)),
            "sliding window": lambda: window_mask(n, c["window"].value),
            "custom": lambda: np.array([[b.value for b in r] for r in ex.cell_buttons])}[kind]()


def _check_mask(ex):
    c = ex.controls
    shown = ex.shown()
    n = c["n"].value
    mask = _expected_mask(ex)
    q, k, v = (a[:n] for a in examples.random_qkv(10, 4, seed=examples.SEED))
    if c["apply"].value == "before":
        _, weights = attention(q, k, v, mask=None if c["kind"].value == "none" else mask)
    else:
        weights = np.where(mask, attention(q, k, v)[1], 0.0)
    np.testing.assert_array_equal(shown["mask"], mask)
    np.testing.assert_allclose(shown["weights"], weights, rtol=0, atol=1e-12)
    beyond = n < ex.MAX_N  # the cells of later tokens are blanked, their labels faded
    for blank in shown["beyond_blanked"]:
        assert blank == ((-0.5, -0.5, ex.MAX_N, ex.MAX_N) if beyond else False)
    assert shown["labels_faded"] == [(beyond, beyond)] * 2
    np.testing.assert_allclose(shown["weights_table"], weights, rtol=0, atol=TABLE_ATOL)
    np.testing.assert_allclose(shown["row_sums"], weights.sum(-1), rtol=0, atol=TABLE_ATOL)
    return shown


def test_mask_every_length_every_kind_both_ways(built):
    ex = built["mask_explorer"]
    c = ex.controls
    draws = ex.canvas.full_draws
    for n in [*range(1, 11), *range(9, 0, -1)]:
        drive(ex, c["n"], n)
        assert c["length"].max == n and c["window"].max == n  # beyond n cannot be chosen
        _check_mask(ex)
    assert ex.canvas.full_draws == draws  # a new n never redraws the whole figure
    for n in (3, 10):
        drive(ex, c["n"], n)
        for kind in explorers.masks.MASK_KINDS:
            drive(ex, c["kind"], kind)
            for apply in ("after", "before"):
                shown = drive(ex, c["apply"], apply)
                _check_mask(ex)
                if apply == "before" and kind != "padding":
                    np.testing.assert_allclose(shown["row_sums"], 1.0, atol=TABLE_ATOL)
    drive(ex, c["kind"], "causal")
    drive(ex, c["apply"], "after")
    assert (_check_mask(ex)["row_sums"][:-1] < 1 - 1e-3).all()  # zeroing after: rows < 1
    drive(ex, c["apply"], "before")


def test_mask_padding_length_and_window_across_their_range(built):
    ex = built["mask_explorer"]
    c = ex.controls
    drive(ex, c["n"], 10)
    drive(ex, c["kind"], "padding")
    assert c["length"].layout.display == "" and c["window"].layout.display == "none"
    for length in range(c["length"].min, c["length"].max + 1):
        shown = drive(ex, c["length"], length)
        _check_mask(ex)
        expected_sum = 1.0 if length > 0 else 0.0  # nothing to attend to: an all-zero row
        np.testing.assert_allclose(shown["row_sums"], expected_sum, atol=TABLE_ATOL)
    drive(ex, c["kind"], "sliding window")
    for window in range(c["window"].min, c["window"].max + 1):
        drive(ex, c["window"], window)
        _check_mask(ex)


def test_mask_custom_cells_toggle_one_by_one(built):
    ex = built["mask_explorer"]
    c = ex.controls
    drive(ex, c["n"], 4)
    drive(ex, c["kind"], "custom")
    assert ex.cell_buttons.shape == (4, 4) and c["custom"].layout.display == ""
    for (i, j), button in np.ndenumerate(ex.cell_buttons):
        if (i + j) % 2:
            drive(ex, button, False)
            assert button.description == "✗"
            _check_mask(ex)
    drive(ex, c["n"], 5)  # a new length: a new grid, all allowed
    assert ex.cell_buttons.shape == (5, 5)
    _check_mask(ex)


def test_mask_maths_refuses_invalid_padding():
    with pytest.raises(ValueError, match="between 0 and n"):
        padding_mask(5, 4)


# --- 5. heads -----------------------------------------------------------------------------


def test_heads_every_d_model_every_offered_head_count(built):
    ex = built["heads_explorer"]
    c = ex.controls
    draws = ex.canvas.full_draws
    tokens = list(examples.TOKENS)
    for d_model in explorers.heads.D_MODELS:
        drive(ex, c["d_model"], d_model)
        options = list(c["h"].options)
        assert options == [h for h in range(1, 17) if d_model % h == 0]
        for h in options:
            shown = drive(ex, c["h"], h)
            _, weights = multi_head_attention(*ex.params(d_model), h=h)
            np.testing.assert_allclose(shown["weights"], weights, rtol=0, atol=1e-12)
            assert shown["titles"] == [f"head {k + 1}" for k in range(h)]
            layout = ex.mosaic.layout
            assert layout.heads == h and layout.nrows * layout.ncols >= h
            if mosaic_labels_shown(layout):
                assert shown["row_labels"] == tokens * layout.nrows  # left of each map row
                assert shown["col_labels"] == tokens * layout.ncols  # under each map column
            else:  # cells too small for readable labels: the caption says so
                assert shown["row_labels"] == shown["col_labels"] == []
                assert "token labels left out" in ex.mosaic.caption.get_text()
            assert shown["d_k"] == d_model // h
            flops = attention_flops(len(examples.TOKENS), d_model, h)
            assert shown["flops"] == {key: float(value) for key, value in flops.items()}
        products = ex.shown()["flops_table"][:, 2]
        assert (products == products[0]).all()  # Q K^T costs the same for every h
    assert ex.canvas.full_draws == draws  # every layout was drawn when the explorer was built
    assert len(ex.figure.axes) == 2  # the maps' axes and the colour bar: never rebuilt


def test_heads_params_are_seeded(built):
    ex = built["heads_explorer"]
    g = examples.rng(examples.SEED)
    x = g.standard_normal((10, 8))
    np.testing.assert_array_equal(ex.params(8)[0], x)


def test_heads_maths_refuses_a_non_divisor():
    x = np.zeros((3, 12))
    w = np.zeros((12, 12))
    with pytest.raises(ValueError, match="divisible"):
        multi_head_attention(x, w, w, w, w, h=5)
    with pytest.raises(ValueError, match="divisible"):
        attention_flops(10, 12, 5)


# --- 6. cost ------------------------------------------------------------------------------


def test_cost_every_length_every_dtype(built):
    ex = built["cost_explorer"]
    c = ex.controls
    for dtype in c["dtype"].options:
        drive(ex, c["dtype"], dtype)
        for n in c["n"].options:
            shown = drive(ex, c["n"], n)
            assert shown["n"] == n
            assert shown["cells"] == score_matrix_cells(n)
            assert shown["bytes"] == score_matrix_bytes(n, dtype=dtype)
            assert shown["marker"] == (n, score_matrix_bytes(n, dtype=dtype))
            np.testing.assert_array_equal(
                shown["curve"][1], [score_matrix_bytes(m, dtype=dtype) for m in c["n"].options])
            timed = dtype in explorers.cost.TIMED_DTYPES and n <= explorers.cost.TIME_MAX_N
            assert shown["time_marker_visible"] == timed
            if timed:
                assert "ms per attention call" in shown["readout"]
                assert (n, dtype) in ex.times
            elif dtype in explorers.cost.TIMED_DTYPES:
                assert "too large to time" in shown["readout"]
            else:
                assert "not timed" in shown["readout"]
    slope = np.polyfit(np.log(shown["curve"][0]), np.log(shown["curve"][1]), 1)[0]
    assert slope == pytest.approx(2.0)


def test_cost_measures_each_size_once(built, monkeypatch):
    ex = built["cost_explorer"]
    calls = []
    monkeypatch.setattr(explorers.cost, "interleaved_times",
                        lambda *a, **k: calls.append(a) or ({}, {}))
    c = ex.controls
    drive(ex, c["dtype"], "float32")
    for n in (16, 32, 16, 32):
        drive(ex, c["n"], n)
    assert calls == []  # measured already above: cached


# --- 7. tiling ----------------------------------------------------------------------------


def test_tiling_every_block_every_step(built):
    ex = built["tiling_explorer"]
    c = ex.controls
    n = len(examples.TOKENS)
    q, k, v = examples.random_qkv(n, 4, 2, seed=examples.SEED)
    for causal in (False, True):
        drive(ex, c["causal"], causal)
        mask = causal_mask(n) if causal else None
        final, _ = attention(q, k, v, mask=mask)
        for block in c["block"].options:
            drive(ex, c["block"], block)
            steps = flash_attention_steps(q, k, v, block_size=block, causal=causal)
            assert c["step"].max == len(steps) - 1
            # every step, or for 1 x 1 tiles (100 of them) every 4th and the last
            every_4th = [*range(0, len(steps), 4), len(steps) - 1]
            sample = range(len(steps)) if block >= 2 else every_4th
            for index in sample:
                shown = drive(ex, c["step"], index)
                st = steps[index]
                tile = ((st.rows.start, st.rows.stop), (st.cols.start, st.cols.stop))
                assert shown["tile"] == tile
                np.testing.assert_array_equal(shown["running_max"], st.running_max)
                np.testing.assert_allclose(shown["running_sum"], st.running_sum, rtol=0, atol=1e-12)
                np.testing.assert_allclose(shown["partial"], st.partial_output, rtol=0, atol=1e-12)
                np.testing.assert_allclose(shown["final"], final, rtol=0, atol=1e-12)
                assert shown["tile_elements"] == st.tile_elements
                assert shown["full_elements"] == n * n
                np.testing.assert_allclose(shown["table"][:, 2:4], st.partial_output,
                                           atol=TABLE_ATOL, rtol=0)
            np.testing.assert_allclose(shown["partial"], final, rtol=0, atol=1e-12)  # last step
    s = scores(q, k)
    np.testing.assert_array_equal(ex.shown()["scores"], np.where(causal_mask(n), s, MASKED_SCORE)
                                  if c["causal"].value else s)
    assert ex.canvas.full_draws == 2  # one background per causal setting, nothing more


def test_read_tables_round_trip():
    html = explorers.base._table("m", [[1.0, -math.inf], [0.5, 2.0]], hidden={(1, 1)})
    np.testing.assert_array_equal(explorers.read_tables(html)["m"],
                                  [[1.0, -math.inf], [0.5, np.nan]])


def test_png_is_encoded_by_pillow_and_shows_the_canvas(built):
    """The PNG is Pillow's, and its pixels are exactly the Agg canvas' (opaque: alpha 255)."""
    ex = built["softmax_explorer"]
    ex.controls["temperature"].value = 0.5
    image = Image.open(io.BytesIO(ex.png))
    assert image.format == "PNG" and image.mode == "RGBA"
    canvas = np.asarray(ex.figure.canvas.buffer_rgba())
    assert (canvas[..., 3] == 255).all()
    np.testing.assert_array_equal(np.asarray(image), canvas)
    encoder = explorers.base.__dict__  # the module that encodes the PNG: no hand encoder
    assert "struct" not in encoder and "zlib" not in encoder
