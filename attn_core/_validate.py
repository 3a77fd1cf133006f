"""Checks at the API boundary, so bad input fails with a sentence, not a numpy traceback.

Every public maths function calls these before doing any arithmetic. Each error names the
argument, says what was expected and what was given.

The dtype rule, followed by every maths function (:func:`as_float_array` and
:func:`to_common_dtype` implement it):

1. each input is read as a float array: float32 and float64 are kept as they are, float16
   becomes float32 (a float16 dot product of a few dozen terms already overflows 65504, and
   numpy has no fast float16 matrix product), integer and boolean input becomes float64;
2. all float inputs of one call are brought to their common dtype, ``np.result_type`` of
   the dtypes from step 1, and everything is computed in it;
3. every array result has that dtype, the weights as well as the output.

So the result is float32 only when every input is float32 or float16 (float16 in is
computed and returned in float32), and float64 otherwise; ``attention(q32, k32, v64)``
computes and returns both its output and its weights in float64.

Overflow is never silent: "finite in, finite out, or a clear error". A product or score
that overflows to inf or NaN raises a ValueError naming it (:func:`check_overflow`,
:func:`check_result`). A score of ``-inf`` means "masked" and only a mask may produce it:
a query whose allowed scores all overflow to ``-inf`` is an error, not an empty row. (One
score that overflows to ``-inf`` beside finite ones gets weight 0, its true weight to the
dtype's precision, without an error.) Overflow inside a computation is silenced with
:func:`checked_later` only where the result is checked right after, so no RuntimeWarning
leaks from a computation that ends correct.
"""

import numbers
import os

import numpy as np

_FLOAT_KINDS = "fiub"  # float, signed int, unsigned int, bool: all convertible to float


def as_float_array(x, name, *, min_ndim=0, allow_neg_inf=False, layout=None):
    """Return ``x`` as a floating ndarray, after checking its type, rank and values.

    Integer and boolean input becomes float64, float16 becomes float32, float32 and float64
    are kept as they are (step 1 of the module's dtype rule).
    NaN and +inf are always refused; -inf only where ``allow_neg_inf`` (masked scores).
    ``layout`` names the expected shape in error messages (default ``(..., n, d)`` for
    matrices, ``(..., n)`` for vectors).
    """
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__}")
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError):  # ragged nested lists
        raise TypeError(f"{name} must be a rectangular array of numbers (every row the same "
                        "length), got a ragged nested sequence") from None
    if arr.dtype.kind not in _FLOAT_KINDS:
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    elif arr.dtype == np.float16:
        arr = arr.astype(np.float32)
    if arr.ndim < min_ndim:
        what = "a matrix" if min_ndim == 2 else f"an array of rank >= {min_ndim}"
        layout = layout or ("(..., n, d)" if min_ndim >= 2 else "(..., n)")
        raise ValueError(
            f"{name} must be {what} with shape {layout} (rank >= {min_ndim}), "
            f"got shape {arr.shape} (rank {arr.ndim})"
        )
    if min_ndim >= 2 and 0 in arr.shape[-2:]:
        raise ValueError(
            f"{name} must have at least one position and one feature (n >= 1, d >= 1) in "
            f"its shape {layout or '(..., n, d)'}, got shape {arr.shape}"
        )
    check_finite(arr, name, allow_neg_inf=allow_neg_inf)
    return arr


def divisors(d):
    """The whole numbers that divide ``d``: the head counts a width ``d`` can be split into."""
    return [h for h in range(1, d + 1) if d % h == 0]


def to_common_dtype(*arrays):
    """The float arrays brought to their common dtype (step 2 of the module's dtype rule).

    Arrays already of that dtype are returned as they are, without a copy.
    """
    dtype = np.result_type(*arrays)
    return tuple(a.astype(dtype, copy=False) for a in arrays)


def check_overflow(row_max, dtype, allowed_rows=None):
    """Raise if the scores overflowed: a row maximum is +inf or NaN, or -inf where not masked.

    Parameters
    ----------
    row_max : (...) ndarray
        The maximum of each row of (masked) scores.
    dtype : numpy dtype
        The dtype the scores were computed in (for the message).
    allowed_rows : bool array broadcastable to ``row_max``, or True, optional
        True where the row has at least one key it may attend to. Such a row whose maximum
        is ``-inf`` had all its allowed scores overflow to ``-inf``. None: no ``-inf``
        check (an all ``-inf`` row is taken as fully masked).

    Only the row maxima are inspected (max propagates inf and NaN), so the check costs
    nothing next to the softmax itself.
    """
    bad = np.isnan(row_max) | np.isposinf(row_max)
    if bad.any():
        raise ValueError(
            f"the scores q . k * scale overflowed to inf or NaN in {dtype}: the inputs are too "
            "large for this dtype; scale q and k down or compute in float64"
        )
    if allowed_rows is not None:
        bad = np.isneginf(row_max) & allowed_rows
        if bad.any():
            raise ValueError(
                f"the scores q . k * scale overflowed to -inf in {dtype} for every key of "
                f"{int(np.count_nonzero(bad))} query row(s) that may attend to keys (-inf "
                "means masked, and only the mask may make a score -inf): the inputs or the "
                "scale are too large for this dtype; scale q and k down"
            )


