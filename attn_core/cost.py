"""What attention costs: score-matrix cells, floating-point operations, bytes and time."""

import time
import timeit
import tracemalloc

import numpy as np

from ._validate import as_float_array, check_float_dtype, check_positive_int, divisors


def _dtype_size(dtype):
    return check_float_dtype(dtype).itemsize


def score_matrix_cells(n, h=1, batch=1):
    """Number of entries in the score (or weight) matrices: ``batch * h * n * n``.

    Parameters
    ----------
    n : int
        Sequence length.
    h, batch : int, optional
        Heads and batch size, default 1.

    Returns
    -------
    cells : int

    Notes
    -----
    .. math:: \\text{cells} = b \\, h \\, n^2

    Examples
    --------
    >>> score_matrix_cells(512)
    262144
    >>> score_matrix_cells(2048) // score_matrix_cells(512)
    16
    """
    n, h, batch = (check_positive_int(x, name)
                   for x, name in ((n, "n"), (h, "h"), (batch, "batch")))
    return batch * h * n * n


def score_matrix_bytes(n, h=1, batch=1, dtype="float32"):
    """Bytes needed to hold the score matrices at once: ``cells * itemsize``.

    Parameters
    ----------
    n, h, batch : int
    dtype : numpy dtype, optional
        Floating dtype of the scores (default float32, 4 bytes).

    Returns
    -------
    nbytes : int

    Examples
    --------
    >>> score_matrix_bytes(32768) / 2**30
    4.0
    """
    return score_matrix_cells(n, h, batch) * _dtype_size(dtype)


def attention_flops(n, d_model, h=1, n_k=None):
    """Multiply-adds of attention itself (scores and weighted sum), counted as 2 FLOPs each.

    Parameters
    ----------
    n : int
        Number of queries.
    d_model : int
        Total width over all heads (``h * d_k``); must be divisible by ``h``.
    h : int, optional
        Heads. The matrix-product counts do not depend on ``h`` (each head does ``1/h`` of
    the work); only the small softmax term grows with ``h``, as there are ``h`` score
    matrices to normalise.
    n_k : int, optional
        Number of keys, default ``n``.

    Returns
    -------
    flops : dict
        ``{"scores": 2 n n_k d_model, "softmax": 5 h n n_k, "weighted_sum": 2 n n_k d_model,
        "total": ...}``; the softmax term counts max, subtract, exp, sum and divide once each.

    Notes
    -----
    Per head, ``Q_i K_i^T`` is ``n * n_k * d_k`` multiply-adds; over ``h`` heads that is
    ``n * n_k * h * d_k = n * n_k * d_model``, the same for every ``h``.

    Examples
    --------
    >>> attention_flops(512, 512, h=8)["scores"] == attention_flops(512, 512, h=1)["scores"]
    True
    """
    n = check_positive_int(n, "n")
    d_model = check_positive_int(d_model, "d_model")
    h = check_positive_int(h, "h")
    n_k = n if n_k is None else check_positive_int(n_k, "n_k")
    if d_model % h:
        raise ValueError(f"d_model = {d_model} must be divisible by h, got h = {h}; "
                         f"head counts that divide {d_model}: {divisors(d_model)}")
    qk = 2 * n * n_k * d_model
    soft = 5 * h * n * n_k
    return {"scores": qk, "softmax": soft, "weighted_sum": qk, "total": 2 * qk + soft}


def projection_flops(n, d_model):
    """FLOPs of the four ``(d_model, d_model)`` projections (Q, K, V and output): ``8 n d^2``.

    Examples
    --------
    >>> projection_flops(4, 8)
    2048
    """
    n = check_positive_int(n, "n")
    d_model = check_positive_int(d_model, "d_model")
    return 4 * 2 * n * d_model * d_model


def kv_cache_bytes(n, layers, heads, d_head, dtype="float16", batch=1):
    """Bytes of a key/value cache: every layer keeps a key and a value per head per token.

    Parameters
    ----------
    n : int
        Tokens in the context (cached so far).
    layers, heads, d_head : int
        Model shape: ``heads * d_head`` is ``d_model`` for ordinary multi-head attention.
    dtype : numpy dtype, optional
        Storage type of the cache, default float16 (2 bytes).
    batch : int, optional
        Sequences decoded at once, default 1.

    Returns
    -------
    nbytes : int

    Notes
    -----
    .. math:: \\text{bytes} = 2 \\cdot L \\cdot b \\cdot h \\cdot n \\cdot d_{head}
              \\cdot \\text{itemsize}

    the 2 counting keys and values. It grows like ``n``; the score matrix like ``n^2``, but
    only one layer's scores exist at a time while every layer's cache is kept.

    Examples
    --------
    >>> kv_cache_bytes(32768, layers=32, heads=32, d_head=128) / 2**30
    16.0
    """
    n, layers, heads, d_head, batch = (
        check_positive_int(x, name) for x, name in
        ((n, "n"), (layers, "layers"), (heads, "heads"), (d_head, "d_head"), (batch, "batch")))
    return 2 * layers * batch * heads * n * d_head * _dtype_size(dtype)


