"""Regenerate ``attn_core/data/corpus.txt``, the tiny GPT's training text (issue 21).

The text is the English prose of Python's own documentation (the tutorial, the FAQ and the
HOWTOs), as Debian ships its reStructuredText sources in the ``python3.11-doc`` package
(``/usr/share/doc/python3.11/html/_sources``). Licence: the PSF License Agreement, which
allows redistribution of derivative works provided the agreement and PSF's copyright notice
are kept: they are in ``attn_core/data/LICENSE-corpus``, which this script also writes.

Extraction, deterministic (the same package version gives the same bytes; the SHA-256 is
printed and recorded in ``attn_core/data/README.md``):

1. the files of ``SOURCES`` in that order (sorted names within each folder, index pages
   left out);
2. reStructuredText markup removed: comments and directives (``.. note::`` etc.) with their
   indented bodies, literal blocks after ``::``, doctest blocks (``>>>``), tables, section
   underlines and overlines, field lists; inline roles ``:func:`x``` -> ``x``,
   ``:ref:`text <target>``` -> ``text``, ````code```` -> ``code``, ```text <url>`_`` ->
   ``text``, ``*emph*`` / ``**strong**`` -> plain; every backslash removed (so the
   escape ``'\\n'`` reads ``'n'``: a known blemish of so simple a stripper);
3. each remaining paragraph re-wrapped to 72 columns (``textwrap.fill``), paragraphs
   separated by one blank line;
4. characters: typographic quotes, dashes, ellipses and non-breaking spaces mapped to ASCII
   (``MAP``); then every character outside printable ASCII, and every character that occurs
   fewer than ``MIN_COUNT`` times in the whole text, is dropped (their number is printed).

Run: ``python tools/make_corpus.py`` (add ``--check`` to compare with the stored file).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = Path("/usr/share/doc/python3.11/html/_sources")
OUT = ROOT / "attn_core" / "data" / "corpus.txt"
LICENSE_OUT = ROOT / "attn_core" / "data" / "LICENSE-corpus"
SOURCES = ("tutorial", "faq", "howto")
#: HOWTOs that are mostly C code, tables or command lines, left out for readable prose.
SKIP = {"index", "clinic", "cporting", "instrumentation", "isolating-extensions",
        "logging-cookbook", "curses", "argparse"}
WIDTH = 72
MIN_COUNT = 20
MAP = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-",
       "\u2014": "--", "\u2026": "...", "\u00a0": " ", "\t": " ", "\u2212": "-"}

_ROLE_TARGET = re.compile(r":[\w:.+-]+:`([^`<]*?)\s*<[^`>]*>`")  # :ref:`text <target>`
_ROLE = re.compile(r":[\w:.+-]+:`!?~?([^`]*)`")  # :func:`~a.b` -> a.b (tilde dropped)
_LINK = re.compile(r"`([^`<]*?)\s*<[^`>]*>`__?")  # `text <url>`_
_LINK_REF = re.compile(r"`([^`]+)`__?")  # `text`_
_LITERAL = re.compile(r"``(.+?)``")
_STRONG = re.compile(r"\*\*(\S(?:.*?\S)?)\*\*")
_EMPH = re.compile(r"(?<![\w*])\*(\S(?:.*?\S)?)\*(?![\w*])")
_BARE_REF = re.compile(r"\b(\w+)_\b(?=[\s.,;:)]|$)")  # word_ (a hyperlink reference)
_SUBST = re.compile(r"\|[\w-]+\|_?")
_FOOTNOTE = re.compile(r"\s*\[#?\w*\]_")
_ADORNMENT = re.compile(r"^([=\-~^*\"'`#+.:_])\1{2,}\s*$")


def _indent(line):
    return len(line) - len(line.lstrip(" "))


def paragraphs(rst):
    """The prose paragraphs of one reStructuredText file, markup blocks removed."""
    lines = rst.expandtabs(8).splitlines()
    out, i, para = [], 0, []
    skip_deeper_than = None  # drop lines indented more than this (directive / literal body)

    def flush():
        if para:
            out.append(para.copy())
            para.clear()

    while i < len(lines):
        line = lines[i].rstrip()
        i += 1
        if skip_deeper_than is not None:
            if not line.strip() or _indent(line) > skip_deeper_than:
                continue
            skip_deeper_than = None
        if not line.strip():
            flush()
            continue
        stripped = line.strip()
        if stripped.startswith(".. ") or stripped == "..":
            flush()
            skip_deeper_than = _indent(line)
            continue
        if _ADORNMENT.match(stripped) or stripped.startswith(("+-", "+=", ">>>", "...", "$ ")):
            flush()
            if not _ADORNMENT.match(stripped):
                skip_deeper_than = _indent(line) - 1  # table / doctest: drop the block
            continue
        if re.match(r"^:[\w ]+:", stripped) and not re.match(r"^:[\w:.+-]+:`", stripped):
            continue  # field list (:Author: ...)
        if para and _indent(line) > _indent(para[0]) + 1 and not para[-1].endswith("::") \
                and not re.match(r"^\s*([-*+]|\d+\.|#\.)\s", para[0]):
            continue  # a definition body or block quote indented under prose: kept simple
        para.append(line)
        if stripped.endswith("::"):
            flush()
            skip_deeper_than = _indent(line)
    flush()
    return out


def clean_inline(text):
    """Inline reStructuredText markup replaced by its plain text."""
    text = text.replace("\\ ", "")
    text = _ROLE_TARGET.sub(r"\1", text)
    text = _ROLE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _LINK_REF.sub(r"\1", text)
    text = _LITERAL.sub(r"\1", text)
    text = _STRONG.sub(r"\1", text)
    text = _EMPH.sub(r"\1", text)
    text = _SUBST.sub("", text)
    text = _FOOTNOTE.sub("", text)
    text = _BARE_REF.sub(r"\1", text)
    text = text.replace("\\", "")
    if text.endswith("::"):
        text = text[:-2].rstrip() + ":"
    return text


def prose(rst):
    """One file's prose: cleaned paragraphs, each wrapped to ``WIDTH`` columns."""
    blocks = []
    for para in paragraphs(rst):
        text = clean_inline(" ".join(s.strip() for s in para))
        text = re.sub(r"\s+", " ", text).strip()
        if len(text) < 2 or text in {":"}:
            continue
        blocks.append(textwrap.fill(text, WIDTH, break_on_hyphens=False,
                                    break_long_words=False))
    return "\n\n".join(blocks)


