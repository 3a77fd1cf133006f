"""An independent float64 reference for the tests, written without attn_core.

Everything here is computed with plain Python floats and explicit loops (``math.exp`` per
row, sums over ``i``, ``j`` and the ``d`` dimension, heads as explicit column slices), so
that a bug in attn_core's vectorised numpy code cannot hide in the reference too. numpy
is used only to hold the inputs and the results, to broadcast the leading (batch)
dimensions, and to draw seeded random inputs.

The second half holds what the test files share: the hypothesis strategies that draw
shapes, dtypes and masks, the tolerances by dtype, and the check that an error was raised
by attn_core's own validation (not deep inside numpy).
"""

import math
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

NEG_INF = -math.inf

# --- the reference maths (no attn_core, no vectorised numpy) -------------------------------


def softmax_row(row):
    """Softmax of one list of floats (entries may be -inf); all -inf gives all zeros."""
    m = max(row)
    if m == NEG_INF:
        return [0.0] * len(row)
    e = [0.0 if x == NEG_INF else math.exp(x - m) for x in row]
    total = math.fsum(e)
    return [x / total for x in e]


def row_stats(row):
    """(max, sum of exp(x - max)) of one row of scores; (-inf, 0) for an all -inf row."""
    m = max(row)
    if m == NEG_INF:
        return NEG_INF, 0.0
    return m, math.fsum(0.0 if x == NEG_INF else math.exp(x - m) for x in row)


