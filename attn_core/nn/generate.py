"""Sampling text from the tiny GPT, one token at a time through a per-layer KV cache.

Each new token runs through the model once: its query, key and value in each layer, the
key and value appended to that layer's cache (:mod:`attn_core.decoding`), its query
attending over the cache. The logits are those of a full causal recompute of the window
(tested to 1e-12 in float64). The positions are learned, ``n_ctx`` of them: when the window
is full, the text is cropped to its last ``n_ctx`` tokens (or fewer: ``keep``) and the cache
is recomputed for them, which :class:`Generation` records (``cropped``, ``starts``).
:func:`generate` runs the tiny GPT through :class:`attn_core.nn.gpt_decoder.GPTDecoder`,
the same logits (to rounding) with the checks at its boundary and the cache written in
place; :func:`forward_cached` is the readable step it is tested against, and serves every
other decoder.

The caches may also be rolling (``prefill(..., window=w, n_sink=s)``): each layer keeps only
the last ``w`` tokens' keys and values (and the first ``s``), as a sliding-window model does;
the positions still count every token seen, so the whole text must fit in ``n_ctx``.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .._validate import (
    as_float_array,
    check_overflow,
    check_positive_int,
    check_seed,
    checked_later,
)
from ..decoding import KVCache, empty_cache
from ..softmax import stable_softmax
from ..threads import on_learner_threads
from .decoder import decoder_step
from .embeddings import check_ids
from .gpt import GPTConfig, check_params
from .gpt_decoder import fast_engine

__all__ = ["Generation", "check_temperature", "check_top_k", "forward_cached", "generate",
           "next_token_probs", "prefill", "sample_loop"]

#: The most tokens one call of :func:`generate` draws (a few seconds of the tiny GPT; more is
#: a typo, such as 10**12, that would run for ever in a notebook).
MAX_NEW_TOKENS = 10_000


@dataclass(frozen=True)
class Generation:
    """A sampled continuation.

    ids : (n_prompt + n_new,) int64 ndarray -- the whole prompt, then the new tokens
    new_ids : (n_new,) int64 ndarray -- the new tokens
    probs : (n_new, vocab) float64 ndarray -- the distribution each new token was drawn from
    logits : (n_new, vocab) ndarray -- the model's logits behind each of them
    cropped : bool -- the context window was cropped at least once (the prompt was longer
        than ``n_ctx``, or the text outgrew it)
    starts : (n_new,) int64 ndarray -- new token ``j`` was drawn from the logits of the last
        position of the window ``ids[starts[j] : n_prompt + j]``
    """

    ids: np.ndarray
    new_ids: np.ndarray
    probs: np.ndarray
    logits: np.ndarray
    cropped: bool
    starts: np.ndarray


def check_temperature(temperature):
    """``temperature`` as a float: a real number, finite and > 0 (else a clear error)."""
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature must be a number > 0, got {type(temperature).__name__}")
    if not np.isfinite(temperature) or not temperature > 0:
        raise ValueError(f"temperature must be a finite number > 0 (the limit 0 is argmax: "
                         f"pass a small value such as 1e-6), got {temperature!r}")
    return float(temperature)


def check_top_k(top_k, vocab_size):
    """``top_k`` as an int in ``1..vocab_size``, or None (keep every token)."""
    if top_k is None:
        return None
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral):
        raise TypeError(f"top_k must be an int in 1..{vocab_size} or None, got "
                        f"{type(top_k).__name__} {top_k!r}")
    if not 1 <= top_k <= vocab_size:
        raise ValueError(f"top_k must lie in 1..{vocab_size} (the vocabulary size), got {top_k}")
    return int(top_k)


def next_token_probs(logits, temperature=1.0, top_k=None):
    """The distribution the next token is drawn from: softmax of the logits over T, top-k.

    Parameters
    ----------
    logits : (..., vocab) array_like
        The model's logits for the next token.
    temperature : float > 0
        Below 1 sharpens the distribution, above 1 flattens it; the limit 0 is argmax.
    top_k : int in 1..vocab, optional
        Keep only the ``top_k`` largest logits (ties broken by the lower id); None keeps all.

    Returns
    -------
    probs : (..., vocab) float64 ndarray
        Sums to 1 along the last axis; 0 outside the top k.

    Notes
    -----
    .. math:: p_i = \\frac{\\exp((z_i - \\max_j z_j) / T)}{\\sum_{j \\in \\text{top-}k}
              \\exp((z_j - \\max_j z_j) / T)} \\quad (i \\in \\text{top-}k)

    Shifting by the maximum before dividing by ``T`` keeps a tiny ``T`` from overflowing:
    the top logit maps to 0, the others to large negative numbers whose exponentials are 0.

    Examples
    --------
    >>> next_token_probs(np.log([1.0, 3.0]))
    array([0.25, 0.75])
    >>> next_token_probs(np.log([1.0, 3.0]), temperature=0.5)
    array([0.1, 0.9])
    >>> next_token_probs([0.0, 2.0, 1.0], top_k=1)
    array([0., 1., 0.])
    """
    z = as_float_array(logits, "logits", min_ndim=1, layout="(..., vocab)").astype(np.float64)
    return _probs(z, check_temperature(temperature), check_top_k(top_k, z.shape[-1]))


def _probs(z, temperature, top_k):
    """:func:`next_token_probs` of checked arguments: ``z`` (..., vocab) float64 logits,
    ``temperature`` a float > 0, ``top_k`` an int in 1..vocab or None (the sampling loop's
    step, where the logits were checked by the model and the others once by its caller)."""
    if top_k is not None and top_k < z.shape[-1]:
        # the k-th largest logit (..., 1), by a partition (linear time, not a sort)
        kth = -np.partition(-z, top_k - 1, axis=-1)[..., top_k - 1:top_k]
        above, ties = z > kth, z == kth  # (..., vocab): fewer than top_k are above it
        room = top_k - above.sum(axis=-1, keepdims=True)  # (..., 1): places left for ties
        keep = above | (ties & (np.cumsum(ties, axis=-1) <= room))  # ties: lower ids first
        z = np.where(keep, z, -np.inf)
    with np.errstate(over="ignore"):  # a tiny T sends the others to -inf: weight 0, argmax
        z = (z - z.max(axis=-1, keepdims=True)) / temperature  # (..., vocab), max entry 0
    return stable_softmax(z, axis=-1)


def _row_probs(z, temperature, top_k):
    """:func:`_probs` of one row ``z`` (vocab,) float64, the same numbers bit for bit (the
    same operations in the same order), without the general path's per-call wrappers (the
    sampling loop calls it once per token: 70 of the 90 microseconds a token spent drawing).
    NaN or +inf logits raise :func:`stable_softmax`'s error."""
    with checked_later():
        if top_k is not None and top_k < z.shape[-1]:
            kth = -np.partition(-z, top_k - 1)[top_k - 1]  # the k-th largest logit
            above, ties = z > kth, z == kth  # fewer than top_k are above it
            room = top_k - np.count_nonzero(above)  # places left for ties: lower ids first
            keep = above | (ties & (np.cumsum(ties) <= room))
            z = np.where(keep, z, -np.inf)
        z = (z - z.max()) / temperature  # (vocab,), max entry 0 (or nan, -inf: below)
        shift = z.max()
        if np.isnan(shift) or shift == np.inf:
            check_overflow(np.array([shift]), z.dtype)  # raises, naming the overflow
        e = z - (0.0 if shift == -np.inf else shift)  # an all -inf row: shift by 0
        np.exp(e, out=e)
        total = e.sum()
        e *= 1 / total if total > 0 else 0.0
    return e


