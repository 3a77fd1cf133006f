"""Generate the course's navigation: the one place that knows the order of the notebooks.

For every notebook in notebooks/ that exists, this writes

* a first and a last markdown cell tagged ``nav``:
  ``< previous | Contents | next >`` with relative links to the neighbouring notebooks
  (notebooks not written yet are skipped over, so every link points to a file);
* in 00-index.ipynb, the cell tagged ``course-map`` (the list of notebooks with one line
  each) and the cell tagged ``binder-link`` (the launch link built from ``REPO``);

and, in README.md, the course map between the ``course-map`` marker comments and the Binder
badge and launch link between the ``binder`` ones (added under the title if missing).

Only those generated cells are touched; other cells and their outputs stay as they are.
A file is written only when its content changes, so running this twice changes nothing.

Usage (from anywhere)::

    python tools/nav.py            # update the files
    python tools/nav.py --check    # exit 1 if anything is stale (used by tests/test_nav.py)
"""

import argparse
import re
import sys
from pathlib import Path

import nbformat

# The repository's public address on GitHub, "owner/name", or None while it has none: the one
# thing to set when the course is published (or moves). It builds the Binder launch link; without
# it no page shows a launch link (one that cannot work), only how to run the course locally.
REPO = None
BINDER_URL = (None if REPO is None else
              f"https://mybinder.org/v2/gh/{REPO}/HEAD?urlpath=lab/tree/notebooks/00-index.ipynb")
#: What a page says instead of a launch link while the course has no public address.
RUN_LOCALLY = ("clone the course's repository and run `make lab` in it (it installs everything "
               "into `.venv` and opens JupyterLab on the course map)")

# The course, in order: (file name in notebooks/, short title, one line on what it covers).
COURSE = [
    ("00-index.ipynb", "Course map",
     "The course map: what each notebook covers and how to use them."),
    ("01-the-problem.ipynb", "The problem attention solves",
     "Who is *it* in a sentence? Why each token needs to look at the others."),
    ("02-queries-keys-values.ipynb", "Queries, keys and values",
     "Three projections of every token: what it looks for, what it offers, what it gives."),
    ("03-scores.ipynb", "Step 1: scores",
     "Every query against every key: the n × n score matrix QKᵀ."),
    ("04-scaling.ipynb", "Step 2: scaling by √d_k",
     "Why scores are divided by √d_k, and how the softmax saturates without it."),
    ("05-softmax.ipynb", "Step 3: softmax",
     "Each row of scores becomes weights that are positive and sum to 1."),
    ("06-weighted-sum.ipynb", "Step 4: the weighted sum of values",
     "Each output is a mixture of the value vectors, mixed by the weights."),
    ("07-causal-masking.ipynb", "Causal masking",
     "A token may only draw from itself and earlier tokens: -inf scores before the softmax."),
    ("08-multi-head.ipynb", "Multi-head attention",
     "Several attentions on slices of the dimensions, for about the cost of one."),
    ("08b-positions.ipynb", "Positions: where each token is",
     "Attention cannot see order: sinusoidal, learned, rotary (RoPE) and ALiBi positions."),
    ("09-cost.ipynb", "The cost of attention",
     "The n × n matrix makes time and memory quadratic; tiling avoids storing it."),
    ("10-recap.ipynb", "Recap",
     "The whole formula in one cell, what to remember, and what to read next."),
    ("11-a-real-model.ipynb", "A real model",
     "The same attention inside a pretrained transformer: its heads, their habits, their limits."),
    ("12-learning-attention.ipynb", "Learning attention",
     "Backward pass by hand, a head trained in numpy, the √d_k claim tested by training; "
     "it opens with a primer on what it uses: the chain rule, cross-entropy, Adam."),
    ("13-decoding.ipynb", "Decoding with a KV cache",
     "Causal attention one token at a time: the key/value cache, its cost and its memory."),
    ("14-a-tiny-gpt.ipynb", "A tiny GPT",
     "The whole transformer from the course's parts, trained in numpy, sampled, looked into."),
    ("15-induction-heads.ipynb", "Induction heads",
     "Induction heads grown from scratch in small attention-only models, tested by ablation."),
    ("16-todays-attention.ipynb", "Attention in today's models",
     "Grouped-query heads, a rolling sliding-window cache, attention sinks, measured."),
    ("17-a-real-llm.ipynb", "A real LLM",
     "SmolLM2-135M run by the course's numpy code: it answers; its sinks and induction heads, "
     "measured."),
    ("18-beyond-quadratic.ipynb", "Beyond the quadratic",
     "Linear attention, sparse patterns and latent (MLA) caches: computed, counted, measured."),
    ("19-gates-and-deltas.ipynb", "Gates and deltas",
     "Decayed linear attention, DeltaNet and Gated DeltaNet: three forms each, recall measured."),
    ("appendix-errata.ipynb", "Appendix: the article's numbers, traced",
     "Where the article's wrong printed matrices come from, route by route, in one place."),
]

