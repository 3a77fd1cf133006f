"""The code-exercise checks (attn_core.checks.practice): catalogues of wrong implementations.

For every check: each wrong implementation below makes one known mistake, written as a
learner would write it (not by calling the check's own variants), and must be refused with
that mistake's hint; at least two right implementations written differently (loops, einsum,
matrix products) must be accepted; the stub gets "no answer yet"; an exception inside the
learner's function becomes feedback naming the input and the line.
"""

import math

import numpy as np
import pytest

from attn_core.checks import practice
from attn_core.checks._base import NO_ANSWER, NOT_YET, RIGHT

T = lambda x: np.swapaxes(x, -1, -2)  # noqa: E731  (the learner's transpose of the last two axes)


def stable(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def loop_softmax_rows(s):
    """Softmax of the last axis with Python loops and math.exp."""
    s = np.asarray(s, dtype=float)
    out = np.empty_like(s)
    for idx in np.ndindex(s.shape[:-1]):
        row = s[idx]
        if np.all(np.isneginf(row)):
            out[idx] = 0.0
            continue
        m = max(row)
        e = [math.exp(x - m) for x in row]
        out[idx] = [x / sum(e) for x in e]
    return out


def stub(*args, **kwargs):
    raise NotImplementedError("write your function here")


def ellipsis_stub(*args, **kwargs):
    ...


# --- scores ----------------------------------------------------------------------------------

def scores_loops(q, k, scaled=True):
    q, k = np.asarray(q), np.asarray(k)
    out = np.empty((*np.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], k.shape[-2]))
    d = q.shape[-1]
    for idx in np.ndindex(out.shape[:-2]):
        for i in range(q.shape[-2]):
            for j in range(k.shape[-2]):
                dot = sum(q[idx][i][c] * k[idx][j][c] for c in range(d))
                out[idx][i, j] = dot / math.sqrt(d) if scaled else dot
    return out


SCORES_RIGHT = [lambda q, k: q @ T(k) / np.sqrt(q.shape[-1]),
                lambda q, k: np.einsum("...id,...jd->...ij", q, k) / q.shape[-1] ** 0.5,
                scores_loops]
SCORES_WRONG = {
    "not scaled yet": lambda q, k: q @ T(k),
    "instead of sqrt(d_k)": lambda q, k: q @ T(k) / q.shape[-1],
    "you multiplied by sqrt(d_k)": lambda q, k: q @ T(k) * np.sqrt(q.shape[-1]),
    "not the number of tokens": lambda q, k: q @ T(k) / np.sqrt(k.shape[-2]),
    "rows and columns are swapped": lambda q, k: k @ T(q) / np.sqrt(q.shape[-1]),
    "entry by entry": lambda q, k: q * k / np.sqrt(q.shape[-1]),
    "transpose must swap only the last two axes": lambda q, k: q @ k.T / np.sqrt(q.shape[-1]),
}
RAW_RIGHT = [lambda q, k: q @ T(k), lambda q, k: scores_loops(q, k, scaled=False),
             lambda q, k: np.einsum("...ic,...jc->...ij", q, k)]
RAW_WRONG = {
    "already scaled": lambda q, k: q @ T(k) / np.sqrt(q.shape[-1]),
    "rows and columns are swapped": lambda q, k: k @ T(q),
    "entry by entry": lambda q, k: q * k,
}


# --- softmax ---------------------------------------------------------------------------------

def softmax_loops(x, axis=-1):
    moved = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    return np.moveaxis(loop_softmax_rows(moved), -1, axis)


def softmax_logsumexp(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    lse = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    return np.exp(x - lse)


SOFTMAX_RIGHT = [stable, softmax_loops, softmax_logsumexp]
SOFTMAX_WRONG = {
    "ignores `axis`": lambda x, axis=-1: stable(x, -1),
    "wrong axis": lambda x, axis=-1: stable(x, 0),
    "whole array": lambda x, axis=-1: np.exp(x - x.max()) / np.exp(x - x.max()).sum(),
    "exponentiate every score first": lambda x, axis=-1: x / x.sum(axis=axis, keepdims=True),
    "not normalised": lambda x, axis=-1: np.exp(x - x.max(axis=axis, keepdims=True)),
    "maxima do not line up": lambda x, axis=-1: (
        np.exp(x - x.max(axis=axis)[..., None]) / np.exp(x - x.max(axis=axis)[..., None])
        .sum(axis=axis, keepdims=True)),
    "sums do not line up": lambda x, axis=-1: np.exp(x) / np.exp(x).sum(axis=axis)[..., None],
    "exp overflows": lambda x, axis=-1: np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True),
}


