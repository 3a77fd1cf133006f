"""Saving and loading the tiny GPT (issue 21): a round trip keeps every array bit for bit,
and a file of another version, with missing or extra parameters, or of the wrong shape is
an error that names what is wrong."""

import json

import numpy as np
import pytest

from attn_core.nn import GPTConfig, init_gpt
from attn_core.nn.checkpoint import FORMAT_VERSION, load_checkpoint, save_checkpoint
from attn_core.nn.data import CharVocab

CONFIG = GPTConfig(vocab_size=5, n_ctx=6, d_model=8, n_heads=2, n_layers=2)
VOCAB = CharVocab("abcde")


@pytest.fixture
def saved(tmp_path):
    params = init_gpt(CONFIG, np.random.default_rng(4))
    path = tmp_path / "model.npz"
    save_checkpoint(path, params, CONFIG, VOCAB, {"commit": "abc123", "seconds": 1.5})
    return path, params


def _rewrite(path, edit_arrays=None, edit_meta=None):
    """A copy of the checkpoint at ``path`` with its arrays or metadata edited."""
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    if edit_arrays:
        edit_arrays(arrays)
    if edit_meta:
        edit_meta(meta)
    out = path.with_name("edited.npz")
    np.savez(out, **arrays, __meta__=np.array(json.dumps(meta)))
    return out


def test_round_trip_is_exact(saved):
    path, params = saved
    ck = load_checkpoint(path)
    assert ck.config == CONFIG and ck.vocab == VOCAB
    assert set(ck.params) == set(params)
    for k, v in params.items():
        assert ck.params[k].dtype == v.dtype and np.array_equal(ck.params[k], v), k
    assert ck.meta["commit"] == "abc123" and ck.meta["seconds"] == 1.5
    assert ck.meta["format_version"] == FORMAT_VERSION


def test_float64_params_stay_float64(tmp_path):
    params = init_gpt(CONFIG, np.random.default_rng(0), dtype="float64")
    save_checkpoint(tmp_path / "m.npz", params, CONFIG, VOCAB)
    assert load_checkpoint(tmp_path / "m.npz").params["wte"].dtype == np.float64


def test_another_format_version_is_refused(saved):
    path, _ = saved
    bad = _rewrite(path, edit_meta=lambda m: m.update(format_version=FORMAT_VERSION + 1))
    with pytest.raises(ValueError, match=f"format version {FORMAT_VERSION + 1}.*reads version "
                                         f"{FORMAT_VERSION}"):
        load_checkpoint(bad)


def test_missing_and_extra_parameters_are_named(saved):
    path, _ = saved
    bad = _rewrite(path, edit_arrays=lambda a: a.pop("h1.mlp.b_in"))
    with pytest.raises(ValueError, match=r"missing \['h1.mlp.b_in'\], unexpected none"):
        load_checkpoint(bad)
    bad = _rewrite(path, edit_arrays=lambda a: a.update(bonus=np.zeros(3)))
    with pytest.raises(ValueError, match=r"missing none, unexpected \['bonus'\]"):
        load_checkpoint(bad)


def test_a_wrong_shape_is_named_with_both_shapes(saved):
    path, _ = saved
    bad = _rewrite(path, edit_arrays=lambda a: a.update(wpe=np.zeros((7, 8), np.float32)))
    with pytest.raises(ValueError, match=r"wpe \(7, 8\) \(expected \(6, 8\)\)"):
        load_checkpoint(bad)
    # a config that disagrees with the arrays (a wider model saved under a narrower config)
    bad = _rewrite(path, edit_meta=lambda m: m["config"].update(d_ff=16))
    with pytest.raises(ValueError, match=r"h0.mlp.w_in \(8, 32\) \(expected \(8, 16\)\)"):
        load_checkpoint(bad)


def test_vocabulary_and_metadata_problems(saved, tmp_path):
    path, params = saved
    bad = _rewrite(path, edit_meta=lambda m: m.update(vocab="abcdef"))
    with pytest.raises(ValueError, match="vocabulary of 6 characters but its config says "
                                         "vocab_size = 5"):
        load_checkpoint(bad)
    np.savez(tmp_path / "plain.npz", **params)
    with pytest.raises(ValueError, match="no '__meta__' entry"):
        load_checkpoint(tmp_path / "plain.npz")
    with pytest.raises(ValueError, match="vocab must be a CharVocab of config.vocab_size = 5"):
        save_checkpoint(tmp_path / "x.npz", params, CONFIG, CharVocab("ab"))
    with pytest.raises(ValueError, match=r"missing \['w_unembed'\]"):
        save_checkpoint(tmp_path / "x.npz", {k: v for k, v in params.items()
                                             if k != "w_unembed"}, CONFIG, VOCAB)


@pytest.mark.parametrize("version", ["missing", FORMAT_VERSION - 1, True, str(FORMAT_VERSION)])
def test_a_missing_or_older_format_version_is_refused(saved, version):
    path, _ = saved

    def edit(meta):
        if version == "missing":
            meta.pop("format_version")
        else:
            meta["format_version"] = version

    with pytest.raises(ValueError, match="checkpoint format version .*reads version"):
        load_checkpoint(_rewrite(path, edit_meta=edit))


def _hostile_files(path, tmp_path):
    """Files that are not checkpoints of the course: (label, path)."""
    data = path.read_bytes()
    out = []
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(data[: len(data) // 2])
    out.append(("truncated", truncated))
    noise = tmp_path / "noise.npz"
    noise.write_bytes(np.random.default_rng(0).bytes(4096))
    out.append(("random bytes", noise))
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files if k != "__meta__"}
    not_json = tmp_path / "not-json.npz"
    np.savez(not_json, **arrays, __meta__=np.array("{format_version: 1"))
    out.append(("metadata not JSON", not_json))
    listed = tmp_path / "list-meta.npz"
    np.savez(listed, **arrays, __meta__=np.array("[1, 2]"))
    out.append(("metadata a JSON list", listed))
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, **arrays, __meta__=np.array([{"format_version": 1}], dtype=object))
    out.append(("pickled metadata", pickled))
    single = tmp_path / "single.npy"
    np.save(single, np.zeros(3))
    out.append(("a single .npy array", single))
    return out


def test_files_that_are_not_checkpoints_are_named_and_never_unpickled(saved, tmp_path):
    path, _ = saved
    for label, bad in _hostile_files(path, tmp_path):
        with pytest.raises(ValueError) as info:
            load_checkpoint(bad)
        message = str(info.value)
        assert str(bad) in message, (label, message)
        assert "not a checkpoint of this course" in message, (label, message)
        assert "Traceback" not in message
        # the course's message stands alone: no invitation to load the file "unsafely"
        assert "allow_pickle" not in message and "pickle.load" not in message, (label, message)
    with pytest.raises(TypeError, match="path must be a file path"):
        load_checkpoint(3)
    with pytest.raises(FileNotFoundError, match="no checkpoint file at"):
        load_checkpoint(tmp_path / "absent.npz")


def test_loading_never_allows_pickles(saved, tmp_path, monkeypatch):
    """A loader that passed allow_pickle=True would run a pickle's code: load_checkpoint must
    ask numpy for plain arrays only, whatever the file holds."""
    import attn_core.nn.checkpoint as module

    seen = []
    real = np.load

    def spy(*args, **kwargs):
        seen.append(kwargs.get("allow_pickle"))
        return real(*args, **kwargs)

    monkeypatch.setattr(module.np, "load", spy)
    load_checkpoint(saved[0])
    assert seen == [False]
