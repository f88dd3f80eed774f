"""What a strategy written in Python costs the harness: `window` in Rust against the same
strategy written in Python (tests/test_strata.py's `window_in_python`), scored in one run on
the probes suite; time per context build, and the ratio. Run by `cargo xtask py-test`."""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import strata  # noqa: E402
from test_strata import window_in_python  # noqa: E402  (registers it as py-window)

BUDGETS = [1000, 2000, 4000]

start = time.perf_counter()
result = strata.eval(["probes"], ["window", "py-window"], BUDGETS, mode="agnostic", progress=False)
wall = time.perf_counter() - start
ms = {s: [b["build_ms"] for b in result.builds if b["strategy"] == s] for s in ["window", "py-window"]}
same = all(
    {k: v for k, v in a.items() if k not in ("strategy", "build_ms_p50", "build_ms_p95")}
    == {k: v for k, v in b.items() if k not in ("strategy", "build_ms_p50", "build_ms_p95")}
    for a, b in zip(
        [r for r in result.runs if r["strategy"] == "window"], [r for r in result.runs if r["strategy"] == "py-window"]
    )
)
rust, py = statistics.mean(ms["window"]), statistics.mean(ms["py-window"])
print(
    f"overhead: probes suite, {len(ms['window'])} builds each at budgets {BUDGETS}: window in Rust "
    f"{rust:.3f} ms a build (p50 {statistics.median(ms['window']):.3f}), in Python {py:.3f} ms "
    f"(p50 {statistics.median(ms['py-window']):.3f}): {py / rust:.1f}x; scores identical: {same}; "
    f"run wall {wall:.1f} s"
)
sys.exit(0 if same else 1)
