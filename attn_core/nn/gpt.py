"""The tiny GPT: embeddings, ``n_layers`` pre-norm causal blocks, a final layer norm and an
untied unembedding; its forward pass, its loss and every gradient, in numpy.

The parameters are one flat dict of arrays (names in :func:`param_shapes`)::

    x = wte[ids] + wpe[:n]                       (..., n, d_model)
    x = block_i(x)  for i in 0 .. n_layers - 1   (pre-norm, causal; attn_core.nn.block)
    logits = LN_f(x) @ w_unembed                 (..., n, vocab_size)

``GPTConfig(..., mlp=False)`` is the attention-only model (each block ``x + MHA(LN1(x))``,
Elhage et al. 2021's toy transformers); ``gpt_forward(..., ablate=...)`` runs the forward
with chosen heads' outputs replaced (zero or a mean: :func:`mean_ablation`).
"""

from dataclasses import dataclass

import numpy as np

from .._validate import (
    as_float_array,
    check_bool,
    check_float_dtype,
    check_positive_int,
    check_result,
    checked_later,
    perturb_init,
)
from ..gradients import _weight_grad
from .block import (
    BlockOptions,
    _block_backward_parts,
    block_params,
    block_shapes,
    check_shaped,
)
from .block_options import check_attentions
from .decoder import decoder_forward
from .embeddings import _embed_backward, check_ids
from .gated_delta import GATE_BIAS
from .layer_norm import _layer_norm_backward_parts
from .loss import _cross_entropy

__all__ = ["LN_EPS", "GPTConfig", "check_ablate", "check_params", "gpt_forward",
           "gpt_loss_and_grads", "head_outputs", "init_gpt", "is_decayed", "mean_ablation",
           "param_shapes"]

#: The layer norms' eps (GPT-2's).
LN_EPS = 1e-5
#: The initial standard deviation of every weight matrix: the N(0, 0.02) of GPT-1's paper
#: (Radford et al. 2018, section 4.1).
INIT_STD = 0.02


@dataclass(frozen=True, repr=False)
class GPTConfig:
    """The tiny GPT's sizes. ``d_ff`` defaults to ``4 * d_model``; ``n_heads`` divides
    ``d_model``; ``mlp=False`` drops every block's MLP sub-layer (and its layer norm), and
    then ``d_ff`` is None; ``attention="linear"`` gives every head linear attention's weights
    instead of the softmax (notebook 18), ``"gated_delta"`` a Gated DeltaNet state; a tuple
    of ``n_layers`` names mixes them layer by layer (a hybrid, notebook 19);
    ``output_gate=True`` multiplies every head's output by a sigmoid gate of the attention's
    input (notebook 19, :mod:`attn_core.nn.block_options`). Every field is checked when the
    config is made (the error names it).

    Examples
    --------
    >>> GPTConfig(vocab_size=30, n_ctx=16, d_model=32, n_heads=4, n_layers=2).d_ff
    128
    >>> GPTConfig(vocab_size=30, n_ctx=16, d_model=32, n_heads=4, n_layers=2, mlp=False).d_ff
    """

    vocab_size: int
    n_ctx: int
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int | None = None
    mlp: bool = True
    attention: str | tuple = "softmax"
    output_gate: bool = False

    def __post_init__(self):
        for name in ("vocab_size", "n_ctx", "d_model", "n_heads", "n_layers"):
            # stored as plain ints (a numpy integer would not go into a JSON checkpoint)
            object.__setattr__(self, name, check_positive_int(getattr(self, name), name))
        for name in ("mlp", "output_gate"):
            object.__setattr__(self, name, check_bool(getattr(self, name), name))
        if not self.mlp and self.d_ff is not None:
            raise ValueError(f"d_ff = {self.d_ff} was given but mlp=False has no MLP: "
                             "leave d_ff out")
        if self.mlp:
            if self.d_ff is None:
                object.__setattr__(self, "d_ff", 4 * self.d_model)
            object.__setattr__(self, "d_ff", check_positive_int(self.d_ff, "d_ff"))
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads = {self.n_heads} must divide d_model = {self.d_model}")
        object.__setattr__(self, "attention", check_attentions(self.attention, self.n_layers))

    def __repr__(self):
        """The fields, ``mlp`` only when False (the tiny GPT's repr is as it always was)."""
        fields = ("vocab_size", "n_ctx", "d_model", "n_heads", "n_layers", "d_ff")
        extra = ("" if self.mlp else ", mlp=False") + (
            "" if self.attention == "softmax" else f", attention={self.attention!r}") + (
            ", output_gate=True" if self.output_gate else "")
        return (f"GPTConfig({', '.join(f'{k}={getattr(self, k)!r}' for k in fields)}"
                f"{extra})")

    @property
    def d_head(self):
        """Each head's width, ``d_model // n_heads``."""
        return self.d_model // self.n_heads

    @property
    def layers(self):
        """Each layer's mixer, a tuple of ``n_layers`` names of :data:`ATTENTIONS`."""
        if isinstance(self.attention, str):
            return (self.attention,) * self.n_layers
        return self.attention

    @property
    def block_options(self):
        """The blocks' :class:`~attn_core.nn.BlockOptions`: GPT-2's (layer norm, GELU MLP or
        none, biases, one key/value head per query head, no rotary positions); with a mixer
        per layer, the first layer's (:meth:`layer_options` gives each)."""
        return self.layer_options(0)

    def layer_options(self, i):
        """Block ``i``'s :class:`~attn_core.nn.BlockOptions` (its mixer ``layers[i]``)."""
        return BlockOptions(self.n_heads, mlp="gelu" if self.mlp else None, eps=LN_EPS,
                            attention=self.layers[i], output_gate=self.output_gate)


