//! `Memory`, the writer: turns stored durably, tiers planned by the policy, summaries and
//! sentence rankings made in the background; and `Snapshot`, what it publishes at each turn
//! boundary, from which contexts and recall are plain reads.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use strata_core::{
    EmbedError, Embedder, Generator, History, Hit, RecallQuery, Summary, Tier, Timestamp, TokenCounter, Turn,
};
use strata_policy::{Plan, State, TurnState};
use strata_store::{SqliteStore, Store, TurnVectors};
use strata_summarize::{ExtractiveConfig, Ranking, Registry, SummaryConfig};
use strata_topic::Tracker;

use crate::background::Background;
use crate::config::{Clock, MemoryConfig};
use crate::embedding::{embed_turns, EmbedQueue};
use crate::error::MemoryError;
use crate::ranker::Rankings;
use crate::recall::{self, Reranking};
use crate::worker::{self, SpanKey, Summaries, SummaryJob};

mod context;

/// The models a memory uses, passed in.
#[derive(Clone)]
pub struct Parts {
    pub counter: Arc<dyn TokenCounter>,
    /// Embeds questions, and stored turns as they are pushed unless `embed_queue` is set.
    pub embedder: Option<Arc<dyn Embedder>>,
    pub generator: Option<Arc<dyn Generator>>,
    /// Stored turns embedded after `push` returns, by a queue the process's memories share
    /// (a server's): `push` then waits for no model, a turn is found by its words until its
    /// vectors are written, and topics are detected by cue phrases and pauses only (a
    /// memory opened later would otherwise see vectors this one never had, and cut other
    /// spans). The queue's model must be `embedder`'s: give `embedder` the queue's
    /// [`EmbedQueue::questions`], so that questions go to the model ahead of it. `None`
    /// embeds each turn as it is pushed, as an evaluation needs.
    pub embed_queue: Option<Arc<EmbedQueue>>,
    /// Reorders the candidates recall found for a question by reading each with it (a
    /// cross-encoder); `None` keeps the fused order.
    pub reranker: Option<Arc<Reranking>>,
}

impl Parts {
    /// Only the token counter: no embedder (recall by words), no generator (extractive
    /// summaries), no queue, no reranker. Set the others with struct update syntax.
    pub fn new(counter: Arc<dyn TokenCounter>) -> Parts {
        Parts { counter, embedder: None, generator: None, embed_queue: None, reranker: None }
    }
}

impl std::fmt::Debug for Parts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parts")
            .field("counter", &self.counter.name())
            .field("embedder", &self.embedder.as_ref().map(|e| e.model_id().to_string()))
            .field("generator", &self.generator.as_ref().map(|g| g.model_id().to_string()))
            .field("embed_queue", &self.embed_queue.is_some())
            .field("reranker", &self.reranker.as_ref().map(|r| r.model.model_id().to_string()))
            .finish()
    }
}

/// A turn's vectors: of its whole indexed text (none when it was not embedded) and of each
/// sentence.
type TurnEmbedding = (Option<Vec<f32>>, Vec<Vec<f32>>);

/// A turn's vectors as [`embed_turns`] gives them (whole text first) split for the store.
fn split(mut own: Vec<Vec<f32>>) -> TurnEmbedding {
    let sentences = own.split_off(1);
    (own.pop(), sentences)
}

