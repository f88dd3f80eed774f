//! Fuzzes the transcript loaders (Strata JSON and JSONL, OpenAI messages, LoCoMo, and the
//! other benchmark formats) with any bytes: an error is fine, a panic is a bug. A Strata
//! transcript that loads must load again, unchanged, from what `to_json` writes of it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_transcript::{datasets, load_bytes, to_json, InputFormat};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, bytes)) = data.split_first() else { return };
    let format = match mode % 4 {
        0 => None,
        1 => Some(InputFormat::Strata),
        2 => Some(InputFormat::OpenAiMessages),
        _ => Some(InputFormat::Locomo),
    };
    let jsonl = mode & 4 != 0;
    if let Ok(loaded) = load_bytes("fuzz.json", bytes, jsonl, format) {
        if loaded.format == InputFormat::Strata {
            for c in &loaded.conversations {
                let again = load_bytes("again.json", to_json(c).as_bytes(), false, Some(InputFormat::Strata))
                    .unwrap_or_else(|e| panic!("a loaded transcript does not load again: {e}"));
                assert_eq!(again.conversations.len(), 1);
                assert_eq!(&again.conversations[0], c, "a transcript changed through to_json");
            }
        }
    }
    match mode >> 3 & 3 {
        0 => drop(datasets::tiage("fuzz.tsv", bytes)),
        1 => drop(datasets::dialseg("fuzz.json", bytes)),
        2 => drop(datasets::qmsum("fuzz.json", "q", bytes)),
        _ => {
            if let Ok(row) = serde_json::from_slice::<serde_json::Value>(bytes) {
                drop(datasets::dialogsum_row("fuzz.jsonl", 1, &row));
            }
        }
    }
});
