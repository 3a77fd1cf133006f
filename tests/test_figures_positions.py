"""The position-similarity figure draws the arrays it is given, and names bad input."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attn_core.figures.positions import position_similarity  # noqa: E402


def test_draws_the_first_positions_and_the_offset_means():
    g = np.random.default_rng(7)
    sim = np.corrcoef(g.standard_normal((80, 10)))
    means = g.random(30)
    art = position_similarity(sim, means, shown=40)
    np.testing.assert_array_equal(art.heatmap.image.get_array(), sim[:40, :40])
    np.testing.assert_array_equal(art.line.get_ydata(), means)
    np.testing.assert_array_equal(art.line.get_xdata(), np.arange(30))
    assert "40" in art.heatmap.ax.get_title()
    plt.close(art.fig)


def test_shown_is_capped_and_bad_input_is_named():
    sim = np.eye(5)
    art = position_similarity(sim, [1.0, 0.5], shown=64)
    assert art.heatmap.image.get_array().shape == (5, 5)
    plt.close(art.fig)
    with pytest.raises(ValueError, match="square"):
        position_similarity(np.ones((3, 4)), [1.0])
    with pytest.raises(ValueError, match="shown must be an int >= 2"):
        position_similarity(sim, [1.0], shown=1)
    with pytest.raises(ValueError, match="by_offset must be 1-D"):
        position_similarity(sim, np.ones((2, 2)))
