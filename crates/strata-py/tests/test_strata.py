"""The Python package against real data: the committed probes suite and LoCoMo's first
conversation, the CLI built from the same checkout, and the pinned MiniLM weights.

Run by `cargo xtask py-test`, which builds the wheel, installs it into a fresh venv and sets
STRATA_ROOT, STRATA_DATA, STRATA_MODELS and STRATA_BIN.
"""

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

import strata

ROOT = Path(os.environ.get("STRATA_ROOT", Path(__file__).resolve().parents[3]))
DATA = Path(os.environ.get("STRATA_DATA", ROOT / "../shared/datasets"))
BIN = Path(os.environ.get("STRATA_BIN", ROOT / "target/release/strata"))
PROBES = ROOT / "datasets/probes/probes.jsonl"
LOCOMO = DATA / "locomo/locomo10.json"

# Fields of a run that time the builds: no two runs share them.
TIMED = {"build_ms_p50", "build_ms_p95"}


def untimed(run):
    return {k: v for k, v in run.items() if k not in TIMED}


@pytest.fixture(scope="session")
def probes():
    return strata.load(PROBES)


@pytest.fixture(scope="session")
def locomo_first():
    with pytest.warns(UserWarning, match="dataset quirks"):
        conversations = strata.load(LOCOMO)
    return conversations[0]


def window_in_python(history, budget, question):
    """`window` written again in Python: the pinned system prompt, then the newest units that
    fit, oldest first."""
    left = budget - history.overhead
    picked = []
    pinned = sum(history.tokens[: history.pinned])
    if history.pinned and pinned <= left:
        picked = [t.id for t in history.turns[: history.pinned]]
        left -= pinned
    newest = []
    i = len(history) - 1
    taken = set()
    while i >= history.pinned:
        unit = history.unit(i)
        if unit[0] not in taken:
            cost = sum(history.tokens[j] for j in unit)
            if cost > left:
                break
            left -= cost
            taken.add(unit[0])
            newest.extend(unit)
        i -= 1
    return picked + [history[j].id for j in sorted(newest)]


strata.register_strategy("py-window", window_in_python)


# --- loading, turns and conversations ------------------------------------------------------


def test_load_reads_every_format(probes, locomo_first, tmp_path):
    assert len(probes) > 5 and all(len(c) > 10 and c.probes for c in probes)
    assert locomo_first.id and len(locomo_first) > 300
    assert {p["category"] for p in locomo_first.probes} >= {"single-hop", "temporal"}
    messages = tmp_path / "chat.json"
    messages.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]))
    (chat,) = strata.load(messages)
    assert [t.role for t in chat.turns] == ["user", "assistant"]
    with pytest.raises(strata.InputError, match="chat.json: transcript sample-0: missing `conversation`"):
        strata.load(messages, format="locomo")


def test_turns_and_conversations_go_to_dicts_and_back(probes):
    c = probes[0]
    again = strata.Conversation.from_dict(c.to_dict())
    assert again.to_dict() == c.to_dict()
    t = c[0]
    assert strata.Turn.from_dict(t.to_dict()) == t
    assert t.to_dict()["timestamp"].endswith("Z") and isinstance(t.timestamp, int)
    built = strata.Conversation("c", [{"role": "user", "content": "a"}, strata.Turn("x", "assistant", "b")])
    assert [t.id for t in built.turns] == ["t1", "x"]
    openai = strata.Conversation.from_messages(c.messages(), id="again")
    assert [t.content for t in openai.turns] == [t.content for t in c.turns]


def test_bad_input_names_where_it_is(tmp_path):
    with pytest.raises(strata.InputError, match=r"turn t2: `role`: `bot` is not one of"):
        strata.Conversation("c", [{"id": "t1", "role": "user", "content": "a"}, {"id": "t2", "role": "bot"}])
    with pytest.raises(strata.InputError, match="turn t2: duplicate turn id"):
        strata.Conversation.from_dict(
            {"id": "c", "turns": [{"id": "t2", "role": "user", "content": "a"}, {"id": "t2", "role": "user", "content": "b"}]}
        )
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a", "turns": []}\n{"id": "b", "turns": [\n')
    with pytest.raises(strata.InputError, match=r"broken.jsonl:2"):
        strata.load(broken)
    with pytest.raises(strata.InputError, match="no_such_strategy"):
        strata.compress([{"role": "user", "content": "a"}], strategy="no_such_strategy")
    with pytest.raises(strata.InputError, match="tokenizer"):
        strata.count_tokens("a", tokenizer="nope")
    for bad in (-1, 0):
        with pytest.raises(strata.InputError, match=f"budget: a budget is a positive number of tokens, not {bad}"):
            strata.compress([{"role": "user", "content": "a"}], budget=bad)
    with pytest.raises(strata.InputError, match="budgets: a budget is a positive"):
        strata.eval(["probes"], ["window"], [-5])
    with pytest.raises(strata.InputError, match="`conversation`: expected a Conversation"):
        strata.compress(42)
    with pytest.raises(strata.InputError, match=r"config.json.*windw"):
        strata.compress([{"role": "user", "content": "a"}], config={"windw": {}})
    assert issubclass(strata.InputError, strata.StrataError)


