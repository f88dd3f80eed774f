//! Salience without phrase rules: which sentences of a conversation carry the most
//! information, measured by how rare their words are within the conversation, so that a
//! question-agnostic context keeps facts however they were phrased.
//!
//! A sentence scores the sum of its content words' inverse document frequency (documents are the
//! conversation's sentences), each raised to `rarity_exponent`, over its length in words to the
//! power `length_exponent`: boilerplate that recurs with new numbers scores low, a sentence that
//! names a value said once scores high, whoever said it and however; the exponent makes one word
//! said once count for more than several merely uncommon ones. A word written as a name,
//! capitalised where no sentence starts, weighs more (`names`, by the share of its uses written
//! so): people, places, titles and products are what later questions ask about, and the spelling
//! tells without a word list. Sentences are packed greedily into an allowance; a sentence's
//! score is discounted by the share of its information already carried by sentences kept before it
//! (`redundancy`), so the pack does not spend its budget on one fact said five ways. Kept sentences
//! are shown in conversation order, one line per turn after its speaker, with a date line opening
//! each day and what relative time expressions ("yesterday") meant when they were said. Nothing
//! here knows a phrasing: the registry's rules, where a caller has them, only mark superseded
//! values.

use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::sync::Arc;

use strata_core::{Role, TokenCounter, Turn};

use strata_text::{date_line, is_stopword, relative_note, split_sentences, value_words, Date};

/// A word written as a name: capitalised where a sentence does not start. English spells the
/// pronoun "I" and its contractions so wherever they stand; that says nothing about a name.
fn named(raw: &str, first: bool) -> bool {
    let pronoun = raw == "I" || raw.starts_with("I'") || raw.starts_with("I\u{2019}");
    !first && !pronoun && raw.chars().next().is_some_and(char::is_uppercase)
}

/// A sentence and the bracketed aside that ends it ("... fun! [shares a photo: a dog on a
/// beach]"), as two units when the aside has at least three words and the sentence some
/// text before it; otherwise the sentence alone.
fn aside(sentence: &str) -> Vec<String> {
    let t = sentence.trim_end();
    if !t.ends_with(']') {
        return vec![sentence.to_string()];
    }
    // The bracket that opens the final one, nesting counted.
    let mut depth = 0usize;
    for (i, c) in t.char_indices().rev() {
        match c {
            ']' => depth += 1,
            '[' => {
                depth -= 1;
                if depth == 0 {
                    let (head, tail) = (t[..i].trim(), &t[i..]);
                    if head.chars().any(char::is_alphanumeric) && tail.split_whitespace().count() >= 3 {
                        return vec![head.to_string(), tail.to_string()];
                    }
                    break;
                }
            }
            _ => {}
        }
    }
    vec![sentence.to_string()]
}

/// The heading of the salient-sentences block.
pub const SALIENT_HEADING: &str = "[Earlier in the conversation, the most specific statements, in their own words]";

/// How sentences are scored and shown: the config file's `[tiered.salience]` table.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SalienceConfig {
    /// A sentence's information sum is divided by its length in words to this power: 0 favours
    /// long sentences, 1 ranks by mean rarity, 0.5 in between.
    pub length_exponent: f64,
    /// How much of a sentence's score is lost for the information already kept (0: none,
    /// 1: all of the covered share).
    pub redundancy: f64,
    /// Show a date line per day and resolve relative time expressions.
    pub dated: bool,
    /// Sentences with fewer content words are not candidates ("ok", "thanks!").
    pub min_words: usize,
    /// A bracketed aside that ends a sentence ("[shares a photo: ...]", a note) of at least
    /// three words is a candidate of its own, so a sentence is not kept or dropped with it.
    /// Applied where the candidates are made ([`Salience::for_config`]).
    pub asides: bool,
    /// How much more a word weighs when it is written as a name (capitalised where a sentence
    /// does not start), by the share of its uses written so: the weight is
    /// `1 + names * share`. 0 ignores the writing.
    pub names: f64,
    /// Each word's IDF is raised to this power before a sentence sums them: 1 sums IDF as it
    /// is; above 1 a word used once outweighs several merely uncommon ones, so a sentence
    /// that states a one-off value outranks one made of uncommon topic words.
    pub rarity_exponent: f64,
}

