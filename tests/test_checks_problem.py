"""Checks of notebook 01 (the problem), against a plain-Python reference for the arithmetic."""

import math
import re

import numpy as np
import pytest

from attn_core import attention, examples
from attn_core.checks import check_focus_query, check_mixture, check_top_token

from reference import carries_hint

TOKENS = examples.TOKENS
IT = TOKENS.index("it")

# The inputs notebook 01 invents (keys on the features animate, place, grammar).
KEYS = [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.2, 0.2, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0], [0.3, 0.0, 0.5], [0.0, 0.0, 1.0], [0.4, 0.0, 0.0], [0.0, 0.0, 0.5]]
IT_QUERY = [6.0, 1.0, -1.0]
VALUES = [[0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0],
          [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0],
          [0.3, 0.0, 0.7, 0.0], [0.0, 0.0, 0.0, 1.0]]


def ref_weights(query, keys):
    """softmax_j(q . k_j / sqrt(d)) with loops and math.exp."""
    d = len(query)
    s = [sum(a * b for a, b in zip(query, k, strict=True)) / math.sqrt(d) for k in keys]
    top = max(s)
    e = [math.exp(x - top) for x in s]
    return [x / sum(e) for x in e]


def ref_mix(weights, values):
    return [sum(w * v[c] for w, v in zip(weights, values, strict=True))
            for c in range(len(values[0]))]


def queries_with(it_query):
    q = np.zeros((len(TOKENS), 3))
    q[IT] = it_query
    return q


def numbers_in(text):
    return set(re.findall(r"-?\d+\.\d+|\d+", text))


def notebook_array(name):
    """The array ``name`` as notebooks/01-the-problem.ipynb defines it (its cell, executed)."""
    import contextlib
    import io
    from pathlib import Path

    import nbformat

    path = Path(__file__).resolve().parents[1] / "notebooks" / "01-the-problem.ipynb"
    cells = [c.source for c in nbformat.read(path, as_version=4).cells
             if c.cell_type == "code" and f"{name} = np.array(" in c.source]
    assert len(cells) == 1, f"{path.name} should define {name} in one cell"
    namespace = {"np": np}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(cells[0], namespace)  # the course's own cell: np.array literals and a print
    return namespace[name]


def test_notebook_example_it_draws_mostly_from_animal():
    """Guards notebooks/01-the-problem.ipynb: with its KEYS and VALUES, attn_core's attention
    gives "it" most of its weight on "animal" and an output closest to animal's value."""
    np.testing.assert_array_equal(notebook_array("KEYS"), KEYS)
    np.testing.assert_array_equal(notebook_array("VALUES"), VALUES)
    w = ref_weights(IT_QUERY, KEYS)
    assert max(range(len(w)), key=w.__getitem__) == TOKENS.index("animal")
    assert w[TOKENS.index("animal")] > 0.6
    out, weights = attention(queries_with(IT_QUERY), KEYS, VALUES)
    np.testing.assert_allclose(weights[IT], w, rtol=1e-12)
    np.testing.assert_allclose(out[IT], ref_mix(w, VALUES), rtol=1e-12, atol=1e-15)
    dist = [math.dist(out[IT], v) for v in VALUES]
    assert min(range(len(dist)), key=dist.__getitem__) == TOKENS.index("animal")


def test_top_token_right_and_wrong():
    keys = np.array(KEYS)
    keys[TOKENS.index("tired")] = [1.5, 0.0, 0.0]
    w = ref_weights(IT_QUERY, keys.tolist())
    expected = TOKENS[max(range(len(w)), key=w.__getitem__)]
    assert expected == "tired"
    queries = queries_with(IT_QUERY)
    assert check_top_token(expected, queries, keys)
    assert check_top_token(f"  {expected} ", queries, keys)
    for wrong in ("animal", "road", "it"):
        fb = check_top_token(wrong, queries, keys)
        assert not fb and carries_hint(fb) and expected not in fb.message
    assert "itself" in check_top_token("it", queries, keys).message
    assert "not one of the tokens" in check_top_token("cat", queries, keys).message
    assert not check_top_token(8, queries, keys)


def test_top_token_unanswered():
    fb = check_top_token(None, queries_with(IT_QUERY), KEYS)
    assert not fb and fb.message.startswith("… No answer yet")
    assert "animal" not in fb.message


def test_mixture():
    weights = [0.7, 0.2, 0.1]
    rows = [VALUES[TOKENS.index(t)] for t in ("animal", "road", "tired")]
    expected = ref_mix(weights, rows)
    assert check_mixture(expected, weights, rows)
    assert check_mixture([round(x, 2) for x in expected], weights, rows)
    plain_sum = [sum(col) for col in zip(*rows, strict=True)]
    fb = check_mixture(plain_sum, weights, rows)
    assert not fb and "plain sum" in fb.message
    fb = check_mixture([1.0, 2.0, 3.0], weights, rows)
    assert not fb and "per value column" in fb.message
    fb = check_mixture([0.0, 0.0, 0.0, 0.0], weights, rows)
    assert not fb and carries_hint(fb)
    fb = check_mixture(None, weights, rows)
    assert fb.message.startswith("… No answer yet")
    shown = {f"{x:.2f}" for x in expected} | {f"{x:.1f}" for x in expected if x}
    for msg in (fb.message, check_mixture(plain_sum, weights, rows).message):
        assert not (numbers_in(msg) & shown)


def test_focus_query():
    assert ref_weights([20.0, 0.0, -5.0], KEYS)[TOKENS.index("animal")] >= 0.9
    assert check_focus_query([20.0, 0.0, -5.0], KEYS)
    assert ref_weights(IT_QUERY, KEYS)[TOKENS.index("animal")] < 0.9
    fb = check_focus_query(IT_QUERY, KEYS)
    assert not fb and carries_hint(fb)
    assert "3 numbers" in check_focus_query([1.0, 2.0], KEYS).message
    assert not check_focus_query([np.nan, 0.0, 0.0], KEYS)
    assert check_focus_query(None, KEYS).message.startswith("… No answer yet")


@pytest.mark.parametrize("target", ["road", "crossed"])
def test_focus_query_other_targets(target):
    col = TOKENS.index(target)
    q = [30.0 * k for k in KEYS[col]]
    q[2] -= 10.0  # away from the grammar words
    expected = ref_weights(q, KEYS)[col] >= 0.9
    assert bool(check_focus_query(q, KEYS, target=target)) == expected
