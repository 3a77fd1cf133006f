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


def test_hints_come_in_steps_the_same_way_in_every_check():
    """First wrong try: what is wrong, and how to ask for more; second try or hint=True: the
    hint too; a right answer starts afresh. One wrapper does it for every exercise check."""
    import inspect

    from attn_core import checks
    from attn_core.checks import _base

    _base.reset_tries()
    first = checks.check_restoring_scale(6.0)
    assert not first and "divide by" in first.message and "Hint:" not in first.message
    assert _base.ASK_FOR_MORE in first.message and first.more
    second = checks.check_restoring_scale(6.0)
    assert "divide by" in second.message and "Hint: " + first.more in second.message
    assert checks.check_restoring_scale(1 / 6)
    again = checks.check_restoring_scale(6.0)
    assert "Hint:" not in again.message  # the right answer reset the count
    _base.reset_tries()
    asked = checks.check_restoring_scale(6.0, hint=True)  # asked for at the first try
    assert "Hint:" in asked.message
    import importlib
    import pkgutil

    modules = [importlib.import_module(f"attn_core.checks.{m.name}")
               for m in pkgutil.iter_modules(checks.__path__) if not m.name.startswith("_")]
    public = {name: getattr(m, name) for m in modules for name in getattr(m, "__all__", ())
              if name.startswith("check_") and name not in ("check_array", "check_number",
                                                             "check_choice")}
    assert len(public) >= 50
    unwrapped = [n for n, f in public.items() if not getattr(f, "progressive", False)]
    assert not unwrapped, f"exercise checks without progressive hints: {unwrapped}"
    assert all("hint" not in inspect.signature(f.__wrapped__).parameters
               for f in public.values())
