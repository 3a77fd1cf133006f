"""The tiny GPT's data (issue 21): the shipped corpus, the vocabulary, the split, the batches,
and the unigram/bigram baselines against a direct float64 loop."""

import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from attn_core.nn.baselines import ALPHA, bigram_loss, unigram_loss
from attn_core.nn.data import CORPUS_PATH, CharVocab, get_batch, load_corpus, split_corpus

ROOT = Path(__file__).resolve().parents[1]


# --- the corpus -----------------------------------------------------------------------------

def test_corpus_is_small_ascii_text_with_a_small_vocabulary_and_its_licence_beside_it():
    raw = CORPUS_PATH.read_bytes()
    assert 300_000 <= len(raw) <= 1_000_000
    text = raw.decode("ascii")  # ASCII only: raises otherwise
    assert len(set(text)) <= 90
    assert "\r" not in text and "\t" not in text
    data = CORPUS_PATH.parent
    assert "PSF LICENSE AGREEMENT" in (data / "LICENSE-corpus").read_text() or \
        "PSF License Agreement" in (data / "LICENSE-corpus").read_text()
    readme = (data / "README.md").read_text()
    assert "tools/make_corpus.py" in readme and "python3.11-doc" in readme
    assert f"{len(text):,}" in readme  # the size the README states is the file's


def test_corpus_is_prose_not_markup():
    text = load_corpus()
    for markup in ("``", ":func:", ":ref:", ":class:", "\n.. ", "\n>>> "):
        assert markup not in text, markup
    lines = text.splitlines()
    assert sum(line.endswith("::") for line in lines) < 5  # literal-block markers stripped
    words = text.split()
    common = Counter(w.lower() for w in words).most_common(5)
    assert {"the", "a", "to", "of", "is"} & {w for w, _ in common}


@pytest.mark.skipif(not Path("/usr/share/doc/python3.11/html/_sources").is_dir(),
                    reason="python3.11-doc not installed (apt-get install python3-doc)")
def test_make_corpus_regenerates_the_stored_file_byte_for_byte():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "make_corpus.py"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


# --- vocabulary -----------------------------------------------------------------------------

def test_vocab_round_trips_the_corpus():
    text = load_corpus()
    vocab = CharVocab.from_text(text)
    ids = vocab.encode(text[:5000])
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < len(vocab)
    assert vocab.decode(ids) == text[:5000]
    assert list(vocab.chars) == sorted(set(text))


def test_encode_names_every_character_outside_the_vocabulary():
    vocab = CharVocab.from_text("abc ")
    # in the order typed (issue 31: they were in code-point order, '\n' before 'z')
    with pytest.raises(ValueError, match=r"2 character\(s\).*'z', '\\n'$"):
        vocab.encode("a z\nbz")
    with pytest.raises(TypeError, match="text must be a str"):
        vocab.encode([1, 2])
    with pytest.raises(ValueError, match="ids must lie in 0..3"):
        vocab.decode([0, 4])
    with pytest.raises(ValueError, match="each character once"):
        CharVocab("aa")


# --- split and batches ----------------------------------------------------------------------

def test_split_keeps_the_last_part_for_validation():
    ids = np.arange(1000)
    train, val = split_corpus(ids, 0.1)
    assert len(val) == 100 and np.array_equal(val, np.arange(900, 1000))
    assert np.array_equal(np.concatenate([train, val]), ids)
    with pytest.raises(ValueError, match="val_fraction"):
        split_corpus(ids, 1.5)
    with pytest.raises(ValueError, match="too short to split"):
        split_corpus("ab", 0.1)


def test_no_validation_text_reaches_a_training_batch():
    """By construction of the indices: ids carry their own position, so a batch shows every
    index it used; none reaches the validation part, over many batches."""
    n = 5_000
    train, val = split_corpus(np.arange(n), 0.1)
    rng = np.random.default_rng(0)
    seen = np.zeros(n, dtype=bool)
    for _ in range(300):
        x, y = get_batch(rng, train, batch=16, n_ctx=32)
        assert x.shape == y.shape == (16, 32)
        assert np.array_equal(y[:, :-1], x[:, 1:]) and np.array_equal(y, x + 1)
        seen[x.ravel()] = True
        seen[y.ravel()] = True
    assert not seen[len(train):].any()
    assert seen[len(train) - 1]  # the last training id is reachable (as a target)
    assert seen[0]


