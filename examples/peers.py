"""LangChain's and LlamaIndex's chat memory beside Strata's `tiered` on LoCoMo, on one harness.

The peers (`strata.peers`: LangChain's `trim_messages`, LlamaIndex's `ChatMemoryBuffer`) are
registered as strategies and scored by `strata.eval` with the built-ins: the same probes, the
same budgets counted by the same tokenizer, the same metrics. Prints one line per strategy and
budget, with the wall time each strategy's run took.

    pip install 'strata-*.whl[peers]'          # or: pip install langchain-core==1.8.1 llama-index-core==0.14.25
    python examples/peers.py --limit 1         # one LoCoMo conversation
    python examples/peers.py                   # all ten

LoCoMo is read from $STRATA_DATA (or ../shared/datasets beside the checkout); `tiered` needs the
MiniLM weights (`cargo xtask fetch-models`, or $STRATA_MODELS).
"""

import argparse
import time

import strata
import strata.peers


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="locomo", help="a suite name (locomo, probes) or a transcript file")
    parser.add_argument("--limit", type=int, help="only the first N conversations")
    parser.add_argument("--budgets", default="1000,2000,4000")
    parser.add_argument("--mode", default="agnostic", help="agnostic (the peers do not read the question), aware or both")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    strategies = ["window", "tiered", *strata.peers.register()]
    print(f"{'strategy':<18} {'budget':>6} {'mode':>9} {'evidence':>8} {'answer':>7} {'answer tokens':>13} {'reduction':>9}  wall")
    for name in strategies:
        start = time.perf_counter()
        result = strata.eval([args.dataset], [name], budgets, mode=args.mode, limit=args.limit, progress=False)
        wall = time.perf_counter() - start
        for r in result.runs:
            print(
                f"{name:<18} {r['budget']:>6} {r['mode']:>9} {r['evidence_recall']:>8.3f} {r['answer_recall']:>7.3f}"
                f" {r['answer_token_recall']:>13.3f} {r['token_reduction']:>9.3f}  {wall:.1f} s"
            )


if __name__ == "__main__":
    main()
