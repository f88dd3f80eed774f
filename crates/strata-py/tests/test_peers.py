"""The peers (LangChain, LlamaIndex, Mem0) on Strata's harness: the pinned packages installed by
`cargo xtask py-test`, scored through `strata.eval` beside the built-ins on the committed probes
suite, held to the same budget. The LLM peers need the Qwen weights (`cargo xtask
fetch-models`); without them those tests are skipped, saying why."""

import os
import re
from importlib.metadata import version
from pathlib import Path

import pytest

import strata
import strata.peers

ROOT = Path(os.environ.get("STRATA_ROOT", Path(__file__).resolve().parents[3]))
PROBES = ROOT / "datasets/probes/probes.jsonl"
MODELS = Path(os.environ.get("STRATA_MODELS", ROOT / "models"))


def test_every_pinned_peer_package_is_installed_and_every_peer_registers():
    import tomllib

    extra = tomllib.loads((ROOT / "crates/strata-py/pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert sorted(extra["peers"]) == sorted(f"{p}=={v}" for p, v in strata.peers.VERSIONS.items())
    for package, pinned in strata.peers.VERSIONS.items():
        assert version(package) == pinned, package
    assert strata.peers.register() == list(strata.peers.PEERS)
    assert set(strata.peers.PEERS) <= set(strata.registered_strategies())


def test_an_unknown_peer_is_refused_by_name():
    with pytest.raises(ValueError, match="nope"):
        strata.peers.register(["nope"])


def test_a_peer_whose_model_cannot_open_is_one_warning_and_the_rest_register():
    before = dict(strata.peers.MODELS)
    try:
        with pytest.warns(UserWarning, match=r"peer mem0: cannot start: .*no-such-model\.gguf"):
            names = strata.peers.register(["mem0", "langchain-trim"], extractor="/no-such-model.gguf")
        assert names == ["langchain-trim"]
    finally:
        strata.peers.MODELS.update(before)


def test_the_non_llm_peers_are_scored_by_eval_within_the_budget():
    agnostic = ["langchain-trim", "llamaindex-buffer"]
    strata.peers.register(agnostic + ["llamaindex-vector"])
    for names, mode in ((agnostic, "agnostic"), (["llamaindex-vector"], "aware")):
        result = strata.eval([str(PROBES)], ["window", *names], [300, 1000], mode=mode, limit=1, progress=False)
        for name in names:
            for budget in (300, 1000):
                (run,) = [r for r in result.runs if (r["strategy"], r["budget"]) == (name, budget)]
                assert run["probes"] > 0
                # Every context was counted by the harness and held to the budget (a context
                # over it would have raised StrategyError naming the peer).
                assert run["context_tokens_mean"] <= budget
                assert 0 < run["token_reduction"] < 1


def test_the_window_peers_keep_the_newest_turns_that_fit_as_window_does():
    # Both are windows over the newest messages: on a plain user/assistant history their
    # contexts hold the same turns as `window`'s, up to where each starts (trim starts on a user
    # turn) and the framing the buffer does not count.
    conversation = strata.load(PROBES)[0]
    strata.peers.register(["langchain-trim", "llamaindex-buffer"])
    for budget in (200, 600):
        window = strata.compress(conversation, strategy="window", budget=budget).verbatim_ids()
        for name in ("langchain-trim", "llamaindex-buffer"):
            ctx = strata.compress(conversation, strategy=name, budget=budget)
            ids = ctx.verbatim_ids()
            assert ctx.total_tokens <= budget
            assert ids, name
            assert ids == window[len(window) - len(ids):], f"{name} at {budget}: {ids} is not a suffix of {window}"
            assert len(ids) >= len(window) - 2, f"{name} at {budget}: {len(ids)} turns, window {len(window)}"


def test_the_vector_memory_sends_retrieved_batches_beside_the_newest_turns():
    conversation = strata.load(PROBES)[0]
    strata.peers.register(["llamaindex-vector"])
    turns = conversation.turns
    # At 4000 two retrieved batches (10% of the limit each) fit beside the history (70%).
    ctx = strata.compress(conversation, strategy="llamaindex-vector", budget=4000, question="What is the p99 latency limit for search-api?")
    assert ctx.total_tokens <= 4000
    notes = [b for b in ctx.blocks if b.kind != "verbatim_turn"]
    assert len(notes) == 1 and notes[0].text.startswith("<memory>"), [b.kind for b in ctx.blocks]
    # LlamaIndex's own rendering of stored messages, each the text of a turn that is not among
    # the verbatim ones (those are the newest, still in the memory's queue).
    ids = ctx.verbatim_ids()
    assert ids == [t.id for t in turns[len(turns) - len(ids):]]
    older = {t.content for t in turns[: len(turns) - len(ids)]}
    quoted = re.findall(r"<message role='\w+'>(.*?)</message>", notes[0].text, re.S)
    assert quoted and all(q in older for q in quoted), quoted[:2]


def weights(name):
    folder = {"qwen": "qwen2.5-coder-0.5b-instruct", "qwen1.5b": "qwen2.5-coder-1.5b-instruct"}[name]
    if not (MODELS / folder).is_dir():
        pytest.skip(f"needs the {name} weights: cargo xtask fetch-models {name}")


def test_the_summary_buffer_summarises_what_falls_out_with_a_local_model():
    weights("qwen")
    strata.peers.register(["langchain-summary-buffer"], summariser="qwen")
    turns = strata.load(PROBES)[0].turns[:24]
    messages = [{"role": t.role, "content": t.content} for t in turns]
    calls = strata.peers.STATS["llm_calls"]
    ctx = strata.compress(messages, strategy="langchain-summary-buffer", budget=500)
    assert ctx.total_tokens <= 500
    (summary,) = [b for b in ctx.blocks if b.kind != "verbatim_turn"]
    assert len(summary.text.split()) > 10
    # The newest turns stay whole after the summary; the rest were summarised by the model.
    ids = ctx.verbatim_ids()
    assert 0 < len(ids) < len(turns)
    assert ids == [f"m{i}" for i in range(len(turns) - len(ids), len(turns))]
    assert strata.peers.STATS["llm_calls"] > calls


def test_mem0_extracts_memories_with_a_local_model_and_finds_them_by_the_question():
    weights("qwen")
    # The 0.5B model keeps the test short; the results table uses the 1.5B one.
    strata.peers.register(["mem0"], extractor="qwen")
    messages = [
        {"role": "user", "content": "My sister Ingrid moved to Tromsø last spring; she teaches chemistry there."},
        {"role": "assistant", "content": "That is a long way north! How is she finding the winters?"},
    ]
    ctx = strata.compress(messages, strategy="mem0", budget=300, question="Where does Ingrid live?")
    assert ctx.total_tokens <= 300
    assert ctx.verbatim_ids() == []
    (memories,) = [b.text for b in ctx.blocks]
    assert memories.startswith("Memories:\n")
    assert "Troms" in memories, memories
