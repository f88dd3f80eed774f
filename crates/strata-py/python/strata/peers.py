"""The memory LangChain, LlamaIndex and Mem0 users reach for, as strategies on Strata's harness.

``strata.peers.register()`` registers every peer whose packages are installed (``pip install
strata[peers]`` installs the pinned versions) and returns their names; ``strata.eval`` then
scores them beside the built-ins, on the same probes, the same budget counted by the same
tokenizer, and the same rules (a context over the budget is a ``StrategyError`` naming the peer).

Each peer is called as its own documentation shows, with its defaults. Where a peer needs a
model, it gets the one Strata uses for the same job, on Strata's engine (``strata.Embedder``,
``strata.Generator``), through the peer's own extension point (a LangChain chat model or
embeddings class, a LlamaIndex ``BaseEmbedding``). What Strata chooses for each is said here:

``langchain-trim`` (question-agnostic)
    ``langchain_core.messages.trim_messages`` with ``strategy="last"``, ``start_on="human"``,
    ``include_system=True`` and ``max_tokens`` the budget, as LangChain's guide to trimming chat
    history sets it. Its token counter is the run's: a message list costs what the harness
    counts for it (framing, names and the reply priming included). ``end_on`` is left unset:
    a memory keeps the newest turn whoever said it.

``llamaindex-buffer`` (question-agnostic)
    ``llama_index.core.memory.ChatMemoryBuffer.from_defaults(token_limit=...)``, its history then
    ``get()``. Its ``tokenizer_fn`` is the run's tokenizer (LlamaIndex's default downloads
    tiktoken's tables, which an offline machine cannot). The buffer counts message text only,
    not the chat framing, so with ``token_limit`` equal to the budget its context would be over
    the budget: the limit starts at the budget and is lowered by the overshoot until the framed
    context fits. The buffer drops its oldest messages one at a time and recounts what is left,
    so it is given only the newest messages whose text is more than the limit (it keeps the same
    ones from those as from the whole history).

``llamaindex-vector`` (question-aware)
    ``llama_index.core.memory.Memory.from_defaults`` with one ``VectorMemoryBlock`` (as
    LlamaIndex's memory guide configures it: ``priority=2``, ``similarity_top_k=2``, the
    default retrieval window of 5 messages, the system message as the place memory goes). Each
    turn is ``put()``; the context is ``get(input=question)``: the newest messages within 70% of
    the limit (the default ``chat_history_token_ratio``), and the two stored batches of older
    messages most like the question and the newest messages. Its embedder is MiniLM (Strata's),
    its vector store Qdrant's in-process mode (the block needs a store that keeps text, which
    LlamaIndex's own in-memory store does not). ``token_flush_size`` is 10% of the limit, the
    proportion of LlamaIndex's defaults (3,000 of 30,000 tokens): at ``from_defaults``'s 70%
    of a limit as small as a budget, the two retrieved batches never fit beside the history and
    the block is always dropped. ``token_limit`` is the budget less the framing the memory does
    not count (the messages', the memory block's tags, the reply priming), worked out from the
    turns before the memory is built. The retrieved batches come back as LlamaIndex writes them
    (``<message role='user'>...</message>``), a note, so they count for answer recall and the
    reader, not for evidence recall (which counts turns sent as messages).

``langchain-summary-buffer`` (question-agnostic, an LLM per summary)
    ``langchain_classic.memory.ConversationSummaryBufferMemory`` with its default prompt and
    prefixes (``Human``/``AI``), ``return_messages=True``, fed one exchange at a time as
    ``save_context`` does (it prunes after each), its LLM Strata's summariser, Qwen2.5-Coder
    0.5B, greedy, replies of at most 256 tokens. ``max_token_limit`` (what the newest messages
    may cost) is the budget less what a summary of 256 tokens costs as a note; should a summary
    count more under the run's tokenizer, the oldest kept messages are dropped until the
    context fits (counted in ``STATS["summary_buffer_trimmed"]``).

``mem0`` (question-aware, an LLM per stored exchange)
    ``mem0.Memory.from_config`` with its default prompts, its LLM Qwen2.5-Coder 1.5B (through
    Mem0's LangChain provider; greedy, replies of up to Mem0's default 2,000 tokens), MiniLM
    embeddings (through its LangChain embedder), Qdrant's local store and its history SQLite
    file in a scratch folder. Its keyword search and entity linking need ``fastembed`` and
    spaCy models, which fetch weights from the network: offline they stay off (Mem0 says so on
    stderr) and it searches by vectors. Messages are added two at a time,
    as ``"Speaker: text"`` with the session's date in the metadata, as Mem0's own LoCoMo
    evaluation adds them; the context is ``search(question, top_k=20)`` (its default), the
    memories written ``date: memory`` best first, as many as fit the budget.

The memories that are built turn by turn (``llamaindex-vector``, the summary buffer, Mem0)
are kept per conversation and carried forward when the harness asks again at a later turn,
so a conversation is read once, not once per probe.
"""