def softmax(x):
    """Softmax along the last axis of any array, row by row, in float64."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    for idx in np.ndindex(x.shape[:-1]):
        out[idx] = softmax_row(x[idx].tolist())
    return out


def matmul(a, b):
    """(n, m) @ (m, p) as lists of floats, with explicit loops (math.fsum per cell)."""
    n, m, p = len(a), len(b), len(b[0]) if b else 0
    assert all(len(row) == m for row in a)
    return [[math.fsum(a[i][c] * b[c][j] for c in range(m)) for j in range(p)]
            for i in range(n)]


def _broadcast(arrays, tails):
    """Broadcast the leading dims of several arrays; return them and the batch shape."""
    batch = np.broadcast_shapes(*(a.shape[: a.ndim - t] for a, t in zip(arrays, tails)))
    return [np.broadcast_to(a, batch + a.shape[a.ndim - t:]) for a, t in zip(arrays, tails)], batch


def attention_2d(q, k, v, mask=None, scale=None):
    """One (n_q, d_k), (n_k, d_k), (n_k, d_v) problem as lists; returns (out, weights, scores).

    ``scores`` are the scaled scores with masked entries set to -inf.
    """
    n_q, n_k, d_k, d_v = len(q), len(k), len(q[0]), len(v[0])
    scale = 1.0 / math.sqrt(d_k) if scale is None else float(scale)
    s = [[NEG_INF] * n_k for _ in range(n_q)]
    for i in range(n_q):
        for j in range(n_k):
            if mask is None or mask[i][j]:
                s[i][j] = scale * math.fsum(q[i][c] * k[j][c] for c in range(d_k))
    w = [softmax_row(row) for row in s]
    out = [[math.fsum(w[i][j] * v[j][c] for j in range(n_k)) for c in range(d_v)]
           for i in range(n_q)]
    return out, w, s


def attention(q, k, v, mask=None, scale=None):
    """Reference attention over any broadcastable leading dims: (out, weights, scores)."""
    arrays = [np.asarray(a, dtype=np.float64) for a in (q, k, v)]
    tails = [2, 2, 2]
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        n_q, n_k = arrays[0].shape[-2], arrays[1].shape[-2]
        tail = np.broadcast_shapes(mask.shape[-2:], (n_q, n_k))
        mask = np.broadcast_to(mask, mask.shape[:-2] + tail)
        arrays.append(mask)
        tails.append(2)
    arrays, batch = _broadcast(arrays, tails)
    n_q, n_k, d_v = arrays[0].shape[-2], arrays[1].shape[-2], arrays[2].shape[-1]
    out = np.empty(batch + (n_q, d_v))
    weights = np.empty(batch + (n_q, n_k))
    s = np.empty(batch + (n_q, n_k))
    for idx in np.ndindex(batch):
        m = arrays[3][idx].tolist() if mask is not None else None
        o, w, sc = attention_2d(arrays[0][idx].tolist(), arrays[1][idx].tolist(),
                                arrays[2][idx].tolist(), m, scale)
        out[idx], weights[idx], s[idx] = o, w, sc
    return out, weights, s


def scores_row_stats(q, k, mask=None, scale=None):
    """Row max and row sum of exp(score - max) of the masked, scaled scores: (..., n_q) each."""
    _, _, s = attention(q, k, np.zeros(np.shape(k)[:-1] + (1,)), mask, scale)
    mx = np.empty(s.shape[:-1])
    sm = np.empty(s.shape[:-1])
    for idx in np.ndindex(s.shape[:-1]):
        mx[idx], sm[idx] = row_stats(s[idx].tolist())
    return mx, sm


def multi_head_attention(x, w_q, w_k, w_v, w_o, h, mask=None, biases=None):
    """Multi-head self-attention as a loop over heads, each with its own column slice.

    Head ``i`` uses columns ``i*d_k .. (i+1)*d_k - 1`` of w_q and w_k (and of w_v with
    d_v), i.e. ``h`` separate small projections; the head outputs are concatenated
    column-wise and projected by ``w_o``. Returns (out, weights) with weights
    (..., h, n, n).
    """
    x = np.asarray(x, dtype=np.float64)
    w_q, w_k, w_v, w_o = (np.asarray(w, dtype=np.float64).tolist() for w in (w_q, w_k, w_v, w_o))
    b_q, b_k, b_v, b_o = (None,) * 4 if biases is None else biases
    d_k, d_v = len(w_q[0]) // h, len(w_v[0]) // h
    n = x.shape[-2]
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        mask = np.broadcast_to(mask, mask.shape[:-2] + np.broadcast_shapes(mask.shape[-2:], (n, n)))
        if mask.ndim < 3:
            mask = mask[None]  # a head axis of 1
        # mask is (..., h or 1, n, n): its last three dims are per head
        arrays, batch = _broadcast([x, mask], [2, 3])
        x, mask = arrays
    else:
        batch = x.shape[:-2]
    d_out = len(w_o[0])
    out = np.empty(batch + (n, d_out))
    weights = np.empty(batch + (h, n, n))

    def project(rows, w, b, cols):
        p = matmul(rows, [[w_row[c] for c in cols] for w_row in w])
        if b is not None:
            bias = [float(b[c]) for c in cols]
            p = [[val + bias[c] for c, val in enumerate(row)] for row in p]
        return p

    for idx in np.ndindex(batch):
        rows = x[idx].tolist()
        concat = [[] for _ in range(n)]
        for i in range(h):
            qc, vc = range(i * d_k, (i + 1) * d_k), range(i * d_v, (i + 1) * d_v)
            q_i, k_i, v_i = project(rows, w_q, b_q, qc), project(rows, w_k, b_k, qc), \
                project(rows, w_v, b_v, vc)
            m = None
            if mask is not None:
                m = mask[idx][i if mask.shape[-3] > 1 else 0].tolist()
            o, w, _ = attention_2d(q_i, k_i, v_i, m)
            weights[idx + (i,)] = w
            for r in range(n):
                concat[r].extend(o[r])
        out[idx] = project(concat, w_o, b_o, range(d_out))
    return out, weights


def ref_layer_norm(row, g, b, eps=1e-5):
    mu = math.fsum(row) / len(row)
    var = math.fsum((v - mu) ** 2 for v in row) / len(row)
    return [(v - mu) / math.sqrt(var + eps) * gi + bi for v, gi, bi in zip(row, g, b)]


def ref_gelu(v):
    return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))


def ref_matmul(rows, w, b=None):
    return [[math.fsum(r[c] * w[c][j] for c in range(len(r))) + (0.0 if b is None else b[j])
             for j in range(len(w[0]))] for r in rows]


def ref_gpt(p, config, ids):
    """One sequence's ``(logits, weights)`` of the tiny GPT, from the formulas: embeddings,
    then per layer a pre-norm causal multi-head attention (the loop above) and a GELU MLP,
    then the final norm and the unembedding. ``weights`` is a list of ``(h, n, n)`` arrays."""
    n = len(ids)
    x = [[p["wte"][t][c] + p["wpe"][i][c] for c in range(config.d_model)]
         for i, t in enumerate(ids)]
    weights = []
    for layer in range(config.n_layers):
        q = {k[len(f"h{layer}."):]: v.tolist() for k, v in p.items() if k.startswith(f"h{layer}.")}
        a = [ref_layer_norm(r, q["ln1.g"], q["ln1.b"]) for r in x]
        attended, w = multi_head_attention(
            np.array(a), *(np.array(q[f"attn.w_{c}"]) for c in "qkvo"), config.n_heads,
            mask=np.tri(n, dtype=bool), biases=tuple(np.array(q[f"attn.b_{c}"]) for c in "qkvo"))
        weights.append(w)
        x = [[xi + ai for xi, ai in zip(xr, ar)] for xr, ar in zip(x, attended.tolist())]
        if "mlp.w_in" not in q:  # attention-only
            continue
        m = [ref_layer_norm(r, q["ln2.g"], q["ln2.b"]) for r in x]
        h = [[ref_gelu(v) for v in r] for r in ref_matmul(m, q["mlp.w_in"], q["mlp.b_in"])]
        out = ref_matmul(h, q["mlp.w_out"], q["mlp.b_out"])
        x = [[xi + oi for xi, oi in zip(xr, orow)] for xr, orow in zip(x, out)]
    f = [ref_layer_norm(r, p["ln_f.g"].tolist(), p["ln_f.b"].tolist()) for r in x]
    return ref_matmul(f, p["w_unembed"].tolist()), weights


def ref_gpt_logits(p, config, ids):
    """One sequence's logits, from the formulas (:func:`ref_gpt`)."""
    return ref_gpt(p, config, ids)[0]