impl Default for SalienceConfig {
    fn default() -> SalienceConfig {
        SalienceConfig {
            length_exponent: 0.5,
            redundancy: 0.5,
            dated: true,
            min_words: 2,
            asides: true,
            names: 3.0,
            rarity_exponent: 3.0,
        }
    }
}

impl SalienceConfig {
    /// Every value in its range, or a message naming the first that is not (as the config
    /// file's `[tiered.salience]` key).
    pub fn validate(&self) -> Result<(), String> {
        let ranges = [
            ("redundancy", self.redundancy, 0.0, 1.0),
            ("length_exponent", self.length_exponent, 0.0, 2.0),
            ("rarity_exponent", self.rarity_exponent, 0.25, 8.0),
            ("names", self.names, 0.0, 100.0),
        ];
        for (name, v, lo, hi) in ranges {
            if !(lo..=hi).contains(&v) {
                return Err(format!("tiered.salience: `{name}` must be between {lo} and {hi}, not {v}"));
            }
        }
        Ok(())
    }
}

/// One sentence that may be kept.
#[derive(Debug, Clone)]
struct Candidate {
    turn: usize,
    /// Position among its turn's sentences.
    order: usize,
    text: Arc<str>,
    /// Distinct content words, as ids into [`Salience::df`].
    words: Vec<u32>,
    /// All words, for the length.
    length: usize,
}

/// What a kept sentence's turn adds to the block besides the sentence: its speaker, and the
/// day it was said.
#[derive(Debug, Clone, Default)]
struct TurnMeta {
    speaker: String,
    day: Option<Date>,
}

/// Document frequencies over every sentence added, and the candidate sentences, both
/// extended a turn at a time (O(that turn)). Words are interned: ids are given in the order
/// words first appear, so everything computed from them is deterministic.
#[derive(Debug, Clone)]
pub struct Salience {
    ids: HashMap<String, u32>,
    /// By word id: the word, and in how many sentences it appears.
    words: Vec<String>,
    df: Vec<u32>,
    /// By word id: how often it was used, and how often written as a name.
    uses: Vec<u32>,
    named: Vec<u32>,
    sentences: u32,
    candidates: Vec<Candidate>,
    /// By turn index, for every turn added.
    meta: Vec<TurnMeta>,
    /// Bracketed asides at the end of a sentence are candidates of their own.
    asides: bool,
    /// What the counter said about candidates and turns, kept across rankings: a live
    /// memory ranks again after every turn, from nearly the same candidates.
    memo: Memo,
}

/// Token counts of candidates (by index) and of turns' speaker and date lines (by turn), for
/// one counter.
#[derive(Debug, Default, Clone)]
struct MemoInner {
    counter: String,
    cost: Vec<Option<usize>>,
    lines: Vec<Option<(usize, usize)>>,
}

#[derive(Debug, Default)]
struct Memo(std::sync::Mutex<MemoInner>);

impl Clone for Memo {
    fn clone(&self) -> Memo {
        Memo(std::sync::Mutex::new(self.lock().clone()))
    }
}

impl Memo {
    fn lock(&self) -> std::sync::MutexGuard<'_, MemoInner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A block of salient sentences: its text and the ids of the turns it quotes.
#[derive(Debug, Clone, PartialEq)]
pub struct Salient {
    pub text: String,
    pub turn_ids: Vec<String>,
}

/// One ranked sentence, with everything packing needs to cost it.
#[derive(Debug, Clone)]
struct RankedSentence {
    turn: usize,
    order: usize,
    text: Arc<str>,
    /// The sentence's own tokens.
    tokens: usize,
    /// Its turn's speaker prefix, and the date line of its day.
    line_tokens: usize,
    day: Option<Date>,
    day_tokens: usize,
}

/// The candidate sentences of a conversation in the order they would be kept with no budget:
/// most informative first, each scored after the discount for what the ones before it
/// already carry. Made once (by a background thread in a live memory), then packed into any
/// allowance at the cost of a walk down the list ([`Ranking::pack`]).
#[derive(Debug, Clone, Default)]
pub struct Ranking {
    turns: usize,
    items: Vec<RankedSentence>,
}

impl Default for Salience {
    fn default() -> Salience {
        Salience::new()
    }
}

impl Salience {
    /// Candidates made as the default [`SalienceConfig`] says.
    pub fn new() -> Salience {
        Salience::for_config(&SalienceConfig::default())
    }