import atexit
import contextlib
import logging
import os
import tempfile
import threading
import time
import warnings
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import Embedder, Generator, History, StrataError, register_strategy

#: The pinned versions ``strata[peers]`` installs (and the tests run against).
VERSIONS: Dict[str, str] = {
    "langchain-core": "1.8.1",
    "langchain-classic": "1.0.8",
    "langchain": "1.5.2",
    "llama-index-core": "0.14.25",
    "llama-index-vector-stores-qdrant": "0.10.4",
    "qdrant-client": "1.20.0",
    "mem0ai": "2.2.1",
}

#: The models the peers use, by job; ``register()`` may change them.
MODELS: Dict[str, Optional[str]] = {
    "embedder": "minilm",
    "summariser": "qwen",
    "extractor": "qwen1.5b",
    "models_dir": None,
}

#: The most tokens a summary (the summary buffer's) may have.
SUMMARY_TOKENS = 256
#: The most tokens of Mem0's extraction reply (a JSON list of facts): Mem0's own default
#: (``BaseLlmConfig.max_tokens``); its LangChain provider leaves the limit to the model.
EXTRACTION_TOKENS = 2000

#: What happened that the tables should say: contexts the summary buffer had to trim to fit,
#: vector-memory contexts without retrieved memory (none stored yet, or the block dropped by
#: LlamaIndex for not fitting beside the history), the LLM peers' calls and their tokens.
STATS: Dict[str, float] = {
    "summary_buffer_trimmed": 0,
    "vector_contexts": 0,
    "vector_contexts_without_memory": 0,
    "llm_calls": 0,
    "prompt_tokens": 0,
    "reused_tokens": 0,
    "generated_tokens": 0,
    "llm_seconds": 0,
}

_models: Dict[Tuple[str, str], Any] = {}
_models_lock = threading.Lock()
# One LLM peer at a time: the engine keeps one prompt's cache, and two conversations read in
# turn would each evict the other's (Mem0's 7,500-token instructions most of all).
_llm_lock = threading.Lock()


def _embedder() -> Embedder:
    return _model("embedder", MODELS["embedder"], lambda n: Embedder(n, models_dir=MODELS["models_dir"]))


def _generator(job: str) -> Generator:
    return _model(job, MODELS[job], lambda n: Generator(n, models_dir=MODELS["models_dir"]))


def _model(job: str, name: str, make: Callable[[str], Any]) -> Any:
    with _models_lock:
        if (job, name) not in _models:
            _models[(job, name)] = make(name)
        return _models[(job, name)]


def _text_tokens(history: History) -> Callable[[str], int]:
    """Tokens of a text alone under the run's tokenizer (a system message's cost less its framing)."""
    framing = history.count("")
    return lambda text: max(history.count(text) - framing, 0)


def _framed(history: History, kept: List[int]) -> int:
    """What the turns ``kept`` cost sent verbatim, framing and reply priming included."""
    return history.overhead + sum(history.tokens[i] for i in kept) if kept else 0


def _newest_over(history: History, limit: int, tokens: Callable[[str], int]) -> int:
    """The index of the oldest turn of the shortest suffix whose text is more than ``limit``
    tokens (0 when the whole history is not): a buffer that keeps the newest messages within
    ``limit`` keeps the same ones from that suffix as from the whole history."""
    total = 0
    for i in range(len(history) - 1, -1, -1):
        total += tokens(history[i].content) + 1
        if total > limit:
            return max(i - 1, 0)
    return 0


