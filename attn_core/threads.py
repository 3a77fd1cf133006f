"""How many BLAS threads the course's own paths use: the rule, in one place.

numpy hands matrix products to OpenBLAS, which by default starts one thread per core. On a
2-core machine where another process keeps one core busy, two BLAS threads wait for each
other at every product: the tiny GPT's training step took 922 ms with two threads and 52 ms
with one (COURSE.md, turn-4 facts). The course's matrices are small (a few hundred rows at
most for the toys, 576 x 1536 for the real LLM's decoding step), so one thread loses little
on a quiet machine and never multiplies a step's time on a busy one.

Every path a learner meets (the explorers, live training cells, generation, the pretrained
models' forward passes) runs inside :func:`blas_threads`; scripts and benchmarks that want
another count say so with ``blas_threads(n)``.

Examples
--------
>>> import numpy as np
>>> with blas_threads():
...     float((np.ones((2, 3)) @ np.ones((3, 2)))[0, 0])
3.0
"""

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
        Use it in a ``with`` statement; the previous limits come back on exit.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    return threadpool_limits(limits=limit, user_api="blas")