    /// Candidates made as `config` says (its `asides`; the rest is read when ranking).
    pub fn for_config(config: &SalienceConfig) -> Salience {
        Salience {
            ids: HashMap::new(),
            words: Vec::new(),
            df: Vec::new(),
            uses: Vec::new(),
            named: Vec::new(),
            sentences: 0,
            candidates: Vec::new(),
            meta: Vec::new(),
            asides: config.asides,
            memo: Memo::default(),
        }
    }

    /// How many turns have been added (the highest index added, plus one).
    pub fn turns(&self) -> usize {
        self.meta.len()
    }

    /// Adds turn `index`'s sentences to the statistics and the candidates. The pinned system
    /// prompt (index 0, role system) counts for the statistics only: it is always shown.
    pub fn add_turn(&mut self, index: usize, turn: &Turn) {
        let pinned = index == 0 && turn.role == Role::System;
        if self.meta.len() <= index {
            self.meta.resize(index + 1, TurnMeta::default());
        }
        self.meta[index] = TurnMeta { speaker: turn.speaker_or_role().to_string(), day: turn.timestamp.map(Date::of) };
        let asides = self.asides;
        let units: Vec<String> = split_sentences(index, turn)
            .into_iter()
            .flat_map(|s| if s.code || !asides { vec![s.text] } else { aside(&s.text) })
            .collect();
        for (order, text) in units.into_iter().enumerate() {
            let mut all = 0;
            let mut distinct: Vec<u32> = Vec::new();
            // Value words (once lowercased): "$6,500" counts as one rare word, not common pieces.
            for (i, raw) in value_words(&text).enumerate() {
                all += 1;
                let w = raw.to_lowercase();
                if is_stopword(&w) {
                    continue;
                }
                let id = self.intern(&w);
                self.uses[id as usize] += 1;
                if named(raw, i == 0) {
                    self.named[id as usize] += 1;
                }
                distinct.push(id);
            }
            distinct.sort_unstable();
            distinct.dedup();
            self.sentences += 1;
            for &w in &distinct {
                self.df[w as usize] += 1;
            }
            if !pinned {
                self.candidates.push(Candidate {
                    turn: index,
                    order,
                    text: Arc::from(text),
                    words: distinct,
                    length: all,
                });
            }
        }
    }

    fn intern(&mut self, w: &str) -> u32 {
        if let Some(&id) = self.ids.get(w) {
            return id;
        }
        let id = self.words.len() as u32;
        self.ids.insert(w.to_string(), id);
        self.words.push(w.to_string());
        self.df.push(0);
        self.uses.push(0);
        self.named.push(0);
        id
    }