class _Carried:
    """Memories built turn by turn, one per key (a conversation and its settings), carried
    forward when the same conversation comes back longer; rebuilt when it is another."""

    def __init__(self) -> None:
        self._slots: Dict[Tuple, Tuple[int, str, Any]] = {}
        self._lock = threading.Lock()

    def take(self, key: Tuple, history: History, make: Callable[[], Any]) -> Tuple[Any, int]:
        """The memory for ``key`` and how many of ``history``'s turns it has read."""
        with self._lock:
            slot = self._slots.pop(key, None)
        if slot is not None:
            n, last_id, memory = slot
            if n <= len(history) and (n == 0 or history[n - 1].id == last_id):
                return memory, n
        return make(), 0

    def drain(self) -> List[Tuple[int, str, Any]]:
        """Every memory kept, forgotten here."""
        with self._lock:
            slots, self._slots = list(self._slots.values()), {}
        return slots

    def give(self, key: Tuple, history: History, memory: Any) -> None:
        with self._lock:
            self._slots[key] = (len(history), history[len(history) - 1].id if len(history) else "", memory)


# --- LangChain ---------------------------------------------------------------------------


def _langchain_message(history: History, i: int):
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    t = history[i]
    kind = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}.get(t.role)
    if kind is None:
        return ToolMessage(content=t.content, tool_call_id=t.tool_call_id or "", id=str(i))
    return kind(content=t.content, name=t.speaker, id=str(i))


def langchain_trim(history: History, budget: int, question: Optional[str] = None) -> List[str]:
    from langchain_core.messages import trim_messages

    def cost(messages) -> int:
        # What the harness counts for these turns sent verbatim, framing and priming included.
        return _framed(history, [int(m.id) for m in messages])

    kept = trim_messages(
        [_langchain_message(history, i) for i in range(len(history))],
        max_tokens=budget,
        token_counter=cost,
        strategy="last",
        start_on="human",
        include_system=True,
        allow_partial=False,
    )
    return [history[int(m.id)].id for m in kept]


_chat_model_class = None


def langchain_chat_model(job: str = "summariser", max_tokens: int = SUMMARY_TOKENS, count=None):
    """A LangChain chat model over ``strata.Generator`` (the model ``MODELS[job]`` names):
    greedy, at most ``max_tokens`` a reply; ``count(messages)`` is its token counter."""
    global _chat_model_class
    if _chat_model_class is None:
        from langchain_core.language_models import BaseChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.outputs import ChatGeneration, ChatResult

        roles = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}

        class StrataChatModel(BaseChatModel):
            """A chat model on Strata's engine."""

            job: str
            max_tokens: int
            count: Any = None

            @property
            def _llm_type(self) -> str:
                return "strata"

            def _generate(self, messages, stop=None, run_manager=None, **kwargs):
                prompt = [{"role": roles.get(m.type, "user"), "content": m.text} for m in messages]
                start = time.perf_counter()
                reply = _generator(self.job).chat(prompt, self.max_tokens)
                STATS["llm_seconds"] += time.perf_counter() - start
                STATS["llm_calls"] += 1
                for k in ("prompt_tokens", "reused_tokens", "generated_tokens"):
                    STATS[k] += reply[k]
                return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply["text"]))])

            def get_num_tokens_from_messages(self, messages, tools=None) -> int:
                if self.count is None:
                    return super().get_num_tokens_from_messages(messages, tools)
                return self.count(messages)

        _chat_model_class = StrataChatModel
    return _chat_model_class(job=job, max_tokens=max_tokens, count=count)


_langchain_embeddings_class = None


def langchain_embeddings():
    """LangChain ``Embeddings`` over ``strata.Embedder`` (the model ``MODELS["embedder"]``)."""
    global _langchain_embeddings_class
    if _langchain_embeddings_class is None:
        from langchain_core.embeddings import Embeddings

        class StrataEmbeddings(Embeddings):
            def embed_documents(self, texts):
                return _embedder().embed(list(texts))

            def embed_query(self, text):
                return _embedder().embed_query([text])[0]

        _langchain_embeddings_class = StrataEmbeddings
    return _langchain_embeddings_class()


_summary_buffers = _Carried()


