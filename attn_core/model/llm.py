"""SmolLM2-135M-Instruct (notebook 17) as a decoder of :mod:`attn_core.nn.decoder`: its
configuration, its parameters' names and shapes, and the forward pass with the hooks the
measurements need.

The model is a Llama: 30 blocks of :class:`~attn_core.nn.BlockOptions` with RMSNorm, a SwiGLU
MLP, no biases, rotary positions (base 100000, adjacent pairs, see
:mod:`attn_core.model.llm_file`) and 9 query heads sharing 3 key/value heads; token
embeddings tied to the unembedding (``w_unembed`` is the view ``wte.T``). Its layers are
nn's: :func:`llm_forward` is :func:`attn_core.nn.decoder.decoder_forward` after the checks.

Public API
----------
* :class:`LLMConfig` -- the hyper-parameters (read from the file by
  :func:`attn_core.model.llm_file.load_llm`)
* :func:`llm_param_shapes` -- ``{name: shape}`` of every parameter
* :func:`llm_forward` -- logits, chosen attention maps and head outputs, with interventions
  (sliding window + sinks, keys masked, values zeroed, heads ablated)
* :func:`llm_losses` -- the loss of each next-token prediction, same options
* :func:`llm_window_mask` -- the (n, n) mask of a sliding window with sinks
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import check_finite, check_positive_int, check_result, checked_later
from ..masks import causal_mask, window_mask
from ..nn.block_options import BlockOptions, block_shapes
from ..nn.decoder import decoder_forward
from ..nn.embeddings import check_ids
from ..nn.gpt import check_ablate
from ..nn.loss import next_token_losses
from ..threads import blas_threads

__all__ = ["LLMConfig", "LLMRun", "llm_forward", "llm_losses", "llm_param_shapes",
           "llm_window_mask"]


@dataclass(frozen=True)
class LLMConfig:
    """A Llama-style decoder's hyper-parameters (SmolLM2-135M: 49152, 8192, 576, 9, 3, 30,
    1536, 100000, 1e-5).

    vocab_size, n_ctx, d_model, n_heads, n_kv_heads, n_layers, d_ff : int
    rope_base : float -- RoPE's base
    eps : float -- the RMS norms' eps
    pairing : str -- RoPE's pairing of features ("interleaved" for a GGUF file)
    """

    vocab_size: int
    n_ctx: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    n_layers: int
    d_ff: int
    rope_base: float
    eps: float = 1e-5
    pairing: str = "interleaved"

    def __post_init__(self):
        for name in ("vocab_size", "n_ctx", "d_model", "n_heads", "n_kv_heads", "n_layers",
                     "d_ff"):
            object.__setattr__(self, name, check_positive_int(getattr(self, name), name))
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads = {self.n_heads} must divide d_model = {self.d_model}")
        _ = self.block_options  # checks n_kv_heads, rope_base, eps, pairing

    @property
    def d_head(self):
        """Each head's width, ``d_model // n_heads``."""
        return self.d_model // self.n_heads

    @property
    def block_options(self):
        """The blocks' :class:`~attn_core.nn.BlockOptions`: RMSNorm, SwiGLU, RoPE, GQA, no
        biases."""
        return BlockOptions(self.n_heads, n_kv_heads=self.n_kv_heads, norm="rms",
                            mlp="swiglu", rope_base=self.rope_base, pairing=self.pairing,
                            bias=False, eps=self.eps)


def llm_param_shapes(config):
    """``{name: shape}`` of every parameter: ``"wte"``, each block's under ``"h{i}."``,
    ``"ln_f.g"``, ``"w_unembed"`` (tied: ``wte.T``).

    Examples
    --------
    >>> c = LLMConfig(49152, 8192, 576, 9, 3, 30, 1536, 1e5)
    >>> s = llm_param_shapes(c)
    >>> s["h0.attn.w_k"], s["w_unembed"], len(s)
    ((576, 192), (576, 49152), 273)
    """
    c = _check_config(config)
    shapes = {"wte": (c.vocab_size, c.d_model)}
    for i in range(c.n_layers):
        shapes.update({f"h{i}.{k}": s for k, s in
                       block_shapes(c.d_model, c.d_ff, c.block_options).items()})
    shapes.update({"ln_f.g": (c.d_model,), "w_unembed": (c.d_model, c.vocab_size)})
    return shapes


