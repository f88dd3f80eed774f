//! `Memory`: turns stored durably, tiers planned by the policy, summaries made in the
//! background, and contexts built from them within a budget.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use strata_core::{
    EmbedError, Embedder, Generator, History, HistoryError, Hit, RecallQuery, StoreError, Summary, Tier, Timestamp,
    TokenCounter, Turn,
};
use strata_policy::{Plan, PolicyConfig, State, TurnState};
use strata_store::{MemoryStore, SqliteStore, TurnVectors};
use strata_strategies::TieredConfig;
use strata_summarize::{ExtractiveConfig, Ranking, Registry, SummaryConfig};
use strata_topic::{TopicConfig, Tracker};

use crate::enrich::{Enricher, NoteIndex};
use crate::phrases::PhraseIndex;
use crate::ranker::Ranker;
use crate::recall::{self, RecallConfig};
use crate::worker::{self, Job, SpanKey, Worker};

mod context;

use context::SalientEntry;

/// Most tokens of turns one request for notes holds: a longer session is noted in runs.
pub const NOTES_SPAN_TOKENS: usize = 1_500;

/// Where "now" comes from when the policy is asked for a plan. The memory reads the clock;
/// the policy never does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// The system clock: for live deployments.
    System,
    /// The newest turn's timestamp: for replaying a transcript, where "now" is when the last
    /// turn was said.
    LastTurn,
    /// A fixed time: for tests.
    Fixed(Timestamp),
}

/// How a context's budget is shared.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// Share for turns recalled for the question (question-aware contexts only).
    pub recall: f64,
    /// The salient sentences' shares and scoring (`strata_summarize::salience`): the config
    /// file's `[tiered]` table.
    pub tiered: TieredConfig,
    /// Keep the newest unit (the message being answered) verbatim whenever it fits the whole
    /// budget, before recall takes its share: what a live chat needs, where the question is
    /// the newest message. Off for evaluation, where the question is asked apart from the
    /// history.
    pub keep_newest: bool,
}

impl Default for Layout {
    fn default() -> Layout {
        Layout { recall: 0.9, tiered: TieredConfig::default(), keep_newest: false }
    }
}

#[derive(Debug, Clone)]
pub struct MemoryConfig {
    /// The store file; `None` keeps everything in memory (for evaluation runs).
    pub path: Option<PathBuf>,
    pub conversation: String,
    pub policy: PolicyConfig,
    /// Topic starts feed the policy's topic-shift trigger and cut summary spans. Embedding
    /// similarity is used when there is an embedder; cue phrases and time gaps always.
    pub topic: TopicConfig,
    pub layout: Layout,
    pub recall: RecallConfig,
    /// Summaries cover at most this many tokens of turns each.
    pub segment_tokens: usize,
    /// Longest summary, in tokens.
    pub max_summary_tokens: usize,
    /// How long the generator may take for one summary before the extractive one is used.
    pub summary_deadline: Option<Duration>,
    pub clock: Clock,
}

impl MemoryConfig {
    pub fn new(conversation: impl Into<String>) -> MemoryConfig {
        MemoryConfig {
            path: None,
            conversation: conversation.into(),
            policy: PolicyConfig::default(),
            topic: TopicConfig::default(),
            layout: Layout::default(),
            recall: RecallConfig::default(),
            segment_tokens: 4000,
            max_summary_tokens: 300,
            summary_deadline: Some(Duration::from_secs(120)),
            clock: Clock::System,
        }
    }

    /// Sized for contexts of about `budget` tokens: tier allowances and segments scaled to it.
    pub fn for_budget(conversation: impl Into<String>, budget: usize) -> MemoryConfig {
        let policy = PolicyConfig::for_budget(budget);
        MemoryConfig {
            segment_tokens: policy.hot.tokens.clamp(200, 4000),
            max_summary_tokens: (budget / 8).clamp(40, 300),
            policy,
            ..MemoryConfig::new(conversation)
        }
    }
}

/// The models a memory uses, passed in.
#[derive(Clone)]
pub struct Parts {
    pub counter: Arc<dyn TokenCounter>,
    pub embedder: Option<Arc<dyn Embedder>>,
    pub generator: Option<Arc<dyn Generator>>,
    /// The model that writes notes on each closed span at store time, for recall (used when
    /// the layout weighs them, `[tiered] notes`). It may be the summaries' generator.
    pub enricher: Option<Arc<dyn Generator>>,
}