def layer_flops(n, d_model, h=1, d_ff=None):
    """FLOPs of one transformer layer on ``n`` tokens, split into its parts.

    Parameters
    ----------
    n : int
        Tokens (queries and keys alike: self-attention over the whole sequence).
    d_model : int
    h : int, optional
        Heads (only the softmax term depends on it).
    d_ff : int, optional
        Hidden width of the feed-forward network, default ``4 * d_model``.

    Returns
    -------
    flops : dict
        ``{"projections": 8 n d^2, "feed_forward": 4 n d d_ff,
        "attention": 4 n^2 d + 5 h n^2, "total": ...}``

    Notes
    -----
    The projections and the feed-forward network grow like ``n``; attention's scores and
    weighted sum like ``n^2``. Layer norms, biases and the activation (``O(n d)``) are left
    out; so are the embedding and output layers, outside the layers.

    Examples
    --------
    >>> f = layer_flops(1024, 512, h=8)
    >>> f["projections"] + f["feed_forward"] == 24 * 1024 * 512**2
    True
    """
    n = check_positive_int(n, "n")
    d_model = check_positive_int(d_model, "d_model")
    d_ff = 4 * d_model if d_ff is None else check_positive_int(d_ff, "d_ff")
    proj = projection_flops(n, d_model)
    ffn = 2 * 2 * n * d_model * d_ff  # two (n, d) x (d, d_ff)-sized products
    att = attention_flops(n, d_model, h=h)["total"]
    return {"projections": proj, "feed_forward": ffn, "attention": att,
            "total": proj + ffn + att}


def decoding_step_flops(t, d_model, h=1, d_ff=None, cached=True):
    """FLOPs of one layer for the newest token of a context of ``t`` tokens.

    Parameters
    ----------
    t : int
        Tokens in the context, the newest included.
    d_model, h, d_ff : int
        As in :func:`layer_flops`.
    cached : bool
        With a key/value cache (True): the newest token's projections and feed-forward, and
        attention of its one query over ``t`` cached keys. Without (False): the whole layer
        recomputed on all ``t`` tokens, :func:`layer_flops` ``(t)``, as a model must whose
        earlier keys and values change when a token is added (an encoder, no causal mask).

    Returns
    -------
    flops : dict
        ``{"projections", "feed_forward", "attention", "total"}`` as :func:`layer_flops`.

    Examples
    --------
    >>> a, b = (decoding_step_flops(512, 64, cached=c)["total"] for c in (True, False))
    >>> b == 512 * a
    True
    """
    t = check_positive_int(t, "t")
    if not cached:
        return layer_flops(t, d_model, h=h, d_ff=d_ff)
    one = layer_flops(1, d_model, h=h, d_ff=d_ff)
    att = attention_flops(1, d_model, h=h, n_k=t)["total"]
    return {"projections": one["projections"], "feed_forward": one["feed_forward"],
            "attention": att, "total": one["projections"] + one["feed_forward"] + att}