# --- tokens and contexts ----------------------------------------------------------------------


def cli(*args):
    done = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_count_tokens_counts_as_the_cli_does(probes, tmp_path):
    assert strata.count_tokens("hello world") == 2
    assert strata.count_tokens("hello world", tokenizer="cl100k") == 2
    path = tmp_path / "one.json"
    path.write_text(json.dumps(probes[0].to_dict()))
    total = int(cli("tokens", path, "--summary").split(" turns, ")[1].split(" tokens")[0])
    assert strata.count_tokens(probes[0]) == total
    assert strata.count_tokens(probes[0].messages()) == total


def test_compress_builds_the_cli_s_context(probes, tmp_path):
    c = probes[1]
    path = tmp_path / "one.json"
    path.write_text(json.dumps(c.to_dict()))
    for strategy in ["window", "segments", "recent-8-summary-12", "specific"]:
        ctx = strata.compress(c, strategy=strategy, budget=1000)
        assert ctx.total_tokens <= 1000 and 0 < ctx.token_reduction < 1
        expected = json.loads(cli("compress", path, "--strategy", strategy, "--budget", 1000, "--format", "json"))
        assert ctx.to_dict() == expected
        assert ctx.messages() == json.loads(cli("compress", path, "--strategy", strategy, "--budget", 1000))
        assert sum(b.tokens for b in ctx.blocks) + 3 == ctx.total_tokens
    ctx = strata.compress(c, strategy="window", budget=500, at=c[20].id)
    assert ctx.verbatim_ids()[-1] == c[20].id and all(b.kind == "verbatim_turn" for b in ctx.blocks)
    assert ctx.messages()[-1] == {"role": c[20].role, "name": c[20].speaker, "content": c[20].content}


def test_compress_tiered_answers_a_question_from_the_store(locomo_first, tmp_path):
    p = next(p for p in locomo_first.probes if p["category"] == "single-hop" and p["evidence"])
    at = p.get("after") or locomo_first.turns[-1].id
    ctx = strata.compress(locomo_first, strategy="tiered", budget=2000, question=p["question"], at=at)
    assert ctx.total_tokens <= 2000
    assert {b.kind for b in ctx.blocks} >= {"recalled"}
    # The CLI's context for the same history, budget and question: one registry builds both,
    # with MiniLM's vectors from the same cache.
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(locomo_first.to_dict()))
    args = ["--strategy", "tiered", "--budget", 2000, "--question", p["question"], "--at", at, "--format", "json"]
    assert ctx.to_dict() == json.loads(cli("compress", path, *args))


# --- the memory --------------------------------------------------------------------------------


def test_memory_stores_recalls_and_reopens(locomo_first, tmp_path):
    db = tmp_path / "memory.db"
    turns = locomo_first.turns[:120]
    memory = strata.Memory(str(db), budget=1000, conversation=locomo_first.id, clock="last_turn")
    for t in turns:
        memory.push(t)
    assert len(memory) == 120
    memory.settle()
    ctx = memory.context()
    assert ctx.total_tokens <= 1000 and ctx.history_tokens > 5000
    tiers = memory.tiers()
    assert tiers[-1] == "hot" and set(tiers) - {"hot"}, "older turns left the hot tier"
    target = turns[57]
    hits = memory.recall(target.content, k=3)
    # Its neighbours share its session and add to its rank, so it need not come first.
    assert target in [h.turn for h in hits] and all(h.score > 0 for h in hits)
    with_question = memory.context(budget=1000, question=target.content)
    assert target.id in with_question.verbatim_ids()
    assert "hot" in memory.explain()
    assert isinstance(memory.checkpoint(), str)
    del memory
    again = strata.Memory(str(db), budget=1000, conversation=locomo_first.id, clock="last_turn")
    assert [t.id for t in again.turns()] == [t.id for t in turns]
    pushed = again.push(role="user", content="And one more thing.")
    assert pushed.id == "m120" and len(again) == 121