impl std::fmt::Debug for Parts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parts")
            .field("counter", &self.counter.name())
            .field("embedder", &self.embedder.as_ref().map(|e| e.model_id().to_string()))
            .field("generator", &self.generator.as_ref().map(|g| g.model_id().to_string()))
            .field("enricher", &self.enricher.as_ref().map(|g| g.model_id().to_string()))
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    History(#[from] HistoryError),
    #[error(transparent)]
    Embed(#[from] EmbedError),
}

/// A turn's vectors: of its whole indexed text (none when it was not embedded) and of each
/// sentence.
type TurnEmbedding = (Option<Vec<f32>>, Vec<Vec<f32>>);

/// A conversation's memory. See the crate documentation.
pub struct Memory {
    config: MemoryConfig,
    parts: Parts,
    store: Arc<dyn MemoryStore>,
    history: History,
    /// Topic starts, followed turn by turn (it keeps the newest vectors it needs; the store
    /// holds them all).
    topics: Tracker,
    /// Sessions and bursts, for recall.
    grouping: recall::Grouping,
    /// Phrase vectors, for recall, when the layout weighs them (`[tiered] phrases`).
    phrases: PhraseIndex,
    /// Notes a model wrote on closed spans, for recall, when the layout weighs them
    /// (`[tiered] notes`), taken from the enricher at turn boundaries.
    note_index: NoteIndex,
    enricher: Option<Enricher>,
    /// Turns before this one belong to sessions already sent to the enricher.
    enrich_from: usize,
    /// What each turn adds to the recalled block: without and with a date line. Counted once,
    /// at push, so that building a context counts nothing twice.
    recalled_tokens: Vec<[usize; 2]>,
    tiers: Vec<Tier>,
    /// Every turn after the pinned ones and before this one is cold: plans leave them out.
    live_from: usize,
    /// Spans of turns that left the hot tier (see `respan`), kept up to date at each plan.
    spans: Vec<SpanKey>,
    /// Facts of every turn before `registry_upto` (the turns no longer verbatim): they mark
    /// superseded values among the salient sentences.
    registry: Registry,
    registry_upto: usize,
    /// Ranks the sentences that may be shown as salient, off the caller's thread.
    ranker: Ranker,
    /// Turns stored but not yet sent to the ranker (sent once per push or push_all).
    unranked: Vec<(usize, Turn)>,
    /// The ranking contexts use: taken from the ranker at turn boundaries only, like the
    /// summaries, so the context's prefix does not change between two pushes.
    ranking: Option<Arc<Ranking>>,
    /// The last salient block, by (ranked turns, turns, candidates before, allowance):
    /// contexts built at one turn for many questions share it (it does not depend on the
    /// question).
    salient_cache: std::sync::Mutex<Option<SalientEntry>>,
    worker: Worker,
    /// The summaries contexts use: taken from the worker at turn boundaries only.
    shown: BTreeMap<SpanKey, Summary>,
    last_plan: Option<Plan>,
    /// Things a user should know (an embedding that failed, a summary not saved).
    notes: Vec<String>,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("conversation", &self.config.conversation)
            .field("store", &self.store.location())
            .field("turns", &self.history.len())
            .field("worker", &self.worker)
            .finish()
    }
}

impl Memory {
    /// Opens the memory of `config.conversation` in the store at `config.path` (created if
    /// absent), picking up the turns, tiers and summaries stored there.
    pub fn open(config: MemoryConfig, parts: Parts) -> Result<Memory, MemoryError> {
        let store = match &config.path {
            Some(p) => SqliteStore::open(p)?,
            None => SqliteStore::in_memory()?,
        };
        Memory::with_store(Arc::new(store), config, parts)
    }

