"""The peers (LangChain's trim_messages, LlamaIndex's ChatMemoryBuffer) on Strata's harness: the
pinned packages installed by `cargo xtask py-test`, scored through `strata.eval` beside the
built-ins on the committed probes suite, held to the same budget."""

import os
from pathlib import Path

import strata
import strata.peers

ROOT = Path(os.environ.get("STRATA_ROOT", Path(__file__).resolve().parents[3]))
PROBES = ROOT / "datasets/probes/probes.jsonl"


def test_every_peer_registers_and_is_scored_within_the_budget():
    import langchain_core
    import llama_index.core

    assert langchain_core.__version__ == strata.peers.VERSIONS["langchain-core"]
    assert llama_index.core.__version__ == strata.peers.VERSIONS["llama-index-core"]
    names = strata.peers.register()
    assert names == ["langchain-trim", "llamaindex-buffer"]
    result = strata.eval([str(PROBES)], ["window", *names], [300, 1000], mode="agnostic", limit=3, progress=False)
    for name in names:
        for budget in (300, 1000):
            (run,) = [r for r in result.runs if (r["strategy"], r["budget"]) == (name, budget)]
            assert run["probes"] > 0
            # Every context was counted by the harness and held to the budget (a context over
            # it would have raised StrategyError naming the peer).
            assert run["context_tokens_mean"] <= budget
            assert 0 < run["token_reduction"] < 1


def test_the_peers_keep_the_newest_turns_that_fit_as_window_does():
    # Both peers are windows over the newest messages: on a plain user/assistant history their
    # contexts hold the same turns as `window`'s, up to where each starts (trim starts on a user
    # turn) and the framing the buffer does not count.
    conversation = strata.load(PROBES)[0]
    for budget in (200, 600):
        window = strata.compress(conversation, strategy="window", budget=budget).verbatim_ids()
        strata.peers.register()
        for name in ("langchain-trim", "llamaindex-buffer"):
            ctx = strata.compress(conversation, strategy=name, budget=budget)
            ids = ctx.verbatim_ids()
            assert ctx.total_tokens <= budget
            assert ids, name
            assert ids == window[len(window) - len(ids):], f"{name} at {budget}: {ids} is not a suffix of {window}"
            assert len(ids) >= len(window) - 2, f"{name} at {budget}: {len(ids)} turns, window {len(window)}"
