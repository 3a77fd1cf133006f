"""Exercise self-checks: each says right or not yet, and gives a hint, never the answer.

One module per course notebook; every check returns a :class:`Feedback` that displays as
its message and is truthy when the answer is right. The expected answers are computed by
the maths modules from the exercise's inputs, never typed in.
"""

from . import (
    cost,
    masking,
    multihead,
    pretrained,
    problem,
    qkv,
    recap,
    scaling,
    scores,
    softmax,
    weighted_sum,
)
from ._base import Feedback, check_array, check_choice, check_number

__all__ = ["Feedback", "check_array", "check_choice", "check_number"]
_MODULES = (problem, qkv, scores, scaling, softmax, weighted_sum, masking, multihead, cost, recap,
            pretrained)
globals().update({name: getattr(m, name) for m in _MODULES for name in m.__all__})
__all__ += [name for m in _MODULES for name in m.__all__]
