"""Tests of the exercise checks of notebook 09 (the cost of attention), and of the notebook's
key facts against independent references (plain Python, not attn_core's output)."""

import math

import numpy as np
import pytest
from reference import assert_not_yet, assert_unanswered, numbers_in

from attn_core import (
    attention,
    examples,
    flash_attention,
    flash_attention_steps,
    score_matrix_bytes,
    score_matrix_cells,
)
from attn_core.checks import check_cells, check_relative_cost, check_running_max

# --- the notebook's table and the article's --------------------------------------------------


def test_cost_table_agrees_with_the_article():
    lengths = examples.COST_TABLE_LENGTHS
    base = lengths[0] * lengths[0]
    for n, cells, rel in zip(lengths, examples.PRINTED_COST_CELLS,
                             examples.PRINTED_COST_RELATIVE, strict=True):
        assert score_matrix_cells(n) == n * n == cells
        assert score_matrix_cells(n) // score_matrix_cells(lengths[0]) == n * n // base == rel


def test_doubling_the_context_quadruples_the_cells_and_bytes():
    for n in (1, 7, 512, 3000):
        assert score_matrix_cells(2 * n) == 4 * score_matrix_cells(n)
        assert score_matrix_bytes(2 * n) == 4 * score_matrix_bytes(n)
    assert score_matrix_bytes(32768) == 32768 * 32768 * 4


def python_online_softmax_attention(q, k, v, block):
    """Tiled attention with the online softmax, in plain Python floats; also returns the
    running max of every row after each key tile."""
    n, d = len(q), len(q[0])
    scale = 1 / math.sqrt(d)
    outs, maxes = [], []
    for i in range(n):
        m, l, acc = -math.inf, 0.0, [0.0] * len(v[0])
        row_maxes = []
        for j0 in range(0, len(k), block):
            cols = range(j0, min(j0 + block, len(k)))
            s = [scale * sum(a * b for a, b in zip(q[i], k[j])) for j in cols]
            m_new = max(m, max(s))
            r = math.exp(m - m_new) if m > -math.inf else 0.0
            p = [math.exp(x - m_new) for x in s]
            l = r * l + sum(p)
            acc = [r * a + sum(pj * v[j0 + t][c] for t, pj in enumerate(p))
                   for c, a in enumerate(acc)]
            m = m_new
            row_maxes.append(m)
        outs.append([a / l for a in acc])
        maxes.append(row_maxes)
    return outs, maxes


def test_flash_on_the_small_example_matches_a_python_online_softmax():
    q, k, v = examples.random_qkv(6, 3, seed=9)
    ref, maxes = python_online_softmax_attention(q.tolist(), k.tolist(), v.tolist(), 2)
    np.testing.assert_allclose(flash_attention(q, k, v, block_size=2), ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(attention(q, k, v)[0], ref, rtol=0, atol=1e-12)
    steps = flash_attention_steps(q, k, v, block_size=2)
    for t, step in enumerate(steps):
        rows = range(step.rows.start, step.rows.stop)
        np.testing.assert_allclose(step.running_max[step.rows], [maxes[i][t % 3] for i in rows])


# --- check_cells ------------------------------------------------------------------------------


def test_cells_right():
    assert check_cells(4096 * 4096 * 16)
    assert check_cells(float(4096 ** 2 * 16))
    assert check_cells(100 * 3, n=10, h=3)


@pytest.mark.parametrize("wrong", [4096 * 4096, 4096 * 16, 4096 ** 3, 4096 * 4096 * 8, "many"])
def test_cells_wrong(wrong):
    fb = check_cells(wrong)
    assert_not_yet(fb)
    assert 4096 * 4096 * 16 not in numbers_in(fb.message)


def test_cells_hints_name_the_mistake():
    assert "one head" in check_cells(4096 * 4096).message
    assert "n rows by n columns" in check_cells(4096 * 16).message


def test_cells_unanswered():
    assert_unanswered(check_cells(None))


# --- check_relative_cost ----------------------------------------------------------------------


def test_relative_cost_right():
    assert check_relative_cost((8192 / 2048) ** 2)
    assert check_relative_cost(4.0, n_long=1024, n_short=512)


@pytest.mark.parametrize("wrong", [4, 1 / 16, 8, 64])
def test_relative_cost_wrong(wrong):
    fb = check_relative_cost(wrong)
    assert_not_yet(fb)
    assert 16 not in numbers_in(fb.message)


def test_relative_cost_names_linear_thinking():
    assert "linear" in check_relative_cost(4).message


def test_relative_cost_unanswered():
    fb = check_relative_cost(None)
    assert_unanswered(fb)
    assert 16 not in numbers_in(fb.message)


# --- check_running_max ------------------------------------------------------------------------


@pytest.fixture
def small():
    return examples.random_qkv(6, 3, seed=9)


def reference_running_max(q, k, rows, upto):
    """Largest scaled score of each row over key columns 0..upto-1, by a loop."""
    d = len(q[0])
    return [max(sum(a * b for a, b in zip(q[i], k[j])) / math.sqrt(d) for j in range(upto))
            for i in rows]


def test_running_max_right(small):
    q, k, v = small
    # tile 2 (counted from 1) of block 2: numpy rows 0, 1 against columns 2, 3 (after 0, 1)
    answer = reference_running_max(q.tolist(), k.tolist(), range(0, 2), 4)
    assert check_running_max(answer, q, k, v, block_size=2, step=2)
    answer = reference_running_max(q.tolist(), k.tolist(), range(2, 4), 6)
    assert check_running_max(answer, q, k, v, block_size=2, step=6)


def test_running_max_this_tile_only_is_named(small):
    q, k, v = small
    s = q @ k.T / math.sqrt(3)
    expected = s[0:2, 0:4].max(axis=1)
    tile_only = s[0:2, 2:4].max(axis=1)
    assert not np.allclose(tile_only, expected)  # the example must tell them apart
    fb = check_running_max(tile_only, q, k, v, block_size=2, step=2)
    assert_not_yet(fb)
    assert "this tile alone" in fb.message


def test_running_max_unscaled_is_named(small):
    q, k, v = small
    fb = check_running_max((q @ k.T)[0:2, 0:4].max(axis=1), q, k, v, block_size=2, step=2)
    assert_not_yet(fb)
    assert "sqrt(d_k)" in fb.message


@pytest.mark.parametrize("wrong", [[0.0, 0.0], [1.0, 2.0, 3.0], "max"])
def test_running_max_wrong(small, wrong):
    q, k, v = small
    fb = check_running_max(wrong, q, k, v, block_size=2, step=2)
    assert_not_yet(fb)
    expected = (q @ k.T / math.sqrt(3))[0:2, 0:4].max(axis=1)
    for value in expected:
        assert f"{value:.2f}" not in fb.message


def test_running_max_unanswered(small):
    q, k, v = small
    assert_unanswered(check_running_max(None, q, k, v, block_size=2, step=2))


def test_running_max_tile_counted_from_0_is_named(small):
    q, k, v = small
    # tile 3 asked; tile 4 (numpy's steps[3]) answered: query rows 3, 4 (from 1) after keys 1, 2
    wrong = reference_running_max(q.tolist(), k.tolist(), range(2, 4), 2)
    fb = check_running_max(wrong, q, k, v, block_size=2, step=3)
    assert_not_yet(fb)
    assert "counted from 1" in fb.message


@pytest.mark.parametrize("step", [0, 10, 1.0, True])
def test_running_max_step_is_a_tile_number_from_1(small, step):
    q, k, v = small
    with pytest.raises(ValueError):
        check_running_max(None, q, k, v, block_size=2, step=step)
