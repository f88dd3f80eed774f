//! The memory's settings: how a context's budget is shared, where "now" comes from, how
//! recall searches, and the `tiered` strategy's knobs. Plain data at the bottom of the crate,
//! so the writer, recall and the strategy all read them without importing each other.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use strata_core::Timestamp;
use strata_policy::PolicyConfig;
use strata_summarize::SalienceConfig;
use strata_topic::TopicConfig;

/// The tiered memory's name as a strategy: its catalog entry, its table in the config file,
/// and the strategy a memory's contexts are reported under.
pub(crate) const TIERED: &str = "tiered";

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
    /// similarity is used when turns are embedded as they are pushed; cue phrases and time
    /// gaps always.
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

/// How question-aware recall searches and re-scores.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallConfig {
    /// Candidates taken from each ranking (BM25, embeddings) before fusion.
    pub depth: usize,
    /// Share of a neighbour's score a turn gets, at distance 1 and 2 in the same session.
    pub neighbours: [f32; 2],
    /// Relative boost for turns by a speaker the question names.
    pub speaker_boost: f32,
    /// A pause at least this long starts a new session (seconds).
    pub session_gap_seconds: i64,
    /// Weight of the ranking by the question's content words (see [`crate::recall::content_words`]) beside
    /// the question's own, each scaled to its best score; 0 searches with the question only.
    pub content_query: f32,
    /// With a reranker: how many of the fused ranking's best units (bursts) take part, at
    /// most (a search's depth; a context's is set by `rerank_reach`).
    pub rerank_candidates: usize,
    /// With a reranker: how many of those keep their fused places at the top; the reranker
    /// reads and orders the rest.
    pub rerank_keep: usize,
    /// With a reranker: a candidate longer than this many words is read as its window of
    /// this many words that holds the most of the question's content words; 0 reads it whole.
    /// A pair's cost grows faster than its length, and 64 words lost nothing on LoCoMo.
    pub rerank_window: usize,
    /// With a reranker, for a context: only candidates that could enter it are read. The kept
    /// units are packed into the tokens the recalled turns may fill, as the context packs
    /// them; a candidate larger than the gap they leave is not read, and the others are read
    /// in fused order until they add up to this many times the gap. 0 reads every candidate
    /// whatever the budget. 2 kept all of the reranker's gain on LoCoMo at each budget with a
    /// third fewer passages read; long messages that cannot fit are not read at all.
    pub rerank_reach: f32,
}

impl Default for RecallConfig {
    fn default() -> RecallConfig {
        RecallConfig {
            depth: 100,
            neighbours: [0.5, 0.25],
            speaker_boost: 0.5,
            session_gap_seconds: 30 * 60,
            content_query: 1.0,
            rerank_candidates: 100,
            rerank_keep: 20,
            rerank_reach: 2.0,
            rerank_window: 64,
        }
    }
}

/// The tiered memory's context knobs, as the config file's `[tiered]` table; how salient
/// sentences are scored is its `[tiered.salience]` table.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TieredConfig {
    /// Share of the budget, without a question, for the most specific sentences of turns not
    /// shown verbatim; summaries and hot turns share the rest, and what they leave comes back.
    pub salient: f64,
    /// The same share of what the recall share leaves, with a question (recalled turns take
    /// what the rest does not use).
    pub salient_with_question: f64,
    /// With a question: a burst (one speaker's messages in a row within a session, at most
    /// this many tokens; a longer run becomes several) is ranked as one turn and recalled
    /// whole. 0 treats every message alone.
    pub burst_tokens: usize,
    pub salience: SalienceConfig,
}

impl Default for TieredConfig {
    fn default() -> TieredConfig {
        TieredConfig {
            salient: 0.9,
            salient_with_question: 0.25,
            burst_tokens: 200,
            salience: SalienceConfig::default(),
        }
    }
}

impl TieredConfig {
    pub(crate) fn validate(&self) -> Result<(), String> {
        for (name, v) in [("salient", self.salient), ("salient_with_question", self.salient_with_question)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("tiered: `{name}` must be between 0 and 1, not {v}"));
            }
        }
        self.salience.validate()
    }
}