def _check_config(config):
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    return config


def param_shapes(config):
    """``{name: shape}`` of every parameter, in a fixed order (the order :func:`init_gpt`
    draws them in).

    Examples
    --------
    >>> shapes = param_shapes(GPTConfig(10, 8, 4, 2, 1))
    >>> shapes["wte"], shapes["h0.mlp.w_in"], shapes["w_unembed"], len(shapes)
    ((10, 4), (4, 16), (4, 10), 21)
    >>> len(param_shapes(GPTConfig(10, 8, 4, 2, 1, mlp=False)))  # no ln2.*, no mlp.*
    15
    """
    c = _check_config(config)
    shapes = {"wte": (c.vocab_size, c.d_model), "wpe": (c.n_ctx, c.d_model)}
    for i in range(c.n_layers):
        shapes.update({f"h{i}.{k}": s for k, s in
                       block_shapes(c.d_model, c.d_ff, c.layer_options(i)).items()})
    shapes.update({"ln_f.g": (c.d_model,), "ln_f.b": (c.d_model,),
                   "w_unembed": (c.d_model, c.vocab_size)})
    return shapes


def is_decayed(name):
    """True for the weight matrices and tables (AdamW decays them), False for the biases and
    the layer norms' gains and shifts (GPT-2's convention)."""
    return name in ("wte", "wpe", "w_unembed") or name.rsplit(".", 1)[-1].startswith("w_")


def init_gpt(config, rng, dtype="float32", std=INIT_STD):
    """GPT-2-style initial parameters.

    Parameters
    ----------
    config : GPTConfig
    rng : numpy.random.Generator
        The source of the random draws (seed it for a reproducible model).
    dtype : str or numpy dtype
        Floating dtype of every array (drawn in float64, then rounded to it).
    std : float
        The weights' initial standard deviation (GPT-1's paper's 0.02; the toy models of notebook 15
        start larger, out of the plateau a product of four small matrices sits on).

    Returns
    -------
    params : dict of ndarray
        Every parameter of :func:`param_shapes`: weights and tables normal(0, std), the
        two residual output projections of each block (``attn.w_o``, ``mlp.w_out``) scaled
        by ``1/sqrt(2 n_layers)`` (``1/sqrt(n_layers)`` without the MLP), biases and
        shifts 0, gains 1. Each array goes through
        :func:`attn_core._validate.perturb_init` (one ulp up when
        ``ATTN_CORE_PERTURB_INIT=1``, for CI's portability check).

    Notes
    -----
    A residual stream that ``2 n_layers`` sub-layers add into grows like the square root of
    their number; scaling their output projections down keeps its spread near the
    embeddings' at the start.

    Examples
    --------
    >>> p = init_gpt(GPTConfig(10, 8, 4, 2, 1), np.random.default_rng(0))
    >>> p["wte"].dtype, float(p["h0.ln1.g"][0]), float(p["h0.attn.b_q"][0])
    (dtype('float32'), 1.0, 0.0)
    """
    config = _check_config(config)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), "
                        f"got {type(rng).__name__}")
    dtype = check_float_dtype(dtype)
    if isinstance(std, bool) or not isinstance(std, (int, float, np.floating)) or not (
            0 < std < np.inf):
        raise ValueError(f"std must be a finite number > 0, got {std!r}")
    # the sub-layers that add into the stream: two per block, one without the MLP
    residual_scale = 1.0 / np.sqrt((2 if config.mlp else 1) * config.n_layers)
    params = {}
    for name, shape in param_shapes(config).items():
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "g":
            w = np.ones(shape)
        elif leaf == "b_a":  # a gated-delta layer's gate: sigmoid(GATE_BIAS), near 1
            w = np.full(shape, GATE_BIAS)
        elif leaf.startswith("b"):
            w = np.zeros(shape)
        else:
            w = rng.normal(0.0, std, size=shape)
            if name.endswith(("attn.w_o", "mlp.w_out")):
                w = w * residual_scale
        params[name] = perturb_init(w.astype(dtype))
    return params