def test_memory_reranks_with_the_cross_encoder(locomo_first):
    question = locomo_first.probes[0]["question"]

    def context(reranker):
        memory = strata.Memory(":memory:", budget=4000, conversation=locomo_first.id, clock="last_turn", reranker=reranker)
        for t in locomo_first.turns:
            memory.push(t)
        memory.settle()
        return memory.context(budget=4000, question=question)

    plain, reranked = context("none"), context("msmarco")
    assert reranked.total_tokens <= 4000
    # The cross-encoder reorders what recall found past its first 20 candidates: at 4000 tokens
    # some of those reach the context.
    assert plain.verbatim_ids() != reranked.verbatim_ids()
    with pytest.raises(strata.InputError, match="reranker `bogus`: expected msmarco or none"):
        strata.Memory(":memory:", reranker="bogus")
    # `compress` reranks the tiered memory's recall for its question as the memory does.
    compressed = {
        r: strata.compress(locomo_first, "tiered", 4000, question=question, reranker=r) for r in ("none", "msmarco")
    }
    assert compressed["none"].verbatim_ids() != compressed["msmarco"].verbatim_ids()
    with pytest.raises(strata.InputError, match="reranker `bogus`: expected msmarco or none"):
        strata.compress(locomo_first, "tiered", 4000, question=question, reranker="bogus")


def test_memory_refuses_a_bad_turn_and_keeps_the_rest(tmp_path):
    memory = strata.Memory(":memory:", budget=500, embedder=None)
    memory.push({"role": "user", "content": "first", "timestamp": "2024-01-01T00:00:00Z"})
    with pytest.raises(strata.InputError, match="earlier than"):
        memory.push({"role": "user", "content": "before", "timestamp": "2023-01-01T00:00:00Z"})
    with pytest.raises(strata.InputError, match="push: give a turn"):
        memory.push()
    assert [t.content for t in memory.turns()] == ["first"]


# --- eval and strategies written in Python -----------------------------------------------------


def test_eval_equals_the_cli_results(tmp_path):
    args = dict(datasets=["probes"], strategies=["window", "segments"], budgets=[500, 1000], mode="both")
    result = strata.eval(**args, progress=False, out=tmp_path / "py")
    cli("eval", "--dataset", "probes", "--strategy", "window,segments", "--budget", "500,1000", "--quiet",
        "--out", tmp_path / "cli")
    expected = json.loads((tmp_path / "cli/results.json").read_text())
    assert [untimed(r) for r in result.runs] == [untimed(r) for r in expected["runs"]]
    assert result.results["config"] == expected["config"]
    assert (tmp_path / "py/results.json").exists()
    records = [json.loads(l) for l in (tmp_path / "cli/records.jsonl").read_text().splitlines()]
    assert result.records == records
    frame = result.to_pandas()
    assert len(frame) == len(result.runs) == 2 * 2 * 2
    assert f"by_category.{records[0]['category']}.answer_recall" in frame.columns
    # The key and the headline metrics come first.
    assert list(frame.columns[:9]) == [
        "dataset", "strategy", "budget", "mode", "probes", "evidence_recall", "answer_recall",
        "answer_token_recall", "token_reduction",
    ]
    assert len(result.records_to_pandas()) == len(records)


def test_a_python_strategy_that_is_window_scores_as_window():
    result = strata.eval(["probes"], ["window", "py-window"], [300, 1000], mode="agnostic", progress=False)
    by = {(r["strategy"], r["budget"]): untimed(r) for r in result.runs}
    for budget in [300, 1000]:
        mine = dict(by[("py-window", budget)], strategy="window")
        assert mine == by[("window", budget)]
    builds = result.builds_to_pandas()
    assert set(builds["strategy"]) == {"window", "py-window"}


def test_python_strategies_are_held_to_the_budget_and_their_errors_kept(probes):
    strata.register_strategy("greedy", lambda history, budget, question: [t.id for t in history.turns])
    with pytest.raises(strata.StrategyError, match=r"strategy greedy: a context of \d+ tokens, over the budget of 400"):
        strata.eval(["probes"], ["greedy"], [400], mode="agnostic", progress=False)
    with pytest.raises(strata.StrategyError, match="strategy greedy: a context of"):
        strata.compress(probes[0], strategy="greedy", budget=400)

    @strata.register_strategy("broken")
    def broken(history, budget, question):
        raise ZeroDivisionError("nothing to divide")

    with pytest.raises(strata.StrategyError, match="strategy broken: raised ZeroDivisionError") as raised:
        strata.eval(["probes"], ["broken"], [400], mode="agnostic", progress=False)
    assert isinstance(raised.value.__cause__, ZeroDivisionError)
    strata.register_strategy("notes", lambda h, b, q: [h[-1].id, "The user asked about the launch.", 7])
    with pytest.raises(strata.StrategyError, match="item 2 is int"):
        strata.compress(probes[0], strategy="notes", budget=400)
    with pytest.raises(strata.InputError, match="built-in"):
        strata.register_strategy("window", window_in_python)


