//! The bundled suites by name, where their files are, and how to read them as conversations.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use strata_core::Conversation;
use strata_transcript::{datasets, JsonlReader, LoadError};

/// The suites `--dataset` names, in the order reports list them.
pub const SUITES: &[&str] = &[
    "locomo",
    "locomo-sentences",
    "qmsum",
    "tiage",
    "dialseg711",
    "dialogsum",
    "probes",
    "probes-dev",
    "probes-heldout",
    "probes-paraphrased",
    "probes-heldout-paraphrased",
    "tiage-dev",
    "qmsum-dev",
];

/// The suite the main job runs when no `--dataset` is given.
pub const DEFAULT_SUITE: &[&str] = &["locomo", "probes"];

/// What a dataset is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// Any file the transcript loaders read (Strata JSON/JSONL, messages, LoCoMo).
    Transcripts,
    QmsumDir,
    Tiage,
    Dialseg,
    Dialogsum,
}

/// Which suites a dataset is scored by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Suites {
    /// Probes: retention and token reduction of strategies.
    pub retention: bool,
    /// Gold topic boundaries: Pk, WindowDiff, F1 of segmenters.
    pub segmentation: bool,
    /// Reference summaries: ROUGE of summarizers.
    pub summaries: bool,
    /// Every conversation is labelled for topic shifts, so one without gold boundaries has
    /// none (true of the segmentation benchmarks, not of arbitrary files).
    pub gold_is_complete: bool,
}

/// A dataset resolved to files.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub name: String,
    /// One of [`SUITES`], rather than a file the user named.
    builtin: bool,
    kind: Kind,
    /// Sorted, so that hashing and loading are deterministic.
    pub files: Vec<PathBuf>,
    /// Each turn is split into one turn per sentence (see [`split_sentences`]).
    sentences: bool,
}

pub use strata_probes::PROBES_FILE;

