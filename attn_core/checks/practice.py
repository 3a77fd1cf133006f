"""Checks of the code exercises, where the learner writes attention's parts as functions.

Each ``check_*`` takes the learner's function (not its result), runs it on the worked
example, on seeded random inputs with batch axes and on edge cases (scores of 1e4, a fully
masked row, a single token), compares every result with attn_core, and returns a
:class:`Feedback`: right, the first recognised mistake in plain words, "no answer yet" for
the stub, or the input and the line where the function raised. It never shows the answer.

==============================  =====================================  ========
check                           the learner's function                 notebook
==============================  =====================================  ========
check_scores(fn, scaled=False)  ``fn(q, k)``, raw scores               03
check_scores(fn)                ``fn(q, k)``, scaled scores            04
check_softmax(fn)               ``fn(x, axis=-1)``, stable softmax     05
check_attention(fn)             ``fn(q, k, v, scale=None)``, output    06
check_masked_attention(fn)      ``fn(q, k, v, mask)``, output          07
check_sliding_window_mask(fn)   ``fn(n, window)``, (n, n) bool         07
check_multi_head_attention(fn)  ``fn(x, w_q, w_k, w_v, w_o, h)``       08
check_online_softmax(fn)        ``fn(q, k, v, block_size)``, output    09
==============================  =====================================  ========
"""

from .practice_attention import (
                                 check_attention,
                                 check_masked_attention,
                                 check_scores,
                                 check_sliding_window_mask,
                                 check_softmax,
)
from .practice_heads import check_multi_head_attention, check_online_softmax

__all__ = ["check_scores", "check_softmax", "check_attention", "check_masked_attention",
           "check_sliding_window_mask", "check_multi_head_attention", "check_online_softmax"]
