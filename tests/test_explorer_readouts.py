"""What each explorer shows after every control change, read from the PNG and the read-out.

tests/test_explorers.py compares the artists' data (``shown()``) with the maths. Here the
pixels of the PNG the learner receives are compared too, so that an overlay that is updated
but not drawn (a tile outline, a veil, a highlight, hatching) fails, and every number of the
read-outs is compared with the maths recomputed for the controls' *current* values, so that
a read-out one step behind the picture fails. Colours are expected from the artist's colour
map applied to the value recomputed here, not to the value the artist holds.
"""

import io
import re

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from PIL import Image

from attn_core import examples, explorers, figures
from attn_core.attention import attention, scores
from attn_core.cost import attention_flops, score_matrix_bytes
from attn_core.explorers.base import _text_of
from attn_core.flash import flash_attention_steps
from attn_core.masks import causal_mask, padding_mask, window_mask
from attn_core.softmax import softmax, softmax_jacobian
from attn_core.training import running_mean, scaling_runs

# The explorers' frames: make test runs these, make check leaves them out (make test-explorers).
pytestmark = pytest.mark.explorer

TABLE_ATOL = 5e-4 + 1e-12  # tables show 3 decimals
COLOUR_TOL = 3  # of 255: antialiasing inside a cell is nil; a veil or an outline is far more
EDGE = np.array(to_rgb(figures.HIGHLIGHT_EDGE_COLOR)) * 255


def pixels(ex):
    """The PNG the learner receives, as an (h, w, 3) int array."""
    return np.asarray(Image.open(io.BytesIO(ex.png)).convert("RGB")).astype(int)


def _at(im, ax, x, y):
    """(row, col) of the PNG pixel at data point (x, y) of ``ax``."""
    px, py = ax.transData.transform((x, y))
    return int(round(im.shape[0] - py)), int(round(px))


def cell(im, ax, i, j, r=3):
    """The (2r+1)^2 pixels at the centre of cell (row i, column j) of an image in ``ax``."""
    row, col = _at(im, ax, j, i)
    return im[row - r:row + r + 1, col - r:col + r + 1].reshape(-1, 3)


def colour_of(image_artist, value):
    """The RGB (0-255) that ``image_artist``'s colour map gives ``value``."""
    return np.array(image_artist.to_rgba(np.array([[value]]))[0, 0, :3]) * 255


def shows(im, art, i, j, value):
    """True if cell (i, j) of the heatmap ``art`` is painted plainly in the colour of value."""
    return np.abs(cell(im, art.axes, i, j) - colour_of(art, value)).max() <= COLOUR_TOL


def outline_on_left_edge(im, ax, rows, col_edge, fraction=0.3):
    """True if at least ``fraction`` of the pixels down the edge x = col_edge show the outline."""
    top, left = _at(im, ax, col_edge, rows[0] - 0.5)
    bottom, _ = _at(im, ax, col_edge, rows[1] - 0.5)
    strip = im[min(top, bottom) + 3:max(top, bottom) - 3, left - 1:left + 2]
    close = np.abs(strip - EDGE).max(axis=-1) <= 40
    return close.any(axis=1).mean() >= fraction


def _numbers(text):
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", text.replace(",", ""))]


# --- tiling: the tile outline, the veil over tiles not yet visited, the read-out ---------------

TILING_CASES = [(block, causal) for block in (2, 3, 4, 5, 10) for causal in (False, True)]


@pytest.fixture(scope="module")
def tiling():
    return explorers.tiling_explorer()


