"""Say which of numpy's CPU dispatch targets run here, and whether switching off AVX-512 changes it.

    python tools/cpu_dispatch.py

`make test` runs the notebooks twice: with numpy's native dispatch, then with
NPY_DISABLE_CPU_FEATURES naming its AVX-512 targets (what a CPU without AVX-512 runs). This
prints, before the second pass, whether that pass can differ from the first on this machine.
"""

import os

from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

#: numpy's AVX-512 dispatch targets (the names NPY_DISABLE_CPU_FEATURES takes; the Makefile's
#: NO_AVX512 lists the same).
AVX512_TARGETS = ("X86_V4", "AVX512_SKX", "AVX512_CLX", "AVX512_CNL", "AVX512_ICL", "AVX512_SPR")


def active_targets():
    """The compiled dispatch targets this CPU supports (and the environment leaves on)."""
    return [t for t in __cpu_dispatch__ if __cpu_features__.get(t, False)]


def main():
    active = active_targets()
    avx512 = [t for t in active if t in AVX512_TARGETS]
    disabled = os.environ.get("NPY_DISABLE_CPU_FEATURES", "")
    print(f"numpy dispatch targets active here: {', '.join(active) or 'baseline only'}"
          + (f" (NPY_DISABLE_CPU_FEATURES={disabled!r})" if disabled else ""))
    if avx512:
        print(f"this CPU has AVX-512 ({', '.join(avx512)}): the pass with them switched off "
              "reproduces a CPU without AVX-512")
    else:
        print("no AVX-512 dispatch on this CPU: the pass with it switched off runs the same "
              "kernels as the first, so it repeats the first pass")


if __name__ == "__main__":
    main()
