"""The full lock: requirements.lock pins every package, with hashes, and everything installs it.

requirements.txt is the input (the packages the course uses directly); ``make lock``
(``uv pip compile --universal --generate-hashes``) turns it into requirements.lock. These
tests check that the two agree, that every locked package carries hashes, that make setup,
Binder and CI install from the lock, and that the environment the tests run in is the lock.
"""

import re
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
# name, [extras] (kept: pip before 23.3 needs them, see the Makefile's lock), version, marker
ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[\w,.-]+\])?==([^\s;\\]+)\s*"
                   r"(?:;\s*([^\\]+?))?\s*\\?$")


def read_lock(path=ROOT / "requirements.lock"):
    """{name: [(version, marker or None, [hashes])]} from a hashed requirements file."""
    entries, current = {}, None
    for line in path.read_text(encoding="utf-8").splitlines():
        match = ENTRY.match(line)
        if match:
            name, version, marker = match.groups()
            current = (version, marker, [])
            entries.setdefault(canonicalize_name(name), []).append(current)
        elif line.strip().startswith("--hash=") and current is not None:
            current[2].append(line.strip().split("=", 1)[1].rstrip(" \\"))
        elif line.strip() and not line.lstrip().startswith("#"):
            pytest.fail(f"requirements.lock: unexpected line {line!r}")
    return entries


def read_pins(path=ROOT / "requirements.txt"):
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


LOCK = read_lock()


def test_the_lock_holds_every_package_with_hashes():
    assert len(LOCK) > 100, len(LOCK)
    for name, versions in LOCK.items():
        for version, _, hashes in versions:
            assert hashes and all(h.startswith("sha256:") and len(h) == 71 for h in hashes), (
                name, version)


def test_the_lock_agrees_with_requirements_txt():
    pins = read_pins()
    assert pins
    stale = [f"{name}=={version}" for name, version in pins.items()
             if version not in [v for v, _, _ in LOCK.get(name, [])]]
    assert not stale, f"requirements.txt pins {stale} but the lock does not: run `make lock`"
    assert "torch" not in LOCK


def test_setup_binder_and_ci_install_from_the_lock():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^UV_VERSION := \d+\.\d+\.\d+$", makefile, re.M)
    assert "install --require-hashes -r $(LOCK)" in makefile
    assert re.search(r"^LOCK := requirements\.lock$", makefile, re.M)
    assert "pip compile requirements.txt --universal --python-version 3.11 --generate-hashes" in (
        makefile)
    assert "--no-strip-extras" in makefile
    assert "-r ../requirements.lock" in (ROOT / "binder" / "requirements.txt").read_text()
    assert "make setup" in (ROOT / ".ci" / "run").read_text()


def applies(marker):
    return marker is None or Marker(marker).evaluate()


def test_the_environment_is_the_lock():
    wrong = []
    for name, versions in LOCK.items():
        wanted = [v for v, marker, _ in versions if applies(marker)]
        if not wanted:
            continue
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed not in wanted:
            wrong.append(f"{name}: {installed} installed, the lock says {wanted[0]}")
    assert not wrong, ("the environment differs from requirements.lock (`make setup` "
                       "installs it):\n" + "\n".join(wrong))
