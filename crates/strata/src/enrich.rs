//! Store-time enrichment: a background thread that has a local model write notes on each
//! closed span of conversation (`strata_summarize::notes`), embeds them, and hands them back
//! linked to their turns, so that recall can meet a turn through what the notes say about it.
//! Nothing here is on the path of `context()`: the memory takes finished notes at turn
//! boundaries, as it takes summaries, and a failed or missing model only leaves recall as it
//! was.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use strata_core::{Embedder, Generator, Turn};

use crate::shared::Shared;

/// The notes of one span: each line's vector (unit length) and the turns it links to
/// (positions in the conversation).
#[derive(Debug, Clone, Default)]
pub(crate) struct SpanNotes {
    pub(crate) end: usize,
    pub(crate) notes: Vec<(Vec<usize>, Vec<f32>)>,
}

#[derive(Debug, Default)]
struct State {
    /// Spans sent, as (start, end): never sent twice.
    sent: BTreeSet<(usize, usize)>,
    pending: usize,
    fresh: Vec<(usize, SpanNotes)>,
    errors: Vec<String>,
    closing: bool,
}

/// One thread per memory; spans are written in the order they were sent.
pub(crate) struct Enricher {
    tx: Option<Sender<(usize, Vec<Turn>)>>,
    shared: Arc<Shared<State>>,
    handle: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Enricher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.shared.lock();
        f.debug_struct("Enricher").field("sent", &s.sent.len()).field("pending", &s.pending).finish()
    }
}

impl Enricher {
    pub(crate) fn start(generator: Arc<dyn Generator>, embedder: Arc<dyn Embedder>) -> Enricher {
        let shared = Arc::new(Shared::<State>::default());
        let (tx, rx) = mpsc::channel();
        let handle = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("strata-notes".into())
                .spawn(move || run(generator.as_ref(), embedder.as_ref(), rx, &shared))
                .expect("spawning the notes thread")
        };
        Enricher { tx: Some(tx), shared, handle: Some(handle) }
    }

    /// Sends the span of `turns` starting at position `start`, unless it was sent before.
    pub(crate) fn send(&self, start: usize, turns: &[Turn]) {
        let mut s = self.shared.lock();
        if turns.is_empty() || !s.sent.insert((start, start + turns.len())) {
            return;
        }
        s.pending += 1;
        drop(s);
        if let Some(tx) = &self.tx {
            if tx.send((start, turns.to_vec())).is_err() {
                let mut s = self.shared.lock();
                s.pending = 0;
                s.errors.push(format!("turn {}: the notes thread stopped; recall ranks without notes", turns[0].id));
                self.shared.notify();
            }
        }
    }

    /// The spans' notes finished since the last call, by their first turn.
    pub(crate) fn take_finished(&self) -> Vec<(usize, SpanNotes)> {
        std::mem::take(&mut self.shared.lock().fresh)
    }

    pub(crate) fn take_errors(&self) -> Vec<String> {
        std::mem::take(&mut self.shared.lock().errors)
    }

    /// Blocks until every span sent has its notes (or has failed).
    pub(crate) fn settle(&self) {
        drop(self.shared.wait_while(|s| s.pending > 0));
    }
}

impl Drop for Enricher {
    fn drop(&mut self) {
        self.shared.lock().closing = true;
        self.tx.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn run(generator: &dyn Generator, embedder: &dyn Embedder, rx: Receiver<(usize, Vec<Turn>)>, shared: &Shared<State>) {
    while let Ok((start, turns)) = rx.recv() {
        if shared.lock().closing {
            break;
        }
        // On a pool of its own: a local model splits its arithmetic over rayon's threads, and
        // the caller's may all be waiting in `settle` (the eval's are), which would starve it.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::in_background(|| notes(generator, embedder, start, &turns))
        }));
        let mut s = shared.lock();
        match outcome {
            Ok(Ok(notes)) => s.fresh.push((start, notes)),
            Ok(Err(why)) => s.errors.push(format!("turn {}: no notes ({why}); recall ranks it without", turns[0].id)),
            Err(_) => s.errors.push(format!("turn {}: writing notes panicked; recall ranks it without", turns[0].id)),
        }
        s.pending = s.pending.saturating_sub(1);
        shared.notify();
    }
    let mut s = shared.lock();
    s.pending = 0;
    shared.notify();
}

/// The notes of one span, linked and embedded.
fn notes(
    generator: &dyn Generator,
    embedder: &dyn Embedder,
    start: usize,
    turns: &[Turn],
) -> Result<SpanNotes, String> {
    let reply = generator.generate(&strata_summarize::notes_request(turns)).map_err(|e| e.to_string())?;
    let lines = strata_summarize::parse_notes(&reply.text, turns);
    let texts: Vec<&str> = lines.iter().map(|n| n.text.as_str()).collect();
    let vectors = if texts.is_empty() { Vec::new() } else { embedder.embed(&texts).map_err(|e| e.to_string())? };
    if vectors.len() != lines.len() {
        return Err(format!("the embedder gave {} vectors for {} notes", vectors.len(), lines.len()));
    }
    let notes = lines
        .into_iter()
        .zip(vectors)
        .filter_map(|(n, v)| {
            let v = unit(&v)?;
            Some((n.turns.into_iter().map(|i| start + i).collect(), v))
        })
        .collect();
    Ok(SpanNotes { end: start + turns.len(), notes })
}

/// The notes held for recall, by the first turn of their span (a span's newer notes, from a
/// longer span with the same start, replace the older).
#[derive(Debug, Default)]
pub(crate) struct NoteIndex {
    spans: BTreeMap<usize, SpanNotes>,
}

impl NoteIndex {
    /// Holds a span's notes; notes of an older cut that starts inside it go (a session noted
    /// while open is cut again once it closes).
    pub(crate) fn insert(&mut self, start: usize, notes: SpanNotes) {
        let inside: Vec<usize> = self.spans.range(start + 1..notes.end).map(|(&s, _)| s).collect();
        for s in inside {
            self.spans.remove(&s);
        }
        self.spans.insert(start, notes);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.spans.values().all(|s| s.notes.is_empty())
    }

    /// Each of `n` turns' best note cosine to `query`, for the `depth` best turns, shifted
    /// so that the best turn left out would score 0; the others (and turns with no note) 0.
    pub(crate) fn scores(&self, query: &[f32], n: usize, depth: usize) -> Vec<f32> {
        let Some(q) = unit(query) else { return vec![0.0; n] };
        let mut best = vec![f32::MIN; n];
        for span in self.spans.values() {
            for (turns, v) in &span.notes {
                if v.len() != q.len() {
                    continue;
                }
                let s: f32 = v.iter().zip(&q).map(|(a, b)| a * b).sum();
                for &i in turns {
                    if let Some(b) = best.get_mut(i) {
                        *b = b.max(s);
                    }
                }
            }
        }
        let mut sorted: Vec<f32> = best.iter().copied().filter(|&s| s > f32::MIN).collect();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let floor = sorted.get(depth).copied().unwrap_or(sorted.last().copied().unwrap_or(0.0) - 1e-3);
        best.iter().map(|&s| if s == f32::MIN { 0.0 } else { (s - floor).max(0.0) }).collect()
    }
}

fn unit(v: &[f32]) -> Option<Vec<f32>> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    (norm > 0.0).then(|| v.iter().map(|x| x / norm).collect())
}