    /// Like [`Memory::open`] over a store shared with other memories.
    pub fn with_store(store: Arc<dyn MemoryStore>, config: MemoryConfig, parts: Parts) -> Result<Memory, MemoryError> {
        // A store searched with another model's vectors would rank by noise: refused.
        if let Some(e) = &parts.embedder {
            store.bind_embedder(e.model_id(), e.dim())?;
        }
        let turns = store.turns(&config.conversation)?;
        let history = History::from_turns(&config.conversation, &turns, parts.counter.clone())?;
        let mut tiers = store.tiers(&config.conversation)?;
        tiers.resize(turns.len(), Tier::Hot);
        let finished = worker::from_stored(store.summaries(&config.conversation)?);
        // The vectors stored with the turns, for topic detection (another handle may have
        // appended since the turns were read: one per turn read).
        let vectors = store.whole_vectors(&config.conversation)?;
        let mut topics = Tracker::new(config.topic.clone());
        for (i, t) in turns.iter().enumerate() {
            topics.push(t, vectors.get(i).map(Vec::as_slice));
        }
        drop(vectors);
        let worker = Worker::start(
            worker::Context {
                store: store.clone(),
                conversation: config.conversation.clone(),
                generator: parts.generator.clone(),
                counter: parts.counter.clone(),
            },
            finished.keys().copied().collect(),
        );
        let ranker = Ranker::start(parts.counter.clone(), config.layout.tiered.salience());
        let enricher = match (&parts.enricher, &parts.embedder) {
            (Some(g), Some(e)) if config.layout.tiered.notes > 0.0 => Some(Enricher::start(g.clone(), e.clone())),
            _ => None,
        };
        let mut memory = Memory {
            grouping: recall::Grouping::default(),
            phrases: PhraseIndex::default(),
            note_index: NoteIndex::default(),
            enricher,
            enrich_from: 0,
            recalled_tokens: Vec::new(),
            topics,
            config,
            parts,
            store,
            history,
            tiers,
            live_from: 0,
            spans: Vec::new(),
            registry: Registry::new(),
            registry_upto: 0,
            ranker,
            unranked: Vec::new(),
            ranking: None,
            salient_cache: std::sync::Mutex::new(None),
            worker,
            shown: finished,
            last_plan: None,
            notes: Vec::new(),
        };
        memory.recalled_tokens = (0..memory.history.len()).map(|i| memory.count_recalled(i)).collect();
        memory.extend_grouping();
        if memory.phrases_on() {
            let turns = memory.history.turns().to_vec();
            memory.index_phrases(&turns);
        }
        memory.send_spans(false);
        // The stored turns are ranked before the memory is handed out (as the statistics
        // above are rebuilt), so a reopened memory's first context has them.
        memory.ranker.send(memory.history.turns().iter().cloned().enumerate().collect());
        memory.ranker.settle();
        memory.ranking = memory.ranker.latest();
        memory.advance_live();
        memory.respan(0);
        memory.sync_registry();
        Ok(memory)
    }

    pub fn conversation(&self) -> &str {
        &self.config.conversation
    }

    /// What the memory was opened with (its budget, policy and layout).
    pub fn config(&self) -> &MemoryConfig {
        &self.config
    }

    pub fn history(&self) -> &History {
        &self.history
    }

    pub fn len(&self) -> usize {
        self.history.len()
    }

    pub fn is_empty(&self) -> bool {
        self.history.is_empty()
    }

    pub fn tiers(&self) -> &[Tier] {
        &self.tiers
    }

    /// Where topics start (turn positions), as last detected: by embedding similarity when
    /// every turn has a vector (a reopened memory reads them from the store), cue phrases and
    /// time gaps.
    pub fn topic_starts(&self) -> Vec<usize> {
        self.topics.starts().collect()
    }

    /// The spans that left the hot tier, as summaries cover them.
    #[cfg(test)]
    pub(crate) fn spans(&self) -> &[SpanKey] {
        &self.spans
    }

    pub fn store(&self) -> &Arc<dyn MemoryStore> {
        &self.store
    }

    /// The latest plan, with its explanation.
    pub fn last_plan(&self) -> Option<&Plan> {
        self.last_plan.as_ref()
    }

    /// Summaries queued or running in the background.
    pub fn pending(&self) -> usize {
        self.worker.pending()
    }

    /// Notes gathered since the last call: embeddings that failed, summaries not saved.
    pub fn take_notes(&mut self) -> Vec<String> {
        let mut notes = std::mem::take(&mut self.notes);
        notes.extend(self.worker.take_errors());
        notes.extend(self.enricher.iter().flat_map(Enricher::take_errors));
        notes
    }