    /// The candidates of the turns in `range` in the order they would be kept with no budget.
    /// Lazy greedy: a sentence's score only falls as more is kept, so a popped sentence whose
    /// rescored value still beats the next stale one is the true best. Sentences with no
    /// information left are not ranked.
    pub fn rank(&self, range: std::ops::Range<usize>, counter: &dyn TokenCounter, config: &SalienceConfig) -> Ranking {
        let mut memo = self.memo.lock();
        if memo.counter != counter.name() {
            *memo = MemoInner { counter: counter.name().to_string(), ..MemoInner::default() };
        }
        memo.cost.resize(self.candidates.len(), None);
        memo.lines.resize(self.meta.len(), None);
        // Each word's weight once per ranking: its IDF among the sentences added so far.
        let n = self.sentences.max(1) as f32;
        let weight: Vec<f32> = (0..self.words.len())
            .map(|w| {
                let idf = (n / self.df[w].max(1) as f32).ln().max(0.0);
                let mut idf = idf.powf(config.rarity_exponent as f32);
                if config.names > 0.0 {
                    idf *= 1.0 + config.names as f32 * self.named[w] as f32 / self.uses[w].max(1) as f32;
                }
                idf
            })
            .collect();
        let pool: Vec<usize> = (0..self.candidates.len())
            .filter(|&i| {
                let c = &self.candidates[i];
                range.contains(&c.turn) && c.words.len() >= config.min_words
            })
            .collect();
        let total: Vec<f32> =
            pool.iter().map(|&i| self.candidates[i].words.iter().map(|&w| weight[w as usize]).sum()).collect();
        let base: Vec<f32> = pool
            .iter()
            .zip(&total)
            .map(|(&i, t)| t / (self.candidates[i].length.max(1) as f32).powf(config.length_exponent as f32))
            .collect();
        let mut heap: BinaryHeap<(Score, usize)> = base.iter().enumerate().map(|(k, &s)| (Score(s), k)).collect();
        let mut covered = vec![false; self.words.len()];
        let mut items: Vec<RankedSentence> = Vec::new();
        while let Some((Score(stale), k)) = heap.pop() {
            if stale <= 0.0 {
                break;
            }
            let c = &self.candidates[pool[k]];
            let seen: f32 = c.words.iter().filter(|&&w| covered[w as usize]).map(|&w| weight[w as usize]).sum();
            let fresh = if total[k] > 0.0 { base[k] * (1.0 - config.redundancy as f32 * seen / total[k]) } else { 0.0 };
            if heap.peek().is_some_and(|(Score(next), _)| fresh < *next) {
                heap.push((Score(fresh), k));
                continue;
            }
            if fresh <= 0.0 {
                break;
            }
            for &w in &c.words {
                covered[w as usize] = true;
            }
            let tokens = *memo.cost[pool[k]].get_or_insert_with(|| counter.count(&c.text));
            let meta = &self.meta[c.turn];
            let (line_tokens, day_tokens) = *memo.lines[c.turn].get_or_insert_with(|| {
                let day = meta.day.map_or(0, |d| counter.count(&date_line(d)) + 2);
                (counter.count(&meta.speaker) + 2, day)
            });
            items.push(RankedSentence {
                turn: c.turn,
                order: c.order,
                text: c.text.clone(),
                tokens,
                line_tokens,
                day: meta.day,
                day_tokens,
            });
        }
        Ranking { turns: self.turns(), items }
    }

    /// The most informative sentences of the turns in `range` within `allowance` tokens, as
    /// one system message: [`Salience::rank`] then [`Ranking::pack`].
    pub fn select(
        &self,
        turns: &[Turn],
        range: std::ops::Range<usize>,
        allowance: usize,
        counter: &dyn TokenCounter,
        config: &SalienceConfig,
        marked: &dyn Fn(usize, &str) -> Option<String>,
    ) -> Option<Salient> {
        let end = range.end;
        self.rank(range, counter, config).pack(turns, &|t| t < end, allowance, counter, config, marked)
    }
}

impl Ranking {
    /// How many turns the statistics had when this ranking was made.
    pub fn turns(&self) -> usize {
        self.turns
    }

