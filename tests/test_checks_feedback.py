"""How a check's Feedback is displayed: a wrapped HTML paragraph plus the plain text."""

import html
import re

from IPython.core.formatters import DisplayFormatter

from attn_core.checks._base import Feedback, not_yet, right, unanswered


def test_feedback_shows_as_a_wrapped_paragraph_and_keeps_its_plain_text():
    hint = "a score adds up d_k products <q_c k_c>; see (04-scaling.ipynb) & take the root"
    for feedback in (not_yet(hint), unanswered(hint), right("because <it> is")):
        data, _ = DisplayFormatter().format(feedback)
        assert data["text/plain"] == feedback.message  # what nbval and text frontends see
        page = data["text/html"]
        assert re.fullmatch(r'<p class="attn-feedback" [^>]*>[^<>]*</p>', page), page
        assert html.unescape(re.sub(r"<[^>]+>", "", page)) == feedback.message
        style = re.search(r'style="([^"]*)"', page).group(1)
        assert "white-space:normal" in style and "monospace" not in style
        assert "break-all" not in style  # wraps between words, never inside one
        verdict = re.search(r'data-verdict="([^"]*)"', page).group(1)
        assert verdict == ("right" if feedback else "not-yet")


def test_feedback_html_is_deterministic():
    a, b = Feedback(False, "x < y"), Feedback(False, "x < y")
    assert a._repr_html_() == b._repr_html_() and "x &lt; y" in a._repr_html_()
