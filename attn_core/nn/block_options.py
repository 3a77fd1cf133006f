"""What kind of decoder block: :class:`BlockOptions`, and the parameter names and shapes each
kind has (:func:`block_shapes`).

One block (:mod:`attn_core.nn.block`) serves every decoder of the course; its options say
which one:

==============  =========================  ==================================================
option          tiny GPT (14)              SmolLM2 (17)
==============  =========================  ==================================================
``norm``        ``"layer"`` (LN1, LN2)     ``"rms"`` (RMSNorm: a gain, no shift)
``mlp``         ``"gelu"`` (None in 15)    ``"swiglu"`` (gate, up, down)
``rope_base``   None (learned positions)   100000.0 (rotary positions, adjacent pairs)
``n_kv_heads``  None (= ``n_heads``)       3 key/value heads for 9 query heads
``bias``        True                       False
``attention``   ``"softmax"``              ``"softmax"``
``output_gate`` False                      False
==============  =========================  ==================================================

``attention="linear"`` (notebook 18) replaces each head's softmax by linear attention's
normalised ``phi(q) . phi(k)`` (Katharopoulos et al. 2020; :mod:`attn_core.linear_attention`),
computed in its quadratic form under the causal mask, so the same backward serves; such a
block has no KV-cache step (linear attention decodes with a fixed-size state instead).
``attention="gated_delta"`` makes each head a Gated DeltaNet (Yang, Kautz and Hatamizadeh,
ICLR 2025; :mod:`attn_core.nn.gated_delta`): unit queries and keys, a per-head gate ``a_t`` and
step size ``beta_t``, each the sigmoid of a projection of the token (``attn.w_a``, ``attn.b_a``,
``attn.w_beta``, ``attn.b_beta``, ``(d_model, n_heads)`` and ``(n_heads,)``); no KV cache either.

``output_gate=True`` (notebook 19) multiplies each head's output, before the output
projection, by a sigmoid gate computed from the attention's input, elementwise and
head-specific: ``merged * sigmoid(Norm1(x) @ W_g + b_g)`` (Qiu et al. 2025's gate "G1" after
scaled dot-product attention; ``attn.w_g`` (d_model, n_heads d_head), ``attn.b_g`` with
``bias``).

A block's parameters sit in a dict under short names (the model's ``"h{i}."`` prefix taken
off): ``ln1.g`` (and ``ln1.b`` for layer norm), ``attn.w_q`` (d_model, n_heads d_head),
``attn.w_k``, ``attn.w_v`` (d_model, n_kv_heads d_head), ``attn.w_o`` (n_heads d_head,
d_model), their biases ``attn.b_*`` when ``bias``; then ``ln2.*`` and the MLP: ``mlp.w_in``,
``mlp.b_in``, ``mlp.w_out``, ``mlp.b_out`` (GELU) or ``mlp.w_gate``, ``mlp.w_up``,
``mlp.w_down`` (SwiGLU). Every matrix is (d_in, d_out): ``y = x @ W``.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .._validate import check_bool, check_option, check_positive_int
from ..multihead import _check_kv_heads
from ..positions import PAIRINGS
from .layer_norm import check_eps

__all__ = ["ATTENTIONS", "ATTN_KEYS", "BLOCK_KEYS", "GATE_KEYS", "MLPS", "NORMS",
           "BlockOptions", "block_shapes"]

#: The names of a GPT-2 block's parameters (the GPT's are ``f"h{i}." + name``).
BLOCK_KEYS = ("ln1.g", "ln1.b", "attn.w_q", "attn.w_k", "attn.w_v", "attn.w_o", "attn.b_q",
              "attn.b_k", "attn.b_v", "attn.b_o", "ln2.g", "ln2.b", "mlp.w_in", "mlp.b_in",
              "mlp.w_out", "mlp.b_out")
#: The keys of an attention-only GPT-2 block (no ``ln2.*``, no ``mlp.*``).
ATTN_KEYS = BLOCK_KEYS[:10]
#: The output gate's parameters (``output_gate=True``; ``attn.b_g`` only with ``bias``).
GATE_KEYS = ("attn.w_g", "attn.b_g")
#: The normalisations a block may use: layer norm (GPT-2) or RMSNorm (Llama).
NORMS = ("layer", "rms")
#: The feed-forward networks: GELU MLP (GPT-2), SwiGLU (Llama), or None (attention-only).
MLPS = ("gelu", "swiglu", None)
#: What mixes the tokens: the softmax, linear attention's feature map (elu + 1), or Gated
#: DeltaNet's gated delta rule.
ATTENTIONS = ("softmax", "linear", "gated_delta")


@dataclass(frozen=True)
class BlockOptions:
    """The options of a pre-norm causal decoder block.

    n_heads : int -- query heads
    n_kv_heads : int or None -- key/value heads (grouped-query attention), dividing
        ``n_heads``; None: one per query head
    norm : "layer" or "rms"
    mlp : "gelu", "swiglu" or None (an attention-only block: ``y = a``)
    rope_base : float or None -- rotary positions (:func:`attn_core.rope`) on the queries
        and keys with this base; None: none (the model adds learned positions itself)
    pairing : "interleaved" or "halves" -- which features RoPE turns together
    bias : bool -- the attention projections have biases (a GELU MLP always has them)
    eps : float -- the norms' eps
    attention : "softmax", "linear" or "gated_delta" -- each head's mixer (see the module's
        docstring)
    output_gate : bool -- each head's output times a sigmoid gate of the attention's input
        before the output projection (see the module's docstring); softmax and linear only

    Examples
    --------
    >>> BlockOptions(9, n_kv_heads=3, norm="rms", mlp="swiglu", rope_base=1e5, bias=False).kv_heads
    3
    """

    n_heads: int
    n_kv_heads: int | None = None
    norm: str = "layer"
    mlp: str | None = "gelu"
    rope_base: float | None = None
    pairing: str = "interleaved"
    bias: bool = True
    eps: float = 1e-5
    attention: str = "softmax"
    output_gate: bool = False

    def __post_init__(self):
        h = check_positive_int(self.n_heads, "n_heads")
        object.__setattr__(self, "n_heads", h)
        if self.n_kv_heads is not None:
            object.__setattr__(self, "n_kv_heads", _check_kv_heads(h, self.n_kv_heads))
        check_option(self.norm, "norm", NORMS)
        if self.mlp not in MLPS:
            raise ValueError(f"mlp must be one of {MLPS}, got {self.mlp!r}")
        if self.rope_base is not None:
            base = self.rope_base
            if isinstance(base, bool) or not isinstance(base, numbers.Real) or not (
                    np.isfinite(base) and base > 1):
                raise ValueError(f"rope_base must be a finite number > 1 or None, got {base!r}")
            object.__setattr__(self, "rope_base", float(base))
        check_option(self.pairing, "pairing", PAIRINGS)
        if not isinstance(self.bias, (bool, np.bool_)):
            raise TypeError(f"bias must be True or False, got {self.bias!r}")
        if self.mlp == "gelu" and not self.bias:
            raise ValueError("the GELU MLP has biases: bias=False goes with mlp='swiglu' or None")
        object.__setattr__(self, "eps", check_eps(self.eps))
        check_option(self.attention, "attention", ATTENTIONS)
        if self.attention == "gated_delta" and (self.kv_heads != h or self.rope_base):
            raise ValueError("attention='gated_delta' keeps one state per head and no "
                             f"positions: it needs n_kv_heads=None and rope_base=None, got "
                             f"n_kv_heads={self.n_kv_heads!r}, rope_base={self.rope_base!r}")
        object.__setattr__(self, "output_gate", check_bool(self.output_gate, "output_gate"))
        if self.output_gate and self.attention == "gated_delta":
            raise ValueError("output_gate=True gates softmax or linear attention's heads; "
                             "attention='gated_delta' has no output gate here")

    @property
    def kv_heads(self):
        """The number of key/value heads (``n_heads`` when ``n_kv_heads`` is None)."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads


def check_attentions(attention, n_layers):
    """``attention`` checked: one name of :data:`ATTENTIONS` for every layer, or a sequence of
    ``n_layers`` names (a hybrid, e.g. three gated-delta layers then a softmax one), returned
    as a tuple."""
    if isinstance(attention, str):
        return check_option(attention, "attention", ATTENTIONS)
    if not isinstance(attention, (list, tuple)) or len(attention) != n_layers:
        raise ValueError(f"attention must be one of {ATTENTIONS} or a list of n_layers = "
                         f"{n_layers} of them (one per layer), got {attention!r}")
    return tuple(check_option(a, f"attention[{i}]", ATTENTIONS) for i, a in enumerate(attention))


def check_options(options):
    """``options`` if it is a :class:`BlockOptions`, else a TypeError."""
    if not isinstance(options, BlockOptions):
        raise TypeError(f"options must be a BlockOptions, got {type(options).__name__}")
    return options


def _norm_shapes(name, d, norm):
    return {f"{name}.g": (d,), f"{name}.b": (d,)} if norm == "layer" else {f"{name}.g": (d,)}


def block_shapes(d_model, d_ff, options=None):
    """``{name: shape}`` of one block's parameters.

    Parameters
    ----------
    d_model : int
    d_ff : int or None
        The MLP's hidden width; None for an attention-only block.
    options : BlockOptions, optional
        Default: GPT-2's block (layer norm, GELU MLP, biases, one key/value head per query
        head), whose keys come in the order of :data:`BLOCK_KEYS` (:data:`ATTN_KEYS` with
        ``d_ff=None``). The head width is ``d_model // n_heads``.

    Examples
    --------
    >>> o = BlockOptions(9, n_kv_heads=3, norm="rms", mlp="swiglu", rope_base=1e5, bias=False)
    >>> s = block_shapes(576, 1536, o)
    >>> s["attn.w_k"], s["mlp.w_gate"], len(s)
    ((576, 192), (576, 1536), 9)
    """
    d = check_positive_int(d_model, "d_model")
    if options is None:
        mlp = None if d_ff is None else "gelu"
        options = BlockOptions(1, mlp=mlp)
    options = check_options(options)
    if (d_ff is None) != (options.mlp is None):
        raise ValueError(f"d_ff = {d_ff} does not go with mlp = {options.mlp!r}: an MLP needs "
                         "its width, an attention-only block has none")
    d_kv = d // options.n_heads * options.kv_heads  # n_kv_heads * d_head
    shapes = _norm_shapes("ln1", d, options.norm)
    shapes.update({"attn.w_q": (d, d), "attn.w_k": (d, d_kv), "attn.w_v": (d, d_kv),
                   "attn.w_o": (d, d)})
    if options.bias:
        shapes.update({"attn.b_q": (d,), "attn.b_k": (d_kv,), "attn.b_v": (d_kv,),
                       "attn.b_o": (d,)})
    if options.attention == "gated_delta":  # the gate a_t and step size beta_t of each head
        h = options.n_heads
        shapes.update({"attn.w_a": (d, h), "attn.b_a": (h,), "attn.w_beta": (d, h),
                       "attn.b_beta": (h,)})
    if options.output_gate:  # one gate per channel of every head's output
        shapes["attn.w_g"] = (d, d)
        if options.bias:
            shapes["attn.b_g"] = (d,)
    if options.mlp is not None:
        f = check_positive_int(d_ff, "d_ff")
        shapes.update(_norm_shapes("ln2", d, options.norm))
        if options.mlp == "gelu":
            shapes.update({"mlp.w_in": (d, f), "mlp.b_in": (f,), "mlp.w_out": (f, d),
                           "mlp.b_out": (d,)})
        else:
            shapes.update({"mlp.w_gate": (d, f), "mlp.w_up": (d, f), "mlp.w_down": (f, d)})
    return shapes
