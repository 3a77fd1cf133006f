"""GELU, the MLP's non-linearity: the tanh form (GPT-2's) with its derivative, and the exact
form with the error function (BERT's, used by the pretrained encoder of notebook 11).
"""

import math

import numpy as np

from .._validate import as_float_array, check_result, checked_later, to_common_dtype

__all__ = ["gelu", "gelu_backward", "gelu_erf"]

#: The constants of the tanh approximation: sqrt(2 / pi) and the cubic coefficient.
GELU_C = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715


def _gelu_parts(x):
    """The forward without checks: ``(y, t)`` with ``t = tanh(u)``, which the backward reuses.

    Written in place on two buffers: the MLP's hidden layer is the model's largest array, and
    fresh temporaries of that size cost more than the arithmetic.
    """
    with np.errstate(over="ignore"):  # x**3 overflows only where tanh is already +-1
        u = x * x
        u *= GELU_A
        u += 1.0
        u *= x  # x + a x^3
        u *= GELU_C
        t = np.tanh(u, out=u)  # (...), tanh(u)
    y = t + 1.0
    y *= x
    y *= 0.5  # x (1 + tanh u) / 2
    return y, t


def _gelu_backward_parts(x, t, grad_y):
    """The backward without checks, from the forward's ``t = tanh(u)`` (in place, as above)."""
    du = x * x
    du *= 3.0 * GELU_A * GELU_C
    du += GELU_C  # du/dx = sqrt(2/pi) (1 + 3 a x^2)
    g = t * t
    np.subtract(1.0, g, out=g)  # 1 - tanh^2 u
    g *= du
    g *= x
    g += t
    g += 1.0
    g *= 0.5  # (1 + tanh u) / 2 + x (1 - tanh^2 u) du/dx / 2
    g *= grad_y
    return g


def gelu(x):
    """The Gaussian error linear unit, tanh form (GPT-2's and the tiny GPT's).

    Parameters
    ----------
    x : (...) array_like

    Returns
    -------
    y : (...) ndarray, same float dtype as ``x``

    Notes
    -----
    .. math:: \\mathrm{GELU}(x) \\approx \\frac{x}{2}\\left(1 + \\tanh u\\right), \\quad
              u = \\sqrt{2/\\pi}\\,(x + 0.044715\\, x^3)

    It differs from the exact :func:`gelu_erf` by less than 5e-4 everywhere; PyTorch calls
    it ``F.gelu(x, approximate="tanh")``.

    Examples
    --------
    >>> np.round(gelu(np.array([-1.0, 0.0, 1.0])), 4)
    array([-0.1588,  0.    ,  0.8412])
    """
    x = as_float_array(x, "x")
    return _gelu_parts(x)[0]


def gelu_backward(x, grad_y):
    """Gradient of :func:`gelu` with respect to its input.

    Parameters
    ----------
    x : (...) array_like
        The forward pass's input.
    grad_y : (...) array_like
        Derivative of the loss with respect to ``gelu(x)``, with ``x``'s shape.

    Returns
    -------
    grad_x : (...) ndarray

    Notes
    -----
    .. math:: \\frac{d\\,\\mathrm{GELU}}{dx} = \\frac{1 + \\tanh u}{2} + \\frac{x}{2}
              (1 - \\tanh^2 u)\\, \\sqrt{2/\\pi}\\,(1 + 3 \\cdot 0.044715\\, x^2)

    Examples
    --------
    >>> gelu_backward(np.array([0.0]), np.array([1.0]))  # slope 1/2 at the origin
    array([0.5])
    """
    x = as_float_array(x, "x")
    grad_y = as_float_array(grad_y, "grad_y")
    if grad_y.shape != x.shape:
        raise ValueError(f"grad_y must have the shape of x {x.shape}, got shape {grad_y.shape}")
    x, grad_y = to_common_dtype(x, grad_y)
    with checked_later():
        grad_x = _gelu_backward_parts(x, _gelu_parts(x)[1], grad_y)
        # where x*x overflowed, tanh is +-1 and the second term is 0 (not 0 * inf)
        grad_x = np.where(np.isfinite(x * x), grad_x, grad_y * (x > 0))
    check_result(grad_x, "gelu_backward's result")
    return grad_x


def gelu_erf(x):
    """The Gaussian error linear unit, exact form (with the error function; BERT's).

    Parameters
    ----------
    x : (...) array_like

    Returns
    -------
    y : (...) ndarray, same float dtype as ``x``

    Notes
    -----
    .. math:: \\mathrm{GELU}(x) = x \\, \\Phi(x) = \\frac{x}{2}\\left(1 +
              \\mathrm{erf}\\!\\left(\\frac{x}{\\sqrt 2}\\right)\\right)

    numpy has no ``erf``; :func:`scipy.special.erf` supplies it, vectorised (Python's
    :func:`math.erf` element by element was the slowest part of the encoder's forward pass).
    scipy is imported on the first call only, so importing the layers does not load it.

    Examples
    --------
    >>> np.round(gelu_erf(np.array([-1.0, 0.0, 1.0])), 4)
    array([-0.1587,  0.    ,  0.8413])
    """
    from scipy.special import erf

    x = as_float_array(x, "x")
    return x * (0.5 * (1.0 + erf(x / x.dtype.type(math.sqrt(2.0)))))