def causal_mask(n):
    return np.array([[j <= i for j in range(n)] for i in range(n)], dtype=bool)


def window_mask(n, window):
    return np.array([[0 <= i - j < window for j in range(n)] for i in range(n)], dtype=bool)


def padding_mask(lengths, n):
    """(len(lengths), 1, n) for a list of lengths; key j allowed iff j < length."""
    return np.array([[[j < length for j in range(n)]] for length in lengths], dtype=bool)


# --- what the test files share ---------------------------------------------------------------

#: Hypothesis settings for the property tests: no deadline (first calls compile BLAS paths),
#: derandomized so every run draws the same examples (the suite is seeded), no example
#: database written into the repository.
PROPERTY = settings(deadline=None, max_examples=60, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FAST = settings(PROPERTY, max_examples=30)

DTYPES = (np.float32, np.float64)

#: (rtol, atol) of a result against the float64 reference, by the dtype computed in.
TOL = {np.dtype(np.float32): (2e-5, 2e-5), np.dtype(np.float64): (1e-12, 1e-12)}


def tol(dtype):
    rtol, atol = TOL[np.dtype(dtype)]
    return {"rtol": rtol, "atol": atol}


@st.composite
def batch_shapes(draw, max_dims=2, max_side=3):
    """A batch shape of 0 to ``max_dims`` leading dims."""
    return tuple(draw(st.lists(st.integers(1, max_side), max_size=max_dims)))


@st.composite
def broadcast_variant(draw, batch):
    """A shape that broadcasts to ``batch``: some dims dropped from the front or set to 1."""
    drop = draw(st.integers(0, len(batch)))
    kept = batch[drop:]
    return tuple(1 if draw(st.booleans()) else side for side in kept)


@st.composite
def attention_problems(draw, square=False, with_mask=True, max_n=6, max_d=4):
    """A random attention problem: dict with q, k, v, mask, dtype, batch and the sizes.

    Leading dims 0 to 2, drawn separately for q, k, v (and the mask) so that they
    broadcast against each other; values are seeded standard normals times a spread.
    """
    batch = draw(batch_shapes())
    n_q = draw(st.integers(1, max_n))
    n_k = n_q if square else draw(st.integers(1, max_n))
    d_k, d_v = draw(st.integers(1, max_d)), draw(st.integers(1, max_d))
    dtype = draw(st.sampled_from(DTYPES))
    spread = draw(st.sampled_from([0.1, 1.0, 3.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    g = np.random.default_rng(seed)
    shapes = [draw(broadcast_variant(batch)) for _ in range(3)]
    # make sure the full batch shape is reached by at least one input
    shapes[draw(st.integers(0, 2))] = batch
    q = (spread * g.standard_normal(shapes[0] + (n_q, d_k))).astype(dtype)
    k = (spread * g.standard_normal(shapes[1] + (n_k, d_k))).astype(dtype)
    v = (spread * g.standard_normal(shapes[2] + (n_k, d_v))).astype(dtype)
    mask = None
    if with_mask:
        kind = draw(st.sampled_from(["none", "random", "row", "causal"] if n_q == n_k
                                    else ["none", "random", "row"]))
        if kind == "random":
            mshape = draw(broadcast_variant(batch)) + (n_q, n_k)
            mask = g.random(mshape) < draw(st.sampled_from([0.3, 0.7, 1.0]))
        elif kind == "row":  # one row of keys for every query, like padding_mask
            mask = g.random((1, n_k)) < 0.6
        elif kind == "causal":
            mask = np.tri(n_q, n_k, dtype=bool)
    return {"q": q, "k": k, "v": v, "mask": mask, "dtype": np.dtype(dtype), "batch": batch,
            "n_q": n_q, "n_k": n_k, "d_k": d_k, "d_v": d_v, "seed": seed}


# --- errors come from attn_core's own checks --------------------------------------------------

_PACKAGE_DIR = Path(__file__).resolve().parents[1] / "attn_core"


def assert_raised_by_attn_core(excinfo):
    """The exception was raised by attn_core's own code, not from inside numpy.

    The innermost frame of the traceback must be a file of attn_core, and the exception
    must not be chained onto a numpy error (our checks ``raise ... from None``).
    """
    tb = excinfo.tb
    while tb.tb_next is not None:
        tb = tb.tb_next
    where = Path(tb.tb_frame.f_code.co_filename).resolve()
    assert _PACKAGE_DIR in where.parents, (
        f"{excinfo.typename} was raised in {where}, not by attn_core's validation: "
        f"{excinfo.value}")
    exc = excinfo.value
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__), (
        f"the error is chained onto {exc.__context__!r}: use `raise ... from None`")


def assert_clear_error(call, exc_type, pattern):
    """``call()`` raises ``exc_type`` from attn_core's own checks, its message matching ``pattern``.

    Run under ``np.errstate(all="raise")``: a numpy warning on the way is a failure too.
    """
    import re

    import numpy as np
    import pytest

    with np.errstate(all="raise"), pytest.raises(exc_type) as excinfo:
        call()
    assert re.search(pattern, str(excinfo.value)), (
        f"message {str(excinfo.value)!r} does not match {pattern!r}")
    assert_raised_by_attn_core(excinfo)


def assert_no_warnings(call):
    """Return ``call()``, failing if it emits any warning (numpy RuntimeWarnings included)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call()


# --- what the exercise-check tests share ----------------------------------------------------


def numbers_in(message):
    """The numbers written in a feedback message, as floats (thousands commas ignored)."""
    import re

    return {float(x) for x in re.findall(r"\d+(?:\.\d+)?", message.replace(",", ""))}


def carries_hint(feedback):
    """True if a wrong answer's feedback shows a hint or holds one back and offers it."""
    from attn_core.checks._base import ASK_FOR_MORE

    return "Hint:" in feedback.message or bool(feedback.more and ASK_FOR_MORE in feedback.message)


def assert_not_yet(feedback):
    """A check's "Not yet" answer: falsy, and it carries a hint (shown, or held back for the
    next try and offered)."""
    assert not feedback
    assert "Not yet" in feedback.message and carries_hint(feedback)


def assert_unanswered(feedback):
    """A check's answer to the placeholder: falsy, "No answer yet", and a hint."""
    assert not feedback
    assert "No answer yet" in feedback.message and "Hint:" in feedback.message


def numeric_grad(f, x, h=1e-6):
    """Central differences of the scalar function ``f`` at every entry of ``x``, in float64.

    ``f`` is called with a float64 copy of ``x`` nudged by ``+-h`` at one entry at a time (the
    caller's array is never changed). The error is about ``h**2`` times the third derivative,
    from the formula, plus ``1e-16 / h`` from rounding: about 1e-10 for ``h = 1e-6``.
    """
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + h
        up = f(x)
        x[idx] = old - h
        down = f(x)
        x[idx] = old
        grad[idx] = (up - down) / (2 * h)
    return grad


def frames(explorer):
    """The light and dark frames an explorer shows, decoded: two (h, w, 3) uint8 arrays."""
    import io

    from PIL import Image

    return tuple(np.asarray(Image.open(io.BytesIO(bytes(image.value))).convert("RGB"))
                 for image in (explorer.image, explorer.image_dark))


def assert_same_frames(explorer, fresh):
    """``explorer`` (after changes) shows the very pixels of ``fresh`` (built at that state):
    nothing of an earlier state is left over, in either theme's frame."""
    for theme, shown, expected in zip(("light", "dark"), frames(explorer), frames(fresh)):
        assert shown.shape == expected.shape, theme
        differ = (shown != expected).any(axis=-1)
        assert not differ.any(), f"{theme} frame: {int(differ.sum())} pixels differ"
