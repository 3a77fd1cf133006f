"""The machinery shared by the code-exercise checks: run the learner's function, judge it.

A code exercise gives the learner a stub to fill in; its check calls the function on a list
of :class:`Case` inputs (the worked example, seeded random batches, edge cases) and compares
every result with attn_core's. On the first case that disagrees it compares the result with
a list of known wrong variants (:class:`Mistake`) and names the first one that reproduces it;
otherwise it says what is off (shape, NaN, how many entries) without showing the answer.
"""

import ctypes
import os
import sysconfig
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field

import numpy as np

from ._base import NO_ANSWER, Feedback, not_yet, right

#: Relative and absolute tolerance of a learner's float64 result against attn_core's.
RTOL, ATOL = 1e-6, 1e-9

#: Seconds of processor time a learner's function may use on one input before the check gives
#: up on it: its own thread's CPU clock where the system has one (Linux, the BSDs), so that a
#: busy machine, which stretches the wall-clock time, never turns a right answer into a
#: timeout; elsewhere, seconds of wall-clock time.
TIME_LIMIT = 5.0
#: A function that waits without computing (``time.sleep``, ``input()``) uses no processor
#: time: it is stopped after this many times ``TIME_LIMIT`` of wall-clock time.
WAIT_FACTOR = 12

#: A result in a lower-precision float dtype counts as "right to its precision" within this
#: many units of that dtype's machine epsilon (relative and absolute).
LOW_PRECISION_EPS = 16

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARY_DIRS = tuple(os.path.dirname(p) + os.sep for p in (np.__file__,)) + (
    _PACKAGE_DIR + os.sep, *(sysconfig.get_paths()[key] + os.sep
                             for key in ("stdlib", "platstdlib", "purelib", "platlib")))

BATCH_HINT = ("It works without batch axes but not with them: a transpose must swap only the "
              "last two axes (reversing every axis also moves the batch axes), and sums and "
              "maxima should run along the last axis and keep it, so that they line up with "
              "the rows they came from.")


@dataclass(frozen=True)
class Case:
    """One input on which the learner's function is run.

    ``label`` names the input in feedback ("the worked example"); ``expected`` is attn_core's
    result; ``nonfinite_hint`` is what to say if the learner's result holds NaN or inf here
    (for example the overflow hint on scores of 1e4). ``batch_hint`` replaces
    :data:`BATCH_HINT` on a ``batched`` case where transposes and row sums are not the point
    (a function of raw bytes).
    """

    label: str
    args: tuple
    expected: np.ndarray
    kwargs: dict = field(default_factory=dict)
    batched: bool = False
    nonfinite_hint: str = ""
    batch_hint: str = ""


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
    """A writeable copy of an array input (the learner may change it in place), else ``x``."""
    return np.array(x, copy=True) if isinstance(x, np.ndarray) else x


class _Outcome:
    """What the learner's function did in its thread: a result, an exception, or neither yet."""

    def __init__(self):
        self.result, self.error, self.done = None, None, threading.Event()
        self.cpu_clock = None  # the thread's CPU clock id, set by the thread itself


def _thread_cpu_clock():
    """The calling thread's CPU clock id, or None where the system has none."""
    try:
        clock = time.pthread_getcpuclockid(threading.get_ident())
        time.clock_gettime(clock)
    except (AttributeError, OSError, OverflowError):
        return None
    return clock


def _wait(outcome, limit):
    """Wait until the function returns (True) or has used ``limit`` seconds of its thread's
    processor time, or ``WAIT_FACTOR * limit`` of wall-clock time (False)."""
    if outcome.cpu_clock is None:
        return outcome.done.wait(limit)
    deadline = time.monotonic() + WAIT_FACTOR * limit
    while not outcome.done.wait(min(0.05, limit)):
        try:
            used = time.clock_gettime(outcome.cpu_clock)
        except OSError:  # the thread ended between the two lines: done is set now
            continue
        if used >= limit or time.monotonic() >= deadline:
            return outcome.done.is_set()
    return True


