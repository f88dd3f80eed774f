//! `recent-8-summary-12`: the seed's "last 8 interactions verbatim, the 12 before them
//! summarised heuristically" memory.
//!
//! An interaction is a user turn and everything up to the next user turn (the replies, and any
//! tool calls with their results). The seed keeps a buffer of the last 40 interactions; of
//! those, the newest `recent` are rendered as Q/A pairs and the `summarized` before them become
//! a heuristic summary: the first 100 characters of each user message as topics, the first two
//! sentences of each reply as key points, the first 5 topics and first 3 key points kept, and
//! "Earlier conversation about various topics." when nothing is left. Interactions older than
//! the buffer are forgotten. The rendering follows the seed: a "Conversation Summary (earlier
//! context)" section, then "Recent conversation details" with Q/A pairs.

use serde::{Deserialize, Serialize};
use strata_core::{Block, BlockKind, Context, History, Role, Strategy, StrategyError};

use crate::select::{finish, pin_system};

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecentSummaryConfig {
    /// Interactions kept verbatim.
    pub recent: usize,
    /// Interactions before those that are summarised.
    pub summarized: usize,
    /// Interactions remembered at all.
    pub buffer: usize,
    /// Characters of each user message kept as its topic.
    pub topic_chars: usize,
    /// Sentences of each reply kept as its key point.
    pub key_sentences: usize,
    pub max_topics: usize,
    pub max_key_points: usize,
}

impl Default for RecentSummaryConfig {
    fn default() -> Self {
        RecentSummaryConfig {
            recent: 8,
            summarized: 12,
            buffer: 40,
            topic_chars: 100,
            key_sentences: 2,
            max_topics: 5,
            max_key_points: 3,
        }
    }
}

impl RecentSummaryConfig {
    /// Every value in its range, or a message naming the first that is not.
    pub fn validate(&self) -> Result<(), String> {
        if self.recent + self.summarized > self.buffer {
            return Err(format!(
                "recent-8-summary-12: recent ({}) + summarized ({}) exceed the buffer ({})",
                self.recent, self.summarized, self.buffer
            ));
        }
        Ok(())
    }
}

pub(crate) const SUMMARY_HEADER: &str = "Conversation Summary (earlier context):";
pub(crate) const RECENT_HEADER: &str = "Recent conversation details:";
pub(crate) const FALLBACK: &str = "Earlier conversation about various topics.";

#[derive(Debug, Clone, Default)]
pub struct RecentSummary {
    config: RecentSummaryConfig,
}

/// One user turn and what followed it, as indices into the history.
struct Interaction {
    turns: Vec<usize>,
}

impl RecentSummary {
    pub fn new(config: RecentSummaryConfig) -> RecentSummary {
        RecentSummary { config }
    }

    /// The newest `buffer` interactions, oldest first. Walks back only as far as it needs.
    fn interactions(&self, history: &History) -> Vec<Interaction> {
        let mut out: Vec<Interaction> = Vec::new();
        let mut current: Vec<usize> = Vec::new();
        for i in (history.pinned()..history.len()).rev() {
            current.push(i);
            if history.turns()[i].role == Role::User {
                current.reverse();
                out.push(Interaction { turns: std::mem::take(&mut current) });
                if out.len() == self.config.buffer {
                    break;
                }
            }
        }
        // Turns before the first user turn (a greeting, say) make an interaction of their own.
        if !current.is_empty() && out.len() < self.config.buffer {
            current.reverse();
            out.push(Interaction { turns: current });
        }
        out.reverse();
        out
    }

    fn summarize(&self, history: &History, interactions: &[Interaction]) -> String {
        let mut topics = Vec::new();
        let mut key_points = Vec::new();
        for inter in interactions {
            let turns = inter.turns.iter().map(|&i| &history.turns()[i]);
            let mut user = String::new();
            let mut reply = String::new();
            for t in turns {
                match t.role {
                    Role::User => user.push_str(&t.content),
                    Role::Assistant if reply.is_empty() => reply.push_str(&t.content),
                    _ => {}
                }
            }
            let topic: String = user.trim().chars().take(self.config.topic_chars).collect();
            if !topic.is_empty() {
                topics.push(topic);
            }
            let point = first_sentences(reply.trim(), self.config.key_sentences);
            if !point.is_empty() {
                key_points.push(point);
            }
        }
        topics.truncate(self.config.max_topics);
        key_points.truncate(self.config.max_key_points);
        let mut parts = Vec::new();
        if !topics.is_empty() {
            parts.push(format!("Topics discussed: {}", topics.join("; ")));
        }
        if !key_points.is_empty() {
            parts.push(format!("Key points: {}", key_points.join(" ")));
        }
        if parts.is_empty() {
            FALLBACK.to_string()
        } else {
            parts.join("\n")
        }
    }
}