@pytest.mark.parametrize(("block", "causal"), TILING_CASES)
def test_tiling_outline_veil_and_readout_follow_every_step(tiling, block, causal):
    ex, c = tiling, tiling.controls
    c["causal"].value, c["block"].value = causal, block
    n = len(examples.TOKENS)
    q, k, v = examples.random_qkv(n, 4, 2, seed=examples.SEED)
    steps = flash_attention_steps(q, k, v, block_size=block, causal=causal)
    s = scores(q, k)
    final, _ = attention(q, k, v, mask=causal_mask(n) if causal else None)
    assert c["step"].value == 0 and c["step"].max == len(steps) - 1
    for index in range(len(steps)):
        c["step"].value = index
        assert ex.errors == []
        st, im = steps[index], pixels(ex)
        ax = ex.score_map.ax
        done = np.zeros((n, n), dtype=bool)
        for earlier in steps[:index + 1]:
            done[earlier.rows, earlier.cols] = True
        for i in range(n):
            for j in range(n):
                if causal and j > i:
                    continue  # masked: drawn in the colour of -inf, veiled or not
                on_edge = (i in (st.rows.start, st.rows.stop - 1)
                           or j in (st.cols.start, st.cols.stop - 1))
                if on_edge and st.rows.start <= i < st.rows.stop and \
                        st.cols.start <= j < st.cols.stop and block == 1:
                    continue
                assert shows(im, ex.score_map.image, i, j, s[i, j]) == done[i, j], \
                    f"step {index}: cell ({i}, {j}) {'plain' if done[i, j] else 'veiled'}?"
        assert outline_on_left_edge(im, ax, (st.rows.start, st.rows.stop), st.cols.start - 0.5)
        text = _text_of(ex.readout.value)
        head = re.match(r"tile (\d+) of (\d+): rows (\d+)–(\d+), keys (\d+)–(\d+), (\w+)", text)
        assert head, text
        assert [int(g) for g in head.groups()[:6]] == [
            index + 1, len(steps), st.rows.start + 1, st.rows.stop, st.cols.start + 1,
            st.cols.stop]
        assert head.group(7) == ("skipped" if st.skipped else "computed")
        assert f"({100 * st.tile_elements / (n * n):.0f}%)" in text
        table = explorers.read_tables(ex.readout.value)["rows"]
        np.testing.assert_array_equal(table[:, 0] == -np.inf, st.running_max == -np.inf)
        finite = np.isfinite(st.running_max)
        np.testing.assert_allclose(table[finite, 0], st.running_max[finite], atol=TABLE_ATOL)
        np.testing.assert_allclose(table[:, 1], st.running_sum, atol=TABLE_ATOL, rtol=0)
        np.testing.assert_allclose(table[:, 2:4], st.partial_output, atol=TABLE_ATOL, rtol=0)
        np.testing.assert_allclose(table[:, 4:6], final, atol=TABLE_ATOL, rtol=0)
        for i in range(n):  # the running state's columns are drawn from this step's numbers
            assert shows(im, ex.l_map.image, i, 0, st.running_sum[i])
            for d in range(2):
                assert shows(im, ex.partial_map.image, i, d, st.partial_output[i, d])


# --- masks: the mask's cells, the weights' cells and the hatching of masked ones ---------------

def _mask(kind, n, length, window):
    return {"none": np.ones((n, n), bool), "causal": causal_mask(n),
            "padding": np.broadcast_to(padding_mask(length, n), (n, n)),
            "sliding window": window_mask(n, window)}[kind]


@pytest.fixture(scope="module")
def masks():
    return explorers.mask_explorer()