# How long a notebook takes, estimated from the notebook itself (an estimate, not a measurement):
# reading its prose at READ_WORDS_PER_MIN, plus minutes per code cell run and read, per exercise
# answered with a value or a choice, per exercise that asks for a function, and per explorer.
# The weights were chosen to agree with one independent review's estimates for four notebooks
# (08b 60, 14 100, 15 75, 16 60 minutes, estimated, not timed): these weights give
# 60, 100, 75 and 65. Rounded to 5 minutes.
READ_WORDS_PER_MIN = 120
MINUTES = {"code cell": 1, "exercise": 5, "code exercise": 15, "explorer": 5}
EXPLORER_CALL = re.compile(r"\b(\w+_explorer|worked_example_lab)\(")
ESTIMATE_NOTE = (
    "*Times are estimates made from each notebook itself, not measured: its text read at "
    f"{READ_WORDS_PER_MIN} words a minute, {MINUTES['code cell']} minute per code cell, "
    f"{MINUTES['exercise']} per exercise with a value to find, {MINUTES['code exercise']} per "
    f"exercise that asks for a function, {MINUTES['explorer']} per explorer; weights chosen to "
    "agree with one review's estimates (not timings) for four notebooks, rounded to 5 minutes "
    "(tools/nav.py).*")

INDEX = COURSE[0][0]
NAV_TAG = "nav"
MAP_TAG = "course-map"
BINDER_TAG = "binder-link"
README_START = "<!-- course-map:start (generated by tools/nav.py; do not edit by hand) -->"
README_END = "<!-- course-map:end -->"
BADGE_START = "<!-- binder:start (generated by tools/nav.py from REPO; do not edit by hand) -->"
BADGE_END = "<!-- binder:end -->"
BADGE_IMAGE = "https://mybinder.org/badge_logo.svg"
ROOT = Path(__file__).resolve().parents[1]


def is_appendix(name):
    """Appendices (``appendix-*.ipynb``) follow the numbered notebooks, without a number."""
    return name.startswith("appendix-")


def number(name):
    """'03' for '03-scores.ipynb'; '08b' for '08b-positions.ipynb', a section inserted after 08
    without renumbering the notebooks after it (two digits, then an optional letter)."""
    return name.split("-", 1)[0]


def is_inserted(name):
    """A notebook inserted between two numbered ones ('08b-...'): listed under its parent."""
    return not is_appendix(name) and not number(name).isdigit()


def label(name, title):
    """'03 · Step 1: scores' for ('03-scores.ipynb', 'Step 1: scores'); an appendix: its title."""
    return title if is_appendix(name) else f"{number(name)} · {title}"


def nav_source(name, existing):
    """The markdown of the nav line for notebook ``name``; links only to ``existing`` files."""
    present = [entry for entry in COURSE if entry[0] in existing]
    names = [entry[0] for entry in present]
    i = names.index(name)
    parts = []
    if i > 0:
        prev_name, prev_title, _ = present[i - 1]
        parts.append(f"[< {label(prev_name, prev_title)}]({prev_name})")
    parts.append("**Contents**" if name == INDEX else f"[Contents]({INDEX})")
    if i + 1 < len(present):
        next_name, next_title, _ = present[i + 1]
        parts.append(f"[{label(next_name, next_title)} >]({next_name})")
    return " | ".join(parts)


def _words(text):
    """Words of markdown prose (a formula between $ signs counts as one)."""
    return len(re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " formula ", text, flags=re.S).split())


