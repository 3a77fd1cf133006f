"""SmolLM2-135M-Instruct (notebook 17): the course's numpy decoder against the same model in
PyTorch (transformers' LlamaForCausalLM, loaded from the same GGUF file), in one run, beside
the floor of a decoding step.

Measured, with the same BLAS/torch thread count on both sides (default 1: what a learner's
paths use, ``attn_core.threads.blas_threads``):

* the floor of one decoding step: every weight matrix read once by a matrix-vector product
  (the 30 blocks' 7 matrices and the tied 49,152 x 576 unembedding: 211 matrices), the least
  a step can cost when the weights do not fit in the caches; each path's share of it is
  floor time / step time (1 = at the floor);
* prefill: the prompt of n tokens through every layer into the KV caches, and the logits of
  its last position (what a generation draws the first token from; transformers' own
  ``generate`` also asks for the last position only, ``logits_to_keep=1``), in tokens/s: the
  numpy side through :class:`attn_core.model.llm_fast.LLMDecoder` (the path ``chat`` runs),
  the torch side through ``model(ids, use_cache=True, logits_to_keep=1)``;
* decoding: one new token through the caches, at a context of t tokens (tokens/s): the
  numpy side through ``LLMDecoder.step`` (what ``chat`` runs) and through the course's
  readable cached step :func:`attn_core.nn.forward_cached` (immutable caches, every product
  checked), the torch side through ``model(ids, past_key_values=..., use_cache=True)``;
* each contender runs once per round, in alternating order; cells are medians over the
  rounds, the ratio the median of the per-round ratios (numpy / torch, for tokens/s: above
  1 means numpy is faster);
* the peak resident memory of the numpy path (a fresh process that loads the model, answers
  a question, prefills 1,024 tokens and computes the loss of 1,100 tokens with a window),
  the budget being Binder's 1.5 GB for the notebook.

It prints which path ran on each side (BLAS library and threads, torch threads, the model
class and attention implementation, dtypes), the load average at start and end (the machine
may be shared: the ratios come from one interleaved run), and writes its section of
benchmarks/RESULTS.md.

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

from attn_core.model.llm_fast import LLMDecoder  # noqa: E402
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
from attn_core.model.llm_generate import chat, llm_generate
from attn_core.model.llm_tokenizer import llm_tokenizer
def high_water():  # this process's peak resident set, KiB (ru_maxrss would carry the parent's)
    return next(int(line.split()[1]) for line in open("/proc/self/status")
                if line.startswith("VmHWM"))
params, config = load_llm()
after_load = high_water()
reply = chat("What is the capital of France?", greedy=True)
ids = llm_tokenizer().encode({text!r}).ids[:1100]
losses = llm_losses(params, config, ids, window=256, n_sink=4)
long = llm_generate(ids[:1024], 4, greedy=True, model=(params, config))
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
    """(wall seconds, CPU seconds of this process) of one call."""
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def interleaved(calls, rounds):
    """{name: median seconds} and {name: [seconds per round]} of each call (None: left out),
    every call once per round, the order reversed every other round; and the same
    {name: [CPU seconds per round]} (this process's CPU time: both sides run on one thread,
    so it leaves out the time another process held the core)."""
    times = {name: [] for name in calls if calls[name] is not None}
    cpu = {name: [] for name in times}
    for r in range(rounds):
        order = list(times) if r % 2 == 0 else list(reversed(times))
        for name in order:
            wall, used = time_once(calls[name])
            times[name].append(wall)
            cpu[name].append(used)
    return {name: statistics.median(t) for name, t in times.items()}, times, cpu


def ratio(times, a, b):
    """Median over the rounds of ``times[b] / times[a]`` (a's speed over b's: above 1, a is
    faster), or None if either is missing."""
    if a not in times or b not in times:
        return None
    return statistics.median(tb / ta for ta, tb in zip(times[a], times[b]))


def floor_pass(params):
    """A callable that reads every weight matrix once by a matrix-vector product (one
    decoding step's floor), and how many matrices and bytes it reads."""
    mats = [a.T for name, a in params.items() if a.ndim == 2 and name != "wte"]  # (out, in)
    xs = {n: np.ones(n, dtype=params["wte"].dtype) for n in {a.shape[1] for a in mats}}

    def run():
        for a in mats:
            a @ xs[a.shape[1]]  # (out, in) @ (in,) -> (out,)

    return run, len(mats), sum(a.nbytes for a in mats)


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
    floor, n_mats, floor_bytes = floor_pass(params)
    blas = [f"{i['internal_api']} {i.get('version', '')} ({i['num_threads']} threads)"
            for i in threadpool_info() if i["user_api"] == "blas"]
    load_start = os.getloadavg()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    md = ["## SmolLM2-135M-Instruct, numpy against PyTorch (`benchmarks/bench_llm.py`)", "",
          f"Run on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} from commit {commit}"
          f"{' (with uncommitted changes)' if dirty else ''}.", ""]
    md += list(_machine.describe(threadpool_info(), OVERRIDES))
    md += [f"- numpy side: attn_core.model.llm_fast.LLMDecoder (what `chat` runs; its prefill "
           f"through attn_core.fast's causal attention), and the course's readable cached step "
           f"attn_core.nn.forward_cached (nn.decoder through nn.block, immutable KV caches of "
           f"attn_core.decoding), float32, BLAS {', '.join(blas)}, held to {args.threads} "
           f"thread(s) while timed",
           f"- torch side: {about}",
           f"- the floor: {n_mats} weight matrices ({floor_bytes / 1e6:.0f} MB of float32) each "
           "read once by a matrix-vector product, one after the other, timed in the same "
           "rounds; share = floor time / step time",
           f"- medians of {args.rounds} interleaved rounds; ratio = numpy tokens/s over torch "
           "tokens/s (above 1: numpy faster), from wall time and from each side's CPU time "
           "(time.process_time: one thread each, so the CPU ratio leaves out the time other "
           "processes held the core); prefill: the logits of the last position only, on both "
           "sides", ""]
    md += ["| what | floor | numpy (LLMDecoder) | numpy (forward_cached) | PyTorch "
           "(transformers) | LLMDecoder / PyTorch | the same, CPU time | share of the floor: "
           "LLMDecoder, forward_cached, PyTorch |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]

    def rate(n_tokens, med, name):
        return f"{n_tokens / med[name]:.1f} tok/s" if name in med else "-"

    def row(label, n_tokens, med, times, cpu, floor_steps=None):
        theirs = rate(n_tokens, med, "theirs") if "theirs" in med else about
        r, r_cpu = ratio(times, "ours", "theirs"), ratio(cpu, "ours", "theirs")
        shares = "-"
        if floor_steps:
            shares = ", ".join(f"{100 * med['floor'] / med[k]:.0f}%"  # same steps each
                               if k in med else "-" for k in ("ours", "reference", "theirs"))
        md.append(f"| {label} | {rate(floor_steps or 1, med, 'floor') if floor_steps else '-'}"
                  f" | {rate(n_tokens, med, 'ours')} | {rate(n_tokens, med, 'reference')} | "
                  f"{theirs} | {f'x{r:.2f}' if r else '-'} | "
                  f"{f'x{r_cpu:.2f}' if r_cpu else '-'} | {shares} |")
        print(md[-1], flush=True)

    with threadpool_limits(args.threads, user_api="blas"):
        for n in (32, 256, 1024):
            ids = ids_all[:n]
            decoder = LLMDecoder(params, config, n)

            def ours_prefill(ids=ids, decoder=decoder):
                decoder.start(ids)

            def theirs_prefill(ids=ids):
                with torch.no_grad():
                    model(torch.from_numpy(ids[None]), use_cache=True, logits_to_keep=1)

            med, times, cpu = interleaved({"ours": ours_prefill,
                                           "theirs": theirs_prefill if model else None},
                                          args.rounds)
            row(f"prefill, n = {n}", n, med, times, cpu)
        for t in (32, 512):
            ids, new = ids_all[:t], [int(tok) for tok in ids_all[t:t + args.steps]]
            _, caches0 = prefill(params, config, ids)
            decoder = LLMDecoder(params, config, t + args.steps)
            decoder.start(ids)
            state = {}
            if model is not None:
                with torch.no_grad():
                    state["past"] = model(torch.from_numpy(ids[None]), use_cache=True
                                          ).past_key_values

            def floor_steps(steps=args.steps):
                for _ in range(steps):
                    floor()

            def ours_decode(decoder=decoder, t=t, new=new):
                decoder.length = t  # every round from the same cache (rows t.. rewritten)
                for tok in new:
                    decoder.step(tok)

            def reference_decode(caches0=caches0, new=new):
                caches = caches0  # immutable: every round starts from the same cache
                for tok in new:
                    _, caches = forward_cached(params, config, np.array([tok]), caches)

            def theirs_decode(state=state, new=new):
                past = copy.deepcopy(state["past"])  # every round from the same cache
                with torch.no_grad():
                    for tok in new:
                        past = model(torch.tensor([[tok]]), past_key_values=past,
                                     use_cache=True).past_key_values

            med, times, cpu = interleaved({"floor": floor_steps, "ours": ours_decode,
                                           "reference": reference_decode,
                                           "theirs": theirs_decode if model else None},
                                          args.rounds)
            row(f"decoding, context {t} (+{args.steps} tokens)", args.steps, med, times, cpu,
                floor_steps=args.steps)
    load_end = os.getloadavg()
    md += ["", f"Load average (1, 5, 15 min) at start {', '.join(f'{x:.1f}' for x in load_start)}"
           f"; at the end of the timed rows {', '.join(f'{x:.1f}' for x in load_end)} (the "
           "machine has 2 cores: above 2, other processes shared them; the ratios come from "
           "the same rounds)."]

    out = subprocess.run([sys.executable, "-c", PEAK_SCRIPT.format(text=TEXT)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    after_load, peak, n_loss = int(out[0]) / 1024, int(out[1]) / 1024, int(out[2])
    md += ["", f"Peak resident memory of the numpy path (a fresh process, no torch; VmHWM): "
           f"{after_load:.0f} MB after load_llm(), {peak:.0f} MB after a greedy chat answer, "
           f"the losses of {n_loss} tokens under a 256-token window with 4 sinks and 4 "
           f"tokens after a prompt of 1,024 "
           f"(Binder's limit: 1536 MB).", ""]
    print("\n".join(md[-2:]))
    if not args.no_write:
        _results.write_block(RESULTS, "llm", md)


if __name__ == "__main__":
    main()