# --- attention -------------------------------------------------------------------------------

def attention_einsum(q, k, v, scale=None):
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    return np.einsum("...ij,...jd->...id", stable(np.einsum("...id,...jd->...ij", q, k) * scale), v)


def attention_loops(q, k, v, scale=None):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    out = np.zeros((*q.shape[:-1], v.shape[-1]))
    for idx in np.ndindex(q.shape[:-2]):
        for i in range(q.shape[-2]):
            s = [scale * float(q[idx][i] @ k[idx][j]) for j in range(k.shape[-2])]
            w = loop_softmax_rows(np.array(s))
            out[idx][i] = sum(w[j] * v[idx][j] for j in range(k.shape[-2]))
    return out


def attention_matmul(q, k, v, scale=None):
    s = q @ T(k) * (scale if scale is not None else q.shape[-1] ** -0.5)
    return stable(s) @ v


ATTENTION_RIGHT = [attention_matmul, attention_einsum, attention_loops]


def _att(q, k, v, scale=None, *, factor=None, axis=-1, mix=lambda w, v: w @ v):
    s = q @ T(k) * ((scale if scale is not None else 1 / np.sqrt(q.shape[-1]))
                    if factor is None else factor(q))
    return mix(stable(s, axis), v)


ATTENTION_WRONG = {
    "you returned the weights": lambda q, k, v, scale=None: _att(q, k, v, scale,
                                                                 mix=lambda w, v: w),
    "not scaled": lambda q, k, v, scale=None: stable(q @ T(k)) @ v,
    "1/d_k instead of 1/sqrt(d_k)": lambda q, k, v, scale=None: _att(
        q, k, v, scale if scale is not None else 1 / q.shape[-1]),
    "ignores `scale`": lambda q, k, v, scale=None: _att(q, k, v),
    "you divided by `scale`": lambda q, k, v, scale=None: stable(
        q @ T(k) / (scale if scale is not None else np.sqrt(q.shape[-1]))) @ v,
    "wrong axis": lambda q, k, v, scale=None: _att(q, k, v, scale, axis=-2),
    "weights are transposed": lambda q, k, v, scale=None: _att(q, k, v, scale,
                                                               mix=lambda w, v: T(w) @ v),
    "softmax first": lambda q, k, v, scale=None: (q @ T(k) * (
        scale if scale is not None else 1 / np.sqrt(q.shape[-1]))) @ v,
    "exp overflows": lambda q, k, v, scale=None: (
        lambda e: e / e.sum(-1, keepdims=True))(np.exp(q @ T(k) * (
            scale if scale is not None else 1 / np.sqrt(q.shape[-1])))) @ v,
    "returns a tuple": lambda q, k, v, scale=None: (attention_matmul(q, k, v, scale),
                                                    stable(q @ T(k))),
}


# --- masked attention ------------------------------------------------------------------------

def masked_where(q, k, v, mask):
    s = np.where(mask, q @ T(k) / np.sqrt(q.shape[-1]), -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)  # a row with no allowed key: no shift
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0) @ v


def masked_loops(q, k, v, mask):
    d = q.shape[-1]
    s = np.einsum("...ic,...jc->...ij", q, k) / math.sqrt(d)
    s = np.where(np.broadcast_to(mask, s.shape), s, -np.inf)
    return np.einsum("...ij,...jd->...id", loop_softmax_rows(s), v)


def masked_select(q, k, v, mask):
    """Row by row, a softmax over the allowed keys only (boolean indexing)."""
    s = q @ T(k) / np.sqrt(q.shape[-1])
    mask = np.broadcast_to(mask, s.shape)
    out = np.zeros((*s.shape[:-1], v.shape[-1]))
    for idx in np.ndindex(s.shape[:-1]):
        allowed = mask[idx]
        if allowed.any():
            out[idx] = stable(s[idx][allowed]) @ np.broadcast_to(v, (*s.shape[:-2], *v.shape[-2:]))[
                idx[:-1]][allowed]
    return out


MASKED_RIGHT = [masked_where, masked_loops, masked_select]


def _masked(q, k, v, mask, fill=-np.inf, scale=True):
    s = q @ T(k) / (np.sqrt(q.shape[-1]) if scale else 1.0)
    return stable(np.where(mask, s, fill)) @ v


