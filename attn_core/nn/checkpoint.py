"""Saving and loading the tiny GPT: its parameters in an ``.npz`` file, with JSON metadata.

The file holds one array per parameter (the names of :func:`attn_core.nn.gpt.init_gpt`)
and one more entry, ``__meta__``: a JSON string with the format version, the config, the
vocabulary and whatever the caller adds (settings, commit, measured time). Loading checks
everything against the config, so a file of another version or shape fails with a sentence.
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
import zlib
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

import numpy as np

from .data import CharVocab
from .gpt import GPTConfig, param_shapes

__all__ = ["CHECKPOINT_PATH", "FORMAT_VERSION", "Checkpoint", "load_checkpoint",
           "save_checkpoint"]

#: The stored full run (written by ``tools/train_gpt.py``).
CHECKPOINT_PATH = Path(__file__).resolve().parents[1] / "data" / "gpt-checkpoint.npz"
#: Bumped whenever the parameter names or the metadata change meaning.
FORMAT_VERSION = 1
_META = "__meta__"


@dataclass(frozen=True)
class Checkpoint:
    """A loaded model: ``params`` (dict of arrays), ``config`` (GPTConfig), ``vocab``
    (CharVocab) and ``meta`` (dict: the metadata saved with it, format version included)."""

    params: dict
    config: GPTConfig
    vocab: CharVocab
    meta: dict


def _check_params(params, config, where):
    expected = param_shapes(config)
    missing = sorted(set(expected) - set(params))
    extra = sorted(set(params) - set(expected))
    if missing or extra:
        raise ValueError(f"{where} does not hold the parameters of {config}: missing "
                         f"{missing or 'none'}, unexpected {extra or 'none'}")
    wrong = [f"{k} {tuple(params[k].shape)} (expected {expected[k]})" for k in sorted(expected)
             if tuple(params[k].shape) != tuple(expected[k])]
    if wrong:
        raise ValueError(f"{where} has parameters of the wrong shape for {config}: "
                         + "; ".join(wrong))


def save_checkpoint(path, params, config, vocab, meta=None):
    """Write ``params`` with the config, vocabulary and ``meta`` to ``path`` (.npz).

    Parameters
    ----------
    path : str or Path
    params : dict of arrays, the names and shapes of ``init_gpt(config, ...)``
    config : GPTConfig
    vocab : CharVocab, of ``config.vocab_size`` characters
    meta : dict, optional
        JSON-serialisable extras (settings, commit, measured time, ...).

    Examples
    --------
    >>> import tempfile, os
    >>> from attn_core.nn import init_gpt
    >>> cfg = GPTConfig(vocab_size=3, n_ctx=4, d_model=8, n_heads=2, n_layers=1)
    >>> params = init_gpt(cfg, np.random.default_rng(0))
    >>> path = os.path.join(tempfile.mkdtemp(), "tiny.npz")
    >>> save_checkpoint(path, params, cfg, CharVocab("abc"), {"note": "demo"})
    >>> ck = load_checkpoint(path)
    >>> ck.config == cfg, ck.vocab.chars, ck.meta["note"]
    (True, 'abc', 'demo')
    >>> all(np.array_equal(ck.params[k], params[k]) for k in params)
    True
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    if not isinstance(vocab, CharVocab) or len(vocab) != config.vocab_size:
        raise ValueError(f"vocab must be a CharVocab of config.vocab_size = "
                         f"{config.vocab_size} characters, got {vocab!r}")
    meta = dict(meta or {})
    if _META in params:
        raise ValueError(f"params must not hold an entry named {_META!r}")
    _check_params(params, config, "params")
    meta.update(format_version=FORMAT_VERSION, config=dataclasses.asdict(config),
                vocab=vocab.chars)
    arrays = {name: np.asarray(w) for name, w in params.items()}
    np.savez(path, **arrays, **{_META: np.array(json.dumps(meta, sort_keys=True))})


def load_checkpoint(path=None):
    """The checkpoint at ``path`` (default: the stored full run, :data:`CHECKPOINT_PATH`).

    Raises a ValueError naming the file and what is wrong: not an .npz of plain arrays
    (random bytes, a truncated file, pickled objects: never unpickled), metadata that is not
    JSON, a missing or another format version, missing or unexpected parameters, a parameter
    of the wrong shape, a vocabulary that does not match the config.
    """
    if path is not None and not isinstance(path, (str, PathLike)):
        raise TypeError(f"path must be a file path (str or Path) or None, got "
                        f"{type(path).__name__}")
    path = CHECKPOINT_PATH if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint file at {path}")
    not_ours = f"{path} is not a checkpoint of this course (an .npz file written by " \
               "save_checkpoint / tools/train_gpt.py)"
    try:  # never unpickles: an .npz of plain arrays only
        f = np.load(path, allow_pickle=False)
        if not isinstance(f, np.lib.npyio.NpzFile):
            raise ValueError("it holds a single array, not named arrays")
        with f:
            if _META not in f.files:
                raise ValueError(f"{path} is not a tiny-GPT checkpoint: it has no {_META!r} "
                                 "entry")
            meta = json.loads(str(f[_META]))
            params = {name: f[name] for name in f.files if name != _META}
    except json.JSONDecodeError as e:
        raise ValueError(f"{not_ours}: its metadata is not JSON ({e})") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as e:
        if "no '__meta__' entry" in str(e):
            raise
        reason = f"{type(e).__name__}: {e}"
        if "allow_pickle" in reason:  # numpy's invitation to load it "unsafely": never taken
            reason = ("it is not an .npz file of plain arrays (numpy would read it as pickled "
                      "Python objects, which the course never loads)")
        raise ValueError(f"{not_ours}: {reason}") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{not_ours}: its metadata is a JSON {type(meta).__name__}, not an "
                         "object")
    version = meta.get("format_version")
    if isinstance(version, bool) or version != FORMAT_VERSION:  # missing, older or newer
        raise ValueError(f"{path} has checkpoint format version {version!r}; this attn_core "
                         f"reads version {FORMAT_VERSION}: re-create it with "
                         "tools/train_gpt.py")
    try:
        config = GPTConfig(**meta["config"])
        vocab = CharVocab(meta["vocab"])
    except (KeyError, TypeError) as e:
        raise ValueError(f"{path} has unreadable metadata (config or vocab): {e}") from None
    if len(vocab) != config.vocab_size:
        raise ValueError(f"{path} has a vocabulary of {len(vocab)} characters but its config "
                         f"says vocab_size = {config.vocab_size}")
    _check_params(params, config, str(path))
    return Checkpoint(params=params, config=config, vocab=vocab, meta=meta)