def check_params(params, config):
    """``params`` checked against ``config``: a dict with every name of :func:`param_shapes`,
    each a finite float array of its shape, all of one dtype. Returns the dict (arrays as
    float ndarrays); the errors name the parameter."""
    shapes = param_shapes(config)
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict of arrays, got {type(params).__name__}")
    missing = [k for k in shapes if k not in params]
    if missing:
        raise ValueError(f"params is missing {len(missing)} parameter(s) of this config: "
                         f"{missing[:6]}{' ...' if len(missing) > 6 else ''}")
    extra = sorted(set(params) - set(shapes))
    if extra:
        raise ValueError(f"params has parameter(s) this config does not: {extra[:6]}")
    checked = check_shaped(params, shapes, "params", "for this config")
    dtypes = {a.dtype for a in checked.values()}
    if len(dtypes) > 1:
        raise ValueError(f"params must all have one dtype, got {sorted(map(str, dtypes))}")
    return checked


def _forward(params, config, ids, ablate=None):
    """The forward without checks: ``(logits, weights, cache)``; ``ablate`` checked by
    :func:`check_ablate` (then the cache is not valid for the backward)."""
    logits, weights, state = decoder_forward(params, config, ids, ablate=ablate, keep=True)
    return logits, tuple(weights[i] for i in range(config.n_layers)), state


def gpt_forward(params, config, ids, ablate=None):
    """The model's next-token logits at every position, and every head's attention.

    Parameters
    ----------
    params : dict of ndarray
        As made by :func:`init_gpt` (names and shapes of :func:`param_shapes`), one dtype.
    config : GPTConfig
    ids : (..., n) int array_like
        Token ids in ``0..vocab_size - 1``, ``1 <= n <= n_ctx``.
    ablate : dict, optional
        ``{(layer, head): replacement}``: that head's output (its ``weights @ v``, before the
        output projection) replaced by zeros (``None``) or by an ``(n, d_head)`` array (a
        mean over a reference batch: :func:`mean_ablation`), computed in the forward pass;
        later layers see the changed stream. The returned weights are the ablated model's.

    Returns
    -------
    logits : (..., n, vocab_size) ndarray, params' dtype
        ``logits[..., i, :]`` scores the token after position ``i``, from ``ids[..., :i+1]``
        only (causal).
    weights : tuple of n_layers ndarrays (..., n_heads, n, n)
        Each layer's attention weights.

    Examples
    --------
    >>> config = GPTConfig(vocab_size=10, n_ctx=8, d_model=8, n_heads=2, n_layers=2)
    >>> params = init_gpt(config, np.random.default_rng(0))
    >>> logits, weights = gpt_forward(params, config, [[1, 2, 3], [4, 5, 6]])
    >>> logits.shape, len(weights), weights[0].shape
    ((2, 3, 10), 2, (2, 2, 3, 3))
    """
    config = _check_config(config)
    params = check_params(params, config)
    ids = check_ids(ids, config.vocab_size, config.n_ctx)
    ablate = check_ablate(ablate, config, ids.shape[-1], params["wte"].dtype)
    with checked_later():
        logits, weights, _ = _forward(params, config, ids, ablate)
    check_result(logits, "the logits")
    return logits, weights


def check_ablate(ablate, config, n, dtype=np.float64):
    """``ablate`` (see :func:`gpt_forward`) checked: keys ``(layer, head)`` in range, values
    None or finite ``(..., n, d_head)`` arrays (cast to ``dtype``). Returns a new dict. Any
    decoder's config with ``n_layers``, ``n_heads`` and ``d_head`` (SmolLM2's too)."""
    if ablate is None:
        return {}
    if not isinstance(ablate, dict):
        raise TypeError(f"ablate must be a dict {{(layer, head): None or (n, d_head) array}}, "
                        f"got {type(ablate).__name__}")
    checked = {}
    for key, r in ablate.items():
        if (not isinstance(key, tuple) or len(key) != 2
                or not all(isinstance(k, (int, np.integer)) and not isinstance(k, bool)
                           for k in key)
                or not (0 <= key[0] < config.n_layers and 0 <= key[1] < config.n_heads)):
            raise ValueError(f"ablate's keys must be (layer, head) with 0 <= layer < "
                             f"{config.n_layers} and 0 <= head < {config.n_heads}, got {key!r}")
        if r is not None:
            r = as_float_array(r, f"ablate[{key!r}]")
            if r.shape[-2:] != (n, config.d_head):  # leading dims: one per text of a batch
                raise ValueError(f"ablate[{key!r}] must be None (zero) or an array of shape "
                                 f"(..., {n}, {config.d_head}) (..., n, d_head), got shape "
                                 f"{r.shape}")
            r = r.astype(dtype, copy=False)
        checked[(int(key[0]), int(key[1]))] = r
    return checked


