"""Type stubs of Strata's native module; `strata/__init__.py` re-exports every name."""

from __future__ import annotations

import datetime
import os
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

BUILTIN_STRATEGIES: List[str]
"""Every strategy name the harness knows without registration."""
DEFAULT_STRATEGIES: List[str]
"""The strategies `strata eval` compares when none are named."""

class StrataError(Exception):
    """Anything Strata could not do."""

class InputError(StrataError):
    """Bad input: a file or dict that does not load (the message names the file, line, turn or
    field), an unknown strategy, tokenizer or setting, model weights missing or not the pinned
    ones, a store file that is not usable. The CLI exits with status 2 for these."""

class StrategyError(StrataError):
    """A strategy failed or broke the harness's rules: a context over its budget, a turn picked
    twice, an exception raised by a strategy written in Python (set as ``__cause__``)."""

class ModelError(StrataError):
    """A model failed while running."""

class StoreError(StrataError):
    """The memory's store failed while working."""

Timestamp = Union[int, str, datetime.datetime]
Messages = Sequence[Mapping[str, Any]]
ConversationLike = Union["Conversation", Mapping[str, Any], Messages]

class Turn:
    """One message of a conversation."""

    def __init__(
        self,
        id: str,
        role: str,
        content: str,
        speaker: Optional[str] = None,
        timestamp: Optional[Timestamp] = None,
        tool_call_id: Optional[str] = None,
        tool_calls: Optional[Sequence[Mapping[str, Any]]] = None,
    ) -> None:
        """``role``: system (or developer), user, assistant or tool. ``timestamp``: seconds since
        the epoch, RFC 3339 text, or a datetime."""
    @staticmethod
    def from_dict(d: Mapping[str, Any], id: Optional[str] = None) -> Turn:
        """A turn from a transcript dict or an OpenAI message (``name`` is the speaker)."""
    def to_dict(self) -> Dict[str, Any]:
        """The turn as a dict of the transcript format (timestamps as RFC 3339 text)."""
    @property
    def id(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def speaker(self) -> Optional[str]: ...
    @property
    def timestamp(self) -> Optional[int]:
        """Seconds since the Unix epoch, UTC."""
    @property
    def tool_call_id(self) -> Optional[str]: ...
    @property
    def tool_calls(self) -> List[Dict[str, str]]: ...

class Conversation:
    """A whole transcript: turns, and the probes, gold boundaries and reference summaries a
    dataset gives."""

    def __init__(self, id: str, turns: Iterable[Union[Turn, Mapping[str, Any]]]) -> None:
        """Checked as a transcript file is (unique ids, times in order, tool links)."""
    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Conversation:
        """A conversation from a dict of the transcript format (``strata.transcript/1``)."""
    @staticmethod
    def from_messages(messages: Union[Messages, Mapping[str, Any]], id: str = "conversation") -> Conversation:
        """A conversation from OpenAI chat messages (a list, or a dict with ``messages``)."""
    def to_dict(self) -> Dict[str, Any]:
        """The conversation as a dict of the transcript format."""
    def messages(self) -> List[Dict[str, Any]]:
        """The turns as OpenAI chat messages."""
    @property
    def id(self) -> str: ...
    @property
    def turns(self) -> List[Turn]: ...
    @property
    def probes(self) -> List[Dict[str, Any]]:
        """Questions with their gold answers, evidence turn ids and the turn they follow."""
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> Turn: ...

class Block:
    """One message of a context."""

    @property
    def kind(self) -> str:
        """pinned_system, summary, registry, salient, verbatim_turn or recalled."""
    @property
    def role(self) -> str: ...
    @property
    def name(self) -> Optional[str]: ...
    @property
    def text(self) -> str:
        """The message's content."""
    @property
    def source_ids(self) -> List[str]:
        """The turns this block stands for."""
    @property
    def tokens(self) -> int:
        """What the block costs as a chat message, framing included."""
    def to_dict(self) -> Dict[str, Any]: ...

class Context:
    """What a strategy decided to send, block by block."""

    @property
    def strategy(self) -> str: ...
    @property
    def budget(self) -> int: ...
    @property
    def blocks(self) -> List[Block]: ...
    @property
    def total_tokens(self) -> int:
        """Every block plus the reply priming: what the request costs."""
    @property
    def history_tokens(self) -> int:
        """What the whole history would cost sent as it is."""
    @property
    def token_reduction(self) -> float:
        """1 - total_tokens / history_tokens."""
    @property
    def notes(self) -> List[str]:
        """Decisions worth knowing: fallbacks, truncations."""
    def verbatim_ids(self) -> List[str]:
        """The ids of every turn held verbatim (or recalled), in context order."""
    def messages(self) -> List[Dict[str, Any]]:
        """The context as OpenAI chat messages."""
    def text(self) -> str:
        """The context as plain text, one paragraph per message headed by its role."""
    def to_dict(self) -> Dict[str, Any]: ...
    def __len__(self) -> int: ...

class Hit:
    """A turn found by ``Memory.recall``."""

    @property
    def turn(self) -> Turn: ...
    @property
    def score(self) -> float: ...

class History:
    """The conversation so far, as a strategy written in Python sees it."""

    @property
    def id(self) -> str: ...
    @property
    def turns(self) -> List[Turn]: ...
    @property
    def tokens(self) -> List[int]:
        """What each turn costs as a chat message, framing included."""
    @property
    def pinned(self) -> int:
        """How many turns at the start are the pinned system prompt."""
    @property
    def overhead(self) -> int:
        """Tokens a request adds once it holds any message (the reply priming)."""
    @property
    def total_tokens(self) -> int:
        """What sending the whole history costs."""
    def unit(self, index: int) -> List[int]:
        """The turns kept or dropped together with turn ``index`` (a tool call and its results)."""
    def count(self, text: str) -> int:
        """What ``text`` costs as a system message of the context."""
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> Turn: ...
    def __iter__(self) -> Iterator[Turn]: ...

class Memory:
    """A conversation's durable, tiered memory on a store file."""

    def __init__(
        self,
        db: str = "memory.db",
        budget: int = 8000,
        embedder: Optional[str] = "minilm",
        model: Optional[str] = None,
        *,
        conversation: str = "default",
        tokenizer: str = "o200k",
        models_dir: Optional[Union[str, os.PathLike[str]]] = None,
        config: Optional[Union[Mapping[str, Any], str, os.PathLike[str]]] = None,
        clock: str = "system",
        reranker: str = "none",
    ) -> None:
        """``db``: a SQLite file, or ``":memory:"``. ``embedder``: an embedder of docs/models.md
        (minilm, ...) or None (words only). ``model``: summarise with qwen, qwen1.5b, smollm2, a GGUF path or ``URL#MODEL``.
        ``clock``: ``"system"``, or ``"last_turn"`` when replaying a transcript. ``reranker``:
        ``"msmarco"`` reorders recall's deeper candidates with a cross-encoder."""
    def push(
        self,
        turn: Optional[Union[Turn, Mapping[str, Any]]] = None,
        *,
        role: Optional[str] = None,
        content: Optional[str] = None,
    ) -> Turn:
        """Stores a turn (stored before this returns) and plans the tiers; returns it with its
        id and time."""
    def context(self, budget: Optional[int] = None, question: Optional[str] = None) -> Context:
        """The context within ``budget`` (the memory's by default); a question recalls turns."""
    def recall(self, query: str, k: int = 5) -> List[Hit]:
        """The ``k`` stored turns that best match ``query``, best first."""
    def checkpoint(self) -> str:
        """Moves what the policy can out of the hot tier now; returns the plan's explanation."""
    def settle(self) -> None:
        """Waits for the summaries being written in the background."""
    def explain(self) -> str:
        """Tier occupancy, the last plan's triggers, guards and moves, and notes."""
    def turns(self) -> List[Turn]: ...
    def tiers(self) -> List[str]:
        """Each turn's tier: hot, warm, cool or cold."""
    @property
    def conversation(self) -> str: ...
    @property
    def budget(self) -> int: ...
    def __len__(self) -> int: ...

class Embedder:
    """A sentence embedder on Strata's engine: unit vectors, one per text."""

    def __init__(self, name: str = "minilm", *, models_dir: Optional[Union[str, os.PathLike[str]]] = None) -> None:
        """``name``: an embedder of docs/models.md (minilm, ...), from the models folder (``cargo
        xtask fetch-models``)."""
    @property
    def model_id(self) -> str: ...
    @property
    def dim(self) -> int: ...
    def embed(self, texts: List[str]) -> List[List[float]]:
        """One vector per text, for texts to be found."""
    def embed_query(self, texts: List[str]) -> List[List[float]]:
        """One vector per text, for texts that search (questions)."""

class Generator:
    """A chat model on Strata's engine (or an OpenAI-compatible endpoint), greedy."""

    def __init__(self, name: str = "qwen", *, models_dir: Optional[Union[str, os.PathLike[str]]] = None) -> None:
        """``name``: qwen, qwen1.5b, smollm2, a GGUF path, or ``URL#MODEL``."""
    @property
    def model_id(self) -> str: ...
    def chat(self, messages: List[Mapping[str, str]], max_tokens: int = 256) -> Dict[str, Any]:
        """The reply to ``messages`` (``role``/``content`` dicts): ``text``, ``prompt_tokens``,
        ``generated_tokens``, ``reused_tokens``."""

def load(path: Union[str, os.PathLike[str]], format: Optional[str] = None) -> List[Conversation]:
    """Every conversation in a file: Strata JSON or JSONL, OpenAI messages, or LoCoMo's file
    (``format``: strata, messages or locomo; detected when left out)."""

def make_probes(
    path: Union[str, os.PathLike[str]],
    generator: str,
    out: Optional[Union[str, os.PathLike[str]]] = None,
    *,
    log: Optional[Union[str, os.PathLike[str]]] = None,
    count: int = 24,
    seed: int = 0,
    recent_tokens: int = 1000,
    tokenizer: str = "o200k",
    models_dir: Optional[Union[str, os.PathLike[str]]] = None,
    deadline_ms: int = 300_000,
    progress: bool = True,
) -> Dict[str, Any]:
    """Probes for each conversation of the file at ``path``, written by ``generator`` (qwen,
    qwen1.5b, smollm2, a GGUF path, or ``URL#MODEL``; its replies cached on disk) and checked
    before they are kept, as ``strata probes`` writes them. With ``out``, saved there (Strata
    JSON, or JSONL for ``.jsonl``) for ``eval(datasets=[out])``, with every reply and verdict
    beside it (``NAME.verdicts.jsonl``, or ``log``). Returns ``conversations`` (with their new
    probes), ``verdicts``, ``asked``, ``kept``, ``dropped`` (reason: count) and ``report``."""

def count_tokens(text_or_messages: Union[str, ConversationLike], tokenizer: str = "o200k") -> int:
    """Tokens in a text, or what a conversation or OpenAI message list costs as one request
    (framing and reply priming included). ``tokenizer``: o200k, cl100k, estimate, or a
    tokenizer.json path."""

def compress(
    conversation: ConversationLike,
    strategy: str = "window",
    budget: int = 2000,
    question: Optional[str] = None,
    config: Optional[Union[Mapping[str, Any], str, os.PathLike[str]]] = None,
    *,
    at: Optional[str] = None,
    tokenizer: str = "o200k",
    model: Optional[str] = None,
    embedder: str = "minilm",
    models_dir: Optional[Union[str, os.PathLike[str]]] = None,
    reranker: str = "none",
) -> Context:
    """The context ``strategy`` (built-in or registered) builds within ``budget`` tokens, as it
    stood right after turn ``at`` (default: the last). With a ``question``, ``reranker``
    ``msmarco`` reorders the tiered memory's recall with the cross-encoder (``none``, the
    default, keeps the fused order)."""

def register_strategy(name: str, fn_: Callable[[History, int, Optional[str]], Iterable[Union[str, Turn]]], question_aware: bool = False) -> None: ...
def registered_strategies() -> List[str]:
    """The names registered so far."""
def run_eval(*args: Any) -> Dict[str, Any]: ...