def _stop_thread(thread):
    """Ask a runaway thread to stop: raise SystemExit inside it at its next bytecode.

    Best effort (CPython only): a pure-Python loop stops within microseconds; a thread stuck
    inside one long C call stops when that call returns. The thread is a daemon either way,
    so it never keeps the interpreter from exiting.
    """
    set_async_exc = getattr(getattr(ctypes, "pythonapi", None), "PyThreadState_SetAsyncExc", None)
    if set_async_exc is not None and thread.ident is not None and thread.is_alive():
        set_async_exc(ctypes.c_ulong(thread.ident), ctypes.py_object(SystemExit))


def run_with_time_limit(fn, args, kwargs, limit=None):
    """Run ``fn(*args, **kwargs)`` in a daemon thread; wait until it has used ``limit``
    seconds of processor time (see :data:`TIME_LIMIT`) at most.

    ``limit`` defaults to :data:`TIME_LIMIT`.

    Returns
    -------
    outcome : object with ``result``, ``error`` and ``done`` (a threading.Event)
        ``done`` is unset when the function did not return in time; the thread is then
        asked to stop and left behind.

    Notes
    -----
    A thread, not a signal: ``signal.alarm`` exists only on Unix and only in the main thread,
    and JupyterLab kernels, nbval and plain Python all allow threads. Floating-point warnings
    are silenced inside the thread (``np.errstate`` is per thread).
    """
    outcome = _Outcome()
    started = threading.Event()

    def target():
        outcome.cpu_clock = _thread_cpu_clock()
        started.set()
        try:
            with np.errstate(all="ignore"):
                outcome.result = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller, not raised here
            outcome.error = exc
        finally:
            outcome.done.set()

    thread = threading.Thread(target=target, name="learner-function", daemon=True)
    thread.start()
    started.wait()
    if not _wait(outcome, TIME_LIMIT if limit is None else limit):
        _stop_thread(thread)
    return outcome


def _learner_frame(exc):
    """The last traceback frame in the learner's code (not numpy's, attn_core's or Python's)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)[1:]
              if not os.path.abspath(f.filename).startswith(_LIBRARY_DIRS)]
    return frames[-1] if frames else None


class LearnerTimeout(Exception):
    """The learner's function did not return within :data:`TIME_LIMIT` seconds of its time."""


def time_limit_message(where=""):
    """The feedback sentence for a function that overran (``where``: " on the worked example")."""
    return (f"your function did not return within {TIME_LIMIT:g} s{where}: look for a loop "
            f"that never ends.")


