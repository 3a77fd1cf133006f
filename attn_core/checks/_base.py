"""What every exercise check shares: a Feedback object and comparisons with hints.

A check never prints and never reveals the answer: it returns a :class:`Feedback`, whose
text a notebook shows as the cell's output and whose truth value a test can assert.

Hints are progressive, the same way in every check. A wrong answer first gets what is wrong
with it (``not_yet(what_is_wrong, hint)``); the pointer towards the way (``hint``) follows on
the next wrong try of the same exercise, or at once when the learner asks for it with
``check_...(answer, hint=True)``. Every exercise check is wrapped by :func:`progressive`, which
counts the wrong tries per check; a right answer resets the count. A hint never contains code
or a formula: it says what to compute, in words (:func:`code_or_formula` states the rule as a
pattern; the tests apply it to every feedback the checks give to a wrong or missing answer).
"""

import functools
import html
import re
from collections import Counter
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
#: What a first wrong answer says after naming what is wrong, when a hint is held back.
ASK_FOR_MORE = "(Run the check again, or add hint=True, for a hint.)"


#: Code or a formula in feedback: numpy calls, a matrix product, keyword arguments, index
#: slices, a modulo; a call inside a call (``attn(ln1(x))``), a function of an expression
#: (``exp(s - m)``), a power of an expression, a product written out with * or ·, an equation
#: whose right side computes something (``g = gamma·dy``). Naming a symbol (d_k, W_q, sqrt(d_k))
#: or an input (groups = 3) is words; the course's "08 · Title" labels are not products.
CODE_OR_FORMULA = re.compile(
    r"\bnp\.\w|\bnumpy\.\w|\s@\s|\b(keepdims|offset)=|\[\s*:|\w\[[^\]]*:[^\]]*\]"
    r"|\b(argmax|unravel_index|swapaxes|diagonal|arange|reshape|einsum)\(|\s%\s"
    r"|\b[A-Za-z]\w*\(\s*[A-Za-z]\w*\("
    r"|\b[A-Za-z]\w*\([^()]*\s?[-+*/^·]\s?[^()]*\)"
    r"|\^\s?\(|\w\^\w+\s?\*"
    r"|(?<!\d)(?<!\d[a-z])\s·\s|\w·\w|(?<=\w) \* (?=\w)|(?<=\w)\*(?=\w)"
    r"|\b[A-Za-z]\w*(?:\([^()]*\))?\s?=\s?[^,;:.]*?[-+*/^·]")

#: The learner's own error quoted back (``your function raised ValueError: ... on ...``): not
#: guidance, so not held to the rule.
_QUOTED_ERROR = re.compile(r"your function raised .*? on .*?\.( |$)", re.I)


def code_or_formula(message):
    """The first piece of code or formula in a feedback text, or None (the rule on hints).

    Examples
    --------
    >>> code_or_formula("Each sub-layer's output is added to its input, x = x + attn(ln1(x)).")
    'x = x +'
    >>> code_or_formula("Divide the scores by sqrt(d_k); see 04 · Step 2.") is None
    True
    """
    found = CODE_OR_FORMULA.search(_QUOTED_ERROR.sub("", str(message)))
    return None if found is None else found.group(0)


@dataclass(frozen=True)
class Feedback:
    """The verdict on one answer: ``correct`` and a message (praise or a hint)."""

    correct: bool
    message: str
    #: The hint held back for a later try (see :func:`progressive`); empty once shown.
    more: str = ""

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


def _as_sentence(text):
    """``text`` with a capital first letter and a closing full stop (or ? or !)."""
    text = " ".join(str(text).split())
    if not text:
        return ""
    first = text.split(" ", 1)[0].rstrip(",:;.").replace("-", "")
    if first.isalpha() and (len(first) > 1 or first == "a"):  # a word, not d_k, m or q_t
        text = text[:1].upper() + text[1:]
    return text if text[-1] in ".?!)" else text + "."


def right(why=""):
    """Feedback for a correct answer, with an optional sentence on why it is right."""
    return Feedback(True, f"{RIGHT} {_as_sentence(why)}".strip())


def not_yet(wrong, hint=""):
    """Feedback for a wrong answer: what is wrong with it, and a hint held back for later.

    ``wrong`` says what is wrong with this answer (the mistake recognised, or what is off);
    ``hint`` points the way without the answer, shown on the next wrong try or on request
    (see :func:`progressive`). With ``wrong`` alone, it is the hint itself, shown at once.
    """
    if not hint:
        return Feedback(False, f"{NOT_YET} Hint: {_as_sentence(wrong)}")
    return Feedback(False, f"{NOT_YET} {_as_sentence(wrong)}", more=_as_sentence(hint))


