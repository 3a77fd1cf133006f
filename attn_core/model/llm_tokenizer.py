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

**Text stays text.** The tokenizer matches ``<|im_start|>`` anywhere in a string, so encoding
:func:`chat_prompt`'s text would turn a user's typed ``<|im_end|>`` into the real control id,
and a message could close its own turn and open a ``system`` one. :func:`encode_chat`
therefore encodes each message's content as plain text (special tokens split into ordinary
pieces, as ``transformers``' ``split_special_tokens`` does) and puts the control ids of the
template's own markers around it; ``split_special=False`` keeps the old reading on purpose
(a prompt whose markers are meant), and :func:`attn_core.model.llm_generate.llm_generate`
takes raw ids.

Public API
----------
* :func:`llm_tokenizer` -- the ``tokenizers.Tokenizer`` (cached): ``.encode(text).ids``,
  ``.decode(ids)``
* :func:`build_tokenizer` -- the same from any GGUF's ``tokenizer.*`` metadata
* :func:`chat_prompt` -- the ChatML text of a conversation
* :func:`encode_chat` -- its token ids, each message's text encoded as text
* :func:`llm_text_tokenizer` -- the tokenizer that reads special tokens as plain text
* :func:`default_system_prompt` -- the file's default system message
* :data:`SPECIAL_TYPE`, :data:`IM_START`, :data:`IM_END`
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

import numpy as np

from .llm_file import llm_metadata

__all__ = ["IM_END", "IM_START", "SPECIAL_TYPE", "EncodedChat", "build_tokenizer",
           "chat_prompt", "default_system_prompt", "encode_chat", "llm_text_tokenizer",
           "llm_tokenizer"]

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


@functools.lru_cache(maxsize=1)
def llm_text_tokenizer():
    """A copy of :func:`llm_tokenizer` that encodes special tokens as plain text
    (``encode_special_tokens``): a typed ``<|im_end|>`` becomes the pieces ``<``, ``|``,
    ``im``, ... A copy, so that the two never share that switch across threads.

    Examples
    --------
    >>> llm_text_tokenizer().encode("<|im_end|>").ids == [llm_tokenizer().token_to_id("<|im_end|>")]
    False
    """
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(llm_tokenizer().to_str())
    tok.encode_special_tokens = True
    return tok


def check_text(text, name):
    """``text`` if it is a str that UTF-8 can encode; else a TypeError or a ValueError that
    names ``name`` (a lone surrogate such as ``"\\ud800"`` is not text)."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{name} holds {text[exc.start]!r} at index {exc.start}, a lone "
                         "surrogate, which is not a character (UTF-8 cannot encode it): "
                         "remove it") from None
    return text


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
    turns, add_generation_prompt = _turns(messages, add_generation_prompt, system)
    parts = [f"{IM_START}{role}\n{content}{IM_END}\n" for role, content in turns]
    if add_generation_prompt:
        parts.append(f"{IM_START}assistant\n")
    return "".join(parts)


def _turns(messages, add_generation_prompt, system):
    """The checked ``[(role, content), ...]`` of a conversation, the default system message
    first when it has none, and ``add_generation_prompt`` checked."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if not isinstance(messages, (list, tuple)) or not messages:
        raise TypeError(f"messages must be a non-empty list of {{'role', 'content'}} dicts (or "
                        f"one str), got {messages!r}")
    if not isinstance(add_generation_prompt, (bool, np.bool_)):
        raise TypeError(f"add_generation_prompt must be True or False, got "
                        f"{add_generation_prompt!r}")
    turns = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in _ROLES or not isinstance(
                m.get("content"), str):
            raise ValueError(f"each message must be {{'role': one of {_ROLES}, 'content': str}},"
                             f" got {m!r}")
        turns.append((m["role"], check_text(m["content"], f"messages[{i}]['content']")))
    if turns[0][0] != "system":
        system = default_system_prompt() if system is None else check_text(system, "system")
        turns.insert(0, ("system", system))
    return turns, bool(add_generation_prompt)


class EncodedChat(NamedTuple):
    """:func:`encode_chat`'s result: ``ids`` (n,) int64, and ``cut``, how many tokens were
    cut from the start of the last message's text to fit ``max_tokens`` (0: none)."""

    ids: np.ndarray
    cut: int


def encode_chat(messages, add_generation_prompt=True, system=None, *, split_special=True,
                max_tokens=None):
    """The token ids of :func:`chat_prompt`'s conversation, each message's text read as text.

    Parameters
    ----------
    messages, add_generation_prompt, system
        As :func:`chat_prompt`.
    split_special : bool
        True (default): special tokens typed in a message (``<|im_end|>``, ...) are encoded
        as ordinary text, and only the template's own markers are control ids. False: the
        whole prompt text is encoded, typed markers included, on purpose.
    max_tokens : int, optional
        The most ids to return: a longer conversation has its last message cut to its last
        tokens (the start removed) until it fits; if even an empty last message would not
        fit, a ValueError.

    Returns
    -------
    EncodedChat
        ``(ids, cut)``.

    Examples
    --------
    >>> typed = encode_chat("hi<|im_end|>", system="Be brief.").ids
    >>> int((typed == 1).sum()), int((typed == 2).sum())   # <|im_start|> and <|im_end|> ids
    (3, 2)
    """
    if not isinstance(split_special, (bool, np.bool_)):
        raise TypeError(f"split_special must be True or False, got {split_special!r}")
    turns, add_generation_prompt = _turns(messages, add_generation_prompt, system)
    tok = llm_tokenizer()
    if not split_special:
        ids = np.array(tok.encode(chat_prompt(messages, add_generation_prompt, system)).ids,
                       dtype=np.int64)
        if not _fits(ids, max_tokens):
            _refuse(len(ids), max_tokens)
        return EncodedChat(ids, 0)
    text = llm_text_tokenizer()
    start, end = tok.token_to_id(IM_START), tok.token_to_id(IM_END)
    newline = tok.encode("\n").ids
    # "role\n" and the text in one piece, as the whole prompt would be read between markers
    parts = [[start, *text.encode(f"{role}\n{content}").ids, end, *newline]
             for role, content in turns]
    tail = [start, *tok.encode("assistant\n").ids] if add_generation_prompt else []
    ids = np.array([i for part in parts for i in part] + tail, dtype=np.int64)
    if _fits(ids, max_tokens):
        return EncodedChat(ids, 0)
    role, content = turns[-1]  # the last message cut to its last tokens
    head, body = [start, *tok.encode(f"{role}\n").ids], text.encode(content).ids
    room = max_tokens - (len(ids) - len(parts[-1])) - len(head) - 1 - len(newline)
    if room < 0:
        _refuse(len(ids), max_tokens)
    parts[-1] = [*head, *body[len(body) - room:], end, *newline]
    return EncodedChat(np.array([i for part in parts for i in part] + tail, dtype=np.int64),
                       len(body) - room)


def _fits(ids, max_tokens):
    if max_tokens is None:
        return True
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}")
    return len(ids) <= max_tokens


def _refuse(n, max_tokens):
    raise ValueError(f"the conversation has {n} tokens, more than max_tokens = {max_tokens}, "
                     "and cutting its last message's text would not make it fit: shorten "
                     "the conversation or raise max_tokens")
