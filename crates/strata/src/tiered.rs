//! `tiered`: the memory as an eval strategy. Each conversation (and budget) gets a memory in
//! RAM that is fed the history's new turns at every build, so the policy, the summaries and
//! the cold store evolve turn by turn exactly as they would in a deployment.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use strata_core::{Context, Embedder, Generator, History, Strategy, StrategyError};

use crate::config::{Clock, MemoryConfig, TieredConfig};
use crate::memory::{Memory, Parts};
use crate::recall::Reranking;

/// One memory, shared between the eval's threads.
type SharedMemory = Arc<Mutex<Memory>>;

/// The tiered memory as a [`Strategy`]: question-aware (recall from the cold store for the
/// question) when given a question, question-agnostic (tiers, summaries, registry) otherwise.
pub struct Tiered {
    embedder: Option<Arc<dyn Embedder>>,
    generator: Option<Arc<dyn Generator>>,
    reranker: Option<Arc<Reranking>>,
    configure: Box<dyn Fn(&mut MemoryConfig) + Send + Sync>,
    memories: Mutex<HashMap<(String, usize), SharedMemory>>,
}

impl std::fmt::Debug for Tiered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tiered")
            .field("embedder", &self.embedder.as_ref().map(|e| e.model_id().to_string()))
            .field("generator", &self.generator.as_ref().map(|g| g.model_id().to_string()))
            .finish()
    }
}

impl Tiered {
    /// Its name in the catalog, and the strategy a memory's contexts are reported under.
    pub const NAME: &'static str = crate::config::TIERED;

    pub fn new(embedder: Option<Arc<dyn Embedder>>, generator: Option<Arc<dyn Generator>>) -> Tiered {
        Tiered {
            embedder,
            generator,
            reranker: None,
            configure: Box::new(|_| {}),
            memories: Mutex::new(HashMap::new()),
        }
    }

    /// Question-aware contexts rerank recall's candidates with `reranker`.
    pub fn with_reranker(mut self, reranker: Option<Arc<Reranking>>) -> Tiered {
        self.reranker = reranker;
        self
    }

    /// The tiered memory with the config file's `[tiered]` table.
    pub fn with_config(
        embedder: Option<Arc<dyn Embedder>>,
        generator: Option<Arc<dyn Generator>>,
        config: TieredConfig,
    ) -> Tiered {
        Tiered::new(embedder, generator).configure(move |m| m.layout.tiered = config.clone())
    }

    /// Adjusts every memory's config after the budget-sized defaults are set.
    pub fn configure(mut self, f: impl Fn(&mut MemoryConfig) + Send + Sync + 'static) -> Tiered {
        self.configure = Box::new(f);
        self
    }

    fn memory(&self, history: &History, budget: usize) -> Result<SharedMemory, StrategyError> {
        let key = (history.conversation_id().to_string(), budget);
        let mut all = self.memories.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = all.get(&key) {
            let m = m.clone();
            let fresh = {
                let mem = m.lock().unwrap_or_else(|p| p.into_inner());
                // The same conversation, grown (or not): reuse. Anything else (a shorter or
                // different history under the same id) starts over.
                mem.len() <= history.len()
                    && mem.history().turns().iter().zip(history.turns()).all(|(a, b)| a.id == b.id)
            };
            if fresh {
                return Ok(m);
            }
        }
        let mut config = MemoryConfig::for_budget(history.conversation_id(), budget);
        config.clock = Clock::LastTurn;
        (self.configure)(&mut config);
        let parts = Parts {
            counter: history.counter_arc(),
            embedder: self.embedder.clone(),
            generator: self.generator.clone(),
            embed_queue: None,
            reranker: self.reranker.clone(),
        };
        let memory = Memory::open(config, parts).map_err(|e| failed(&e))?;
        let m = Arc::new(Mutex::new(memory));
        all.insert(key, m.clone());
        Ok(m)
    }
}

fn failed(e: &dyn std::fmt::Display) -> StrategyError {
    StrategyError::Failed { strategy: Tiered::NAME.to_string(), message: e.to_string() }
}

impl Strategy for Tiered {
    fn name(&self) -> &str {
        Tiered::NAME
    }

    fn question_aware(&self) -> bool {
        true
    }

    fn build(&self, history: &History, budget: usize, question: Option<&str>) -> Result<Context, StrategyError> {
        let m = self.memory(history, budget)?;
        let mut memory = m.lock().unwrap_or_else(|p| p.into_inner());
        let from = memory.len();
        memory.push_all(&history.turns()[from..]).map_err(|e| failed(&e))?;
        // Evaluation wants the settled state: the same context whatever the thread timing.
        memory.settle();
        memory.context(budget, question).map_err(|e| failed(&e))
    }
}
