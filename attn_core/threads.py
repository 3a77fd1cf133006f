"""How many BLAS threads the course's own paths use: the rule, in one place.

numpy hands matrix products to OpenBLAS, which by default starts one thread per core. On a
2-core machine where another process keeps one core busy, two BLAS threads wait for each
other at every product: the tiny GPT's training step took 922 ms with two threads and 52 ms
with one (COURSE.md, turn-4 facts; ``benchmarks/bench_gpt.py`` measures it again, beside two
busy processes, in its "busy machine" rows). The course's matrices are small (a few hundred
rows at most for the toys, 576 x 1536 for the real LLM's decoding step), so one thread loses
little on a quiet machine and never multiplies a step's time on a busy one. Measured
(``benchmarks/bench_gpt.py``, the tiny GPT's training step): quiet, 46 ms on one thread and
47 ms on two; beside two busy processes, 1.1 s on one and 36 s on two. (The 12-piece
pretrained encoder pass: 22 ms on one thread, 16 ms on two when quiet, 200-1000 ms on two
under load.) A rule by product size would buy at most that 1.4x, and only on a quiet machine.

Every path a learner meets runs inside :func:`blas_threads`: the explorers (every update and
every constructor, through :class:`attn_core.explorers.base.Explorer`), the live training
loops (:func:`attn_core.training.train`, :func:`attn_core.nn.train.train_gpt`), generation
(:func:`attn_core.nn.generate.generate`), the pretrained encoder's ``run`` and
``run_batch`` (:class:`attn_core.model.pretrained.PretrainedEncoder`), the notebooks' timed
cells, :func:`attn_core.fast.fast_attention`'s workers, and the tools that train the stored
runs. Scripts and benchmarks that want another count say so with
``blas_threads(n)``; inside a learner path the learner rule wins.

Examples
--------
>>> import numpy as np
>>> with blas_threads():
...     float((np.ones((2, 3)) @ np.ones((3, 2)))[0, 0])
3.0
>>> @on_learner_threads
... def product(a, b):
...     return a @ b
>>> product(np.eye(2), np.ones((2, 2))).tolist()
[[1.0, 1.0], [1.0, 1.0]]
"""

import functools

from threadpoolctl import threadpool_limits

#: BLAS threads for the paths a learner meets (see the module's docstring for why one).
LEARNER_THREADS = 1


def blas_threads(limit=LEARNER_THREADS):
    """A context manager that holds BLAS to ``limit`` threads while it is open.

    Parameters
    ----------
    limit : int or None
        Threads BLAS may use; ``None`` leaves BLAS's own choice (one per core).

    Returns
    -------
    threadpoolctl.threadpool_limits
        Use it in a ``with`` statement; the previous limits come back on exit. (Made
        without ``with``, the limit holds until its ``restore_original_limits()``.)
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    return threadpool_limits(limits=limit, user_api="blas")


def on_learner_threads(fn):
    """Decorate ``fn`` so that every call runs inside :func:`blas_threads` (the learner rule)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with blas_threads():
            return fn(*args, **kwargs)
    return wrapper
