"""Cost formulas against independent arithmetic, and the timing and memory helpers."""

import numpy as np
import pytest
import reference as ref
from hypothesis import given
from hypothesis import strategies as st

from attn_core import (
    attention,
    attention_flops,
    loglog_slope,
    median_time,
    peak_memory,
    projection_flops,
    score_matrix_bytes,
    score_matrix_cells,
)
from attn_core import cost as cost_module

SEED = 20240606

sizes = st.integers(1, 5000)
small = st.integers(1, 64)


# --- formulas --------------------------------------------------------------------------------


@ref.PROPERTY
@given(sizes, small, small)
def test_cells_are_batch_times_heads_times_n_squared(n, h, batch):
    assert score_matrix_cells(n, h, batch) == batch * h * n * n
    assert score_matrix_cells(n) == n * n
    assert isinstance(score_matrix_cells(n, h, batch), int)


def test_cells_count_the_entries_of_the_real_weights():
    g = np.random.default_rng(SEED)
    q, k, v = (g.standard_normal((3, 2, 7, 4)) for _ in range(3))
    _, weights = attention(q, k, v)
    assert weights.size == score_matrix_cells(7, h=2, batch=3)


@ref.PROPERTY
@given(sizes, small, small, st.sampled_from(["float16", "float32", "float64", np.float32]))
def test_bytes_are_cells_times_itemsize(n, h, batch, dtype):
    itemsize = {"float16": 2, "float32": 4, "float64": 8}[np.dtype(dtype).name]
    assert score_matrix_bytes(n, h, batch, dtype=dtype) == batch * h * n * n * itemsize


def test_bytes_default_to_float32_and_match_a_real_array():
    assert score_matrix_bytes(100) == 100 * 100 * 4
    assert score_matrix_bytes(9, 2, 3, "float64") == np.zeros((3, 2, 9, 9)).nbytes


@ref.PROPERTY
@given(sizes, st.integers(1, 8), st.integers(1, 64), st.one_of(st.none(), sizes))
def test_attention_flops_formulas(n, h, d_k, n_k):
    d_model = h * d_k
    f = attention_flops(n, d_model, h=h, n_k=n_k)
    keys = n if n_k is None else n_k
    matmul = 0
    for _ in range(n):  # one multiply and one add per (query, key, feature)
        matmul += keys * d_model * 2
    assert f["scores"] == matmul
    assert f["weighted_sum"] == matmul
    assert f["softmax"] == 5 * h * n * keys
    assert f["total"] == f["scores"] + f["softmax"] + f["weighted_sum"]


@ref.PROPERTY
@given(sizes, st.sampled_from([64, 96, 120, 512]), st.one_of(st.none(), sizes))
def test_matmul_flops_do_not_depend_on_h(n, d_model, n_k):
    """h heads of width d_model / h do the same multiply-adds as one head of width d_model."""
    counts = [attention_flops(n, d_model, h=h, n_k=n_k) for h in range(1, 9) if d_model % h == 0]
    assert len({c["scores"] for c in counts}) == 1
    assert len({c["weighted_sum"] for c in counts}) == 1


def test_flops_match_a_count_of_the_matmuls_of_real_heads():
    n, d_model, h = 6, 12, 3
    d_k = d_model // h
    # per head: Q_i K_i^T is (n x d_k) @ (d_k x n): n*n dot products of length d_k
    per_head = n * n * d_k * 2
    assert attention_flops(n, d_model, h=h)["scores"] == h * per_head


@ref.PROPERTY
@given(sizes, st.integers(1, 2048))
def test_projection_flops_are_four_matmuls(n, d_model):
    one = 2 * n * d_model * d_model  # (n, d) @ (d, d): n*d*d multiply-adds
    assert projection_flops(n, d_model) == one + one + one + one


