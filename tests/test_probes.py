"""Model probes (attn_core.model.probes) against plain loops, tiny hand-built encoders and
properties of attention (permutation equivariance without positions)."""

import math

import numpy as np
import pytest
import reference as ref
from hypothesis import given
from hypothesis import strategies as st

from attn_core.model.encoder import _tiny_weights, encoder_forward
from attn_core.model.probes import (
    attention_update_ratio,
    compare_pair,
    cosine_similarity,
    mean_by_offset,
    next_token_score,
    weights_on,
    with_positions,
)

SEED = 20240611


def random_maps(g, lead, n):
    a = g.random((*lead, n, n)) + 0.01
    return a / a.sum(axis=-1, keepdims=True)


@ref.PROPERTY
@given(st.integers(0, 2**32 - 1), st.integers(2, 7), st.integers(2, 7), st.data())
def test_compare_pair_reads_the_weights_like_a_loop(seed, n_a, n_b, data):
    g = np.random.default_rng(seed)
    a, b = random_maps(g, (2, 3), n_a), random_maps(g, (2, 3), n_b)
    qa, qb = data.draw(st.integers(0, n_a - 1)), data.draw(st.integers(0, n_b - 1))
    c = data.draw(st.integers(1, min(n_a, n_b)))
    ka = data.draw(st.lists(st.integers(0, n_a - 1), min_size=c, max_size=c))
    kb = data.draw(st.lists(st.integers(0, n_b - 1), min_size=c, max_size=c))
    got = compare_pair(a, b, qa, qb, ka, kb)
    for layer in range(2):
        for head in range(3):
            before = [a[layer, head, qa, j] for j in ka]
            after = [b[layer, head, qb, j] for j in kb]
            assert got.before[layer, head].tolist() == before
            assert got.after[layer, head].tolist() == after
            fav_b = max(range(c), key=lambda i: (before[i], -i))
            fav_a = max(range(c), key=lambda i: (after[i], -i))
            assert got.switched[layer, head] == (fav_b != fav_a)
    np.testing.assert_array_equal(got.change, got.after - got.before)


def test_weights_on_one_key_and_errors():
    a = np.array([[0.5, 0.5], [0.25, 0.75]])
    assert weights_on(a, 1, 1).tolist() == [0.75]
    ref.assert_clear_error(lambda: weights_on(a, 2, [0]), ValueError, r"query must be positions")
    ref.assert_clear_error(lambda: weights_on(a, 0, [0.5]), TypeError, r"keys must be an int")
    ref.assert_clear_error(lambda: weights_on(np.ones((2, 3)), 0, [0]), ValueError, r"square")
    ref.assert_clear_error(lambda: compare_pair(np.ones((1, 2, 2)) / 2, np.ones((2, 2)) / 2, 0, 0,
                                                [0], [0]), ValueError, r"same leading shape")
    ref.assert_clear_error(lambda: compare_pair(a, a, 0, 0, [0, 1], [0]), ValueError,
                           r"same number of candidates")


def loop_update_ratios(w, states):
    """|MultiHead(x)_i| / |x_i| per layer and row, with the reference's loop over heads."""
    out = []
    for i, lw in enumerate(w.layers):
        x = states[i]
        upd, _ = ref.multi_head_attention(x, lw.w_q, lw.w_k, lw.w_v, lw.w_o, w.heads,
                                          biases=(lw.b_q, lw.b_k, lw.b_v, lw.b_o))
        out.append([math.sqrt(sum(u * u for u in upd[r])) / math.sqrt(sum(v * v for v in x[r]))
                    for r in range(x.shape[0])])
    return np.array(out)


@pytest.mark.parametrize("layers, heads", [(1, 2), (3, 1), (2, 4)])
def test_update_ratio_against_the_loop_reference(layers, heads):
    w = _tiny_weights(d=8, d_ff=16, heads=heads, layers=layers, seed=layers + heads)
    states = encoder_forward(w, [1, 2, 3, 4, 5]).hidden_states
    np.testing.assert_allclose(attention_update_ratio(w, states), loop_update_ratios(w, states),
                               rtol=1e-9, atol=1e-12)


def test_update_ratio_with_padding_keeps_the_real_rows():
    w = _tiny_weights(layers=2)
    one = encoder_forward(w, [1, 2, 3]).hidden_states
    batch = encoder_forward(w, [[1, 2, 3, 0]], attention_mask=[[1, 1, 1, 0]]).hidden_states
    got = attention_update_ratio(w, batch, attention_mask=[[1, 1, 1, 0]])
    np.testing.assert_allclose(got[0, :, :3], attention_update_ratio(w, one), rtol=1e-9)
    ref.assert_clear_error(lambda: attention_update_ratio(w, one[:2]), ValueError,
                           r"hidden_states must have shape \(\.\.\., 3, n, 4\)")
    ref.assert_clear_error(lambda: attention_update_ratio("w", one), TypeError, "EncoderWeights")


@ref.FAST
@given(st.integers(0, 2**32 - 1), st.integers(2, 8))
def test_reversed_positions_and_reversed_ids_give_the_reversed_encoder(seed, n):
    """Attention is permutation-equivariant: only the position embeddings see order. Reverse
    both the pieces and their positions, and every state comes out reversed."""
    w = _tiny_weights(d=8, d_ff=16, heads=2, layers=2, vocab=20, seed=seed % 1000)
    ids = np.random.default_rng(seed).integers(0, 20, n)
    plain = encoder_forward(w, ids)
    flipped = encoder_forward(with_positions(w, n, "reverse"), ids[::-1])
    np.testing.assert_allclose(flipped.hidden_states, plain.hidden_states[:, ::-1], atol=1e-10)
    np.testing.assert_allclose(flipped.attentions, plain.attentions[:, :, ::-1, ::-1],
                               atol=1e-10)