def test_a_python_strategy_may_add_notes_and_see_the_question(probes):
    seen = []

    def noted(history, budget, question):
        seen.append(question)
        note = f"{len(history)} turns so far."
        assert history.count(note) > 0
        return [note, history[-1]]

    strata.register_strategy("noted", noted, question_aware=True)
    ctx = strata.compress(probes[0], strategy="noted", budget=400, question="What port?")
    assert [b.kind for b in ctx.blocks] == ["summary", "verbatim_turn"] and seen == ["What port?"]
    seen.clear()
    result = strata.eval(["probes"], ["noted"], [400], mode="aware", progress=False)
    asked = [q for q in seen if q is not None]
    assert len(asked) == result.runs[0]["probes"] == result.runs[0]["builds"] > 0


def test_eval_releases_the_interpreter():
    ticks = 0
    running = True

    def count():
        nonlocal ticks
        while running:
            ticks += 1
            time.sleep(0.001)

    thread = threading.Thread(target=count)
    thread.start()
    start_ticks = ticks
    strata.eval(["probes"], ["segments"], [1000, 2000], mode="agnostic", progress=False)
    during = ticks - start_ticks
    running = False
    thread.join()
    # With the interpreter held for the whole run, the thread could not count at all.
    assert during > 50, during


def test_eval_scores_one_locomo_conversation_with_tiered():
    result = strata.eval(["locomo"], ["window", "tiered", "py-window"], [1000], mode="both", limit=1, progress=False)
    runs = {(r["strategy"], r["mode"]): r for r in result.runs}
    assert set(runs) == {(s, m) for s in ["window", "tiered", "py-window"] for m in ["agnostic", "aware"]}
    assert runs[("tiered", "aware")]["evidence_recall"] > runs[("window", "aware")]["evidence_recall"]
    assert untimed(dict(runs[("py-window", "aware")], strategy="window")) == untimed(runs[("window", "aware")])


def test_eval_names_the_rerankers_it_knows():
    with pytest.raises(strata.InputError, match="reranker `bogus`: expected msmarco or none"):
        strata.eval(["locomo"], ["tiered"], [1000], mode="aware", limit=1, reranker="bogus", progress=False)


def test_eval_asks_a_reader_and_scores_its_answers():
    result = strata.eval(
        ["locomo"], ["window"], [1000], mode="agnostic", limit=1, sample=1, reader="smollm2", progress=False
    )
    assert sorted(a["category"] for a in result.answers) == ["multi-hop", "open-domain", "single-hop", "temporal"]
    assert all(0.0 <= a["f1"] <= 1.0 and a["prompt_tokens"] > 0 for a in result.answers)
    (run,) = result.answer_runs
    assert (run["strategy"], run["questions"]) == ("window", 4)
    assert run["f1"] == pytest.approx(sum(a["f1"] for a in result.answers) / 4)
    assert result.results["config"]["prompts"]["answer_tokens"] == 32
    with pytest.raises(strata.InputError, match="--judge judges a reader's answers"):
        strata.eval(["locomo"], ["window"], [1000], limit=1, judge="smollm2", progress=False)


def test_the_stubs_cover_every_public_name():
    """Editors complete from the stubs: every public name of the native module, and every
    public method and property of its classes, is declared there and has a docstring."""
    import ast
    import inspect

    from strata import _strata

    stub_path = Path(strata.__file__).with_name("_strata.pyi")
    tree = ast.parse(stub_path.read_text())
    declared = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            declared[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.FunctionDef):
            declared[node.name] = set()
        elif isinstance(node, ast.AnnAssign):
            declared[node.target.id] = set()
    public = [n for n in dir(_strata) if not n.startswith("_")]
    assert sorted(set(public) - set(declared)) == []
    for name in public:
        obj = getattr(_strata, name)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            members = {m for m in vars(obj) if not m.startswith("_")}
            assert sorted(members - declared[name]) == [], name
            assert obj.__doc__, name
            for m in members:
                assert getattr(obj, m).__doc__, f"{name}.{m}"
        elif callable(obj):
            assert obj.__doc__, name
    package_stub = ast.parse(stub_path.with_name("__init__.pyi").read_text())
    names = set()
    for node in package_stub.body:
        if isinstance(node, ast.ImportFrom) and node.module == "_strata":
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
    assert sorted(set(strata.__all__) - names) == []


