"""The checks of notebook 12: right answers pass, typical slips get their hint, none leaks."""

import numpy as np
import pytest

from attn_core.checks import learning as L
from attn_core.training import init_gradient_norms

import reference as ref


def loop_softmax_backward(p, g):
    """An independent reference: the Jacobian built entry by entry, row by row."""
    p, g = np.asarray(p, float), np.asarray(g, float)
    out = np.zeros_like(p)
    for idx in np.ndindex(p.shape[:-1]):
        row, up = p[idx], g[idx]
        n = row.size
        for j in range(n):
            out[idx + (j,)] = sum(up[i] * row[i] * ((i == j) - row[j]) for i in range(n))
    return out


def test_a_right_softmax_backward_passes():
    assert L.check_my_softmax_backward(loop_softmax_backward)


@pytest.mark.parametrize(("fn", "words"), [
    (lambda p, g: p * g, "did not subtract"),
    (lambda p, g: -loop_softmax_backward(p, g), "sign is flipped"),
    (lambda p, g: p * (g - (p * g).sum()), "last axis"),
    (lambda p, g: p[..., :1], "shape"),
    (lambda p, g: 1 / 0, "raised ZeroDivisionError"),
    (3.0, "function itself"),
])
def test_typical_slips_get_their_hint(fn, words):
    feedback = L.check_my_softmax_backward(fn)
    ref.assert_not_yet(feedback)
    assert words in feedback.message


def test_unanswered():
    ref.assert_unanswered(L.check_my_softmax_backward(None))
    ref.assert_unanswered(L.check_grad_v(None, *np.ones((4, 3, 2))))


def test_grad_v_against_a_loop():
    g = np.random.default_rng(0)
    q, k, v, up = g.standard_normal((4, 3, 2))
    s = q @ k.T / np.sqrt(2)
    p = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    expected = np.array([[sum(p[i, j] * up[i, c] for i in range(3)) for c in range(2)]
                         for j in range(3)])
    assert L.check_grad_v(expected, q, k, v, up)
    wrong = L.check_grad_v(p @ up, q, k, v, up)
    ref.assert_not_yet(wrong)
    assert "transpose" in wrong.message
    for number in ref.numbers_in(wrong.message):
        assert not np.isclose(expected, number, atol=1e-3).any()


def test_what_shrinks_follows_the_measured_norms():
    scaled = init_gradient_norms("lookup", d_k=256, scaled=True, seeds=(0, 1, 2))
    raw = init_gradient_norms("lookup", d_k=256, scaled=False, seeds=(0, 1, 2))
    smaller = {name: raw[name].mean() < scaled[name].mean() for name in ("scores", "q", "W_q")}
    # what the course measured: only the scores' gradient is smaller without scaling
    assert smaller == {"scores": True, "q": False, "W_q": False}
    assert L.check_what_shrinks("a")
    for wrong in "bcd":
        ref.assert_not_yet(L.check_what_shrinks(wrong))


def test_order_question():
    """The letter the check expects is what happens: with positional vectors that stay in
    place, permuting x changes the output by more than a permutation (a loop reference)."""
    g = np.random.default_rng(3)
    x, pos = g.standard_normal((5, 4)), g.standard_normal((5, 4))
    w_q, w_k, w_v = (g.standard_normal((4, 4)) for _ in range(3))

    def one_head(inputs):  # a plain loop: softmax over keys of q_i . k_j / 2
        q, k, v = inputs @ w_q, inputs @ w_k, inputs @ w_v
        out = np.zeros_like(v)
        for i in range(len(q)):
            e = np.exp([q[i] @ k[j] / 2.0 for j in range(len(k))])
            out[i] = (e / e.sum()) @ v
        return out

    perm = np.array([3, 0, 4, 1, 2])
    assert np.allclose(one_head(x[perm]), one_head(x)[perm])  # no positions: option b
    assert not np.allclose(one_head(x[perm] + pos), one_head(x + pos)[perm])  # with: c
    assert L.check_order_question("c")
    for wrong in "abd":
        ref.assert_not_yet(L.check_order_question(wrong))
    ref.assert_not_yet(L.check_order_question("z"))