def study_minutes(nb):
    """The estimated minutes a learner spends on ``nb`` (see ``MINUTES``), rounded to 5."""
    prose = [c for c in nb.cells if c.cell_type == "markdown" and not has_tag(c, NAV_TAG)]
    code = [c for c in nb.cells if c.cell_type == "code"]
    exercises = [c for c in nb.cells if has_tag(c, "exercise")]
    functions = sum("NotImplementedError" in c.source for c in exercises)
    minutes = (sum(_words(c.source) for c in prose) / READ_WORDS_PER_MIN
               + MINUTES["code cell"] * len(code)
               + MINUTES["exercise"] * (len(exercises) - functions)
               + MINUTES["code exercise"] * functions
               + MINUTES["explorer"] * sum(bool(EXPLORER_CALL.search(c.source)) for c in code))
    return max(5, 5 * round(minutes / 5))


def has_explorer(nb):
    return any(c.cell_type == "code" and EXPLORER_CALL.search(c.source) for c in nb.cells)


def course_facts(nb_dir, existing):
    """{notebook: (estimated minutes, has an explorer)} for the notebooks on disk."""
    facts = {}
    for name in existing:
        nb = nbformat.read(Path(nb_dir) / name, as_version=4)
        facts[name] = (study_minutes(nb), has_explorer(nb))
    return facts


def _hours(minutes):
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def explorer_sentence(facts):
    """Which notebooks' Try it section is an explorer, from the notebooks themselves."""
    with_one = [number(name) for name, _, _ in COURSE
                if facts.get(name, (0, False))[1] and not is_appendix(name)]
    if not with_one:
        return ""
    return ("Notebooks with an **explorer** (sliders and number boxes that change the inputs and "
            f"redraw at once) in their **Try it** section: {', '.join(with_one)}.")


def map_lines(existing, prefix="", facts=None):
    """One markdown list line per notebook after the index; unwritten ones without a link.
    With ``facts`` (:func:`course_facts`), each line ends with its estimated time, and the
    list is followed by the course's total, how the times are estimated and which notebooks
    have an explorer."""
    facts = facts or {}
    lines = []

    def took(name):
        return f" *(about {facts[name][0]} min)*" if name in facts else ""

    for name, title, line in COURSE[1:]:
        if is_appendix(name):  # after the numbered list, as a paragraph of its own
            if name in existing:
                lines += ["", f"[{title}]({prefix}{name}): {line}{took(name)}"]
            continue
        # an inserted notebook (08b) is a sub-item of its parent: a markdown list renumbers
        # items by their order, so a second "8." would shift every later number by one
        marker = f"   - {int(number(name)[:2])}{number(name)[2:]}." if is_inserted(name) \
            else f"{int(number(name))}."
        if name in existing:
            lines.append(f"{marker} [{title}]({prefix}{name}): {line}{took(name)}")
        else:
            lines.append(f"{marker} {title} *(not written yet)*: {line}")
    if facts:
        total = sum(minutes for name, (minutes, _) in facts.items() if name != INDEX)
        lines += ["", f"The whole course: about {_hours(total)} of study. {ESTIMATE_NOTE}"]
        sentence = explorer_sentence(facts)
        if sentence:
            lines += ["", sentence]
    return "\n".join(lines)


def binder_source():
    if BINDER_URL is None:
        return (f"**Running the course.** To run these notebooks and move their explorers, "
                f"{RUN_LOCALLY}.")
    return (
        f"**Nothing installed?** [Launch this course on Binder]({BINDER_URL}): it opens this "
        "notebook in JupyterLab in your browser, with everything installed (the first start "
        "can take a few minutes)."
    )


def has_tag(cell, tag):
    return tag in cell.get("metadata", {}).get("tags", [])


def markdown_cell(source, tag, minor):
    cell = nbformat.v4.new_markdown_cell(source, metadata={"tags": [tag]})
    if minor < 5:  # cell ids exist from nbformat 4.5 on
        del cell["id"]
    return cell


def set_source(cell, source):
    cell["source"] = source
    cell["cell_type"] = "markdown"
    for key in ("outputs", "execution_count"):
        cell.pop(key, None)