def _check_config(config):
    if not isinstance(config, LLMConfig):
        raise TypeError(f"config must be an LLMConfig (from load_llm()), got "
                        f"{type(config).__name__}")
    return config


def _check_params(params, config):
    """A cheap check (names, shapes, dtype; the values were checked once at load)."""
    if not isinstance(params, dict):
        raise TypeError(f"params must be the dict of arrays load_llm() returns, got "
                        f"{type(params).__name__}")
    for name, shape in llm_param_shapes(config).items():
        a = params.get(name)
        if a is None:
            raise ValueError(f"params is missing {name!r}: pass the params of load_llm()")
        if not isinstance(a, np.ndarray) or a.shape != shape:
            raise ValueError(f"params[{name!r}] must be an ndarray of shape {shape}, got "
                             f"{getattr(a, 'shape', type(a).__name__)}")
    return params


def _bad_weight(params):
    """The ValueError naming the first parameter that holds NaN or inf (None when every one
    is finite). Looked for only when a forward pass has failed: the cause, named, instead of
    the overflow it led to; a pass that succeeds pays nothing for it."""
    for name, a in params.items():
        try:
            check_finite(a, f"params[{name!r}]")
        except ValueError as e:
            return ValueError(f"{e}: a weight must be finite (pass the params of load_llm())")
    return None


def llm_window_mask(n, window, n_sink=0):
    """Where query ``i`` may see key ``j`` under a sliding window of ``window`` tokens that
    also keeps the first ``n_sink`` (Xiao et al. 2023): :func:`attn_core.window_mask`; the
    full causal mask when ``window`` is None."""
    if window is None:
        if n_sink:
            raise ValueError(f"n_sink = {n_sink} needs a window; pass window=...")
        return causal_mask(n)
    return window_mask(n, window, n_sink)