/// What contexts and recall read, as the writer published it at a turn boundary: the turns,
/// their tiers, the summaries and the sentence ranking in view, and what recall groups and
/// costs. Every part is shared (`Arc`), so a snapshot costs a few reference counts to take,
/// and it never changes once taken: the writer copies a part a reader still holds before it
/// changes it. Nothing in it locks or caches: two contexts from one snapshot are the same.
#[derive(Clone)]
pub struct Snapshot {
    config: Arc<MemoryConfig>,
    store: Arc<dyn Store>,
    embedder: Option<Arc<dyn Embedder>>,
    reranker: Option<Arc<Reranking>>,
    history: Arc<History>,
    /// One tier per turn; every turn after the pinned ones and before `live_from` is cold.
    tiers: Arc<Vec<Tier>>,
    live_from: usize,
    /// Spans of turns that left the hot tier (see `Memory::respan`), and the summaries in view.
    spans: Arc<Vec<SpanKey>>,
    shown: Arc<BTreeMap<SpanKey, Summary>>,
    /// The sentence ranking in view, and the facts of turns no longer verbatim (they mark
    /// superseded values among the salient sentences).
    ranking: Option<Arc<Ranking>>,
    registry: Arc<Registry>,
    /// Sessions and bursts, and what each turn adds to the recalled block (without and with a
    /// date line), counted once at push.
    grouping: Arc<recall::Grouping>,
    recalled_tokens: Arc<Vec<[usize; 2]>>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("conversation", &self.config.conversation)
            .field("turns", &self.history.len())
            .field("summaries", &self.shown.len())
            .finish()
    }
}

/// A conversation's memory, the writer: `push` stores, plans and submits background work,
/// and publishes a [`Snapshot`] at each turn boundary. See the crate documentation.
pub struct Memory {
    /// What readers see; changed only here, at turn boundaries.
    published: Snapshot,
    /// Topic starts, followed turn by turn (it keeps the newest vectors it needs; the store
    /// holds them all).
    topics: Tracker,
    /// The registry holds the facts of every turn before this one.
    registry_upto: usize,
    last_plan: Option<Plan>,
    summaries: Background<Summaries>,
    /// Spans sent for summarising and not yet taken back.
    queued: BTreeSet<SpanKey>,
    rankings: Background<Rankings>,
    /// Turns stored but not yet sent for ranking (sent once per push or push_all).
    unranked: Vec<(usize, Turn)>,
    /// Things a user should know (an embedding that failed, a summary not saved).
    warnings: Vec<String>,
    /// Where stored turns go to be embedded, when not as they are pushed.
    embed_queue: Option<Arc<EmbedQueue>>,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("conversation", &self.published.config.conversation)
            .field("store", &self.published.store.location())
            .field("turns", &self.published.history.len())
            .field("summaries", &self.summaries)
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
    pub fn with_store(store: Arc<dyn Store>, config: MemoryConfig, parts: Parts) -> Result<Memory, MemoryError> {
        // A store searched with another model's vectors would rank by noise: refused.
        if let Some(e) = &parts.embedder {
            store.bind_embedder(e.model_id(), e.dim())?;
        }
        if let Some(q) = &parts.embed_queue {
            let question_model = parts.embedder.as_ref().map(|e| e.model_id());
            if question_model != Some(q.model_id()) {
                return Err(EmbedError::Backend {
                    model: q.model_id().to_string(),
                    message: format!(
                        "conversation {}: the embedding queue's model is not the one that embeds questions ({})",
                        config.conversation,
                        question_model.unwrap_or("none")
                    ),
                }
                .into());
            }
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
            match &parts.embed_queue {
                // Turns stored but not embedded (the process stopped first, or the model
                // failed) go to the queue now.
                Some(q) => {
                    if vectors.get(i).is_none_or(Vec::is_empty) {
                        q.submit(&store, &config.conversation, t.clone());
                    }
                    topics.push(t, None);
                }
                None => topics.push(t, vectors.get(i).map(Vec::as_slice)),
            }
        }
        drop(vectors);
        let summaries = Background::start(Summaries {
            store: store.clone(),
            conversation: config.conversation.clone(),
            generator: parts.generator.clone(),
            counter: parts.counter.clone(),
        });
        let rankings = Background::start(Rankings::new(parts.counter.clone(), config.layout.tiered.salience.clone()));
        let recalled_tokens = (0..history.len()).map(|i| context::count_recalled(&history, i)).collect();
        let mut memory = Memory {
            published: Snapshot {
                config: Arc::new(config),
                store,
                embedder: parts.embedder,
                reranker: parts.reranker,
                history: Arc::new(history),
                tiers: Arc::new(tiers),
                live_from: 0,
                spans: Arc::new(Vec::new()),
                shown: Arc::new(finished),
                ranking: None,
                registry: Arc::new(Registry::new()),
                grouping: Arc::new(recall::Grouping::default()),
                recalled_tokens: Arc::new(recalled_tokens),
            },
            topics,
            registry_upto: 0,
            last_plan: None,
            summaries,
            queued: BTreeSet::new(),
            rankings,
            unranked: Vec::new(),
            warnings: Vec::new(),
            embed_queue: parts.embed_queue,
        };
        memory.extend_grouping();
        // The stored turns are ranked before the memory is handed out (as the statistics
        // above are rebuilt), so a reopened memory's first context has them.
        let stored: Vec<(usize, Turn)> = memory.published.history.turns().iter().cloned().enumerate().collect();
        memory.rankings.submit(stored);
        memory.rankings.settle();
        memory.turn_boundary();
        memory.advance_live();
        memory.respan(0);
        memory.sync_registry();
        Ok(memory)
    }

