//! Splitting turns into the units summaries keep: sentences, with code blocks and stack-trace
//! lines kept whole, each tied to its turn.

use strata_core::Turn;

/// One unit of a turn that a summary keeps or drops as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sentence {
    /// Position of the turn in the slice the sentence came from.
    pub turn: usize,
    pub turn_id: String,
    pub text: String,
    /// A fenced code block, a command line or a stack-trace line: kept verbatim, never cut.
    pub code: bool,
}

/// Sentences of every turn, in order.
pub fn split_turns(turns: &[Turn]) -> Vec<Sentence> {
    turns.iter().enumerate().flat_map(|(i, t)| split_sentences(i, t)).collect()
}

/// Sentences of one turn. Fenced code blocks are one unit each; other text is split into
/// lines, and lines into sentences at `.`, `!` or `?` followed by a space and a capital, a
/// digit or a quote (so "e.g. this" and "3.5" stay whole).
pub fn split_sentences(index: usize, turn: &Turn) -> Vec<Sentence> {
    let mut out = Vec::new();
    let mut push = |text: &str, code: bool| {
        let text = text.trim();
        if !text.is_empty() {
            out.push(Sentence { turn: index, turn_id: turn.id.clone(), text: text.to_string(), code });
        }
    };
    let mut in_fence = false;
    let mut fence = String::new();
    for line in turn.content.lines() {
        if line.trim_start().starts_with("```") {
            if in_fence {
                fence.push_str(line);
                push(&fence, true);
                fence.clear();
            } else {
                fence.push_str(line);
                fence.push('\n');
            }
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            fence.push_str(line);
            fence.push('\n');
            continue;
        }
        if is_code_line(line) {
            push(line, true);
            continue;
        }
        let mut start = 0;
        let bytes = line.as_bytes();
        for (i, &b) in bytes.iter().enumerate() {
            if matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1) == Some(&b' ') {
                let next = line[i + 2..].chars().next();
                if next.is_some_and(|c| c.is_uppercase() || c.is_ascii_digit() || matches!(c, '"' | '\'' | '`' | '(')) {
                    push(&line[start..=i], false);
                    start = i + 2;
                }
            }
        }
        push(&line[start..], false);
    }
    if in_fence {
        // An unclosed fence: keep what there is rather than lose it.
        push(&fence, true);
    }
    out
}

/// Shell prompts and stack-trace frames: lines whose every character matters.
fn is_code_line(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("$ ")
        || t.starts_with("at ") && t.contains('(')
        || t.starts_with("File \"")
        || t.starts_with("Traceback (most recent call last)")
        || t.starts_with("    at ")
}

/// The runs of letters and digits, as written: what the lexical index, the question's content
/// words and `specific` count as words ("OPS-3254" is "OPS" and "3254").
pub fn alnum_words(text: &str) -> impl Iterator<Item = &str> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty())
}

/// The whitespace-separated words that hold a letter or digit, with the punctuation around them
/// trimmed but not the punctuation inside, as written: a value such as "$6,500", "OPS-3254" or
/// a path is one word. What salience measures the rarity of.
pub fn value_words(text: &str) -> impl Iterator<Item = &str> + '_ {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && !matches!(c, '$' | '€' | '£' | '#' | '/' | '~')))
        .filter(|w| w.chars().any(char::is_alphanumeric))
}

/// Lowercase words of at least two characters (`_` and `-` inside a word kept), for overlap
/// measures.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric() && c != '_' && c != '-')
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
}

/// How rare a sentence's words are among a set of sentences, from 0 (every word in every
/// sentence) to about 1 (words said once): mean inverse document frequency, scaled by its
/// maximum. Boilerplate that recurs with new numbers ("looked stable over the last 7 days")
/// scores low; a sentence said once scores high.
#[derive(Debug)]
pub struct Specificity {
    df: std::collections::BTreeMap<String, usize>,
    total: f32,
}

impl Specificity {
    pub fn new<'a>(sentences: impl IntoIterator<Item = &'a str>) -> Specificity {
        let mut df = std::collections::BTreeMap::new();
        let mut total = 0usize;
        for s in sentences {
            total += 1;
            let unique: std::collections::BTreeSet<String> = words(s).filter(|w| !is_stopword(w)).collect();
            for w in unique {
                *df.entry(w).or_insert(0) += 1;
            }
        }
        Specificity { df, total: total.max(1) as f32 }
    }

    pub fn of(&self, sentence: &str) -> f32 {
        let idf: Vec<f32> = words(sentence)
            .filter(|w| !is_stopword(w))
            .map(|w| (self.total / self.df.get(&w).copied().unwrap_or(1) as f32).ln().max(0.0))
            .collect();
        if idf.is_empty() {
            0.0
        } else {
            idf.iter().sum::<f32>() / idf.len() as f32 / self.total.ln().max(1.0)
        }
    }
}

/// Common words that carry no topic, left out of overlap measures and fact keys.
pub fn is_stopword(w: &str) -> bool {
    const STOP: &[&str] = &[
        "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "before", "but",
        "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "his", "how", "i",
        "if", "in", "into", "is", "it", "its", "just", "me", "more", "my", "no", "not", "now", "of", "on", "one", "or",
        "our", "out", "she", "should", "so", "some", "still", "than", "that", "the", "their", "them", "then", "there",
        "these", "they", "this", "to", "up", "us", "was", "we", "were", "what", "when", "which", "while", "who",
        "will", "with", "would", "you", "your",
    ];
    STOP.binary_search(&w).is_ok()
}

#[cfg(test)]
mod tests {
    use strata_core::{Role, Turn};

    #[test]
    fn sentences_code_blocks_and_traces() {
        let t = Turn::new(
            "t1",
            Role::User,
            "We decided to use Rust, e.g. for the parser. Version 3.5 ships Friday! Why?\n```sh\ncargo build\n```\n$ make test\nDone.",
        );
        let got: Vec<(String, bool)> = super::split_sentences(0, &t).into_iter().map(|s| (s.text, s.code)).collect();
        assert_eq!(
            got,
            vec![
                ("We decided to use Rust, e.g. for the parser.".to_string(), false),
                ("Version 3.5 ships Friday!".to_string(), false),
                ("Why?".to_string(), false),
                ("```sh\ncargo build\n```".to_string(), true),
                ("$ make test".to_string(), true),
                ("Done.".to_string(), false),
            ]
        );
    }

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        assert!(super::is_stopword("the") && super::is_stopword("you") && !super::is_stopword("pulsar"));
    }
}
