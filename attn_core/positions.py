"""Where a token is: sinusoidal encodings, rotary embeddings (RoPE) and ALiBi's distance bias.

Attention on its own is permutation-equivariant: permute the input rows and the output rows
come out permuted the same way, so "the cat sat" and "sat the cat" give the same mixtures.
Three ways to tell it where each token is:

* **added to the input** (Vaswani et al. 2017, "Attention is all you need"): a vector per
  position, fixed (:func:`sinusoidal_positions`) or learned (a table trained with the model,
  such as the tiny GPT's ``wpe``), added to the token's embedding before ``W_q``, ``W_k``;
* **rotating queries and keys** (Su et al. 2021, "RoFormer: enhanced transformer with rotary
  position embedding"): :func:`rope` turns each pair of features of a query or key at
  position ``m`` by the angle ``m theta_c``, so that the score of a query at ``m`` and a key
  at ``n`` depends on ``m - n`` only;
* **biasing the scores** (Press et al. 2022, "Train short, test long: attention with linear
  biases enables input length extrapolation"): :func:`alibi_bias` subtracts ``slope * (m - n)``
  from each score, with one slope per head (:func:`alibi_slopes`).

All three share the frequencies ``theta_c = base^(-2c/d)`` (:func:`frequencies`).
"""

import numbers

import numpy as np

from ._validate import as_float_array, check_option, check_positive_int, check_positive_number

__all__ = ["PAIRINGS", "alibi_bias", "alibi_slopes", "cosine_by_offset", "frequencies", "rope",
           "sinusoidal_positions"]

#: How :func:`rope` pairs the features it rotates: ``"interleaved"`` (features 2c and 2c+1,
#: Su et al. 2021, the default) or ``"halves"`` (features c and c + d/2, GPT-NeoX and the
#: Hugging Face Llama code).
PAIRINGS = ("interleaved", "halves")


def _check_even_width(d, name):
    d = check_positive_int(d, name, minimum=2)
    if d % 2:
        raise ValueError(f"{name} must be even (the features go in pairs), got {d}")
    return d


def frequencies(d, base=10000.0):
    """The angular frequency of each pair of features: ``theta_c = base^(-2c/d)``.

    Parameters
    ----------
    d : int
        Width (even): ``d / 2`` pairs.
    base : float, optional
        The wavelength scale, default 10000 (Vaswani et al. 2017; Su et al. 2021).

    Returns
    -------
    theta : (d/2,) float64 ndarray
        ``theta[0] = 1`` (a full turn every ``2 pi`` positions), then ever slower, down to
        ``base^(-(d-2)/d)``.

    Examples
    --------
    >>> frequencies(4, base=100.0).tolist()
    [1.0, 0.1]
    """
    d = _check_even_width(d, "d")
    base = check_positive_number(base, "base")
    return base ** (-np.arange(0, d, 2) / d)  # (d/2,): exponents 0, 2/d, ..., (d-2)/d


