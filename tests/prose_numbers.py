"""Every number in the notebooks' prose is printed by a code cell, cited, or structural.

The check reads every markdown cell of a notebook (and each of ``docs/teaching.md``'s "Notes on
the notebooks", against the notebook it is about) and reports each number that is not one of:

1. **printed** by a code cell of the same notebook (stream, ``text/plain``, ``text/markdown`` or
   ``text/html`` output; figures' ``<Figure size ...>`` reprs are not output), at the precision
   the sentence writes it (rules below). A measured number (a decimal, ratio, fraction,
   percentage, time, size, approximation or bound) must be printed by a cell the sentence can
   read: one above it, or one right after it before the next markdown cell (a sentence that
   introduces the output below). A count (a plain whole number or number word) may be printed
   anywhere in the notebook;
2. **cited**: a phrase listed for that notebook in ``tests/prose_exemptions.toml`` with what it
   is and its source (an entry may also say which printed number a vague phrase stands for:
   ``printed``, which must then be printed);
3. **structural**: see "What is not a claim" below.

Reading a sentence (the rules ``tests/test_prose_numbers.py`` tests)
--------------------------------------------------------------------
* A number written with *d* decimals matches a printed value *v* when ``|v - x| <= 0.5e-d``:
  "0.34" matches 0.3412, "0.3" matches 0.34, "0.34" does not match a printed 0.3. Printed
  numbers keep the precision they were printed at: a sentence cannot be more precise than the
  output it reads.
* "about", "roughly", "around", "nearly", "almost", "some", "approximately", "close to", "~",
  "≈" before a whole number with trailing zeros round it to its significant digits: "about
  5,000" matches 4,987 (4,500 to 5,500); "5,000 draws" means 5,000. Elsewhere "about" changes
  nothing: "about 2.7" matches 2.65 to 2.75, "about 128" 127.5 to 128.5.
* Units convert: a time in minutes or hours is also compared in seconds (and ms with s), so
  "about 2.7 minutes" matches 160.7 s; "9%" matches 0.0912 (and 9.12%); "4 MB" matches 4.0 (MB)
  or 4,000,000 or 4,194,304 (bytes, to the same relative precision); "135M" is 135,000,000.
* Ratios ("100 times less", "10x", "twice", "half", "a sixteenth") match a printed ratio or
  its reciprocal: "a sixteenth of the size" matches 16 or 0.0625, not a printed 14.22.
* Number words are numbers: two to twenty, thirty to ninety, hundred, thousand, million,
  billion, dozen; "twice as", "twice the", "double(s/d)" (a ratio of 2; "run it twice" is an
  instruction and is not read); "half"/"halve(s/d)" (0.5, written with one
  decimal: 0.45 to 0.55, so "half of the weight" fails beside 0.68); "two and a half" is 2.5
  (2.45 to 2.55). A unit fraction word ("a third", "a quarter", "a tenth", "a sixteenth", ...)
  matches *v* when 1/v rounds to its denominator ("a third": 0.286 to 0.4). "one" is not read
  (it is a pronoun as often as a number), nor "zero", "none", "no".
* A bound ("at least 0.5", "more than 100", "below 0.1", "0.5 or more") matches its number
  printed, or a printed value on the right side of it within a factor of two.
* Signs are not compared ("a loss 0.3 lower" reads a printed -0.3).
* A plain number (no "about", no unit, no ratio) that is a literal in a code cell of the
  notebook ("a sequence of 4 tokens" beside ``n = 4``, "at most 0.005 apart" beside
  ``gap <= 0.005``) is an input or a threshold the reader sees set: it passes. Percentages,
  ratios, times, sizes and approximations must be printed.
* **Vague quantifiers** that stand for a measured value ("a few percent", "nearly all",
  "almost all", "most of the/its/their/it/them", "the majority", "the bulk", "a handful") and
  **universal claims over measured sets** (a bound with "every", "all", "each", "always",
  "never", "no" or "from the ... on" near it: "a third or more ... from the fourth layer on"; "a
  different X in every Y") cannot be matched to one printed value: they fail unless the
  sentence is rendered by the code cell that computes it (a ``text/markdown`` output, which this
  check does not read as prose) or the phrase is exempted with the printed number it stands for.

What is not a claim (skipped)
-----------------------------
* Code: fenced blocks and inline code spans (numbers in code are code), HTML tags and their
  attributes, URLs and link targets (the link text is read), image sources.
* LaTeX math (``$...$``, ``$$...$$``): the formula's own constants (exponents, coefficients,
  indices, ``\\sqrt{d_k}``) are allowed; a number that is a *result* (written after ``=``,
  ``\\approx``, ``\\to``, ``<``, ``>``, ``\\le``, ``\\ge`` and not followed by an operator) is
  checked like prose.
* Structural numbers: after "notebook", "section", "exercise", "cell", "step", "layer",
  "head", "row", "column", "position", "token", "character", "seed", "issue", "part", "table",
  "figure", "equation", "query", "key", "version" and their plurals (with a list after them:
  "layers 11, 12 and 17"); an ordinal ("4th"); a notebook's number ("04", "08b", a link to a
  notebook); a year in a citation (1900-2099 after "(", "et al.", "&", a capitalised name, or
  before ")"); an arXiv id; a number that is part of a name (letters before it in the same word:
  GPT-2, Q4_1, float16, x86-64-v2, SmolLM2-135M, all-MiniLM-L6-v2, L4H2; or letters after it
  that are not a unit: 3D; a model's size written as in its name: 7B, 135M); a package version
  ("Python 3.11", "numpy 2.1"); list numbering; a
  heading's leading number; the generated navigation lines and course map (tools/nav.py).

What the check cannot see: whether a matched number is the right one (a sentence may quote a
printed number of another quantity), comparisons in words without a number ("larger", "falls"),
and universal claims without a bound or a vague word ("every head does X"). A reviewer reads
those; the check makes every number traceable.

Run ``python tests/prose_numbers.py [--exemptions FILE] notebooks/17-a-real-llm.ipynb
[docs/teaching.md]``: one line per unmatched number (notebook, cell index, the number, why) and
the sentence under it; exit status 1 if there is any.
"""

