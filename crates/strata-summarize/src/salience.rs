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
//! tells without a word list. Optionally (`background`, off by default: it helps chat and costs
//! technical sessions) each word's IDF is weighed by how rare the word is outside the conversation,
//! which the tokenizer knows without a word list: a word said once here but common everywhere
//! ("awesome") tells less than one rare everywhere ("pottery"); long sentences may compete
//! clause by clause (`clause_words`); and two statistics of form, also off by default, discount
//! numbers, which are nearly always said once: a number weighed by the rarity of its shape
//! (`shapes`), a sentence holding one by the rarity of its skeleton (`templates`: a table row
//! repeated with new readings). Sentences are packed greedily into an allowance; a sentence's
//! score is discounted by the share of its information already carried by sentences kept before it
//! (`redundancy`), so the pack does not spend its budget on one fact said five ways. Kept sentences
//! are shown in conversation order, one line per turn after its speaker, with a date line opening
//! each day and what relative time expressions ("yesterday") meant when they were said. Nothing
//! here knows a phrasing: the registry's rules, where a caller has them, only mark superseded
//! values.

use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::sync::Arc;

use strata_core::{Role, TokenCounter, Turn};

use strata_text::{is_stopword, resolve_relative, split, Date};

/// The units whose rarity is measured (once lowercased): whitespace-separated, with the
/// punctuation around them trimmed but not the punctuation inside, so that a value such as
/// "$6,500", "OPS-3254" or a path counts as one rare word rather than as common pieces.
fn words(text: &str) -> impl Iterator<Item = &str> + '_ {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && !matches!(c, '$' | '€' | '£' | '#' | '/' | '~')))
        .filter(|w| w.chars().any(char::is_alphanumeric))
}

/// A word written as a name: capitalised where a sentence does not start. English spells the
/// pronoun "I" and its contractions so wherever they stand; that says nothing about a name.
fn named(raw: &str, first: bool) -> bool {
    let pronoun = raw == "I" || raw.starts_with("I'") || raw.starts_with("I\u{2019}");
    !first && !pronoun && raw.chars().next().is_some_and(char::is_uppercase)
}

/// A long sentence cut into clauses at a comma, semicolon, colon or dash followed by a space
/// (not before a digit: "May 8, 2023" stays whole); pieces under three words join the one
/// before, so each clause keeps its words contiguous.
fn clauses(sentence: &str, min_words: usize) -> Vec<String> {
    if sentence.split_whitespace().count() < min_words {
        return vec![sentence.to_string()];
    }
    let mut out: Vec<String> = Vec::new();
    let mut start = 0;
    let b = sentence.as_bytes();
    let cut = |end: usize, next: usize, out: &mut Vec<String>, start: &mut usize| {
        let piece = sentence[*start..end].trim();
        if !piece.is_empty() {
            match out.last_mut() {
                Some(last) if piece.split_whitespace().count() < 3 || last.split_whitespace().count() < 3 => {
                    last.push(' ');
                    last.push_str(piece);
                }
                _ => out.push(piece.to_string()),
            }
        }
        *start = next;
    };
    for i in 0..b.len() {
        let sep = matches!(b[i], b',' | b';' | b':') || (b[i] == b'-' && i > 0 && b[i - 1] == b' ');
        if sep && b.get(i + 1) == Some(&b' ') && !b.get(i + 2).is_some_and(u8::is_ascii_digit) {
            cut(i + 1, i + 2, &mut out, &mut start);
        }
    }
    cut(sentence.len(), sentence.len(), &mut out, &mut start);
    out
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

/// How sentences are scored and shown.
#[derive(Debug, Clone, PartialEq)]
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
    /// How much a word's rarity outside the conversation (the tokenizer's
    /// [`TokenCounter::rarity`], 0 to 1) weighs its IDF: the weight is `1 - b + b * rarity`,
    /// so 0 ignores it and 1 multiplies by it. Counters that cannot tell leave IDF alone.
    pub background: f64,
    /// Sentences of at least this many words compete clause by clause (cut at a comma,
    /// semicolon, colon or dash before a word), so a kept sentence's filler clauses can be
    /// left out while each clause stays whole; 0 keeps sentences whole. Applied where the
    /// candidates are made ([`Salience::for_config`]), not at selection.
    pub clause_words: usize,
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
    /// How much a word holding a digit is weighed by how rare its *shape* is rather than the
    /// word itself: the IDF used is `idf(word)^(1 - shapes) * idf(shape)^shapes`, where a
    /// shape writes every run of digits as `0` and every run of letters as `a` ("57.7" and
    /// "12.5" are both `0.0`, "OPS-3254" is `a-0`). A number is nearly always said once, so
    /// its own IDF is always the highest; where numbers of its shape are everywhere (a table
    /// of readings in every other turn) that tells little, and its shape says so. 0 ignores
    /// shapes. Shapes are counted where the candidates are made ([`Salience::for_config`]),
    /// only when this or `templates` is above 0.
    pub shapes: f64,
    /// How much a sentence made by a template loses: its score is multiplied by
    /// `(idf(skeleton) / ln(sentences))^templates`, where the skeleton writes each word as `a`
    /// (a run of them as one), each word holding a digit as its shape, and keeps punctuation
    /// ("| landing page | 57.7 | 56.7 |" is `| a | 0.0 | 0.0 |`). A table row, a log line or a
    /// status report repeated with new values shares its skeleton with its siblings; a
    /// sentence someone wrote once almost never does. Only sentences holding a number are
    /// discounted: a template's other words recur, so their own IDF already tells, while each
    /// new number in it is said once and looks as rare as a planted value. 0 ignores skeletons.
    /// Skeletons are counted where the candidates are made ([`Salience::for_config`]).
    pub templates: f64,
}