def head_outputs(params, config, ids):
    """Every head's output (``weights @ v``, before the output projection).

    Returns
    -------
    tuple of n_layers ndarrays (..., n_heads, n, d_head)
    """
    config = _check_config(config)
    params = check_params(params, config)
    ids = check_ids(ids, config.vocab_size, config.n_ctx)
    with checked_later():
        _, _, cache = _forward(params, config, ids)
    n = ids.shape[-1]
    # (..., n, n_heads * d_head) -> (..., n, n_heads, d_head) -> (..., n_heads, n, d_head)
    return tuple(c["attn"][3].reshape(*ids.shape[:-1], n, config.n_heads, config.d_head)
                 .swapaxes(-3, -2) for c in cache["blocks"])


def mean_ablation(params, config, ids, heads):
    """``{(layer, head): mean output}`` for :func:`gpt_forward`'s ``ablate``: each head's
    output averaged over the reference batch ``ids`` (..., n) at every position, shape
    ``(n, d_head)``. Unlike zeroing, a mean ablation keeps what the head writes on average
    and removes only what depends on the sequence."""
    outs = head_outputs(params, config, ids)
    means = {}
    for layer, h in heads:
        o = outs[layer][..., h, :, :]  # (..., n, d_head)
        means[(layer, h)] = o.reshape(-1, *o.shape[-2:]).mean(axis=0)  # (n, d_head)
    return check_ablate(means, config, np.shape(ids)[-1], params["wte"].dtype)


def gpt_loss_and_grads(params, config, ids, targets):
    """The mean next-token cross-entropy and its gradient with respect to every parameter.

    Parameters
    ----------
    params, config, ids
        As for :func:`gpt_forward`.
    targets : (..., n) int array_like
        The token to predict at each position (for language modelling ``ids`` shifted by
        one: see ``attn_core.nn.get_batch``).

    Returns
    -------
    loss : float
        Mean cross-entropy over every position, in nats.
    grads : dict of ndarray
        One gradient per parameter, same names, shapes and dtype as ``params``.

    Notes
    -----
    One forward pass keeps what the backward needs; the backward runs the layers in reverse:
    :math:`dz = (\\mathrm{softmax}(z) - e_y)/N` (:func:`~attn_core.nn.cross_entropy`),
    :math:`dW_{unembed} = \\mathrm{LN}_f(x)^\\top dz`, then the final layer norm, each
    block (:func:`~attn_core.nn.block_backward`) and the embeddings
    (:func:`~attn_core.nn.embed_backward`).

    Examples
    --------
    >>> config = GPTConfig(vocab_size=10, n_ctx=8, d_model=8, n_heads=2, n_layers=1)
    >>> params = init_gpt(config, np.random.default_rng(0), dtype="float64")
    >>> loss, grads = gpt_loss_and_grads(params, config, [[1, 2, 3]], [[2, 3, 4]])
    >>> bool(abs(loss - np.log(10)) < 0.05), grads["wte"].shape  # near-uniform at the start
    (True, (10, 8))
    """
    config = _check_config(config)
    params = check_params(params, config)
    ids = check_ids(ids, config.vocab_size, config.n_ctx)
    targets = check_ids(targets, config.vocab_size, name="targets")
    if targets.shape != ids.shape:
        raise ValueError(f"targets must have the shape of ids {ids.shape}, got {targets.shape}")
    with checked_later():
        logits, _, cache = _forward(params, config, ids)
        check_result(logits, "the logits")
        loss, grad_logits = _cross_entropy(logits, targets)
        grads = _backward(params, config, ids, cache, grad_logits)
    return loss, grads


def _backward(params, config, ids, cache, grad_logits):
    grads = {"w_unembed": _weight_grad(cache["ln_f"], grad_logits)}
    # (..., n, vocab) @ (vocab, d_model) -> (..., n, d_model)
    grad_ln_f = grad_logits @ params["w_unembed"].T
    grad_x, grads["ln_f.g"], grads["ln_f.b"] = _layer_norm_backward_parts(
        cache["z"], cache["denom"], params["ln_f.g"], grad_ln_f)
    for i in reversed(range(config.n_layers)):
        grad_x, g = _block_backward_parts(block_params(params, i), config.layer_options(i),
                                          cache["blocks"][i], grad_x)
        grads.update({f"h{i}.{k}": v for k, v in g.items()})
    grads["wte"], grads["wpe"] = _embed_backward(ids, grad_x, config.vocab_size, config.n_ctx)
    for name, g in grads.items():
        check_result(g, f"the gradient of {name}")
    return {name: grads[name].astype(params[name].dtype, copy=False) for name in params}