impl Dataset {
    /// `name` is a suite name or a path to a transcript file.
    pub fn resolve(name: &str, data_dir: &Path, repo_root: &Path) -> Result<Dataset> {
        let (kind, files) = match name {
            "locomo" | "locomo-sentences" => (Kind::Transcripts, vec![data_dir.join("locomo/locomo10.json")]),
            "qmsum" | "qmsum-dev" => {
                let split = if name == "qmsum" { "test" } else { "val" };
                let dir = data_dir.join("qmsum").join(split);
                let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                    .with_context(|| format!("{}: cannot list the QMSum test split", dir.display()))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|e| e == "json"))
                    .collect();
                files.sort();
                (Kind::QmsumDir, files)
            }
            "tiage" => (Kind::Tiage, vec![data_dir.join("tiage/test/anno_test.json")]),
            // The split detectors are tuned on, so that the test numbers stay honest.
            "tiage-dev" => (Kind::Tiage, vec![data_dir.join("tiage/dev/anno_dev.json")]),
            "dialseg711" => (Kind::Dialseg, vec![data_dir.join("dialseg/dialseg_711.json")]),
            "dialogsum" => (Kind::Dialogsum, vec![data_dir.join("dialogsum/dialogsum.test.jsonl")]),
            "probes" => (Kind::Transcripts, vec![repo_root.join(PROBES_FILE)]),
            // The same kinds of fact in other phrasing families: the ones mechanisms may be
            // tuned on, and the one nobody tunes on.
            "probes-dev" => (Kind::Transcripts, vec![repo_root.join(strata_probes::PROBES_DEV_FILE)]),
            "probes-heldout" => (Kind::Transcripts, vec![repo_root.join(strata_probes::PROBES_HELDOUT_FILE)]),
            // Both with their evidence turns reworded by a local model (`gen-probes --paraphrase`).
            "probes-paraphrased" => (Kind::Transcripts, vec![repo_root.join(strata_probes::PROBES_PARAPHRASED_FILE)]),
            "probes-heldout-paraphrased" => {
                (Kind::Transcripts, vec![repo_root.join(strata_probes::PROBES_HELDOUT_PARAPHRASED_FILE)])
            }
            path => {
                let p = PathBuf::from(path);
                if !p.exists() {
                    bail!(crate::BadInput(format!(
                        "{path}: no such file, and not a suite name (expected one of {})",
                        SUITES.join(", ")
                    )));
                }
                (Kind::Transcripts, vec![p])
            }
        };
        for f in &files {
            if !f.exists() {
                bail!(crate::BadInput(format!(
                    "{}: missing; point --data-dir or STRATA_DATA at the datasets, or run `cargo xtask fetch-datasets`",
                    f.display()
                )));
            }
        }
        let builtin = SUITES.contains(&name);
        let name = if builtin {
            name.to_string()
        } else {
            Path::new(name).file_stem().and_then(|s| s.to_str()).unwrap_or(name).to_string()
        };
        Ok(Dataset { sentences: builtin && name == "locomo-sentences", name, builtin, kind, files })
    }

    /// The suites this dataset is scored by: the named suites by what their benchmark is for
    /// (LoCoMo's session starts are not topic boundaries), any other file by what it carries.
    pub fn suites(&self) -> Suites {
        let name = if self.builtin { self.name.as_str() } else { "" };
        let (retention, segmentation, summaries) = match name {
            "locomo"
            | "locomo-sentences"
            | "probes"
            | "probes-dev"
            | "probes-heldout"
            | "probes-paraphrased"
            | "probes-heldout-paraphrased" => (true, false, false),
            "qmsum" | "qmsum-dev" => (true, true, true),
            "tiage" | "tiage-dev" | "dialseg711" => (false, true, false),
            "dialogsum" => (false, false, true),
            _ => (true, true, true),
        };
        Suites { retention, segmentation, summaries, gold_is_complete: self.builtin }
    }

    /// How many conversations the dataset holds, for a progress bar: cheap to find (JSONL
    /// lines are counted without parsing), and `None` where it would mean parsing twice.
    pub fn len_hint(&self) -> Option<usize> {
        match self.kind {
            Kind::QmsumDir => Some(self.files.len()),
            Kind::Dialogsum => count_lines(&self.files[0]),
            Kind::Transcripts if self.files[0].extension().is_some_and(|e| e == "jsonl") => count_lines(&self.files[0]),
            _ => None,
        }
    }

    /// The sha256 of the dataset: the file's own hash for one file (as MANIFEST.tsv lists it),
    /// else the hash of the sorted `name hash` lines of its files.
    pub fn sha256(&self) -> Result<String> {
        let file_hash = |p: &Path| -> Result<String> {
            let bytes = std::fs::read(p).with_context(|| p.display().to_string())?;
            Ok(hex(&Sha256::digest(&bytes)))
        };
        if let [one] = self.files.as_slice() {
            return file_hash(one);
        }
        let mut lines = String::new();
        for f in &self.files {
            let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            lines.push_str(&format!("{name} {}\n", file_hash(f)?));
        }
        Ok(hex(&Sha256::digest(lines.as_bytes())))
    }

    /// Every conversation, in file order, read lazily: JSONL files are streamed a line at a
    /// time and multi-file datasets a file at a time. Loader warnings (counted dataset quirks)
    /// of the files loaded whole are returned up front.
    pub fn conversations(&self) -> Result<(ConversationIter, Vec<String>)> {
        let mut warnings = Vec::new();
        let mut parts: Vec<ConversationIter> = Vec::new();
        for f in self.files.clone() {
            let file = f.display().to_string();
            let part: ConversationIter = match self.kind {
                Kind::Transcripts if f.extension().is_some_and(|e| e == "jsonl") => {
                    let mut seen = std::collections::HashSet::new();
                    Box::new(JsonlReader::open(&f)?.map(move |c| {
                        let c = c?;
                        if !seen.insert(c.id.clone()) {
                            bail!(crate::BadInput(format!("{file}: transcript {}: duplicate transcript id", c.id)));
                        }
                        Ok(c)
                    }))
                }
                Kind::Transcripts => {
                    let loaded = strata_transcript::load_path(&f, None)?;
                    warnings.extend(loaded.warnings);
                    Box::new(loaded.conversations.into_iter().map(Ok))
                }
                Kind::QmsumDir => Box::new(std::iter::once_with(move || {
                    let bytes = std::fs::read(&f).map_err(|e| LoadError::from_io(&file, &e))?;
                    let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
                    Ok(datasets::qmsum(&file, &stem, &bytes)?)
                })),
                Kind::Tiage | Kind::Dialseg => {
                    let bytes = std::fs::read(&f).map_err(|e| LoadError::from_io(&file, &e))?;
                    let all = if self.kind == Kind::Tiage {
                        datasets::tiage(&file, &bytes)?
                    } else {
                        datasets::dialseg(&file, &bytes)?
                    };
                    Box::new(all.into_iter().map(Ok))
                }
                Kind::Dialogsum => {
                    let reader =
                        std::io::BufReader::new(std::fs::File::open(&f).map_err(|e| LoadError::from_io(&file, &e))?);
                    use std::io::BufRead;
                    Box::new(reader.lines().enumerate().filter_map(move |(i, line)| {
                        let line = match line {
                            Ok(l) if l.trim().is_empty() => return None,
                            Ok(l) => l,
                            Err(e) => return Some(Err(LoadError::from_io(&file, &e).into())),
                        };
                        Some((|| {
                            let row: serde_json::Value = serde_json::from_str(&line)
                                .map_err(|e| crate::BadInput(format!("{file}:{}: {e}", i + 1)))?;
                            Ok(datasets::dialogsum_row(&file, i + 1, &row)?)
                        })())
                    }))
                }
            };
            parts.push(part);
        }
        let all: ConversationIter = Box::new(parts.into_iter().flatten());
        if self.sentences {
            return Ok((Box::new(all.map(|c| c.map(|c| split_sentences(&c)))), warnings));
        }
        Ok((all, warnings))
    }
}

