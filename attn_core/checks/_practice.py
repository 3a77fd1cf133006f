"""The machinery shared by the code-exercise checks: run the learner's function, judge it.

A code exercise gives the learner a stub to fill in; its check calls the function on a list
of :class:`Case` inputs (the worked example, seeded random batches, edge cases) and compares
every result with attn_core's. On the first case that disagrees it compares the result with
a list of known wrong variants (:class:`Mistake`) and names the first one that reproduces it;
otherwise it says what is off (shape, NaN, how many entries) without showing the answer.
"""

import os
import sysconfig
import traceback
import warnings
from dataclasses import dataclass, field

import numpy as np

from ._base import NO_ANSWER, Feedback, not_yet, right

#: Relative and absolute tolerance of a learner's float64 result against attn_core's.
RTOL, ATOL = 1e-6, 1e-9

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARY_DIRS = tuple(os.path.dirname(p) + os.sep for p in (np.__file__,)) + (
    _PACKAGE_DIR + os.sep, *(sysconfig.get_paths()[key] + os.sep
                             for key in ("stdlib", "platstdlib", "purelib", "platlib")))

BATCH_HINT = ("It works without batch axes but not with them: a transpose must swap only the "
              "last two axes (np.swapaxes(k, -1, -2)); `.T` reverses every axis, and sums and "
              "maxima should run over axis=-1 with keepdims=True.")


@dataclass(frozen=True)
class Case:
    """One input on which the learner's function is run.

    ``label`` names the input in feedback ("the worked example"); ``expected`` is attn_core's
    result; ``nonfinite_hint`` is what to say if the learner's result holds NaN or inf here
    (for example the overflow hint on scores of 1e4).
    """

    label: str
    args: tuple
    expected: np.ndarray
    kwargs: dict = field(default_factory=dict)
    batched: bool = False
    nonfinite_hint: str = ""


@dataclass(frozen=True)
class Mistake:
    """A known wrong variant: ``variant(*args, **kwargs)`` computes what that mistake gives."""

    hint: str
    variant: object


def unanswered(hint):
    """Feedback for a function that is still the stub (raises NotImplementedError, returns None)."""
    return Feedback(False, f"{NO_ANSWER} Write your function in the cell above, in place of the "
                           f"line that raises NotImplementedError, and run that cell again. "
                           f"Hint: {hint}")


def _copy(x):
    return x.copy() if isinstance(x, np.ndarray) else x


def _learner_frame(exc):
    """The last traceback frame in the learner's code (not numpy's, attn_core's or Python's)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)[1:]
              if not os.path.abspath(f.filename).startswith(_LIBRARY_DIRS)]
    return frames[-1] if frames else None


def call(fn, case, stub_hint, passed_before=False):
    """Run ``fn`` on ``case``: ``(result, None)``, or ``(None, feedback)`` (stub or error)."""
    args = tuple(_copy(a) for a in case.args)
    kwargs = {key: _copy(a) for key, a in case.kwargs.items()}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            result = fn(*args, **kwargs)
        except NotImplementedError:
            return None, unanswered(stub_hint)
        except Exception as exc:  # the learner's bug becomes feedback, not a traceback
            frame = _learner_frame(exc)
            where = (f" (line {frame.lineno} of your code: `{(frame.line or '').strip()}`)"
                     if frame else "")
            message = str(exc).splitlines()[0] if str(exc) else ""
            text = (f"your function raised {type(exc).__name__}"
                    f"{': ' + message if message else ''} on {case.label}{where}.")
            if case.batched and passed_before:
                text += " " + BATCH_HINT
            return None, not_yet(text)
    if result is None or result is Ellipsis:
        return None, unanswered(stub_hint)
    return result, None


def _same(a, b):
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True))


def _reproduces(got, alt):
    """True if the variant ``alt`` gives the learner's ``got`` wherever ``got`` is finite.

    NaN where the variant has a number is still a match when most entries are finite (a
    learner's inverted mask leaves NaN rows where attn_core's softmax gives zeros).
    """
    if got.shape != alt.shape:
        return False
    ok = np.isfinite(got)
    if ok.mean() < 0.5:
        return _same(got, alt)
    return bool(np.allclose(got[ok], alt[ok], rtol=RTOL, atol=ATOL))


def _variant(mistake, case):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            out = mistake.variant(*case.args, **case.kwargs)
        except Exception:  # a variant that cannot run on this input matches nothing
            return None
    try:
        return np.asarray(out, dtype=float)
    except (TypeError, ValueError):
        return None


def _as_array(result, what, case):
    if isinstance(result, tuple):
        return None, not_yet(f"your function returns a tuple of {len(result)} things on "
                             f"{case.label}; return only the {what}, as one array.")
    try:
        return np.asarray(result, dtype=float), None
    except (TypeError, ValueError):
        return None, not_yet(f"your function should return the {what} as an array of numbers; "
                             f"on {case.label} it returned a {type(result).__name__}.")


def judge(fn, cases, mistakes, *, what, stub_hint, shape_rule, why):
    """Run ``fn`` on every case and return the :class:`Feedback` on the first disagreement.

    Parameters
    ----------
    fn : callable
        The learner's function.
    cases : sequence of Case
        Inputs in order: the first that disagrees decides the feedback.
    mistakes : sequence of Mistake
        Known wrong variants, most telling first.
    what : str
        What the function returns ("scores", "output").
    stub_hint : str
        The hint shown while the function is still the stub.
    shape_rule : str
        The shape the result should have, in words and symbols.
    why : str
        The sentence of praise when every case agrees.
    """
    if not callable(fn):
        if fn is None or fn is Ellipsis:
            return unanswered(stub_hint)
        return not_yet("pass your function itself (its name, without brackets or arguments).")
    passed = False
    pending, pending_case = [], None  # mistakes that all reproduced an earlier failing case
    for case in cases:
        result, feedback = call(fn, case, stub_hint, passed)
        if feedback is None:
            got, feedback = _as_array(result, what, case)
        if feedback is not None:
            return _named(pending, pending_case) if pending else feedback
        expected = np.asarray(case.expected, dtype=float)
        if _same(got, expected) and np.isfinite(got).all() == np.isfinite(expected).all():
            passed = True
            continue
        finite = bool(np.isfinite(got).all())
        if not finite and case.nonfinite_hint and not pending:
            return not_yet(f"on {case.label} your {what} contain NaN or infinite values: "
                           f"{case.nonfinite_hint}")
        matches = [m for m in mistakes
                   if (alt := _variant(m, case)) is not None and _reproduces(got, alt)
                   and not _same(alt, expected)]
        if pending:  # an earlier input could not tell these mistakes apart: this one may
            matches = [m for m in pending if m in matches] or pending
        if len(matches) == 1 or (pending and matches is pending):
            return _named(matches, pending_case or case)
        if matches:
            pending, pending_case = matches, pending_case or case
            continue
        extra = " " + BATCH_HINT if case.batched and passed else ""
        if got.shape != expected.shape:
            return not_yet(f"on {case.label} your function returns shape {got.shape}; "
                           f"{shape_rule}, here {expected.shape}.{extra}")
        if not finite:
            return not_yet(f"on {case.label} your {what} contain NaN or infinite values.")
        off = int((~np.isclose(got, expected, rtol=RTOL, atol=ATOL)).sum())
        return not_yet(f"on {case.label}, {off} of {expected.size} entries of your {what} are "
                       f"off. Go through the formula one step at a time.{extra}")
    if pending:
        return _named(pending, pending_case)
    return right(why)


def _named(mistakes, case):
    return not_yet(f"on {case.label}, {mistakes[0].hint}")
