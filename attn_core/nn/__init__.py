"""attn_core.nn: the layers of a decoder-only transformer, each a forward and a backward pass
in numpy, the tiny GPT built from them, and its optimiser.

* :mod:`attn_core.nn.layer_norm` -- layer norm (the package's one: the encoder uses it too)
* :mod:`attn_core.nn.rms_norm`   -- RMSNorm (Llama's, SmolLM2's): a gain, no mean, no shift
* :mod:`attn_core.nn.gelu`       -- GELU, tanh form and its derivative; the exact erf form
* :mod:`attn_core.nn.mlp`        -- the feed-forward network
* :mod:`attn_core.nn.swiglu`     -- the SwiGLU feed-forward network (gate, up, down)
* :mod:`attn_core.nn.embeddings` -- token and position embeddings
* :mod:`attn_core.nn.loss`       -- log-softmax and the cross-entropy of the next token
* :mod:`attn_core.nn.block_options` -- BlockOptions: which norm, MLP, positions, heads, biases
* :mod:`attn_core.nn.block`      -- the ONE pre-norm causal block (attention through
  :func:`attn_core.multi_head_attention` and its backward, RoPE, grouped-query heads, an
  optional KV cache)
* :mod:`attn_core.nn.decoder`    -- the stack of blocks, full or through KV caches (the tiny
  GPT, the attention-only models and SmolLM2 all run it)
* :mod:`attn_core.nn.gpt`        -- GPTConfig, init_gpt, gpt_forward, gpt_loss_and_grads
* :mod:`attn_core.nn.optim`      -- SGD, AdamW, clip_grad_norm (notebook 12's model uses them)
* :mod:`attn_core.nn.data`       -- the shipped corpus, CharVocab, the split, batches
* :mod:`attn_core.nn.baselines`  -- unigram and bigram losses, what attention has to beat
* :mod:`attn_core.nn.generate`   -- sampling through a per-layer KV cache (full or rolling)
* :mod:`attn_core.nn.streaming`  -- attention sinks: weight on the first tokens, windowed loss
* :mod:`attn_core.nn.checkpoint` -- saving and loading a trained model
* :mod:`attn_core.nn.train`      -- train_gpt: the training loop with validation
* :mod:`attn_core.nn.induction_run` -- induction heads (notebook 15): the task, the measures,
  the stored runs of tools/train_induction.py
* :mod:`attn_core.nn.copy_lengths` -- notebook 18's copy task by segment length: softmax and
  linear attention's stored runs (tools/train_induction.py --lengths) read back
* :mod:`attn_core.nn.gated_delta` -- Gated DeltaNet as the block's token mixer
  (``attention="gated_delta"``), forward and backward through attn_core.delta_rule
* :mod:`attn_core.nn.hybrid`     -- notebook 19's hybrid GPT (three gated-delta layers, one
  softmax): validation windows, recall on a repeated string, tools/train_hybrid.py's runs
* :mod:`attn_core.nn.gate_sinks` -- notebook 19's output gate against the attention sink: the
  measures and the stored runs of tools/train_gated.py
"""

