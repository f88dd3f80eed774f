//! The openers without weights, and the table held to its own rules.

use std::collections::HashSet;

use crate::table::{self, Kind, Model, ModelFile, Open, Packing, MODELS};
use crate::ModelError;

#[test]
fn a_generator_is_a_local_model_or_an_endpoint() {
    // An endpoint needs no weights: the models folder is never looked at.
    let nowhere = std::path::Path::new("/nonexistent/models");
    let g = crate::generator("http://127.0.0.1:9/v1#tiny", nowhere).unwrap();
    assert_eq!(g.model_id(), "tiny@http://127.0.0.1:9/v1");
    // A local name loads weights, and says which are missing and how to fetch them.
    let err = crate::generator("smollm2", nowhere).err().expect("no weights there").to_string();
    assert!(err.contains("/nonexistent/models/smollm2-135m-instruct/"), "{err}");
    assert!(err.contains("cargo xtask fetch-models smollm2-135m-instruct"), "{err}");
    let err = crate::embedder("minilm", nowhere).err().expect("no weights there");
    assert!(err.is_bad_input() && err.to_string().contains("/nonexistent/models"), "{err}");
    let err = crate::generator("http://", nowhere).err().expect("not an endpoint");
    assert!(err.is_bad_input(), "{err}");
    // A GGUF path that is not there is named as such, with no fetch hint that cannot help.
    let err = crate::generator("/nonexistent/mine.gguf", nowhere).err().expect("no such file");
    assert!(err.is_bad_input() && err.to_string() == "/nonexistent/mine.gguf: no such file", "{err}");
}

#[test]
fn an_unknown_name_is_bad_input_that_lists_the_names() {
    let nowhere = std::path::Path::new("/nonexistent/models");
    let err = crate::embedder("minilm2", nowhere).err().expect("no such embedder");
    assert!(err.is_bad_input(), "{err}");
    assert_eq!(err.to_string(), "no embedder is called `minilm2` (known: minilm, nomic, bge)");
    // A bare word is not looked for as a file: `qwen2` is a typo, not a path.
    let err = crate::generator("qwen2", nowhere).err().expect("no such generator").to_string();
    assert!(err.starts_with("no generator is called `qwen2` (known: smollm2, qwen, qwen1.5b; or a path"), "{err}");
    // A reranker is not an embedder, though both are in the table.
    let err = crate::reranker("minilm", nowhere).err().expect("not a reranker");
    assert!(matches!(err, ModelError::Unknown { kind: Kind::Reranker, .. }), "{err}");
    // Models are found by alias and by folder name alike.
    assert_eq!(table::find(Kind::Embedder, "all-MiniLM-L6-v2").map(|m| m.alias), Some("minilm"));
}

static TINY: Model = Model {
    name: "tiny",
    alias: "tiny",
    about: "a test model",
    open: Open::BertSafetensors,
    approx_mb: 0,
    files: &[ModelFile {
        out: "tiny/model.safetensors",
        size: 5,
        // sha256 of "hello"
        sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
        parts: &[],
        layout: Packing::Whole,
    }],
};

#[test]
fn missing_truncated_and_wrong_files_name_the_file_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tiny/model.safetensors");
    let check = |want: &str| {
        let e = crate::open::checked(&TINY, dir.path(), true).unwrap_err();
        assert!(e.is_bad_input(), "{e}");
        let e = e.to_string();
        assert!(e.starts_with(&file.display().to_string()), "{e}");
        assert!(e.contains(want), "{e}");
        let hint = "run `cargo xtask fetch-models tiny` to fetch it";
        assert!(e.ends_with(hint) || e.ends_with(&format!("{hint} again")), "{e}");
    };
    check("missing");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, b"hel").unwrap();
    check("3 bytes where 5 were expected, so the file is truncated");
    std::fs::write(&file, b"jello").unwrap();
    check("sha256 ");
    // Without the hash (a lazily loaded generator), only the size is checked now.
    assert_eq!(crate::open::checked(&TINY, dir.path(), false).unwrap(), dir.path().join("tiny"));
    std::fs::write(&file, b"hello").unwrap();
    assert_eq!(crate::open::checked(&TINY, dir.path(), true).unwrap(), dir.path().join("tiny"));
}

#[test]
fn the_table_holds_to_its_own_rules() {
    let mut names = HashSet::new();
    for m in MODELS {
        // A name selects one model, whatever its kind: `fetch-models` takes them all.
        assert!(names.insert(m.name) && names.insert(m.alias), "{}: name or alias used twice", m.name);
        for f in m.files {
            assert!(f.out.starts_with(&format!("{}/", m.name)), "{}: outside its folder", f.out);
            assert!(f.size > 0 && f.sha256.len() == 64, "{}: no pin", f.out);
        }
        match m.open {
            Open::Gguf => assert_eq!(m.files.len(), 1, "{}: a GGUF model is one file", m.name),
            Open::NomicGguf { vocabulary } => {
                let vocab = table::find(Kind::Embedder, vocabulary).expect("the vocabulary is an embedder's");
                assert!(vocab.files.iter().any(|f| f.out.ends_with("/tokenizer.json")), "{vocabulary}");
            }
            Open::BertSafetensors | Open::BgeOnnx | Open::CrossEncoderOnnx => {
                assert!(m.files.iter().any(|f| f.out.ends_with("/tokenizer.json")), "{}", m.name);
            }
        }
    }
    for kind in [Kind::Embedder, Kind::Reranker, Kind::Generator] {
        assert!(!table::aliases(kind).is_empty(), "no {kind}");
    }
}
