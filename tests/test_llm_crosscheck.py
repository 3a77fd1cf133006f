"""Cross-check of SmolLM2 run by the course's numpy code against Hugging Face's
LlamaForCausalLM, loaded by transformers from the SAME GGUF file.

transformers reads the file with ``from_pretrained(folder, gguf_file=name)`` (it needs
``gguf`` and ``accelerate``), dequantizes it to float32 and un-permutes attn_q/attn_k to its
own rotate-half layout; the course keeps the file's layout and turns adjacent pairs. Both are
the same model, so:

* the logits agree at every position of varied texts (a chat prompt, an English paragraph,
  digits and punctuation, non-English text and emoji), with the same argmax everywhere; the
  same weights turned by halves do not (the pairing matters);
* greedy decoding gives the same tokens as transformers' ``generate`` without sampling;
* our tokenizer (:func:`attn_core.model.llm_tokenizer.llm_tokenizer`) gives the ids of
  transformers' ``AutoTokenizer`` of the file on a varied set, and :func:`chat_prompt` the
  text of its ``apply_chat_template``.

Tolerance, from the float32 error model of ``tests/tolerances.py``: a logit went through
``L = 30`` blocks whose longest products have inner length ``K = d_ff = 1536``; two correct
float32 programs then agree to ``|ours - theirs| <= c L sqrt(K) u (|theirs| + s)``, ``u =
2**-24``, ``c = 8``, ``s`` the logits' root mean square: rtol = 8 * 30 * 39.2 * 6e-8 = 5.6e-4
and atol = rtol * s (about 2e-3 for these logits, whose largest are about 37). Seen: about
1e-4 (8.3e-5 on a 46-token chat prompt). A real mistake is far outside it: the rotate-half
pairing gives differences of about 30, a wrong eps or a missing norm gain 1e-2 and more.

Needs torch, transformers and accelerate (skipped without them, failed under CI=true); the
transformers model is loaded once per session (about 14 s here, the file parsed once:
``gguf_parsed_once``).
"""

import contextlib
import dataclasses
import functools

import numpy as np
import pytest
from conftest import TORCH_PIN, TRANSFORMERS_PIN, import_optional

from attn_core.model.llm import llm_forward
from attn_core.model.llm_file import llm_path, load_llm
from attn_core.model.llm_generate import llm_generate
from attn_core.model.llm_tokenizer import chat_prompt, llm_tokenizer

from tolerances import rounding_tolerance

ACCELERATE_PIN = "accelerate==1.16.0"
N_LAYERS, D_FF = 30, 1536

TEXTS = {
    "chat": chat_prompt("What is the capital of France? Answer in one sentence."),
    "english": ("Attention lets every word of a sentence look at the other words and decide "
                "which of them matter."),
    "digits": "On 3 March 2021, 4.5 km at $2.7bn -- (x + y)^2 = 144; call 555-0199!",
    "non-english": "Le café est fermé. Москва — столица. 東京は日本の首都です。 🙂🚀",
}

TOKENIZER_TEXTS = [
    *TEXTS.values(),
    "1234567890 and 3.14159 and 2,000,000",
    "Hello,   world!\n\n\tTabs\tand    spaces   ",
    "it's they're we'll I'd don't",
    "naïve façade Ærøskøbing Straße",
    "😀👍🏽 👨‍👩‍👧 🇫🇷",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|><repo_name>x<file_sep>y<jupyter_code>",
    "a<|im_end|>b<|im_start|>c",
    "def f(x):\n    return x ** 2  # square\n",
    "",
    " ",
    "\n",
]

CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."},
     {"role": "user", "content": "Why is the sky blue?"}],
    [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"},
     {"role": "user", "content": "And times 3?"}],
]


@contextlib.contextmanager
def gguf_parsed_once():
    """While loading, transformers' GGUF parser reads the file once, not three times.

    ``from_pretrained`` opens the file with ``gguf.GGUFReader`` for the config, again for the
    weights, and ``AutoTokenizer`` a third time; each parse walks the 49,152-token vocabulary
    and its merges into numpy views (6 s here). And it builds gguf's tensor-name table once per
    tensor (397 times, 8 s) for the same (architecture, layers). Both are pure functions of
    their arguments: kept here, they give transformers the very objects it would build again,
    so what it computes does not change, only how often."""
    import gguf

    real_reader = gguf.GGUFReader
    readers = {}

    def reader(path, mode="r"):
        key = (str(path), mode)
        if key not in readers:
            readers[key] = real_reader(path, mode)
        return readers[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gguf, "GGUFReader", reader)
        patch.setattr(gguf, "get_tensor_name_map", functools.cache(gguf.get_tensor_name_map))
        yield


@pytest.fixture(scope="session")
def hf(requires_transformers):
    """transformers' model and tokenizer of the packaged GGUF (float32, eval mode)."""
    import_optional("accelerate", f"{TORCH_PIN} {TRANSFORMERS_PIN} {ACCELERATE_PIN}",
                    "the cross-check of SmolLM2 against LlamaForCausalLM")
    import torch

    path = llm_path()
    with gguf_parsed_once():
        model = requires_transformers.AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32)
        tok = requires_transformers.AutoTokenizer.from_pretrained(str(path.parent),
                                                                  gguf_file=path.name)
    model.eval()
    return model, tok


def _hf_logits(model, ids):
    import torch

    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()


@pytest.mark.parametrize("name", list(TEXTS))
def test_logits_match_llama_for_causal_lm(hf, name):
    model, _ = hf
    params, config = load_llm()
    assert type(model).__name__ == "LlamaForCausalLM"
    ids = llm_tokenizer().encode(TEXTS[name]).ids
    ref = _hf_logits(model, ids)
    ours = llm_forward(params, config, ids).logits
    np.testing.assert_allclose(ours, ref, **rounding_tolerance(ref, D_FF, N_LAYERS))
    assert (ours.argmax(-1) == ref.argmax(-1)).all()
    if name == "chat":  # the same weights turned by halves are another model
        wrong = llm_forward(params, dataclasses.replace(config, pairing="halves"), ids).logits
        assert np.abs(wrong - ref).max() > 1.0


@pytest.mark.parametrize("question", ["Name three primary colors.",
                                      "Write a haiku about the sea."])
def test_greedy_decoding_matches_transformers_generate(hf, question):
    """The first question's greedy path passes a near tie (0.036 between the top two logits
    at its 6th token), the second's margins of 0.1: both sides must take the same branch."""
    import torch

    model, _ = hf
    ids = llm_tokenizer().encode(chat_prompt(question)).ids
    ours = llm_generate(ids, 12, greedy=True, stop=False).new_ids
    x = torch.tensor([ids])
    with torch.no_grad():  # an explicit mask: the prompt's <|im_end|> (id 2) is no padding
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=12,
                             do_sample=False, pad_token_id=2, eos_token_id=None)
    np.testing.assert_array_equal(ours, out[0, len(ids):].numpy())


def test_tokenizer_matches_transformers(hf):
    _, theirs = hf
    ours = llm_tokenizer()
    for text in TOKENIZER_TEXTS:
        want = theirs(text, add_special_tokens=False)["input_ids"]
        assert ours.encode(text).ids == want, text
        assert ours.decode(want, skip_special_tokens=False) == theirs.decode(want), text


def test_chat_template_matches_apply_chat_template(hf):
    _, theirs = hf
    for messages in CONVERSATIONS:
        for gen in (True, False):
            want = theirs.apply_chat_template(messages, tokenize=False,
                                              add_generation_prompt=gen)
            assert chat_prompt(messages, add_generation_prompt=gen) == want