    /// How many sentences are ranked.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The ranked sentences of the turns `eligible` admits, best first, as many as fit `allowance`
    /// tokens, as one system message; `turns` is the conversation the ranking was made from
    /// (or a longer one). `marked` gives a note for a sentence (that a later turn superseded
    /// it), shown after it. Marked sentences rank as any other: whether an old value still
    /// matters is the reader's call, and the note tells it. `None` when nothing fits.
    ///
    /// A sentence that does not fit is passed over, and the ones after it were ranked as if
    /// it had been kept; with every allowance drawn from one ranking, that is the price of
    /// never ranking at the caller's moment.
    pub fn pack(
        &self,
        turns: &[Turn],
        eligible: &dyn Fn(usize) -> bool,
        allowance: usize,
        counter: &dyn TokenCounter,
        config: &SalienceConfig,
        marked: &dyn Fn(usize, &str) -> Option<String>,
    ) -> Option<Salient> {
        let heading = counter.count_message(Role::System, None, SALIENT_HEADING, None, &[]);
        if heading >= allowance {
            return None;
        }
        let mut kept: Vec<(usize, Option<String>)> = Vec::new();
        let mut lines: BTreeSet<usize> = BTreeSet::new();
        let mut days: BTreeSet<Date> = BTreeSet::new();
        let mut used = heading;
        for (k, r) in self.items.iter().enumerate() {
            if used >= allowance {
                break;
            }
            if r.turn >= turns.len() || !eligible(r.turn) {
                continue;
            }
            // What the sentence adds to the rendered block: itself, its turn's speaker when
            // the turn has no line yet, the day's date line when the day has none, and its
            // note. A sentence that does not fit without its note is passed over before the
            // note is asked for: once the block is nearly full, that is most of them.
            let mut cost = r.tokens + 1;
            if !lines.contains(&r.turn) {
                cost += r.line_tokens;
                if let (true, Some(d)) = (config.dated, r.day) {
                    if !days.contains(&d) {
                        cost += r.day_tokens;
                    }
                }
            }
            if used + cost > allowance {
                continue;
            }
            let note = marked(r.turn, &r.text);
            if let Some(note) = &note {
                cost += counter.count(note) + 1;
                if used + cost > allowance {
                    continue;
                }
            }
            used += cost;
            lines.insert(r.turn);
            if let (true, Some(d)) = (config.dated, r.day) {
                days.insert(d);
            }
            kept.push((k, note));
        }
        // Rendered, then held to the allowance exactly: drop the last kept until it fits
        // (merges across lines make the estimate differ by a few tokens).
        loop {
            if kept.is_empty() {
                return None;
            }
            let mut shown: Vec<(&RankedSentence, Option<&String>)> =
                kept.iter().map(|(k, note)| (&self.items[*k], note.as_ref())).collect();
            shown.sort_by_key(|(r, _)| (r.turn, r.order));
            let text = render(turns, &shown, config);
            if counter.count_message(Role::System, None, &text, None, &[]) <= allowance {
                let mut turn_ids: Vec<String> = Vec::new();
                for (r, _) in &shown {
                    if turn_ids.last() != Some(&turns[r.turn].id) {
                        turn_ids.push(turns[r.turn].id.clone());
                    }
                }
                return Some(Salient { text, turn_ids });
            }
            kept.pop();
        }
    }
}

/// One line per turn (its speaker, the relative dates its kept sentences use, the sentences,
/// " … " where sentences between them were left out), a date line opening each day.
fn render(turns: &[Turn], shown: &[(&RankedSentence, Option<&String>)], config: &SalienceConfig) -> String {
    let mut text = String::from(SALIENT_HEADING);
    let mut last_day: Option<Date> = None;
    let mut k = 0;
    while k < shown.len() {
        let t = shown[k].0.turn;
        let mut end = k;
        while end < shown.len() && shown[end].0.turn == t {
            end += 1;
        }
        let turn = &turns[t];
        if config.dated {
            if let Some(d) = turn.timestamp.map(Date::of) {
                if last_day != Some(d) {
                    text.push('\n');
                    text.push_str(&date_line(d));
                    last_day = Some(d);
                }
            }
        }
        text.push('\n');
        text.push_str(turn.speaker_or_role());
        text.push_str(": ");
        if let (true, Some(ts)) = (config.dated, turn.timestamp) {
            text.push_str(&relative_note(shown[k..end].iter().map(|(r, _)| &*r.text), ts));
        }
        for (j, (r, note)) in shown[k..end].iter().enumerate() {
            if j > 0 {
                text.push_str(if shown[k + j - 1].0.order + 1 == r.order { " " } else { " … " });
            }
            text.push_str(&r.text);
            if let Some(n) = note {
                text.push_str(&format!(" [{n}]"));
            }
        }
        k = end;
    }
    text
}

/// An f32 ordered for the heap (scores are finite).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Score(f32);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[cfg(test)]
mod tests {
    use strata_core::{Role, Timestamp, TokenCounter, Turn};
    use strata_tokens::Tiktoken;

    use super::{aside, named, Salience, SalienceConfig, SALIENT_HEADING};

