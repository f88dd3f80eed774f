//! Probes written for any conversation by a generator (a local model or an endpoint), checked
//! before they are kept: `strata probes` and `strata.make_probes`. Turns that say something
//! specific are picked (`pick`), the generator is asked for a question each turn answers
//! (`ask`), and every reply passes the checks (`check`) or is dropped with its reason. Every
//! request, reply and verdict is returned, so a user can read why a probe was dropped.

use std::time::{Duration, Instant};

use strata_core::{Conversation, GenerateRequest, Generator, Probe, TokenCounter};
use strata_text::{resolve_relative, Date};

mod ask;
mod check;
mod pick;

pub use check::Reason;
pub use pick::Kind;

/// How probes are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteConfig {
    /// Probes asked for per conversation (fewer where it has fewer turns to ask about).
    pub per_conversation: usize,
    /// Chooses among the most specific turns of each stretch: another seed, other probes.
    pub seed: u64,
    /// The newest turns that fit this many tokens are "the last turns": nothing is asked about
    /// them, and a probe they answer is dropped.
    pub recent_tokens: usize,
    /// Give up on one request after this long (counted as a generator failure).
    pub deadline: Option<Duration>,
    /// The longest reply asked for, in the generator's tokens.
    pub max_tokens: usize,
}

impl Default for WriteConfig {
    fn default() -> WriteConfig {
        WriteConfig {
            per_conversation: 24,
            seed: 0,
            recent_tokens: 1000,
            deadline: Some(Duration::from_secs(300)),
            max_tokens: 160,
        }
    }
}

/// One request and what became of it: a line of the side file.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Verdict {
    pub conversation: String,
    pub kind: Kind,
    /// Ids of the turns the generator was shown.
    pub turns: Vec<String>,
    /// The generator's reply as it came, or its error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The probe as read from the reply (its id is set when it is kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
    pub kept: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    pub seconds: f64,
}

/// What a run wrote: the conversations with their new probes (in place of any they had),
/// and one verdict per request, in order.
#[derive(Debug, Clone)]
pub struct Written {
    pub conversations: Vec<Conversation>,
    pub verdicts: Vec<Verdict>,
}

impl Written {
    /// Requests made, probes kept, and the count dropped for each reason (every reason, zeros
    /// included, in `Reason::ALL`'s order).
    pub fn counts(&self) -> (usize, usize, Vec<(Reason, usize)>) {
        let kept = self.verdicts.iter().filter(|v| v.kept).count();
        let dropped =
            Reason::ALL.iter().map(|&r| (r, self.verdicts.iter().filter(|v| v.reason == Some(r)).count())).collect();
        (self.verdicts.len(), kept, dropped)
    }

    /// The side file: one JSON line per request, in order.
    pub fn verdict_lines(&self) -> String {
        let mut out = String::new();
        for v in &self.verdicts {
            out.push_str(&serde_json::to_string(v).expect("a verdict is plain data"));
            out.push('\n');
        }
        out
    }

    /// The one-line account of a run: kept of asked, and the count dropped for each reason.
    pub fn report(&self) -> String {
        let (asked, kept, dropped) = self.counts();
        let mut out = format!("{kept} probes kept of {asked} asked for {} conversations", self.conversations.len());
        let reasons: Vec<String> =
            dropped.iter().filter(|(_, n)| *n > 0).map(|(r, n)| format!("{n} {}", r.name())).collect();
        if !reasons.is_empty() {
            out.push_str("; dropped: ");
            out.push_str(&reasons.join(", "));
        }
        out
    }
}

