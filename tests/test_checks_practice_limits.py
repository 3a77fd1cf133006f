"""The code-exercise checks against hostile learner code: endless loops, float16, in-place edits.

Also the checks' own tolerance (1e-6 relative, 1e-9 absolute, stated here independently of
the module's constants) and their copying of the inputs they hand to the learner.
"""

import concurrent.futures
import threading
import time

import numpy as np
import pytest

from attn_core.checks import _practice, practice
from attn_core.checks._base import NOT_YET, RIGHT
from attn_core.checks._practice import Case, judge

T = lambda x: np.swapaxes(x, -1, -2)  # noqa: E731


def stable(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def attention_right(q, k, v, scale=None):
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return stable(q @ T(k) * scale) @ v


def endless(q, k, v, scale=None):
    while True:
        pass


def _learner_threads():
    return [t for t in threading.enumerate() if t.name == "learner-function" and t.is_alive()]


# --- the time limit ---------------------------------------------------------------------------

@pytest.mark.slow
def test_an_endless_loop_gets_the_time_limit_feedback():
    feedback = practice.check_attention(endless)
    assert not feedback.correct and feedback.message.startswith(NOT_YET)
    assert "did not return within 5 s" in feedback.message
    assert "look for a loop that never ends" in feedback.message
    assert "the worked example" in feedback.message


def test_the_limit_counts_the_functions_processor_time_not_the_clock(monkeypatch):
    """A busy machine stretches the wall clock, not the learner's processor time: a function
    that waits longer than the limit without computing is still judged on its numbers (and a
    right answer never times out because other programs share the processor)."""
    if _practice._thread_cpu_clock() is None:
        pytest.skip("this system has no per-thread CPU clock: the limit is wall-clock time")
    monkeypatch.setattr(_practice, "TIME_LIMIT", 0.2)

    def waits(q, k, v, scale=None):
        time.sleep(0.4)  # twice the limit of wall-clock time, almost no processor time
        return attention_right(q, k, v, scale)

    assert practice.check_attention(waits).correct


def test_a_function_that_waits_forever_is_stopped_by_the_wall_clock(monkeypatch):
    monkeypatch.setattr(_practice, "TIME_LIMIT", 0.1)

    def sleeps(q, k, v, scale=None):
        while True:
            time.sleep(0.01)

    feedback = practice.check_attention(sleeps)
    assert not feedback.correct and "did not return within" in feedback.message


def test_the_runaway_thread_is_stopped_after_the_time_limit(monkeypatch):
    monkeypatch.setattr(_practice, "TIME_LIMIT", 0.3)
    feedback = practice.check_softmax(lambda x, axis=-1: endless(x, x, x))
    assert "did not return within" in feedback.message
    deadline = time.monotonic() + 2.0
    while _learner_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _learner_threads()


def test_the_time_limit_works_off_the_main_thread(monkeypatch):
    """nbval and some kernels run code off the main thread, where signals cannot be used."""
    monkeypatch.setattr(_practice, "TIME_LIMIT", 0.3)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        feedback = pool.submit(practice.check_attention, endless).result(timeout=5)
    assert "did not return within" in feedback.message


def test_a_slow_but_finishing_function_is_judged_on_its_numbers():
    def slowish(q, k, v, scale=None):
        time.sleep(0.05)
        return attention_right(q, k, v, scale)

    assert practice.check_attention(slowish).correct


# --- precision --------------------------------------------------------------------------------

def test_float16_numbers_that_are_right_to_float16_precision_name_the_dtype():
    feedback = practice.check_attention(
        lambda q, k, v, scale=None: attention_right(q, k, v, scale).astype(np.float16))
    assert not feedback.correct
    assert "float16" in feedback.message and "precision" in feedback.message
    assert "entries of your output are off" not in feedback.message


def test_wrong_float16_numbers_are_not_excused_as_precision():
    feedback = practice.check_attention(
        lambda q, k, v, scale=None: (stable(q @ T(k)) @ v).astype(np.float16))  # not scaled
    assert not feedback.correct
    assert "precision" not in feedback.message


# --- in-place code and the copies it gets -----------------------------------------------------

def test_a_function_that_scales_q_in_place_is_right():
    def in_place(q, k, v, scale=None):
        q *= q.shape[-1] ** -0.5 if scale is None else scale
        return stable(q @ T(k)) @ v

    feedback = practice.check_attention(in_place)
    assert feedback.correct, feedback.message


def test_an_in_place_softmax_is_right():
    def in_place(x, axis=-1):
        x -= x.max(axis=axis, keepdims=True)
        np.exp(x, out=x)
        x /= x.sum(axis=axis, keepdims=True)
        return x

    feedback = practice.check_softmax(in_place)
    assert feedback.correct, feedback.message


def test_the_checks_own_inputs_are_unchanged_by_a_learner_that_mutates_them():
    q = np.random.default_rng(0).standard_normal((3, 4))
    before = q.copy()
    case = Case("an input", (q,), 2 * before)

    def doubles_in_place(x):
        x *= 2.0
        return x

    # the same case twice: without a fresh copy each time, the second run doubles again
    feedback = judge(doubles_in_place, [case, case], [], what="result", stub_hint="-",
                     shape_rule="-", why="fine")
    np.testing.assert_array_equal(q, before)
    assert feedback.correct, feedback.message


def test_the_learner_gets_writeable_copies_even_of_read_only_inputs():
    q = np.arange(6.0).reshape(2, 3)
    q.flags.writeable = False
    seen = []

    def records(x):
        seen.append((x is q, x.flags.writeable))
        return x * 1.0

    assert judge(records, [Case("an input", (q,), q)], [], what="result", stub_hint="-",
                 shape_rule="-", why="fine").correct
    assert seen == [(False, True)]


# --- the tolerance: 1e-6 relative, 1e-9 absolute ----------------------------------------------

def _scaled_attention(factor):
    return lambda q, k, v, scale=None: attention_right(q, k, v, scale) * factor


def test_a_result_off_by_less_than_the_tolerance_is_right():
    feedback = practice.check_attention(_scaled_attention(1 + 5e-7))
    assert feedback.correct and feedback.message.startswith(RIGHT), feedback.message


def test_a_result_off_by_more_than_the_tolerance_is_wrong():
    feedback = practice.check_attention(_scaled_attention(1 + 3e-6))
    assert not feedback.correct
    assert "entries of your output are off" in feedback.message


def test_the_absolute_tolerance_near_zero():
    x = np.zeros((2, 3))
    case = Case("zeros", (x,), x)
    ok = judge(lambda a: a + 5e-10, [case], [], what="result", stub_hint="-", shape_rule="-",
               why="fine")
    off = judge(lambda a: a + 5e-9, [case], [], what="result", stub_hint="-", shape_rule="-",
                why="fine")
    assert ok.correct and not off.correct


# --- the other code exercises: the decoding row and the softmax backward pass ------------------

def test_the_decoding_and_backward_exercises_have_the_time_limit_too(monkeypatch):
    from attn_core.checks import decoding, learning

    monkeypatch.setattr(_practice, "TIME_LIMIT", 0.3)
    for feedback in (decoding.check_decode_row(lambda q_t, k, v: endless(q_t, k, v)),
                     learning.check_my_softmax_backward(lambda p, g: endless(p, g, g))):
        assert not feedback.correct
        assert "did not return within 0.3 s: look for a loop that never ends" in feedback.message


def test_the_decoding_and_backward_exercises_still_judge_the_numbers():
    from attn_core.checks import decoding, learning

    def row(q_t, k, v):
        return stable(q_t @ k.T / np.sqrt(q_t.shape[-1])) @ v

    def backward(p, g):
        return p * (g - (p * g).sum(axis=-1, keepdims=True))

    assert decoding.check_decode_row(row).correct
    assert learning.check_my_softmax_backward(backward).correct
    failed = decoding.check_decode_row(lambda q_t, k, v: 1 / 0)
    assert "raised ZeroDivisionError" in failed.message
