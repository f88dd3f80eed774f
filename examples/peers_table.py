"""The peers table of docs/results.md: each peer (`strata.peers`) and built-in strategy on the
same probes, budgets, tokenizer and reader, one JSON line per run, and a Pareto plot.

Question-agnostic peers run in agnostic mode, question-aware ones (retrieval) in aware mode,
the built-ins in both. Each row says what it kept (evidence, answer and answer-token recall),
what a reader made of it (F1, with `--reader`), what it cost (context tokens per question),
and how long it took (the strategy's build time per conversation, and per question, which for
the LLM peers includes every LLM call made while reading the conversation).

    pip install 'strata-*.whl[peers]'
    python examples/peers_table.py --limit 2 --out peers.jsonl --plot peers.png
    python examples/peers_table.py --limit 2 --sample 15 --reader qwen --budgets 2000
    # the LLM peers, on the first four dated sessions of LoCoMo's first conversation:
    python examples/peers_table.py --limit 1 --sessions 4 --budgets 1000,2000 \\
        --peers langchain-summary-buffer,mem0 --builtins window,tiered,summary-buffer --model qwen

`--sessions N` cuts each LoCoMo conversation to its first N sessions and keeps the questions
whose evidence lies in them (written to a scratch file; the dataset stays where it is).
"""

import argparse
import json
import os
import re
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import strata
import strata.peers

NON_LLM = ["langchain-trim", "llamaindex-buffer", "llamaindex-vector"]


def locomo_sessions(path: Path, sessions: int, limit, out: Path) -> Path:
    """LoCoMo's file with each conversation cut to its first `sessions` dated sessions and the
    questions whose evidence (`D<session>:<turn>`) all lies in them."""
    data = json.loads(path.read_text())[: limit or None]
    for sample in data:
        conv = sample["conversation"]
        for key in list(conv):
            m = re.fullmatch(r"session_(\d+)(_date_time)?", key)
            if m and int(m.group(1)) > sessions:
                del conv[key]

        def inside(q):
            ids = [e for e in q.get("evidence", []) if re.match(r"D\d+:", e)]
            return ids and all(int(e[1:].split(":")[0]) <= sessions for e in ids)

        sample["qa"] = [q for q in sample["qa"] if inside(q)]
    out.write_text(json.dumps(data))
    return out


