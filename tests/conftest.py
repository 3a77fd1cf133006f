"""Shared pytest setup for the course's tests.

* Unit tests draw with the non-interactive Agg backend (no window ever opens). The
  notebooks say ``%matplotlib inline`` themselves, so nbval runs are not affected.
* PyTorch is optional. A test that needs it either takes the ``requires_torch`` fixture
  (which returns the ``torch`` module) or is marked ``@pytest.mark.torch``. Without torch
  such a test is skipped with a reason, except under CI (environment ``CI=true``), where a
  missing torch is an error: CI installs torch, so the cross-checks must really run there.
"""

import importlib
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Before anything imports matplotlib (pytest loads this file before collecting attn_core's
# doctests when run from the repo root).
os.environ["MPLBACKEND"] = "Agg"
if "matplotlib" in sys.modules:  # imported early by some plugin: switch it now
    sys.modules["matplotlib"].use("Agg")

# Hypothesis times every example (a 200 ms deadline) and warns about slow data generation: on
# a busy machine both fail tests for the clock's sake, not the code's (issue 32). The course's
# property tests run without either, everywhere (a test's own @settings keeps the rest).
settings.register_profile("course", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("course")

# pytester lets tests/test_environment.py run pytest on a tiny example to check the
# torch gate below.
pytest_plugins = ["pytester"]

TORCH_PIN = "torch==2.13.0"


def in_ci():
    """True when running under CI (``CI=true``, as CI systems set it)."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def load_module(name, path):
    """The Python file ``path`` (a tool or classroom script, not a package) as module ``name``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def import_optional(name, pins, purpose):
    """Return module ``name``, or skip the test (locally) / fail it (under CI).

    ``pins`` is what to install (``"torch==2.13.0"``); ``purpose`` says what CI runs with it.
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if in_ci():
            pytest.fail(
                f"{name} is not installed but CI=true: CI must run {purpose} "
                f"(.ci/run installs {pins}); import error: {exc}",
                pytrace=False,
            )
        pytest.skip(f"{name} is not installed (optional; `pip install {pins}` to run this)")


def import_torch():
    """Return the ``torch`` module, or skip the test (locally) / fail it (under CI)."""
    return import_optional("torch", TORCH_PIN, "the PyTorch cross-checks")


@pytest.fixture
def requires_torch():
    """The ``torch`` module; skips the test without torch, fails it under CI=true."""
    return import_torch()


# --- transformers gate (added for tests/test_pretrained_crosscheck.py) ----------------------
# The cross-check of the numpy BERT encoder against Hugging Face's BertModel needs torch and
# transformers. Like torch, transformers is for the tests only (.ci/run installs it): without
# it the test is skipped with the pin, under CI=true it fails.

TRANSFORMERS_PIN = "transformers==5.24.0"


def import_transformers():
    """Return the ``transformers`` module (torch too is needed), or skip (locally) / fail (CI)."""
    import_torch()
    return import_optional("transformers", f"{TORCH_PIN} {TRANSFORMERS_PIN}",
                           "the cross-check against Hugging Face's BertModel")


@pytest.fixture(scope="session")
def requires_transformers():
    """The ``transformers`` module; skips without it (or torch), fails under CI=true.

    Session-scoped (unlike requires_torch) so that module-scoped fixtures, which load the
    model once, can depend on it.
    """
    return import_transformers()


def pytest_configure(config):
    # The test processes run on the learner's BLAS threads too (attn_core.threads): with
    # pytest-xdist's workers on both cores, a second BLAS thread per worker only waits for a
    # core the other worker holds (tests that compare thread counts say so themselves).
    from attn_core.threads import blas_threads

    config._course_blas_limit = blas_threads()
    # nbval opens the sanitize file relative to the current directory; make the path in
    # pyproject.toml work from any directory by resolving it against the repo root.
    path = getattr(config.option, "nbval_sanitize_with", None)
    if path and not os.path.isabs(path) and not os.path.exists(path):
        candidate = Path(config.rootpath, path)
        if candidate.exists():
            config.option.nbval_sanitize_with = str(candidate)


#: The longest test files, longest first. pytest-xdist (--dist loadfile) hands files to its
#: workers in collection order, a batch to each at the start, and never moves a file once
#: handed out: a long file collected late makes one worker finish long after the other. So
#: these come first, one to each worker, and the many short files fill in behind them.
LONGEST_FIRST = ("test_grading.py", "test_browser.py", "test_classroom.py",
                 "test_static_html.py", "test_learner_copy.py", "test_pretrained_crosscheck.py",
                 "test_binder.py", "test_scaling_table.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files stay whole
    # A test that uses the fixture counts as a torch test, so `-m "not torch"` leaves it out.
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "requires_torch" in names or "requires_transformers" in names:
            item.add_marker(pytest.mark.torch)


def pytest_runtest_setup(item):
    if item.get_closest_marker("torch") is not None:
        import_torch()


# --- browser gate (added for tests/test_browser.py and tests/test_static_html.py) ---------
# The browser tests drive Debian's Chromium with Playwright for Python. Without either, they
# are skipped with the reason, except under CI=true, where a missing browser is a failure:
# .ci/run installs both (`apt-get install chromium`, `make test-extras`).

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# Headless Debian Chromium as root, with nothing that calls home.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]
# Screenshots for a person to look at (artifacts/ is gitignored).
SCREENSHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "screenshots"


def browser_or_skip():
    """Return the Chromium path, or skip the test (locally) / fail it (under CI)."""
    from importlib.util import find_spec

    missing = []
    if find_spec("playwright") is None:
        missing.append("Playwright for Python (`make test-extras`)")
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        missing.append(f"Chromium at {CHROMIUM} (`apt-get install chromium`, or set CHROMIUM)")
    if missing:
        reason = "browser tests need " + " and ".join(missing)
        if in_ci():
            pytest.fail(f"{reason}, but CI=true: .ci/run must install them", pytrace=False)
        pytest.skip(reason)
    return CHROMIUM


@pytest.fixture(scope="session")
def requires_browser():
    """The Chromium executable; skips without Playwright/Chromium, fails under CI=true."""
    return browser_or_skip()


@pytest.fixture(scope="session")
def browser(requires_browser):
    """ONE headless Chromium (Playwright) for the whole session, shared by the browser tests."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=requires_browser, args=CHROMIUM_ARGS,
                                     timeout=120_000)
        yield chromium
        chromium.close()



@pytest.fixture(autouse=True)
def _close_figures():
    """Close every pyplot figure a test left open (nothing when pyplot was never imported):
    the figures of one xdist worker's tests otherwise add up, and matplotlib warns from
    whichever test opens the 21st."""
    yield
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None and pyplot.get_fignums():  # close("all") also runs gc.collect
        pyplot.close("all")


@pytest.fixture(autouse=True)
def _fresh_exercise_tries():
    """Every test starts as a new kernel does: no exercise has been tried yet (the checks'
    progressive hints count wrong tries per check, see attn_core.checks._base.progressive)."""
    from attn_core.checks._base import reset_tries

    reset_tries()
    yield


# --- a hint is words, never code or a formula (the rule of attn_core/checks/_base.py) --------

@pytest.fixture(autouse=True)
def _hints_are_words(request, monkeypatch):
    """Every feedback a check gives to a wrong or missing answer in the check tests
    (tests/test_checks_*.py) is held to the rule: the test fails on code or a formula in it.
    test_checks_feedback.py builds Feedback by hand to test its display, and
    test_checks_misconceptions.py applies the same rule in a test of its own (its table and
    the stored exercise outputs), so both are left out."""
    name = request.node.path.name
    if not name.startswith("test_checks_") or name in ("test_checks_feedback.py",
                                                         "test_checks_misconceptions.py"):
        yield
        return
    from attn_core.checks import _base

    made, init = [], _base.Feedback.__init__

    def record(self, correct, message, more=""):
        init(self, correct, message, more)
        if not correct:
            made.extend((message, more))

    monkeypatch.setattr(_base.Feedback, "__init__", record)
    yield
    coded = sorted({(found, text) for text in made if (found := _base.code_or_formula(text))})
    if coded:
        pytest.fail("a check's feedback holds code or a formula (a hint is words): "
                    + "; ".join(f"{found!r} in {text!r}" for found, text in coded),
                    pytrace=False)
