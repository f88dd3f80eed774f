"""Do probes a model wrote rank strategies as LoCoMo's own questions do?

Scores the same strategies at the same budgets on LoCoMo (its questions, written by people
with a model's help and checked) and on probes written for the same conversations by
`strata probes` (LoCoMo's questions ignored), then reports Kendall's tau between the two
orders, the pairs they order differently, and how many generated probes rest on turns that
LoCoMo's questions also use.

    strata probes ../shared/datasets/locomo/locomo10.json --generator qwen1.5b \\
        --out locomo.probes.jsonl
    python examples/probes_agreement.py locomo.probes.jsonl --out agreement.json
"""

import argparse
import json
import math
import os
from collections import Counter
from itertools import combinations
from pathlib import Path

import strata

STRATEGIES = ["window", "segments", "specific", "summary-buffer", "tiered"]
METRICS = ["evidence_recall", "answer_recall", "answer_token_recall"]


def kendall_tau_b(xs, ys):
    """Kendall's tau-b of two paired lists (ties counted as neither order)."""
    concordant = discordant = ties_x = ties_y = 0
    for (x1, y1), (x2, y2) in combinations(zip(xs, ys), 2):
        dx, dy = x1 - x2, y1 - y2
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            ties_x += 1
        elif dy == 0:
            ties_y += 1
        elif dx * dy > 0:
            concordant += 1
        else:
            discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    return (concordant - discordant) / denominator if denominator else float("nan")


def scores(dataset, budgets, embedder):
    """{(strategy, mode, budget): run} for the strategies; a strategy that does not read the
    question scores the same in both modes, so it is kept once, as agnostic."""
    result = strata.eval([dataset], STRATEGIES, budgets, mode="both", embedder=embedder, progress=False)
    aware = {"tiered"}
    return {
        (r["strategy"], r["mode"], r["budget"]): r
        for r in result.runs
        if r["mode"] == "agnostic" or r["strategy"] in aware
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("generated", help="the probe file `strata probes` wrote for LoCoMo")
    parser.add_argument("--budgets", default="1000,2000,4000")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--out", help="write the scores and taus here (JSON)")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    data = Path(os.environ.get("STRATA_DATA", Path(__file__).resolve().parents[2] / "shared/datasets"))
    locomo = str(data / "locomo/locomo10.json")

    human = scores("locomo", budgets, args.embedder)
    written = scores(args.generated, budgets, args.embedder)
    keys = sorted(human)
    report = {"items": [list(k) for k in keys], "taus": {}, "disagreements": {}}
    for metric in METRICS:
        h = [human[k][metric] for k in keys]
        w = [written[k][metric] for k in keys]
        per_budget = {}
        for b in budgets:
            ks = [k for k in keys if k[2] == b]
            per_budget[b] = kendall_tau_b([human[k][metric] for k in ks], [written[k][metric] for k in ks])
        report["taus"][metric] = {"pooled": kendall_tau_b(h, w), "per_budget": per_budget}
        report["disagreements"][metric] = [
            [list(a), list(b), human[a][metric], human[b][metric], written[a][metric], written[b][metric]]
            for a, b in combinations(keys, 2)
            if a[2] == b[2] and (human[a][metric] - human[b][metric]) * (written[a][metric] - written[b][metric]) < 0
        ]
        print(f"{metric}: tau pooled {report['taus'][metric]['pooled']:.3f}, per budget "
              + ", ".join(f"{b}: {t:.3f}" for b, t in per_budget.items()))
    print(f"\n{'strategy':<16}{'mode':>9}{'budget':>7}" + "".join(f"{m[:12]:>14}{'(written)':>11}" for m in METRICS))
    for k in keys:
        print(f"{k[0]:<16}{k[1]:>9}{k[2]:>7}" + "".join(f"{human[k][m]:>14.3f}{written[k][m]:>11.3f}" for m in METRICS))
    for metric, pairs in report["disagreements"].items():
        for a, b, ha, hb, wa, wb in pairs:
            print(f"{metric}: LoCoMo orders {a} {'>' if ha > hb else '<'} {b} ({ha:.3f} / {hb:.3f}), "
                  f"the written probes the other way ({wa:.3f} / {wb:.3f})")

    # How many written probes rest on turns that LoCoMo's questions use too.
    gold = {c.id: {e for p in c.probes for e in p.get("evidence", [])} for c in strata.load(locomo)}
    mine = strata.load(args.generated)
    probes = [(c.id, p) for c in mine for p in c.probes]
    any_shared = sum(1 for cid, p in probes if set(p.get("evidence", [])) & gold.get(cid, set()))
    all_shared = sum(1 for cid, p in probes if set(p.get("evidence", [])) <= gold.get(cid, set()))
    kinds = Counter(p.get("category") for _, p in probes)
    report["overlap"] = {"probes": len(probes), "any_evidence_shared": any_shared, "all_evidence_shared": all_shared}
    report["kinds"] = dict(kinds)
    report["human"] = {"|".join(map(str, k)): v for k, v in human.items()}
    report["written"] = {"|".join(map(str, k)): v for k, v in written.items()}
    print(f"\n{len(probes)} written probes ({dict(kinds)}); {any_shared} ({any_shared / max(len(probes), 1):.0%}) "
          f"share an evidence turn with LoCoMo's questions, {all_shared} rest only on such turns")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