@ref.FAST
@given(st.integers(0, 2**32 - 1), st.integers(2, 8))
def test_zero_positions_leave_no_sense_of_order(seed, n):
    w = with_positions(_tiny_weights(d=8, d_ff=16, heads=2, layers=2, vocab=20, seed=3), n, "zero")
    g = np.random.default_rng(seed)
    ids, perm = g.integers(0, 20, n), g.permutation(n)
    plain, shuffled = encoder_forward(w, ids), encoder_forward(w, ids[perm])
    np.testing.assert_allclose(shuffled.hidden_states, plain.hidden_states[:, perm], atol=1e-10)


def test_with_positions_changes_only_the_first_n_rows_and_copies():
    w = _tiny_weights()
    before = w.position.copy()
    z = with_positions(w, 5, "zero")
    assert (z.position[:5] == 0).all() and (z.position[5:] == before[5:]).all()
    assert (w.position == before).all()
    ref.assert_clear_error(lambda: with_positions(w, 17, "zero"), ValueError, r"at most 16")
    ref.assert_clear_error(lambda: with_positions(w, 3, "shuffle"), ValueError,
                           r"'reverse' or 'zero'")


@ref.PROPERTY
@given(st.integers(0, 2**32 - 1), st.integers(2, 9))
def test_next_token_score_is_the_mean_of_the_superdiagonal(seed, n):
    a = random_maps(np.random.default_rng(seed), (2,), n)
    for h in range(2):
        want = math.fsum(a[h, i, i + 1] for i in range(n - 1)) / (n - 1)
        assert next_token_score(a)[h] == pytest.approx(want, rel=1e-12)
    ref.assert_clear_error(lambda: next_token_score(np.ones((1, 1))), ValueError, r"at least 2")


@ref.PROPERTY
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 5))
def test_cosine_similarity_against_math(seed, m, d):
    r = np.random.default_rng(seed).standard_normal((m, d)) + 0.1
    s = cosine_similarity(r)
    for i in range(m):
        for j in range(m):
            dot = math.fsum(r[i, c] * r[j, c] for c in range(d))
            norms = math.sqrt(math.fsum(x * x for x in r[i]) * math.fsum(x * x for x in r[j]))
            assert s[i, j] == pytest.approx(dot / norms, abs=1e-12)
    ref.assert_clear_error(lambda: cosine_similarity([[0.0, 0.0], [1.0, 0.0]]), ValueError,
                           "all-zero row")


# --- the real model: the findings the notebook reports ---------------------------------------


@pytest.fixture(scope="module")
def model():
    from attn_core.model.pretrained import load_model

    return load_model()


def test_previous_token_head_follows_the_position_embeddings(model):
    text = "The animal crossed the road because it was tired."
    _, ids, _ = model.tokenize(text)
    n = len(ids)
    runs = {how: encoder_forward(with_positions(model.weights, n, how), ids).attentions
            for how in ("reverse", "zero")}
    plain = encoder_forward(model.weights, ids).attentions
    prev = lambda a: np.diagonal(a[0, 2], offset=-1).mean()  # noqa: E731 (layer 1, head 3)
    nxt = lambda a: np.diagonal(a[0, 2], offset=1).mean()  # noqa: E731
    assert prev(plain) > 0.9
    assert nxt(runs["reverse"]) > 0.9 and prev(runs["reverse"]) < 0.1
    assert prev(runs["zero"]) < 0.3 and nxt(runs["zero"]) < 0.3


def test_layer_one_cannot_tell_tired_from_wide(model):
    """In layer 1 the ratio of two keys' weights depends only on the query's and the two keys'
    own pieces and positions, so changing a third word leaves it unchanged."""
    a = model.run("The animal crossed the road because it was tired.")
    b = model.run("The animal crossed the road because it was wide.")
    it, animal, road = a.index("it"), a.index("animal"), a.index("road")
    ra = a.attentions[0, :, it, animal] / a.attentions[0, :, it, road]
    rb = b.attentions[0, :, it, animal] / b.attentions[0, :, it, road]
    np.testing.assert_allclose(ra, rb, rtol=1e-5)
    later = (a.attentions[1:, :, it, animal] / a.attentions[1:, :, it, road]) / \
        (b.attentions[1:, :, it, animal] / b.attentions[1:, :, it, road])
    assert np.abs(np.log(later)).max() > 0.1  # stacked layers do see the change


def test_mean_by_offset_against_a_loop():
    g = np.random.default_rng(SEED)
    s = g.standard_normal((6, 6))
    got = mean_by_offset(s)
    for k in range(6):
        vals = [s[i, i + k] for i in range(6 - k)]
        assert got[k] == pytest.approx(math.fsum(vals) / len(vals), rel=1e-12)
    assert mean_by_offset(s, max_offset=2).shape == (3,)
    ref.assert_clear_error(lambda: mean_by_offset(s, max_offset=6), ValueError, "at most 5")
    ref.assert_clear_error(lambda: mean_by_offset(s[:2]), ValueError, "square matrix")
