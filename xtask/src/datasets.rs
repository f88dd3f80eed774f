//! `cargo xtask fetch-datasets`: the public benchmark files, from their sources, checked
//! against the sha256 in MANIFEST.tsv.

use std::path::Path;

use anyhow::Result;

pub(crate) fn fetch(_root: &Path, _check_only: bool) -> Result<()> {
    anyhow::bail!("fetch-datasets: not yet")
}
