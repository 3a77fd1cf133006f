"""What every exercise check shares: a Feedback object and comparisons with hints.

A check never prints and never reveals the answer: it returns a :class:`Feedback`, whose
text a notebook shows as the cell's output and whose truth value a test can assert.
"""

import html
from dataclasses import dataclass

import numpy as np

#: How a Feedback shows in JupyterLab and the static edition: a paragraph of prose that
#: wraps between words (a text/plain output is monospace and breaks anywhere, mid-word).
FEEDBACK_CSS = ("margin:0.2em 0;white-space:normal;overflow-wrap:break-word;"
                "font-family:var(--jp-content-font-family, sans-serif);"
                "font-size:var(--jp-content-font-size1, 14px);"
                "color:var(--jp-content-font-color1, rgba(0, 0, 0, 0.87))")

RIGHT = "✔ Right."
NOT_YET = "✘ Not yet."
NO_ANSWER = "… No answer yet."


@dataclass(frozen=True)
class Feedback:
    """The verdict on one answer: ``correct`` and a message (praise or a hint)."""

    correct: bool
    message: str

    def __bool__(self):
        return self.correct

    def __repr__(self):
        return self.message

    __str__ = __repr__

    def _repr_html_(self):
        """The message as a wrapped paragraph (the plain-text repr stays for text outputs)."""
        verdict = "right" if self.correct else "not-yet"
        return (f'<p class="attn-feedback" data-verdict="{verdict}" style="{FEEDBACK_CSS}">'
                f"{html.escape(self.message)}</p>")


def right(why=""):
    """Feedback for a correct answer, with an optional sentence on why it is right."""
    return Feedback(True, f"{RIGHT} {why}".strip())


def not_yet(hint):
    """Feedback for a wrong answer, with a hint that points the way without the answer."""
    return Feedback(False, f"{NOT_YET} Hint: {hint}")


def unanswered(hint):
    """Feedback for an exercise not attempted yet (the answer is still ``None`` or ``...``)."""
    return Feedback(False, f"{NO_ANSWER} Replace the placeholder with your answer. Hint: {hint}")


def is_unanswered(answer):
    return answer is None or answer is Ellipsis


def is_close(got, value, atol=1e-2):
    """True if the number ``got`` is within ``atol`` of ``value`` (answers rounded to 0.01 pass)."""
    return bool(np.isclose(got, value, atol=atol, rtol=0.0))


def rounding_tolerance(decimals):
    """Half a unit of the last of ``decimals`` digits (plus float slack): what rounding allows.

    An answer asked "to 2 decimals" is right if it rounds like the true value does: within
    0.005 of it, so 0.14 passes for 0.1389 and 0.13 does not.

    Examples
    --------
    >>> rounding_tolerance(2) > 0.005 > rounding_tolerance(3)
    True
    """
    return 0.5 * 10.0 ** -int(decimals) + 1e-9


def _as_sentence(hint):
    return hint[:1].upper() + hint[1:]


def read_number(answer, hint, what="a single number"):
    """``(number, None)`` for an answer that is a number, else ``(None, feedback)``.

    The feedback says the exercise is unanswered, or that the answer should be ``what``.
    """
    if is_unanswered(answer):
        return None, unanswered(hint)
    try:
        return float(answer), None
    except (TypeError, ValueError):
        return None, not_yet(f"the answer should be {what}. {_as_sentence(hint)}")


def read_shape(answer, hint):
    """``(shape tuple, None)`` for an answer like ``(4, 4)``, else ``(None, feedback)``."""
    if is_unanswered(answer):
        return None, unanswered(hint)
    try:
        return tuple(int(x) for x in answer), None
    except (TypeError, ValueError):
        return None, not_yet("the answer should be a shape: a tuple of whole numbers like "
                             f"(rows, columns). {_as_sentence(hint)}")


def check_array(answer, expected, *, hint, why="", atol=1e-2, rtol=0.0):
    """Compare an array answer with the expected array: shape first, then values.

    ``atol`` defaults to 0.01 so that answers rounded to two decimals, as the course prints
    them, count as right.
    """
    if is_unanswered(answer):
        return unanswered(hint)
    try:
        got = np.asarray(answer, dtype=float)
    except (TypeError, ValueError):
        return not_yet(f"the answer should be an array of numbers. {hint}")
    expected = np.asarray(expected, dtype=float)
    if got.shape != expected.shape:
        return not_yet(f"your answer has shape {got.shape}, the answer has shape "
                       f"{expected.shape}. {hint}")
    if not np.all(np.isfinite(got)):
        return not_yet(f"your answer contains NaN or infinite values. {hint}")
    if not np.allclose(got, expected, atol=atol, rtol=rtol):
        wrong = int((~np.isclose(got, expected, atol=atol, rtol=rtol)).sum())
        return not_yet(f"{wrong} of {expected.size} entries are off. {hint}")
    return right(why)


def check_number(answer, expected, *, hint, why="", atol=1e-2, rtol=0.0):
    """Compare a single number with the expected one."""
    got, feedback = read_number(answer, hint)
    if feedback is not None:
        return feedback
    if not np.isclose(got, float(expected), atol=atol, rtol=rtol):
        return not_yet(hint)
    return right(why)


def check_choice(answer, expected, options, *, hint, why=""):
    """Compare a multiple-choice answer (one of ``options``, case-insensitive for strings)."""
    if is_unanswered(answer):
        return unanswered(hint)
    norm = (lambda a: a.strip().lower()) if isinstance(answer, str) else (lambda a: a)
    valid = [norm(o) if isinstance(o, str) else o for o in options]
    got = norm(answer)
    if got not in valid:
        return not_yet(f"choose one of {list(options)}. {hint}")
    exp = norm(expected) if isinstance(expected, str) else expected
    return right(why) if got == exp else not_yet(hint)
