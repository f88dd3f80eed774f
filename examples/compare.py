"""Compare a strategy written in Python with Strata's `window` and `tiered` on LoCoMo.

The strategy here, `bookends`, keeps the oldest turns that fit half the budget (where people
introduce themselves) and the newest that fit the rest. It is scored by the same harness as
the built-in strategies, at three budgets, and the script saves a Pareto plot: retention
against token reduction, one line per strategy.

    pip install strata-*.whl matplotlib pandas
    python examples/compare.py --out compare.png            # all ten conversations, minutes
    python examples/compare.py --limit 1 --out compare.png  # one conversation

LoCoMo is read from $STRATA_DATA (or ../shared/datasets beside the checkout); `tiered` needs
the MiniLM weights (`cargo xtask fetch-models`, or $STRATA_MODELS).
"""

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import strata  # noqa: E402


@strata.register_strategy("bookends")
def bookends(history, budget, question):
    """The oldest turns that fit half the budget, then the newest that fit what is left."""
    left = budget - history.overhead
    head, tail = [], []
    for i in range(len(history)):
        if history.tokens[i] > left // 2 - sum(history.tokens[j] for j in head):
            break
        head.append(i)
    left -= sum(history.tokens[j] for j in head)
    for i in range(len(history) - 1, head[-1] if head else -1, -1):
        if history.tokens[i] > left:
            break
        left -= history.tokens[i]
        tail.append(i)
    return [history[i].id for i in head + sorted(tail)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--out", default="compare.png", help="where to save the plot")
    parser.add_argument("--budgets", default="1000,2000,4000")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    strategies = ["window", "tiered", "bookends"]
    result = strata.eval(["locomo"], strategies, budgets, mode="both", limit=args.limit)
    runs = result.to_pandas()
    print(runs[["strategy", "budget", "mode", "answer_recall", "evidence_recall", "token_reduction"]].to_string())

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, mode in zip(axes, ["agnostic", "aware"]):
        for strategy in strategies:
            rows = runs[(runs["strategy"] == strategy) & (runs["mode"] == mode)].sort_values("budget")
            ax.plot(rows["token_reduction"], rows["answer_recall"], marker="o", label=strategy)
            for _, r in rows.iterrows():
                ax.annotate(str(r["budget"]), (r["token_reduction"], r["answer_recall"]), fontsize=7)
        ax.set_title(f"LoCoMo, question-{mode}")
        ax.set_xlabel("token reduction")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("answer recall (the gold answer is in the context)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