def test_a_corpus_too_short_for_one_batch_names_batch_n_ctx_and_the_length():
    with pytest.raises(ValueError, match=r"length 10.*n_ctx = 10.*11 ids.*batch = 4"):
        get_batch(np.random.default_rng(0), np.arange(10), batch=4, n_ctx=10)
    x, _ = get_batch(np.random.default_rng(0), np.arange(11), batch=4, n_ctx=10)  # just enough
    assert np.array_equal(x, np.tile(np.arange(10), (4, 1)))
    with pytest.raises(TypeError, match="ids must be a 1-D int array"):
        get_batch(np.random.default_rng(0), np.arange(20.0), batch=1, n_ctx=4)
    with pytest.raises(TypeError, match="rng must be a numpy Generator"):
        get_batch(0, np.arange(20), batch=1, n_ctx=4)


# --- baselines against a float64 loop -------------------------------------------------------

def _unigram_loop(train, val, vocab_size, alpha):
    counts = [alpha] * vocab_size
    for t in train:
        counts[t] += 1
    total = math.fsum(counts)
    return math.fsum(-math.log(counts[t] / total) for t in val) / len(val)


def _bigram_loop(train, val, vocab_size, alpha):
    counts = [[alpha] * vocab_size for _ in range(vocab_size)]
    for a, b in zip(train[:-1], train[1:]):
        counts[a][b] += 1
    rows = [math.fsum(r) for r in counts]
    terms = [-math.log(counts[a][b] / rows[a]) for a, b in zip(val[:-1], val[1:])]
    return math.fsum(terms) / len(terms)


@pytest.mark.parametrize("alpha", [ALPHA, 0.1])
def test_baselines_match_a_float64_loop(alpha):
    rng = np.random.default_rng(3)
    train, val = rng.integers(0, 7, 500), rng.integers(0, 7, 120)
    train[:50] = 2  # an uneven distribution, and (since 6 never follows 2 here) unseen pairs
    assert unigram_loss(train, val, 9, alpha) == pytest.approx(
        _unigram_loop(train.tolist(), val.tolist(), 9, alpha), rel=1e-13)
    assert bigram_loss(train, val, 9, alpha) == pytest.approx(
        _bigram_loop(train.tolist(), val.tolist(), 9, alpha), rel=1e-13)


def test_on_the_corpus_bigram_beats_unigram_beats_uniform():
    text = load_corpus()
    vocab = CharVocab.from_text(text)
    train, val = split_corpus(vocab.encode(text))
    uni, bi = unigram_loss(train, val, len(vocab)), bigram_loss(train, val, len(vocab))
    assert bi < uni < math.log(len(vocab))
    assert uni == pytest.approx(_unigram_loop(train.tolist(), val.tolist(), len(vocab), ALPHA),
                                rel=1e-12)


def test_baseline_errors_name_the_argument():
    with pytest.raises(ValueError, match="val_ids must lie in 0..2"):
        unigram_loss(np.array([0, 1]), np.array([3]), 3)
    with pytest.raises(ValueError, match="alpha must be a positive"):
        bigram_loss(np.array([0, 1]), np.array([0, 1]), 2, alpha=0)
    with pytest.raises(TypeError, match="train_ids must be a 1-D int array"):
        bigram_loss(np.array([0.0, 1.0]), np.array([0, 1]), 2)


def test_text_loss_scores_every_character_after_the_first_once():
    """Against a loop: window k holds ids[k*w : k*w + w + 1]; each position predicts the
    next id from the ids before it in its window (log-softmax in float64 by hand)."""
    from attn_core.nn import GPTConfig, gpt_forward, init_gpt
    from attn_core.nn.train import text_loss

    config = GPTConfig(vocab_size=6, n_ctx=5, d_model=8, n_heads=2, n_layers=1)
    params = init_gpt(config, np.random.default_rng(0), dtype="float64")
    params = {k: v + np.random.default_rng(1).normal(0, 0.5, v.shape) for k, v in params.items()}
    ids = np.random.default_rng(2).integers(0, 6, 23)  # 22 predictions: 4 windows of 5, then 2
    terms = []
    for start in range(0, len(ids) - 1, config.n_ctx):
        window = ids[start:start + config.n_ctx + 1]
        logits, _ = gpt_forward(params, config, window[:-1])
        for row, target in zip(logits, window[1:]):
            m = max(row)
            terms.append(-(row[target] - m - math.log(math.fsum(math.exp(z - m) for z in row))))
    assert len(terms) == len(ids) - 1
    assert text_loss(params, config, ids, batch=3) == pytest.approx(math.fsum(terms) / len(terms),
                                                                    rel=1e-12)