#: What :mod:`attn_core.nn.decoder` needs of a model's config (a GPTConfig or an LLMConfig).
_DECODER_FIELDS = ("n_layers", "n_ctx", "vocab_size", "d_model", "n_heads", "block_options")


def _check_decoder_config(config):
    """``config`` describes a decoder (:class:`GPTConfig`, or SmolLM2's ``LLMConfig``), else
    a TypeError naming what it lacks."""
    missing = [f for f in _DECODER_FIELDS if not hasattr(config, f)]
    if missing:
        raise TypeError(f"config must be a decoder's config (a GPTConfig, or load_llm()'s "
                        f"LLMConfig), got {type(config).__name__} without {', '.join(missing)}")


def forward_cached(params, config, new_ids, caches):
    """Logits of ``m`` new tokens that follow the ``t`` tokens already in the caches.

    Parameters
    ----------
    params : dict of arrays (see :func:`attn_core.nn.gpt.init_gpt`), already checked
        (:func:`attn_core.nn.gpt.check_params`: this inner loop does not check them again)
    config : GPTConfig
    new_ids : (..., m) int ndarray
        The new tokens, at positions ``t .. t + m - 1`` (``t + m <= n_ctx``); leading dims
        are a batch of texts decoded side by side.
    caches : tuple of n_layers KVCache
        Keys and values ``(..., n_heads, t, d_head)`` of each layer (``empty_cache`` at start).
        Rolling caches (``window`` set, see :func:`prefill`) take the tokens one at a time;
        ``t`` is then the tokens seen (``cache.seen``), the cache holds fewer.

    Returns
    -------
    logits : (..., m, vocab) ndarray
        Row ``i`` predicts the token after new token ``i``.
    caches : tuple of KVCache
        The caches with the ``m`` new tokens appended.

    Notes
    -----
    Layer by layer, for the new rows only (pre-norm block, :func:`attn_core.nn.block_forward`
    with its cache): ``a = LN1(x)``, ``q, k, v = a W_q + b_q, a W_k + b_k, a W_v + b_v``
    split into heads (turned by RoPE when the model has rotary positions),
    ``K, V = [K; k], [V; v]``, ``x = x + Concat(softmax(q K^T / sqrt(d_head)) V) W_o + b_o``,
    ``x = x + MLP(LN2(x))``; then ``logits = LN_f(x) W_unembed``
    (:func:`attn_core.nn.decoder.decoder_step`). The causal mask between the ``m`` new
    tokens is :func:`attn_core.decoding.decode_step`'s.

    Any decoder of :mod:`attn_core.nn.decoder` goes through here (the tiny GPT, the
    attention-only models, SmolLM2: ``config`` then an :class:`attn_core.model.llm.LLMConfig`).
    """
    _check_decoder_config(config)
    if not isinstance(caches, tuple) or len(caches) != config.n_layers or not all(
            isinstance(c, KVCache) for c in caches):
        raise TypeError(f"caches must be a tuple of {config.n_layers} KVCache (one per layer: "
                        "prefill's), got " + (f"{len(caches)} items" if isinstance(
                            caches, (tuple, list)) else type(caches).__name__))
    t = caches[0].seen
    new_ids = check_ids(new_ids, config.vocab_size, name="new_ids")
    m = new_ids.shape[-1]
    if t + m > config.n_ctx:
        raise ValueError(f"{t} cached + {m} new tokens exceed n_ctx = "
                         f"{config.n_ctx}: crop the context first")
    if caches[0].window is not None and m > 1:  # a rolling cache: one token at a time
        rows = []
        for i in range(m):
            logits, caches = forward_cached(params, config, new_ids[..., i:i + 1], caches)
            rows.append(logits)
        return np.concatenate(rows, axis=-2), caches  # m x (..., 1, vocab) -> (..., m, vocab)
    return decoder_step(params, config, new_ids, caches)


