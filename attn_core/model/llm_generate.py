"""Talking to SmolLM2: text in, an answer out, decoded token by token through the course's
one cached decoding loop (:func:`attn_core.nn.generate.sample_loop`: per-layer KV caches of
3 key/value heads, rotary positions at each new token's place), the model run by
:class:`attn_core.model.llm_fast.LLMDecoder` (the arguments checked here, once).

Greedy decoding (``greedy=True``: always the most likely token) or sampling with a
temperature and top-k (:func:`attn_core.nn.next_token_probs`); the answer stops at
``<|im_end|>``, the token that closes a ChatML message. A conversation longer than the
context (the model's 8192 tokens, or a shorter ``context`` chosen to see what cropping does)
is cropped to its last tokens; the :class:`Reply` says so in ``notice`` (nothing is
printed). Everything runs under :func:`attn_core.threads.blas_threads`.

Public API
----------
* :func:`chat` -- the answer to a question or a conversation (the ChatML prompt built)
* :func:`llm_generate` -- the continuation of any token ids
* :class:`Reply`
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial

import numpy as np

from .._validate import check_bool, check_positive_int, check_seed
from ..nn.embeddings import check_ids
from ..nn.generate import Generation, check_temperature, check_top_k, sample_loop
from ..threads import blas_threads
from .llm import _bad_weight, _check_config, _check_params
from .llm_fast import LLMDecoder
from .llm_file import load_llm
from .llm_tokenizer import IM_END, check_text, encode_chat, llm_tokenizer

__all__ = ["Reply", "chat", "llm_generate"]

#: The most new tokens one call may ask for (a 135M model's answers are short).
MAX_NEW = 1024
#: The longest prompt :func:`chat` reads unless told otherwise (``max_prompt=...``): the
#: whole prompt is read before the first token of the answer, and its attention grows with
#: the square of its length, so a pasted page is refused (or cut, ``crop=True``) at once.
MAX_PROMPT = 512


@dataclass(frozen=True)
class Reply:
    """An answer.

    text : str -- the new tokens decoded (``<|im_end|>`` left out)
    prompt_ids : (n_prompt,) int64 ndarray -- what the model read
    new_ids : (n_new,) int64 ndarray -- the tokens it wrote (``<|im_end|>`` included if it
        stopped there)
    stopped : bool -- it ended its message with ``<|im_end|>`` (else it ran out of tokens)
    notice : str -- "" or what was cropped (a context too long for the window)
    generation : attn_core.nn.Generation -- every step's logits and distribution
    """

    text: str
    prompt_ids: np.ndarray
    new_ids: np.ndarray
    stopped: bool
    notice: str
    generation: Generation


def _crop_notice(n_prompt, n_total, context, cropped):
    if not cropped:
        return ""
    return (f"The text ({n_total} tokens with the answer) is longer than the context of "
            f"{context} tokens: the model saw only the last tokens of it (the window was "
            f"cropped, its cache rebuilt). The prompt had {n_prompt} tokens.")


def llm_generate(prompt_ids, max_new=64, *, greedy=False, temperature=1.0, top_k=None,
                 seed=0, context=None, keep=None, stop=True, on_token=None, model=None):
    """The model's continuation of ``prompt_ids``, one token at a time through the KV cache.

    Parameters
    ----------
    prompt_ids : (n_prompt,) int array_like
    max_new : int in 0..1024
        The most tokens to write.
    greedy : bool
        Always take the most likely token (ties: the lower id); ``temperature`` and
        ``top_k`` are then not used.
    temperature, top_k
        See :func:`attn_core.nn.next_token_probs`.
    seed : int >= 0
        Seeds the one uniform draw per token (``np.random.default_rng(seed)``).
    context : int, optional
        The longest window the model reads (default its ``n_ctx``, 8192): a text that
        outgrows it is cropped to its last ``keep`` tokens and the cache rebuilt.
    keep : int in 1..context, optional
        Default ``3 * context // 4`` (a rebuild every ``context / 4`` tokens, not every
        token).
    stop : bool
        Stop after ``<|im_end|>``.
    on_token : callable, optional
        Called with each new token id as soon as it is drawn.
    model : (params, config), optional
        Default :func:`attn_core.model.llm_file.load_llm`'s.

    Returns
    -------
    Reply
    """
    params, config = load_llm() if model is None else model
    config = _check_config(config)
    params = _check_params(params, config)
    prompt = check_ids(np.asarray(prompt_ids), config.vocab_size, name="prompt_ids")
    if prompt.ndim != 1 or len(prompt) < 1:
        raise ValueError(f"prompt_ids must be a 1-D array of at least one token id, got shape "
                         f"{prompt.shape}")
    max_new = check_positive_int(max_new, "max_new", minimum=0)
    if max_new > MAX_NEW:
        raise ValueError(f"max_new must be at most {MAX_NEW}, got {max_new}")
    if not isinstance(greedy, bool):
        raise TypeError(f"greedy must be True or False, got {greedy!r}")
    temperature = 1.0 if greedy else check_temperature(temperature)
    top_k = 1 if greedy else check_top_k(top_k, config.vocab_size)
    seed = check_seed(seed)
    stop = check_bool(stop, "stop")
    if on_token is not None and not callable(on_token):
        raise TypeError(f"on_token must be a function of a token id, or None, got "
                        f"{type(on_token).__name__}")
    context = config.n_ctx if context is None else check_positive_int(context, "context")
    if context > config.n_ctx:
        raise ValueError(f"context must be at most the model's n_ctx = {config.n_ctx}, got "
                         f"{context}")
    keep = max(1, 3 * context // 4) if keep is None else check_positive_int(keep, "keep")
    if keep > context:
        raise ValueError(f"keep must lie in 1..context = {context}, got {keep}")
    tok = llm_tokenizer() if model is None else None
    stop_ids = (tok.token_to_id(IM_END),) if stop and tok is not None else (
        (2,) if stop else ())  # <|im_end|> is id 2 in SmolLM2's vocabulary
    try:
        with blas_threads():
            gen = sample_loop(params, config, prompt, max_new, temperature, top_k,
                              np.random.default_rng(seed), keep, n_ctx=context,
                              stop_ids=stop_ids, on_token=on_token,
                              engine=partial(LLMDecoder, params, config))
    except ValueError:
        bad = _bad_weight(params)  # the cause (a NaN weight), not the overflow it led to
        if bad is not None:
            raise bad from None
        raise
    stopped = bool(len(gen.new_ids)) and int(gen.new_ids[-1]) in stop_ids
    shown = gen.new_ids[:-1] if stopped else gen.new_ids
    text = llm_tokenizer().decode(shown.tolist()) if model is None else ""
    return Reply(text=text, prompt_ids=prompt.astype(np.int64), new_ids=gen.new_ids,
                 stopped=stopped, notice=_crop_notice(len(prompt), len(gen.ids), context,
                                                      gen.cropped),
                 generation=gen)


def chat(messages, max_new=64, *, max_prompt=MAX_PROMPT, crop=False, split_special=True,
         system=None, **options):
    """SmolLM2's answer to a question or a conversation.

    Parameters
    ----------
    messages : str or list of dict
        One user question, or ``[{"role": ..., "content": ...}, ...]``
        (:func:`attn_core.model.llm_tokenizer.encode_chat` encodes the ChatML prompt, each
        message's text as text: a typed ``<|im_end|>`` is not the control token).
    max_new : int
    max_prompt : int, optional
        The most tokens the prompt may have (default :data:`MAX_PROMPT`; up to the model's
        context). Decided before any work: a longer prompt is a ValueError that says how
        long it is, or, with ``crop=True``, its last message is cut to its last tokens and
        ``Reply.notice`` says how many were left out.
    crop : bool, optional
    split_special : bool, optional
        False reads special tokens typed in a message as control tokens, on purpose.
    system : str, optional
        The default system message (see :func:`~attn_core.model.llm_tokenizer.chat_prompt`).
    **options
        :func:`llm_generate`'s (greedy, temperature, top_k, seed, context, keep, on_token).

    Returns
    -------
    Reply

    Examples
    --------
    >>> chat("What is the capital of France?", greedy=True).text
    'The capital of France is Paris.'
    """
    if isinstance(messages, str):
        check_text(messages, "messages")
    limit = check_positive_int(max_prompt, "max_prompt")
    n_ctx = (load_llm() if options.get("model") is None else options["model"])[1].n_ctx
    if limit > n_ctx:
        raise ValueError(f"max_prompt must be at most the model's context of {n_ctx} tokens, "
                         f"got {limit}")
    if not isinstance(crop, bool):
        raise TypeError(f"crop must be True or False, got {crop!r}")
    encoded = encode_chat(messages, system=system, split_special=split_special,
                          max_tokens=limit if crop else None)
    if len(encoded.ids) > limit:
        raise ValueError(f"the prompt has {len(encoded.ids):,} tokens, more than max_prompt = "
                         f"{limit:,}; nothing was computed. Shorten it, pass crop=True to keep "
                         f"the end of the last message, or raise max_prompt (up to {n_ctx:,}:"
                         " a longer prompt is a longer wait before the first word)")
    reply = llm_generate(encoded.ids, max_new, **options)
    if encoded.cut:
        cut = (f"The question was cut to fit {limit:,} tokens: its first {encoded.cut:,} "
               "tokens were left out, and the model read the rest.")
        reply = dataclasses.replace(reply, notice=" ".join(filter(None, (cut, reply.notice))))
    return reply