    /// The state as of the last turn boundary, to read without this memory: contexts and recall
    /// from it never wait on this writer (a server builds them outside the conversation's lock).
    pub fn snapshot(&self) -> Snapshot {
        self.published.clone()
    }

    pub fn conversation(&self) -> &str {
        &self.published.config.conversation
    }

    /// What the memory was opened with (its budget, policy and layout).
    pub fn config(&self) -> &MemoryConfig {
        &self.published.config
    }

    pub fn history(&self) -> &History {
        &self.published.history
    }

    pub fn len(&self) -> usize {
        self.published.history.len()
    }

    pub fn is_empty(&self) -> bool {
        self.published.history.is_empty()
    }

    pub fn tiers(&self) -> &[Tier] {
        &self.published.tiers
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
        &self.published.spans
    }

    /// Where the memory's store is, for messages. The store itself stays the writer's: turns,
    /// tiers and summaries written behind its back would not be in its history.
    pub fn store_location(&self) -> &str {
        self.published.store.location()
    }

    /// The store, for tests that read what was written.
    #[cfg(test)]
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.published.store
    }

    /// The latest plan, with its explanation.
    pub fn last_plan(&self) -> Option<&Plan> {
        self.last_plan.as_ref()
    }

    /// Summaries queued or running in the background.
    pub fn pending(&self) -> usize {
        self.summaries.pending()
    }

    /// Warnings gathered since the last call: embeddings that failed, summaries not saved,
    /// background work that stopped.
    pub fn take_warnings(&mut self) -> Vec<String> {
        let mut warnings = std::mem::take(&mut self.warnings);
        warnings.extend(self.summaries.take_warnings());
        warnings.extend(self.rankings.take_warnings());
        warnings
    }

    /// The context for the next model call, within `budget` tokens, from the last snapshot
    /// (see [`Snapshot::context`]).
    pub fn context(&self, budget: usize, question: Option<&str>) -> Result<strata_core::Context, MemoryError> {
        self.published.context(budget, question)
    }

    /// Searches the whole conversation (the cold store) for `query`: the best `k` turns.
    pub fn recall(&self, query: &str, k: usize) -> Result<Vec<Hit>, MemoryError> {
        self.published.recall(query, k)
    }

    /// The store's hybrid search over this conversation, as the store's search gives it.
    pub fn search(&self, query: &RecallQuery) -> Result<Vec<Hit>, MemoryError> {
        Ok(self.published.store.search(&self.published.config.conversation, query)?)
    }

    /// Adds a turn. It is written to the store (durably) before this returns `Ok`; then the
    /// policy plans, and spans that left the hot tier are queued for summarising.
    pub fn push(&mut self, turn: Turn) -> Result<(), MemoryError> {
        // Validate against the history first, so a bad turn is refused before it is stored.
        self.history_mut().push(turn.clone())?;
        let (vector, sentences) = self.embed_turn(&turn);
        let stored = self.store_and_plan(turn, vector, sentences);
        self.send_unranked();
        stored
    }

    /// Adds several turns in order, each stored, planned and acknowledged as by
    /// [`Memory::push`], with their vectors computed by one embedder call for all of them
    /// first: an embedder batches and spreads a long call over cores, where one turn at a
    /// time leaves them idle. For replaying a transcript. An error stops at the turn it
    /// names; the turns before it are stored.
    pub fn push_all(&mut self, turns: &[Turn]) -> Result<(), MemoryError> {
        let mut vectors = self.embed_turns(turns).into_iter();
        let mut stored = Ok(());
        for turn in turns {
            stored = self.history_mut().push(turn.clone()).map_err(MemoryError::from).and_then(|()| {
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
        stored
    }

    fn send_unranked(&mut self) {
        if !self.unranked.is_empty() {
            self.rankings.submit(std::mem::take(&mut self.unranked));
        }
    }

    /// The vectors of `turns` from one embedder call, or nothing when turns are not embedded
    /// as they are pushed or the call fails (then each turn is embedded on its own, and a
    /// failure noted).
    fn embed_turns(&self, turns: &[Turn]) -> Vec<TurnEmbedding> {
        let Some(e) = self.embeds_on_push() else { return Vec::new() };
        embed_turns(e.model_id(), turns, |t| e.embed(t))
            .map(|own| own.into_iter().map(split).collect())
            .unwrap_or_default()
    }

    /// The model that embeds a turn as it is pushed: none without an embedder, or when a
    /// queue embeds stored turns later.
    fn embeds_on_push(&self) -> Option<&Arc<dyn Embedder>> {
        self.published.embedder.as_ref().filter(|_| self.embed_queue.is_none())
    }

    /// Stores a turn the history has accepted, with its vectors, and plans.
    fn store_and_plan(
        &mut self,
        turn: Turn,
        vector: Option<Vec<f32>>,
        sentences: Vec<Vec<f32>>,
    ) -> Result<(), MemoryError> {
        let vectors = vector.as_deref().map(|whole| TurnVectors { whole, sentences: &sentences });
        let snap = &self.published;
        if let Err(e) = snap.store.append_with(&snap.config.conversation, &turn, vectors) {
            let n = snap.history.len();
            self.history_mut().truncate(n - 1);
            return Err(e.into());
        }
        if let Some(q) = &self.embed_queue {
            q.submit(&snap.store, &snap.config.conversation, turn.clone());
        }
        // Held as the store gives it back, so that this memory and a reopened one detect the
        // same topics.
        let stored = vector.map(|v| strata_store::as_stored(&v));
        self.topics.push(&turn, stored.as_deref());
        let i = self.published.history.len() - 1;
        let cost = context::count_recalled(&self.published.history, i);
        Arc::make_mut(&mut self.published.recalled_tokens).push(cost);
        self.extend_grouping();
        Arc::make_mut(&mut self.published.tiers).push(Tier::Hot);
        self.unranked.push((i, turn));
        self.replan(false, self.topics.moved_from())?;
        self.turn_boundary();
        Ok(())
    }

    /// Asks the policy to plan now with the explicit-checkpoint trigger set, and returns the
    /// plan.
    pub fn checkpoint(&mut self) -> Result<&Plan, MemoryError> {
        self.replan(true, None)?;
        self.turn_boundary();
        Ok(self.last_plan.as_ref().expect("replan sets the plan"))
    }

    /// Waits for the background summaries and rankings to finish and swaps them in: for tools
    /// and evaluations that want the settled state, never needed for correctness.
    pub fn settle(&mut self) {
        self.summaries.settle();
        self.rankings.settle();
        self.turn_boundary();
    }

    /// A turn boundary: the summaries finished since the last one, and the newest ranking of
    /// salient sentences, come into view.
    fn turn_boundary(&mut self) {
        let finished = self.summaries.take_done();
        if !finished.is_empty() {
            let shown = Arc::make_mut(&mut self.published.shown);
            for (key, summary) in finished {
                self.queued.remove(&key);
                if let Some(summary) = summary {
                    shown.insert(key, summary);
                }
            }
        }
        if let Some(newest) = self.rankings.take_done().pop() {
            self.published.ranking = Some(newest);
        }
    }

    fn history_mut(&mut self) -> &mut History {
        Arc::make_mut(&mut self.published.history)
    }

    /// A turn's vectors: of the text the lexical index holds (speaker and date included, so a
    /// question that names a person or a time finds the turns by meaning as well), and, for a
    /// turn of two or more sentences, of each sentence after its speaker, in the same model
    /// call. A failed call leaves the turn to be found by its words.
    fn embed_turn(&mut self, turn: &Turn) -> TurnEmbedding {
        let Some(e) = self.embeds_on_push() else { return (None, Vec::new()) };
        match embed_turns(e.model_id(), [turn], |t| e.embed(t)) {
            Ok(mut own) => split(own.remove(0)),
            Err(err) => {
                self.warnings.push(format!("turn {}: not embedded ({err}); it is found by its words only", turn.id));
                (None, Vec::new())
            }
        }
    }

    fn now(&self) -> Timestamp {
        let last = self.published.history.last_timestamp().map(|(_, ts)| ts);
        match self.published.config.clock {
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
        let snap = &self.published;
        let (n, pinned) = (snap.history.len(), snap.history.pinned());
        let old_first_hot = snap.first_hot();
        // The plan reads the newest topic start and the one before it.
        let bounds = self.topics.boundaries();
        let topic_starts: Vec<usize> = bounds[bounds.len().saturating_sub(2)..].iter().map(|b| b.index).collect();
        let policy = &snap.config.policy;
        let from = snap.live_from.min(n.saturating_sub(policy.recent_turns.max(1))).max(pinned);
        // The newest topic start, when it is cold, so that the plan can name it.
        let named = topic_starts.last().copied().filter(|&b| b >= pinned && b < from);
        let indices: Vec<usize> = (0..pinned).chain(named).chain(from..n).collect();
        let turns = snap.history.turns();
        let state = State {
            turns: indices
                .iter()
                .map(|&i| TurnState::of(i, &turns[i], snap.history.tokens(i), snap.tiers[i]))
                .collect(),
            left_out: n - indices.len(),
            pinned,
            topic_starts,
            checkpoint,
        };
        let plan = strata_policy::plan(&state, policy, self.now());
        let first = indices.iter().zip(&plan.tiers).find(|(&i, t)| snap.tiers[i] != **t).map(|(&i, _)| i);
        if let Some(first) = first {
            let tiers = Arc::make_mut(&mut self.published.tiers);
            for (&i, &t) in indices.iter().zip(&plan.tiers) {
                tiers[i] = t;
            }
            let snap = &self.published;
            snap.store.set_tiers(&snap.config.conversation, first as u64, &snap.tiers[first..])?;
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
        let snap = &mut self.published;
        let mut i = snap.live_from.max(snap.history.pinned());
        while i < snap.tiers.len() && snap.tiers[i] == Tier::Cold {
            i += 1;
        }
        snap.live_from = i;
    }

    fn sync_registry(&mut self) {
        let upto = self.published.first_hot();
        let from = self.registry_upto.max(self.published.history.pinned());
        if from < upto {
            let snap = &mut self.published;
            let registry = Arc::make_mut(&mut snap.registry);
            for i in from..upto {
                registry.add_turn(i, &snap.history.turns()[i]);
            }
        }
        self.registry_upto = self.registry_upto.max(upto);
    }

    /// Spans of turns that left the hot tier: runs of one tier, cut at topic starts and at
    /// `segment_tokens`, from the start of the conversation so that a span, once closed, is
    /// the same at every later turn (and summarised once). Recomputed from the span that
    /// holds position `changed` (a span's cuts depend only on the turns from its start), and
    /// the new spans queued for summarising.
    fn respan(&mut self, changed: usize) {
        let end = self.published.first_hot();
        let snap = &mut self.published;
        let spans = Arc::make_mut(&mut snap.spans);
        // A span that ends at `changed` was cut there by that turn: it goes too.
        let keep = spans.partition_point(|k| k.end < changed);
        spans.truncate(keep);
        let (history, tiers) = (&snap.history, &snap.tiers);
        let from = spans.last().map_or(history.pinned(), |k| k.end);
        let (mut start, mut tokens) = (from, 0usize);
        let boundaries = self.topics.boundaries();
        let mut next_start = boundaries.partition_point(|b| b.index <= from);
        for i in from..end {
            let topic = boundaries.get(next_start).is_some_and(|b| b.index == i);
            if topic {
                next_start += 1;
            }
            let cut = i > start
                && (tiers[i] != tiers[start] || topic || tokens + history.tokens(i) > snap.config.segment_tokens)
                // A tool result stays with the call it answers.
                && history.unit_of(i).turns.first() == Some(&i);
            if cut {
                spans.push(SpanKey { start, end: i, tier: tiers[start] });
                start = i;
                tokens = 0;
            }
            tokens += history.tokens(i);
        }
        if start < end {
            spans.push(SpanKey { start, end, tier: tiers[start] });
        }
        self.queue_summaries(keep);
    }

    /// Queues the spans from the `from`-th on that are neither summarised nor queued.
    fn queue_summaries(&mut self, from: usize) {
        let snap = &self.published;
        let config = &snap.config;
        for &key in &snap.spans[from..] {
            if snap.shown.contains_key(&key) || !self.queued.insert(key) {
                continue;
            }
            let ratio = match key.tier {
                Tier::Warm => config.policy.warm_ratio,
                _ => config.policy.cool_ratio,
            } as f64;
            let summary = SummaryConfig {
                max_words: (config.max_summary_tokens * 3 / 4).max(20),
                max_tokens: config.max_summary_tokens * 2,
                deadline: config.summary_deadline,
                extractive: ExtractiveConfig {
                    ratio,
                    max_tokens: Some(config.max_summary_tokens),
                    ..ExtractiveConfig::default()
                },
            };
            let turns = snap.history.turns()[key.start..key.end].to_vec();
            self.summaries.submit(SummaryJob { key, turns, config: summary });
        }
    }

    /// Sessions and bursts for the turns pushed since the last call.
    fn extend_grouping(&mut self) {
        let snap = &mut self.published;
        let cap = snap.config.layout.tiered.burst_tokens;
        Arc::make_mut(&mut snap.grouping).extend(snap.history.turns(), &snap.recalled_tokens, &snap.config.recall, cap);
    }
}

impl Snapshot {
    pub fn conversation(&self) -> &str {
        &self.config.conversation
    }

    pub fn history(&self) -> &History {
        &self.history
    }

    /// Searches the whole conversation (the cold store) for `query`: the best `k` turns.
    pub fn recall(&self, query: &str, k: usize) -> Result<Vec<Hit>, MemoryError> {
        let ranked = self.rank(query, None)?;
        Ok(ranked.into_iter().take(k).map(|(i, score)| Hit { turn: self.history.turns()[i].clone(), score }).collect())
    }

    /// Every turn with a positive score for `question`, best first: the question (and its
    /// content words) embedded in one call, then the recall stages. `room` is the tokens the
    /// recalled turns may fill, where a context is being built: the reranker reads only as
    /// deep as could reach it ([`RecallConfig::rerank_reach`]).
    pub(crate) fn rank(&self, question: &str, room: Option<usize>) -> Result<Vec<(usize, f32)>, MemoryError> {
        let turns = self.history.turns();
        let speakers = &self.grouping.speakers;
        let mut texts = recall::question_texts(question, speakers);
        // The content words are searched only with a weight.
        texts.truncate(if self.config.recall.content_query > 0.0 { 2 } else { 1 });
        // Both vectors in one model call; a failed call leaves the question to its words.
        let (embedding, content) = match &self.embedder {
            Some(e) => {
                let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
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
        let at = recall::Input {
            store: self.store.as_ref(),
            conversation: &self.config.conversation,
            turns,
            grouping: &self.grouping,
            config: &self.config.recall,
            reranker: self.reranker.as_deref(),
            costs: &self.recalled_tokens,
            room,
        };
        recall::rank(&at, &recall::Query::new(question, embedding, content, &self.config.recall))
    }

    /// Index of the first turn still hot after the pinned prefix (everything before it has
    /// left the verbatim tier).
    fn first_hot(&self) -> usize {
        let p = self.history.pinned().max(self.live_from);
        (p..self.tiers.len()).find(|&i| self.tiers[i] == Tier::Hot).unwrap_or(self.tiers.len())
    }
}