    /// Adds a turn. It is written to the store (durably) before this returns `Ok`; then the
    /// policy plans, and spans that left the hot tier are queued for summarising.
    pub fn push(&mut self, turn: Turn) -> Result<(), MemoryError> {
        // Validate against the history first, so a bad turn is refused before it is stored.
        self.history.push(turn.clone())?;
        let (vector, sentences) = self.embed_turn(&turn);
        let stored = self.store_and_plan(turn, vector, sentences);
        self.send_unranked();
        self.send_spans(false);
        stored
    }

    /// Adds several turns in order, each stored, planned and acknowledged as by
    /// [`Memory::push`], with their vectors computed by one embedder call for all of them
    /// first: an embedder batches and spreads a long call over cores, where one turn at a
    /// time leaves them idle. For replaying a transcript. An error stops at the turn it
    /// names; the turns before it are stored.
    pub fn push_all(&mut self, turns: &[Turn]) -> Result<(), MemoryError> {
        let mut vectors = self.embed_turns(turns).into_iter();
        self.embed_phrases(turns);
        let mut stored = Ok(());
        for turn in turns {
            stored = self.history.push(turn.clone()).map_err(MemoryError::from).and_then(|()| {
                let (vector, sentences) = match vectors.next() {
                    Some(v) => v,
                    None => self.embed_turn(turn),
                };
                self.store_and_plan(turn.clone(), vector, sentences)
            });
            if stored.is_err() {
                break;
            }
        }
        // One batch for the ranker: it ranks once for all of them.
        self.send_unranked();
        self.send_spans(false);
        stored
    }

    fn send_unranked(&mut self) {
        if !self.unranked.is_empty() {
            self.ranker.send(std::mem::take(&mut self.unranked));
        }
    }