def run_learner(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` under the time limit: its result, its exception re-raised, or
    :class:`LearnerTimeout` (for the checks that handle the learner's errors themselves)."""
    outcome = run_with_time_limit(fn, args, kwargs)
    if not outcome.done.is_set():
        raise LearnerTimeout(time_limit_message())
    if outcome.error is not None:
        raise outcome.error
    return outcome.result


def call(fn, case, stub_hint, passed_before=False):
    """Run ``fn`` on ``case``: ``(result, None)``, or ``(None, feedback)`` (stub or error)."""
    args = tuple(_copy(a) for a in case.args)
    kwargs = {key: _copy(a) for key, a in case.kwargs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        outcome = run_with_time_limit(fn, args, kwargs)
    if not outcome.done.is_set():
        return None, not_yet(time_limit_message(f" on {case.label}"))
    exc, result = outcome.error, outcome.result
    if isinstance(exc, NotImplementedError):
        return None, unanswered(stub_hint)
    if exc is not None and not isinstance(exc, Exception):
        raise exc  # KeyboardInterrupt, SystemExit: not the learner's bug to report
    if exc is not None:  # the learner's bug becomes feedback, not a traceback
        frame = _learner_frame(exc)
        where = (f" (line {frame.lineno} of your code: `{(frame.line or '').strip()}`)"
                 if frame else "")
        message = str(exc).splitlines()[0] if str(exc) else ""
        text = (f"your function raised {type(exc).__name__}"
                f"{': ' + message if message else ''} on {case.label}{where}.")
        if case.batched and passed_before:
            text += " " + (case.batch_hint or BATCH_HINT)
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


def _low_precision(result):
    """The dtype of a float result less precise than float64, else None."""
    dtype = getattr(result, "dtype", None)
    if dtype is None or dtype.kind != "f" or np.finfo(dtype).eps <= np.finfo(np.float64).eps:
        return None
    return dtype


def _precision_feedback(dtype, got, expected, what, label):
    """Feedback naming the dtype when ``got`` is right to ``dtype``'s precision, else None
    (``label`` names the case, e.g. "the 3-token example")."""
    tol = LOW_PRECISION_EPS * float(np.finfo(dtype).eps)
    if got.shape != expected.shape or not np.allclose(got, expected, rtol=tol, atol=tol):
        return None
    digits = int(np.finfo(dtype).precision)
    return not_yet(f"on {label} your function returns {dtype}: its {what} are right to "
                   f"{dtype} precision (about {digits} significant digits), but the check "
                   f"compares at float64 precision. Compute in float64 and return float64 (do "
                   f"not convert the inputs or the result to {dtype}).")


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
            return _named(pending, pending_case, stub_hint) if pending else feedback
        expected = np.asarray(case.expected, dtype=float)
        if _same(got, expected) and np.isfinite(got).all() == np.isfinite(expected).all():
            passed = True
            continue
        low = _low_precision(result)
        if low is not None and not pending:
            feedback = _precision_feedback(low, got, expected, what, case.label)
            if feedback is not None:
                return feedback
        finite = bool(np.isfinite(got).all())
        # On an input that is there to catch NaN or overflow, a NaN result fits a variant only
        # where the variant has NaN too (the same slip), and a result with no finite entry
        # fits none (every overflowing variant would match): the input's own hint says it.
        strict = not finite and bool(case.nonfinite_hint)
        telling = [] if strict and not np.isfinite(got).any() else mistakes
        fits = _same if strict else _reproduces
        matches = [m for m in telling
                   if (alt := _variant(m, case)) is not None and fits(got, alt)
                   and not _same(alt, expected)]
        if pending:  # an earlier input could not tell these mistakes apart: this one may
            matches = [m for m in pending if m in matches] or pending
        if len(matches) == 1 or (pending and matches is pending):
            return _named(matches, pending_case or case, stub_hint)
        if matches:
            pending, pending_case = matches, pending_case or case
            continue
        if not finite and case.nonfinite_hint:
            return not_yet(f"on {case.label} your {what} contain NaN or infinite values: "
                           f"{case.nonfinite_hint}", stub_hint)
        extra = " " + (case.batch_hint or BATCH_HINT) if case.batched and passed else ""
        if got.shape != expected.shape:
            return not_yet(f"on {case.label} your function returns shape {got.shape}; "
                           f"{shape_rule}, here {expected.shape}.{extra}", stub_hint)
        if not finite:
            return not_yet(f"on {case.label} your {what} contain NaN or infinite values.",
                           stub_hint)
        off = int((~np.isclose(got, expected, rtol=RTOL, atol=ATOL)).sum())
        return not_yet(f"on {case.label}, {off} of {expected.size} entries of your {what} are "
                       f"off.{extra}", stub_hint)
    if pending:
        return _named(pending, pending_case, stub_hint)
    return right(why)


def _named(mistakes, case, stub_hint=""):
    """Feedback naming the mistake seen on ``case`` (each, if the inputs could not tell them
    apart); the steps held back."""
    if len(mistakes) == 1:
        return not_yet(f"on {case.label}, {mistakes[0].hint}", stub_hint)
    return not_yet(f"on {case.label} your result fits {len(mistakes)} mistakes, and no later "
                   "input told them apart: "
                   + " Or: ".join(m.hint for m in mistakes), stub_hint)
