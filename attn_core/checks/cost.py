"""Exercise checks for notebook 09, the cost of attention.

Each expected answer is computed here from the exercise's inputs with attn_core's maths
(never typed in); a wrong answer gets a hint that points the way without giving it.
"""

import numpy as np

from ..attention import scores
from ..cost import score_matrix_cells
from ..flash import flash_attention_steps
from ._base import (
    check_array,
    check_number,
    is_unanswered,
    not_yet,
    progressive,
    read_number,
    unanswered,
)

__all__ = ["check_cells", "check_relative_cost", "check_context_budget", "check_running_max"]


@progressive
def check_cells(answer, n=4096, h=16):
    """Exercise: score-matrix cells of one layer with ``h`` heads on ``n`` tokens."""
    hint = ("Each head builds its own score matrix, with one cell for every (query, key) "
            "pair of the n tokens.")
    got, feedback = read_number(answer, hint, "a single whole number")
    if feedback is not None:
        return feedback
    if h > 1 and got == score_matrix_cells(n):
        return not_yet(f"that is one head's matrix; there are {h} heads.", hint)
    if got in (n * h, n * n * n):
        return not_yet("a score matrix is n rows by n columns.", hint)
    return check_number(answer, score_matrix_cells(n, h), hint=hint, atol=0.5,
                        why="h matrices of n x n cells each.")


@progressive
def check_relative_cost(answer, n_long=8192, n_short=2048):
    """Exercise: how many times more score-matrix work ``n_long`` tokens take than ``n_short``."""
    hint = (f"Compare the cells of the two score matrices; {n_long} tokens is "
            f"{n_long // n_short if n_long % n_short == 0 else n_long / n_short} times as many "
            "tokens, and the cells grow with the square of the length.")
    expected = score_matrix_cells(n_long) / score_matrix_cells(n_short)
    got, feedback = read_number(answer, hint, "a single number")
    if feedback is not None:
        return feedback
    if np.isclose(got, n_long / n_short):
        return not_yet("that is the ratio of the lengths, a linear cost.", hint)
    if np.isclose(got, 1 / expected):
        return not_yet("that ratio is upside down.", hint)
    return check_number(answer, expected, hint=hint, atol=1e-9,
                        why="The cost grows with the square of the length.")


@progressive
def check_context_budget(answer, n=4096, h_from=16, h_to=4):
    """Exercise: the longest context whose score matrices fit where ``n`` tokens at ``h_from`` did.

    The score matrices of one layer hold ``h * n**2`` cells; with ``h_to`` heads instead of
    ``h_from``, the same number of cells allows ``n * sqrt(h_from / h_to)`` tokens.
    """
    budget = score_matrix_cells(n, h_from)
    expected = float(np.sqrt(budget / h_to))
    hint = (f"the budget is the cells of {h_from} score matrices of {n} x {n}; write the cells "
            f"of {h_to} matrices of n x n and solve for n (cells grow with n squared).")
    got, feedback = read_number(answer, hint, "a single whole number of tokens")
    if feedback is not None:
        return feedback
    if np.isclose(got, n * h_from / h_to):
        return not_yet("that scales the length like the heads, as if cells grew linearly "
                       "with n.", hint)
    if np.isclose(got, n * h_to / h_from) or np.isclose(got, n * np.sqrt(h_to / h_from)):
        return not_yet("fewer heads free memory, so the context can grow, not shrink. "
                       "", hint)
    return check_number(answer, expected, hint=hint, atol=0.5,
                        why="The cells grow with n squared: dividing the heads by r multiplies "
                            "the length only by sqrt(r).")


@progressive
def check_running_max(answer, q, k, v, block_size, step):
    """Exercise: the running max ``m`` of the tile's query rows after tile number ``step``.

    Tiles are numbered from 1 (tile 1 is the first), in the order of
    :func:`attn_core.flash_attention_steps`; the hint counts rows and columns from 1 too.
    """
    steps = flash_attention_steps(q, k, v, block_size=block_size)
    if (isinstance(step, bool) or not isinstance(step, (int, np.integer))
            or not 1 <= step <= len(steps)):
        raise ValueError(f"step must be a tile number from 1 to {len(steps)}, got {step!r}")
    tile = steps[step - 1]
    rows = tile.rows
    hint = (f"Tile {step} covers query rows {rows.start + 1} to {rows.stop} and key columns "
            f"{tile.cols.start + 1} to {tile.cols.stop} (counted from 1); m is the largest scaled "
            "score each of those rows has met in this tile and every earlier tile of the same "
            "rows.")
    if is_unanswered(answer):
        return unanswered(hint)
    expected = tile.running_max[..., rows]
    try:
        got = np.asarray(answer, dtype=float)
    except (TypeError, ValueError):
        got = None
    if got is not None and got.shape == expected.shape:
        only_tile = tile.tile_scores.max(axis=-1)
        unscaled = scores(q, k, scale=1.0)[..., rows, :tile.cols.stop].max(axis=-1)
        if not np.allclose(only_tile, expected) and np.allclose(got, only_tile, atol=1e-2):
            return not_yet("that is the max of this tile alone; m carries over.", hint)
        full_row = scores(q, k)[..., rows, :].max(axis=-1)
        if not np.allclose(full_row, expected) and np.allclose(got, full_row, atol=1e-2):
            return not_yet(f"that is the maximum of the whole rows, keys the loop has not seen "
                           f"yet included: after tile {step}, m covers only the key columns up "
                           f"to {tile.cols.stop}.", hint)
        if not np.allclose(unscaled, expected) and np.allclose(got, unscaled, atol=1e-2):
            return not_yet("those are unscaled dot products; divide by sqrt(d_k).", hint)
        if step < len(steps):
            nxt = steps[step]  # the tile after: what numpy's index ``step`` gives
            other = nxt.running_max[..., nxt.rows]
            if (other.shape == got.shape and not np.allclose(other, expected)
                    and np.allclose(got, other, atol=1e-2)):
                return not_yet("that is the tile after it: tiles are counted from 1 here.", hint)
    return check_array(answer, expected, hint=hint,
                       why="m is the max over every key column seen so far for each row.")
