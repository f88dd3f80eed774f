//! Project automation, run as `cargo xtask <task>`: tidy checks now; fetching data and models
//! and running the eval as they arrive.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod tidy;

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("tidy") => {
            let problems = tidy::check(&root())?;
            if problems.is_empty() {
                println!("tidy: ok");
                Ok(())
            } else {
                for p in &problems {
                    eprintln!("tidy: {p}");
                }
                bail!("{} tidy problems", problems.len())
            }
        }
        _ => {
            eprintln!("usage: cargo xtask <task>\n\ntasks:\n  tidy    check project rules (also run by cargo test)");
            std::process::exit(2);
        }
    }
}

/// The workspace root: xtask lives one level below it.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask is inside the workspace").to_path_buf()
}