/// The conversation as people who send a message per sentence would have written it: each
/// turn becomes one turn per sentence (ids `D1:3.1`, `D1:3.2`, ..., the speaker, role and time
/// of the original), and a probe's evidence becomes every piece of its evidence turns, so
/// that a question is answered only when the whole of what was said reaches the context.
/// LoCoMo's turns are long single messages; real chats arrive in bursts of short ones, and
/// recall that ranks and packs single messages loses evidence spread over a burst.
pub fn split_sentences(conversation: &Conversation) -> Conversation {
    let mut pieces: std::collections::HashMap<&str, Vec<String>> = std::collections::HashMap::new();
    let mut turns = Vec::with_capacity(conversation.turns.len() * 3);
    for (i, turn) in conversation.turns.iter().enumerate() {
        let sentences = strata_text::split_sentences(i, turn);
        if sentences.len() < 2 || !turn.tool_calls.is_empty() || turn.tool_call_id.is_some() {
            pieces.insert(&turn.id, vec![turn.id.clone()]);
            turns.push(turn.clone());
            continue;
        }
        let ids: Vec<String> = (1..=sentences.len()).map(|k| format!("{}.{k}", turn.id)).collect();
        for (sentence, id) in sentences.into_iter().zip(&ids) {
            turns.push(strata_core::Turn { id: id.clone(), content: sentence.text, ..turn.clone() });
        }
        pieces.insert(&turn.id, ids);
    }
    let map = |id: &String| pieces.get(id.as_str()).cloned().unwrap_or_else(|| vec![id.clone()]);
    let probes = conversation
        .probes
        .iter()
        .map(|p| strata_core::Probe {
            evidence: p.evidence.iter().flat_map(map).collect(),
            // Asked after the last piece of the turn it followed.
            after: p.after.as_ref().and_then(|a| map(a).pop()),
            ..p.clone()
        })
        .collect();
    Conversation { turns, probes, ..conversation.clone() }
}

/// Conversations read lazily, in order.
pub type ConversationIter = Box<dyn Iterator<Item = Result<Conversation>> + Send>;

fn count_lines(path: &Path) -> Option<usize> {
    use std::io::BufRead;
    let f = std::io::BufReader::new(std::fs::File::open(path).ok()?);
    Some(f.split(b'\n').filter(|l| l.as_ref().is_ok_and(|l| !l.iter().all(u8::is_ascii_whitespace))).count())
}

pub(crate) use strata_text::hex;