def langchain_summary_buffer(history: History, budget: int, question: Optional[str] = None) -> List[str]:
    from langchain_classic.memory import ConversationSummaryBufferMemory

    note = history.count("") + SUMMARY_TOKENS
    limit = budget - note
    if limit <= history.overhead:
        return []

    def count(messages) -> int:
        return _framed(history, [int(m.id) for m in messages])

    def make():
        llm = langchain_chat_model("summariser", SUMMARY_TOKENS, count)
        # Deprecated in LangChain 0.3.1 for agents' checkpointed state, which keeps no summary;
        # still the summary buffer LangChain ships (langchain-classic, until 2.0).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ConversationSummaryBufferMemory(llm=llm, max_token_limit=limit, return_messages=True)

    with _llm_lock:
        key = (history.id, budget, MODELS["summariser"])
        memory, start = _summary_buffers.take(key, history, make)
        memory.llm.count = count
        for i in range(start, len(history)):
            if history[i].role == "system" and i < history.pinned:
                continue
            memory.chat_memory.add_message(_langchain_message(history, i))
            # `save_context` adds an exchange (a user message and the reply), then prunes.
            exchange_ends = i + 1 == len(history) or history[i + 1].role == "user"
            if exchange_ends:
                memory.prune()
        _summary_buffers.give(key, history, memory)
        summary = memory.moving_summary_buffer.strip()
        kept = [int(m.id) for m in memory.chat_memory.messages]
    pinned = list(range(history.pinned))
    while kept and (history.count(summary) if summary else 0) + _framed(history, pinned + kept) > budget:
        kept.pop(0)
        STATS["summary_buffer_trimmed"] += 1
    picks = [history[i].id for i in pinned]
    if summary:
        picks.append(summary)
    return picks + [history[i].id for i in kept]


# --- LlamaIndex --------------------------------------------------------------------------


def llamaindex_buffer(history: History, budget: int, question: Optional[str] = None) -> List[str]:
    from llama_index.core.llms import ChatMessage, MessageRole
    from llama_index.core.memory import ChatMemoryBuffer

    roles = {
        "system": MessageRole.SYSTEM,
        "user": MessageRole.USER,
        "assistant": MessageRole.ASSISTANT,
        "tool": MessageRole.TOOL,
    }
    tokens = _text_tokens(history)
    limit = budget
    while limit > 0:
        start = _newest_over(history, limit, tokens)
        messages = [
            ChatMessage(role=roles[history[i].role], content=history[i].content, additional_kwargs={"turn": i})
            for i in range(start, len(history))
        ]
        buffer = ChatMemoryBuffer.from_defaults(
            chat_history=messages, token_limit=limit, tokenizer_fn=lambda text: [0] * tokens(text)
        )
        kept = [m.additional_kwargs["turn"] for m in buffer.get()]
        framed = _framed(history, kept)
        if framed <= budget:
            return [history[i].id for i in kept]
        limit -= framed - budget
    return []


_llamaindex_embedding_class = None


def llamaindex_embedding():
    """A LlamaIndex ``BaseEmbedding`` over ``strata.Embedder`` (the model ``MODELS["embedder"]``)."""
    global _llamaindex_embedding_class
    if _llamaindex_embedding_class is None:
        from llama_index.core.embeddings import BaseEmbedding

        class StrataEmbedding(BaseEmbedding):
            def _get_query_embedding(self, query: str) -> List[float]:
                return _embedder().embed_query([query])[0]

            def _get_text_embedding(self, text: str) -> List[float]:
                return _embedder().embed([text])[0]

            def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
                return _embedder().embed(list(texts))

            async def _aget_query_embedding(self, query: str) -> List[float]:
                return self._get_query_embedding(query)

            async def _aget_text_embedding(self, text: str) -> List[float]:
                return self._get_text_embedding(text)

        _llamaindex_embedding_class = StrataEmbedding
    return _llamaindex_embedding_class(model_name=MODELS["embedder"])


# The framing the memory template adds around retrieved text, beyond what LlamaIndex counts.
_MEMORY_TAGS = "<memory>\n<vector_memory>\n\n</vector_memory>\n</memory>"
_vector_memories = _Carried()


def _vector_limit(history: History, budget: int, tokens: Callable[[str], int]) -> int:
    """The ``token_limit`` under which what the memory returns, framed, fits ``budget``: the
    budget less the framing of the messages its history part can hold (70% of the limit), of
    the system message it writes, and of the template's tags."""
    ratio = 0.7
    framing, text = 0, 0
    for i in range(len(history) - 1, -1, -1):
        t = tokens(history[i].content)
        if text + t > ratio * budget:
            break
        text += t
        framing += history.tokens[i] - t
    return budget - framing - history.overhead - history.count(_MEMORY_TAGS)


