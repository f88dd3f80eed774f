//! `cargo xtask fetch-datasets`: the public benchmark files from their source repositories,
//! each checked against the sha256 in `datasets/MANIFEST.tsv` (a copy of the shared manifest).
//!
//! Files already present with the right hash are left alone; a download goes to a temporary
//! name and is renamed into place only once its hash matches, so a failed or tampered download
//! never replaces good data. `--check` downloads nothing and verifies what is there.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// One manifest row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) path: String,
    pub(crate) repo: String,
    pub(crate) commit: String,
    pub(crate) sha256: String,
}

pub(crate) fn manifest(root: &Path) -> Result<Vec<Entry>> {
    let file = root.join("datasets/MANIFEST.tsv");
    let text = std::fs::read_to_string(&file).with_context(|| file.display().to_string())?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1).filter(|(_, l)| !l.trim().is_empty()) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [path, repo, commit, _licence, _bytes, sha256] = cols[..] else {
            bail!("{}:{}: expected 6 tab-separated columns", file.display(), i + 1);
        };
        out.push(Entry { path: path.into(), repo: repo.into(), commit: commit.into(), sha256: sha256.into() });
    }
    Ok(out)
}

/// Where a manifest path lives in its source repository.
pub(crate) fn source_path(path: &str) -> Option<String> {
    let (dir, rest) = path.split_once('/')?;
    Some(match (dir, rest) {
        ("locomo", "locomo10.json") => "data/locomo10.json".into(),
        ("locomo", "LICENSE.txt") => "LICENSE.txt".into(),
        ("qmsum", "LICENSE") | ("tiage", "LICENSE") => "LICENSE".into(),
        ("qmsum", "SOURCE-README.md") | ("dialogsum", "SOURCE-README.md") => "README.md".into(),
        ("qmsum", split_file) => format!("data/ALL/{split_file}"),
        ("tiage", "train/anno_train.json") => "data/personachat/anno/anno_train.json".into(),
        ("tiage", split_file) => format!("data/personachat/anno/{split_file}"),
        ("dialseg", file) => format!("data/{file}"),
        ("dialogsum", file) => format!("DialogSum_Data/{file}"),
        _ => return None,
    })
}

fn url(e: &Entry) -> Option<String> {
    Some(format!("https://github.com/{}/raw/{}/{}", e.repo, e.commit, source_path(&e.path)?))
}

fn sha256_of(path: &Path) -> Result<String> {
    let f = std::fs::File::open(path).with_context(|| path.display().to_string())?;
    strata_text::sha256_hex(f).with_context(|| path.display().to_string())
}

pub(crate) fn data_dir(root: &Path) -> PathBuf {
    std::env::var_os("STRATA_DATA").map(PathBuf::from).unwrap_or_else(|| root.join("../shared/datasets"))
}

/// Verifies every file, downloading the missing or wrong ones unless `check_only`.
pub(crate) fn fetch(root: &Path, check_only: bool) -> Result<()> {
    let dir = data_dir(root);
    let entries = manifest(root)?;
    let mut problems = Vec::new();
    let mut fetched = 0usize;
    for e in &entries {
        let target = dir.join(&e.path);
        if target.exists() && sha256_of(&target)? == e.sha256 {
            continue;
        }
        if check_only {
            problems.push(if target.exists() {
                format!("{}: sha256 does not match MANIFEST.tsv", target.display())
            } else {
                format!("{}: missing", target.display())
            });
            continue;
        }
        let Some(url) = url(e) else {
            problems.push(format!("{}: no known source path in {}", e.path, e.repo));
            continue;
        };
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).with_context(|| parent.display().to_string())?;
        }
        let tmp = target.with_extension("download");
        let status = std::process::Command::new("curl")
            .args(["--fail", "--location", "--silent", "--show-error", "--output"])
            .arg(&tmp)
            .arg(&url)
            .status()
            .context("running curl")?;
        if !status.success() {
            let _ = std::fs::remove_file(&tmp);
            problems.push(format!("{}: download from {url} failed", e.path));
            continue;
        }
        let got = sha256_of(&tmp)?;
        if got != e.sha256 {
            let _ = std::fs::remove_file(&tmp);
            problems.push(format!("{}: {url} has sha256 {got}, MANIFEST.tsv says {}", e.path, e.sha256));
            continue;
        }
        std::fs::rename(&tmp, &target)?;
        fetched += 1;
    }
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("fetch-datasets: {p}");
        }
        bail!("{} of {} dataset files are missing or wrong under {}", problems.len(), entries.len(), dir.display());
    }
    println!("fetch-datasets: {} files verified under {} ({fetched} downloaded)", entries.len(), dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_manifest_entry_has_a_source() {
        let entries = manifest(&crate::root()).unwrap();
        assert_eq!(entries.len(), 246);
        for e in &entries {
            assert!(url(e).is_some(), "{}", e.path);
        }
        let locomo = entries.iter().find(|e| e.path == "locomo/locomo10.json").unwrap();
        assert_eq!(url(locomo).unwrap(), "https://github.com/snap-research/LoCoMo/raw/3eb6f2c585f5/data/locomo10.json");
        assert_eq!(source_path("qmsum/test/Bed003.json").unwrap(), "data/ALL/test/Bed003.json");
        assert_eq!(source_path("tiage/test/anno_test.json").unwrap(), "data/personachat/anno/test/anno_test.json");
    }

    #[test]
    fn the_shared_datasets_match_the_manifest() {
        fetch(&crate::root(), true).unwrap();
    }
}