def update_notebook(nb, name, existing, facts=None):
    """Put the generated cells into ``nb`` (in place); ``facts``: see :func:`course_facts`."""
    minor = nb.get("nbformat_minor", 5)
    navs = [c for c in nb.cells if has_tag(c, NAV_TAG)]
    body = [c for c in nb.cells if not has_tag(c, NAV_TAG)]
    top = navs[0] if navs else markdown_cell("", NAV_TAG, minor)
    bottom = navs[-1] if len(navs) > 1 else markdown_cell("", NAV_TAG, minor)
    source = nav_source(name, existing)
    set_source(top, source)
    set_source(bottom, source)

    if name == INDEX:
        maps = [c for c in body if has_tag(c, MAP_TAG)]
        if not maps:
            maps = [markdown_cell("", MAP_TAG, minor)]
            body.append(maps[0])
        for cell in maps:
            set_source(cell, map_lines(existing, facts=facts))
        for cell in body:
            if has_tag(cell, BINDER_TAG):
                set_source(cell, binder_source())
    nb.cells = [top, *body, bottom]


def badge_block():
    """The README's Binder badge and launch link, between their markers (without a public
    address: how to run the course instead)."""
    if BINDER_URL is None:
        return f"{BADGE_START}\nTo run the course, {RUN_LOCALLY}.\n{BADGE_END}"
    return (
        f"{BADGE_START}\n"
        f"[![Launch on Binder]({BADGE_IMAGE})]({BINDER_URL})\n"
        f"[Launch the course on Binder]({BINDER_URL}): JupyterLab opens on the course map, "
        "`notebooks/00-index.ipynb`, with nothing to install.\n"
        f"{BADGE_END}"
    )


def update_readme(text, existing, facts=None):
    """README text with the course map and the Binder badge between their markers replaced.

    The badge block goes right under the title when the README has no such markers yet.
    """
    pattern = re.compile(re.escape(README_START) + r".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise ValueError(f"README.md lacks the markers {README_START!r} ... {README_END!r}")
    block = f"{README_START}\n{map_lines(existing, prefix='notebooks/', facts=facts)}\n{README_END}"
    text = pattern.sub(lambda _: block, text, count=1)
    badge = re.compile(re.escape(BADGE_START) + r".*?" + re.escape(BADGE_END), re.S)
    if badge.search(text):
        return badge.sub(lambda _: badge_block(), text, count=1)
    title = re.search(r"^# .*\n", text, re.M)
    at = title.end() if title else 0
    return f"{text[:at]}\n{badge_block()}\n{text[at:]}"


def run(root=ROOT, check=False):
    """Update (or with ``check``, only compare) the generated parts; return an exit code."""
    root = Path(root)
    nb_dir = root / "notebooks"
    known = [entry[0] for entry in COURSE]
    on_disk = sorted(p.name for p in nb_dir.glob("*.ipynb")) if nb_dir.is_dir() else []
    existing = {name for name in on_disk if name in known}
    status = 0
    for name in on_disk:
        if name not in existing:
            print(f"error: notebooks/{name} is not in COURSE in tools/nav.py", file=sys.stderr)
            status = 1

    facts = course_facts(nb_dir, existing)
    stale = []
    for name in sorted(existing):
        path = nb_dir / name
        nb = nbformat.read(path, as_version=4)
        before = nbformat.writes(nb)
        update_notebook(nb, name, existing, facts)
        after = nbformat.writes(nb)
        if after != before:
            stale.append(path)
            if not check:
                nbformat.write(nb, path)

    readme = root / "README.md"
    if readme.exists():
        text = readme.read_text(encoding="utf-8")
        try:
            new = update_readme(text, existing, facts)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        if new != text:
            stale.append(readme)
            if not check:
                readme.write_text(new, encoding="utf-8")

    for path in stale:
        rel = path.relative_to(root)
        print(f"stale: {rel}" if check else f"updated: {rel}")
    if check and stale:
        print("navigation is stale: run `make nav` (python tools/nav.py)", file=sys.stderr)
        status = 1
    if not stale and status == 0:
        print("navigation up to date" if check else "navigation already up to date")
    return status


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if any generated part is stale")
    parser.add_argument("--root", default=ROOT, type=Path,
                        help="repository root (default: the one this script is in)")
    args = parser.parse_args(argv)
    return run(args.root, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