from .baselines import ALPHA, bigram_loss, bigram_probs, unigram_loss, unigram_probs
from .block import (
    ATTN_KEYS,
    BLOCK_KEYS,
    BlockOptions,
    block_backward,
    block_forward,
    block_params,
    block_shapes,
)
from .block_options import ATTENTIONS, GATE_KEYS, MLPS, NORMS
from .checkpoint import (
    CHECKPOINT_PATH,
    FORMAT_VERSION,
    Checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from .copy_lengths import (
    LENGTH_BATCH,
    LENGTHS,
    LENGTHS_PATH,
    LENGTHS_TRACE,
    CopyLengthRuns,
    copy_attention,
    length_batches,
    load_copy_lengths,
    variant_key,
)
from .data import CORPUS_PATH, CharVocab, get_batch, load_corpus, split_corpus
from .decoder import decoder_forward, decoder_step
from .embeddings import check_ids, embed, embed_backward
from .gate_sinks import (
    GATE_RUNS_PATH,
    GATE_TRACE_PATH,
    first_weights,
    gated_init,
    load_gate_runs,
    mean_gates,
    uniform_share,
    zeroed_value_losses,
)
from .gated_delta import GATE_BIAS, gated_delta_backward_parts, gated_delta_parts
from .gelu import gelu, gelu_backward, gelu_erf
from .generate import (
    Generation,
    check_temperature,
    check_top_k,
    forward_cached,
    generate,
    next_token_probs,
    prefill,
    sample_loop,
)
from .gpt import (
    LN_EPS,
    GPTConfig,
    check_ablate,
    check_params,
    gpt_forward,
    gpt_loss_and_grads,
    head_outputs,
    init_gpt,
    is_decayed,
    mean_ablation,
    param_shapes,
)
from .gpt_decoder import DecoderWeights, GPTDecoder, fast_engine
from .hybrid import (
    HYBRID_COPY_PATH,
    HYBRID_COPY_TRACE,
    HYBRID_DATA,
    HYBRID_MODELS,
    HYBRID_SEEDS,
    RECALL_SEED,
    copy_recall,
    hybrid_copy_model,
    hybrid_paths,
    load_hybrid_copy,
    load_hybrid_run,
    load_hybrid_traces,
    window_losses,
)
from .induction_run import (
    ABLATIONS,
    RUNS_PATH,
    TASK,
    TRACE_PATH,
    InductionRuns,
    ablation_at_distance,
    ablation_losses,
    ablation_measures,
    copy_losses,
    copy_target_weight,
    distance_batches,
    distance_layout,
    eval_batches,
    fall_step,
    find_heads,
    head_scores,
    icl,
    load_runs,
    measures,
    sampler,
    snapshot_states,
    training_distances,
)
from .layer_norm import check_eps, layer_norm, layer_norm_backward
from .loss import cross_entropy, log_softmax, next_token_losses
from .mlp import mlp, mlp_backward
from .optim import SGD, AdamW, clip_grad_norm, global_norm
from .recall_model import (
    MIXERS,
    RECALL_RUNS_PATH,
    RecallConfig,
    init_recall,
    load_recall_runs,
    read_weights,
    recall_accuracy,
    recall_forward,
    recall_loss_and_grads,
    recall_state_floats,
    right_pair_weight,
    train_recall,
)
from .rms_norm import rms_norm, rms_norm_backward
from .streaming import (
    SINK_CONDITIONS,
    SINK_KEPT,
    SINK_LOSS_FROM,
    SINKS_PATH,
    first_token_weight,
    held_out_windows,
    kept_mask,
    load_sink_measurements,
    sink_measures,
    token_losses,
)
from .swiglu import silu, swiglu, swiglu_backward
from .train import GPTRun, evaluate, lr_at, text_loss, train_gpt, validation_batches

__all__ = [
    "LENGTHS",
    "LENGTHS_PATH",
    "LENGTHS_TRACE",
    "LENGTH_BATCH",
    "CopyLengthRuns",
    "copy_attention",
    "length_batches",
    "load_copy_lengths",
    "variant_key",
    "ABLATIONS",
    "ATTN_KEYS",
    "InductionRuns",
    "RUNS_PATH",
    "TASK",
    "TRACE_PATH",
    "ablation_at_distance",
    "ablation_losses",
    "ablation_measures",
    "check_ablate",
    "copy_losses",
    "copy_target_weight",
    "distance_batches",
    "distance_layout",
    "eval_batches",
    "fall_step",
    "find_heads",
    "head_outputs",
    "head_scores",
    "icl",
    "load_runs",
    "mean_ablation",
    "measures",
    "sampler",
    "snapshot_states",
    "training_distances",
    "ALPHA",
    "AdamW",
    "BLOCK_KEYS",
    "BlockOptions",
    "CHECKPOINT_PATH",
    "CORPUS_PATH",
    "CharVocab",
    "Checkpoint",
    "FORMAT_VERSION",
    "GPTConfig",
    "DecoderWeights",
    "GPTDecoder",
    "GPTRun",
    "Generation",
    "LN_EPS",
    "ATTENTIONS",
    "MLPS",
    "NORMS",
    "SGD",
    "bigram_loss",
    "SINKS_PATH",
    "SINK_CONDITIONS",
    "SINK_KEPT",
    "SINK_LOSS_FROM",
    "bigram_probs",
    "block_backward",
    "block_forward",
    "block_params",
    "block_shapes",
    "check_eps",
    "check_ids",
    "check_params",
    "check_temperature",
    "check_top_k",
    "clip_grad_norm",
    "cross_entropy",
    "decoder_forward",
    "decoder_step",
    "embed",
    "embed_backward",
    "evaluate",
    "first_token_weight",
    "held_out_windows",
    "kept_mask",
    "load_sink_measurements",
    "sink_measures",
    "fast_engine",
    "forward_cached",
    "gelu",
    "gelu_backward",
    "gelu_erf",
    "generate",
    "get_batch",
    "global_norm",
    "gpt_forward",
    "gpt_loss_and_grads",
    "init_gpt",
    "is_decayed",
    "layer_norm",
    "layer_norm_backward",
    "load_checkpoint",
    "load_corpus",
    "log_softmax",
    "next_token_losses",
    "lr_at",
    "mlp",
    "mlp_backward",
    "next_token_probs",
    "param_shapes",
    "prefill",
    "rms_norm",
    "rms_norm_backward",
    "sample_loop",
    "save_checkpoint",
    "silu",
    "split_corpus",
    "swiglu",
    "swiglu_backward",
    "text_loss",
    "token_losses",
    "train_gpt",
    "unigram_loss",
    "unigram_probs",
    "validation_batches",
    "MIXERS",
    "RECALL_RUNS_PATH",
    "load_recall_runs",
    "RecallConfig",
    "init_recall",
    "read_weights",
    "recall_accuracy",
    "recall_forward",
    "recall_loss_and_grads",
    "recall_state_floats",
    "right_pair_weight",
    "train_recall",
    "GATE_BIAS",
    "gated_delta_backward_parts",
    "gated_delta_parts",
    "HYBRID_COPY_PATH",
    "HYBRID_COPY_TRACE",
    "HYBRID_DATA",
    "HYBRID_MODELS",
    "HYBRID_SEEDS",
    "RECALL_SEED",
    "copy_recall",
    "hybrid_copy_model",
    "hybrid_paths",
    "load_hybrid_copy",
    "load_hybrid_run",
    "load_hybrid_traces",
    "window_losses",
    "GATE_KEYS",
    "GATE_RUNS_PATH",
    "GATE_TRACE_PATH",
    "first_weights",
    "gated_init",
    "load_gate_runs",
    "mean_gates",
    "uniform_share",
    "zeroed_value_losses",
]
