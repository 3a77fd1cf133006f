"""Sections of benchmarks/RESULTS.md that belong to one benchmark each (benchmark helpers only).

bench_attention.py writes the file from its top; every other benchmark owns one block between
``<!-- NAME:start -->`` and ``<!-- NAME:end -->``, which it replaces (or appends), and which
bench_attention.py carries over when it rewrites the file.
"""

import re


def _pattern(name=r"[\w-]+"):
    return re.compile(rf"<!-- ({name}):start -->.*?<!-- \1:end -->", re.S)


def write_block(path, name, lines):
    """Put ``lines`` into ``path`` as the block ``name``, replacing an older one."""
    block = f"<!-- {name}:start -->\n" + "\n".join(lines).strip("\n") + f"\n<!-- {name}:end -->"
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    found = _pattern(re.escape(name)).search(text)
    if found:
        text = text[:found.start()] + block + text[found.end():]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def kept_blocks(path):
    """Every benchmark's block in ``path``, each on its own lines, for a rewrite to keep."""
    if not path.exists():
        return ""
    return "".join(f"\n{m.group(0)}\n" for m in _pattern().finditer(path.read_text()))
