"""One peer beside Strata's `tiered` on one LoCoMo conversation, on one harness: the starting
point to copy when comparing a memory you use with Strata's.

The peer (`strata.peers`: LangChain's `trim_messages` or summary buffer, LlamaIndex's buffer or
vector memory, Mem0) is registered as a strategy and scored by `strata.eval` beside `tiered`:
the same questions, the same budgets counted by the same tokenizer, the same metrics, each in
the peer's mode (a retrieval memory reads the question, a window does not).

    pip install 'strata-*.whl[peers]'
    python examples/peers.py                                 # LlamaIndex's vector memory
    python examples/peers.py --peer langchain-trim --budgets 1000,2000,4000

LoCoMo is read from $STRATA_DATA (or ../shared/datasets beside the checkout); the models
(MiniLM; Qwen for the LLM peers) from $STRATA_MODELS, fetched by `cargo xtask fetch-models`.
`examples/peers_table.py` runs every peer and writes the table and plot of docs/results.md.
"""

import argparse
import time

import strata
import strata.peers


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", default="llamaindex-vector", choices=list(strata.peers.PEERS))
    parser.add_argument("--budgets", default="1000,2000")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    registered = strata.peers.register([args.peer])
    if not registered:
        raise SystemExit(f"{args.peer} cannot run here (see the warning above)")
    peer = registered[0]
    mode = "aware" if strata.peers.PEERS[peer][1] else "agnostic"
    print(f"{'strategy':<24} {'budget':>6} {'mode':>8} {'evidence':>8} {'answer':>7} {'tokens':>7}  wall")
    for name in ("tiered", peer):
        start = time.perf_counter()
        result = strata.eval(["locomo"], [name], budgets, mode=mode, limit=1, progress=False)
        wall = time.perf_counter() - start
        for r in result.runs:
            print(
                f"{name:<24} {r['budget']:>6} {r['mode']:>8} {r['evidence_recall']:>8.3f}"
                f" {r['answer_recall']:>7.3f} {r['context_tokens_mean']:>7.0f}  {wall:.1f} s"
            )


if __name__ == "__main__":
    main()
