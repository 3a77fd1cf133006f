"""The optimisers, written out: plain gradient descent, AdamW, and clipping by the global norm.

The one optimiser code of the package: the one-head model of notebook 12
(:mod:`attn_core.training`) and the tiny GPT both step with these. Parameters and gradients
are dicts of arrays with the same keys; ``step`` updates the parameters in place.
"""

import math
from numbers import Real

import numpy as np

__all__ = ["SGD", "AdamW", "clip_grad_norm", "global_norm"]


def _check_rate(value, name, *, upper=None):
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite real number, got {value!r}")
    if value < 0 or (upper is not None and value >= upper):
        bound = f"in [0, {upper})" if upper is not None else ">= 0"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return value


class SGD:
    """Plain gradient descent: ``w <- w - lr * g``.

    Examples
    --------
    >>> params = {"w": np.array([1.0])}
    >>> SGD(0.5).step(params, {"w": np.array([2.0])})
    >>> params["w"]
    array([0.])
    """

    def __init__(self, lr):
        self.lr = _check_rate(lr, "lr")

    def step(self, params, grads):
        for name, g in grads.items():
            params[name] -= self.lr * g


class AdamW:
    """Adam with decoupled weight decay (Loshchilov & Hutter): steps along a running mean of
    the gradient over its running RMS, and shrinks the weights towards 0 on the side.

    Parameters
    ----------
    lr : float
        Learning rate (an attribute: a schedule may change it between steps).
    betas : (float, float)
        Decay rates of the running mean and of the running mean square, in [0, 1).
    eps : float
        Added to the RMS so that a zero gradient gives a zero step.
    weight_decay : float
        ``lambda`` below; 0 gives plain Adam (Kingma & Ba), operation for operation.
    decay : callable, optional
        ``decay(name) -> bool``: which parameters are decayed (default: all, as
        ``torch.optim.AdamW``); the GPT passes ``attn_core.nn.is_decayed`` (matrices only).

    Notes
    -----
    At step :math:`t` (from 1), for each parameter :math:`w` with gradient :math:`g`:

    .. math:: w \\leftarrow w - \\eta \\lambda w, \\quad
              m \\leftarrow \\beta_1 m + (1-\\beta_1) g, \\quad
              s \\leftarrow \\beta_2 s + (1-\\beta_2) g^2, \\quad
              w \\leftarrow w - \\eta\\, \\frac{m / (1-\\beta_1^t)}{\\sqrt{s / (1-\\beta_2^t)}
              + \\epsilon}

    The decay is decoupled: it shrinks :math:`w` directly instead of adding
    :math:`\\lambda w` to the gradient (which Adam's division by the RMS would rescale).

    Examples
    --------
    >>> params = {"w": np.array([1.0, -2.0])}
    >>> opt = AdamW(lr=0.1)
    >>> opt.step(params, {"w": np.array([3.0, -0.001])})  # the first step is lr * sign(g)
    >>> params["w"].round(6)
    array([ 0.9     , -1.900001])
    """

    def __init__(self, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decay=None):
        self.lr = _check_rate(lr, "lr")
        try:
            beta1, beta2 = betas
        except (TypeError, ValueError):
            raise TypeError(f"betas must be a pair (beta1, beta2), got {betas!r}") from None
        self.beta1 = _check_rate(beta1, "betas[0]", upper=1)
        self.beta2 = _check_rate(beta2, "betas[1]", upper=1)
        self.eps = _check_rate(eps, "eps")
        self.weight_decay = _check_rate(weight_decay, "weight_decay")
        if decay is not None and not callable(decay):
            raise TypeError(f"decay must be a function name -> bool or None, got {decay!r}")
        self.decay = decay
        self.t, self.m, self.s = 0, {}, {}

    def step(self, params, grads):
        """One update of every parameter that has a gradient, in place."""
        self.t += 1
        for name, g in grads.items():
            if self.weight_decay and (self.decay is None or self.decay(name)):
                params[name] -= (self.lr * self.weight_decay) * params[name]
            m = self.m[name] = self.beta1 * self.m.get(name, 0.0) + (1 - self.beta1) * g
            s = self.s[name] = self.beta2 * self.s.get(name, 0.0) + (1 - self.beta2) * g * g
            m_hat, s_hat = m / (1 - self.beta1 ** self.t), s / (1 - self.beta2 ** self.t)
            params[name] -= self.lr * m_hat / (np.sqrt(s_hat) + self.eps)


def global_norm(grads):
    """The L2 norm of all the gradients together, as if they were one long vector (float,
    summed in float64)."""
    if not isinstance(grads, dict):
        raise TypeError(f"grads must be a dict of arrays (name -> gradient), got "
                        f"{type(grads).__name__}")
    return math.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64))) for g in grads.values()))


def clip_grad_norm(grads, max_norm):
    """Scale the gradients down together when their global L2 norm exceeds ``max_norm``.

    Parameters
    ----------
    grads : dict of ndarray
    max_norm : float
        Largest global norm let through, > 0.

    Returns
    -------
    clipped : dict of ndarray
        ``grads`` times ``min(1, max_norm / (norm + 1e-6))`` (new arrays, same dtypes; the
        input is not changed), as ``torch.nn.utils.clip_grad_norm_``.
    norm : float
        The global norm before clipping.

    Notes
    -----
    .. math:: \\lVert g \\rVert = \\sqrt{\\textstyle\\sum_p \\sum_i g_{p,i}^2}, \\quad
              g \\leftarrow g \\cdot \\min\\!\\left(1, \\frac{c}{\\lVert g \\rVert}\\right)

    Clipping the whole set by one factor keeps the step's direction; only its length
    changes. It guards against the rare huge gradient of a spiky batch.

    Examples
    --------
    >>> clipped, norm = clip_grad_norm({"a": np.array([3.0]), "b": np.array([4.0])}, 1.0)
    >>> norm, clipped["a"].round(6), clipped["b"].round(6)
    (5.0, array([0.6]), array([0.8]))
    """
    if isinstance(max_norm, bool) or not isinstance(max_norm, Real) or not max_norm > 0 \
            or not math.isfinite(max_norm):
        raise ValueError(f"max_norm must be a finite number > 0, got {max_norm!r}")
    norm = global_norm(grads)
    if not math.isfinite(norm):
        raise ValueError(f"the gradients' global norm is {norm}: some gradient is inf or NaN")
    factor = min(1.0, max_norm / (norm + 1e-6))
    return {name: g * g.dtype.type(factor) for name, g in grads.items()}, norm