from __future__ import annotations

import json
import math
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TEACHING = ROOT / "docs" / "teaching.md"
EXEMPTIONS = Path(__file__).resolve().parent / "prose_exemptions.toml"
GENERATED_TAGS = {"nav", "course-map", "binder-link"}

# --- numbers and words -------------------------------------------------------------------------

NUMBER = re.compile(
    r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+−]?\d+)?(?![\d])"
    r"|(?<![\w])\.\d+")
SMALL = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
TENS = {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
        "ninety": 90}
SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "dozen": 12}
FRACTIONS = {"half": 2, "third": 3, "quarter": 4, "fourth": 4, "fifth": 5, "sixth": 6,
             "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10, "twelfth": 12,
             "sixteenth": 16, "twentieth": 20, "hundredth": 100, "thousandth": 1000}
_CARD = "|".join(sorted([w for w in SMALL if w not in ("zero", "one")] + list(TENS),
                        key=len, reverse=True))
_FRAC = "|".join(sorted(FRACTIONS, key=len, reverse=True))
WORD_NUMBER = re.compile(
    rf"\b(?:(?P<whole>{_CARD}|a|one) and a half\b"
    rf"|(?:(?P<fnum>a|one|{_CARD})[ -](?P<frac>{_FRAC})s?\b)"
    rf"|(?P<card>(?:{_CARD})(?:[ -](?:{_CARD}))?)"
    rf"(?:\s+(?P<scale>hundred|thousand|million|billion))?\b"
    rf"|(?:a\s+)?(?P<bare>hundred|thousand|million|billion|dozen)\b"
    rf"|(?P<twice>twice|double[sd]?|halve[d]?)\b"
    rf"|(?P<half>(?<!first )(?<!second )(?<!other )(?<!lower )(?<!upper )(?<!top )"
    rf"(?<!bottom )(?<!left )(?<!right )\bhalf\b(?= (?:of|the|as|its|their|a|an)\b)))",
    re.IGNORECASE)
APPROX = re.compile(r"(?:\babout|\broughly|\baround|\bnearly|\balmost|\bsome|\bapproximately"
                    r"|\bclose to|~|≈|\bof order|\bapprox\.)\s*$", re.IGNORECASE)
BOUND_BEFORE = re.compile(r"(?:\bat least|\bat most|\bmore than|\bless than|\bfewer than"
                          r"|\babove|\bbelow|\bup to|\bunder|>=?|<=?|≥|≤)\s*(?:about\s+)?$",
                          re.IGNORECASE)
BOUND_AFTER = re.compile(r"^\s*(?:or more|or less|or fewer|or above|or below|or higher"
                         r"|or lower|\+(?!\d))", re.IGNORECASE)
UNIVERSAL = re.compile(r"\b(?:every|all|each|always|never|no)\b|\bfrom the \w+(?: \w+)? on\b",
                       re.IGNORECASE)
VAGUE = re.compile(r"\b(?:a few percent|a few per ?cent|nearly all|almost all|virtually all"
                   r"|nearly every|almost every|almost none|hardly any"
                   r"|most of (?:the|its|their|it|them)"
                   r"|the majority|the bulk|a handful"
                   r"|a different \w+ (?:in|for|at) (?:every|each))\b", re.IGNORECASE)
UNIT_AFTER = re.compile(
    r"^\s*(?:(?P<pct>%|per ?cent\b|percent\b)"
    r"|(?P<times>(?:x\b|×)(?!\s*\d)|times\s+(?:less|more|fewer|larger|smaller|faster|slower"
    r"|cheaper|bigger|longer|shorter|higher|lower|as|the|that|its|their|what)\b|-fold\b|fold\b)"
    r"|(?P<unit>ms\b|milliseconds?\b|µs\b|s\b|sec\b|seconds?\b|min\b|minutes?\b|h\b|hours?\b"
    r"|KB\b|kB\b|MB\b|GB\b|KiB\b|MiB\b|GiB\b|bytes?\b)"
    r"|(?P<mult>k\b|K\b|M\b|B\b))")
STRUCTURAL_BEFORE = re.compile(
    r"\b(?:notebooks?|sections?|§|exercises?|cells?|steps?|layers?|heads?|rows?|columns?"
    r"|positions?|tokens?|characters?|seeds?|issues?|parts?|tables?|figures?|fig\.|equations?"
    r"|eq\.|queries|query|keys?|versions?|items?|chapters?|pages?|lines?|blocks?|dimensions?"
    r"|features?|index|indices|python|numpy|pytorch|torch|jupyterlab|transformers|gguf|nbformat"
    r"|v)\s*(?:[(#]\s*)?$",
    re.IGNORECASE)