    /// A conversation of boilerplate that recurs with new numbers, with two facts said once:
    /// one by the user, one by the assistant inside a code block, neither in a phrasing any
    /// rule knows.
    fn conversation() -> Vec<Turn> {
        let mut turns = Vec::new();
        for i in 0..60 {
            let (role, text) = if i % 2 == 0 {
                (Role::User, format!("Any news on the dashboard? It looked fine for {} hours.", i + 2))
            } else {
                (Role::Assistant, format!("The dashboard looked fine, {} checks passed today.", i * 3))
            };
            turns.push(Turn::new(format!("t{}", i + 1), role, text).with_speaker(if i % 2 == 0 {
                "kim"
            } else {
                "assistant"
            }));
        }
        turns[20].content = "the quokka cluster reboots nightly at 03:10, blame Ferdinand".to_string();
        turns[41].content = "Found it:\n```\nexport VELLUM_SHARDS=48\n```".to_string();
        turns[50].content = "Yesterday the quokka cluster moved to rack 9.".to_string();
        for (i, t) in turns.iter_mut().enumerate() {
            // 2027-01-04, a turn a minute, the last ten on the next day.
            let day = if i >= 50 { 86_400 } else { 0 };
            t.timestamp = Some(Timestamp(1_799_053_200 + day + 60 * i as i64));
        }
        turns
    }

    fn salience(turns: &[Turn]) -> Salience {
        let mut s = Salience::new();
        for (i, t) in turns.iter().enumerate() {
            s.add_turn(i, t);
        }
        s
    }

    #[test]
    fn specific_sentences_beat_boilerplate_and_the_block_fits() {
        let turns = conversation();
        let s = salience(&turns);
        let counter = Tiktoken::o200k();
        let config = SalienceConfig::default();
        let none = |_: usize, _: &str| None;
        let got = s.select(&turns, 0..turns.len(), 90, &counter, &config, &none).unwrap();
        assert!(counter.count_message(Role::System, None, &got.text, None, &[]) <= 90);
        assert!(got.text.starts_with(SALIENT_HEADING));
        assert!(got.text.contains("blame Ferdinand"), "{}", got.text);
        assert!(got.text.contains("VELLUM_SHARDS=48"), "{}", got.text);
        assert!(!got.text.contains("dashboard"), "{}", got.text);
        // In conversation order, after the speaker, a date line per day, and "yesterday" said
        // on 5 January resolved.
        let ferdinand = got.text.find("Ferdinand").unwrap();
        let vellum = got.text.find("VELLUM").unwrap();
        assert!(ferdinand < vellum);
        assert!(got.text.contains("\n[4 January 2027]\nkim: the quokka"), "{}", got.text);
        assert!(got.text.contains("[yesterday = 4 January 2027] Yesterday the quokka"), "{}", got.text);
        assert_eq!(got.turn_ids, vec!["t21", "t42", "t51"]);
        // Only the turns asked for; nothing when nothing fits.
        let early = s.select(&turns, 0..30, 90, &counter, &config, &none).unwrap();
        assert!(early.text.contains("Ferdinand") && !early.text.contains("VELLUM"));
        assert_eq!(s.select(&turns, 0..turns.len(), 5, &counter, &config, &none), None);
    }

    #[test]
    fn redundancy_and_superseded_marks() {
        let mut turns = conversation();
        turns[30].content = "the quokka cluster reboots nightly at 03:10, blame Ferdinand!".to_string();
        let s = salience(&turns);
        let counter = Tiktoken::o200k();
        let none = |_: usize, _: &str| None;
        let plain = SalienceConfig { redundancy: 1.0, ..SalienceConfig::default() };
        let got = s.select(&turns, 0..turns.len(), 90, &counter, &plain, &none).unwrap();
        assert_eq!(got.text.matches("Ferdinand").count(), 1, "said twice, kept once: {}", got.text);
        let marked = |turn: usize, _: &str| (turn == 41).then(|| "superseded at t55".to_string());
        let got = s.select(&turns, 0..turns.len(), 200, &counter, &plain, &marked).unwrap();
        assert!(
            got.text.contains("```\n [superseded at t55]") || got.text.contains("``` [superseded at t55]"),
            "{}",
            got.text
        );
    }

