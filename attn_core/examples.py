"""The article's worked inputs, its example sentence, and seeded random inputs.

Data only: every result the course shows is computed from these inputs by the maths
modules. The ``PRINTED_*`` constants are the numbers the article printed, kept only so
that the notebooks can set them beside the computed ones and point out where they differ.

Every array here is read-only (``flags.writeable`` is False): ``q = examples.Q; q *= 2``
raises instead of silently changing the default of every later call. Take a copy
(``examples.Q.copy()``) to experiment with changed numbers.
"""

import numpy as np

#: The default seed of the course: every random example starts from it.
SEED = 0

#: The article's sentence, and its words as tokens (the full stop kept as a token).
SENTENCE = "The animal crossed the road because it was tired."
TOKENS = ("The", "animal", "crossed", "the", "road", "because", "it", "was", "tired", ".")

#: Labels for the four positions of the worked example.
WORKED_TOKENS = ("token 1", "token 2", "token 3", "token 4")

#: The article's queries: 4 tokens x 2 dimensions.
Q = np.array([[1.0, 0.5],
              [0.2, 1.4],
              [0.9, 0.1],
              [0.3, 0.8]])

#: The article gives the keys already transposed: 2 dimensions x 4 tokens.
K_T = np.array([[1.1, 0.3, 0.8, 0.2],
                [0.4, 1.2, 0.1, 0.9]])

#: The keys as rows (4 tokens x 2 dimensions), the layout ``attention`` expects.
K = K_T.T.copy()

#: The article's values: 4 tokens x 2 dimensions.
V = np.array([[2.0, 1.0],
              [0.5, 3.0],
              [1.5, 0.5],
              [0.0, 2.0]])

#: The article's softmax demonstration: a small score row, and the factor that stands in
#: for the spread of unscaled scores at d_k = 64 (sqrt(64) = 8).
SMALL_SCORES = np.array([1.0, 2.0, 3.0])
SATURATION_FACTOR = 8.0

#: The multi-head configuration the article uses as its example.
ARTICLE_D_MODEL = 512
ARTICLE_HEADS = 8

#: The sequence lengths of the article's cost table.
COST_TABLE_LENGTHS = (512, 2048, 8192, 32768)

# --- What the article printed (for comparison only; never used as a result) ---------

#: The score matrix Q K^T as printed (unscaled).
PRINTED_SCORES = np.array([[1.30, 0.90, 0.85, 0.65],
                           [1.78, 1.74, 0.30, 1.30],
                           [1.03, 0.39, 0.73, 0.27],
                           [0.65, 1.05, 0.32, 0.78]])

#: The attention weights as printed.
PRINTED_WEIGHTS = np.array([[0.31, 0.26, 0.25, 0.18],
                            [0.29, 0.28, 0.13, 0.30],
                            [0.35, 0.20, 0.28, 0.17],
                            [0.22, 0.31, 0.19, 0.28]])

#: The output (weights @ V) as printed.
PRINTED_OUTPUT = np.array([[1.13, 1.55],
                           [0.95, 1.79],
                           [1.19, 1.31],
                           [0.97, 1.86]])

#: The causally masked weights as printed.
PRINTED_CAUSAL_WEIGHTS = np.array([[1.00, 0.00, 0.00, 0.00],
                                   [0.51, 0.49, 0.00, 0.00],
                                   [0.38, 0.22, 0.40, 0.00],
                                   [0.24, 0.33, 0.20, 0.23]])

#: softmax([1, 2, 3]) and softmax(8 * [1, 2, 3]) as printed.
PRINTED_SOFTMAX_SMALL = np.array([0.09, 0.24, 0.67])
PRINTED_SOFTMAX_LARGE = np.array([0.00, 0.00, 1.00])

#: The article's cost table: score-matrix cells and cost relative to 512 tokens.
PRINTED_COST_CELLS = (262_144, 4_194_304, 67_108_864, 1_073_741_824)
PRINTED_COST_RELATIVE = (1, 16, 256, 4096)


def rng(seed=SEED):
    """A numpy random Generator, seeded so that every run gives the same numbers.

    Examples
    --------
    >>> bool(rng(1).random() == rng(1).random())
    True
    """
    return np.random.default_rng(seed)


def random_qkv(n, d_k, d_v=None, *, batch=(), seed=SEED, dtype=np.float64):
    """Seeded standard-normal queries, keys and values.

    Parameters
    ----------
    n : int
        Sequence length.
    d_k : int
        Query/key width.
    d_v : int, optional
        Value width, default ``d_k``.
    batch : tuple of int, optional
        Leading batch dimensions.
    seed : int, optional
    dtype : numpy dtype, optional

    Returns
    -------
    q, k : (*batch, n, d_k) ndarray
    v : (*batch, n, d_v) ndarray

    Examples
    --------
    >>> q, k, v = random_qkv(5, 3, 2, batch=(4,))
    >>> q.shape, v.shape
    ((4, 5, 3), (4, 5, 2))
    """
    d_v = d_k if d_v is None else d_v
    g = rng(seed)
    q = g.standard_normal((*batch, n, d_k)).astype(dtype)
    k = g.standard_normal((*batch, n, d_k)).astype(dtype)
    v = g.standard_normal((*batch, n, d_v)).astype(dtype)
    return q, k, v


def _freeze_arrays(namespace):
    """Make every ndarray in ``namespace`` read-only; return their names."""
    frozen = []
    for name, value in namespace.items():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
            frozen.append(name)
    return tuple(frozen)


#: The names of the module's arrays, all made read-only (last in the module, so none is missed).
READ_ONLY_ARRAYS = _freeze_arrays(dict(globals()))