def check_result(arr, what):
    """Raise ValueError if ``arr``, computed from finite input, overflowed to inf or NaN.

    ``what`` names the computation, for example ``"q @ w_q (the query projection)"``.
    """
    if not np.isfinite(arr).all():
        raise ValueError(
            f"{what} overflowed to inf or NaN in {arr.dtype}, although its inputs are finite: "
            "the values are too large for this dtype; scale the inputs down"
        )


def checked_later():
    """``np.errstate`` that silences overflow, underflow and invalid-value warnings.

    For a computation whose result is checked explicitly right after it (with
    :func:`check_result` or :func:`check_overflow`): an overflow then gives a clear
    ValueError instead of a RuntimeWarning followed by a silent inf or NaN, and an
    underflow to 0 (a negligible weight) is not reported at all.
    """
    return np.errstate(over="ignore", under="ignore", invalid="ignore")


def check_finite(arr, name, *, allow_neg_inf=False):
    """Raise ValueError if ``arr`` holds NaN or +inf (or -inf unless allowed)."""
    if allow_neg_inf:
        bad = np.isnan(arr) | np.isposinf(arr)
        expected = "finite values or -inf"
    else:
        bad = ~np.isfinite(arr)
        expected = "finite values"
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{name} must hold {expected}, got {arr[first]} at index {first} "
            f"({int(bad.sum())} non-finite value(s) in all)"
        )


def check_mask(mask, target_shape, name="mask"):
    """Return ``mask`` as a bool ndarray broadcastable to ``target_shape``."""
    try:
        arr = np.asarray(mask)
    except (ValueError, TypeError):  # ragged nested lists
        raise TypeError(
            f"{name} must be a rectangular boolean array (every row the same length), got a "
            f"ragged nested sequence; it must broadcast to {tuple(target_shape)} (..., n_q, n_k)"
        ) from None
    if arr.dtype != np.bool_:
        raise TypeError(
            f"{name} must be a boolean array (True where a query may attend), "
            f"got dtype {arr.dtype}; build one with causal_mask(n) or compare, e.g. m != 0"
        )
    try:
        np.broadcast_shapes(arr.shape, tuple(target_shape))
    except ValueError:
        raise ValueError(
            f"{name} of shape {arr.shape} is not broadcastable to the scores' shape "
            f"{tuple(target_shape)} (..., n_q, n_k)"
        ) from None
    return arr


def check_positive_int(value, name, *, minimum=1):
    """Return ``value`` as an int after checking it is an integer >= ``minimum``."""
    if not _is_int(value):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def check_seed(seed, name="seed"):
    """A seed for ``np.random.default_rng``: an int >= 0 (the explorers', the GPT's)."""
    if not _is_int(seed):
        raise TypeError(f"{name} must be an int >= 0, got {type(seed).__name__} {seed!r}")
    if seed < 0:
        raise ValueError(f"{name} must be an int >= 0, got {seed}")
    return int(seed)


def check_positive_number(value, name, *, expected="a positive real number"):
    """Return ``value`` as a float after checking it is a real, finite number > 0.

    ``expected`` is what a TypeError says the argument must be (``"... or None"`` for an
    optional one). Used for learning rates and score scales.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {expected}, got {value!r}")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return float(value)


def check_scale(scale, d_k):
    """Return the score scale: 1/sqrt(d_k) when None, else a checked positive number."""
    if scale is None:
        return 1.0 / np.sqrt(d_k)
    return check_positive_number(scale, "scale", expected="a positive real number or None")


def check_bool(value, name):
    """``value`` as a bool (numpy's bool too); anything else is a TypeError naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__}")
    return bool(value)


def check_option(value, name, options, why=""):
    """``value`` if it is one of ``options`` (ints, strs, or None), as a plain int or str.

    The type is checked first (a str option list refuses an int with a TypeError), then
    membership (a ValueError listing the options).
    """
    listed = ", ".join(repr(o) if isinstance(o, str) else str(o) for o in options)
    if value is None and None in options:
        return None
    kinds = [o for o in options if o is not None]
    if all(isinstance(o, str) for o in kinds):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    elif not _is_int(value):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    else:
        value = int(value)
    if value not in options:
        raise ValueError(f"{name} must be one of {listed}{why}, got {value!r}")
    return value


def check_int_sequence(values, name, *, minimum=0):
    """``values`` as a non-empty list of ints >= ``minimum`` (seeds, a list of widths)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple, range,
                                                                    np.ndarray)):
        raise TypeError(f"{name} must be a list or tuple of integers >= {minimum}, "
                        f"got {type(values).__name__}")
    if len(values) == 0:
        raise ValueError(f"{name} must hold at least one integer >= {minimum}, got none")
    return [check_positive_int(v, f"each entry of {name}", minimum=minimum) for v in values]


def check_generator(rng, name="rng"):
    """``rng`` if it is a ``numpy.random.Generator``, else a TypeError saying how to make one."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"{name} must be a numpy.random.Generator such as "
                        f"np.random.default_rng(0), got {type(rng).__name__}")
    return rng