def attention_overtakes_at(d_model, h=1, d_ff=None):
    """Smallest ``n`` at which attention's ``n^2`` FLOPs reach the rest of the layer's.

    Parameters
    ----------
    d_model, h, d_ff : int
        As in :func:`layer_flops` (``d_ff`` default ``4 * d_model``).

    Returns
    -------
    n : int
        The smallest ``n`` with ``attention >= projections + feed_forward``. The same for
        the whole model, as every layer has the same shape.

    Notes
    -----
    Dividing :func:`layer_flops`'s terms by ``n``:

    .. math:: n (4 d + 5 h) \\ge 8 d^2 + 4 d\\, d_{ff}
              \\iff n \\ge \\frac{8 d^2 + 4 d\\, d_{ff}}{4 d + 5 h}

    With ``d_ff = 4 d`` and the small softmax term left out that is ``24 d^2 / 4 d = 6 d``.

    Examples
    --------
    >>> attention_overtakes_at(4096, h=32)
    24339
    """
    d_model = check_positive_int(d_model, "d_model")
    h = check_positive_int(h, "h")
    d_ff = 4 * d_model if d_ff is None else check_positive_int(d_ff, "d_ff")
    attention_flops(1, d_model, h=h)  # same checks (h divides d_model) and messages
    linear = 8 * d_model * d_model + 4 * d_model * d_ff
    return -(-linear // (4 * d_model + 5 * h))  # ceiling division in integers


def median_time(fn, *args, repeat=5, **kwargs):
    """Median wall time in seconds of ``fn(*args, **kwargs)`` over ``repeat`` calls.

    One untimed warm-up call comes first. Uses ``time.perf_counter``.

    Examples
    --------
    >>> median_time(sum, [1, 2, 3], repeat=3) >= 0
    True
    """
    repeat = check_positive_int(repeat, "repeat")
    fn(*args, **kwargs)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args, **kwargs)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def min_time(fn, *args, repeat=20, **kwargs):
    """Shortest wall time in seconds of ``fn(*args, **kwargs)`` over ``repeat`` calls.

    One untimed warm-up call comes first; the calls are timed with :mod:`timeit`. On a
    machine busy with other work, the shortest run is the one least disturbed by it, so
    the minimum of many runs is steadier than a median of a few. It is still this
    machine's figure, not a property of the code.

    Examples
    --------
    >>> min_time(sum, [1, 2, 3], repeat=5) >= 0
    True
    """
    repeat = check_positive_int(repeat, "repeat")
    fn(*args, **kwargs)
    timer = timeit.Timer(lambda: fn(*args, **kwargs), timer=time.perf_counter)
    return float(min(timer.repeat(repeat=repeat, number=1)))


def interleaved_times(contenders, rounds, pause=0.0):
    """Wall times of several calls measured in turns: ``{name: [seconds per round]}``, and
    ``{name: output}`` of each call's untimed warm-up run.

    ``contenders`` maps a name to a function of no arguments. Every round calls each once,
    in an order that rotates from round to round, so a burst of other work on a busy
    machine slows every contender alike instead of one point of a curve; the minimum (or
    the median) of each list is then compared. Timing one function many times and then the
    next lets a burst fall on one of them only: a curve that should rise can dip.

    ``pause`` (seconds, default 0) is slept before each timed call: on a machine with more
    runnable processes than cores, a process that has just slept is usually scheduled at
    once and runs a short call uninterrupted, instead of starting it at the end of a time
    slice used up by the previous, longer call.

    Examples
    --------
    >>> times, outputs = interleaved_times({"a": lambda: 1, "b": lambda: 2}, rounds=3)
    >>> sorted(times), [len(t) for t in times.values()], outputs
    (['a', 'b'], [3, 3], {'a': 1, 'b': 2})
    """
    rounds = check_positive_int(rounds, "rounds")
    if not (isinstance(pause, (int, float)) and 0 <= pause <= 1):
        raise ValueError(f"pause must be a number of seconds from 0 to 1, got {pause!r}")
    names = list(contenders)
    outputs = {name: contenders[name]() for name in names}  # warm-up, and the output
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            if pause:
                time.sleep(pause)
            start = time.perf_counter()
            contenders[name]()
            times[name].append(time.perf_counter() - start)
    return times, outputs


def peak_memory(fn, *args, **kwargs):
    """Peak bytes allocated (as traced by ``tracemalloc``) during ``fn(*args, **kwargs)``.

    numpy reports its array buffers to tracemalloc, so this measures the arrays a function
    creates, including temporaries, above what existed before the call.

    Examples
    --------
    >>> peak_memory(np.zeros, 1_000_000) >= 8_000_000
    True
    """
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    try:
        fn(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return peak - base


def loglog_slope(x, y):
    """Slope of the least-squares line through ``(log x, log y)``: ``p`` in ``y ~ x^p``.

    Parameters
    ----------
    x, y : (m,) array_like of positive numbers, m >= 2

    Returns
    -------
    slope : float

    Examples
    --------
    >>> round(loglog_slope([1, 2, 4, 8], [3, 12, 48, 192]), 6)
    2.0
    """
    x = as_float_array(x, "x", min_ndim=1)
    y = as_float_array(y, "y", min_ndim=1)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2:
        raise ValueError(f"x and y must be 1-D of equal length >= 2, got shapes {x.shape} "
                         f"and {y.shape}")
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError("x and y must be positive to take logarithms")
    if np.ptp(x) == 0:
        raise ValueError(f"x must hold at least two different values, got {x.tolist()}")
    slope, _ = np.polyfit(np.log(x), np.log(y), 1)
    return float(slope)
