"""The article's inputs and the seeded generators in attn_core.examples."""

import ast
import inspect
import math

import numpy as np
import pytest
import reference as ref
from hypothesis import given
from hypothesis import strategies as st

from attn_core import examples as ex

SEED = 20240607


def test_worked_inputs_have_the_articles_shapes():
    for name in ("Q", "K", "V"):
        x = getattr(ex, name)
        assert x.shape == (4, 2) and x.dtype == np.float64, name
    assert ex.K_T.shape == (2, 4)
    np.testing.assert_array_equal(ex.K, ex.K_T.T)
    assert len(ex.WORKED_TOKENS) == ex.Q.shape[0]


def test_k_is_a_copy_not_a_view_of_k_t():
    assert not np.shares_memory(ex.K, ex.K_T)
    assert ex.K.flags.c_contiguous


def test_the_sentence_and_its_tokens():
    assert len(ex.TOKENS) == 10
    assert " ".join(ex.TOKENS[:-1]) + ex.TOKENS[-1] == ex.SENTENCE
    assert ex.TOKENS.count("it") == 1


def test_constants_agree_with_each_other():
    assert ex.ARTICLE_D_MODEL % ex.ARTICLE_HEADS == 0
    assert ex.SATURATION_FACTOR == math.sqrt(64)
    assert tuple(n * n for n in ex.COST_TABLE_LENGTHS) == ex.PRINTED_COST_CELLS
    assert tuple(n * n // ex.COST_TABLE_LENGTHS[0] ** 2
                 for n in ex.COST_TABLE_LENGTHS) == ex.PRINTED_COST_RELATIVE


def test_printed_matrices_have_the_right_shapes_and_rows_that_sum_to_one():
    for name in ("PRINTED_SCORES", "PRINTED_WEIGHTS", "PRINTED_CAUSAL_WEIGHTS"):
        assert getattr(ex, name).shape == (4, 4), name
    assert ex.PRINTED_OUTPUT.shape == (4, 2)
    for w in (ex.PRINTED_WEIGHTS, ex.PRINTED_CAUSAL_WEIGHTS):
        np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=0.02)  # printed to 2 decimals
    assert (ex.PRINTED_CAUSAL_WEIGHTS[np.triu_indices(4, 1)] == 0).all()


def test_printed_scores_agree_with_q_k_t_except_one_typo():
    """The article's Q K^T is right to 2 decimals everywhere but [1, 0] (1.78 for 0.78)."""
    computed = np.array(ref.matmul(ex.Q.tolist(), ex.K_T.tolist()))
    wrong = np.abs(computed - ex.PRINTED_SCORES) > 0.005
    assert list(zip(*np.nonzero(wrong))) == [(1, 0)]
    assert computed[1, 0] == pytest.approx(0.78)


def test_printed_softmax_demonstration_agrees_to_rounding():
    np.testing.assert_allclose(ref.softmax(ex.SMALL_SCORES), ex.PRINTED_SOFTMAX_SMALL, atol=0.006)
    np.testing.assert_allclose(ref.softmax(ex.SATURATION_FACTOR * ex.SMALL_SCORES),
                               ex.PRINTED_SOFTMAX_LARGE, atol=0.006)


# --- seeded generators -----------------------------------------------------------------------


def test_rng_is_seeded():
    assert ex.rng().random() == ex.rng(ex.SEED).random() == np.random.default_rng(0).random()
    assert ex.rng(1).random() != ex.rng(2).random()


@ref.FAST
@given(st.integers(1, 6), st.integers(1, 5), st.one_of(st.none(), st.integers(1, 5)),
       ref.batch_shapes(), st.integers(0, 2**31), st.sampled_from(ref.DTYPES))
def test_random_qkv_shapes_dtype_and_reproducibility(n, d_k, d_v, batch, seed, dtype):
    q, k, v = ex.random_qkv(n, d_k, d_v, batch=batch, seed=seed, dtype=dtype)
    d_v = d_k if d_v is None else d_v
    assert q.shape == k.shape == (*batch, n, d_k)
    assert v.shape == (*batch, n, d_v)
    assert q.dtype == k.dtype == v.dtype == dtype
    again = ex.random_qkv(n, d_k, d_v, batch=batch, seed=seed, dtype=dtype)
    for a, b in zip((q, k, v), again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(q, k)


def test_random_qkv_defaults_to_the_course_seed():
    for a, b in zip(ex.random_qkv(4, 3), ex.random_qkv(4, 3, seed=0)):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(ex.random_qkv(4, 3)[0], ex.random_qkv(4, 3, seed=SEED)[0])


def test_random_qkv_draws_standard_normals():
    q, k, v = ex.random_qkv(400, 50, seed=SEED)
    for x in (q, k, v):
        assert abs(x.mean()) < 0.02 and abs(x.std() - 1) < 0.02


def test_examples_is_data_only():
    """examples.py imports numpy and nothing else (no plotting, no attn_core maths)."""
    tree = ast.parse(inspect.getsource(ex))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0] if node.level == 0 else ".")
    assert imported == {"numpy"}


# --- read-only module arrays -----------------------------------------------------------------

ARRAYS = sorted(name for name, value in vars(ex).items() if isinstance(value, np.ndarray))


def test_the_module_arrays_are_the_worked_inputs_and_the_printed_tables():
    assert {"Q", "K", "K_T", "V", "SMALL_SCORES"} <= set(ARRAYS)
    assert {n for n in dir(ex) if n.startswith("PRINTED_") and
            isinstance(getattr(ex, n), np.ndarray)} <= set(ARRAYS)


@pytest.mark.parametrize("name", ARRAYS)
def test_every_module_array_is_read_only(name):
    """``q = examples.Q; q *= 2`` used to change the default of every later call, silently."""
    x = getattr(ex, name)
    before = x.copy()
    assert not x.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        x *= 2
    with pytest.raises(ValueError, match="read-only"):
        x[(0,) * x.ndim] = 99.0
    np.testing.assert_array_equal(x, before)
    copy = x.copy()  # the way to experiment: a copy is writeable
    copy *= 2
    np.testing.assert_array_equal(getattr(ex, name), before)


def test_examples_q_in_place_multiplication_raises():
    q = ex.Q
    with pytest.raises(ValueError, match="read-only"):
        q *= 2
    assert ex.Q[0].tolist() == [1.0, 0.5]


def test_the_maths_reads_the_read_only_inputs_without_copying_errors():
    from attn_core import attention, causal_mask, multi_head_attention, scores, softmax

    out, weights = attention(ex.Q, ex.K, ex.V, mask=causal_mask(4))
    ref_out, ref_weights, _ = ref.attention(ex.Q, ex.K, ex.V, causal_mask(4))
    np.testing.assert_allclose(out, ref_out, rtol=1e-12)
    assert out.flags.writeable and weights.flags.writeable
    assert scores(ex.Q, ex.K).flags.writeable and softmax(ex.SMALL_SCORES).flags.writeable
    w = np.eye(2)
    assert multi_head_attention(ex.Q, w, w, w, w, h=1)[0].flags.writeable