LIST_ITEM_BEFORE = re.compile(r"\d+(?:\.\d+)?[a-z]?\s*(?:,\s*(?:and|or)?|and|or|to|-|–)\s*$")
YEAR_BEFORE = re.compile(r"(?:\(|et al\.?,?|&|\b[A-Z][\wà-ÿ]+\*?,?|\bin|\b\w+'s)\s*$")
# a number right after a capitalised word inside a sentence: a name or a citation's venue,
# volume or version ("Llama 2", "Python 3.11", "EMNLP 2023", "PMLR 119", "Neurocomputing 568")
NAME_BEFORE = re.compile(r"\b([A-Z][\w]*)\*?\s$")
NOT_NAMES = set("A An And As At After All Any Before Both But By Each Every For From Here How If "
                "In It Its No Of On Only Or Our Over So Some That The Then There These This Those "
                "To Under We What When Where Which While With Without You Your About Around Nearly "
                "Almost Roughly Just Up".split())
ARXIV = re.compile(r"\b\d{4}\.\d{4,5}(?:v\d+)?\b")
CODE_FENCE = re.compile(r"```.*?```|~~~.*?~~~", re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
HTML_TAG = re.compile(r"<[^>\n]+>")
LINK_TARGET = re.compile(r"\]\(([^)\s]*)(?:\s+\"[^\"]*\")?\)")
URL = re.compile(r"https?://\S+|\b[\w.-]+\.(?:pub|org|com|io|net|ai|dev)/\S*")
MATH = re.compile(r"\$\$.*?\$\$|(?<!\\)\$(?!\s)[^$\n]+?(?<![\s\\])\$", re.DOTALL)
MATH_RESULT_BEFORE = re.compile(r"(?:=|\\approx|\\simeq|\\to|\\rightarrow|<|>|\\le|\\ge|\\leq"
                                r"|\\geq|\\sim)\s*[-−+]?\s*$")
MATH_OPERATOR_AFTER = re.compile(r"^\s*(?:[-+*/^_{(\\A-Za-z]|\\cdot|\\times)")
SENTENCE_END = re.compile(r"(?<=[.!?:])\s+(?=[A-Z*(\[`$\"])|\n\s*\n|\n\s*[-*]\s|\n#")


@dataclass
class Claim:
    """One number read from prose: ``value`` (its magnitude) with tolerance ``tol``."""
    text: str
    start: int
    end: int
    value: float
    tol: float
    kind: str = "number"        # number, ratio, fraction, percent, time, bytes
    unit: str = ""
    approx: bool = False
    bound: bool = False
    whole_literal: bool = False  # a plain whole number (may be an input set in code)
    alt: list = field(default_factory=list)  # other (value, tol) readings ("32k": 32,768)


@dataclass
class Problem:
    notebook: str
    cell: int | str
    number: str
    why: str
    sentence: str

    def __str__(self):
        return f"{self.notebook} cell {self.cell}: {self.number!r}: {self.why}\n    {self.sentence}"


TIME_SECONDS = {"ms": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3, "µs": 1e-6, "s": 1,
                "sec": 1, "second": 1, "seconds": 1, "min": 60, "minute": 60, "minutes": 60,
                "h": 3600, "hour": 3600, "hours": 3600}
BYTE_SIZES = {"kb": (1e3, 1024), "kib": (1024,), "mb": (1e6, 2**20), "mib": (2**20,),
              "gb": (1e9, 2**30), "gib": (2**30,), "byte": (1,), "bytes": (1,), "b": (1,)}


@dataclass
class Printed:
    """What a notebook's code cells print and set."""
    values: list = field(default_factory=list)     # (value, tol) pairs, magnitude
    literals: set = field(default_factory=set)     # numeric literals in code cells' source


# --- reading prose -----------------------------------------------------------------------------

def _blank(text, pattern, group=0):
    """``text`` with each match of ``pattern`` (or its ``group``) replaced by spaces."""
    def repl(m):
        s, e = m.span(group)
        whole = m.group(0)
        a, b = s - m.start(), e - m.start()
        return whole[:a] + re.sub(r"[^\n]", " ", whole[a:b]) + whole[b:]
    return pattern.sub(repl, text)


def readable(text):
    """``text`` with code, HTML tags, URLs and link targets blanked (same length: positions
    keep their meaning), and the spans of math as a list of (start, end)."""
    text = _blank(text, CODE_FENCE)
    text = _blank(text, CODE_SPAN)
    text = _blank(text, LINK_TARGET, 1)
    text = _blank(text, URL)
    text = _blank(text, HTML_TAG)
    text = _blank(text, ARXIV)
    maths = [m.span() for m in MATH.finditer(text)]
    return text, maths


def sentence_at(text, pos):
    """The sentence of ``text`` around ``pos``, on one line."""
    starts = [m.end() for m in SENTENCE_END.finditer(text, 0, pos)]
    start = starts[-1] if starts else 0
    m = SENTENCE_END.search(text, pos)
    end = m.start() if m else len(text)
    return " ".join(text[start:end].split()), start, end


def _precision(token):
    """Decimals written in ``token`` (a number's text)."""
    mant = token.split("e")[0].split("E")[0]
    return len(mant.split(".")[1]) if "." in mant else 0


def _to_float(token):
    return float(token.replace(",", "").replace("−", "-"))


def _is_structural(text, start, end, token, line_start):
    before = text[max(0, start - 40):start]
    after = text[end:end + 12]
    # part of a name: letters before it in the same word (GPT-2, Q4_1, x86-64-v2, L4H2)
    word_before = re.search(r"[\w\-.]*$", text[max(0, start - 40):start]).group(0)
    if re.search(r"[A-Za-z]", word_before.rstrip(".")) and not word_before.endswith(" "):
        if not re.fullmatch(r"[-.]*", word_before):
            return "part of a name"
    nm = NAME_BEFORE.search(text[max(0, line_start, start - 30):start])
    if nm and nm.group(1) not in NOT_NAMES and not re.match(r"\s*(?:%|x\b|×|times)", after):
        return "part of a name"
    if re.match(r"[BM]\b", after):
        return "part of a name"  # a model's size, written as in its name: "7B", "135M"
    if re.match(r"(?:st|nd|rd|th)\b", after):
        return "an ordinal"
    if re.match(r"[ -](?:decimals?|digits?|significant|decimal places)\b", after):
        return "a precision"
    if re.match(r"\s*(?:January|February|March|April|May|June|July|August|September|October"
                r"|November|December)\b", after) or re.search(
                r"(?:January|February|March|April|May|June|July|August|September|October"
                r"|November|December)\s*$", before):
        return "a date"
    if re.search(r"(?:\*,|pp\.)\s*$", before) and re.match(r"\s*[–-]\s*\d", after) or \
            re.search(r"(?:\*,|pp\.)\s*\d+\s*[–-]\s*$", before):
        return "a citation's pages"
    if re.match(r"[A-Za-z]", after) and not UNIT_AFTER.match(after) and not re.match(
            r"e[-+]?\d", after):
        return "part of a name"
    # a notebook's number: 01 .. 18, 08b (written with its leading zero) or a link to one
    if re.fullmatch(r"\d\d", token) and (token.startswith("0") or re.match(r"b?\s*\]\(", after)
                                         or re.match(r"\s*·", after)):
        return "a notebook's number"
    if re.fullmatch(r"\d\d", token) and int(token) <= 19 and (
            re.search(r"\(\s*$", before) and re.match(r"b?\s*\)", after)
            or re.match(r"b?'s\b", after)):
        return "a notebook's number"
    if re.match(r"[\w\- ·]*\]\(\s*\d\d", after) or re.search(r"\[\s*$", before):
        return "a notebook's number"
    # list numbering and a heading's leading number
    line = text[line_start:start]
    if re.fullmatch(r"\s*", line) and re.match(r"[.)]\s", after):
        return "list numbering"
    if re.fullmatch(r"\s*#+\s*", line):
        return "a heading's number"
    # a year in a citation
    if "." not in token and "," not in token and 1900 <= int(token.split("e")[0] or 0) <= 2099 \
            and len(token) == 4 and (YEAR_BEFORE.search(before) or re.match(r"\s*\)", after)
                                     or re.match(r"\s*(?:paper|article|[A-Z]{2})", after)):
        return "a year"
    # after a structural word, possibly in a list ("layers 11, 12 and 17")
    k = start
    for _ in range(12):
        head = text[max(0, k - 40):k]
        if STRUCTURAL_BEFORE.search(head):
            return "an index"
        m = LIST_ITEM_BEFORE.search(head)
        if not m:
            break
        k -= len(m.group(0))
    return None


def _unit_claim(claim, after):
    m = UNIT_AFTER.match(after)
    if not m:
        return claim
    if m.group("pct"):
        claim.kind, claim.unit = "percent", "%"
    elif m.group("times"):
        claim.kind = "ratio"
    elif m.group("unit"):
        u = m.group("unit").lower()
        claim.unit = u
        claim.kind = "bytes" if "b" in u and u not in ("ms", "µs") else "time"
    elif m.group("mult"):
        f = {"k": 1e3, "m": 1e6, "b": 1e9}[m.group("mult").lower()]
        if f == 1e3:  # "32k tokens": 32,000 or 32,768
            claim.alt.append((claim.value * 1024, claim.tol * 1024))
        claim.value *= f
        claim.tol *= f
    claim.whole_literal = False
    return claim


def number_claims(text, maths=()):
    """Every number written in ``text`` (already :func:`readable`) that is a claim, as
    :class:`Claim` objects, and the structural ones skipped."""
    claims = []
    in_math = [False] * (len(text) + 1)
    for s, e in maths:
        for i in range(s, e):
            in_math[i] = True
    line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
    scaled = set()  # where a scale word follows a number ("135 million")
    for m in NUMBER.finditer(text):
        token = m.group(0)
        s, e = m.span()
        if in_math[s]:
            mspan = next(sp for sp in maths if sp[0] <= s < sp[1])
            before = text[mspan[0]:s]
            if not MATH_RESULT_BEFORE.search(before) or MATH_OPERATOR_AFTER.match(text[e:mspan[1]]):
                continue
        line_start = max(ls for ls in line_starts if ls <= s)
        if _is_structural(text, s, e, token, line_start):
            continue
        d = _precision(token)
        value = abs(_to_float(token))
        tol = 0.5 * 10.0 ** -d
        before = text[max(0, s - 30):s]
        claim = Claim(token, s, e, value, tol, whole_literal=(d == 0 and "e" not in token.lower()))
        if APPROX.search(before):
            claim.approx = True
            claim.whole_literal = False
            digits = token.replace(",", "").split(".")[0]
            if d == 0 and "e" not in token.lower() and len(digits) > 1:
                zeros = len(digits) - len(digits.rstrip("0"))
                claim.tol = 0.5 * 10.0 ** zeros
        if BOUND_BEFORE.search(before) or BOUND_AFTER.match(text[e:e + 12]):
            if value in (0.0, 1.0) and d == 0:
                continue  # the limits of a weight or a probability: "at most 1", "> 0"
            claim.bound = True
            claim.whole_literal = d == 0 and "e" not in token.lower() and not claim.approx
        sm = re.match(r"\s+(hundred|thousand|million|billion)\b", text[e:e + 12])
        if sm:
            f = SCALES[sm.group(1).lower()]
            claim.value, claim.tol, claim.whole_literal = value * f, tol * f, False
            claim.end = e + sm.end()
            scaled.add(e + sm.start(1))
        claims.append(_unit_claim(claim, text[claim.end:claim.end + 16]))
    for m in WORD_NUMBER.finditer(text):
        s, e = m.span()
        if in_math[s] or s in scaled:
            continue
        claim = _word_claim(m)
        if claim is None:
            continue
        before = text[max(0, s - 30):s]
        if APPROX.search(before):
            claim.approx = True
        if re.match(r"[ -](?:decimals?|digits?|significant|decimal places)\b", text[e:e + 20]):
            continue  # "two decimals", "a third decimal": a precision
        if BOUND_BEFORE.search(before) or BOUND_AFTER.match(text[e:e + 12]):
            claim.bound = True
        if claim.kind == "number":
            claim = _unit_claim(claim, text[e:e + 16])
        claims.append(claim)
    return sorted(claims, key=lambda c: c.start)


def _cardinal(words):
    parts = re.split(r"[ -]", words.lower())
    total = 0
    for p in parts:
        total += SMALL.get(p, TENS.get(p, 0))
    return total


def _word_claim(m):
    s, e = m.span()
    t = m.group(0)
    if m.group("whole"):
        w = m.group("whole").lower()
        base = 1 if w in ("a", "one") else _cardinal(w)
        return Claim(t, s, e, base + 0.5, 0.05, kind="number")
    if m.group("frac"):
        n = FRACTIONS[m.group("frac").lower()]
        k = m.group("fnum").lower()
        k = 1 if k in ("a", "one") else _cardinal(k)
        if n == 2:
            return Claim(t, s, e, k / 2, 0.05, kind="fraction")
        return Claim(t, s, e, k / n, 0.0, kind="fraction", unit=f"{k}/{n}")
    if m.group("card"):
        v = _cardinal(m.group("card"))
        if m.group("scale"):
            v *= SCALES[m.group("scale").lower()]
        return Claim(t, s, e, float(v), 0.5 * (SCALES[m.group("scale").lower()]
                                               if m.group("scale") else 1),
                     whole_literal=not m.group("scale"))
    if m.group("bare"):
        v = SCALES[m.group("bare").lower()]
        return Claim(t, s, e, float(v), 0.5 * v if v > 12 else 0.5)
    if m.group("twice"):
        w = m.group("twice").lower()
        if not re.match(r"\s+(?:as|the|that|its|their|what|more|less|larger|smaller|fewer|"
                        r"longer|shorter|faster|slower)\b", m.string[e:e + 10]) \
                and w in ("twice", "double"):
            return None  # a repetition ("run it twice"), an instruction, not a claim
        if w.startswith("halve"):
            return Claim(t, s, e, 0.5, 0.05, kind="ratio")
        return Claim(t, s, e, 2.0, 0.5 * 10 ** 0, kind="ratio")
    if m.group("half"):
        return Claim(t, s, e, 0.5, 0.05, kind="fraction")
    return None


# --- reading outputs ---------------------------------------------------------------------------

def _output_texts(cell):
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            yield "".join(out.get("text", ""))
            continue
        data = out.get("data", {})
        for mime in ("text/markdown", "text/html", "text/plain"):
            if mime in data:
                text = "".join(data[mime])
                if mime == "text/plain" and text.startswith("<Figure size"):
                    continue
                if mime == "text/html":
                    text = re.sub(r"<[^>]+>", " ", text)
                yield text
                if mime != "text/plain":
                    break


PRINTED_NUMBER = re.compile(r"(?<![\w.])[-−+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
                            r"(?:[eE][-+]?\d+)?|(?<![\w])[-−]?\.\d+")
RATIO_MARK = re.compile(r"\bratio\b|\btimes\b|\bfewer\b|\bless\b|\bmore\b|\bsmaller\b"
                        r"|\blarger\b|\bfaster\b|\bslower\b|\bcheaper\b|\bspeed-?up\b|\bfactor\b"
                        r"|\s/\s|\w/\w|×|\bx\b", re.IGNORECASE)
INLINE_RATIO = re.compile(r"\bratio\b|\bfactor\b|\bspeed-?up\b|\s/\s|\w\s?/\s?\w[^=:]*[=:]\s*$",
                          re.IGNORECASE)
PRINTED_UNIT = re.compile(r"^\s*(?P<u>%|ms\b|µs\b|s\b|sec\b|seconds?\b|min\b|minutes?\b|h\b"
                          r"|hours?\b|KB\b|kB\b|MB\b|GB\b|KiB\b|MiB\b|GiB\b|bytes?\b|B\b"
                          r"|x\b|×|times\b)")
HEADER_UNIT = re.compile(r"(?:\(|\[|\b)(?P<u>%|ms|µs|s|sec|seconds|min|minutes|KB|kB|MB|GB|KiB"
                         r"|MiB|GiB|bytes)(?:\)|\]|\b)")


def _unit_kind(u):
    u = u.lower()
    if u == "%":
        return "percent", "%"
    if u in ("x", "×", "times"):
        return "ratio", ""
    if u in TIME_SECONDS or u == "sec":
        return "time", "s" if u == "sec" else u
    return "bytes", "byte" if u in ("b", "bytes") else u


def _header_word(header, start, end):
    """The word (or words separated by single spaces) of ``header`` above columns
    ``start:end``: the one that overlaps them, else the one whose end is nearest."""
    words = [(m.start(), m.end(), m.group(0)) for m in re.finditer(r"\S+(?: \S+)*", header)]
    if not words:
        return ""
    over = [w for w in words if w[0] < end and start < w[1]]
    if over:
        return over[0][2]
    return min(words, key=lambda w: abs(w[1] - end))[2]


def _is_row(line, found):
    """A table row: no more words than numbers (units such as GFLOP count as words)."""
    words = re.findall(r"[A-Za-z_]{2,}", re.sub(r"\b\w*\d\w*\b", "", line))
    return len(found) >= 2 and len(words) <= len(found)


def _printed_in(text, values):
    header = None
    for line in text.splitlines():
        found = list(PRINTED_NUMBER.finditer(line))
        if not found:
            header = line if re.search(r"[A-Za-z]{2,}", line) else header
            continue
        row = _is_row(line, found)
        last = 0
        for m in found:
            tok = m.group(0).lstrip("+")
            v = abs(_to_float(tok))
            tol = 0.5 * 10.0 ** -_precision(tok)
            kind, unit = "number", ""
            um = PRINTED_UNIT.match(line[m.end():m.end() + 10])
            col = _header_word(header, *m.span()) if header and row else ""
            if um:
                kind, unit = _unit_kind(um.group("u"))
            elif INLINE_RATIO.search(line[last:m.start()]) or RATIO_MARK.search(col):
                kind = "ratio"
            else:
                hm = HEADER_UNIT.search(col)
                if hm:
                    kind, unit = _unit_kind(hm.group("u"))
            values.append((v, tol, kind, unit))
            sm = re.match(r"([kKMB])(?![A-Za-z])", line[m.end():m.end() + 2])
            if sm:  # "128K tokens": 128,000 or 131,072; "135M": 135,000,000
                for f in {"k": (1e3, 1024), "m": (1e6,), "b": (1e9,)}[sm.group(1).lower()]:
                    values.append((v * f, tol * f, kind, unit))
            last = m.end()
        if not row:
            header = line


def printed_values(cells):
    """Every number printed by the code cells in ``cells``: a :class:`Printed` with
    (value, tolerance, kind, unit) tuples (magnitude; kind "percent", "ratio", "time", "bytes"
    from the unit written after the number or in its table column's header, else "number") and
    the numeric literals of the cells' source."""
    p = Printed()
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        src = "".join(cell.get("source", ""))
        for lit in re.findall(r"(?<![\w.])\d[\d_]*(?:\.\d+)?(?:e[-+]?\d+)?", src):
            try:
                p.literals.add(float(lit.replace("_", "")))
            except ValueError:
                pass
        for text in _output_texts(cell):
            _printed_in(text, p.values)
    return p


# --- matching ----------------------------------------------------------------------------------

def _in_seconds(v, unit):
    return v * TIME_SECONDS[unit]


def _in_bytes(v, unit):
    return [v * f for f in BYTE_SIZES.get(unit, (1,))]


def _near(value, tol, printed_value, printed_tol):
    """``printed_value`` lies within the claim's rounding, and was printed at least as
    precisely as the claim is written."""
    if printed_tol > max(tol, 1e-12) * 1.0001:
        return False
    return abs(printed_value - value) <= tol * (1 + 1e-9) + 1e-12


def _scaled_near(v, t, pv, pt, f):
    """``_near`` after converting the printed value by factor ``f`` into the claim's unit."""
    return _near(v, t, pv * f, pt * f)


def matches(claim, printed):
    """Does ``claim`` match a number in ``printed`` (a :class:`Printed`)? (rules: module
    docstring)."""
    v, t = claim.value, claim.tol
    for pv, pt, kind, unit in printed.values:
        if claim.kind == "fraction" and t == 0.0:
            k, n = (int(x) for x in claim.unit.split("/"))
            if pv <= 0:
                continue
            if kind == "ratio" and k == 1 and round(pv) == n:
                return True
            if kind in ("number", "percent") and 0 < pv <= 1 + 1e-9 and kind != "percent":
                if (k == 1 and round(1 / pv) == n) or (k > 1 and round(pv * n) == k):
                    return True
            if kind == "percent" and pv > 0:
                q = pv / 100
                if (k == 1 and round(1 / q) == n) or (k > 1 and round(q * n) == k):
                    return True
            continue
        if claim.kind == "fraction":  # "half of": a share
            if kind == "percent" and _near(v * 100, t * 100, pv, pt):
                return True
            if kind in ("number", "ratio") and _near(v, t, pv, pt):
                return True
            if kind == "ratio" and pv > 0 and _near(1 / v, t / v**2, pv, pt):
                return True
            continue
        if claim.kind == "percent":
            if kind == "percent" and _near(v, t, pv, pt):
                return True
            if kind == "number" and _near(v / 100, t / 100, pv, pt):
                return True
            continue
        if claim.kind == "ratio":
            if kind == "ratio" and (_near(v, t, pv, pt)
                                    or (v > 0 and _near(1 / v, t / v**2, pv, pt))):
                return True
            continue
        if claim.kind == "time":
            if kind == "time" and _scaled_near(_in_seconds(v, claim.unit),
                                               _in_seconds(t, claim.unit), pv, pt,
                                               TIME_SECONDS[unit]):
                return True
            continue
        if claim.kind == "bytes":
            if kind == "bytes":
                for f in _in_bytes(1.0, unit):
                    for g in _in_bytes(1.0, claim.unit):
                        if _scaled_near(v * g, t * g, pv, pt, f):
                            return True
            elif kind == "number" and _near(v, t, pv, pt):
                return True
            continue
        if kind != "percent" and any(_near(a, b, pv, pt) for a, b in [(v, t), *claim.alt]):
            return True
    if claim.bound:
        for pv, _, kind, _ in printed.values:
            if kind in ("number", claim.kind) and pv != 0 and v / 2 <= pv <= 2 * v:
                return True
    if claim.whole_literal and claim.kind == "number" and (v in printed.literals or any(
            a in printed.literals for a, _ in claim.alt)):
        return True
    if claim.kind == "number" and not claim.approx and v in printed.literals and "e" not in \
            claim.text.lower():
        return True
    return False


# --- exemptions --------------------------------------------------------------------------------

def load_exemptions(path=EXEMPTIONS):
    """{notebook stem: [entry, ...]} from the exemptions file (each entry: phrase, what,
    source, optionally printed)."""
    if not Path(path).exists():
        return {}
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    return {name: list(entries) for name, entries in data.items()}


def _phrase_spans(raw, phrase):
    pattern = r"\s+".join(re.escape(w) for w in phrase.split())
    return [m.span() for m in re.finditer(pattern, raw)]


# --- the check ---------------------------------------------------------------------------------

def is_count(claim):
    """A plain whole number or number word ("4 heads", "three roles"): matched against the whole
    notebook; every other claim (decimals, ratios, fractions, percentages, times, sizes,
    approximations, bounds) against the cells the sentence can read (:func:`cells_read_by`)."""
    return (claim.kind == "number" and not claim.approx and not claim.bound
            and float(claim.value).is_integer() and claim.tol >= 0.5)


def check_text(raw, printed, exemptions, where, cell):
    """Problems in one piece of markdown ``raw`` against ``printed`` (a :class:`Printed`, or a
    pair: what the sentence can read, and the whole notebook for counts)."""
    near_printed, whole = printed if isinstance(printed, tuple) else (printed, printed)
    text, maths = readable(raw)
    exempt = []
    problems = []
    for entry in exemptions:
        spans = _phrase_spans(raw, entry["phrase"])
        if spans and "printed" in entry:
            claim_text = entry["printed"]
            inner = number_claims(claim_text)
            if not inner or not all(matches(c, whole) for c in inner):
                problems.append(Problem(where, cell, claim_text,
                                        f"the exemption of {entry['phrase']!r} says it stands "
                                        f"for a printed {claim_text}, which nothing prints",
                                        entry["phrase"]))
        exempt += spans

    def exempted(s, e):
        return any(a <= s and e <= b for a, b in exempt)

    for claim in number_claims(text, maths):
        if exempted(claim.start, claim.end):
            continue
        sentence, a, b = sentence_at(text, claim.start)
        near = text[max(a, claim.start - 80):min(b, claim.end + 40)]
        if claim.bound and UNIVERSAL.search(near):
            problems.append(Problem(where, cell, claim.text,
                                    "a bound claimed for every member of a set: a printed "
                                    "list cannot show it; render the sentence from the values "
                                    "or exempt it with the printed extreme", sentence))
            continue
        source = whole if is_count(claim) else near_printed
        if not matches(claim, source):
            problems.append(Problem(where, cell, claim.text, _why(claim, source), sentence))
    for m in VAGUE.finditer(text):
        if exempted(*m.span()):
            continue
        sentence, _, _ = sentence_at(text, m.start())
        problems.append(Problem(where, cell, m.group(0),
                                "a vague quantifier for a measured value: render the sentence "
                                "from the cell that measures it, or exempt the phrase with the "
                                "printed number it stands for", sentence))
    return problems


def _why(claim, printed):
    same = [(pv, kind, unit) for pv, _, kind, unit in printed.values
            if claim.kind in ("number", "fraction") or kind == claim.kind]
    what = {"ratio": "ratio", "fraction": "fraction", "percent": "percentage",
            "time": "time", "bytes": "size"}.get(claim.kind, "number")
    if not same:
        return f"this notebook prints no {what}"
    target = max(claim.value, 1e-300)
    pv, kind, unit = min(same, key=lambda x: abs(math.log(max(x[0], 1e-300) / target)))
    rule = "rounded to its significant digits" if claim.approx else "at its precision"
    shown = f"{pv:g}" + (f" {unit}" if unit else "") + (" (a ratio)" if kind == "ratio" else "")
    return f"no printed {what} matches it {rule} (+-{claim.tol:g}); nearest printed: {shown}"


def _cells(nb_path):
    return json.loads(Path(nb_path).read_text(encoding="utf-8"))["cells"]


SKIPPED_SECTION = re.compile(r"exercises?\b|references\b|quiz\b|further reading", re.IGNORECASE)
HEADING = re.compile(r"^(#{1,3})\s+(.*)$", re.MULTILINE)


def without_skipped_sections(raw, section):
    """``raw`` with the parts under an Exercises, quiz or References heading blanked (their
    numbers are an exercise's data or a citation's), given the ``section`` (level-1/2 heading
    text) in force where the cell starts; returns (text, section in force at its end)."""
    out = []
    pos = 0
    for m in HEADING.finditer(raw):
        if len(m.group(1)) > 2:
            continue
        out.append((raw[pos:m.start()], section))
        section = m.group(2)
        pos = m.start()
    out.append((raw[pos:], section))
    text = "".join(re.sub(r"[^\n]", " ", part) if sec and SKIPPED_SECTION.search(
        re.sub(r"^[^A-Za-z]*", "", sec)) else part for part, sec in out)
    return text, section


def cells_read_by(cells, i):
    """The code cells markdown cell ``i`` may read: every one above it, and the ones right
    after it, up to the next markdown cell (a sentence that introduces the output below)."""
    after = []
    for cell in cells[i + 1:]:
        if cell["cell_type"] == "markdown":
            break
        after.append(cell)
    return cells[:i] + after


def check_notebook(nb_path, exemptions=None):
    """Every unmatched number in the markdown cells of the notebook at ``nb_path``."""
    nb_path = Path(nb_path)
    exemptions = load_exemptions() if exemptions is None else exemptions
    cells = _cells(nb_path)
    everything = printed_values(cells)
    entries = exemptions.get(nb_path.stem, [])
    problems = []
    section = ""
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        if GENERATED_TAGS & set(cell.get("metadata", {}).get("tags", [])):
            continue
        raw, section = without_skipped_sections("".join(cell["source"]), section)
        problems += check_text(raw, (printed_values(cells_read_by(cells, i)), everything),
                               entries, nb_path.stem, i)
    return problems


def teaching_notes(text):
    """[(notebook prefix, line number, bullet text)] of the "Notes on the notebooks" section."""
    start = text.index("## Notes on the notebooks")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end > 0 else len(text)]
    first_line = text[:start].count("\n") + 1
    notes = []
    for m in re.finditer(r"^- \*\*(\d\d[a-z]?)\b[^\n]*(?:\n(?!- )[^\n]*)*", section, re.M):
        notes.append((m.group(1), first_line + section[:m.start()].count("\n"), m.group(0)))
    return notes