    #[test]
    fn a_closing_aside_is_its_own_unit() {
        assert_eq!(
            aside("Fun day at the beach! [shares a photo: a dog on a beach]"),
            ["Fun day at the beach!", "[shares a photo: a dog on a beach]"]
        );
        assert_eq!(aside("See [1] and [the [nested] note here]"), ["See [1] and", "[the [nested] note here]"]);
        // Too short to stand alone, or nothing before it: unchanged.
        assert_eq!(aside("Look at this [photo: dog]"), ["Look at this [photo: dog]"]);
        assert_eq!(aside("[shares a photo: a dog on a beach]"), ["[shares a photo: a dog on a beach]"]);
        assert_eq!(aside("no brackets at all"), ["no brackets at all"]);

        // As candidates: the aside can be left out while its sentence is kept.
        let mut turns = conversation();
        turns[20].content =
            "the quokka cluster reboots nightly, blame Ferdinand [shares a photo: a photograph of a rack of grey servers with blinking lights in a cold room]".to_string();
        let mut s = Salience::for_config(&SalienceConfig { asides: true, ..SalienceConfig::default() });
        for (i, t) in turns.iter().enumerate() {
            s.add_turn(i, t);
        }
        let counter = Tiktoken::o200k();
        let none = |_: usize, _: &str| None;
        let config = SalienceConfig { asides: true, names: 0.0, ..SalienceConfig::default() };
        let got = s.select(&turns, 0..turns.len(), 45, &counter, &config, &none).unwrap();
        assert!(got.text.contains("blame Ferdinand"), "{}", got.text);
    }

    #[test]
    fn names_weigh_a_word_written_as_one() {
        assert!(named("Priya", false));
        assert!(!named("Priya", true), "a sentence's first word says nothing");
        assert!(!named("priya", false));
        assert!(!named("I'm", false) && !named("I", false) && !named("I\u{2019}ve", false));
        // Two sentences said once among boilerplate: one with more rare words, one shorter
        // with a name in it. By rarity alone the first wins; weighing the name, the second.
        let mut turns = conversation();
        turns[20].content = "the harbour wall near the old lighthouse was repainted".to_string();
        turns[30].content = "we finally met Priya".to_string();
        let first = |names: f64| {
            let config = SalienceConfig { names, ..SalienceConfig::default() };
            let mut s = Salience::for_config(&config);
            for (i, t) in turns.iter().enumerate() {
                s.add_turn(i, t);
            }
            let ranking = s.rank(0..turns.len(), &Tiktoken::o200k(), &config);
            ranking.items.iter().find(|r| r.turn == 20 || r.turn == 30).unwrap().text.to_string()
        };
        assert_eq!(first(0.0), "the harbour wall near the old lighthouse was repainted");
        assert_eq!(first(3.0), "we finally met Priya");
    }

    #[test]
    fn the_rarity_exponent_lets_one_word_said_once_outweigh_uncommon_ones() {
        // One sentence of boilerplate words and one word said nowhere else; another of four
        // words said in seven other turns too. Summed as they are, the four uncommon words
        // win; cubed, the one word said once does.
        let mut turns = conversation();
        for i in (2..16).step_by(2) {
            turns[i].content = "pier ferry harbour lighthouse".to_string();
        }
        turns[20].content = "dashboard looked fine, quokka".to_string();
        turns[30].content = "harbour ferry lighthouse pier".to_string();
        let first = |rarity_exponent: f64| {
            let config = SalienceConfig { rarity_exponent, redundancy: 0.0, names: 0.0, ..SalienceConfig::default() };
            let ranking = salience(&turns).rank(0..turns.len(), &Tiktoken::o200k(), &config);
            ranking.items.iter().find(|r| r.turn == 20 || r.turn == 30).unwrap().text.to_string()
        };
        assert_eq!(first(1.0), "harbour ferry lighthouse pier");
        assert_eq!(first(3.0), "dashboard looked fine, quokka");
    }
}