def test_the_articles_cost_table():
    from attn_core.examples import COST_TABLE_LENGTHS, PRINTED_COST_CELLS, PRINTED_COST_RELATIVE
    cells = [score_matrix_cells(n) for n in COST_TABLE_LENGTHS]
    assert tuple(cells) == PRINTED_COST_CELLS
    assert tuple(c // cells[0] for c in cells) == PRINTED_COST_RELATIVE
    assert score_matrix_bytes(32768) == 4 * 2**30


# --- loglog_slope, median_time, peak_memory ---------------------------------------------------


@ref.PROPERTY
@given(st.floats(-3, 3), st.floats(0.01, 100), st.integers(2, 8))
def test_loglog_slope_recovers_a_known_exponent(p, c, m):
    x = np.geomspace(10, 10_000, m)
    y = c * x ** p
    assert loglog_slope(x, y) == pytest.approx(p, abs=1e-9)


def test_loglog_slope_of_noisy_quadratic_is_near_two():
    g = np.random.default_rng(SEED)
    x = np.array([256, 512, 1024, 2048, 4096])
    y = 3e-9 * x**2 * np.exp(g.normal(0, 0.02, x.size))
    assert loglog_slope(x, y) == pytest.approx(2.0, abs=0.05)


def test_peak_memory_sees_a_known_allocation():
    nbytes = 8 * 2_000_000

    def allocate():
        a = np.ones(2_000_000)  # 16 MB, freed on return
        return float(a[0])

    peak = peak_memory(allocate)
    assert nbytes <= peak < nbytes + 1_000_000


def test_peak_memory_of_two_live_arrays_adds_up_and_of_nothing_is_small():
    def two():
        a = np.ones(1_000_000)
        b = np.ones(1_000_000)
        return a[0] + b[0]

    assert 16_000_000 <= peak_memory(two) < 17_000_000
    assert peak_memory(lambda: None) < 100_000


def test_peak_memory_passes_arguments_and_leaves_tracing_as_it_was():
    import tracemalloc
    assert peak_memory(np.zeros, (500, 1000)) >= 500 * 1000 * 8
    was = tracemalloc.is_tracing()
    peak_memory(np.zeros, 10)
    assert tracemalloc.is_tracing() == was


def test_median_time_is_the_median_of_repeat_timed_calls(monkeypatch):
    ticks = iter([0.0, 1.0,   # 1.0
                  10.0, 13.0,  # 3.0
                  20.0, 22.0])  # 2.0
    monkeypatch.setattr(cost_module.time, "perf_counter", lambda: next(ticks))
    calls = []
    result = median_time(lambda *a, **kw: calls.append((a, kw)), 1, 2, repeat=3, flag=True)
    assert result == 2.0
    assert calls == [((1, 2), {"flag": True})] * 4  # one warm-up, then three timed calls


def test_median_time_measures_real_time():
    import time
    t = median_time(time.sleep, 0.002, repeat=3)
    assert 0.0015 < t < 0.5


# --- bad input -------------------------------------------------------------------------------

BAD_INPUT = [
    pytest.param(lambda: score_matrix_cells(0), ValueError,
                 r"^n must be an integer >= 1, got 0$", id="cells-n-zero"),
    pytest.param(lambda: score_matrix_cells(8, h=0), ValueError,
                 r"^h must be an integer >= 1, got 0$", id="cells-h-zero"),
    pytest.param(lambda: score_matrix_cells(8, batch=-1), ValueError,
                 r"^batch must be an integer >= 1, got -1$", id="cells-batch-negative"),
    pytest.param(lambda: score_matrix_cells(8.0), TypeError,
                 r"^n must be an integer >= 1, got 8\.0$", id="cells-n-float"),
    pytest.param(lambda: score_matrix_bytes(8, dtype="int32"), ValueError,
                 r"^dtype must be a floating dtype, got int32$", id="bytes-int-dtype"),
    pytest.param(lambda: score_matrix_bytes(8, dtype="nonsense"), TypeError,
                 r"^dtype must be a numpy dtype such as 'float32', got 'nonsense'$",
                 id="bytes-bad-dtype"),
    pytest.param(lambda: attention_flops(8, 512, h=0), ValueError,
                 r"^h must be an integer >= 1, got 0$", id="flops-h-zero"),
    pytest.param(lambda: attention_flops(8, 0), ValueError,
                 r"^d_model must be an integer >= 1, got 0$", id="flops-d-model-zero"),
    # Same rule as multi_head_attention: the message should list the head counts that work.
    pytest.param(lambda: attention_flops(8, 10, h=3), ValueError,
                 r"^d_model = 10 must be divisible by h, got h = 3.*\[1, 2, 5, 10\]",
                 id="flops-not-divisible"),
    pytest.param(lambda: projection_flops(8, -1), ValueError,
                 r"^d_model must be an integer >= 1, got -1$", id="projection-negative"),
    pytest.param(lambda: median_time(len, [1], repeat=0), ValueError,
                 r"^repeat must be an integer >= 1, got 0$", id="repeat-zero"),
    pytest.param(lambda: loglog_slope([1, 2], [1, 2, 3]), ValueError,
                 r"^x and y must be 1-D of equal length >= 2, got shapes \(2,\) and \(3,\)$",
                 id="slope-lengths"),
    pytest.param(lambda: loglog_slope([1], [1]), ValueError,
                 r"^x and y must be 1-D of equal length >= 2, got shapes \(1,\) and \(1,\)$",
                 id="slope-too-short"),
    pytest.param(lambda: loglog_slope([1, 0], [1, 2]), ValueError,
                 r"^x and y must be positive to take logarithms", id="slope-nonpositive"),
    # Today these reach numpy: "could not convert string to float", LinAlgError "SVD did
    # not converge" (with LAPACK noise on stderr), and a RankWarning with a made-up slope.
    pytest.param(lambda: loglog_slope(["a", "b"], [1, 2]), TypeError,
                 r"^x must (hold|be) .*numbers.*got", id="slope-strings"),
    pytest.param(lambda: loglog_slope([1, np.nan], [1, 2]), ValueError,
                 r"^x must hold finite values, got nan", id="slope-nan"),
    pytest.param(lambda: loglog_slope([1, 2], [1, np.inf]), ValueError,
                 r"^y must hold finite values, got inf", id="slope-inf"),
    pytest.param(lambda: loglog_slope([2, 2], [1, 2]), ValueError,
                 r"^x must hold at least two different values.*got.*2",
                 id="slope-constant-x"),
]


@pytest.mark.parametrize(("call", "exc_type", "pattern"), BAD_INPUT)
def test_bad_input_gets_a_clear_error(call, exc_type, pattern):
    ref.assert_clear_error(call, exc_type, pattern)


# --- key/value cache and whole-layer FLOPs ---------------------------------------------------


@ref.PROPERTY
@given(sizes, st.integers(1, 48), small, small, small,
       st.sampled_from(["float16", "float32", "float64"]))
def test_kv_cache_bytes_count_two_rows_per_token_head_and_layer(n, layers, heads, d_head, batch,
                                                                dtype):
    itemsize = {"float16": 2, "float32": 4, "float64": 8}[dtype]
    per_token = 0
    for _ in range(layers):
        for _ in range(heads):
            per_token += 2 * d_head  # one key row and one value row
    assert cost_module.kv_cache_bytes(n, layers, heads, d_head, dtype, batch) == \
        batch * n * per_token * itemsize


def test_kv_cache_bytes_match_the_arrays_of_a_real_cache():
    from attn_core.decoding import append_kv, empty_cache

    g = np.random.default_rng(SEED)
    layers, heads, n, d_head = 3, 2, 5, 4
    total = 0
    for _ in range(layers):
        c = append_kv(empty_cache(d_head, batch=(heads,), dtype="float32"),
                      g.standard_normal((heads, n, d_head)).astype(np.float32),
                      g.standard_normal((heads, n, d_head)).astype(np.float32))
        total += c.nbytes
    assert cost_module.kv_cache_bytes(n, layers, heads, d_head, "float32") == total


def test_kv_cache_of_a_7b_shape_at_32k_tokens_is_16_gib():
    # 32 layers x 2 (K and V) x 32768 tokens x 4096 numbers x 2 bytes
    assert cost_module.kv_cache_bytes(32768, 32, 32, 128) == 32 * 2 * 32768 * 4096 * 2 == 16 * 2**30


@ref.PROPERTY
@given(sizes, st.sampled_from([(64, 1), (64, 4), (384, 12), (512, 8)]), st.one_of(st.none(), small))
def test_layer_flops_add_up_the_products(n, shape, d_ff):
    d, h = shape
    f = cost_module.layer_flops(n, d, h=h, d_ff=d_ff)
    width = 4 * d if d_ff is None else d_ff
    # (n x d) @ (d x d) four times; (n x d) @ (d x d_ff) and (n x d_ff) @ (d_ff x d)
    assert f["projections"] == 4 * (2 * n * d * d)
    assert f["feed_forward"] == 2 * n * d * width + 2 * n * width * d
    # scores (n x d_k) @ (d_k x n) and weights @ values per head, plus 5 softmax ops per score
    assert f["attention"] == h * (2 * n * n * (d // h) * 2) + 5 * h * n * n
    assert f["total"] == f["projections"] + f["feed_forward"] + f["attention"]


@pytest.mark.parametrize("d, h, d_ff", [(4096, 32, None), (768, 12, None), (384, 12, 1536),
                                        (64, 1, 100), (8, 2, 8)])
def test_attention_overtakes_at_the_first_n_where_it_costs_more(d, h, d_ff):
    n = cost_module.attention_overtakes_at(d, h=h, d_ff=d_ff)

    def share(m):
        f = cost_module.layer_flops(m, d, h=h, d_ff=d_ff)
        return f["attention"] - f["projections"] - f["feed_forward"]

    assert share(n) >= 0 > share(n - 1) if n > 1 else share(n) >= 0


def test_the_crossover_is_six_d_model_without_the_softmax_term():
    # 4 n^2 d = 24 n d^2 exactly at n = 6 d; the 5 h n^2 softmax FLOPs bring it a little earlier
    for d, h in [(4096, 32), (768, 12), (512, 8)]:
        n = cost_module.attention_overtakes_at(d, h=h)
        assert n <= 6 * d
        assert abs(n - 6 * d) / (6 * d) < 0.03
    assert cost_module.attention_overtakes_at(4096, h=32) == -(-24 * 4096**2 // (4 * 4096 + 160))


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda: cost_module.kv_cache_bytes(0, 1, 1, 1), ValueError, r"n must be an integer >= 1"),
    (lambda: cost_module.kv_cache_bytes(8, 2.0, 1, 1), TypeError, r"layers must be an integer"),
    (lambda: cost_module.kv_cache_bytes(8, 1, 1, 1, dtype="int8"), ValueError, r"floating dtype"),
    (lambda: cost_module.layer_flops(8, 10, h=3), ValueError, r"divisible by h"),
    (lambda: cost_module.attention_overtakes_at(10, h=4), ValueError, r"divisible by h"),
    (lambda: cost_module.attention_overtakes_at(10, d_ff=0), ValueError,
     r"d_ff must be an integer"),
])
def test_cost_errors_are_named(call, exc, pattern):
    ref.assert_clear_error(call, exc, pattern)


def test_min_time_is_the_shortest_of_the_timed_calls(monkeypatch):
    calls = []
    ticks = iter([0.0, 0.5, 1.0, 1.2, 2.0, 2.9])  # three calls taking 0.5, 0.2 and 0.9 s
    monkeypatch.setattr(cost_module.time, "perf_counter", lambda: next(ticks))
    assert cost_module.min_time(calls.append, 1, repeat=3) == pytest.approx(0.2)
    assert len(calls) == 4  # the warm-up call and three timed ones


def test_min_time_measures_a_real_wait():
    import time

    assert cost_module.min_time(time.sleep, 0.002, repeat=3) >= 0.002
    ref.assert_clear_error(lambda: cost_module.min_time(sum, [1], repeat=0), ValueError,
                           r"repeat must be an integer >= 1")