MASKED_WRONG = {
    "after the softmax": lambda q, k, v, mask: (stable(q @ T(k) / np.sqrt(q.shape[-1])) * mask) @ v,
    "wrong way round": lambda q, k, v, mask: _masked(q, k, v, ~mask),
    "exp(0) = 1": lambda q, k, v, mask: stable(q @ T(k) / np.sqrt(q.shape[-1]) * mask) @ v,
    "mask is transposed": lambda q, k, v, mask: _masked(q, k, v, T(mask)),
    "not spread its weight evenly": lambda q, k, v, mask: _masked(q, k, v, mask, fill=-1e9),
    "not scaled": lambda q, k, v, mask: masked_where(q * np.sqrt(q.shape[-1]), k, v, mask),
    "you returned the weights": lambda q, k, v, mask: stable(np.where(
        mask, q @ T(k) / np.sqrt(q.shape[-1]), -1e30)),
    "mask was ignored": lambda q, k, v, mask: stable(q @ T(k) / np.sqrt(q.shape[-1])) @ v,
    "divides 0 by 0": lambda q, k, v, mask: _masked(q, k, v, mask),
    "exp overflows": lambda q, k, v, mask: (lambda e: e / e.sum(-1, keepdims=True))(
        np.exp(np.where(mask, q @ T(k) / np.sqrt(q.shape[-1]), -np.inf))) @ v,
}


# --- sliding-window mask ---------------------------------------------------------------------

def window_loops(n, window):
    return [[0 <= i - j < window for j in range(n)] for i in range(n)]


def window_tri(n, window):
    return np.tril(np.ones((n, n), dtype=bool)) & ~np.tril(np.ones((n, n), dtype=bool), -window)


WINDOW_RIGHT = [window_loops, window_tri,
                lambda n, window: (np.subtract.outer(np.arange(n), np.arange(n)) >= 0)
                & (np.subtract.outer(np.arange(n), np.arange(n)) < window)]


def _ij(n):
    return np.arange(n)[:, None], np.arange(n)[None, :]


WINDOW_WRONG = {
    "wrong way round": lambda n, w: (lambda i, j: (j > i) | (i - j >= w))(*_ij(n)),
    "keys after them": lambda n, w: (lambda i, j: abs(i - j) < w)(*_ij(n)),
    "rows and columns are swapped": lambda n, w: (lambda i, j: (j >= i) & (j - i < w))(*_ij(n)),
    "yours sees one more": lambda n, w: (lambda i, j: (j <= i) & (i - j <= w))(*_ij(n)),
    "yours sees one fewer": lambda n, w: (lambda i, j: (j <= i) & (i - j < w - 1))(*_ij(n)),
    "see itself too": lambda n, w: (lambda i, j: (j < i) & (i - j <= w))(*_ij(n)),
    "plain causal mask": lambda n, w: np.tril(np.ones((n, n), dtype=bool)),
}


# --- multi-head attention --------------------------------------------------------------------

