"""The explorers: one call in a notebook gives controls wired to the maths and a figure.

=====================  ==============================================================
module                 explorer
=====================  ==============================================================
``base``               :class:`~attn_core.explorers.base.Explorer`, the base class: fast
                       PNG canvas, red error box, HTML number tables (``read_tables``)
``worked_example``     ``worked_example_lab``: edit Q, K, V; scores, weights, output
``scaling``            ``scaling_explorer``: spread of the scores against d_k
``softmax``            ``softmax_explorer``: one row of scores and a temperature
``masks``              ``mask_explorer``: causal, padding, sliding-window, custom masks
``heads``              ``heads_explorer``: the same input split into h heads
``cost``               ``cost_explorer``: cells, FLOPs, bytes and time against n
``tiling``             ``tiling_explorer``: flash attention's tiles, one step at a time
``training``           ``training_explorer``: a training run's loss and attention map, step by step
``model``              ``model_explorer``: a real pretrained encoder, head by head
``gpt``                ``gpt_explorer``: the tiny GPT writing: prompt, temperature, top-k, a head
``positions``          ``positions_explorer``: the score against the query-key offset, four schemes
``kv_cache``           ``kv_cache_explorer``: grouped-query heads, a rolling window, sinks, memory
``induction``          ``induction_explorer``: induction heads through training, ablation switch
``llm``                ``llm_explorer``: a real LLM answering; a head, a window and sinks
``beyond_quadratic``   ``beyond_explorer``: windows, sparse patterns, linear and latent attention
``recall``             ``recall_explorer``: stored recall runs against pairs and state size
=====================  ==============================================================

Each explorer's factory and class are re-exported here, so a notebook's Try-it cell is
``from attn_core.explorers import scaling_explorer``. The explorers are the only modules of
:mod:`attn_core` that import ipywidgets; they compute with the maths modules and draw with
:mod:`attn_core.figures`, nothing else.

The model explorer and the LLM explorer are imported on first use (``explorers.model`` loads
the encoder, which needs scipy: about half a second that the other notebooks need not spend;
``explorers.llm`` loads the GGUF reader and the 540 MB model).
"""

from .base import Explorer, read_tables
from .beyond_quadratic import BeyondExplorer, beyond_explorer
from .cost import CostExplorer, cost_explorer
from .gpt import GPTExplorer, gpt_explorer
from .heads import HeadsExplorer, heads_explorer
from .induction import InductionExplorer, induction_explorer
from .kv_cache import KVCacheExplorer, kv_cache_explorer
from .masks import MaskExplorer, mask_explorer
from .positions import PositionsExplorer, positions_explorer
from .recall import RecallExplorer, recall_explorer
from .scaling import ScalingExplorer, scaling_explorer
from .softmax import SoftmaxExplorer, softmax_explorer
from .tiling import TilingExplorer, tiling_explorer
from .training import TrainingExplorer, training_explorer
from .worked_example import WorkedExampleLab, worked_example_lab

__all__ = [
    "BeyondExplorer",
    "RecallExplorer",
    "CostExplorer",
    "Explorer",
    "GPTExplorer",
    "KVCacheExplorer",
    "HeadsExplorer",
    "InductionExplorer",
    "LLMExplorer",
    "MaskExplorer",
    "ModelExplorer",
    "PositionsExplorer",
    "ScalingExplorer",
    "SoftmaxExplorer",
    "TilingExplorer",
    "TrainingExplorer",
    "WorkedExampleLab",
    "beyond_explorer",
    "recall_explorer",
    "cost_explorer",
    "gpt_explorer",
    "kv_cache_explorer",
    "llm_explorer",
    "heads_explorer",
    "induction_explorer",
    "mask_explorer",
    "model_explorer",
    "positions_explorer",
    "read_tables",
    "scaling_explorer",
    "softmax_explorer",
    "tiling_explorer",
    "training_explorer",
    "worked_example_lab",
]


def __getattr__(name):
    """``ModelExplorer`` and ``model_explorer``, imported from ``explorers.model`` on first use."""
    if name in ("ModelExplorer", "model_explorer"):
        from . import model

        return getattr(model, name)
    if name in ("LLMExplorer", "llm_explorer"):
        from . import llm

        return getattr(llm, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