def check_teaching(path=TEACHING, notebooks=NOTEBOOKS, exemptions=None):
    """Every unmatched number in ``docs/teaching.md``'s notes, each against its notebook."""
    exemptions = load_exemptions() if exemptions is None else exemptions
    problems = []
    for prefix, line, note in teaching_notes(Path(path).read_text(encoding="utf-8")):
        found = sorted(Path(notebooks).glob(f"{prefix}-*.ipynb"))
        if not found:
            problems.append(Problem("teaching.md", f"line {line}", prefix,
                                    "a note about a notebook that does not exist", note[:80]))
            continue
        nb = found[0]
        body = note[note.index("**", 3) + 2:]  # after the bold notebook label
        offset = len(note) - len(body)
        entries = exemptions.get(nb.stem, []) + exemptions.get("teaching", [])
        for p in check_text(" " * offset + body, printed_values(_cells(nb)), entries,
                            f"teaching.md ({nb.stem})", f"line {line}"):
            problems.append(p)
    return problems


def check_paths(paths, exemptions=None):
    problems = []
    for path in paths:
        path = Path(path)
        if path.suffix == ".md":
            problems += check_teaching(path, exemptions=exemptions)
        else:
            problems += check_notebook(path, exemptions)
    return problems


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[0])
        print("usage: python tests/prose_numbers.py [--exemptions FILE] notebooks/NN-*.ipynb ... "
              "[docs/teaching.md]\n(exemptions: FILE, else ./tests/prose_exemptions.toml, else "
              "the one beside this module)")
        return 0 if argv else 2
    exemptions = None
    if "--exemptions" in argv:
        i = argv.index("--exemptions")
        exemptions = load_exemptions(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    elif Path("tests/prose_exemptions.toml").exists():  # the working copy's own list
        exemptions = load_exemptions("tests/prose_exemptions.toml")
    problems = check_paths(argv, exemptions)
    for p in problems:
        print(p)
    print(f"{len(problems)} unmatched number(s) in {len(argv)} file(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