def _layer_dict(value, name, config, what):
    """``{layer: key positions}`` checked (layers in range, positions ints)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a dict {{layer: {what}}}, got {type(value).__name__}")
    out = {}
    for layer, v in value.items():
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not (
                0 <= layer < config.n_layers):
            raise ValueError(f"{name}'s keys must be layers 0..{config.n_layers - 1}, got "
                             f"{layer!r}")
        out[int(layer)] = v
    return out


def _check_positions(value, name, n):
    if value is None:
        return None
    for layer, keys in value.items():
        arr = np.asarray(keys)
        if arr.dtype.kind not in "iu" or arr.ndim > 1 or not ((arr >= 0) & (arr < n)).all():
            raise ValueError(f"{name}[{layer}] must be key positions in 0..{n - 1}, got "
                             f"{keys!r}")
        value[layer] = arr.reshape(-1).astype(np.int64)
    return value


def _check_heads(value, name, config):
    if value is None:
        return None
    for layer, heads in value.items():
        if heads is None:
            continue
        arr = np.asarray(heads)
        if arr.dtype.kind not in "iu" or arr.ndim != 1 or not (
                (arr >= 0) & (arr < config.n_heads)).all():
            raise ValueError(f"{name}[{layer}] must be None (all heads) or a list of heads in "
                             f"0..{config.n_heads - 1}, got {heads!r}")
        value[layer] = [int(h) for h in arr]
    return value


@dataclass(frozen=True)
class LLMRun:
    """What :func:`llm_forward` returns.

    logits : (..., n, vocab) float32 ndarray
    weights : dict ``{layer: (..., heads, n, n)}`` -- the attention maps asked for
    heads : dict ``{layer: (..., heads, n, d_head)}`` -- the head outputs asked for
    """

    logits: np.ndarray
    weights: dict
    heads: dict


def llm_forward(params, config, ids, *, window=None, n_sink=0, weights_of=None,
                heads_of=None, keys_masked=None, values_zeroed=None, ablate=None,
                _unembed=True):
    """SmolLM2's forward pass over a whole text, under one BLAS thread.

    Parameters
    ----------
    params, config
        From :func:`attn_core.model.llm_file.load_llm`.
    ids : (..., n) int array_like
        Token ids (:func:`attn_core.model.llm_tokenizer.llm_tokenizer`), ``n <= n_ctx``.
    window, n_sink : int, optional
        A sliding window of ``window`` tokens (itself included) plus the first ``n_sink``
        tokens, in every layer, as a mask over the whole text (:func:`llm_window_mask`):
        the logits equal those of decoding with a rolling KV cache of that window and sinks
        (:func:`attn_core.nn.prefill`). Default: full causal attention.
    weights_of : dict, optional
        ``{layer: heads or None}``: return those attention maps (..., heads, n, n). None
        keeps none (a long text's 30 x 9 maps would not fit in memory).
    heads_of : dict, optional
        ``{layer: heads or None}``: return those heads' outputs (..., heads, n, d_head),
        e.g. to average them for a mean ablation.
    keys_masked : dict, optional
        ``{layer: key positions}``: those keys' scores masked for every later query (their
        weight is shared out among the other keys).
    values_zeroed : dict, optional
        ``{layer: key positions}``: those keys' value vectors zeroed (their weight is kept
        and carries nothing). With ``keys_masked``, the control that tells an attention sink
        (weight parked where it does nothing) from a key whose content matters.
    ablate : dict, optional
        ``{(layer, head): None or (n, d_head) array}``: that head's output replaced by zeros
        or by a mean, before the output projection (as :func:`attn_core.nn.gpt_forward`).

    Returns
    -------
    LLMRun
    """
    config = _check_config(config)
    params = _check_params(params, config)
    ids = check_ids(ids, config.vocab_size, config.n_ctx)
    n = ids.shape[-1]
    mask = None if window is None else llm_window_mask(n, window, n_sink)
    if window is None and n_sink:
        raise ValueError(f"n_sink = {n_sink} needs a window; pass window=...")
    weights_of = _check_heads(_layer_dict(weights_of, "weights_of", config, "heads"),
                              "weights_of", config)
    heads_of = _check_heads(_layer_dict(heads_of, "heads_of", config, "heads"), "heads_of",
                            config)
    keys_masked = _layer_dict(keys_masked, "keys_masked", config, "key positions")
    values_zeroed = _layer_dict(values_zeroed, "values_zeroed", config, "key positions")
    keys_masked = _check_positions(keys_masked, "keys_masked", n)
    values_zeroed = _check_positions(values_zeroed, "values_zeroed", n)
    ablate = check_ablate(ablate, config, n, params["wte"].dtype)
    try:
        with blas_threads(), checked_later():
            logits, weights, state = decoder_forward(
                params, config, ids, ablate=ablate, mask=mask, keys_masked=keys_masked,
                values_zeroed=values_zeroed, weights_of=weights_of or None, heads_of=heads_of,
                unembed=_unembed)
        check_result(logits, "the logits")
    except ValueError:
        bad = _bad_weight(params)
        if bad is not None:
            raise bad from None
        raise
    return LLMRun(logits=logits, weights=weights, heads=state["heads"])


#: Rows of logits unembedded at a time by :func:`llm_losses` (x 49152 x 8 bytes in float64).
LOSS_ROWS = 128


def llm_losses(params, config, ids, **options):
    """The loss of each next-token prediction along ``ids`` (..., n), in nats: position ``i``
    predicting ``ids[..., i + 1]`` (:func:`attn_core.nn.next_token_losses`).

    ``options`` are :func:`llm_forward`'s (window, n_sink, keys_masked, values_zeroed,
    ablate). The logits are made :data:`LOSS_ROWS` positions at a time, so a text of
    thousands of tokens never holds all of them. Returns ``(..., n - 1)`` float64.
    """
    config = _check_config(config)
    ids = check_ids(ids, config.vocab_size, config.n_ctx + 1)
    if ids.shape[-1] < 2:
        raise ValueError(f"ids must hold at least 2 tokens, got shape {ids.shape}")
    run = llm_forward(params, config, ids[..., :-1], _unembed=False, **options)
    y, n = run.logits, ids.shape[-1] - 1  # y: the final norm's output (..., n - 1, d_model)
    out = np.empty((*ids.shape[:-1], n))
    with blas_threads():
        for s in range(0, n, LOSS_ROWS):
            e = min(n, s + LOSS_ROWS)
            logits = y[..., s:e, :] @ params["w_unembed"]  # (..., rows, d) @ (d, V)
            out[..., s:e] = next_token_losses(logits, ids[..., s:e + 1])
    return out