impl Default for SalienceConfig {
    fn default() -> SalienceConfig {
        SalienceConfig {
            length_exponent: 0.5,
            redundancy: 0.5,
            dated: true,
            min_words: 2,
            background: 0.0,
            clause_words: 0,
            asides: true,
            names: 3.0,
            rarity_exponent: 3.0,
            shapes: 0.0,
            templates: 0.0,
        }
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
    /// Its skeleton's id (see [`SalienceConfig::templates`]), counted in [`Salience::df`];
    /// `None` where forms are not counted.
    skeleton: Option<u32>,
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
    /// By word id: for a word holding a digit, the id of its shape (interned as a word of
    /// its own, never a candidate's word), whose document frequency is counted beside it.
    shape: Vec<Option<u32>>,
    sentences: u32,
    candidates: Vec<Candidate>,
    /// By turn index, for every turn added.
    meta: Vec<TurnMeta>,
    /// Sentences of at least this many words are candidates clause by clause (0: never).
    clause_words: usize,
    /// Bracketed asides at the end of a sentence are candidates of their own.
    asides: bool,
    /// Shapes and skeletons are counted (`shapes` or `templates` above 0): a string per
    /// sentence and per number that the default scoring does not read.
    forms: bool,
    /// What the counter said about candidates, turns and words, kept across rankings: a live
    /// memory ranks again after every turn, from nearly the same candidates.
    memo: Memo,
}

/// Token counts of candidates (by index), of turns' speaker and date lines (by turn), and
/// rarities of words (by id), for one counter.
#[derive(Debug, Default, Clone)]
struct MemoInner {
    counter: String,
    cost: Vec<Option<usize>>,
    lines: Vec<Option<(usize, usize)>>,
    rarity: Vec<Option<Option<f32>>>,
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
struct Ranked {
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
    items: Vec<Ranked>,
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

