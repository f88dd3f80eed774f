//! `specific`: the throwaway prototype issue 14 measured the tiered memory against, kept as a
//! baseline so that every run compares with it: the conversation's most specific sentences and
//! nothing else.
//!
//! A sentence scores the sum of the inverse document frequency of its distinct content words
//! (documents are the conversation's sentences; words are lowercased runs of letters and
//! digits, stopwords left out) over the square root of its length in words. Sentences are taken
//! greedily by score while they fit the budget and shown in conversation order, one line per
//! turn after its speaker. No recent turns, no dates, no redundancy discount, no names: what the
//! tiered memory adds to the same idea is measured against this.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use strata_core::{Block, BlockKind, Context, History, Role, Strategy, StrategyError};
use strata_text::{is_stopword, split_sentences};

use crate::select::{finish, pin_system};

#[derive(Debug, Clone, Copy, Default)]
pub struct Specific;

/// Runs of letters and digits: the prototype's words (lowercased where they are compared).
struct Candidate {
    turn: usize,
    order: usize,
    text: String,
    score: f64,
}

impl Strategy for Specific {
    fn name(&self) -> &str {
        "specific"
    }

    fn build(&self, history: &History, budget: usize, _question: Option<&str>) -> Result<Context, StrategyError> {
        let counter = history.counter();
        let mut ctx = Context::new(self.name(), budget, counter);
        let left = pin_system(history, &mut ctx);
        let turns = history.turns();

        let sentences: Vec<(usize, String)> = (history.pinned()..turns.len())
            .flat_map(|i| split_sentences(i, &turns[i]))
            .map(|s| (s.turn, s.text))
            .collect();
        // Ordered sets: a float sum in hash order would differ from run to run in its last
        // bits, and break ties between sentences differently.
        let content: Vec<BTreeSet<String>> = sentences
            .iter()
            .map(|(_, text)| {
                strata_text::alnum_words(text).map(str::to_lowercase).filter(|w| !is_stopword(w)).collect()
            })
            .collect();
        let mut df: HashMap<&str, usize> = HashMap::new();
        for set in &content {
            for w in set {
                *df.entry(w.as_str()).or_default() += 1;
            }
        }
        let n = sentences.len() as f64;
        let mut candidates: Vec<Candidate> = sentences
            .iter()
            .zip(&content)
            .enumerate()
            .map(|(order, ((turn, text), set))| {
                let information: f64 = set.iter().map(|w| (n / df[w.as_str()] as f64).ln()).sum();
                let length = strata_text::alnum_words(text).count().max(1) as f64;
                Candidate { turn: *turn, order, text: text.clone(), score: information / length.sqrt() }
            })
            .collect();
        // Highest score first; ties to the earlier sentence, so the same history gives the
        // same context.
        candidates.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.order.cmp(&b.order)));

        // Greedy to the budget: a sentence costs itself and a line break, and its turn's
        // speaker when the turn has no line yet. Merges across lines make the estimate differ
        // by a few tokens, so the rendered block is then held to the budget exactly.
        let mut kept: Vec<&Candidate> = Vec::new();
        let mut lines: HashSet<usize> = HashSet::new();
        let mut used = counter.count_message(Role::System, None, "", None, &[]);
        for c in &candidates {
            let mut cost = counter.count(&c.text) + 1;
            if !lines.contains(&c.turn) {
                cost += counter.count(&format!("{}: ", history.turns()[c.turn].speaker_or_role()));
            }
            if used + cost > left {
                continue;
            }
            used += cost;
            lines.insert(c.turn);
            kept.push(c);
        }
        while !kept.is_empty() {
            let (text, ids) = render(history, &kept);
            let block = Block::text(BlockKind::Salient, Role::System, text, ids, counter);
            if block.tokens <= left {
                ctx.blocks.push(block);
                break;
            }
            kept.pop();
        }
        Ok(finish(ctx))
    }
}

/// The kept sentences in conversation order, one line per turn, and the turns they came from.
fn render(history: &History, kept: &[&Candidate]) -> (String, Vec<String>) {
    let mut by_turn: BTreeMap<usize, Vec<(usize, &str)>> = BTreeMap::new();
    for c in kept {
        by_turn.entry(c.turn).or_default().push((c.order, &c.text));
    }
    let mut lines = Vec::new();
    let mut ids = Vec::new();
    for (turn, mut sentences) in by_turn {
        sentences.sort_unstable();
        let body: Vec<&str> = sentences.into_iter().map(|(_, s)| s).collect();
        lines.push(format!("{}: {}", history.turns()[turn].speaker_or_role(), body.join(" ")));
        ids.push(history.turns()[turn].id.clone());
    }
    (lines.join("\n"), ids)
}