def test_the_embedder_gives_the_same_unit_vector_for_the_same_text():
    embedder = strata.Embedder("minilm")
    a, b, c = embedder.embed(["the cat sat on the mat", "the cat sat on the mat", "quarterly revenue fell"])
    assert len(a) == embedder.dim == 384 and a == b
    assert abs(sum(x * x for x in a) - 1) < 1e-4
    assert sum(x * y for x, y in zip(a, c)) < 0.5
    assert embedder.embed_query(["the cat sat on the mat"])[0] == a
    with pytest.raises(strata.InputError, match="bogus"):
        strata.Embedder("bogus")


def test_a_generator_names_the_bad_field_of_a_message_and_a_missing_model():
    with pytest.raises(strata.InputError, match="no-such-model"):
        strata.Generator("/no-such-model.gguf")
    models = Path(os.environ.get("STRATA_MODELS", ROOT / "models"))
    if not (models / "smollm2-135m-instruct").is_dir():
        pytest.skip("needs the smollm2 weights: cargo xtask fetch-models smollm2")
    generator = strata.Generator("smollm2")
    with pytest.raises(strata.InputError, match=r"messages\[1\]\.role: `bogus`"):
        generator.chat([{"role": "user", "content": "hi"}, {"role": "bogus", "content": "x"}])
    with pytest.raises(strata.InputError, match=r"messages\[0\]: missing `content`"):
        generator.chat([{"role": "user"}])
    reply = generator.chat([{"role": "user", "content": "Say hello."}], max_tokens=8)
    assert reply["generated_tokens"] <= 8 and reply["text"]
    assert generator.chat([{"role": "user", "content": "Say hello."}], max_tokens=8)["text"] == reply["text"]


def _quiz_endpoint():
    """An OpenAI-compatible endpoint inside the test: it answers each request with a probe
    about the turns its reply format names as evidence (the name only those turns give)."""
    import http.server
    import re

    served = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = body["messages"][1]["content"]
            hint = prompt[prompt.rindex('"evidence": [') :]
            ids = re.findall(r'"(t\d+)"', hint[: hint.index("]") + 1])
            reply = {
                "question": f"Which name goes with Q{ids[0][1:]}X?",
                "answer": " and ".join(f"Zed{i[1:]}" for i in ids),
                "evidence": ids,
            }
            data = json.dumps(
                {
                    "choices": [{"message": {"role": "assistant", "content": json.dumps(reply)}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 10},
                }
            ).encode()
            served.append(ids)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1#quiz", served


def test_make_probes_writes_what_the_cli_writes(tmp_path):
    turns = [
        {
            "id": f"t{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "speaker": "Ana" if i % 2 == 0 else "Ben",
            "timestamp": f"2023-05-{8 + i // 10:02d}T10:{i:02d}:00Z",
            "content": f"On my trip I found a small lantern near gate{i}, and I named it Zed{i} after the harbour code Q{i}X.",
        }
        for i in range(60)
    ]
    source = tmp_path / "mine.json"
    source.write_text(json.dumps({"id": "mine", "turns": turns}))
    server, url, served = _quiz_endpoint()
    try:
        settings = ["--count", "8", "--recent-tokens", "200"]
        made = strata.make_probes(
            source, url, tmp_path / "py.probes.json", count=8, recent_tokens=200,
            models_dir=tmp_path / "models", progress=False,
        )
        assert made["asked"] == 8 and len(served) == 8
        assert made["kept"] == len(made["conversations"][0].probes) >= 4
        assert made["kept"] + sum(made["dropped"].values()) == 8
        assert all("reply" in v for v in made["verdicts"])
        assert (tmp_path / "py.probes.verdicts.jsonl").read_text().count("\n") == 8
        # The CLI, with the same settings and cache: nothing asked again, the same file.
        cli = subprocess.run(
            [BIN, "probes", source, "--generator", url, "--models-dir", tmp_path / "models",
             "--out", tmp_path / "cli.probes.json", "--quiet", *settings],
            capture_output=True, text=True,
        )
        assert cli.returncode == 0, cli.stderr
        assert len(served) == 8
        assert (tmp_path / "cli.probes.json").read_text() == (tmp_path / "py.probes.json").read_text()
    finally:
        server.shutdown()
    with pytest.raises(strata.InputError, match="nope.json"):
        strata.make_probes(tmp_path / "nope.json", url)