    /// Candidates made as `config` says (its `clause_words` and `asides`; the rest is read
    /// when ranking).
    pub fn for_config(config: &SalienceConfig) -> Salience {
        Salience {
            ids: HashMap::new(),
            words: Vec::new(),
            df: Vec::new(),
            uses: Vec::new(),
            named: Vec::new(),
            shape: Vec::new(),
            sentences: 0,
            candidates: Vec::new(),
            meta: Vec::new(),
            clause_words: config.clause_words,
            asides: config.asides,
            forms: config.shapes > 0.0 || config.templates > 0.0,
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
        self.meta[index] = TurnMeta { speaker: speaker(turn), day: turn.timestamp.map(Date::of) };
        let (clause_words, asides) = (self.clause_words, self.asides);
        let units: Vec<String> = split(index, turn)
            .into_iter()
            .flat_map(|s| {
                if s.code {
                    return vec![s.text];
                }
                let parts = if asides { aside(&s.text) } else { vec![s.text] };
                parts
                    .into_iter()
                    .flat_map(|p| if clause_words == 0 { vec![p] } else { clauses(&p, clause_words) })
                    .collect()
            })
            .collect();
        for (order, text) in units.into_iter().enumerate() {
            let mut all = 0;
            let mut distinct: Vec<u32> = Vec::new();
            for (i, raw) in words(&text).enumerate() {
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
            let mut shapes: Vec<u32> = Vec::new();
            for &w in &distinct {
                self.df[w as usize] += 1;
                if let Some(shape) = self.shape[w as usize] {
                    shapes.push(shape);
                }
            }
            shapes.sort_unstable();
            shapes.dedup();
            for shape in shapes {
                self.df[shape as usize] += 1;
            }
            let skeleton = self.forms.then(|| self.intern(&skeleton_of(&text)));
            if let Some(skeleton) = skeleton {
                self.df[skeleton as usize] += 1;
            }
            if !pinned {
                self.candidates.push(Candidate {
                    turn: index,
                    order,
                    text: Arc::from(text),
                    words: distinct,
                    length: all,
                    skeleton,
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
        self.shape.push(None);
        // Shapes and skeletons are written with a leading space, which no word holds, so they
        // never meet a word.
        if self.forms && !w.starts_with(' ') && w.chars().any(|c| c.is_ascii_digit()) {
            let shape = self.intern(&shape_of(w));
            self.shape[id as usize] = Some(shape);
        }
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
        memo.rarity.resize(self.words.len(), None);
        // Each word's weight once per ranking: its IDF among the sentences added so far,
        // times its rarity outside the conversation where that weighs anything (asked of
        // the tokenizer once per word, ever).
        let n = self.sentences.max(1) as f32;
        let b = config.background as f32;
        let shapes = config.shapes as f32;
        let idf_of = |w: usize| (n / self.df[w].max(1) as f32).ln().max(0.0);
        let weight: Vec<f32> = (0..self.words.len())
            .map(|w| {
                let mut idf = idf_of(w);
                if let (Some(shape), true) = (self.shape[w], shapes > 0.0) {
                    idf = idf.powf(1.0 - shapes) * idf_of(shape as usize).powf(shapes);
                }
                let mut idf = idf.powf(config.rarity_exponent as f32);
                if config.names > 0.0 {
                    idf *= 1.0 + config.names as f32 * self.named[w] as f32 / self.uses[w].max(1) as f32;
                }
                if b == 0.0 || idf == 0.0 {
                    return idf;
                }
                let r = *memo.rarity[w].get_or_insert_with(|| counter.rarity(&self.words[w]));
                idf * r.map_or(1.0, |r| 1.0 - b + b * r.clamp(0.0, 1.0))
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
        let ln_n = n.ln().max(f32::EPSILON);
        let base: Vec<f32> = pool
            .iter()
            .zip(&total)
            .map(|(&i, t)| {
                let c = &self.candidates[i];
                let mut score = t / (c.length.max(1) as f32).powf(config.length_exponent as f32);
                if let (Some(skeleton), true) = (c.skeleton, config.templates > 0.0) {
                    if c.words.iter().any(|&w| self.shape[w as usize].is_some()) {
                        score *= (idf_of(skeleton as usize) / ln_n).clamp(0.0, 1.0).powf(config.templates as f32);
                    }
                }
                score
            })
            .collect();
        let mut heap: BinaryHeap<(Score, usize)> = base.iter().enumerate().map(|(k, &s)| (Score(s), k)).collect();
        let mut covered = vec![false; self.words.len()];
        let mut items: Vec<Ranked> = Vec::new();
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
                let day = meta.day.map_or(0, |d| counter.count(&format!("[{d}]")) + 2);
                (counter.count(&meta.speaker) + 2, day)
            });
            items.push(Ranked {
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
        self.rank(range, counter, config).pack(turns, end, allowance, counter, config, marked)
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

    /// The ranked sentences of turns before `upto`, best first, as many as fit `allowance`
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
        upto: usize,
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
            if r.turn >= upto || r.turn >= turns.len() {
                continue;
            }
            // What the sentence adds to the rendered block: itself, its turn's speaker when
            // the turn has no line yet, and the day's date line when the day has none.
            let note = marked(r.turn, &r.text);
            let mut cost = r.tokens + 1;
            if let Some(note) = &note {
                cost += counter.count(note) + 1;
            }
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
            let mut shown: Vec<(&Ranked, Option<&String>)> =
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

/// A sentence's skeleton: each whitespace-separated word as `a` (a run of them as one), a word
/// holding a digit as its shape, anything without a letter or digit as it is, after two spaces
/// (see [`SalienceConfig::templates`]).
fn skeleton_of(sentence: &str) -> String {
    let mut out = String::from("  ");
    let mut last_word = false;
    for raw in sentence.split_whitespace() {
        let core = raw.trim_matches(|c: char| !c.is_alphanumeric());
        let (lead, trail) = match raw.find(core) {
            Some(at) if !core.is_empty() => (&raw[..at], &raw[at + core.len()..]),
            _ => (raw, ""),
        };
        let word = if core.is_empty() {
            None
        } else if core.chars().any(|c| c.is_ascii_digit()) {
            Some(shape_of(&core.to_lowercase())[1..].to_string())
        } else {
            Some("a".to_string())
        };
        if !lead.is_empty() {
            out.push_str(lead);
            out.push(' ');
            last_word = false;
        }
        if let Some(word) = word {
            if !(word == "a" && last_word && lead.is_empty()) {
                out.push_str(&word);
                out.push(' ');
            }
            last_word = word == "a" && trail.is_empty();
        }
        if !trail.is_empty() {
            out.push_str(trail);
            out.push(' ');
        }
    }
    out
}

/// A word's shape: every run of digits as `0`, every run of letters as `a`, anything else as
/// it is, after a space (see [`SalienceConfig::shapes`]).
fn shape_of(word: &str) -> String {
    let mut out = String::from(" ");
    let mut last = None;
    for c in word.chars() {
        let class = if c.is_ascii_digit() {
            '0'
        } else if c.is_alphabetic() {
            'a'
        } else {
            c
        };
        if last != Some(class) || !matches!(class, '0' | 'a') {
            out.push(class);
        }
        last = Some(class);
    }
    out
}

fn speaker(turn: &Turn) -> String {
    turn.speaker.clone().unwrap_or_else(|| turn.role.as_str().to_string())
}

/// One line per turn (its speaker, the relative dates its kept sentences use, the sentences,
/// " … " where sentences between them were left out), a date line opening each day.
fn render(turns: &[Turn], shown: &[(&Ranked, Option<&String>)], config: &SalienceConfig) -> String {
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
                    text.push_str(&format!("\n[{d}]"));
                    last_day = Some(d);
                }
            }
        }
        text.push('\n');
        text.push_str(&speaker(turn));
        text.push_str(": ");
        if let (true, Some(ts)) = (config.dated, turn.timestamp) {
            let notes: Vec<String> = shown[k..end]
                .iter()
                .flat_map(|(r, _)| resolve_relative(&r.text, ts))
                .map(|r| format!("{} = {}", r.phrase, r.means))
                .collect();
            if !notes.is_empty() {
                text.push_str(&format!("[{}] ", notes.join("; ")));
            }
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

    use super::{aside, clauses, named, Salience, SalienceConfig, SALIENT_HEADING};

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
        counted(turns, &SalienceConfig::default())
    }

    /// The statistics as `config` has them counted (shapes and skeletons only where it reads them).
    fn counted(turns: &[Turn], config: &SalienceConfig) -> Salience {
        let mut s = Salience::for_config(config);
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
    fn clauses_cut_at_punctuation_keep_values_whole_and_let_filler_go() {
        let long = "well, honestly, after all the back and forth this week, the quokka cluster reboots \
                    nightly at 03:10 on May 8, 2027; blame Ferdinand - and the dashboards look fine";
        let cut = clauses(long, 8);
        assert_eq!(
            cut,
            [
                "well, honestly, after all the back and forth this week,",
                "the quokka cluster reboots nightly at 03:10 on May 8, 2027;",
                "blame Ferdinand -",
                "and the dashboards look fine",
            ]
        );
        assert_eq!(cut.join(" ").split_whitespace().collect::<Vec<_>>(), long.split_whitespace().collect::<Vec<_>>());
        assert_eq!(clauses("a short one, really", 8), ["a short one, really"]);

        // With clauses the fact's clause is kept without the filler before it; whole
        // sentences keep the filler with the fact, or neither. (Names not weighed, so that
        // only the cut decides.)
        let mut turns = conversation();
        turns[20].content = long.to_string();
        let counter = Tiktoken::o200k();
        let none = |_: usize, _: &str| None;
        let config = SalienceConfig { names: 0.0, ..SalienceConfig::default() };
        let mut by_clause = Salience::for_config(&SalienceConfig { clause_words: 8, ..SalienceConfig::default() });
        for (i, t) in turns.iter().enumerate() {
            by_clause.add_turn(i, t);
        }
        let got = by_clause.select(&turns, 0..turns.len(), 60, &counter, &config, &none).unwrap();
        assert!(got.text.contains("the quokka cluster reboots nightly at 03:10 on May 8, 2027;"), "{}", got.text);
        assert!(!got.text.contains("back and forth"), "{}", got.text);
        let whole = salience(&turns).select(&turns, 0..turns.len(), 60, &counter, &config, &none).unwrap();
        assert_eq!(whole.text.contains("03:10"), whole.text.contains("back and forth"), "{}", whole.text);
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

    #[test]
    fn shapes_tell_a_reading_among_many_from_a_value_of_its_own_kind() {
        assert_eq!(super::shape_of("57.7"), " 0.0");
        assert_eq!(super::shape_of("ops-3254"), " a-0");
        assert_eq!(super::shape_of("s3://a/b_v14.parquet"), " a0://a/a_a0.a");
        // Every turn reports two readings of the form 0.0, new numbers each time; one turn
        // gives two quotas, numbers of a shape said nowhere else, in a sentence a word
        // longer. By the words alone every number is said once, and the shorter sentences
        // win; by their shapes, the quotas are the rarer.
        let mut turns = conversation();
        for (i, t) in turns.iter_mut().enumerate() {
            t.content = format!("latency {}.{} {}.{}", 40 + i, i % 7, 140 + i, i % 3);
        }
        turns[30].content = "the latency 12k/day 9k/day".to_string();
        let rank_of = |shapes: f64, turn: usize| {
            let config =
                SalienceConfig { shapes, templates: 0.0, redundancy: 0.0, names: 0.0, ..SalienceConfig::default() };
            let ranking = counted(&turns, &config).rank(0..turns.len(), &Tiktoken::o200k(), &config);
            ranking.items.iter().position(|r| r.turn == turn).unwrap()
        };
        assert!(rank_of(0.0, 30) > 0, "without shapes, the readings come first");
        assert_eq!(rank_of(1.0, 30), 0, "with shapes, the quotas come first");
    }

    #[test]
    fn a_sentence_made_by_a_template_yields_to_one_written_once() {
        assert_eq!(super::skeleton_of("| landing page | 57.7 | 56.7 |"), "  | a | 0.0 | 0.0 | ");
        assert_eq!(super::skeleton_of("| crash rate | 4.2 | 3.9 |"), super::skeleton_of("| errors | 41.3 | 40.3 |"));
        assert_eq!(super::skeleton_of("Re-ran the cell."), "  a . ");
        // A table row of two new readings in every other turn, and one sentence, written once,
        // stating a value among words used elsewhere. The rows' numbers are each said once,
        // as the value is, and the rows are shorter; as a template's output they yield.
        let mut turns = conversation();
        for (i, t) in turns.iter_mut().enumerate().filter(|(i, _)| i % 2 == 1) {
            t.content = format!("| p99 latency | {}.{} | {}.{} |", 40 + i, i % 7, 140 + i, i % 3);
        }
        turns[30].content = "the dashboard looked fine, quota 48".to_string();
        // Of the rows and the sentence, which comes first.
        let first = |templates: f64| {
            let config = SalienceConfig { templates, redundancy: 0.0, names: 0.0, ..SalienceConfig::default() };
            let ranking = counted(&turns, &config).rank(0..turns.len(), &Tiktoken::o200k(), &config);
            ranking.items.iter().find(|r| r.turn % 2 == 1 || r.turn == 30).unwrap().turn
        };
        assert_eq!(first(0.0) % 2, 1, "without templates, a row comes first");
        assert_eq!(first(0.5), 30, "discounting templates, the sentence written once comes first");
    }
}
