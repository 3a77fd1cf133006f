"""SmolLM2's tokenizer, built with ``tokenizers`` from its GGUF file, and its chat template.

The file holds the byte-level BPE's vocabulary (49,152 tokens, in GPT-2's byte alphabet),
its 48,900 merges, each token's type (3 = special: ``<|im_start|>``, ``<|im_end|>``, ...)
and the name of its pre-tokenizer, ``"smollm"``: every digit on its own, then GPT-2's split
(words with their leading space, runs of punctuation, runs of spaces). The special tokens
are matched whole before any of that, so ``<|im_start|>`` is ONE id: a plain BPE would cut
it into ``<``, ``|``, ``im``, ... and the model, which never saw those pieces there, would
answer nonsense.

The chat template is ChatML (the file's ``tokenizer.chat_template``): each message is
``<|im_start|>{role}\\n{content}<|im_end|>\\n``; a conversation without a system message
starts with the file's default one; the prompt for an answer ends with
``<|im_start|>assistant\\n``. :func:`chat_prompt` writes that text in Python (tested equal to
``transformers``' ``apply_chat_template`` of the same file).

Public API
----------
* :func:`llm_tokenizer` -- the ``tokenizers.Tokenizer`` (cached): ``.encode(text).ids``,
  ``.decode(ids)``
* :func:`build_tokenizer` -- the same from any GGUF's ``tokenizer.*`` metadata
* :func:`chat_prompt` -- the ChatML text of a conversation
* :func:`default_system_prompt` -- the file's default system message
* :data:`SPECIAL_TYPE`, :data:`IM_START`, :data:`IM_END`
"""

from __future__ import annotations

import functools
import re

from .llm_file import llm_metadata

__all__ = ["IM_END", "IM_START", "SPECIAL_TYPE", "build_tokenizer", "chat_prompt",
           "default_system_prompt", "llm_tokenizer"]

#: llama.cpp's token type of a control (special) token.
SPECIAL_TYPE = 3
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
#: The pre-tokenizers the course builds: llama.cpp's name -> digits split one by one?
_PRE_TOKENIZERS = {"smollm": True, "gpt-2": False}
_ROLES = ("system", "user", "assistant")


def _contents(field):
    return list(field) if not isinstance(field, list) else field


def build_tokenizer(metadata):
    """A ``tokenizers.Tokenizer`` from a GGUF file's ``tokenizer.*`` fields.

    Parameters
    ----------
    metadata : dict
        ``tokenizer.ggml.model`` ("gpt2": byte-level BPE), ``.pre`` ("smollm"), ``.tokens``,
        ``.merges``, ``.token_type``.

    Returns
    -------
    tokenizers.Tokenizer
        BPE with the file's vocabulary and merges; pre-tokenizer: digits one by one (for
        "smollm"), then byte-level with GPT-2's split; the special tokens (type 3) added
        whole; a byte-level decoder.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    kind = metadata.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ValueError(f"the course builds byte-level BPE tokenizers (tokenizer.ggml.model "
                         f"'gpt2'), this file's is {kind!r}")
    pre = metadata.get("tokenizer.ggml.pre", "gpt-2")
    if pre not in _PRE_TOKENIZERS:
        raise ValueError(f"unknown pre-tokenizer {pre!r}; the course knows "
                         f"{sorted(_PRE_TOKENIZERS)}")
    tokens = _contents(metadata["tokenizer.ggml.tokens"])
    merges = [tuple(m.split(" ")) for m in _contents(metadata["tokenizer.ggml.merges"])]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    steps = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    if _PRE_TOKENIZERS[pre]:
        steps.insert(0, pre_tokenizers.Digits(individual_digits=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tok.decoder = decoders.ByteLevel()
    types = _contents(metadata.get("tokenizer.ggml.token_type", []))
    special = [t for t, kind in zip(tokens, types) if kind == SPECIAL_TYPE]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    return tok


@functools.lru_cache(maxsize=1)
def llm_tokenizer():
    """SmolLM2's tokenizer, built once per process from the packaged file.

    Examples
    --------
    >>> tok = llm_tokenizer()
    >>> tok.encode("<|im_start|>user").ids, tok.encode("2024").tokens
    ([1, 4093], ['2', '0', '2', '4'])
    """
    return build_tokenizer(llm_metadata())


def default_system_prompt(template=None):
    """The system message the file's chat template puts first when a conversation has none.

    ``template``: the template's text, default the packaged file's. A template that is not
    ChatML with a default system message is a ValueError."""
    if template is None:
        template = llm_metadata()["tokenizer.chat_template"]
    found = re.search(r"'<\|im_start\|>system\n(.*?)<\|im_end\|>\n'", template, re.S)
    if found is None or IM_START + "' + message['role']" not in template.replace('"', "'"):
        raise ValueError("the chat template is not the ChatML template the course applies")
    return found.group(1)


def chat_prompt(messages, add_generation_prompt=True, system=None):
    """The ChatML text of a conversation, as the model was trained to read it.

    Parameters
    ----------
    messages : list of dict or str
        ``{"role": "system" | "user" | "assistant", "content": str}`` in order; a str is one
        user message.
    add_generation_prompt : bool
        End with ``<|im_start|>assistant\\n``, where the model's answer begins.
    system : str, optional
        The default system message (used when the first message is not a system one);
        default the file's (:func:`default_system_prompt`).

    Returns
    -------
    str

    Examples
    --------
    >>> print(chat_prompt("Hi!", system="Be brief."))
    <|im_start|>system
    Be brief.<|im_end|>
    <|im_start|>user
    Hi!<|im_end|>
    <|im_start|>assistant
    <BLANKLINE>
    """
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if not isinstance(messages, (list, tuple)) or not messages:
        raise TypeError(f"messages must be a non-empty list of {{'role', 'content'}} dicts (or "
                        f"one str), got {messages!r}")
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in _ROLES or not isinstance(
                m.get("content"), str):
            raise ValueError(f"each message must be {{'role': one of {_ROLES}, 'content': str}},"
                             f" got {m!r}")
    parts = []
    if messages[0]["role"] != "system":
        system = default_system_prompt() if system is None else system
        parts.append(f"{IM_START}system\n{system}{IM_END}\n")
    parts += [f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages]
    if add_generation_prompt:
        parts.append(f"{IM_START}assistant\n")
    return "".join(parts)
