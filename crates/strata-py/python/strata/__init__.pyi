"""Type stubs of the `strata` package."""

from __future__ import annotations

import os
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Union, overload, Any

from ._strata import (
    BUILTIN_STRATEGIES as BUILTIN_STRATEGIES,
    Block as Block,
    Context as Context,
    Conversation as Conversation,
    Embedder as Embedder,
    Generator as Generator,
    Hit as Hit,
    History as History,
    InputError as InputError,
    Memory as Memory,
    ModelError as ModelError,
    StoreError as StoreError,
    StrataError as StrataError,
    StrategyError as StrategyError,
    Turn as Turn,
    compress as compress,
    count_tokens as count_tokens,
    load as load,
    make_probes as make_probes,
    registered_strategies as registered_strategies,
)

DEFAULT_STRATEGIES: List[str]

StrategyFn = Callable[[History, int, Optional[str]], Iterable[Union[str, Turn]]]

@overload
def register_strategy(name: str, fn: StrategyFn, *, question_aware: bool = False) -> StrategyFn: ...
@overload
def register_strategy(name: str, fn: None = None, *, question_aware: bool = False) -> Callable[[StrategyFn], StrategyFn]: ...

class EvalResult:
    """What ``eval`` measured: ``runs`` (one dict per dataset, strategy, budget and mode, as in
    results.json), ``records`` (per probe), ``builds`` (per context built), ``results`` (the
    whole results.json), ``markdown`` (the CLI's table)."""

    results: Dict[str, Any]
    runs: List[Dict[str, Any]]
    records: List[Dict[str, Any]]
    builds: List[Dict[str, Any]]
    segments: List[Dict[str, Any]]
    summaries: List[Dict[str, Any]]
    markdown: str
    out: Optional[str]
    def to_pandas(self) -> Any:
        """The runs as a pandas DataFrame (categories flattened into columns)."""
    def records_to_pandas(self) -> Any:
        """The per-probe records as a pandas DataFrame."""
    def builds_to_pandas(self) -> Any:
        """The per-build records as a pandas DataFrame."""
    def run(self, dataset: str, strategy: str, budget: int, mode: str) -> Dict[str, Any]:
        """The run of one dataset, strategy, budget and mode."""

def eval(
    datasets: Sequence[str] = ...,
    strategies: Optional[Sequence[str]] = None,
    budgets: Sequence[int] = ...,
    mode: str = "both",
    *,
    tokenizer: str = "o200k",
    out: Optional[Union[str, os.PathLike[str]]] = None,
    config: Optional[Union[Dict[str, Any], str, os.PathLike[str]]] = None,
    data_dir: Optional[Union[str, os.PathLike[str]]] = None,
    models_dir: Optional[Union[str, os.PathLike[str]]] = None,
    embedder: str = "minilm",
    reranker: str = "none",
    model: Optional[str] = None,
    limit: Optional[int] = None,
    segmenters: Sequence[str] = ...,
    summarizers: Sequence[str] = ...,
    progress: bool = True,
    root: Optional[Union[str, os.PathLike[str]]] = None,
) -> EvalResult:
    """Scores strategies' retention and token reduction, as ``strata eval`` does; registered
    Python strategies are scored beside the built-in ones."""
