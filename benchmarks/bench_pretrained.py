"""The pretrained model of notebook 11: the course's numpy forward pass against transformers.

For sentences of n = 12 (the course's sentence), ~64 and ~256 word pieces, one forward pass
of all-MiniLM-L6-v2 that returns every layer's attention weights:

* ``numpy``: attn_core.model.encoder.encoder_forward (what the notebook and its explorer run);
* ``numpy, tanh GELU`` is not offered: the model uses the exact (erf) GELU, and so do we;
* ``transformers``: BertModel (eager attention, output_attentions=True, torch.no_grad), the
  peer the cross-check compares with, loaded from the same files.

Each contender runs once per round, in alternating order; cells are medians over the rounds
and the ratio is the median of the per-round ratios (numpy / transformers). 2 threads for
both. Also: the one-off costs (verifying the SHA-256 and reading the weights, building the
tokenizer) and where the numpy forward spends its time on the course's sentence.

Run: ``MPLBACKEND=Agg .venv/bin/python benchmarks/bench_pretrained.py [--rounds R]``
(``make bench``). Without torch and transformers (``pip install torch==2.13.0`` then
``make crosscheck-extras``) the peer column says so and only the numpy side is timed.
It is not a timed test: it prints a table.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _machine  # noqa: E402

OVERRIDES = _machine.prepare_environment()  # re-execs this script once (thread pools)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402

from attn_core.model import encoder, pretrained  # noqa: E402
from attn_core.examples import SENTENCE  # noqa: E402, F401  (the article's sentence)

THREADS = 2
COURSE_SENTENCE = "The animal crossed the road because it was tired."
FILLER = ("Attention lets every token of a sentence weigh every other token, mixing their "
          "value vectors by weights that a softmax turns into shares of one. ")


def sentence_of_about(model, pieces):
    """The course sentence followed by filler text, cut to about ``pieces`` word pieces."""
    words = (COURSE_SENTENCE + " " + FILLER * 40).split()
    lo, hi = 1, len(words)
    while lo < hi:  # the most words whose pieces fit
        mid = (lo + hi + 1) // 2
        if len(model.tokenizer.encode(" ".join(words[:mid])).ids) <= pieces:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])


def peer():
    """(torch, BertModel) or (None, reason)."""
    try:
        import torch
        from transformers import BertModel
    except ImportError as exc:
        return None, f"not installed ({exc.name}): pip install torch==2.13.0; make crosscheck-extras"
    torch.set_num_threads(THREADS)
    model = BertModel.from_pretrained(str(pretrained.model_dir()), attn_implementation="eager")
    return (torch, model.eval()), None


def time_once(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def one_off_costs():
    directory = pretrained.model_dir()
    rows = []
    for name, fn in (
            ("SHA-256 of model.safetensors", lambda: pretrained.verify_file(
                directory / "model.safetensors",
                pretrained.MODEL_FILES_SHA256["model.safetensors"])),
            ("load_weights (verify + read + transpose)", lambda: pretrained.load_weights()),
            ("load_tokenizer (verify + build)", lambda: pretrained.load_tokenizer())):
        rows.append((name, statistics.median(time_once(fn) for _ in range(5))))
    return rows


def where_time_goes(model, ids, rounds):
    """Median time of each part of the forward pass on ``ids`` (one layer's parts x layers)."""
    w = model.weights
    x = encoder.embed(w, ids)
    layer = w.layers[0]
    hidden = encoder.gelu(x @ layer.w_in + layer.b_in)  # (n, d_ff)
    parts = {
        "embeddings + layer norm": lambda: encoder.embed(w, ids),
        "multi-head attention (x 6)": lambda: encoder.multi_head_attention(
            x, layer.w_q, layer.w_k, layer.w_v, layer.w_o, w.heads,
            biases=(layer.b_q, layer.b_k, layer.b_v, layer.b_o)),
        "feed-forward products (x 6)": lambda: (x @ layer.w_in + layer.b_in,
                                                hidden @ layer.w_out + layer.b_out),
        "GELU, exact erf (x 6)": lambda: encoder.gelu(hidden),
        "two layer norms (x 6)": lambda: [encoder.layer_norm(x, layer.ln1_gamma, layer.ln1_beta)
                                          for _ in range(2)],
    }
    out = []
    for name, fn in parts.items():
        t = statistics.median(time_once(fn) for _ in range(rounds))
        out.append((name, t * (1 if name.startswith("embeddings") else len(w.layers))))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    model = pretrained.load_model()
    bert, reason = peer()
    print("\n".join(_machine.describe(threadpool_info(), OVERRIDES)))
    print(f"- load average at start: {os.getloadavg()[0]:.1f}")
    sentences = [COURSE_SENTENCE, sentence_of_about(model, 64), sentence_of_about(model, 256)]

    with threadpool_limits(THREADS):
        print("\n## One forward pass with every layer's attention weights "
              f"(medians of {args.rounds} rounds, {THREADS} threads)\n")
        print("| n pieces | numpy (attn_core) | transformers (torch) | numpy / transformers |")
        print("|---:|---:|---:|---:|")
        for text in sentences:
            ids = model.tokenize(text)[1]
            ours, theirs, ratios = [], [], []
            for r in range(args.rounds):
                def run_ours():
                    encoder.encoder_forward(model.weights, ids)

                def run_theirs():
                    torch, m = bert
                    with torch.no_grad():
                        m(torch.from_numpy(ids[None]), output_attentions=True)

                order = [run_ours, run_theirs] if r % 2 == 0 else [run_theirs, run_ours]
                times = {}
                for fn in order:
                    if fn is run_theirs and bert is None:
                        continue
                    times[fn] = time_once(fn)
                ours.append(times[run_ours])
                if bert is not None:
                    theirs.append(times[run_theirs])
                    ratios.append(times[run_ours] / times[run_theirs])
            peer_cell = (f"{statistics.median(theirs) * 1e3:.1f} ms" if bert else reason)
            ratio_cell = f"x{statistics.median(ratios):.2f}" if bert else "-"
            print(f"| {len(ids)} | {statistics.median(ours) * 1e3:.1f} ms | {peer_cell} | "
                  f"{ratio_cell} |")

        ids = model.tokenize(COURSE_SENTENCE)[1]
        print(f"\n## Where the numpy forward pass spends its time (n = {len(ids)})\n")
        print("| part | median |")
        print("|---|---:|")
        for name, t in where_time_goes(model, ids, args.rounds):
            print(f"| {name} | {t * 1e3:.1f} ms |")

        print("\n## One-off costs (once per process: load_model() is cached)\n")
        print("| step | median of 5 |")
        print("|---|---:|")
        for name, t in one_off_costs():
            print(f"| {name} | {t * 1e3:.0f} ms |")


if __name__ == "__main__":
    main()
