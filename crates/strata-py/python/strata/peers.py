"""The memory that LangChain and LlamaIndex users reach for first, as strategies on Strata's harness.

``strata.peers.register()`` registers every peer whose package is installed (``pip install
strata[peers]`` installs the pinned versions) and returns their names; ``strata.eval`` then
scores them beside the built-ins, on the same probes, the same budget counted by the same
tokenizer, and the same rules (a context over the budget is a ``StrategyError`` naming the peer).

Each peer is called as its own documentation shows, with its defaults; what Strata chooses for it
is said here:

``langchain-trim``
    ``langchain_core.messages.trim_messages`` with ``strategy="last"``, ``start_on="human"``,
    ``include_system=True`` and ``max_tokens`` the budget, as LangChain's guide to trimming chat
    history sets it. Its token counter is the run's: a message list costs what the harness
    counts for it (framing, names and the reply priming included). ``end_on`` is left unset:
    a memory keeps the newest turn whoever said it.

``llamaindex-buffer``
    ``llama_index.core.memory.ChatMemoryBuffer.from_defaults(token_limit=...)``, its history then
    ``get()``. Its ``tokenizer_fn`` is the run's tokenizer (LlamaIndex's default downloads
    tiktoken's tables, which an offline machine cannot). The buffer counts message text only,
    not the chat framing, so with ``token_limit`` equal to the budget its context would be over
    the budget: the limit starts at the budget and is lowered by the overshoot until the framed
    context fits. The buffer drops its oldest messages one at a time and recounts what is left,
    so it is given only the newest messages whose text is more than the limit (it keeps the same
    ones from those as from the whole history).

Peers are question-agnostic: both keep the newest messages that fit.
"""

from typing import Callable, Dict, List, Optional

from . import History, register_strategy

#: The pinned versions ``strata[peers]`` installs (and the tests run against).
VERSIONS: Dict[str, str] = {"langchain-core": "1.8.1", "llama-index-core": "0.14.25"}


def _text_tokens(history: History) -> Callable[[str], int]:
    """Tokens of a text alone under the run's tokenizer (a system message's cost less its framing)."""
    framing = history.count("")
    return lambda text: max(history.count(text) - framing, 0)


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


def langchain_trim(history: History, budget: int, question: Optional[str] = None) -> List[str]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages

    def message(i: int):
        t = history[i]
        kind = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}.get(t.role)
        if kind is None:
            return ToolMessage(content=t.content, tool_call_id=t.tool_call_id or "", id=str(i))
        return kind(content=t.content, name=t.speaker, id=str(i))

    def cost(messages) -> int:
        # What the harness counts for these turns sent verbatim, framing and priming included.
        if not messages:
            return 0
        return history.overhead + sum(history.tokens[int(m.id)] for m in messages)

    kept = trim_messages(
        [message(i) for i in range(len(history))],
        max_tokens=budget,
        token_counter=cost,
        strategy="last",
        start_on="human",
        include_system=True,
        allow_partial=False,
    )
    return [history[int(m.id)].id for m in kept]


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
        framed = history.overhead + sum(history.tokens[i] for i in kept) if kept else 0
        if framed <= budget:
            return [history[i].id for i in kept]
        limit -= framed - budget
    return []


PEERS: Dict[str, Callable] = {"langchain-trim": langchain_trim, "llamaindex-buffer": llamaindex_buffer}
_PACKAGES = {"langchain-trim": "langchain_core", "llamaindex-buffer": "llama_index.core"}


def register() -> List[str]:
    """Registers each peer whose package imports; the names registered. A peer whose package is
    missing is reported in one warning naming it and the extra that installs it."""
    import importlib
    import warnings

    names = []
    for name, fn in PEERS.items():
        try:
            importlib.import_module(_PACKAGES[name])
        except ImportError as e:
            warnings.warn(f"peer {name}: {e}; install it with `pip install strata[peers]`", stacklevel=2)
            continue
        register_strategy(name, fn)
        names.append(name)
    return names