def llamaindex_vector(history: History, budget: int, question: Optional[str] = None) -> List[str]:
    from llama_index.core.llms import ChatMessage
    from llama_index.core.memory import Memory, VectorMemoryBlock
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import AsyncQdrantClient, QdrantClient

    tokens = _text_tokens(history)
    limit = _vector_limit(history, budget, tokens)
    while limit > 0:
        key = (history.id, budget, limit, MODELS["embedder"])

        def make():
            # The block reads and writes through the async client only; the sync one is
            # required by the store's constructor (which warns that the two do not share data,
            # and that payload indexes do nothing in local mode: both known, both harmless).
            with _quiet("llama_index.vector_stores.qdrant.base"):
                store = QdrantVectorStore(
                    collection_name="memory",
                    client=QdrantClient(location=":memory:"),
                    aclient=AsyncQdrantClient(location=":memory:"),
                )
            block = VectorMemoryBlock(
                name="vector_memory", vector_store=store, priority=2, embed_model=llamaindex_embedding(), similarity_top_k=2
            )
            return Memory.from_defaults(
                session_id=history.id,
                token_limit=limit,
                token_flush_size=max(limit // 10, 1),
                tokenizer_fn=lambda text: [0] * tokens(text),
                memory_blocks=[block],
                insert_method="system",
            )

        memory, start = _vector_memories.take(key, history, make)
        with _quiet("llama_index.vector_stores.qdrant.base"):
            for i in range(start, len(history)):
                memory.put(ChatMessage(role=history[i].role, content=history[i].content))
        _vector_memories.give(key, history, memory)
        messages = memory.get(input=question) if question else memory.get()
        picks, kept = _llamaindex_picks(history, messages)
        cost = _framed(history, kept) + sum(history.count(p) for p in picks)
        if cost <= budget:
            STATS["vector_contexts"] += 1
            if not picks:
                STATS["vector_contexts_without_memory"] += 1
            return picks + [history[i].id for i in kept]
        limit -= cost - budget
    return []


@contextlib.contextmanager
def _quiet(logger: str):
    """Silences one library logger's warnings and Python's warnings for a while."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        log.setLevel(level)


def _llamaindex_picks(history: History, messages) -> Tuple[List[str], List[int]]:
    """The memory's system message (what its blocks wrote) as a note, and the turns of its
    chat history, which is the newest part of the conversation (the memory keeps a suffix)."""
    notes, chat = [], []
    for m in messages:
        if m.role.value == "system" and "<memory>" in (m.content or ""):
            notes.append(m.content.strip())
        else:
            chat.append(m)
    return notes, list(range(len(history) - len(chat), len(history)))


# --- Mem0 ---------------------------------------------------------------------------------

_mem0_memories = _Carried()
_mem0_dirs: List[tempfile.TemporaryDirectory] = []


@atexit.register
def _close_mem0() -> None:
    # Qdrant's local client closes its files in `__del__`, which at interpreter exit runs after
    # the import machinery is gone and prints a traceback; closing first keeps the exit quiet.
    for _, _, memory in _mem0_memories.drain():
        client = getattr(getattr(memory, "vector_store", None), "client", None)
        if client is not None:
            client.close()


def _mem0_memory():
    from mem0 import Memory

    scratch = tempfile.TemporaryDirectory(prefix="strata-mem0-")
    _mem0_dirs.append(scratch)
    llm = langchain_chat_model("extractor", EXTRACTION_TOKENS)
    return Memory.from_config(
        {
            "llm": {"provider": "langchain", "config": {"model": llm}},
            "embedder": {"provider": "langchain", "config": {"model": langchain_embeddings()}},
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": "memories",
                    "embedding_model_dims": _embedder().dim,
                    "path": os.path.join(scratch.name, "qdrant"),
                    "on_disk": False,
                },
            },
            "history_db_path": os.path.join(scratch.name, "history.db"),
        }
    )


def _date(timestamp: Optional[int]) -> str:
    if timestamp is None:
        return ""
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")


def mem0(history: History, budget: int, question: Optional[str] = None) -> List[str]:
    with _llm_lock:
        key = (history.id, MODELS["extractor"], MODELS["embedder"])
        memory, start = _mem0_memories.take(key, history, _mem0_memory)
        user = "conversation"
        batch: List[int] = []
        for i in range(start, len(history)):
            if history[i].role not in ("user", "assistant"):
                continue
            batch.append(i)
            # Two messages at a time, as Mem0's LoCoMo evaluation adds them; a batch never
            # spans two dates (its metadata holds one).
            next_date = _date(history[i + 1].timestamp) if i + 1 < len(history) else None
            if len(batch) == 2 or next_date != _date(history[i].timestamp) or i + 1 == len(history):
                messages = [
                    {"role": history[j].role, "content": f"{history[j].speaker or history[j].role}: {history[j].content}"}
                    for j in batch
                ]
                memory.add(messages, user_id=user, metadata={"timestamp": _date(history[batch[0]].timestamp)})
                batch = []
        _mem0_memories.give(key, history, memory)
        query = question or (history[len(history) - 1].content if len(history) else "")
        if not query.strip():
            return []
        found = memory.search(query, filters={"user_id": user}).get("results", [])
    lines: List[str] = []
    for hit in found:
        stamp = (hit.get("metadata") or {}).get("timestamp")
        line = f"{stamp}: {hit['memory']}" if stamp else hit["memory"]
        note = "Memories:\n" + "\n".join(lines + [line])
        if history.overhead + history.count(note) > budget:
            break
        lines.append(line)
    return ["Memories:\n" + "\n".join(lines)] if lines else []


# --- Registration -------------------------------------------------------------------------

#: Each peer: its function, whether it reads the question, the modules and the models (by job,
#: see ``MODELS``) it needs.
PEERS: Dict[str, Tuple[Callable, bool, Tuple[str, ...], Tuple[str, ...]]] = {
    "langchain-trim": (langchain_trim, False, ("langchain_core",), ()),
    "llamaindex-buffer": (llamaindex_buffer, False, ("llama_index.core",), ()),
    "llamaindex-vector": (
        llamaindex_vector,
        True,
        ("llama_index.core", "llama_index.vector_stores.qdrant"),
        ("embedder",),
    ),
    "langchain-summary-buffer": (langchain_summary_buffer, False, ("langchain_classic",), ("summariser",)),
    "mem0": (mem0, True, ("mem0", "langchain"), ("extractor", "embedder")),
}

#: The peers that call an LLM (one summary or extraction per exchange stored).
LLM_PEERS = ("langchain-summary-buffer", "mem0")


def register(
    names: Optional[List[str]] = None,
    *,
    embedder: Optional[str] = None,
    summariser: Optional[str] = None,
    extractor: Optional[str] = None,
    models_dir: Optional[str] = None,
) -> List[str]:
    """Registers the peers ``names`` (default: all) whose packages import and whose models
    open; the names registered. A peer whose package is missing, or whose model cannot be
    opened, is reported in one warning naming it (and the extra, or the model), and the others
    are registered. ``embedder`` (minilm), ``summariser``
    (qwen) and ``extractor`` (qwen1.5b) name the models the peers use; ``models_dir`` where
    their weights are (default: as ``strata.Embedder``)."""
    import importlib

    # Mem0 sends usage events to PostHog unless told not to; an offline run only logs errors.
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    for job, value in (("embedder", embedder), ("summariser", summariser), ("extractor", extractor)):
        if value is not None:
            MODELS[job] = value
    if models_dir is not None:
        MODELS["models_dir"] = os.fspath(models_dir)
    registered = []
    for name in names if names is not None else list(PEERS):
        if name not in PEERS:
            raise ValueError(f"peer {name!r}: expected one of {', '.join(PEERS)}")
        fn, aware, modules, jobs = PEERS[name]
        try:
            for module in modules:
                importlib.import_module(module)
        except ImportError as e:
            warnings.warn(f"peer {name}: {e}; install it with `pip install strata[peers]`", stacklevel=2)
            continue
        try:
            # Opening a model checks its files (a local model is read at its first prompt).
            for job in jobs:
                _embedder() if job == "embedder" else _generator(job)
        except StrataError as e:
            warnings.warn(f"peer {name}: cannot start: {e}", stacklevel=2)
            continue
        register_strategy(name, fn, question_aware=aware)
        registered.append(name)
    return registered