def batch_shape(name_shapes):
    """Broadcast the leading (batch) dimensions of several (..., n, d) arrays."""
    try:
        return np.broadcast_shapes(*(shape[:-2] for shape in name_shapes.values()))
    except ValueError:
        given = ", ".join(f"{n} {s}" for n, s in name_shapes.items())
        raise ValueError(
            f"the leading (batch) dimensions must broadcast against each other, got {given}"
        ) from None


def check_float_dtype(dtype):
    """``np.dtype(dtype)``, or a clear error unless it names a floating dtype."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be a numpy dtype such as 'float32', got {dtype!r}") from None
    if dt.kind != "f":
        raise ValueError(f"dtype must be a floating dtype, got {dt}")
    return dt


#: The environment switch of CI's rounding test: with ``ATTN_CORE_PERTURB_INIT=1`` every
#: weight-initialisation function of the package, and the pretrained model's loader, nudge each
#: weight by one unit in the last place, so that a notebook re-run with it shows whether what
#: it prints hangs on last-bit rounding (which differs between CPUs).
PERTURB_INIT = "ATTN_CORE_PERTURB_INIT"


def perturb_init(w):
    """``w`` unchanged, or nudged by one ulp towards +inf when ``ATTN_CORE_PERTURB_INIT=1``.

    Parameters
    ----------
    w : ndarray of floats
        Initial weights.

    Returns
    -------
    w : ndarray
        The same array (switch unset) or ``np.nextafter(w, inf)`` in ``w``'s dtype.

    Examples
    --------
    >>> w = np.array([1.0, -2.0])
    >>> bool((perturb_init(w) == w).all()) or bool((perturb_init(w) > w).all())
    True
    """
    if os.environ.get(PERTURB_INIT, "").strip().lower() not in {"1", "true", "yes"}:
        return w
    w = np.asarray(w)
    return np.nextafter(w, np.inf).astype(w.dtype, copy=False)


def immutable_array(x):
    """``x`` as an ndarray that no one can write, nor make writeable again.

    A view of an immutable ``bytes`` copy of ``x``: numpy cannot make an array over a
    ``bytes`` object writeable, so ``a.flags.writeable = True`` raises ValueError (a plain
    read-only view could be made writeable again). ``x`` is returned as it is when it is
    such a view already (no second copy). Shared by the KV cache and linear attention's
    state, the two memories a decoder carries.

    Parameters
    ----------
    x : array_like
        Copied once; the caller's array is neither frozen nor changed.

    Returns
    -------
    ndarray
        Same shape and dtype as ``x``, read-only for good.

    Examples
    --------
    >>> a = immutable_array(np.zeros(3))
    >>> a.flags.writeable
    False
    >>> immutable_array(a) is a
    True
    """
    x = np.asarray(x)
    base = x
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, bytes):  # already such a view (e.g. kept whole by an eviction)
        return x
    return np.frombuffer(np.ascontiguousarray(x).tobytes(), dtype=x.dtype).reshape(x.shape)


def check_qkv(q, k, v):
    """``q``, ``k``, ``v`` as float arrays of their common dtype, or a clear error.

    ``q`` of shape ``(..., n_q, d_k)``, ``k`` of ``(..., n_k, d_k)``, ``v`` of
    ``(..., n_k, d_v)``: the queries and keys share ``d_k`` (they meet in a dot product),
    the keys and values share ``n_k`` (one value per key), and the batch dimensions
    broadcast.
    """
    q = as_float_array(q, "q", min_ndim=2)
    k = as_float_array(k, "k", min_ndim=2)
    v = as_float_array(v, "v", min_ndim=2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension d_k (each query meets each "
                         f"key in a dot product), got q of shape {q.shape} and k of shape "
                         f"{k.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of positions n_k (one value per "
                         f"key), got k of shape {k.shape} and v of shape {v.shape}")
    batch_shape({"q": q.shape, "k": k.shape, "v": v.shape})
    return to_common_dtype(q, k, v)
