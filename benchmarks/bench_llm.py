"""SmolLM2-135M-Instruct (notebook 17): the course's numpy decoder against the same model in
PyTorch (transformers' LlamaForCausalLM, loaded from the same GGUF file), in one run.

Measured, with the same BLAS/torch thread count on both sides (default 1: what a learner's
paths use, ``attn_core.threads.blas_threads``):

* prefill: one forward pass over a prompt of n tokens that fills the KV caches (tokens/s);
* decoding: one new token through the caches, at a context of t tokens (tokens/s), the
  numpy side through :func:`attn_core.nn.forward_cached` (the loop ``chat`` runs), the torch
  side through ``model(ids, past_key_values=..., use_cache=True)``;
* each contender runs once per round, in alternating order; cells are medians over the
  rounds, the ratio the median of the per-round ratios (numpy / torch, for tokens/s: above
  1 means numpy is faster);
* the peak resident memory of the numpy path (a fresh process that loads the model, answers
  a question and computes the loss of 1,100 tokens with a window), the budget being
  Binder's 1.5 GB for the notebook.

It prints which path ran on each side (BLAS library and threads, torch threads, the model
class and attention implementation, dtypes) and writes its section of benchmarks/RESULTS.md.

Run: ``MPLBACKEND=Agg .venv/bin/python benchmarks/bench_llm.py [--rounds R] [--threads T]``
(``make bench``). Without torch, transformers and accelerate (``pip install torch==2.13.0``
then ``make crosscheck-extras``) the torch column says so.
It is not a timed test: it prints a table.
"""

import argparse
import copy
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _machine  # noqa: E402
import _results  # noqa: E402

OVERRIDES = _machine.prepare_environment()  # re-execs this script once (thread pools)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402

from attn_core.model.llm_file import llm_path, load_llm  # noqa: E402
from attn_core.model.llm_tokenizer import llm_tokenizer  # noqa: E402
from attn_core.nn import forward_cached, prefill  # noqa: E402

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
TEXT = ("Attention lets every word of a sentence look at the other words and decide which of "
        "them matter for its meaning. ") * 80

PEAK_SCRIPT = """
import numpy as np
from attn_core.model.llm_file import load_llm
from attn_core.model.llm import llm_losses
from attn_core.model.llm_generate import chat
from attn_core.model.llm_tokenizer import llm_tokenizer
def high_water():  # this process's peak resident set, KiB (ru_maxrss would carry the parent's)
    return next(int(line.split()[1]) for line in open("/proc/self/status")
                if line.startswith("VmHWM"))
params, config = load_llm()
after_load = high_water()
reply = chat("What is the capital of France?", greedy=True)
ids = llm_tokenizer().encode({text!r}).ids[:1100]
losses = llm_losses(params, config, ids, window=256, n_sink=4)
peak = high_water()
print(after_load, peak, len(ids), reply.text)
"""


def peer(threads):
    """(torch, model, description) or (None, None, reason)."""
    try:
        import accelerate  # noqa: F401  (transformers needs it to load a GGUF)
        import torch
        import transformers
    except ImportError as exc:
        return None, None, (f"not installed ({exc.name}): pip install torch==2.13.0; "
                            "make crosscheck-extras")
    torch.set_num_threads(threads)
    path = llm_path()
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    about = (f"transformers {transformers.__version__} {type(model).__name__}, attention "
             f"'{model.config._attn_implementation}', {next(model.parameters()).dtype}, torch "
             f"{torch.__version__} with {torch.get_num_threads()} thread(s), eager (no compile)")
    return torch, model, about