def sinusoidal_positions(n, d, base=10000.0):
    """Fixed positional encodings: sines and cosines of geometrically spaced frequencies.

    Parameters
    ----------
    n : int
        Number of positions.
    d : int
        Width (even).
    base : float, optional
        Default 10000, as in Vaswani et al. 2017.

    Returns
    -------
    pe : (n, d) ndarray
        ``pe[i, 2c] = sin(i theta_c)``, ``pe[i, 2c+1] = cos(i theta_c)`` with ``theta_c`` from
        :func:`frequencies`.

    Notes
    -----
    .. math:: PE_{i, 2c} = \\sin(i\\,\\theta_c), \\; PE_{i, 2c+1} = \\cos(i\\,\\theta_c),
              \\quad \\theta_c = 10000^{-2c/d}

    So ``pe[m] . pe[n] = sum_c cos((m - n) theta_c)``: the encodings' own dot product depends on
    the offset only (the scores of a model that adds them also hold content-position terms,
    which do not).

    Examples
    --------
    >>> sinusoidal_positions(3, 4)[0].tolist()
    [0.0, 1.0, 0.0, 1.0]
    """
    n = check_positive_int(n, "n")
    d = _check_even_width(d, "d")
    angle = np.arange(n)[:, None] * frequencies(d, base)[None, :]  # (n, 1) * (1, d/2) -> (n, d/2)
    pe = np.empty((n, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return pe


def cosine_by_offset(table, m):
    """Cosine similarity of row ``m`` of a table of position vectors with the rows before it.

    Parameters
    ----------
    table : (n, d) array_like
        One vector per position (sinusoidal, learned, or a vector rotated by :func:`rope`).
    m : int
        The query's position, ``0 <= m < n``.

    Returns
    -------
    cos : (m + 1,) float64 ndarray
        ``cos[k] = table[m] . table[m - k] / (|table[m]| |table[m - k]|)``: ``k`` positions back.

    Examples
    --------
    >>> cosine_by_offset([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]], 2).round(4).tolist()
    [1.0, 0.7071, 0.0]
    """
    table = as_float_array(table, "table", min_ndim=2, layout="(n, d)").astype(np.float64)
    if table.ndim != 2:
        raise ValueError(f"table must be one vector per position, shape (n, d), got shape "
                         f"{table.shape}")
    m = check_positive_int(m, "m", minimum=0)
    if m >= table.shape[0]:
        raise ValueError(f"m must be a position of the table, 0 to {table.shape[0] - 1}, got {m}")
    norms = np.linalg.norm(table[: m + 1], axis=-1)  # (m + 1,)
    if not (norms > 0).all():
        raise ValueError("table has an all-zero row among positions 0 to m: no direction to "
                         "compare")
    back = table[m::-1]  # (m + 1, d): positions m, m - 1, ..., 0
    return back @ table[m] / (norms[::-1] * norms[m])  # (m + 1, d) @ (d,) -> (m + 1,)


def _check_positions(positions, lead, name="positions"):
    """``positions`` as a float64 array broadcastable to ``lead`` (x's shape without d)."""
    if isinstance(positions, numbers.Number) and not isinstance(positions, (bool, np.bool_)):
        positions = [positions]
    if isinstance(positions, (str, bytes)) or positions is None:
        raise TypeError(f"{name} must be an array of positions such as np.arange(n), "
                        f"got {type(positions).__name__}")
    arr = np.asarray(positions)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold numbers (token positions such as np.arange(n)), "
                        f"got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite, got {arr[~np.isfinite(arr)][:3].tolist()}")
    try:
        np.broadcast_shapes(arr.shape, lead)
    except ValueError:
        raise ValueError(f"{name} of shape {arr.shape} must broadcast to x's shape without its "
                         f"last axis, {lead} (..., n): one position per row of x") from None
    return arr


def rope(x, positions, base=10000.0, pairing="interleaved"):
    """Rotary position embedding: turn each pair of features by ``position * theta_c``.

    Apply it to the queries and the keys (never to the values), after their projections and
    before the scores.

    Parameters
    ----------
    x : (..., n, d) array_like
        Queries or keys, one row per token; ``d`` even.
    positions : (..., n) array_like of numbers
        The position of each row (broadcast against ``x``'s leading axes), e.g.
        ``np.arange(n)``, or ``[t]`` for one new token at position ``t``.
    base : float, optional
        Default 10000 (Su et al. 2021).
    pairing : {"interleaved", "halves"}, optional
        Which features form pair ``c``: ``"interleaved"`` (``2c`` and ``2c+1``, Su et al.
        2021; the default: the paper's form, and the same pairs as
        :func:`sinusoidal_positions`) or ``"halves"`` (``c`` and ``c + d/2``, GPT-NeoX and the
        Hugging Face Llama code). The two differ by a fixed permutation of the features, which
        learned ``W_q``, ``W_k`` absorb: equally good models, but weights trained with one
        pairing give wrong scores with the other.

    Returns
    -------
    x_rot : (..., n, d) ndarray
        In ``x``'s dtype (the angles are computed in float64). Norms are unchanged and
        position 0 is the identity.

    Notes
    -----
    For each pair ``(x_a, x_b)`` and angle ``phi = m theta_c``, ``theta_c = base^(-2c/d)``:

    .. math:: \\begin{pmatrix} x'_a \\\\ x'_b \\end{pmatrix} =
              \\begin{pmatrix} \\cos\\phi & -\\sin\\phi \\\\ \\sin\\phi & \\cos\\phi
              \\end{pmatrix} \\begin{pmatrix} x_a \\\\ x_b \\end{pmatrix}

    Rotations compose, ``R(m)^T R(n) = R(n - m)``, so ``rope(q, m) . rope(k, n)`` depends on
    ``m - n`` only.

    Examples
    --------
    >>> rope([[1.0, 0.0]], [1], base=10000.0).round(4).tolist()  # one pair, theta_0 = 1 rad
    [[0.5403, 0.8415]]
    """
    x = as_float_array(x, "x", min_ndim=2, layout="(..., n, d)")
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"x must have an even last dimension d (the features are rotated in "
                         f"pairs), got shape {x.shape}")
    pairing = check_option(pairing, "pairing", PAIRINGS)
    pos = _check_positions(positions, x.shape[:-1])
    angle = pos[..., None] * frequencies(d, base)  # (..., n, 1) * (d/2,) -> (..., n, d/2)
    cos, sin = np.cos(angle).astype(x.dtype), np.sin(angle).astype(x.dtype)
    if pairing == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]  # (..., n, d/2) each: features 2c and 2c+1
    else:
        a, b = x[..., : d // 2], x[..., d // 2:]  # features c and c + d/2
    ra, rb = a * cos - b * sin, a * sin + b * cos  # (..., n, d/2): each pair turned by angle
    if pairing == "interleaved":
        out = np.empty(np.broadcast_shapes(x.shape, (*angle.shape[:-1], d)), dtype=x.dtype)
        out[..., 0::2], out[..., 1::2] = ra, rb
        return out
    return np.concatenate([ra, rb], axis=-1)  # (..., n, d/2) twice -> (..., n, d)


def alibi_slopes(n_heads):
    """ALiBi's slope of each head (Press et al. 2022): a geometric sequence.

    Parameters
    ----------
    n_heads : int

    Returns
    -------
    slopes : (n_heads,) float64 ndarray

    Notes
    -----
    For ``h`` a power of two the slopes are ``r, r^2, ..., r^h`` with ``r = 2^(-8/h)`` (8 heads:
    1/2, 1/4, ..., 1/256). Otherwise, with ``p`` the largest power of two below ``h``: the ``p``
    slopes for ``p`` heads, then every other slope of the ``2p``-head sequence (its 1st, 3rd,
    ...) until there are ``h`` (the rule of the paper's code).

    Examples
    --------
    >>> (1 / alibi_slopes(4)).tolist()
    [4.0, 16.0, 64.0, 256.0]
    """
    h = check_positive_int(n_heads, "n_heads")
    p = 1 << (h.bit_length() - 1)  # largest power of two <= h

    def geometric(k):
        return 2.0 ** (-8.0 * np.arange(1, k + 1) / k)  # (k,): r, r^2, ..., r^k, r = 2^(-8/k)

    if p == h:
        return geometric(h)
    return np.concatenate([geometric(p), geometric(2 * p)[0::2][: h - p]])


def alibi_bias(n_heads, n_q, n_k=None):
    """ALiBi's linear distance bias, one ``(n_q, n_k)`` matrix per head, causal form.

    Parameters
    ----------
    n_heads : int
    n_q : int
        Number of queries: the last ``n_q`` of the ``n_k`` positions (``n_q = 1`` when
        decoding the newest token).
    n_k : int, optional
        Number of keys, default ``n_q``; at least ``n_q``.

    Returns
    -------
    bias : (n_heads, n_q, n_k) float64 ndarray
        ``bias[h, i, j] = -slope_h * (p_i - j)`` for the keys ``j <= p_i`` the query at
        position ``p_i = n_k - n_q + i`` may see, and 0 on the later keys, which the causal
        mask removes: add it to the scores and mask them with :func:`causal_mask`.

    Notes
    -----
    .. math:: w_{h,i,:} = \\mathrm{softmax}_{j \\le i}
              \\bigl(q_i k_j^\\top / \\sqrt{d_k} - m_h\\,(i - j)\\bigr)

    Examples
    --------
    >>> alibi_bias(1, 3)[0].tolist()  # one head: slope 2^-8
    [[0.0, 0.0, 0.0], [-0.00390625, 0.0, 0.0], [-0.0078125, -0.00390625, 0.0]]
    """
    slopes = alibi_slopes(n_heads)
    n_q = check_positive_int(n_q, "n_q")
    n_k = n_q if n_k is None else check_positive_int(n_k, "n_k")
    if n_k < n_q:
        raise ValueError(f"n_k must be at least n_q (the queries are the last n_q of the n_k "
                         f"positions), got n_q = {n_q} and n_k = {n_k}")
    distance = (n_k - n_q + np.arange(n_q))[:, None] - np.arange(n_k)[None, :]  # (n_q, n_k)
    distance = np.maximum(distance, 0)  # later keys: 0 (the causal mask removes them)
    return slopes[:, None, None] * -distance  # (h, 1, 1) * (n_q, n_k) -> (h, n_q, n_k)