/// Writes probes for each conversation. `progress(done, all)` is called after each request.
/// The same conversations, generator (greedy, or served from its cache), seed and settings give
/// the same probes.
pub fn write_probes(
    conversations: &[Conversation],
    generator: &dyn Generator,
    counter: &dyn TokenCounter,
    config: &WriteConfig,
    progress: &mut dyn FnMut(usize, usize),
) -> Written {
    let plans: Vec<(usize, Vec<pick::Pick>)> = conversations
        .iter()
        .map(|c| {
            let tail = pick::tail_start(c, counter, config.recent_tokens);
            (tail, pick::picks(c, tail, config.per_conversation, config.seed))
        })
        .collect();
    let all: usize = plans.iter().map(|(_, p)| p.len()).sum();
    let mut done = 0;
    let mut verdicts = Vec::with_capacity(all);
    let mut out = Vec::with_capacity(conversations.len());
    for (c, (tail, picks)) in conversations.iter().zip(&plans) {
        let recent = check::Recent::new(c, *tail);
        let mut kept = Vec::new();
        let mut probes = Vec::new();
        for p in picks {
            let verdict = write_one(c, &recent, p, generator, config, &mut kept, probes.len());
            if let (true, Some(probe)) = (verdict.kept, &verdict.probe) {
                probes.push(probe.clone());
            }
            verdicts.push(verdict);
            done += 1;
            progress(done, all);
        }
        out.push(Conversation { probes, ..c.clone() });
    }
    Written { conversations: out, verdicts }
}

fn write_one(
    c: &Conversation,
    recent: &check::Recent,
    pick: &pick::Pick,
    generator: &dyn Generator,
    config: &WriteConfig,
    kept: &mut Vec<check::Kept>,
    index: usize,
) -> Verdict {
    let mut verdict = Verdict {
        conversation: c.id.clone(),
        kind: pick.kind,
        turns: pick.turns.iter().map(|&i| c.turns[i].id.clone()).collect(),
        reply: None,
        error: None,
        probe: None,
        kept: false,
        reason: None,
        seconds: 0.0,
    };
    let request =
        GenerateRequest { messages: ask::request(c, pick), max_tokens: config.max_tokens, deadline: config.deadline };
    let start = Instant::now();
    let reply = generator.generate(&request);
    verdict.seconds = start.elapsed().as_secs_f64();
    let text = match reply {
        Ok(g) => g.text,
        Err(e) => {
            verdict.error = Some(e.to_string());
            verdict.reason = Some(Reason::GeneratorFailed);
            return verdict;
        }
    };
    let read = ask::read(&text);
    verdict.reply = Some(text);
    let (question, answer, evidence) = match read {
        ask::Reply::Probe { question, answer, evidence } => (question, answer, evidence),
        ask::Reply::Declined => {
            verdict.reason = Some(Reason::Declined);
            return verdict;
        }
        ask::Reply::NotUnderstood => {
            verdict.reason = Some(Reason::NotUnderstood);
            return verdict;
        }
    };
    let turn = &c.turns[pick.turns[0]];
    let (answer, evidence) = match pick.kind {
        // The date is Strata's to say: the day a relative expression in the turn meant, else
        // the turn's own day. Its evidence is the turn.
        Kind::Date => {
            let ts = turn.timestamp.expect("a date pick has a timestamp");
            let when = resolve_relative(&turn.content, ts)
                .into_iter()
                .next()
                .map_or_else(|| Date::of(ts).to_string(), |r| r.means);
            (Some(when), vec![turn.id.clone()])
        }
        _ if evidence.is_empty() => (answer, verdict.turns.clone()),
        _ => (answer, evidence),
    };
    let Some(answer) = answer else {
        verdict.reason = Some(Reason::NotUnderstood);
        return verdict;
    };
    let probe = Probe {
        id: String::new(),
        question,
        answer,
        evidence,
        after: None,
        category: Some(pick.kind.name().to_string()),
        adversarial_answer: None,
    };
    let candidate = check::Candidate {
        kind: pick.kind,
        picked: &pick.turns,
        question: &probe.question,
        answer: &probe.answer,
        evidence: &probe.evidence,
    };
    match check::check(c, recent, &candidate, kept) {
        Ok(k) => {
            kept.push(k);
            verdict.kept = true;
            verdict.probe = Some(Probe { id: format!("{}-w{}", c.id, index + 1), ..probe });
        }
        Err(reason) => {
            verdict.reason = Some(reason);
            verdict.probe = Some(probe);
        }
    }
    verdict
}

#[cfg(test)]
mod tests;
