"""The positions explorer: what it shows is what each scheme computes (checked against
formulas written here), only the learned curve depends on where the query is, and bad
arguments are named."""

import math

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attn_core.explorers import positions_explorer  # noqa: E402
from attn_core.explorers.positions import ALIBI_HEADS  # noqa: E402
from attn_core.nn.checkpoint import load_checkpoint  # noqa: E402

import reference as ref  # noqa: E402

# The explorers' frames: make test runs these, make check leaves them out (make test-explorers).
pytestmark = pytest.mark.explorer


@pytest.fixture(scope="module")
def ckpt():
    return load_checkpoint()


@pytest.fixture
def ex(ckpt):
    return positions_explorer(ckpt)


def cos(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def expected(ex, ckpt, m, k, pair, base):
    wpe = np.asarray(ckpt.params["wpe"], float)
    d = wpe.shape[1]
    theta = np.array([base ** (-2 * c / d) for c in range(d // 2)])
    sin_cos = sum(math.cos(k * t) for t in theta) / (d / 2)  # |p_m| = |p_n| = sqrt(d/2)
    u = ex.content
    z = u[0::2] + 1j * u[1::2]
    rope_cos = float(np.sum(np.abs(z) ** 2 * np.cos(k * theta)) / np.sum(np.abs(z) ** 2))
    first_slope = 2.0 ** (-8.0 / ALIBI_HEADS)
    return {"sinusoidal": sin_cos, "learned": cos(wpe[m], wpe[m - k]), "rope": rope_cos,
            "alibi": -first_slope * k, "theta": theta[pair]}


@pytest.mark.parametrize(("m", "k", "pair", "base"), [(63, 8, 0, 10000.0), (30, 30, 3, 100.0),
                                                      (10, 0, 31, 10.0 ** 4.5)])
def test_shown_scores_are_each_schemes_formula(ex, ckpt, m, k, pair, base):
    c = ex.controls
    c["query"].value, c["base"].value, c["pair"].value = m, base, pair
    c["offset"].value = k
    shown, want = ex.shown(), expected(ex, ckpt, m, k, pair, base)
    for i, scheme in enumerate(("sinusoidal", "learned", "rope")):
        assert shown["marked"][scheme] == pytest.approx(want[scheme], abs=1e-12)
        assert shown["scores"][i] == pytest.approx(want[scheme], abs=5e-4)  # table: 3 decimals
    assert shown["marked"]["alibi"] == pytest.approx(want["alibi"], abs=1e-12)
    assert shown["pair"][0] == pytest.approx(want["theta"], rel=1e-3)
    # the two arrows of pair c are k * theta_c apart
    (qx, qy), (kx, ky) = shown["arrows"]
    gap = math.atan2(qy, qx) - math.atan2(ky, kx)
    assert math.cos(gap) == pytest.approx(math.cos(k * want["theta"]), abs=1e-12)
    assert math.sin(gap) == pytest.approx(math.sin(k * want["theta"]), abs=1e-12)
    assert ex.errors == []


def test_only_the_learned_curve_depends_on_the_query_position(ex):
    c = ex.controls
    before = ex.shown()["curves"]
    c["query"].value = 40
    after = ex.shown()["curves"]
    for scheme in ("sinusoidal", "rope", "alibi"):
        for b, a in zip(before[scheme], after[scheme]):
            np.testing.assert_allclose(a[:41], b[:41], rtol=0, atol=1e-12)
            assert np.isnan(a[41:]).all()  # no key further back than position 0
    assert not np.allclose(after["learned"][0][:41], before["learned"][0][:41], atol=1e-3)


def test_the_offset_never_reaches_before_position_0(ex):
    c = ex.controls
    c["offset"].value = 50
    c["query"].value = 20
    assert c["offset"].max == 20 and c["offset"].value == 20
    assert ex.shown()["marked"]["alibi"] == pytest.approx(-20 * 2.0 ** (-8 / ALIBI_HEADS))


def test_a_slider_move_redraws_only_the_changing_artists(ex):
    full = ex.canvas.full_draws
    png = ex.png
    ex.controls["offset"].value = 20
    assert ex.canvas.full_draws == full and ex.png != png


@pytest.mark.parametrize(("kwargs", "exc", "pattern"), [
    ({"offset": 70}, ValueError, r"offset must be from 0 to 63"),
    ({"query": 10, "offset": 11}, ValueError, r"offset must be from 0 to 10"),
    ({"query": 64}, ValueError, r"query must be from 0 to 63"),
    ({"pair": 32}, ValueError, r"pair must be from 0 to 31"),
    ({"base": 1.0}, ValueError, r"base must be from 10 to 1e\+05"),
    ({"offset": 2.5}, TypeError, r"offset must be an int"),
])
def test_bad_arguments_are_named(ckpt, kwargs, exc, pattern):
    ref.assert_clear_error(lambda: positions_explorer(ckpt, **kwargs), exc, pattern)


def test_no_readout_shows_a_negative_zero(ex):
    """At offset 0 every ALiBi bias is zero; a zero never prints with a minus sign (issue 31:
    the read-out showed -0.000)."""
    ex.controls["offset"].value = 0
    assert "-0.0" not in ex.readout.value and ">-0<" not in ex.readout.value
    from attn_core.explorers.base import _fmt
    assert [_fmt(v) for v in (-0.0, -1e-9, 0.0, -0.0004, -0.0006)] == [
        "0.000", "0.000", "0.000", "0.000", "-0.001"]


def _rotated(u, position, theta):
    """``u`` with pair ``c`` turned by ``position * theta[c]`` (interleaved pairs), a loop."""
    out = []
    for c, t in enumerate(theta):
        x, y, a = u[2 * c], u[2 * c + 1], position * t
        out += [x * math.cos(a) - y * math.sin(a), x * math.sin(a) + y * math.cos(a)]
    return np.array(out)


def test_the_readout_numbers_follow_every_control_change(ex, ckpt):
    """Issue 33: each control in turn through its ends; after every change the four panels'
    whole curves (every ALiBi head), their markers, both tables and the pair's two arrows are
    those of the controls' values now, from formulas written here (a read-out or an overlay
    one change behind fails)."""
    wpe = np.asarray(ckpt.params["wpe"], float)
    n_ctx, d = wpe.shape
    c = ex.controls
    moves = ([("offset", k) for k in (0, 63, 20)] + [("query", m) for m in (63, 5, 0, 40)]
             + [("offset", k) for k in (40, 1)] + [("pair", p) for p in (d // 2 - 1, 0, 7)]
             + [("base", b) for b in (10.0, 1e5, 10 ** 2.25)] + [("offset", 33)])
    for name, value in moves:
        c[name].value = value
        k, m, pair, base = (c[n].value for n in ("offset", "query", "pair", "base"))
        assert name != "offset" or k == min(value, m)
        theta = [base ** (-2 * i / d) for i in range(d // 2)]
        pe = [np.array([f(p * t) for t in theta for f in (math.sin, math.cos)])
              for p in range(n_ctx)]
        turned = [_rotated(ex.content, p, theta) for p in range(n_ctx)]
        want = {"sinusoidal": [cos(pe[m], pe[m - j]) for j in range(m + 1)],
                "learned": [cos(wpe[m], wpe[m - j]) for j in range(m + 1)],
                "rope": [cos(turned[m], turned[m - j]) for j in range(m + 1)]}
        slopes = [2.0 ** (-8.0 * (h + 1) / ALIBI_HEADS) for h in range(ALIBI_HEADS)]
        alibi = [[-s * j for j in range(m + 1)] for s in slopes]
        shown, where = ex.shown(), (name, value)
        for scheme, ys in want.items():
            line, = shown["curves"][scheme]
            np.testing.assert_allclose(line[:m + 1], ys, atol=1e-9, err_msg=str(where))
            assert np.isnan(line[m + 1:]).all(), where
            assert shown["marked"][scheme] == pytest.approx(ys[k], abs=1e-9), where
        assert len(shown["curves"]["alibi"]) == ALIBI_HEADS
        for line, ys in zip(shown["curves"]["alibi"], alibi):
            np.testing.assert_allclose(line[:m + 1], ys, atol=1e-12, err_msg=str(where))
        assert shown["marked"]["alibi"] == pytest.approx(alibi[0][k], abs=1e-12), where
        np.testing.assert_allclose(shown["scores"], [want["sinusoidal"][k], want["learned"][k],
                                                     want["rope"][k], alibi[0][k], alibi[-1][k]],
                                   atol=5e-4, err_msg=str(where))
        angle = math.degrees(k * theta[pair]) % 360.0
        np.testing.assert_allclose(shown["pair"], [theta[pair], angle], rtol=1e-3,
                                   atol=1e-3 * (angle == 0), err_msg=str(where))
        for arrow, p in zip(shown["arrows"], (m, m - k)):
            v = turned[p][2 * pair:2 * pair + 2]
            np.testing.assert_allclose(arrow, v / np.linalg.norm(v), atol=1e-9,
                                       err_msg=str(where))
    assert ex.errors == []
