"""pytest setup for every test of the repository, the doctests of attn_core included (the
tests' own setup is tests/conftest.py; fixtures there do not reach attn_core/'s doctests)."""

import numpy as np
import pytest

# Code run in-process by some fixtures (the static edition's build executes the notebooks' code,
# setup cells with np.set_printoptions included) changes numpy's global print options for the
# rest of the process. Under pytest-xdist the doctests of attn_core can run after such a
# fixture in the same worker and print differently. So every test starts from numpy's
# defaults (taken here, before any test ran) and gets back what it found at its end.
_NUMPY_PRINT_DEFAULTS = np.get_printoptions()


@pytest.fixture(autouse=True)
def _numpy_print_defaults():
    found = np.get_printoptions()
    np.set_printoptions(**_NUMPY_PRINT_DEFAULTS)
    yield
    np.set_printoptions(**found)
