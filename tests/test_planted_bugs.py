"""Tests that fail on the realistic bugs an audit planted in the exercise checks, the figures'
marker, the GPT's training and head finding (issue 33): tolerances pinned by answers just
outside and just inside them, and each check's cases able to tell its misconceptions apart on
the inputs where the misconception shows (positions not starting at 0, a row of truly tiny
variance, two different layer-norm gains).

Each test names the planted bug it catches; it was planted by hand, seen to fail, reverted.
"""

import numpy as np
import pytest

import attn_core.checks.gpt as G
import attn_core.checks.induction as CI
import attn_core.checks.practice_positions as PP
from attn_core.checks._base import is_close
from attn_core.induction import induction_score
from attn_core.positions import frequencies

from reference import assert_not_yet


def captured_cases(monkeypatch, module, check, fn):
    """The cases and mistakes ``check`` hands to ``judge`` (``fn`` is the learner's)."""
    seen = {}
    real = module.judge

    def spy(fn, cases, mistakes, **kwargs):
        seen["cases"], seen["mistakes"] = cases, mistakes
        return real(fn, cases, mistakes, **kwargs)

    monkeypatch.setattr(module, "judge", spy)
    check(fn)
    return seen["cases"], seen["mistakes"]


# --- is_close: its default tolerance (bug: loosened 10x) -------------------------------------

def test_is_close_default_tolerance_is_a_hundredth():
    assert is_close(0.5 + 0.0099, 0.5) and is_close(0.5 - 0.0099, 0.5)  # just inside
    assert not is_close(0.5 + 0.0101, 0.5) and not is_close(0.5 - 0.0101, 0.5)  # just outside
    assert not is_close(0.5 + 0.05, 0.5)


# --- check_my_induction_score: tolerance 1e-6 (bug: 1e-2) and the float16 answer -------------

def _off_by(delta):
    return lambda w, ids: float(induction_score(w, ids)) + delta


def test_my_induction_score_tolerance_is_pinned_just_inside_and_outside():
    assert CI.check_my_induction_score(_off_by(5e-7))
    assert CI.check_my_induction_score(_off_by(-5e-7))
    assert_not_yet(CI.check_my_induction_score(_off_by(3e-6)))
    assert_not_yet(CI.check_my_induction_score(_off_by(-3e-3)))


def test_my_induction_score_in_float16_names_the_precision():
    def half(w, ids):
        return induction_score(w.astype(np.float16), ids).astype(np.float16)[()]

    feedback = CI.check_my_induction_score(half)
    assert_not_yet(feedback)
    assert "float16" in feedback.message and "precision" in feedback.message
    assert "differs from the induction score" not in feedback.message


# --- check_which_ablation: "both equally" needs both conditions (bug: either) ----------------

@pytest.mark.parametrize("table, expected", [
    # both rise by more than half a nat, but one three times the other: not "equally"
    ({"none": (0.3, 0.9), "prev": (3.3, 0.1), "control": (1.3, 0.5)}, "a"),
    # rises within a factor 1.5 of each other, but only one above half a nat
    ({"none": (0.3, 0.9), "prev": (0.9, 0.4), "control": (0.75, 0.6)}, "a"),
    ({"none": (0.3, 0.9), "prev": (0.75, 0.6), "control": (0.9, 0.4)}, "b"),
    # both, and within 1.5x: equally
    ({"none": (0.3, 0.9), "prev": (2.3, 0.1), "control": (1.8, 0.2)}, "d"),
])
def test_which_ablation_both_equally_needs_both_rises_big_and_close(table, expected):
    assert CI.check_which_ablation(expected, table)
    for other in set(CI.ABLATION_OPTIONS) - {expected}:
        assert_not_yet(CI.check_which_ablation(other, table))


# --- check_layer_norm_backward: a truly tiny-variance row (bug: none) --------------------------

