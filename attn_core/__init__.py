"""attn_core: the maths, figures and explorers of the course "Attention, worked out".

The maths modules are pure numpy and never print or plot:

* :mod:`attn_core.softmax`   -- stable softmax and its Jacobian
* :mod:`attn_core.attention` -- scores and scaled dot-product attention
* :mod:`attn_core.masks`     -- causal, padding and sliding-window masks
* :mod:`attn_core.multihead` -- splitting into heads, multi-head attention
* :mod:`attn_core.gradients` -- backward passes of softmax, attention and multi-head attention
* :mod:`attn_core.flash`     -- tiled attention with an online softmax
* :mod:`attn_core.fast`      -- the fastest exact path: query blocks on a thread pool
* :mod:`attn_core.cost`      -- cells, FLOPs, bytes and timing of attention
* :mod:`attn_core.decoding`  -- causal attention one token at a time with a key/value cache
* :mod:`attn_core.positions` -- sinusoidal encodings, rotary embeddings (RoPE), ALiBi's bias
* :mod:`attn_core.linear_attention` -- attention with a feature map: quadratic, linear and
  recurrent forms, decoding with a fixed-size state
* :mod:`attn_core.decay`     -- decayed linear attention (RetNet, GLA, Mamba-2): recurrent,
  masked and chunked forms, the decay mask, the backward pass
* :mod:`attn_core.delta_rule` -- DeltaNet and Gated DeltaNet: recurrent and chunked (WY / UT)
  forms, the backward pass
* :mod:`attn_core.sparse`    -- strided, fixed, local + global and BigBird patterns; block-sparse
  attention; how many layers connect two positions
* :mod:`attn_core.latent`    -- multi-head latent attention (MLA) and its latent cache
* :mod:`attn_core.cost_beyond` -- their FLOPs and memory, counted as ``cost`` counts
* :mod:`attn_core.examples`  -- the article's inputs and seeded random inputs
* :mod:`attn_core.errata`    -- the article's printed numbers beside the computed ones

Above them, still pure numpy:

* :mod:`attn_core.nn`        -- the layers of a transformer, each a forward and a backward
  pass (``layer_norm``, ``gelu``, ``mlp``, ``embeddings``, ``loss``, ``block``), the tiny GPT
  built from them (``nn.gpt``), its optimisers (``nn.optim``: SGD, AdamW, clipping) and its
  data, sampling, checkpoints and training; the one layer norm, GELU and optimiser of the
  package
* :mod:`attn_core.training`  -- the one-head model of notebook 12, trained on the toy tasks
  of :mod:`attn_core.tasks` (it steps with ``nn.optim``; nothing below imports it);
  :mod:`attn_core.scaling_table` -- its scaling experiment over 20 seeds, stored as data

Four subpackages build on them, each importing only downwards (maths <- nn <- model <-
figures <- explorers; checks use the maths, nn and the model):

* :mod:`attn_core.model`     -- a real pretrained model: ``model.encoder`` (a BERT-style
  forward pass built on the maths above and on nn's layer norm and exact GELU, which
  ``model.layers`` re-exports with BERT's defaults),
  ``model.pretrained`` (reads all-MiniLM-L6-v2's files into it; needs ``safetensors``
  and ``tokenizers``), ``model.head_roles`` (scores for recognisable head patterns)
* :mod:`attn_core.figures`   -- the figures (matplotlib), one module per family of figure
  (``heatmaps``, ``products``, ``bars``, ..., ``model_panels``), shared helpers in
  ``figures.base``
* :mod:`attn_core.explorers` -- the slider explorers (the only modules that import
  ipywidgets), one module per explorer, the shared ``Explorer`` class in ``explorers.base``
* :mod:`attn_core.checks`    -- the exercises' self-checks, one module per notebook

Import those by name: ``from attn_core.nn import GPTConfig, init_gpt``,
``from attn_core.figures import heatmap``,
``from attn_core.explorers import scaling_explorer``,
``from attn_core.model.pretrained import load_model``.
"""

from . import errata, examples
from .attention import MASKED_SCORE, attention, scores
from .cost import (
                   attention_flops,
                   decoding_step_flops,
                   interleaved_times,
                   loglog_slope,
                   median_time,
                   peak_memory,
                   projection_flops,
                   score_matrix_bytes,
                   score_matrix_cells,
)
from .fast import fast_attention
from .flash import (
                   DEFAULT_BLOCK_SIZE,
                   TEACHING_BLOCK_SIZE,
                   TileStep,
                   flash_attention,
                   flash_attention_steps,
)
from .gradients import attention_backward, multi_head_attention_backward, softmax_backward
from .masks import causal_mask, padding_mask, window_mask
from .multihead import merge_heads, multi_head_attention, split_heads
from .positions import alibi_bias, alibi_slopes, rope, sinusoidal_positions
from .softmax import softmax, softmax_jacobian

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "TEACHING_BLOCK_SIZE",
    "MASKED_SCORE",
    "TileStep",
    "alibi_bias",
    "alibi_slopes",
    "attention",
    "attention_backward",
    "attention_flops",
    "decoding_step_flops",
    "causal_mask",
    "errata",
    "examples",
    "fast_attention",
    "flash_attention",
    "flash_attention_steps",
    "interleaved_times",
    "loglog_slope",
    "median_time",
    "merge_heads",
    "multi_head_attention",
    "multi_head_attention_backward",
    "padding_mask",
    "peak_memory",
    "projection_flops",
    "rope",
    "score_matrix_bytes",
    "score_matrix_cells",
    "scores",
    "sinusoidal_positions",
    "softmax",
    "softmax_backward",
    "softmax_jacobian",
    "split_heads",
    "window_mask",
]
