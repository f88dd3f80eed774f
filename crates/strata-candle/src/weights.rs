//! Where weights come from, and checking them before use.

use std::path::{Path, PathBuf};

use crate::ModelError;

/// One file of a model, with its size and hash when it is pinned.
#[derive(Debug, Clone, Copy)]
pub struct PinnedFile {
    pub name: &'static str,
    pub size: u64,
    pub sha256: &'static str,
}

/// A model Strata knows: its folder name under the models directory, its Hub id, its files.
#[derive(Debug, Clone, Copy)]
pub struct ModelSpec {
    pub folder: &'static str,
    pub hub_id: &'static str,
    pub files: &'static [PinnedFile],
}

/// sentence-transformers/all-MiniLM-L6-v2, as `cargo xtask fetch-models` writes it.
pub const MINILM: ModelSpec = ModelSpec {
    folder: "all-MiniLM-L6-v2",
    hub_id: "sentence-transformers/all-MiniLM-L6-v2",
    files: &[
        PinnedFile {
            name: "config.json",
            size: 612,
            sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        },
        PinnedFile {
            name: "tokenizer.json",
            size: 466_247,
            sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        },
        PinnedFile {
            name: "model.safetensors",
            size: 90_868_376,
            sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        },
    ],
};

/// Checks that every file of `spec` is in `dir` with its pinned size and hash. The size is
/// checked first, so a truncated file is named as such without reading it whole.
pub fn verify(dir: &Path, spec: &ModelSpec) -> Result<(), ModelError> {
    for f in spec.files {
        let path = dir.join(f.name);
        let meta = std::fs::metadata(&path).map_err(|_| ModelError::Missing { path: path.clone() })?;
        if meta.len() != f.size {
            return Err(ModelError::WrongSize { path, size: meta.len(), expected: f.size });
        }
        let got = sha256_file(&path)?;
        if got != f.sha256 {
            return Err(ModelError::WrongHash { path, got, expected: f.sha256.to_string() });
        }
    }
    Ok(())
}

fn sha256_file(path: &Path) -> Result<String, ModelError> {
    let load = |e: std::io::Error| ModelError::Load { path: path.to_path_buf(), message: e.to_string() };
    let f = std::fs::File::open(path).map_err(load)?;
    strata_text::sha256_hex(f).map_err(load)
}

/// The folder holding `spec`'s files, looked up in order: `explicit` (a folder the caller
/// names), `$STRATA_MODELS/<folder>`, `./models/<folder>`, then the Hugging Face Hub by id
/// (which downloads, so it only helps users online). Local folders are verified against the
/// pinned hashes; a folder that exists but fails verification is an error, not a reason to
/// look further, so a corrupt download is never silently bypassed.
pub fn locate(explicit: Option<&Path>, spec: &ModelSpec) -> Result<PathBuf, ModelError> {
    if let Some(dir) = explicit {
        verify(dir, spec)?;
        return Ok(dir.to_path_buf());
    }
    let mut candidates = Vec::new();
    if let Some(root) = std::env::var_os("STRATA_MODELS") {
        candidates.push(PathBuf::from(root).join(spec.folder));
    }
    candidates.push(PathBuf::from("models").join(spec.folder));
    for dir in &candidates {
        if dir.exists() {
            verify(dir, spec)?;
            return Ok(dir.clone());
        }
    }
    match from_hub(spec) {
        Ok(dir) => Ok(dir),
        // Offline: the error a user can act on is the local one.
        Err(_) => Err(ModelError::Missing { path: candidates.last().expect("one candidate").join(spec.files[0].name) }),
    }
}

fn from_hub(spec: &ModelSpec) -> Result<PathBuf, ModelError> {
    let hub = |message: String| ModelError::Run { model: spec.hub_id.to_string(), message };
    let api = hf_hub::api::sync::Api::new().map_err(|e| hub(e.to_string()))?;
    let repo = api.model(spec.hub_id.to_string());
    let mut dir = None;
    for f in spec.files {
        let path = repo.get(f.name).map_err(|e| hub(e.to_string()))?;
        dir = path.parent().map(Path::to_path_buf);
    }
    let dir = dir.ok_or_else(|| hub("no files".to_string()))?;
    verify(&dir, spec)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: ModelSpec = ModelSpec {
        folder: "tiny",
        hub_id: "example/tiny",
        files: &[PinnedFile {
            name: "model.safetensors",
            size: 5,
            // sha256 of "hello"
            sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
        }],
    };

    #[test]
    fn missing_truncated_and_wrong_files_name_the_file_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("model.safetensors");
        let check = |want: &str| {
            let e = verify(dir.path(), &SPEC).unwrap_err().to_string();
            assert!(e.starts_with(&file.display().to_string()), "{e}");
            assert!(e.contains(want), "{e}");
            // The hint fetches this model: fetch-models takes the model's folder name.
            let folder = dir.path().file_name().unwrap().to_string_lossy().into_owned();
            let hint = format!("run `cargo xtask fetch-models {folder}` to fetch it");
            assert!(e.ends_with(&hint) || e.ends_with(&format!("{hint} again")), "{e}");
        };
        check("missing");
        std::fs::write(&file, b"hel").unwrap();
        check("3 bytes where 5 were expected, so the file is truncated");
        std::fs::write(&file, b"jello").unwrap();
        check("sha256 ");
        std::fs::write(&file, b"hello").unwrap();
        verify(dir.path(), &SPEC).unwrap();
        assert_eq!(locate(Some(dir.path()), &SPEC).unwrap(), dir.path());
    }

    #[test]
    fn a_corrupt_local_copy_is_an_error_not_a_reason_to_look_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let e = locate(Some(&dir.path().join("nope")), &SPEC).unwrap_err();
        assert!(matches!(e, ModelError::Missing { .. }), "{e}");
    }
}