def unanswered(hint):
    """Feedback for an exercise not attempted yet (the answer is still ``None`` or ``...``)."""
    return Feedback(False, f"{NO_ANSWER} Replace the placeholder with your answer. "
                           f"Hint: {_as_sentence(hint)}")


#: Wrong tries per exercise check since its last right answer (see :func:`progressive`).
_TRIES = Counter()


def reset_tries():
    """Forget every exercise's wrong tries (a fresh start, as in a new kernel)."""
    _TRIES.clear()


def with_hint(feedback):
    """``feedback`` with its held-back hint shown."""
    if not feedback.more:
        return feedback
    return Feedback(False, f"{feedback.message} Hint: {feedback.more}")


def progressive(check):
    """Wrap an exercise check so that its hints come in steps (one implementation for all).

    The wrapped check takes ``hint=False`` besides its own arguments. The first wrong try
    shows what is wrong and says how to get more; a second wrong try of the same check, or
    ``hint=True``, adds the hint. A right answer resets the count.
    """
    key = f"{check.__module__}.{check.__qualname__}"

    @functools.wraps(check)
    def run(*args, hint=False, **kwargs):
        feedback = check(*args, **kwargs)
        if feedback.correct:
            _TRIES.pop(key, None)
            return feedback
        if not feedback.more:
            return feedback
        _TRIES[key] += 1
        if hint or _TRIES[key] > 1:
            return with_hint(feedback)
        return Feedback(False, f"{feedback.message} {ASK_FOR_MORE}", more=feedback.more)

    run.progressive = True
    return run


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


def read_number(answer, hint, what="a single number"):
    """``(number, None)`` for an answer that is a number, else ``(None, feedback)``.

    The feedback says the exercise is unanswered, or that the answer should be ``what``.
    """
    if is_unanswered(answer):
        return None, unanswered(hint)
    try:
        return float(answer), None
    except (TypeError, ValueError):
        return None, not_yet(f"the answer should be {what}.", hint)


def read_shape(answer, hint):
    """``(shape tuple, None)`` for an answer like ``(4, 4)``, else ``(None, feedback)``."""
    if is_unanswered(answer):
        return None, unanswered(hint)
    try:
        return tuple(int(x) for x in answer), None
    except (TypeError, ValueError):
        return None, not_yet("the answer should be a shape: a tuple of whole numbers like "
                             "(rows, columns).", hint)


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
        return not_yet("the answer should be an array of numbers.", hint)
    expected = np.asarray(expected, dtype=float)
    if got.shape != expected.shape:
        return not_yet(f"your answer has shape {got.shape}, the answer has shape "
                       f"{expected.shape}.", hint)
    if not np.all(np.isfinite(got)):
        return not_yet("your answer contains NaN or infinite values.", hint)
    if not np.allclose(got, expected, atol=atol, rtol=rtol):
        wrong = int((~np.isclose(got, expected, atol=atol, rtol=rtol)).sum())
        return not_yet(f"{wrong} of {expected.size} entries are off.", hint)
    return right(why)


def check_number(answer, expected, *, hint, why="", atol=1e-2, rtol=0.0):
    """Compare a single number with the expected one."""
    got, feedback = read_number(answer, hint)
    if feedback is not None:
        return feedback
    if not np.isclose(got, float(expected), atol=atol, rtol=rtol):
        return not_yet(hint)
    return right(why)


def check_choice(answer, expected, options, *, hint, why="", wrong=None):
    """Compare a multiple-choice answer (one of ``options``, case-insensitive for strings).

    ``wrong`` maps a wrong option to what is wrong with it (the misconception it stands
    for); that is what a learner who picks it is told first, the ``hint`` on the next try.
    """
    if is_unanswered(answer):
        return unanswered(hint)
    norm = (lambda a: a.strip().lower()) if isinstance(answer, str) else (lambda a: a)
    valid = [norm(o) if isinstance(o, str) else o for o in options]
    got = norm(answer)
    if got not in valid:
        return not_yet(f"choose one of {list(options)}.", hint)
    exp = norm(expected) if isinstance(expected, str) else expected
    if got == exp:
        return right(why)
    said = {norm(k) if isinstance(k, str) else k: v for k, v in (wrong or {}).items()}
    return not_yet(said[got], hint) if got in said else not_yet(hint)
