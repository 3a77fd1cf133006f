"""Every number in the notebooks' prose is printed by a code cell, cited or structural
(issue 45; the rules are in ``tests/prose_numbers.py``'s docstring and docs/maintaining.md,
"Claims in the notebooks").

Three kinds of test: the rules on small sentences (each rule can fail as well as pass); the
defects the issue-45 review found, planted back beside the output they misread (the check must
fail on each, and pass on the sentence that reads the output correctly); and every notebook and
``docs/teaching.md``'s notes as they are.
"""

import json
import re
from pathlib import Path

import pytest
from prose_numbers import (
    EXEMPTIONS,
    NOTEBOOKS,
    TEACHING,
    check_notebook,
    check_teaching,
    check_text,
    load_exemptions,
    number_claims,
    printed_values,
    readable,
)


def code(*outputs):
    """A code cell printing ``outputs`` (each a stream text)."""
    return {"cell_type": "code", "source": "", "metadata": {}, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": text} for text in outputs]}


def problems(sentence, *outputs, exemptions=()):
    return check_text(sentence, printed_values([code(*outputs)]), list(exemptions), "test", 0)


def passes(sentence, *outputs, exemptions=()):
    found = problems(sentence, *outputs, exemptions=exemptions)
    assert found == [], "\n".join(map(str, found))
    return True


def fails(sentence, *outputs, exemptions=()):
    return len(problems(sentence, *outputs, exemptions=exemptions)) > 0


def claimed(sentence):
    text, maths = readable(sentence)
    return [c.text for c in number_claims(text, maths)]


# --- the rules -------------------------------------------------------------------------------


def test_a_number_matches_at_the_precision_it_is_written():
    assert passes("The weight is 0.34.", "weight: 0.3412")
    assert passes("The weight is 0.3.", "weight: 0.3412")
    assert fails("The weight is 0.35.", "weight: 0.3412")
    # a sentence cannot be more precise than what it reads
    assert fails("The weight is 0.34.", "weight: 0.3")


def test_about_rounds_a_whole_number_to_its_significant_digits():
    assert passes("over about 5,000 draws", "draws: 4,987")
    assert fails("over 5,000 draws", "draws: 4,987")
    assert fails("over about 5,000 draws", "draws: 5,600")
    assert passes("about 2.7 minutes of CPU", "CPU: 160.7 s")
    assert fails("about 2.8 minutes of CPU", "CPU: 160.7 s")


def test_percentages_match_shares_and_printed_percentages():
    assert passes("it loses 9% of each weight", "lost: 0.0912")
    assert passes("it loses 9% of each weight", "lost: 9.1%")
    assert fails("it loses 12% of each weight", "lost: 0.0912")
    # a plain printed 9 is not a percentage
    assert fails("it loses 9% of each weight", "layers: 9")


def test_ratios_match_printed_ratios_only():
    table = "      n   softmax   linear   ratio\n  32768    17763.98    69.52   255.5\n"
    assert passes("At 32,768 tokens the linear form does about 256 times less arithmetic.",
                  table + "(d_k = 128)")
    # 128 is printed, but not as a ratio
    assert fails("At 32,768 tokens the linear form does about 128 times less arithmetic.",
                 table + "(d_k = 128)")
    assert passes("masking it moves the output 4.7x more", "ratio: 4.72")
    assert passes("the cache is twice as large", "larger by a factor 2.0")
    assert fails("the cache is twice as large", "sizes: 2 and 5")
    assert passes("run it twice and compare", "nothing: 0.5")  # a repetition, not a ratio


def test_fraction_words():
    assert passes("half of the weight is on it", "weight: 0.52")
    assert fails("half of the weight is on it", "weight: 0.68")
    assert passes("a third of the weight", "weight: 0.31")
    assert fails("a third of the weight", "weight: 0.45")
    assert passes("a sixteenth of the bytes", "16.0 times fewer bytes")
    assert passes("a sixteenth of the bytes", "share of the bytes: 0.0625")
    assert fails("a sixteenth of the bytes", "14.22 times fewer bytes")
    assert passes("about two and a half minutes", "CPU: 151 s")
    assert fails("about two and a half minutes", "CPU: 138.6 s")


def test_thousands_written_with_k():
    assert passes("at the model's 128K context", "at 128K tokens: 8.4 GiB")
    assert passes("at 32k tokens", "n = 32768")
    assert fails("at 64k tokens", "n = 32768")


def test_number_words_count():
    assert passes("three heads look back", "heads looking back: 3")
    assert fails("four heads look back", "heads looking back: 3")
    assert passes("135 million parameters", "parameters: 134,515,008")
    assert fails("140 million parameters", "parameters: 134,515,008")
    # "one" is not read (a pronoun as often as a number)
    assert claimed("one of them") == []


def test_an_input_set_in_code_is_a_number_the_reader_sees():
    cell = code("done")
    cell["source"] = "n_tokens = 24\n"
    printed = printed_values([cell])
    assert check_text("It trains 24 small models.", printed, [], "t", 0) == []
    assert check_text("It trains about 24 small models.", printed, [], "t", 0) != []
    assert check_text("It trains 25 small models.", printed, [], "t", 0) != []


def test_vague_quantifiers_and_universal_bounds_fail_unless_rendered_or_exempted():
    out = "Q4_1 re-rounding of the embedding: 0.085 of its norm lost"
    assert fails("Rounding loses a few percent of each weight.", out)
    assert passes("Rounding loses about 9% of each weight's norm.", out)
    entry = {"phrase": "a few percent", "what": "the share lost", "source": "cell 18",
             "printed": "0.085"}
    assert passes("Rounding loses a few percent of each weight.", out, exemptions=[entry])
    wrong = dict(entry, printed="0.05")
    assert fails("Rounding loses a few percent of each weight.", out, exemptions=[wrong])
    assert fails("nearly all of the weight", "weight: 0.97")
    assert fails("From the fourth layer on, a third or more of the attention lands there.",
                 "4  0.377\n  10 0.316\n  13 0.411")


def test_structural_numbers_are_not_claims():
    for text in ["GPT-2", "Q4_1", "float16", "d_k", "SmolLM2-135M", "AVX-512", "x86-64-v2",
                 "all-MiniLM-L6-v2", "L4H2", "notebook 05", "notebooks 11 to 16",
                 "layers 11, 12 and 17", "layer 8, head 1", "exercise 3", "step 650",
                 "(Vaswani et al., 2017)", "Elhage et al. 2021", "arXiv:1706.03762",
                 "1. first item", "# 03 · Step 1: scores", "Llama 2 7B", "Python 3.11",
                 "the 4th layer", "to two decimals", "[05](05-softmax.ipynb)",
                 "`x = 3.7`", "see https://example.org/2/34", "$\\sqrt{d_k} \\cdot 2^{10}$",
                 "*EMNLP 2023*", "Training ImageNet on 29 August 2026"]:
        assert claimed(text) == [], text


def test_math_results_are_checked_and_formula_constants_are_not():
    assert claimed("$e^{2} \\approx 7.39$") == ["7.39"]
    assert claimed("$\\frac{1}{\\sqrt{64}}$") == []
    assert passes("$e^{2} \\approx 7.39$", "e squared: 7.389")
    assert fails("$e^{2} \\approx 7.40$", "e squared: 7.389")


def test_a_name_of_a_thing_counted_is_still_a_count():
    # "1,500-step" counts steps; letters after a hyphen do not make it a name
    assert claimed("a 1,500-step run") == ["1,500"]
    assert fails("a 1,500-step run did not leave the plateau", "steps: 1,700")


# --- the defects the issue-45 review found, planted back -------------------------------------

PLANTED = {
    "18: 128 times less beside a printed ratio of 255.5": (
        "At 32,768 tokens the linear form does about 128 times less arithmetic.",
        "      n   softmax attention   linear attention   ratio\n"
        "  32768       17763.98 GFLOP         69.52 GFLOP   255.5\n"
        "softmax attention costs more from n = 129 on (d_k = 128)\n",
        "At 32,768 tokens the linear form does about 256 times less arithmetic."),
    "18: a sixteenth of the bytes beside 14.22 times": (
        "the latent cache (a full pattern with a sixteenth of the bytes)",
        "latent cache: 14.22 times fewer bytes than full attention",
        "the latent cache (a full pattern with about a fourteenth of the bytes)"),
    "17: a few percent beside 0.085 and 0.090": (
        "Rounding to 16 levels per block loses a few percent of each weight.",
        "Q4_1 re-rounding of the embedding: 0.085 of its norm lost\n\n"
        "stored: whole table 0.090; loss on 512 tokens of text 3.144 -> 3.192 nats a token",
        "Rounding loses about 9% of the table's norm."),
    # the row the sentence reads; the same output's "[CLS], in every head  0.50" row would match
    # "half" (the check cannot tell which row a sentence means)
    "16: the half of the weight printed as 0.68": (
        "masking moves the half of the weight [CLS] held onto other pieces",
        "key                        weight it holds  change, masked  change, value zeroed\n"
        "[CLS], in the sink heads              0.68            0.78                  0.07\n",
        "masking moves the 0.68 of the weight [CLS] held onto other pieces"),
    "15: about two and a half minutes for 138.6 s": (
        "trained in tools/train_induction.py (about two and a half minutes of CPU)",
        "CPU time of the stored runs: 138.6 s",
        "trained in tools/train_induction.py (about 2.3 minutes of CPU)"),
    "17: a third or more from the fourth layer on, against per-layer values": (
        "From the fourth layer on, apart from two layers in the middle, about a third or more "
        "of all attention lands on position 0.",
        "layers where position 0 gets more than half the weight: 10 of 30\n"
        "layer  pos 0\n    1  0.014\n    4  0.377\n   10  0.316\n   13  0.411\n   16  0.540\n",
        "Position 0 gets more than half the weight in 10 of 30 layers."),
    "17: a different word in every text, 27 distinct of 32": (
        "over 32 slices of text (a different word in every text)",
        "texts: 32; distinct first tokens: 27",
        "over 32 slices of text (27 distinct first tokens)"),
}


@pytest.mark.parametrize("name", PLANTED)
def test_each_defect_of_the_review_fails_and_its_correction_passes(name):
    wrong, output, right = PLANTED[name]
    assert fails(wrong, output), f"the check let through: {wrong!r}"
    assert passes(right, output)


def markdown(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def notebook(tmp_path, cells):
    path = tmp_path / "99-planted.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 5}))
    return path


def test_a_measured_number_is_read_above_the_sentence_or_right_after_it(tmp_path):
    """18's "about 128 times less" read a 128.0x that a later section prints for another
    quantity: a sentence reads the cells above it and the ones right after it (up to the next
    markdown cell); counts ("32 layers") may come from anywhere in the notebook."""
    ratio = "  32768       17763.98 GFLOP         69.52 GFLOP   255.5\n"
    header = "      n   softmax attention   linear attention   ratio\n"
    later = [markdown("## Caches"), code("multi-query, 1 kv head   30.0 KiB   128.0x\n"
                                         "layers: 32")]
    wrong = "At 32,768 tokens the linear form does about 128 times less arithmetic."
    path = notebook(tmp_path, [code(header + ratio), markdown(wrong), *later])
    assert [p.number for p in check_notebook(path, {})] == ["128"]
    path = notebook(tmp_path, [markdown(wrong), code(header + ratio), *later])
    assert [p.number for p in check_notebook(path, {})] == ["128"]
    right = "At 32,768 tokens the linear form does about 256 times less arithmetic in 32 layers."
    path = notebook(tmp_path, [markdown(right), code(header + ratio), *later])
    assert check_notebook(path, {}) == []


def test_a_notebook_with_a_planted_defect_fails(tmp_path):
    nb = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "The ratio is about 128."},
        code("ratio: 255.5")], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "99-planted.ipynb"
    path.write_text(json.dumps(nb))
    assert [p.number for p in check_notebook(path, {})] == ["128"]
    nb["cells"][0]["source"] = "The ratio is about 256."
    path.write_text(json.dumps(nb))
    assert check_notebook(path, {}) == []


# --- the course as it is ---------------------------------------------------------------------


def test_every_exemption_is_complete_and_used():
    exemptions = load_exemptions(EXEMPTIONS)
    sources = {p.stem: "\n".join("".join(c["source"]) for c in
                                  json.loads(p.read_text(encoding="utf-8"))["cells"])
               for p in NOTEBOOKS.glob("*.ipynb")}
    sources["teaching"] = TEACHING.read_text(encoding="utf-8")
    for name, entries in exemptions.items():
        assert name in sources, f"exemptions for {name}, which is not a notebook"
        for entry in entries:
            assert {"phrase", "what", "source"} <= set(entry), entry
            words = r"\s+".join(re.escape(w) for w in entry["phrase"].split())
            assert re.search(words, sources[name]), f"{name}: unused exemption {entry['phrase']!r}"


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_every_number_in_a_notebooks_prose_is_printed_cited_or_structural(path):
    found = check_notebook(path)
    assert found == [], "\n".join(map(str, found))


def test_every_number_in_the_teachers_notes_is_printed_by_its_notebook():
    found = check_teaching(Path(TEACHING))
    assert found == [], "\n".join(map(str, found))