def time_once(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleaved(calls, rounds):
    """Median seconds of each call and the median per-round ratio ours / theirs."""
    times = {name: [] for name in calls if calls[name] is not None}
    for r in range(rounds):
        order = list(times) if r % 2 == 0 else list(reversed(times))
        for name in order:
            times[name].append(time_once(calls[name]))
    med = {name: statistics.median(t) for name, t in times.items()}
    ratio = (statistics.median(o / t for o, t in zip(times["ours"], times["theirs"]))
             if "theirs" in times else None)
    return med, ratio


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=16, help="decoding steps timed per round")
    ap.add_argument("--no-write", action="store_true", help="print only, keep RESULTS.md")
    args = ap.parse_args()
    params, config = load_llm()
    ids_all = np.array(llm_tokenizer().encode(TEXT).ids)
    torch, model, about = peer(args.threads)
    blas = [f"{i['internal_api']} {i.get('version', '')} ({i['num_threads']} threads)"
            for i in threadpool_info() if i["user_api"] == "blas"]
    md = ["## SmolLM2-135M-Instruct, numpy against PyTorch (`benchmarks/bench_llm.py`)", ""]
    md += list(_machine.describe(threadpool_info(), OVERRIDES))
    md += [f"- load average at start: {os.getloadavg()[0]:.1f}",
           f"- numpy side: attn_core (nn.decoder through nn.block, KV caches of "
           f"attn_core.decoding), float32, BLAS {', '.join(blas)}, held to {args.threads} "
           f"thread(s) while timed",
           f"- torch side: {about}",
           f"- medians of {args.rounds} interleaved rounds; ratio = numpy tokens/s over torch "
           "tokens/s (above 1: numpy faster)", ""]
    md += ["| what | numpy (attn_core) | PyTorch (transformers) | numpy / PyTorch |",
           "|---|---:|---:|---:|"]

    def row(label, n_tokens, med, ratio):
        ours = f"{n_tokens / med['ours']:.1f} tok/s"
        theirs = f"{n_tokens / med['theirs']:.1f} tok/s" if "theirs" in med else about
        r = f"x{1 / ratio:.2f}" if ratio else "-"
        md.append(f"| {label} | {ours} | {theirs} | {r} |")
        print(md[-1], flush=True)

    with threadpool_limits(args.threads, user_api="blas"):
        for n in (32, 256, 1024):
            ids = ids_all[:n]

            def ours_prefill(ids=ids):
                prefill(params, config, ids)

            def theirs_prefill(ids=ids):
                with torch.no_grad():
                    model(torch.from_numpy(ids[None]), use_cache=True)

            med, ratio = interleaved({"ours": ours_prefill,
                                      "theirs": theirs_prefill if model else None}, args.rounds)
            row(f"prefill, n = {n}", n, med, ratio)
        for t in (32, 512):
            ids, new = ids_all[:t], ids_all[t:t + args.steps]
            _, caches0 = prefill(params, config, ids)
            state = {}
            if model is not None:
                with torch.no_grad():
                    state["past"] = model(torch.from_numpy(ids[None]), use_cache=True
                                          ).past_key_values

            def ours_decode(caches0=caches0, new=new):
                caches = caches0  # immutable: every round starts from the same cache
                for tok in new:
                    _, caches = forward_cached(params, config, np.array([tok]), caches)

            def theirs_decode(state=state, new=new):
                past = copy.deepcopy(state["past"])  # every round from the same cache
                with torch.no_grad():
                    for tok in new:
                        past = model(torch.tensor([[int(tok)]]), past_key_values=past,
                                     use_cache=True).past_key_values

            med, ratio = interleaved({"ours": ours_decode,
                                      "theirs": theirs_decode if model else None}, args.rounds)
            row(f"decoding, context {t} (+{args.steps} tokens)", args.steps, med, ratio)

    out = subprocess.run([sys.executable, "-c", PEAK_SCRIPT.format(text=TEXT)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    after_load, peak, n_loss = int(out[0]) / 1024, int(out[1]) / 1024, int(out[2])
    md += ["", f"Peak resident memory of the numpy path (a fresh process, no torch; VmHWM): "
           f"{after_load:.0f} MB after load_llm(), {peak:.0f} MB after a greedy chat answer "
           f"and the losses of {n_loss} tokens under a 256-token window with 4 sinks "
           f"(Binder's limit: 1536 MB).", ""]
    print("\n".join(md[-2:]))
    if not args.no_write:
        _results.write_block(RESULTS, "llm", md)


if __name__ == "__main__":
    main()