def source_files(docs=DOCS):
    files = []
    for folder in SOURCES:
        for path in sorted((docs / folder).glob("*.rst.txt")):
            if path.name.removesuffix(".rst.txt") not in SKIP:
                files.append(path)
    return files


def normalise(text):
    """Typographic characters mapped to ASCII, then non-ASCII and rare characters dropped."""
    text = "".join(MAP.get(c, c) for c in text)
    ascii_ok = {chr(c) for c in range(32, 127)} | {"\n"}
    dropped = collections.Counter(c for c in text if c not in ascii_ok)
    text = "".join(c for c in text if c in ascii_ok)
    counts = collections.Counter(text)
    rare = {c for c, n in counts.items() if n < MIN_COUNT}
    dropped.update({c: counts[c] for c in rare})
    text = "".join(c for c in text if c not in rare)
    return text, dropped


def licence_text(docs=DOCS):
    """The PSF License Agreement as the documentation states it (license.rst.txt)."""
    rst = (docs / "license.rst.txt").read_text(encoding="utf-8")
    start = rst.index("PSF LICENSE AGREEMENT FOR PYTHON")
    body = rst[start:]
    body = body[body.index("parsed-literal::") + len("parsed-literal::"):]
    end = body.index("\nBEOPEN")
    lines = [ln[3:] if ln.startswith("   ") else ln for ln in body[:end].splitlines()]
    text = "\n".join(lines).strip().replace("|release|", "3.11").replace("|version|", "3.11")
    text = re.sub(r"\|[\w-]+\|", "", text)
    return ("The text in corpus.txt is derived from the documentation of Python 3.11\n"
            "(Debian package python3.11-doc), Copyright (c) 2001-2023 Python Software\n"
            "Foundation; All Rights Reserved. It is used under the PSF License Agreement:\n\n"
            + text + "\n")


def build(docs=DOCS):
    parts = [prose(p.read_text(encoding="utf-8")) for p in source_files(docs)]
    text, dropped = normalise("\n\n".join(p for p in parts if p) + "\n")
    return text, dropped


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the stored corpus")
    args = ap.parse_args(argv)
    if not DOCS.is_dir():
        sys.exit(f"{DOCS} not found: apt-get install python3-doc (Debian 12: python3.11-doc)")
    text, dropped = build()
    digest = hashlib.sha256(text.encode("ascii")).hexdigest()
    print(f"{len(text)} characters, {len(set(text))} distinct, sha256 {digest}")
    print(f"dropped {sum(dropped.values())} characters of {len(dropped)} kinds")
    if args.check:
        same = OUT.read_text(encoding="ascii") == text
        print("stored corpus is identical" if same else "stored corpus DIFFERS")
        return 0 if same else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="ascii", newline="\n")
    LICENSE_OUT.write_text(licence_text(), encoding="utf-8", newline="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
