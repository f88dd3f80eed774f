"""Strata: the memory of long LLM conversations, from Python.

Load transcripts, count tokens, build the context a strategy would send within a token
budget, run the tiered memory on a store file, and score strategies (the built-in ones and
your own, written in Python) on benchmark suites with the same harness as ``strata eval``.

>>> import strata
>>> conversation = strata.load("transcript.json")[0]
>>> ctx = strata.compress(conversation, strategy="window", budget=2000)
>>> ctx.messages()  # OpenAI chat messages
"""

from __future__ import annotations

import os
from typing import Callable, Iterable, List, Optional, Sequence, Union

from . import _strata
from ._strata import (
    BUILTIN_STRATEGIES,
    Block,
    Context,
    Conversation,
    Embedder,
    Generator,
    Hit,
    History,
    InputError,
    Memory,
    ModelError,
    StoreError,
    StrataError,
    StrategyError,
    Turn,
    compress,
    count_tokens,
    load,
    make_probes,
    registered_strategies,
)

__all__ = [
    "BUILTIN_STRATEGIES",
    "Block",
    "Context",
    "Conversation",
    "Embedder",
    "EvalResult",
    "Generator",
    "Hit",
    "History",
    "InputError",
    "Memory",
    "ModelError",
    "StoreError",
    "StrataError",
    "StrategyError",
    "Turn",
    "compress",
    "count_tokens",
    "eval",
    "load",
    "make_probes",
    "register_strategy",
    "registered_strategies",
]

#: The strategies ``eval`` compares when none are named, as ``strata eval`` does.
DEFAULT_STRATEGIES: List[str] = list(_strata.DEFAULT_STRATEGIES)


def register_strategy(
    name: str,
    fn: Optional[Callable[[History, int, Optional[str]], Iterable[Union[str, Turn]]]] = None,
    *,
    question_aware: bool = False,
):
    """Registers ``fn(history, budget, question)`` as the strategy ``name``.

    ``fn`` returns what the context holds, in order: turn ids (or ``Turn`` objects) for turns
    sent verbatim, and any other strings as notes sent as system messages. The harness scores
    it beside the built-in strategies, with the same metrics and the same budget check: a
    context over ``budget`` raises ``StrategyError`` naming the strategy. ``history.tokens[i]``
    is what turn ``i`` costs, ``history.overhead`` what a non-empty request adds once.

    With ``question_aware=True`` the question is passed in question-aware runs; otherwise it is
    always ``None`` and one context serves every question asked at a turn. Usable as a
    decorator: ``@strata.register_strategy("mine")``.
    """
    if fn is None:
        def decorate(f):
            _strata.register_strategy(name, f, question_aware)
            return f

        return decorate
    _strata.register_strategy(name, fn, question_aware)
    return fn


class EvalResult:
    """What ``eval`` measured.

    ``runs``: one dict per dataset, strategy, budget and mode, with every metric
    (``answer_recall``, ``evidence_recall``, ``token_reduction``, ``by_category``, ...), as in
    ``results.json``. ``records``: one dict per probe scored; ``builds``: one per context built
    (with ``build_ms``). ``results``: the whole ``results.json``. ``markdown``: the CLI's table.
    """

    def __init__(self, raw: dict):
        self.results: dict = raw["results"]
        self.runs: List[dict] = raw["results"]["runs"]
        self.records: List[dict] = raw["records"]
        self.builds: List[dict] = raw["builds"]
        self.segments: List[dict] = raw["segments"]
        self.summaries: List[dict] = raw["summaries"]
        self.answer_runs: List[dict] = raw["results"].get("answers", [])
        self.answers: List[dict] = raw["answers"]
        self.markdown: str = raw["markdown"]
        self.out: Optional[str] = None if raw["out"] is None else os.fspath(raw["out"])

    def to_pandas(self):
        """The runs as a pandas ``DataFrame``, one row per run: the run's key and headline
        metrics first, then the rest, categories flattened into
        ``by_category.<category>.<metric>`` columns. Needs pandas (``pip install pandas``)."""
        frame = _frame(self.runs, flatten=True)
        first = [c for c in _HEADLINE if c in frame.columns]
        return frame[first + [c for c in frame.columns if c not in first]]

    def records_to_pandas(self):
        """The per-probe records as a pandas ``DataFrame``."""
        return _frame(self.records)

    def builds_to_pandas(self):
        """The per-build records (tokens, build time) as a pandas ``DataFrame``."""
        return _frame(self.builds)

    def run(self, dataset: str, strategy: str, budget: int, mode: str) -> dict:
        """The run of one dataset, strategy, budget and mode."""
        for r in self.runs:
            if (r["dataset"], r["strategy"], r["budget"], r["mode"]) == (dataset, strategy, budget, mode):
                return r
        raise KeyError(f"no run {dataset}/{strategy}/{budget}/{mode}")

    def __repr__(self) -> str:
        return f"EvalResult(runs={len(self.runs)}, records={len(self.records)})"

    def __str__(self) -> str:
        return self.markdown