@pytest.mark.parametrize("n", [10, 4, 1])
@pytest.mark.parametrize("kind", ["none", "causal", "padding", "sliding window"])
@pytest.mark.parametrize("apply", ["before", "after"])
def test_mask_cells_and_weights_are_drawn_as_the_maths_says(masks, n, kind, apply):
    ex, c = masks, masks.controls
    c["n"].value, c["kind"].value, c["apply"].value = n, kind, apply
    for length, window in ((c["length"].value, c["window"].value), (n // 2, max(1, n // 2))):
        c["length"].value, c["window"].value = length, window
        assert ex.errors == []
        mask = _mask(kind, n, length, window)
        q, k, v = (a[:n] for a in examples.random_qkv(10, 4, seed=examples.SEED))
        if apply == "before":
            _, w = attention(q, k, v, mask=None if kind == "none" else mask)
        else:
            w = np.where(mask, attention(q, k, v)[1], 0.0)
        im = pixels(ex)
        for i in range(n):
            for j in range(n):
                assert shows(im, ex.grid.image, i, j, float(mask[i, j])), (i, j)
                # an allowed cell shows its weight; a masked one is hatched over
                assert shows(im, ex.heat.image, i, j, w[i, j]) == bool(mask[i, j]), (i, j)
        assert ex.shown()["hatched"] == bool((~mask).any())
        tables = explorers.read_tables(ex.readout.value)
        np.testing.assert_allclose(tables["weights"], w, atol=TABLE_ATOL, rtol=0)
        np.testing.assert_allclose(tables["row_sums"][:, 0], w.sum(-1), atol=TABLE_ATOL, rtol=0)


def test_custom_mask_cells_are_drawn_as_toggled(masks):
    ex, c = masks, masks.controls
    c["n"].value, c["kind"].value, c["apply"].value = 4, "custom", "before"
    want = np.ones((4, 4), bool)
    for (i, j) in [(0, 1), (2, 2), (3, 0)]:
        ex.cell_buttons[i, j].value = False
        want[i, j] = False
        im = pixels(ex)
        for a in range(4):
            for b in range(4):
                assert shows(im, ex.grid.image, a, b, float(want[a, b])), (a, b)
        q, k, v = (x[:4] for x in examples.random_qkv(10, 4, seed=examples.SEED))
        _, w = attention(q, k, v, mask=want)
        np.testing.assert_allclose(explorers.read_tables(ex.readout.value)["weights"], w,
                                   atol=TABLE_ATOL, rtol=0)


# --- worked example: the highlighted cell and the weights' colours ----------------------------

def test_worked_lab_highlight_outline_and_weights_follow_the_controls():
    lab = explorers.worked_example_lab()
    c = lab.controls
    for matrix in ("weights", "output", "scores"):
        c["matrix"].value = matrix
        for i, j in ((0, 0), (2, 1), (3, 1)):
            c["row"].value, c["col"].value = i, j
            q, k, v = (lab.shown()["inputs"][name] for name in "QKV")
            _, w = attention(q, k, v)
            im, ax = pixels(lab), lab.heat.ax
            cols = range(4) if matrix == "output" else [j]
            for jj in range(4):
                left = outline_on_left_edge(im, ax, (i, i + 1), jj - 0.5)
                if jj in cols:
                    assert left, (matrix, i, jj)
            for a in range(4):
                for b in range(4):
                    if a == i:
                        continue  # the highlighted row: outlined cells
                    assert shows(im, lab.heat.image, a, b, w[a, b]), (a, b)
    c["Q[1,0]"].value = 3.0
    q, k, v = (lab.shown()["inputs"][name] for name in "QKV")
    assert q[1, 0] == 3.0
    _, w = attention(q, k, v)
    im = pixels(lab)
    assert all(shows(im, lab.heat.image, 1, b, w[1, b]) for b in range(4))


# --- lines and bars: the marker where the maths puts it, bars as tall as the weights ----------

def marker_drawn(im, art, x, y, tol=40):
    """True if the PNG shows ``art``'s marker colour at data point (x, y)."""
    row, col = _at(im, art.marker.axes, x, y)
    face = np.array(to_rgb(art.marker.get_markerfacecolor())) * 255
    patch = im[row - 1:row + 2, col - 1:col + 2].reshape(-1, 3)
    return bool((np.abs(patch - face).max(axis=-1) <= tol).any())


def bars_drawn(im, art, weights):
    """True if every bar is painted up to its weight and not far above it."""
    ax = art.bars.patches[0].axes
    face = np.array(to_rgb(art.bars.patches[0].get_facecolor())) * 255
    top = ax.get_ylim()[1]
    for i, w in enumerate(weights):
        inside = np.abs(cell(im, ax, w / 2, i, r=1) - face).max() <= 40 if w > 0.15 * top else True
        above = True
        if w + 0.08 * top < top:
            row, col = _at(im, ax, i, w + 0.05 * top)
            above = np.abs(im[row, col] - face).max() > 40
        if not (inside and above):
            return False
    return True


def test_scaling_readout_markers_and_bars_for_every_d_k_both_ways():
    ex = explorers.scaling_explorer()
    c = ex.controls
    for scaled in (True, False):
        c["scaled"].value = scaled
        for d_k in c["d_k"].options:
            c["d_k"].value = d_k
            q, k, _ = examples.random_qkv(ex.n, d_k, seed=examples.SEED)
            s = scores(q, k, scale=None if scaled else 1.0)
            row = softmax(s[0])
            want = {"spread": s.std(), "max_weight": row.max(),
                    "gradient": np.linalg.norm(softmax_jacobian(row))}
            text = _text_of(ex.readout.value)
            how = "scaled by 1/√d_k" if scaled else "unscaled"
            assert text.startswith(f"d_k = {d_k} ({how}): "), text
            got = dict(zip(("d_k", "spread", "max_weight", "gradient", "row_sum"),
                           _numbers(text.replace("1/√d_k", ""))))
            assert got["d_k"] == d_k
            assert got["spread"] == pytest.approx(want["spread"], abs=5e-4)
            assert got["max_weight"] == pytest.approx(want["max_weight"], abs=5e-4)
            assert got["gradient"] == pytest.approx(want["gradient"], rel=5e-3, abs=1e-300)
            assert got["row_sum"] == pytest.approx(1.0, abs=5e-4)
            im = pixels(ex)
            for name, value in want.items():
                assert marker_drawn(im, ex.lines[name], d_k, value), (name, d_k, scaled)
            assert bars_drawn(im, ex.bars, row), (d_k, scaled)


def test_softmax_tables_sum_and_bars_follow_temperature_and_scores():
    ex = explorers.softmax_explorer()
    c = ex.controls
    changes = [("temperature", t) for t in (0.1, 0.5, 1.0, 3.0, 20.0)]
    changes += [(f"score {i}", v) for i in range(ex.n) for v in (-4.0, 6.5)]
    for name, value in changes:
        c[name].value = value
        row = np.array([c[f"score {i}"].value for i in range(ex.n)])
        t = c["temperature"].value
        w = softmax(row / t)
        tables = explorers.read_tables(ex.readout.value)
        np.testing.assert_allclose(tables["scaled"][0], row / t, atol=TABLE_ATOL, rtol=0)
        np.testing.assert_allclose(tables["weights"][0], w, atol=TABLE_ATOL, rtol=0)
        total = float(_text_of(ex.readout.value).split("sum of weights =")[1])
        assert total == pytest.approx(w.sum(), abs=1e-6)
        assert bars_drawn(pixels(ex), ex.bars, w), (name, value)


def test_heads_flops_table_for_every_d_model_and_head_count():
    ex = explorers.heads_explorer()
    c = ex.controls
    n = len(examples.TOKENS)
    for d_model in explorers.heads.D_MODELS:
        c["d_model"].value = d_model
        for h in c["h"].options:
            c["h"].value = h
            table = explorers.read_tables(ex.readout.value)["flops"]
            offered = [m for m in range(1, 17) if d_model % m == 0]
            assert table[:, 0].tolist() == offered
            for heads, row in zip(offered, table):
                f = attention_flops(n, d_model, heads)
                assert row[1] == d_model // heads
                assert row[2:].tolist() == [f["scores"], f["softmax"], f["weighted_sum"],
                                            f["total"]]


def test_cost_readout_marker_and_timed_points_for_every_length_and_dtype():
    ex = explorers.cost_explorer()
    c = ex.controls
    for dtype in c["dtype"].options:
        c["dtype"].value = dtype
        for n in c["n"].options:
            c["n"].value = n
            text = _text_of(ex.readout.value)
            nbytes = score_matrix_bytes(n, dtype=dtype)
            assert f"n = {n:,} · cells n² = {n * n:,} ({n * n / 512 ** 2:g} × n = 512)" in text
            assert f"{dtype}: {nbytes:,} bytes" in text
            im = pixels(ex)
            assert marker_drawn(im, ex.memory, n, nbytes), (n, dtype)
            timed = sorted((m, t) for (m, d), t in ex.times.items() if d == dtype)
            xs, ys = ex.shown()["timed_points"]
            assert xs.tolist() == [m for m, _ in timed] and ys.tolist() == [t for _, t in timed]
            if (n, dtype) in ex.times:
                assert f"{ex.times[n, dtype] * 1e3:.3g} ms per attention call" in text
                assert marker_drawn(im, ex.timing, n, ex.times[n, dtype]), (n, dtype)


# --- training: the read-out's loss and weight, the marker and the map at each step ------------

def test_training_readout_marker_and_map_at_every_step():
    runs = scaling_runs(d_ks=(4, 64), seeds=(0,), steps=12, snapshots=4)
    ex = explorers.training_explorer(runs)
    c = ex.controls
    for d_k in (4, 64):
        for scaled in (True, False):
            c["d_k"].value, c["scaled"].value = d_k, scaled
            run = runs[d_k, scaled][0]
            curve = running_mean(run.losses, 10)
            query = int(np.argmax(run.probe_pattern.sum(axis=1)))
            for i, step in enumerate(run.snapshot_steps.tolist()):
                c["step"].value = step
                weights = run.snapshot_weights[i]
                text = _text_of(ex.readout.value)
                loss = curve[min(step, curve.size - 1)]
                on_right = weights[query] @ run.probe_pattern[query]
                assert f"d_k = {d_k} (" in text and f"step {step}: loss {loss:.3f}" in text
                assert f"matching pair {on_right:.3f}" in text, text
                im = pixels(ex)
                assert marker_drawn(im, ex.art.curve, step, loss), (d_k, scaled, step)
                m = weights.shape[0]
                assert all(shows(im, ex.art.map.image, a, b, weights[a, b])
                           for a in range(m) for b in range(m)), (d_k, scaled, step)


# --- heads: every head's map painted from multi_head_attention's weights ---------------------

def test_heads_maps_are_painted_from_the_weights_for_every_head_count():
    from attn_core.multihead import multi_head_attention

    ex = explorers.heads_explorer()
    c = ex.controls
    for d_model in (8, 64):
        c["d_model"].value = d_model
        for h in c["h"].options:
            c["h"].value = h
            _, weights = multi_head_attention(*ex.params(d_model), h=h)  # (h, n, n)
            im, art = pixels(ex), ex.mosaic
            n = art.layout.n
            for head, (r, col) in enumerate(art.layout.origins):
                for i in range(n):
                    for j in range(n):
                        got = cell(im, art.image.axes, r + i, col + j, r=1)
                        want = colour_of(art.image, weights[head, i, j])
                        assert np.abs(got - want).max() <= COLOUR_TOL, (d_model, h, head, i, j)
            assert len(art.layout.origins) == h