/// The first `n` sentences of `text`: a sentence ends at `.`, `!` or `?` followed by
/// whitespace or the end.
fn first_sentences(text: &str, n: usize) -> String {
    let mut count = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if matches!(c, '.' | '!' | '?') {
            let at_break = chars.peek().is_none_or(|&(_, next)| next.is_whitespace());
            if at_break {
                count += 1;
                if count == n {
                    return text[..i + c.len_utf8()].to_string();
                }
            }
        }
    }
    text.to_string()
}

fn qa_text(history: &History, inter: &Interaction) -> String {
    let mut out = String::new();
    for &i in &inter.turns {
        let t = &history.turns()[i];
        let label = match t.role {
            Role::User => "Q",
            Role::Assistant => "A",
            Role::Tool => "Tool",
            Role::System => "System",
        };
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(label);
        out.push_str(": ");
        out.push_str(&t.content);
        for call in &t.tool_calls {
            out.push_str(&format!(" [calls {}({})]", call.name, call.arguments));
        }
    }
    out
}

impl Strategy for RecentSummary {
    fn name(&self) -> &str {
        "recent-8-summary-12"
    }

    fn build(&self, history: &History, budget: usize, _question: Option<&str>) -> Result<Context, StrategyError> {
        let counter = history.counter();
        let mut ctx = Context::new(self.name(), budget, counter);
        let mut left = pin_system(history, &mut ctx);
        let interactions = self.interactions(history);
        let n = interactions.len();
        let recent_start = n.saturating_sub(self.config.recent);
        let summary_start = recent_start.saturating_sub(self.config.summarized);

        let summary = (summary_start < recent_start).then(|| {
            let summarized = &interactions[summary_start..recent_start];
            let text = format!("{SUMMARY_HEADER}\n{}", self.summarize(history, summarized));
            let ids = summarized
                .iter()
                .flat_map(|inter| inter.turns.iter().map(|&i| history.turns()[i].id.clone()))
                .collect();
            Block::text(BlockKind::Summary, Role::System, text, ids, counter)
        });

        // The recent interactions, newest first, for as many as the budget allows: the seed
        // never dropped any, but a context over budget is never acceptable here. Only the
        // oldest kept block carries the section header, so each candidate is costed with it.
        let recent = &interactions[recent_start..];
        let plain: Vec<Block> = recent
            .iter()
            .map(|inter| {
                let ids = inter.turns.iter().map(|&i| history.turns()[i].id.clone()).collect();
                Block::text(BlockKind::VerbatimTurn, Role::System, qa_text(history, inter), ids, counter)
            })
            .collect();
        let with_header = |b: &Block| {
            let content = format!("{RECENT_HEADER}\n{}", b.content);
            Block::text(BlockKind::VerbatimTurn, Role::System, content, b.source_ids.clone(), counter)
        };
        let mut first_kept = plain.len();
        let mut tail_tokens = 0usize;
        let mut kept_tokens = 0usize;
        for k in (0..plain.len()).rev() {
            let headed = with_header(&plain[k]).tokens;
            if tail_tokens + headed > left {
                break;
            }
            kept_tokens = tail_tokens + headed;
            tail_tokens += plain[k].tokens;
            first_kept = k;
        }
        let mut kept: Vec<Block> = plain[first_kept..].to_vec();
        if let Some(first) = kept.first_mut() {
            *first = with_header(first);
        }
        let dropped = first_kept;
        left -= kept_tokens;
        if let Some(summary) = summary {
            if summary.tokens <= left {
                ctx.blocks.push(summary);
            } else {
                ctx.notes.push(format!("summary ({} tokens) does not fit the budget; omitted", summary.tokens));
            }
        }
        if dropped > 0 {
            ctx.notes
                .push(format!("{dropped} of the {} recent interactions do not fit the budget; dropped", recent.len()));
        }
        ctx.blocks.extend(kept);
        Ok(finish(ctx))
    }
}
