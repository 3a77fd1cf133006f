"""Tolerances for comparing two float32 computations of the same thing, from an error model.

Two correct float32 programs (ours and PyTorch's, or ours on two CPUs) differ because they
round in a different order: BLAS blocks a dot product differently, a vectorised ``exp`` is
accurate to a few units in the last place (ulp) but not the same few. The model used here:

* one float32 rounding has relative error at most ``u = 2**-24`` (about 6e-8);
* a dot product of length ``K`` accumulates ``K`` roundings; with the roundings independent
  (they are, in practice, not adversarial) the error grows like ``sqrt(K) * u`` relative to
  ``|a| |b|``, the size of the terms, not of the (possibly cancelling) result;
* a stack of ``L`` such layers adds one such error per layer (layer norm keeps each layer's
  output at scale 1, so the errors neither shrink nor blow up between layers: they add).

So two results agree, element by element, to

    |ours - theirs|  <=  c * L * sqrt(K) * u * (|theirs| + s)

where ``s`` is the scale of the whole array (its root mean square: an entry that happens to be
near 0 was computed from terms of size ``s``, so it is held to ``s``, not to its own size), and
``c`` a safety factor for what the model leaves out (exp and rsqrt rounding, the
non-independence of roundings). ``C = 8`` is used throughout: a real mistake (a transposed
matrix, a missing bias, a wrong scale or epsilon) changes results by 1e-3 relative or more,
100 times larger than the bound for the largest model here (L = 6, K = 1536: 1.1e-4), and
each cross-check also runs in float64, where the bound is 1e-12-scale and tells rounding
from a real difference. The two parts of the tolerance are therefore
``rtol = c L sqrt(K) u`` and ``atol = rtol * s``.
"""

import math

import numpy as np

#: One float32 rounding's relative error bound (unit roundoff, 2**-24).
U32 = float(np.finfo(np.float32).eps) / 2
#: The same for float64.
U64 = float(np.finfo(np.float64).eps) / 2
#: Safety factor over the error model (module docstring).
SAFETY = 8


def rounding_tolerance(reference, inner, depth=1, dtype=np.float32, safety=SAFETY, scale=None):
    """``{"rtol", "atol"}`` for ``assert_allclose(ours, reference, ...)``.

    Parameters
    ----------
    reference : array_like
        The other side's result; its root mean square sets the absolute part.
    inner : int
        The longest inner (summed) dimension of a product along the way (``d_k``, ``n`` for
        weights times values, ``d_model`` or ``d_ff`` for a projection).
    depth : int
        How many such layers the value went through (1 for one attention call).
    dtype : float32 or float64
        The precision both sides computed in.
    scale : float, optional
        The size of the terms the result was summed from, when the reference's own root mean
        square does not say it (a gradient that is exactly 0 in exact arithmetic, such as
        that of the key bias, is pure rounding noise: hold it to the other gradients' scale).
    """
    u = U32 if np.dtype(dtype) == np.float32 else U64
    ref = np.asarray(reference, dtype=np.float64)
    if scale is None:
        scale = float(np.sqrt(np.mean(ref * ref))) if ref.size else 0.0
    rtol = safety * depth * math.sqrt(inner) * u
    # an all-zero reference has no scale of its own: hold it to a scale of 1
    return {"rtol": rtol, "atol": rtol * (scale if scale > 0.0 else 1.0)}


def assert_rounding_close(ours, theirs, inner, depth=1, err_msg="", scale=None):
    """``np.testing.assert_allclose`` with :func:`rounding_tolerance` in ``theirs``'s dtype."""
    theirs = np.asarray(theirs)
    dtype = np.float32 if theirs.dtype == np.float32 else np.float64
    tol = rounding_tolerance(theirs, inner, depth, dtype, scale=scale)
    diff = float(np.max(np.abs(np.asarray(ours, np.float64) - theirs))) if theirs.size else 0.0
    np.testing.assert_allclose(ours, theirs, **tol,
                               err_msg=f"{err_msg} (max abs diff {diff:.3g}; rtol "
                                       f"{tol['rtol']:.2g}, atol {tol['atol']:.2g})")