def prefill(params, config, ids, window=None, n_sink=0):
    """Fresh caches for the window ``ids`` (..., n), n <= n_ctx, and the logits ``(..., n, vocab)``.

    With ``window`` (and ``n_sink``) the caches are rolling (:func:`attn_core.decoding.
    empty_cache`): every token attends only to the last ``window`` tokens (itself included)
    and the first ``n_sink``, in every layer; the logits are then those of the full model
    under that mask."""
    _check_decoder_config(config)
    ids = check_ids(ids, config.vocab_size, n_ctx=config.n_ctx, name="ids")
    d_head = config.d_model // config.n_heads
    dtype = params["wte"].dtype
    # (..., kv_heads): a cache per text and key/value head
    batch = (*np.shape(ids)[:-1], config.block_options.kv_heads)
    caches = tuple(empty_cache(d_head, batch=batch, dtype=dtype, window=window, n_sink=n_sink)
                   for _ in range(config.n_layers))
    return forward_cached(params, config, ids, caches)


def _draw(rng, probs):
    """One id drawn from ``probs`` (vocab,) by the inverse of its cumulative sum."""
    cdf = np.cumsum(probs)  # (vocab,)
    return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"),
                   len(probs) - 1))


@on_learner_threads
def generate(params, config, prompt_ids, n_new, temperature=1.0, top_k=None, seed=0,
             keep=None):
    """Sample ``n_new`` tokens after ``prompt_ids`` through the KV cache.

    Parameters
    ----------
    params : dict of arrays
    config : GPTConfig
    prompt_ids : (n_prompt,) int array_like, n_prompt >= 1
        A prompt longer than ``n_ctx`` is cropped to its last ``n_ctx`` tokens (said by
        ``cropped``); the returned ``ids`` still start with the whole prompt.
    n_new : int in 0..MAX_NEW_TOKENS (10 000)
    temperature, top_k : see :func:`next_token_probs`
    seed : int >= 0
        Seeds ``np.random.default_rng(seed)``; one uniform number is drawn per token.
    keep : int in 1..n_ctx, optional
        How many of the last tokens stay in the window when it is full and a new token needs
        room. Default ``n_ctx``: a sliding window, always the last ``n_ctx`` tokens (the
        cache is rebuilt for every token once the text is longer than ``n_ctx``). A smaller
        ``keep`` rebuilds once every ``n_ctx - keep + 1`` tokens and steps through the cache
        in between (faster; each token then sees between ``keep`` and ``n_ctx`` tokens).

    Returns
    -------
    Generation

    Notes
    -----
    The model runs through :class:`attn_core.nn.gpt_decoder.GPTDecoder` (its blocks'
    options permitting, else :class:`CachedEngine`). Step ``j`` draws token ``n_prompt + j``
    from ``next_token_probs(logits)`` where the logits are those of the last position of the
    window ``ids[starts[j] : L]``, ``L = n_prompt + j``
    (with the default ``keep``, ``starts[j] = max(0, L - n_ctx)``). While the window grows,
    one cached step per token; when it is full, a new token would need position ``n_ctx``,
    which does not exist, so the window is cropped to its last ``keep`` tokens and their
    cache rebuilt (one forward of the window).
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    params = check_params(params, config)
    prompt = check_ids(np.asarray(prompt_ids), config.vocab_size, name="prompt_ids")
    if prompt.ndim != 1 or len(prompt) < 1:
        raise ValueError(f"prompt_ids must be a 1-D array of at least one token id, got shape "
                         f"{prompt.shape}")
    n_new = check_positive_int(n_new, "n_new", minimum=0)
    if n_new > MAX_NEW_TOKENS:
        raise ValueError(f"n_new must lie in 0..{MAX_NEW_TOKENS} (MAX_NEW_TOKENS: more would "
                         f"run for minutes to days), got {n_new}")
    seed = check_seed(seed)
    temperature = check_temperature(temperature)
    top_k = check_top_k(top_k, config.vocab_size)
    keep = config.n_ctx if keep is None else check_positive_int(keep, "keep")
    if keep > config.n_ctx:
        raise ValueError(f"keep must lie in 1..n_ctx = {config.n_ctx}, got {keep}")
    rng = np.random.default_rng(seed)
    return sample_loop(params, config, prompt, n_new, temperature, top_k, rng, keep,
                       engine=fast_engine(params, config))


def sample_loop(params, config, prompt, n_new, temperature, top_k, rng, keep, n_ctx=None,
                stop_ids=(), on_token=None, engine=None):
    """The cached sampling loop of :func:`generate`, on checked arguments, for any decoder of
    :mod:`attn_core.nn.decoder` (the tiny GPT, SmolLM2).

    ``prompt`` (n_prompt,) int ndarray; ``rng`` a numpy Generator; ``keep`` as in
    :func:`generate`; ``n_ctx`` the longest window (default ``config.n_ctx``); generation
    stops after a token of ``stop_ids`` (which is kept in ``new_ids``); ``on_token(token)``,
    if given, is called with each new token as soon as it is drawn (a page can show the
    answer growing). ``engine(capacity)``, if given, makes the object that runs the model
    (default :class:`CachedEngine`: :func:`prefill` and :func:`forward_cached`; SmolLM2's
    :class:`attn_core.model.llm_fast.LLMDecoder` computes the same logits faster): its
    ``start(window_ids)`` and ``step(token)`` return the next token's logits (vocab,), its
    ``length`` counts the tokens it holds. Returns a :class:`Generation`."""
    n_ctx = config.n_ctx if n_ctx is None else n_ctx
    stop_ids = frozenset(int(t) for t in stop_ids)
    ids = list(prompt.tolist())
    cropped = len(ids) > n_ctx
    start = max(0, len(ids) - n_ctx)
    make = (lambda capacity: CachedEngine(params, config)) if engine is None else engine
    model = make(min(n_ctx, len(ids) - start + n_new))  # the longest window it will hold
    last = model.start(np.array(ids[start:]))
    new, all_probs, all_logits, starts = [], [], [], []
    for _ in range(n_new):
        starts.append(start)
        probs = _row_probs(np.asarray(last, dtype=np.float64), temperature, top_k)
        token = _draw(rng, probs)
        new.append(token)
        all_probs.append(probs)
        all_logits.append(last)
        ids.append(token)
        if on_token is not None:
            on_token(token)
        if len(new) == n_new or token in stop_ids:
            break
        if model.length < n_ctx:
            last = model.step(token)
        else:  # the window is full: crop to its last `keep` tokens, rebuild the cache
            cropped = True
            start = len(ids) - keep
            last = model.start(np.array(ids[start:]))
    vocab = config.vocab_size
    return Generation(ids=np.array(ids, dtype=np.int64), new_ids=np.array(new, dtype=np.int64),
                      probs=np.array(all_probs).reshape(len(new), vocab),
                      logits=np.array(all_logits).reshape(len(new), vocab), cropped=cropped,
                      starts=np.array(starts, dtype=np.int64))


class CachedEngine:
    """The default model runner of :func:`sample_loop`: :func:`prefill` for a window,
    :func:`forward_cached` for each new token (immutable per-layer KV caches)."""

    def __init__(self, params, config):
        self.params, self.config, self.caches = params, config, None

    @property
    def length(self):
        """Tokens in the caches."""
        return self.caches[0].length

    def start(self, ids):
        """Fresh caches for the window ``ids`` (n,); the logits (vocab,) after its last token."""
        logits, self.caches = prefill(self.params, self.config, ids)
        return logits[-1]

    def step(self, token):
        """One more token through the caches; the logits (vocab,) after it."""
        logits, self.caches = forward_cached(self.params, self.config, np.array([token]),
                                             self.caches)
        return logits[-1]