# The columns a reader looks for first: which run, and what it kept at what cost.
_HEADLINE = [
    "dataset", "strategy", "budget", "mode", "probes", "evidence_recall", "answer_recall",
    "answer_token_recall", "token_reduction", "build_ms_p50",
]


def _frame(rows: Sequence[dict], flatten: bool = False):
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("to_pandas needs pandas: pip install pandas") from e
    if flatten:
        return pd.json_normalize(list(rows), sep=".")
    return pd.DataFrame(list(rows))


def eval(
    datasets: Sequence[str] = ("locomo", "probes"),
    strategies: Optional[Sequence[str]] = None,
    budgets: Sequence[int] = (1000, 2000, 4000),
    mode: str = "both",
    *,
    tokenizer: str = "o200k",
    out: Optional[Union[str, os.PathLike]] = None,
    config: Optional[Union[dict, str, os.PathLike]] = None,
    data_dir: Optional[Union[str, os.PathLike]] = None,
    models_dir: Optional[Union[str, os.PathLike]] = None,
    embedder: str = "minilm",
    reranker: str = "none",
    model: Optional[str] = None,
    limit: Optional[int] = None,
    segmenters: Sequence[str] = ("none", "even-10", "fixed", "depth", "combined"),
    summarizers: Sequence[str] = ("lead-3",),
    progress: bool = True,
    root: Optional[Union[str, os.PathLike]] = None,
    reader: Optional[str] = None,
    judge: Optional[str] = None,
    sample: Optional[int] = None,
) -> EvalResult:
    """Scores strategies' retention and token reduction, as ``strata eval`` does.

    ``datasets``: suite names (``locomo``, ``locomo-sentences``, ``probes``, ``probes-dev``,
    ``probes-heldout``, ``qmsum``, ``tiage``, ``dialseg711``, ``dialogsum``) or transcript
    paths. ``strategies``: built-in names and names given to ``register_strategy`` (default:
    ``DEFAULT_STRATEGIES``). ``mode``: ``"agnostic"``, ``"aware"`` or ``"both"``. ``out``:
    where to write ``results.json``, the records and the charts (default: nowhere kept).
    ``embedder``: ``minilm``, ``nomic`` or ``bge``; ``reranker``: ``msmarco`` reranks the tiered
    memory's recall candidates with a cross-encoder, ``none`` keeps the fused order.
    ``limit``: only the first N conversations of each dataset. ``reader``: a model (``qwen``,
    ``qwen1.5b``, ``smollm2``, a GGUF path, or an OpenAI-compatible ``URL#MODEL``) asked each
    question over each context, its answers scored by F1 and BLEU-1 (and by ``judge``, a model
    of the same kinds, with the Mem0 judge prompt); ``sample``: only that many questions per
    category are put to it. ``progress``: a progress bar on
    stderr when it is a terminal. Public datasets are read from ``data_dir``, else
    ``$STRATA_DATA``, else ``../shared/datasets`` beside the checkout ``root`` (default: the
    current directory or the nearest folder above it holding ``datasets/probes/``).

    The interpreter is released while it runs; strategies written in Python take it only
    for their own calls.
    """
    raw = _strata.run_eval(
        list(datasets),
        list(strategies if strategies is not None else DEFAULT_STRATEGIES),
        [int(b) for b in budgets],
        mode,
        tokenizer,
        None if out is None else os.fspath(out),
        config if config is None or isinstance(config, dict) else os.fspath(config),
        None if data_dir is None else os.fspath(data_dir),
        None if models_dir is None else os.fspath(models_dir),
        embedder,
        reranker,
        model,
        limit,
        list(segmenters),
        list(summarizers),
        progress,
        None if root is None else os.fspath(root),
        reader=reader,
        judge=judge,
        sample=sample,
    )
    return EvalResult(raw)

