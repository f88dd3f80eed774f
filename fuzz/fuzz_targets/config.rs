//! Fuzzes the strategies' config file (`--config`, TOML or JSON): a bad file must be an error
//! naming it, never a panic, and a file that is accepted must give settings that validate.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::StrategiesConfig;

fuzz_target!(|data: &[u8]| {
    let Some((&kind, text)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(text) else { return };
    let file = if kind & 1 == 0 { "fuzz.toml" } else { "fuzz.json" };
    match StrategiesConfig::parse(file, text) {
        Ok(config) => {
            for name in ["tiered", "summary-buffer", "segments", "window"] {
                drop(config.settings(name));
            }
        }
        Err(e) => assert!(e.to_string().contains(file), "an error that does not name the file: {e}"),
    }
});