def _misplaced_eps(x, gamma, eps, grad_y):
    """The backward pass with eps outside the square root: sqrt(var) + eps."""
    mu = x.mean(axis=-1, keepdims=True)
    sd = np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True)) + eps
    z = (x - mu) / sd
    g = grad_y * gamma
    return (g - g.mean(-1, keepdims=True) - z * (g * z).mean(-1, keepdims=True)) / sd


def test_layer_norm_backward_has_a_row_of_variance_below_eps(monkeypatch):
    cases, _ = captured_cases(monkeypatch, G, G.check_layer_norm_backward, _misplaced_eps)
    variances = np.concatenate([np.ravel(c.args[0].var(axis=-1)) for c in cases])
    assert variances.min() < G.EPS / 5, variances.min()  # truly tiny: eps dominates it
    assert_not_yet(G.check_layer_norm_backward(_misplaced_eps))
    no_eps = G.check_layer_norm_backward(lambda *a: G._ln_backward(*a, use_eps=False))
    assert_not_yet(no_eps)
    assert "eps is missing" in no_eps.message


# --- check_block: the two layer norms differ (bug: both gains 1) --------------------------------

def _swapped(x, ln1, attn, ln2, mlp):
    h = x + attn(ln2(x))
    return h + mlp(ln1(h))


def test_block_check_tells_the_two_layer_norms_apart(monkeypatch):
    cases, _ = captured_cases(monkeypatch, G, G.check_block, _swapped)
    for case in cases:
        x, ln1, _, ln2, _ = case.args
        assert not np.allclose(ln1(x), ln2(x), rtol=1e-3)  # gains and shifts of their own
        # the shifts cancel in a difference: what is left is each norm's gain, not 1 and
        # not the other's
        other = x[..., ::-1, :]  # other rows, other normalised values
        d1, d2 = ln1(x) - ln1(other), ln2(x) - ln2(other)
        assert not np.allclose(d1, d2, rtol=1e-3)
        ones, zeros = np.ones(x.shape[-1]), np.zeros(x.shape[-1])
        z = G.layer_norm(x, ones, zeros, G.EPS) - G.layer_norm(other, ones, zeros, G.EPS)
        assert not np.allclose(d1, z, rtol=1e-3) and not np.allclose(d2, z, rtol=1e-3)
    assert_not_yet(G.check_block(_swapped))


# --- check_rotary_attention: positions that are not 0..n-1 first (bug: first case at 0..n-1) --

def test_rotary_attention_first_case_reads_the_positions(monkeypatch):
    def arange_positions(q, k, v, positions, base=10000.0):
        return PP._rotary(q, k, v, positions, base, at="arange")

    cases, _ = captured_cases(monkeypatch, PP, PP.check_rotary_attention, arange_positions)
    first = cases[0]
    positions = np.asarray(first.args[3])
    assert positions.size > 1 and not np.array_equal(positions, np.arange(positions.size))
    assert not np.allclose(arange_positions(*first.args), first.expected)
    feedback = PP.check_rotary_attention(arange_positions)
    assert_not_yet(feedback)
    assert "use the positions passed in" in feedback.message
    assert first.label in feedback.message  # named on the first case already


def test_every_rotary_misconception_shows_on_the_first_case(monkeypatch):
    cases, mistakes = captured_cases(monkeypatch, PP, PP.check_rotary_attention,
                                     lambda *a: None)
    first = cases[0]
    for mistake in mistakes:
        assert not np.allclose(mistake.variant(*first.args), first.expected), mistake.hint


# --- check_rope_wavelength: no "next pair" for the last pair (bug: offered) --------------------