def data_dir() -> Path:
    root = Path(__file__).resolve().parents[1]
    return Path(os.environ.get("STRATA_DATA", root.parent / "shared/datasets"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="locomo", help="a suite name (locomo, probes) or a transcript file")
    parser.add_argument("--limit", type=int, help="only the first N conversations")
    parser.add_argument("--sessions", type=int, help="LoCoMo only: cut each conversation to its first N sessions")
    parser.add_argument("--budgets", default="1000,2000,4000")
    parser.add_argument("--peers", default=",".join(NON_LLM), help="peers to run (strata.peers.PEERS)")
    parser.add_argument("--builtins", default="window,tiered", help="built-in strategies to run beside them")
    parser.add_argument(
        "--model", help="the local model the built-ins summarise with, as `strata eval --model` (tiered too)"
    )
    parser.add_argument("--reader", help="a reader model (qwen, qwen1.5b, ...): F1 of its answers")
    parser.add_argument("--sample", type=int, help="with --reader: N questions of each category")
    parser.add_argument("--out", help="append one JSON line per run to this file")
    parser.add_argument("--plot", help="write a Pareto plot (answer recall, or F1, against tokens) here")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    peers = strata.peers.register([p for p in args.peers.split(",") if p])
    builtins = [b for b in args.builtins.split(",") if b]

    dataset = args.dataset
    scratch = tempfile.TemporaryDirectory()
    if args.sessions:
        source = data_dir() / "locomo/locomo10.json"
        cut = locomo_sessions(source, args.sessions, args.limit, Path(scratch.name) / f"locomo-sessions-1-{args.sessions}.json")
        dataset = str(cut)

    rows = []
    # A peer runs one budget at a time, so that its wall time and its counts (LLM calls,
    # contexts without retrieved memory) are per budget.
    runs = [(name, budgets) for name in builtins] + [(name, [b]) for name in peers for b in budgets]
    for name, run_budgets in runs:
        mode = "both" if name in builtins else ("aware" if strata.peers.PEERS[name][1] else "agnostic")
        before = dict(strata.peers.STATS)
        start = time.perf_counter()
        try:
            result = strata.eval(
                [dataset], [name], run_budgets, mode=mode, limit=args.limit, progress=False,
                reader=args.reader, sample=args.sample, model=args.model,
            )
        except strata.StrataError as e:
            # One strategy that cannot run is one line; the others still run.
            print(f"{name}: {type(e).__name__}: {e}")
            continue
        wall = time.perf_counter() - start
        stats = {k: v - before[k] for k, v in strata.peers.STATS.items() if v != before[k]}
        done = summarise(result, name, wall, stats, args)
        rows += done
        # Written as each run ends, so that a long run stopped part way keeps what it finished.
        if args.out:
            with open(args.out, "a") as f:
                for row in done:
                    f.write(json.dumps(row) + "\n")
    for row in rows:
        print(
            f"{row['strategy']:<25} {row['budget']:>5} {row['mode']:>8}  evidence {row['evidence_recall']:.3f}"
            f"  answer {row['answer_recall']:.3f}  answer-token {row['answer_token_recall']:.3f}"
            + (f"  F1 {row['f1']:.3f}" if row.get("f1") is not None else "")
            + f"  tokens/q {row['tokens_per_question']:.0f}  build s/conv {row['build_s_per_conversation']:.1f}"
            f"  s/q {row['s_per_question']:.2f}  wall {row['wall_s']:.0f} s"
        )
    if args.plot:
        pareto(rows, args.plot)


def summarise(result, name, wall, stats, args):
    """One row per run: the run's metrics, the reader's F1, and its costs."""
    build_ms = defaultdict(float)
    conversations = defaultdict(set)
    for b in result.builds:
        key = (b["budget"], b["mode"])
        build_ms[key] += b["build_ms"]
        conversations[key].add(b["conversation_index"])
    f1 = {(a["budget"], a["mode"]): a for a in result.answer_runs}
    rows = []
    for r in result.runs:
        key = (r["budget"], r["mode"])
        questions = r["probes"] + (r["abstention"]["probes"] if r.get("abstention") else 0)
        answers = f1.get(key)
        rows.append(
            {
                "dataset": args.dataset + (f" sessions 1-{args.sessions}" if args.sessions else ""),
                "limit": args.limit,
                "strategy": name,
                "budget": r["budget"],
                "mode": r["mode"],
                "questions": questions,
                "evidence_recall": r["evidence_recall"],
                "answer_recall": r["answer_recall"],
                "answer_token_recall": r["answer_token_recall"],
                "token_reduction": r["token_reduction"],
                "tokens_per_question": answers["context_tokens"] if answers else r["context_tokens_mean"],
                "f1": answers["f1"] if answers else None,
                "reader": args.reader,
                "reader_questions": answers["questions"] if answers else None,
                "reader_s_per_question": answers["reader_seconds"] if answers else None,
                "build_s_per_conversation": build_ms[key] / 1000 / max(len(conversations[key]), 1),
                "s_per_question": build_ms[key] / 1000 / max(questions, 1),
                "wall_s": wall,
                "peer_stats": stats,
            }
        )
    return rows


def pareto(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = "f1" if all(r.get("f1") is not None for r in rows) else "answer_recall"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in dict.fromkeys(r["strategy"] for r in rows):
        drawn = []
        for mode, marker in (("agnostic", "o"), ("aware", "s")):
            pts = sorted((r["tokens_per_question"], r[metric]) for r in rows if r["strategy"] == name and r["mode"] == mode)
            # A strategy that does not read the question (window) scores the same in both modes.
            if pts and pts not in drawn:
                drawn.append(pts)
                peer = name in strata.peers.PEERS
                ax.plot(*zip(*pts), marker=marker, linestyle="--" if peer else "-", label=f"{name} ({mode})")
    ax.set_xlabel("context tokens per question")
    ax.set_ylabel(metric.replace("_", " "))
    ax.set_title("Peers (dashed) beside Strata's built-ins (solid)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
