"""The course's figures (matplotlib), one module per family of figure.

Every figure draws arrays that the caller has already computed (a figure never computes
attention), takes ``ax=None`` (or ``fig=None`` when it needs several axes) and creates a
figure sized to the data when none is given, and returns its artists in a small
dataclass. An explorer keeps those artists and changes them in place with the
``update_*`` functions (``image.set_data``, ``text.set_text``), so a slider move never
rebuilds the figure. Nothing here prints.

=====================  ==============================================================
module                 figures
=====================  ==============================================================
``base``               palette, sizes and fonts; checks and axes helpers all share
``cells``              a path of unit squares over grid cells, a highlighted cell
``heatmaps``           ``heatmap``: a matrix, numbers in cells, masked cells hatched
``products``           ``matrix_block``, ``matrix_product_diagram`` (A x B = C),
                       ``sum_of_products_text``
``bars``               ``weight_bars``: one row of weights as bars
``mask_grids``         ``mask_grid``: a boolean mask as ticks and crosses
``lines``              ``line_with_marker``: a curve with the current point marked
``head_grids``         ``head_grid``: one small heatmap per head
``head_mosaics``       ``head_mosaic``: every head's map in one image
``beyond_length``      ``fade_beyond_length``: a grid showing only its first n tokens
``model_base``         the real model's figures: constants and input checks
``model_axes``         their fitted labels, the query's outline, the colour bar
``model_head_maps``    ``head_map``: one head's map, the query's row outlined
``model_every_head``   ``query_in_every_head``: one query's row in every head
``model_roles``        ``role_scores``: head-role scores, layers x heads
``model_panels``       the model explorer's figure and its static ``explorer_figure``
``positions``          ``position_similarity``: the position embeddings' similarity;
                       ``position_schemes``: score against offset, four schemes
``training``           ``loss_curves``, ``attention_through_training``, ``training_figure``
``gpt``                the tiny GPT: next-character bars above one head's map
``kv_cache``           today's KV cache: head sharing, window + sinks, bytes per token
``beyond_quadratic``   notebook 18: a method's cells, its cost against n, its memory
``recall``             notebook 19: recall accuracy against pairs per mixer, memory kept
``gate_sinks``         notebook 19: weight on position 0 per head, without and with the gate
``induction``          induction heads: both copies' losses, two heads' maps (notebook 15)
``real_llm``           the real LLM (17): first-token weight by layer; a head's map beside
                       the windowed losses
``alt``                a sentence saying what a figure shows, in the output's metadata
``fast_draw``          explorers' redraws: nearest images by one gather, texts kept as pixels
=====================  ==============================================================

Every module's public names (its ``__all__``) are re-exported here, so a notebook writes
``from attn_core.figures import heatmap`` or ``from attn_core import figures`` and
``figures.heatmap(...)``.
"""

from . import (
    alt,
    bars,
    base,
    beyond_length,
    beyond_quadratic,
    cells,
    fast_draw,
    gate_sinks,
    gpt,
    head_grids,
    head_mosaics,
    heatmaps,
    induction,
    kv_cache,
    lines,
    mask_grids,
    model_axes,
    model_base,
    model_every_head,
    model_head_maps,
    model_panels,
    model_roles,
    positions,
    products,
    real_llm,
    recall,
    training,
)
from .alt import *  # noqa: F403
from .bars import *  # noqa: F403
from .base import *  # noqa: F403
from .beyond_length import *  # noqa: F403
from .beyond_quadratic import *  # noqa: F403
from .cells import *  # noqa: F403
from .fast_draw import *  # noqa: F403
from .gate_sinks import *  # noqa: F403
from .gpt import *  # noqa: F403
from .head_grids import *  # noqa: F403
from .head_mosaics import *  # noqa: F403
from .heatmaps import *  # noqa: F403
from .induction import *  # noqa: F403
from .kv_cache import *  # noqa: F403
from .lines import *  # noqa: F403
from .mask_grids import *  # noqa: F403
from .model_base import *  # noqa: F403
from .model_every_head import *  # noqa: F403
from .model_head_maps import *  # noqa: F403
from .model_panels import *  # noqa: F403
from .model_roles import *  # noqa: F403
from .positions import *  # noqa: F403
from .products import *  # noqa: F403
from .real_llm import *  # noqa: F403
from .recall import *  # noqa: F403
from .training import *  # noqa: F403

_MODULES = (alt, bars, base, beyond_length, beyond_quadratic, cells, fast_draw, gate_sinks, gpt,
            head_grids,
            head_mosaics, heatmaps,
            induction, kv_cache, lines,
            mask_grids, model_axes, model_base, model_every_head, model_head_maps, model_panels,
            model_roles, positions, products, real_llm, recall, training)
__all__ = sorted({name for module in _MODULES for name in module.__all__})

alt.register()  # in a notebook kernel: every displayed figure carries its alt text
