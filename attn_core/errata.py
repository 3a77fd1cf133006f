"""Setting the article's printed numbers beside the computed ones, and finding where they differ.

The article prints its matrices to two decimals. A printed cell counts as *right* when it
is a correct rounding of the computed value: at most half a unit of the last printed digit
away from it (so a value exactly halfway, such as 1.125, may be printed either way);
otherwise it is an erratum.
One rule for every notebook, so that "differs" means the same thing everywhere.
"""

import numpy as np

from ._validate import as_float_array

#: Float slack when a computed value is exactly halfway between two printed roundings.
HALFWAY_SLACK = 1e-9


def differing_cells(computed, printed, decimals=2):
    """Where the printed matrix disagrees with the computed one at the printed precision.

    Parameters
    ----------
    computed : (..., n, m) array_like
        The values computed from the inputs.
    printed : (..., n, m) array_like
        The values as printed, with ``decimals`` digits after the point.
    decimals : int, optional
        The printed precision (default 2).

    Returns
    -------
    differs : (..., n, m) bool ndarray
        True where ``printed`` is not a rounding of ``computed`` to ``decimals`` digits.

    Notes
    -----
    .. math:: |c - p| > \\tfrac{1}{2} \\cdot 10^{-\\text{decimals}} + \\epsilon

    with a tiny ``epsilon`` (1e-9) so that float64's representation of an exact halfway
    value (1.795 stored as 1.79499999...) does not decide the verdict.

    Examples
    --------
    >>> differing_cells([[0.783, 1.744]], [[1.78, 1.74]])
    array([[ True, False]])
    """
    computed = as_float_array(computed, "computed", min_ndim=1)
    printed = as_float_array(printed, "printed", min_ndim=1)
    if computed.shape != printed.shape:
        raise ValueError(f"computed and printed must have the same shape, got {computed.shape} "
                         f"and {printed.shape}")
    return np.abs(computed - printed) > 0.5 * 10.0 ** -decimals + HALFWAY_SLACK


def side_by_side(computed, printed, *, decimals=2, labels=None):
    """A text table: each computed row beside the printed row, differing cells starred.

    Parameters
    ----------
    computed, printed : (n, m) array_like
    decimals : int, optional
        Digits shown for both (the printed precision).
    labels : sequence of n str, optional
        Row labels (default ``row 1`` .. ``row n``, counted from 1 as the course's prose does).

    Returns
    -------
    table : str
        Header ``computed | article``, one line per row, and a last line counting the
        starred cells.

    Examples
    --------
    >>> print(side_by_side([[1.30, 0.78]], [[1.30, 1.78]]))
            computed   |  article
    row 1   1.30  0.78 |  1.30  1.78*
    1 of 2 printed cells differ (* marks them)
    """
    computed = as_float_array(computed, "computed", min_ndim=2)
    printed = as_float_array(printed, "printed", min_ndim=2)
    differs = differing_cells(computed, printed, decimals)
    n, m = computed.shape[-2:]
    labels = [f"row {i + 1}" for i in range(n)] if labels is None else list(labels)
    if len(labels) != n:
        raise ValueError(f"labels must have {n} entries (one per row), got {len(labels)}")
    pad = max(len(label) for label in labels)
    width = decimals + 4

    def cells(row, marks=None):
        return "".join(f"{x:{width}.{decimals}f}" + ("*" if marks is not None and marks[j] else
                                                     " " if marks is not None else "")
                       for j, x in enumerate(row))

    left = width * m
    lines = [f"{'':{pad}} {'computed':^{left}} | {'article':^{left}}".rstrip()]
    for i in range(n):
        lines.append(f"{labels[i]:{pad}} {cells(computed[i])} | {cells(printed[i], differs[i])}"
                     .rstrip())
    lines.append(f"{int(differs.sum())} of {differs.size} printed cells differ (* marks them)")
    return "\n".join(lines)
