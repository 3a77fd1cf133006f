"""The package's layout is its architecture: these tests keep it so.

* maths modules at the top of attn_core (pure numpy), then ``nn`` (the transformer's
  layers and the tiny GPT: the maths only), then ``training`` (notebook 12's one-head model:
  the maths and nn's optimisers; a top-level module, but a layer of its own, so that
  nothing below it imports it), then four subpackages that import only downwards:
  ``model`` (the maths and nn's layer norm and GELU), ``figures`` (nothing of the maths:
  they draw arrays they are given), ``explorers`` (the maths, nn, the model and the public
  figures), ``checks`` (the maths, nn and the model);
* no module above about 400 lines;
* each subpackage's ``__init__`` re-exports what its modules offer.

The source is read with :mod:`ast`, not imported, so a rule is checked even for a module
that no test imports.
"""

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import attn_core

PACKAGE = Path(attn_core.__file__).parent
MODULES = sorted(PACKAGE.rglob("*.py"))
SUBPACKAGES = ("checks", "explorers", "figures", "model", "nn")
#: Top-level modules that form a layer of their own, above ``nn``: module -> layer (the toy
#: model's training, and the experiment stored from it).
UPPER = {"training": "training", "scaling_table": "training"}
MATHS = {path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"} - set(UPPER)
#: "No module above about 400 lines" (the developers' guide): a little slack for a
#: docstring, none for a second family of figures or a second explorer.
MAX_LINES = 420


def _name(path):
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


def _imports(path):
    """Absolute names of everything ``path`` imports (``attn_core.x.y`` for relative ones)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _name(path).split(".")
    if path.stem != "__init__":
        package = package[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[: len(package) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def _layer(path):
    parts = path.relative_to(PACKAGE).parts
    if len(parts) == 1:
        return UPPER.get(path.stem, "maths")
    return parts[0]


def _internal(imports):
    """The layers of attn_core a module imports from ("maths" for a top-level module)."""
    layers = set()
    for name in imports:
        parts = name.split(".")
        if parts[0] != "attn_core" or len(parts) == 1:
            continue
        if parts[1] in SUBPACKAGES:
            layers.add(parts[1])
        elif parts[1] in UPPER:
            layers.add(UPPER[parts[1]])
        elif parts[1] in MATHS:
            layers.add("maths" if parts[1] != "_validate" else "_validate")
    return layers


def test_every_module_is_found():
    names = {_name(p) for p in MODULES}
    assert {"attn_core.attention", "attn_core.model.encoder", "attn_core.figures.heatmaps",
            "attn_core.explorers.base", "attn_core.checks.recap", "attn_core.nn.gpt",
            "attn_core.nn.block", "attn_core.training"} <= names


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_module_is_longer_than_about_400_lines(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{_name(path)} has {lines} lines: split it by what it draws/does"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_imports_go_only_downwards(path):
    layer, imports = _layer(path), _imports(path)
    internal = _internal(imports) - {layer}
    allowed = {
        "maths": {"_validate"},
        "nn": {"maths", "_validate"},
        "training": {"maths", "_validate", "nn"},
        "model": {"maths", "_validate", "nn"},
        "figures": {"_validate"},  # figures draw what they are given: no maths
        "explorers": {"maths", "_validate", "nn", "training", "model", "figures"},
        "checks": {"maths", "_validate", "nn", "training", "model"},
    }[layer]
    assert internal <= allowed, f"{_name(path)} ({layer}) imports from {internal - allowed}"
    gui = {name for name in imports if name.split(".")[0] in ("matplotlib", "ipywidgets", "PIL")}
    if layer in ("maths", "nn", "training", "model", "checks"):
        assert not gui, f"{_name(path)} is pure numpy but imports {gui}"
    if layer == "figures":
        assert not any(name.startswith("ipywidgets") for name in imports), _name(path)


@pytest.mark.parametrize("path", [p for p in MODULES if _layer(p) in ("maths", "nn", "training",
                                                                           "model", "figures")],
                         ids=_name)
def test_maths_model_and_figures_never_print(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert not any(isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print"
                   for node in ast.walk(tree))


#: What the explorers share (the base class, the argument checks); every other module of
#: attn_core/explorers is one explorer.
EXPLORER_SUPPORT = ("__init__", "base", "arguments", "colors", "notes", "tables", "png", "clock",
                    "frames")
EXPLORERS = sorted(p for p in (PACKAGE / "explorers").glob("*.py")
                   if p.stem not in EXPLORER_SUPPORT)


@pytest.mark.parametrize("path", EXPLORERS, ids=_name)
def test_explorers_use_no_private_figure_helpers(path):
    """An explorer draws with the public figures only (``figures.x``, never
    ``figures._x`` nor ``from ..figures.m import _x``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    used = {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and getattr(node.value, "id", None) == "figures"
            and node.attr.startswith("_")}
    used |= {alias.name for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) and "figures" in (node.module or "")
             for alias in node.names if alias.name.startswith("_")}
    assert used == set()


@pytest.mark.parametrize("path", EXPLORERS, ids=_name)
def test_every_explorer_module_is_re_exported(path):
    explorers = importlib.import_module("attn_core.explorers")
    module = importlib.import_module(f"attn_core.explorers.{path.stem}")
    factories = [name for name in module.__all__ if name.endswith(("_explorer", "_lab"))]
    assert factories, f"{_name(path)} defines no factory"
    for name in factories:
        assert name in explorers.__all__
        assert getattr(explorers, name) is getattr(module, name)


def test_figures_re_export_every_module():
    figures = importlib.import_module("attn_core.figures")
    for info in pkgutil.iter_modules(figures.__path__):
        module = importlib.import_module(f"attn_core.figures.{info.name}")
        for name in module.__all__:
            assert getattr(figures, name) is getattr(module, name), (info.name, name)
            assert name in figures.__all__


def test_importing_attn_core_loads_only_the_maths():
    """``import attn_core`` gives the maths: no figure, explorer, model or nn module (and so
    no matplotlib, ipywidgets or scipy) until one is imported by name."""
    code = ("import sys, attn_core; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('matplotlib', 'ipywidgets', 'scipy') or m.startswith(('attn_core.figures', "
            "'attn_core.explorers', 'attn_core.model', 'attn_core.checks', 'attn_core.nn', "
            "'attn_core.training'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=PACKAGE.parent, timeout=120)
    assert out.stdout.strip() == "[]"


def test_one_implementation_of_each_layer():
    """The encoder, notebook 12's model and the GPT share one layer norm, one GELU (per form)
    and one optimiser: nothing outside ``nn`` defines them (the source says ``def`` or
    ``class`` of these names only in attn_core/nn)."""
    shared = {"layer_norm", "layer_norm_backward", "gelu", "gelu_backward", "gelu_erf",
              "log_softmax", "Adam", "AdamW", "SGD", "clip_grad_norm"}
    for path in MODULES:
        if _layer(path) == "nn":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {node.name for node in ast.walk(tree)
                   if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        assert not defined & (shared - {"layer_norm"}), f"{_name(path)} defines {defined & shared}"
        if "layer_norm" in defined:  # model.layers: nn's layer norm with BERT's default eps
            source = ast.get_source_segment(path.read_text(encoding="utf-8"), next(
                node for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef) and node.name == "layer_norm"))
            assert "return _layer_norm(" in source and "mean(" not in source, _name(path)


def test_nn_is_re_exported():
    nn = importlib.import_module("attn_core.nn")
    for info in pkgutil.iter_modules(nn.__path__):
        module = importlib.import_module(f"attn_core.nn.{info.name}")
        for name in getattr(module, "__all__", ()):
            assert getattr(nn, name) is getattr(module, name), (info.name, name)
            assert name in nn.__all__, (info.name, name)
