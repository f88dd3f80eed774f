//! The openers without weights, and the pinned table held to the loaders' own pins.

use crate::table::MODELS;

#[test]
fn a_generator_is_a_local_model_or_an_endpoint() {
    // An endpoint needs no weights: the models folder is never looked at.
    let nowhere = std::path::Path::new("/nonexistent/models");
    let g = crate::generator("http://127.0.0.1:9/v1#tiny", nowhere).unwrap();
    assert_eq!(g.model_id(), "tiny@http://127.0.0.1:9/v1");
    // A local name loads weights, and says which are missing.
    let err = crate::generator("smollm2", nowhere).err().expect("no weights there").to_string();
    assert!(err.contains("/nonexistent/models"), "{err}");
    let err = crate::embedder("minilm", nowhere).err().expect("no weights there");
    assert!(err.is_bad_input() && err.to_string().contains("/nonexistent/models"), "{err}");
    let err = crate::generator("http://", nowhere).err().expect("not an endpoint");
    assert!(err.is_bad_input(), "{err}");
}

#[test]
fn the_fetch_table_and_the_loaders_pin_the_same_files() {
    // Every file a loader checks is one the table writes, with the same hash: a model fetched
    // by `cargo xtask fetch-models` is never refused by the loader that opens it.
    let specs = [
        strata_candle::MINILM,
        strata_candle::NOMIC_EMBED_V15,
        strata_candle::QWEN_CODER_05B,
        strata_candle::QWEN_CODER_15B,
        strata_candle::SMOLLM2_135M,
        strata_candle::MS_MARCO_MINILM,
        strata_candle::BGE_SMALL,
    ];
    for spec in specs {
        for file in spec.files {
            let out = format!("{}/{}", spec.folder, file.name);
            let pinned = MODELS.iter().flat_map(|m| m.files).find(|f| f.out == out);
            let pinned = pinned.unwrap_or_else(|| panic!("{out}: the loader pins it, the fetch table does not"));
            assert_eq!(pinned.sha256, file.sha256, "{out}");
        }
    }
    // And every model the table fetches has a loader.
    for model in MODELS {
        assert!(specs.iter().any(|s| s.folder == model.name), "{}: fetched, but no loader pins it", model.name);
    }
}