def mha_reshape(x, w_q, w_k, w_v, w_o, h):
    *lead, n, _ = x.shape

    def split(y):
        return np.swapaxes(y.reshape(*lead, n, h, y.shape[-1] // h), -3, -2)  # (..., h, n, d_k)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    heads = stable(q @ T(k) / np.sqrt(q.shape[-1])) @ v  # (..., h, n, d_v)
    return np.swapaxes(heads, -3, -2).reshape(*lead, n, -1) @ w_o  # (..., n, h * d_v)


def mha_loop_heads(x, w_q, w_k, w_v, w_o, h):
    d_k = w_q.shape[1] // h
    outs = []
    for i in range(h):
        cols = slice(i * d_k, (i + 1) * d_k)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        outs.append(stable(q @ T(k) / math.sqrt(d_k)) @ v)
    return np.concatenate(outs, axis=-1) @ w_o


def mha_einsum(x, w_q, w_k, w_v, w_o, h):
    q, k, v = (np.einsum("...nd,de->...ne", x, w) for w in (w_q, w_k, w_v))
    q, k, v = (y.reshape(*y.shape[:-1], h, -1) for y in (q, k, v))  # (..., n, h, d_k)
    s = np.einsum("...ihc,...jhc->...hij", q, k) / np.sqrt(q.shape[-1])
    heads = np.einsum("...hij,...jhc->...ihc", stable(s), v)
    return heads.reshape(*heads.shape[:-2], -1) @ w_o


MHA_RIGHT = [mha_reshape, mha_loop_heads, mha_einsum]


def _mha(x, w_q, w_k, w_v, w_o, h, *, project=True, bad_split=False, bad_merge=False,
         scale_by=None, axis=-1, transpose=False, heads=None):
    *lead, n, _ = x.shape
    h = h if heads is None else heads

    def split(y):
        if bad_split:
            return y.reshape(*lead, h, n, -1)
        return np.swapaxes(y.reshape(*lead, n, h, -1), -3, -2)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    d = q.shape[-1] if scale_by is None else scale_by(x, q)
    w = stable(q @ T(k) / np.sqrt(d), axis)
    o = (T(w) if transpose else w) @ v
    merged = o.reshape(*lead, n, -1) if bad_merge else np.swapaxes(o, -3, -2).reshape(*lead, n, -1)
    return merged @ w_o if project else merged


MHA_WRONG = {
    "W_o is forgotten": lambda *a: _mha(*a, project=False),
    "split along the wrong axis: cut the columns": lambda *a: _mha(*a, bad_split=True),
    "merged the same way": lambda *a: _mha(*a, bad_split=True, bad_merge=True),
    "merged in the wrong order": lambda *a: _mha(*a, bad_merge=True),
    "sqrt(d_model)": lambda *a: _mha(*a, scale_by=lambda x, q: x.shape[-1]),
    "not scaled": lambda *a: _mha(*a, scale_by=lambda x, q: 1.0),
    "wrong axis": lambda *a: _mha(*a, axis=-2),
    "weights are transposed": lambda *a: _mha(*a, transpose=True),
    "one head over all the columns": lambda *a: _mha(*a[:5], 1),
}


# --- online softmax --------------------------------------------------------------------------

def online_loop(q, k, v, block_size):
    s_all = q @ T(k) / np.sqrt(q.shape[-1])
    m = np.full(s_all.shape[:-1] + (1,), -np.inf)
    l = np.zeros_like(m)
    acc = np.zeros(s_all.shape[:-1] + (v.shape[-1],))
    for j in range(0, k.shape[-2], block_size):
        s = s_all[..., j:j + block_size]
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        p = np.exp(s - m_new)
        l = l * np.exp(m - m_new) + p.sum(axis=-1, keepdims=True)
        acc = acc * np.exp(m - m_new) + p @ v[..., j:j + block_size, :]
        m = m_new
    return acc / l


def online_per_row(q, k, v, block_size):
    """One query row at a time, plain Python floats for m and l."""
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    out = np.zeros((*q.shape[:-1], v.shape[-1]))
    for idx in np.ndindex(q.shape[:-2]):
        for i in range(q.shape[-2]):
            m, l, acc = -math.inf, 0.0, np.zeros(v.shape[-1])
            for start in range(0, k.shape[-2], block_size):
                keys, vals = k[idx][start:start + block_size], v[idx][start:start + block_size]
                s = keys @ q[idx][i] / math.sqrt(q.shape[-1])
                m_new = max(m, float(s.max()))
                c = math.exp(m - m_new)
                p = np.exp(s - m_new)
                l, acc, m = l * c + float(p.sum()), acc * c + p @ vals, m_new
            out[idx][i] = acc / l
    return out


ONLINE_RIGHT = [online_loop, online_per_row]


def _online(q, k, v, b, *, fix_l=True, fix_acc=True, flip=False, divide=True, drop=False,
            scaled=True, shift=True):
    s_all = q @ T(k) / (np.sqrt(q.shape[-1]) if scaled else 1)
    m = np.full(s_all.shape[:-1] + (1,), -np.inf)
    l, acc = np.zeros_like(m), np.zeros(s_all.shape[:-1] + (v.shape[-1],))
    n_k = k.shape[-2]
    for j in range(0, (n_k // b) * b if drop else n_k, b):
        s = s_all[..., j:j + b]
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True)) if shift else np.zeros_like(m)
        c = np.exp(m_new - m) if flip else np.exp(np.where(np.isneginf(m), -np.inf, m - m_new))
        p = np.exp(s - m_new)
        l = (l * c if fix_l else l) + p.sum(axis=-1, keepdims=True)
        acc = (acc * c if fix_acc else acc) + p @ v[..., j:j + b, :]
        m = m_new
    return acc / l if divide else acc


ONLINE_WRONG = {
    "running maximum is not rescaled": lambda *a: _online(*a, fix_l=False, fix_acc=False),
    "upside down": lambda *a: _online(*a, flip=True),
    "only the running sum is rescaled": lambda *a: _online(*a, fix_acc=False),
    "only the accumulator is rescaled": lambda *a: _online(*a, fix_l=False),
    "not divided by the running sum": lambda *a: _online(*a, divide=False),
    "shorter tile is dropped": lambda *a: _online(*a, drop=True),
    "not scaled": lambda *a: _online(*a, scaled=False),
    "exp overflows": lambda *a: _online(*a, shift=False),
}

CHECKS = {
    "scores": (practice.check_scores, SCORES_RIGHT, SCORES_WRONG),
    "raw scores": (lambda fn: practice.check_scores(fn, scaled=False), RAW_RIGHT, RAW_WRONG),
    "softmax": (practice.check_softmax, SOFTMAX_RIGHT, SOFTMAX_WRONG),
    "attention": (practice.check_attention, ATTENTION_RIGHT, ATTENTION_WRONG),
    "masked attention": (practice.check_masked_attention, MASKED_RIGHT, MASKED_WRONG),
    "sliding window": (practice.check_sliding_window_mask, WINDOW_RIGHT, WINDOW_WRONG),
    "multi-head": (practice.check_multi_head_attention, MHA_RIGHT, MHA_WRONG),
    "online softmax": (practice.check_online_softmax, ONLINE_RIGHT, ONLINE_WRONG),
}


@pytest.mark.parametrize(("name", "index"), [(name, i) for name, (_, right, _) in CHECKS.items()
                                             for i in range(len(right))])
def test_right_implementations_are_accepted(name, index):
    check, right, _ = CHECKS[name]
    feedback = check(right[index])
    assert feedback.correct, feedback.message
    assert feedback.message.startswith(RIGHT)


@pytest.mark.parametrize(("name", "hint"), [(name, hint) for name, (_, _, wrong) in CHECKS.items()
                                            for hint in wrong])
def test_each_wrong_implementation_gets_its_hint(name, hint):
    check, _, wrong = CHECKS[name]
    feedback = check(wrong[hint])
    assert not feedback.correct
    assert feedback.message.startswith(NOT_YET)
    assert hint in feedback.message, feedback.message


@pytest.mark.parametrize("name", CHECKS)
@pytest.mark.parametrize("placeholder", [stub, ellipsis_stub, None])
def test_stub_is_no_answer_yet(name, placeholder):
    feedback = CHECKS[name][0](placeholder)
    assert not feedback.correct
    assert feedback.message.startswith(NO_ANSWER)


@pytest.mark.parametrize("name", CHECKS)
def test_a_result_that_is_not_a_function_is_refused(name):
    feedback = CHECKS[name][0](np.zeros(3))
    assert not feedback.correct and "pass your function itself" in feedback.message.lower()


def test_an_exception_names_the_input_and_the_line():
    def my_softmax(x, axis=-1):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)[7]  # an index that does not exist

    feedback = practice.check_softmax(my_softmax)
    assert not feedback.correct
    assert "raised IndexError" in feedback.message
    assert "the worked example's scaled scores" in feedback.message
    assert "e.sum(axis=axis, keepdims=True)[7]" in feedback.message
    assert "Traceback" not in feedback.message


def test_an_exception_in_a_helper_names_the_helper_line():
    def helper(s):
        return s.reshape(3, -1)  # fails on 4 x 4 scores

    def my_scores(q, k):
        return helper(q @ T(k))

    feedback = practice.check_scores(my_scores, scaled=False)
    assert "raised ValueError" in feedback.message
    assert "s.reshape(3, -1)" in feedback.message


def test_an_exception_only_on_a_batch_says_so():
    feedback = practice.check_attention(lambda q, k, v, scale=None: stable(q @ k.T) @ v)
    assert "raised ValueError" in feedback.message or "not scaled" in feedback.message
    feedback = practice.check_attention(
        lambda q, k, v, scale=None: stable(q @ k.T * (scale or q.shape[-1] ** -0.5)) @ v)
    assert "on a random batch" in feedback.message
    assert "swap only the\nlast two axes".replace("\n", " ") in feedback.message


@pytest.mark.parametrize("name", CHECKS)
def test_messages_do_not_show_the_answer(name):
    """No wrong answer's feedback contains a number that the right answer holds."""
    check, _, wrong = CHECKS[name]
    for fn in wrong.values():
        message = check(fn).message
        for token in message.replace("(", " ").replace(")", " ").replace(",", " ").split():
            try:
                value = float(token.rstrip("."))
            except ValueError:
                continue
            if not math.isfinite(value):
                continue
            assert value == int(value), f"{name}: a fractional number in {message!r}"


def test_catalogue_size():
    """At least one wrong implementation per named mistake, two right ones per check."""
    for name, (_, right, wrong) in CHECKS.items():
        assert len(right) >= 2, name
        assert len(wrong) >= 3, name
