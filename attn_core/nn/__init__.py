"""attn_core.nn: the layers of a decoder-only transformer, each a forward and a backward pass
in numpy, the tiny GPT built from them, and its optimiser.

* :mod:`attn_core.nn.layer_norm` -- layer norm (the package's one: the encoder uses it too)
* :mod:`attn_core.nn.gelu`       -- GELU, tanh form and its derivative; the exact erf form
* :mod:`attn_core.nn.mlp`        -- the feed-forward network
* :mod:`attn_core.nn.embeddings` -- token and position embeddings
* :mod:`attn_core.nn.loss`       -- log-softmax and the cross-entropy of the next token
* :mod:`attn_core.nn.block`      -- the pre-norm causal block (attention through
  :func:`attn_core.multi_head_attention` and its backward)
* :mod:`attn_core.nn.gpt`        -- GPTConfig, init_gpt, gpt_forward, gpt_loss_and_grads
* :mod:`attn_core.nn.optim`      -- SGD, AdamW, clip_grad_norm (notebook 12's model uses them)
"""

from .block import BLOCK_KEYS, block_backward, block_forward, block_params, block_shapes
from .embeddings import check_ids, embed, embed_backward
from .gelu import gelu, gelu_backward, gelu_erf
from .gpt import (
    LN_EPS,
    GPTConfig,
    check_params,
    gpt_forward,
    gpt_loss_and_grads,
    init_gpt,
    is_decayed,
    param_shapes,
)
from .layer_norm import check_eps, layer_norm, layer_norm_backward
from .loss import cross_entropy, log_softmax
from .mlp import mlp, mlp_backward
from .optim import SGD, AdamW, clip_grad_norm, global_norm

__all__ = [
    "BLOCK_KEYS",
    "LN_EPS",
    "SGD",
    "AdamW",
    "GPTConfig",
    "block_backward",
    "block_forward",
    "block_params",
    "block_shapes",
    "check_eps",
    "check_ids",
    "check_params",
    "clip_grad_norm",
    "cross_entropy",
    "embed",
    "embed_backward",
    "gelu",
    "gelu_backward",
    "gelu_erf",
    "global_norm",
    "gpt_forward",
    "gpt_loss_and_grads",
    "init_gpt",
    "is_decayed",
    "layer_norm",
    "layer_norm_backward",
    "log_softmax",
    "mlp",
    "mlp_backward",
    "param_shapes",
]