    /// The vectors of `turns` from one embedder call, or nothing when there is no embedder
    /// or the call fails (then each turn is embedded on its own, and a failure noted).
    fn embed_turns(&self, turns: &[Turn]) -> Vec<TurnEmbedding> {
        let Some(e) = &self.parts.embedder else { return Vec::new() };
        let texts: Vec<Vec<String>> = turns.iter().map(strata_store::embedded_texts).collect();
        let flat: Vec<&str> = texts.iter().flatten().map(String::as_str).collect();
        match e.embed(&flat) {
            Ok(vs) if vs.len() == flat.len() && vs.iter().all(|v| !v.is_empty()) => {
                let mut vs = vs.into_iter();
                texts
                    .iter()
                    .map(|t| {
                        let mut own: Vec<Vec<f32>> = vs.by_ref().take(t.len()).collect();
                        let sentences = own.split_off(1);
                        (own.pop(), sentences)
                    })
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    /// Stores a turn the history has accepted, with its vectors, and plans.
    fn store_and_plan(
        &mut self,
        turn: Turn,
        vector: Option<Vec<f32>>,
        sentences: Vec<Vec<f32>>,
    ) -> Result<(), MemoryError> {
        let vectors = vector.as_deref().map(|whole| TurnVectors { whole, sentences: &sentences });
        if let Err(e) = self.store.append_with(&self.config.conversation, &turn, vectors) {
            self.history.truncate(self.history.len() - 1);
            return Err(e.into());
        }
        // Held as the store gives it back, so that this memory and a reopened one detect the
        // same topics.
        let stored = vector.map(|v| strata_store::as_stored(&v));
        self.topics.push(&turn, stored.as_deref());
        let i = self.history.len() - 1;
        let cost = self.count_recalled(i);
        self.recalled_tokens.push(cost);
        self.extend_grouping();
        self.tiers.push(Tier::Hot);
        self.unranked.push((i, turn.clone()));
        self.index_phrases(std::slice::from_ref(&turn));
        self.replan(false, self.topics.moved_from())?;
        // A turn boundary: summaries finished since the last one come into view.
        self.take_summaries();
        Ok(())
    }

    /// Asks the policy to plan now with the explicit-checkpoint trigger set, and returns the
    /// plan.
    pub fn checkpoint(&mut self) -> Result<&Plan, MemoryError> {
        self.replan(true, None)?;
        self.take_summaries();
        Ok(self.last_plan.as_ref().expect("replan sets the plan"))
    }

    /// Waits for the background summaries to finish and swaps them in: for tools and
    /// evaluations that want the settled state, never needed for correctness.
    pub fn settle(&mut self) {
        // The open session gets notes too (a longer one replaces them once it closes).
        self.send_spans(true);
        self.worker.settle();
        self.ranker.settle();
        if let Some(e) = &self.enricher {
            e.settle();
        }
        self.take_summaries();
    }

    /// Sends the sessions closed since the last call (and the open one, with `open`) to the
    /// enricher, in runs of at most [`NOTES_SPAN_TOKENS`].
    fn send_spans(&mut self, open: bool) {
        let Some(e) = &self.enricher else { return };
        let (turns, sessions) = (self.history.turns(), &self.grouping.sessions);
        let mut start = self.enrich_from;
        for j in start + 1..=turns.len() {
            let closed = j < turns.len() && sessions[j] != sessions[j - 1];
            if closed || (open && j == turns.len()) {
                let mut at = start;
                for run in strata_summarize::runs(&turns[start..j], self.parts.counter.as_ref(), NOTES_SPAN_TOKENS) {
                    e.send(at, run);
                    at += run.len();
                }
                start = j;
                if closed {
                    self.enrich_from = j;
                }
            }
        }
    }

    /// A turn boundary: the summaries finished since the last one, and the newest ranking of
    /// salient sentences, come into view.
    fn take_summaries(&mut self) {
        self.shown.extend(self.worker.take_finished());
        if let Some(e) = &self.enricher {
            for (start, notes) in e.take_finished() {
                self.note_index.insert(start, notes);
            }
        }
        self.ranking = self.ranker.latest();
        if let Some(why) = self.ranker.take_failure() {
            self.notes.push(format!("{why}; contexts go on without salient sentences"));
        }
    }

    /// A turn's vectors: of the text the lexical index holds (speaker and date included, so a
    /// question that names a person or a time finds the turns by meaning as well), and, for a
    /// turn of two or more sentences, of each sentence after its speaker, in the same model
    /// call. A failed call leaves the turn to be found by its words.
    fn embed_turn(&mut self, turn: &Turn) -> TurnEmbedding {
        let Some(e) = &self.parts.embedder else { return (None, Vec::new()) };
        let texts = strata_store::embedded_texts(turn);
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        match e.embed(&refs) {
            Ok(mut vs) if vs.len() == texts.len() && vs.iter().all(|v| !v.is_empty()) => {
                let sentences = vs.split_off(1);
                (vs.pop(), sentences)
            }
            Ok(vs) => {
                self.notes.push(format!(
                    "turn {}: the embedder gave {} usable vectors for {} texts; it is found by its words only",
                    turn.id,
                    vs.iter().filter(|v| !v.is_empty()).count(),
                    texts.len()
                ));
                (None, Vec::new())
            }
            Err(err) => {
                self.notes.push(format!("turn {}: not embedded ({err}); it is found by its words only", turn.id));
                (None, Vec::new())
            }
        }
    }

    /// Whether recall weighs phrase vectors (so they are made at store time).
    fn phrases_on(&self) -> bool {
        self.parts.embedder.is_some() && self.config.layout.tiered.phrases > 0.0
    }

    /// Embeds the phrases of `turns` that have no vector yet, in one call; a failure is noted
    /// (those phrases score nothing).
    fn embed_phrases(&mut self, turns: &[Turn]) {
        if !self.phrases_on() {
            return;
        }
        let Some(e) = self.parts.embedder.clone() else { return };
        if let Err(err) = self.phrases.embed_new(turns, e.as_ref()) {
            let first = turns.first().map_or("", |t| t.id.as_str());
            self.notes.push(format!("turn {first}: phrases not embedded ({err}); recall ranks without them"));
        }
    }

    /// Adds `turns`, the next turns of the history, to the phrase index.
    fn index_phrases(&mut self, turns: &[Turn]) {
        if !self.phrases_on() {
            return;
        }
        self.embed_phrases(turns);
        for t in turns {
            self.phrases.push(t);
        }
        debug_assert!(self.phrases.len() <= self.history.len());
    }

    /// Searches the whole conversation (the cold store) for `query`: the best `k` turns.
    pub fn recall(&self, query: &str, k: usize) -> Result<Vec<Hit>, MemoryError> {
        let ranked = self.rank(query)?;
        Ok(ranked.into_iter().take(k).map(|(i, score)| Hit { turn: self.history.turns()[i].clone(), score }).collect())
    }

    /// The store's hybrid search over this conversation, as the [`Store`] trait gives it.
    pub fn search(&self, query: &RecallQuery) -> Result<Vec<Hit>, MemoryError> {
        Ok(self.store.search(&self.config.conversation, query)?)
    }

    fn rank(&self, question: &str) -> Result<Vec<(usize, f32)>, MemoryError> {
        let content =
            recall::content_words(question, self.history.turns()).filter(|_| self.config.recall.content_query > 0.0);
        // Both vectors in one model call; a failed call leaves the question to its words.
        let (embedding, content) = match &self.parts.embedder {
            Some(e) => {
                let texts: Vec<&str> = std::iter::once(question).chain(content.as_deref()).collect();
                match e.embed_query(&texts) {
                    Ok(mut vs) if vs.len() == texts.len() => {
                        let content = (vs.len() == 2).then(|| vs.pop()).flatten();
                        (vs.pop(), content)
                    }
                    _ => (None, None),
                }
            }
            None => (None, None),
        };
        // Phrases meet what the question asks about: its content words, else the question.
        let weight = self.config.layout.tiered.phrases as f32;
        let phrases = content
            .as_ref()
            .or(embedding.as_ref())
            .filter(|_| self.phrases_on() && self.phrases.len() == self.history.len())
            .map(|q| (weight, self.phrases.scores(q, self.config.recall.depth)));
        // Notes are met by the whole question: they name the speaker and the kind of thing.
        let weight = self.config.layout.tiered.notes as f32;
        let notes = embedding
            .as_ref()
            .filter(|_| weight > 0.0 && !self.note_index.is_empty())
            .map(|q| (weight, self.note_index.scores(q, self.history.len(), self.config.recall.depth)));
        recall::rank(
            self.store.as_ref(),
            &self.config.conversation,
            self.history.turns(),
            &self.grouping,
            question,
            embedding,
            content,
            phrases.into_iter().chain(notes).collect(),
            &self.config.recall,
        )
    }

    fn now(&self) -> Timestamp {
        let last = self.history.last_timestamp().map(|(_, ts)| ts);
        match self.config.clock {
            Clock::Fixed(t) => t,
            Clock::LastTurn => last.unwrap_or(Timestamp(0)),
            Clock::System => {
                let secs = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs() as i64)
                    .unwrap_or(0);
                // A turn stamped ahead of this machine's clock must not make ages negative.
                Timestamp(secs.max(last.map_or(0, Timestamp::seconds)))
            }
        }
    }

    /// Asks the policy for a plan and applies it. The policy sees the turns still in the
    /// context (and the newest few, and the pinned ones): the cold turns before them stay
    /// cold whatever it says, so a plan costs the same at the millionth turn as at the
    /// hundredth. `topics_moved` is where the topic starts last changed (spans after it are
    /// cut afresh).
    fn replan(&mut self, checkpoint: bool, topics_moved: Option<usize>) -> Result<(), MemoryError> {
        // A plan may move turns out of the hot tier and into the registry: the salient block
        // is chosen afresh.
        *self.salient_cache.get_mut().unwrap_or_else(|p| p.into_inner()) = None;
        let (n, pinned) = (self.history.len(), self.history.pinned());
        let old_first_hot = self.first_hot();
        // The plan reads the newest topic start and the one before it.
        let bounds = self.topics.boundaries();
        let topic_starts: Vec<usize> = bounds[bounds.len().saturating_sub(2)..].iter().map(|b| b.index).collect();
        let from = self.live_from.min(n.saturating_sub(self.config.policy.recent_turns.max(1))).max(pinned);
        // The newest topic start, when it is cold, so that the plan can name it.
        let named = topic_starts.last().copied().filter(|&b| b >= pinned && b < from);
        let indices: Vec<usize> = (0..pinned).chain(named).chain(from..n).collect();
        let turns = self.history.turns();
        let state = State {
            turns: indices
                .iter()
                .map(|&i| TurnState::of(i, &turns[i], self.history.tokens(i), self.tiers[i]))
                .collect(),
            left_out: n - indices.len(),
            pinned,
            topic_starts,
            checkpoint,
        };
        let plan = strata_policy::plan(&state, &self.config.policy, self.now());
        let first = indices.iter().zip(&plan.tiers).find(|(&i, t)| self.tiers[i] != **t).map(|(&i, _)| i);
        if let Some(first) = first {
            for (&i, &t) in indices.iter().zip(&plan.tiers) {
                self.tiers[i] = t;
            }
            self.store.set_tiers(&self.config.conversation, first as u64, &self.tiers[first..])?;
        }
        self.last_plan = Some(plan);
        self.advance_live();
        // Spans change from the first turn whose tier or topic start changed, or where the
        // last span ended.
        let changed = [first, topics_moved, Some(old_first_hot)].into_iter().flatten().min().unwrap_or(n);
        self.respan(changed);
        self.sync_registry();
        Ok(())
    }

    /// Moves `live_from` past the cold turns.
    fn advance_live(&mut self) {
        let mut i = self.live_from.max(self.history.pinned());
        while i < self.tiers.len() && self.tiers[i] == Tier::Cold {
            i += 1;
        }
        self.live_from = i;
    }

    /// Index of the first turn still hot after the pinned prefix (everything before it has
    /// left the verbatim tier).
    fn first_hot(&self) -> usize {
        let p = self.history.pinned().max(self.live_from);
        (p..self.tiers.len()).find(|&i| self.tiers[i] == Tier::Hot).unwrap_or(self.tiers.len())
    }

    fn sync_registry(&mut self) {
        let upto = self.first_hot();
        for i in self.registry_upto.max(self.history.pinned())..upto {
            self.registry.add_turn(i, &self.history.turns()[i]);
        }
        self.registry_upto = self.registry_upto.max(upto);
    }

    /// Spans of turns that left the hot tier: runs of one tier, cut at topic starts and at
    /// `segment_tokens`, from the start of the conversation so that a span, once closed, is
    /// the same at every later turn (and summarised once). Recomputed from the span that
    /// holds position `changed` (a span's cuts depend only on the turns from its start), and
    /// the new spans queued for summarising.
    fn respan(&mut self, changed: usize) {
        // A span that ends at `changed` was cut there by that turn: it goes too.
        let keep = self.spans.partition_point(|k| k.end < changed);
        self.spans.truncate(keep);
        let end = self.first_hot();
        let from = self.spans.last().map_or(self.history.pinned(), |k| k.end);
        let (mut start, mut tokens) = (from, 0usize);
        let boundaries = self.topics.boundaries();
        let mut next_start = boundaries.partition_point(|b| b.index <= from);
        for i in from..end {
            let topic = boundaries.get(next_start).is_some_and(|b| b.index == i);
            if topic {
                next_start += 1;
            }
            let cut = i > start
                && (self.tiers[i] != self.tiers[start]
                    || topic
                    || tokens + self.history.tokens(i) > self.config.segment_tokens)
                // A tool result stays with the call it answers.
                && self.history.unit_of(i).turns.first() == Some(&i);
            if cut {
                self.spans.push(SpanKey { start, end: i, tier: self.tiers[start] });
                start = i;
                tokens = 0;
            }
            tokens += self.history.tokens(i);
        }
        if start < end {
            self.spans.push(SpanKey { start, end, tier: self.tiers[start] });
        }
        self.queue_summaries(keep);
    }

    /// Queues the spans from the `from`-th on (the worker skips those done or queued).
    fn queue_summaries(&mut self, from: usize) {
        for &key in &self.spans[from..] {
            let ratio = match key.tier {
                Tier::Warm => self.config.policy.warm_ratio,
                _ => self.config.policy.cool_ratio,
            } as f64;
            let config = SummaryConfig {
                max_words: (self.config.max_summary_tokens * 3 / 4).max(20),
                max_tokens: self.config.max_summary_tokens * 2,
                deadline: self.config.summary_deadline,
                extractive: ExtractiveConfig {
                    ratio,
                    max_tokens: Some(self.config.max_summary_tokens),
                    ..ExtractiveConfig::default()
                },
            };
            let turns = self.history.turns()[key.start..key.end].to_vec();
            self.worker.submit(Job { key, turns, config });
        }
    }

    /// Sessions and bursts for the turns pushed since the last call.
    fn extend_grouping(&mut self) {
        let cap = self.config.layout.tiered.burst_tokens;
        self.grouping.extend(self.history.turns(), &self.recalled_tokens, &self.config.recall, cap);
    }
}