@pytest.mark.parametrize("d", [4, 8, 16])
def test_rope_wavelength_of_the_last_pair_has_no_next_pair_slip(d):
    last = d // 2 - 1
    theta = frequencies(d, 10000.0)
    right = 2 * np.pi / theta[last]
    assert PP.check_rope_wavelength(round(right, 1), last, d)
    beyond = 2 * np.pi / 10000.0 ** (-2 * (last + 1) / d)  # a pair that does not exist
    feedback = PP.check_rope_wavelength(round(beyond, 1), last, d)
    assert_not_yet(feedback)
    assert "next pair" not in feedback.message
    below = PP.check_rope_wavelength(round(2 * np.pi / theta[last - 1], 1), last, d)
    assert_not_yet(below)
    assert f"pair {last - 1}" in below.message
    if last >= 1:  # the next-pair slip is named where there is a next pair
        nxt = PP.check_rope_wavelength(round(2 * np.pi / theta[last], 1), last - 1, d)
        assert "next pair" in nxt.message


# --- a figure's marker on a curve given with unsorted x (bug: interpolated unsorted) ----------

@pytest.mark.parametrize("logx", [False, True])
def test_the_marker_sits_on_the_curve_whatever_the_order_of_x(logx):
    import matplotlib.pyplot as plt

    from attn_core.figures import line_with_marker, update_marker

    x = np.array([16.0, 1.0, 64.0, 4.0, 32.0])  # not sorted
    y = np.array([5.0, 1.0, 2.0, 3.0, 7.0])
    order = np.argsort(x)
    art = line_with_marker(x, y, 8.0, logx=logx)
    try:
        for cx in (8.0, 2.0, 48.0, 16.0):
            update_marker(art, cx)
            u, ux = (np.log(x[order]), np.log(cx)) if logx else (x[order], cx)
            # the curve between its two neighbouring points, by hand
            k = int(np.searchsorted(u, ux))
            t = (ux - u[k - 1]) / (u[k] - u[k - 1])
            want = (1 - t) * y[order][k - 1] + t * y[order][k]
            assert art.marker.get_ydata()[0] == pytest.approx(want, rel=1e-12), cx
    finally:
        plt.close(art.ax.figure)


# --- clip_grad_norm: only a norm above the limit is scaled (bug: every one, to the limit) ------

def test_clip_grad_norm_leaves_a_small_gradient_alone_and_scales_a_large_one_to_the_limit():
    from attn_core.nn import clip_grad_norm

    small = {"a": np.array([0.3, 0.4]), "b": np.array([[0.0]])}  # norm 0.5
    out, norm = clip_grad_norm(small, 1.0)
    assert norm == pytest.approx(0.5)
    for k in small:
        np.testing.assert_array_equal(out[k], small[k])  # factor exactly 1
    large = {"a": np.array([3.0, 4.0]), "b": np.array([[12.0]])}  # norm 13
    out, norm = clip_grad_norm(large, 1.0)
    assert norm == pytest.approx(13.0)
    total = np.sqrt(sum(float((g ** 2).sum()) for g in out.values()))
    assert total == pytest.approx(1.0, rel=1e-6)
    np.testing.assert_allclose(out["a"] / large["a"], out["b"].ravel()[0] / 12.0)  # one factor


# --- find_heads: the control head is another head (bug: the previous-token head itself) -------

def test_find_heads_control_is_the_lowest_other_layer1_head():
    from attn_core.nn.induction_run import find_heads

    prev = np.array([[0.2, 0.9, 0.05, 0.4], [0.1, 0.1, 0.1, 0.1]])
    ind = np.array([[0.0, 0.1, 0.2, 0.3], [0.1, 0.8, 0.3, 0.2]])
    assert find_heads(prev, ind) == {"prev": (0, 1), "induction": (1, 1), "control": (0, 2)}
    tied = np.array([[0.5, 0.5], [0.1, 0.2]])  # a tie: still two different heads
    heads = find_heads(tied, ind[:, :2])
    assert heads["prev"] != heads["control"]
    with pytest.raises(ValueError, match="two heads"):
        find_heads(np.array([[0.9], [0.1]]), np.array([[0.1], [0.8]]))
    with pytest.raises(ValueError, match=r"prev and ind must be .*\(layers, heads\)"):
        find_heads(np.ones(4), np.ones((2, 2)))
