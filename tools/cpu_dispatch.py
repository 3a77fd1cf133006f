"""Say which of numpy's CPU dispatch targets run here, and whether switching off AVX-512 changes it.

    python tools/cpu_dispatch.py            # what runs here, in a sentence
    python tools/cpu_dispatch.py --avx512   # "yes" or "no": does this CPU run AVX-512 kernels

`make test` runs the notebooks with numpy's native dispatch and, on a CPU that runs numpy's
AVX-512 kernels, again with NPY_DISABLE_CPU_FEATURES naming its AVX-512 targets (what a CPU
without AVX-512 runs). On a CPU without them that second pass would run the very kernels of
the first (numpy leaves the named targets off either way), so the Makefile asks ``--avx512``
and leaves it out there. This prints which case the machine is.
"""

import os
import sys

from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

#: numpy's AVX-512 dispatch targets (the names NPY_DISABLE_CPU_FEATURES takes; the Makefile's
#: NO_AVX512 lists the same).
AVX512_TARGETS = ("X86_V4", "AVX512_SKX", "AVX512_CLX", "AVX512_CNL", "AVX512_ICL", "AVX512_SPR")


def active_targets():
    """The compiled dispatch targets this CPU supports (and the environment leaves on)."""
    return [t for t in __cpu_dispatch__ if __cpu_features__.get(t, False)]


def avx512_targets():
    """The AVX-512 dispatch targets numpy runs here (empty on a CPU without AVX-512)."""
    return [t for t in active_targets() if t in AVX512_TARGETS]


def main(argv=()):
    if list(argv) == ["--avx512"]:
        print("yes" if avx512_targets() else "no")
        return
    if argv:
        sys.exit(f"usage: python tools/cpu_dispatch.py [--avx512]; got {' '.join(argv)!r}")
    active = active_targets()
    avx512 = avx512_targets()
    disabled = os.environ.get("NPY_DISABLE_CPU_FEATURES", "")
    print(f"numpy dispatch targets active here: {', '.join(active) or 'baseline only'}"
          + (f" (NPY_DISABLE_CPU_FEATURES={disabled!r})" if disabled else ""))
    if avx512:
        print(f"this CPU has AVX-512 ({', '.join(avx512)}): the pass with them switched off "
              "reproduces a CPU without AVX-512")
    else:
        print("no AVX-512 dispatch on this CPU: its own pass is already the AVX-512-off "
              "configuration (a pass with it switched off would repeat it, and is left out)")


if __name__ == "__main__":
    main(sys.argv[1:])
