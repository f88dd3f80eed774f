//! Project rules as code: every Rust file says what it is for, and the crate graph keeps its
//! shape. `cargo test` runs these through the test at the bottom.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Crates that may use model weights and the candle stack; only `strata-candle`.
const MODEL_CRATE: &str = "strata-candle";
const MODEL_DEPS: &[&str] = &["candle-core", "candle-nn", "candle-transformers", "safetensors", "hf-hub", "gguf"];
/// Dependencies that belong to binaries, eval and xtask, never to libraries.
const BINARY_ONLY_DEPS: &[&str] = &["anyhow", "clap"];
/// Packages that are not libraries other code builds on, so may use binary-only dependencies.
/// `strata-py` is the Python extension module: an edge like the CLI, whose errors end as
/// Python exceptions.
const NOT_LIBRARIES: &[&str] = &["strata-cli", "strata-eval", "xtask", "strata-benches", "strata-py"];
/// The harness, and the only packages that may depend on it: its two front ends (`strata eval`,
/// `strata.eval`). A server or a library user links no benchmark code, and models are opened
/// by `strata-models`, not by the harness.
const HARNESS: &str = "strata-eval";
const HARNESS_USERS: &[&str] = &["strata-cli", "strata-py"];
/// Within those, the one file of each that may name the harness: the `eval` command and
/// `strata.eval`. Every other command's errors, flags and models are the libraries' own.
const HARNESS_DOORS: &[&str] = &["crates/strata-cli/src/eval.rs", "crates/strata-py/src/eval.rs"];
/// The one part of the harness any command may use: its progress bar, which knows nothing of
/// benchmarks (`strata probes` shows it too).
const HARNESS_PROGRESS: &str = "strata_eval::progress";
/// The only packages that may depend on the model crate: the one that opens every model by
/// name, and the benches, which time the engine's loaders with settings of their own.
const MODEL_CRATE_USERS: &[&str] = &["strata-models", "strata-benches"];

/// Every problem found, one line each; empty when the tree is tidy.
pub(crate) fn check(root: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for dir in ["crates", "eval", "xtask", "benches", "fuzz"] {
        for file in rust_files(&root.join(dir))? {
            let text = std::fs::read_to_string(&file).with_context(|| file.display().to_string())?;
            if !text.starts_with("//!") {
                problems.push(format!("{}: does not open with a `//!` line saying what it is for", rel(root, &file)));
            }
        }
    }
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap_or_default();
    let mut manifests: Vec<PathBuf> = Vec::new();
    for entry in std::fs::read_dir(root.join("crates"))? {
        let path = entry?.path();
        if path.join("Cargo.toml").exists() {
            manifests.push(path.join("Cargo.toml"));
        }
    }
    manifests.sort();
    for extra in ["eval", "xtask", "benches"] {
        manifests.push(root.join(extra).join("Cargo.toml"));
    }
    for manifest in &manifests {
        let text = std::fs::read_to_string(manifest)?;
        let doc: toml::Table = text.parse().with_context(|| manifest.display().to_string())?;
        let name = doc["package"]["name"].as_str().unwrap_or_default().to_string();
        let at = rel(root, manifest);
        if manifest.starts_with(root.join("crates")) {
            let folder = manifest.parent().and_then(|p| p.file_name()).and_then(|f| f.to_str()).unwrap_or_default();
            if folder != name {
                problems.push(format!("{at}: crate `{name}` lives in folder `{folder}`; folder name = crate name"));
            }
            if !architecture.contains(&name) {
                problems.push(format!("ARCHITECTURE.md: does not mention crate {name}"));
            }
        }
        if doc.get("lints").and_then(|l| l.get("workspace")).and_then(toml::Value::as_bool) != Some(true) {
            problems.push(format!("{at}: missing `[lints] workspace = true`"));
        }
        problems.extend(unused_dependencies(&at, manifest.parent().unwrap_or(root), &doc)?);
        problems.extend(import_circles(root, &manifest.parent().unwrap_or(root).join("src"))?);
        for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
            let Some(deps) = doc.get(section).and_then(toml::Value::as_table) else {
                continue;
            };
            for (dep, spec) in deps {
                let from_workspace = spec.get("workspace").and_then(toml::Value::as_bool) == Some(true);
                if !from_workspace {
                    problems.push(format!("{at}: [{section}] {dep} sets its own version; use `workspace = true`"));
                }
                if dep == MODEL_CRATE && !MODEL_CRATE_USERS.contains(&name.as_str()) {
                    problems.push(format!(
                        "{at}: [{section}] {name} depends on {MODEL_CRATE}; models are opened through strata-models"
                    ));
                }
                if section == "dependencies" {
                    if name == "strata-core" && dep.starts_with("strata-") {
                        problems.push(format!(
                            "{at}: strata-core depends on {dep}; the vocabulary crate depends on no other strata crate"
                        ));
                    }
                    if name != MODEL_CRATE && MODEL_DEPS.contains(&dep.as_str()) {
                        problems.push(format!(
                            "{at}: {name} depends on {dep}; only {MODEL_CRATE} knows candle and model weights"
                        ));
                    }
                    if dep == HARNESS && !HARNESS_USERS.contains(&name.as_str()) {
                        problems.push(format!(
                            "{at}: {name} depends on the harness ({HARNESS}); only {} may",
                            HARNESS_USERS.join(" and ")
                        ));
                    }
                    if !NOT_LIBRARIES.contains(&name.as_str()) && BINARY_ONLY_DEPS.contains(&dep.as_str()) {
                        problems.push(format!(
                            "{at}: library {name} depends on {dep}; libraries use typed errors and no CLI parsing"
                        ));
                    }
                }
            }
        }
    }
    problems.extend(harness_outside_its_doors(root)?);
    problems.extend(markdown_links(root)?);
    problems.extend(model_table(root));
    if root.join("crates/strata-py/Cargo.toml").exists() {
        let tests = resolved_features(root, &["--workspace", "-e", "normal,build,dev"])?;
        for (package, manifest) in SEPARATE_BUILDS {
            let own = resolved_features(root, &["-p", package, "-e", "normal,build"])?;
            problems.extend(build_features(manifest, &own, &tests));
        }
    }
    Ok(problems)
}

/// Markdown links that leave the repository or name a file it does not have: the docs must
/// stand alone on a fresh clone. Web addresses and in-page anchors are not checked.
fn markdown_links(root: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let root = root.canonicalize()?;
    for file in markdown_files(&root)? {
        let text = std::fs::read_to_string(&file).with_context(|| file.display().to_string())?;
        let mut in_code = false;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
            }
            if in_code {
                continue;
            }
            let mut rest = line;
            while let Some(at) = rest.find("](") {
                rest = &rest[at + 2..];
                let Some(end) = rest.find(')') else { break };
                let target = rest[..end].split('#').next().unwrap_or_default().trim();
                rest = &rest[end..];
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let place = format!("{}:{}", rel(&root, &file), n + 1);
                let mut resolved = PathBuf::new();
                for part in file.parent().unwrap_or(&root).join(target).components() {
                    match part {
                        std::path::Component::ParentDir => {
                            resolved.pop();
                        }
                        std::path::Component::CurDir => {}
                        other => resolved.push(other),
                    }
                }
                if !resolved.starts_with(&root) {
                    problems.push(format!("{place}: link `{target}` leaves the repository"));
                } else if !resolved.exists() {
                    problems.push(format!("{place}: link `{target}` names no file in the repository"));
                }
            }
        }
    }
    Ok(problems)
}

/// Every Markdown file of the repository, outside build output and fetched data.
fn markdown_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with('.') || ["target", "models", "node_modules", "out"].contains(&name) {
            continue;
        }
        if path.is_dir() {
            out.extend(markdown_files(&path)?);
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Code (not comments) naming `strata_eval` in the harness's users, outside [`HARNESS_DOORS`].
fn harness_outside_its_doors(root: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for user in HARNESS_USERS {
        for file in rust_files(&root.join("crates").join(user).join("src"))? {
            let at = rel(root, &file);
            if HARNESS_DOORS.contains(&at.as_str()) {
                continue;
            }
            let text = std::fs::read_to_string(&file).with_context(|| at.clone())?;
            for (i, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                if code.replace(HARNESS_PROGRESS, "").contains("strata_eval") {
                    problems.push(format!(
                        "{at}:{}: names the harness (strata_eval); only {} may",
                        i + 1,
                        HARNESS_DOORS.join(" and ")
                    ));
                }
            }
        }
    }
    Ok(problems)
}

/// docs/models.md names every pinned model, package and hash that `fetch-models` uses.
fn model_table(root: &Path) -> Vec<String> {
    let Ok(doc) = std::fs::read_to_string(root.join("docs/models.md")) else {
        return vec!["docs/models.md: missing (the pinned-model table users read)".to_string()];
    };
    let mut problems = Vec::new();
    for m in strata_models::table::MODELS {
        for needle in [m.alias, m.name] {
            if !doc.contains(&format!("`{needle}`")) {
                problems.push(format!("docs/models.md: does not name model `{needle}`"));
            }
        }
        for f in m.files {
            if !doc.contains(f.sha256) || !doc.contains(f.out) {
                problems.push(format!("docs/models.md: lacks {} with its sha256 {}", f.out, f.sha256));
            }
            if let Some(p) = f.parts.first() {
                if !doc.contains(p.package) {
                    problems.push(format!("docs/models.md: does not name package {}", p.package));
                }
            }
        }
    }
    problems
}

/// The packages users build on their own, each with its manifest: the README's install step
/// (`cargo build --release -p strata-cli`), the automation it runs next (`cargo xtask`, in
/// release) and the wheel (maturin resolves features for `strata-py` alone). Each must resolve
/// every dependency it shares with the workspace's test build with the same features, or that
/// dependency and everything above it is compiled again (minutes each) when a user switches
/// from one command to the next.
const SEPARATE_BUILDS: &[(&str, &str)] = &[
    ("strata-cli", "crates/strata-cli/Cargo.toml"),
    ("xtask", "xtask/Cargo.toml"),
    ("strata-py", "crates/strata-py/Cargo.toml"),
];

/// Features that the workspace's test build and one package's own build turn on differently in
/// a dependency they share; `manifest` is where the package names the tests' features to
/// prevent it, and this keeps that list true as dependencies change.
fn build_features(manifest: &str, own: &Features, tests: &Features) -> Vec<String> {
    let mut problems = Vec::new();
    for (package, features) in own {
        let Some(in_tests) = tests.get(package) else { continue };
        if features != in_tests {
            let missing: Vec<&str> = in_tests.difference(features).map(String::as_str).collect();
            let extra: Vec<&str> = features.difference(in_tests).map(String::as_str).collect();
            problems.push(format!(
                "{manifest}: {package} is built with features [{}] for the tests but [{}] on its own (the tests' \
                 only: [{}], its own only: [{}]); name the tests' features there so that its build reuses the \
                 test build",
                in_tests.iter().map(String::as_str).collect::<Vec<_>>().join(", "),
                features.iter().map(String::as_str).collect::<Vec<_>>().join(", "),
                missing.join(", "),
                extra.join(", "),
            ));
        }
    }
    problems
}

/// Packages of a `cargo tree` selection (name, version and where) with their features.
type Features = BTreeMap<String, BTreeSet<String>>;

/// Every package of a `cargo tree` selection with the features it is built with.
fn resolved_features(root: &Path, selection: &[&str]) -> Result<Features> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = crate::outside_cargo_run(&mut std::process::Command::new(&cargo))
        .current_dir(root)
        .arg("tree")
        .args(selection)
        .args(["--format", "{p}|{f}", "--prefix", "none"])
        .output()
        .with_context(|| format!("running {cargo} tree"))?;
    if !output.status.success() {
        anyhow::bail!("{cargo} tree {}: {}", selection.join(" "), String::from_utf8_lossy(&output.stderr).trim());
    }
    let mut packages = Features::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        // A package seen before ends in " (*)"; its features are the same.
        let Some((package, features)) = line.trim_end_matches(" (*)").split_once('|') else { continue };
        let features = features.split(',').filter(|f| !f.is_empty()).map(str::to_string).collect();
        packages.insert(package.to_string(), features);
    }
    Ok(packages)
}

/// Dependencies that no Rust file of the package names as a path (`dep::`): a dependency
/// nobody uses costs a build and hides what a crate really needs. One kept only for the
/// features it turns on is listed, with the reason beside it, in the manifest's
/// `[package.metadata.tidy] features-only`.
fn unused_dependencies(at: &str, dir: &Path, doc: &toml::Table) -> Result<Vec<String>> {
    // The package's own files, and targets its manifest places elsewhere (an example under
    // the repository's `examples/`).
    let mut files = rust_files(dir)?;
    for kind in ["bin", "example", "test", "bench"] {
        let targets = doc.get(kind).and_then(toml::Value::as_array).into_iter().flatten();
        files.extend(targets.filter_map(|t| t.get("path")?.as_str()).map(|p| dir.join(p)));
    }
    let mut code = String::new();
    for file in files {
        code.push_str(&std::fs::read_to_string(&file).with_context(|| file.display().to_string())?);
    }
    let features_only: Vec<&str> = doc
        .get("package")
        .and_then(|p| p.get("metadata"))
        .and_then(|m| m.get("tidy"))
        .and_then(|t| t.get("features-only"))
        .and_then(toml::Value::as_array)
        .map(|list| list.iter().filter_map(toml::Value::as_str).collect())
        .unwrap_or_default();
    let mut problems = Vec::new();
    for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
        let Some(deps) = doc.get(section).and_then(toml::Value::as_table) else { continue };
        for dep in deps.keys() {
            let used = names_crate(&code, &dep.replace('-', "_"));
            let listed = features_only.contains(&dep.as_str());
            if !used && !listed {
                problems.push(format!(
                    "{at}: [{section}] {dep} is not used by the code; remove it, or list it in \
                     `[package.metadata.tidy] features-only` with why"
                ));
            }
            if used && listed {
                problems.push(format!("{at}: {dep} is listed as features-only but the code uses it"));
            }
        }
    }
    Ok(problems)
}

/// Whether `code` names the crate `ident` as a path's first segment (`ident::`, `::ident::`),
/// not as the tail of another name (`my_ident::`) or a path's later segment (`a::ident::`).
fn names_crate(code: &str, ident: &str) -> bool {
    let pattern = format!("{ident}::");
    code.match_indices(&pattern).any(|(at, _)| {
        let before = &code[..at];
        let segment_end = |c: char| c.is_alphanumeric() || c == '_' || c == '>';
        match before.strip_suffix("::") {
            Some(path) => !path.ends_with(segment_end),
            None => !before.ends_with(|c: char| c.is_alphanumeric() || c == '_'),
        }
    })
}

/// Files of one crate that import each other, directly or through others (`a.rs` names
/// `crate::b`, `b.rs` names `crate::a`): such files can only be read, changed and tested
/// together, and the type they share belongs in a module below both. Only `crate::` paths
/// outside comments and a trailing `#[cfg(test)] mod tests` count; the crate root, which
/// declares every module, is not a node.
fn import_circles(root: &Path, src: &Path) -> Result<Vec<String>> {
    let files = rust_files(src)?;
    let module = |file: &Path| -> String {
        let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
        let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        match parts.as_slice() {
            [only] if only == "lib" || only == "main" => String::new(),
            [init @ .., last] if last == "mod" => init.join("::"),
            all => all.join("::"),
        }
    };
    let modules: Vec<String> = files.iter().map(|f| module(f)).collect();
    let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); files.len()];
    for (from, file) in files.iter().enumerate() {
        let text = std::fs::read_to_string(file).with_context(|| file.display().to_string())?;
        let code = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                if line[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let path = &line[at + "crate::".len()..];
                let path =
                    &path[..path.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(path.len())];
                let segments: Vec<&str> = path.split("::").collect();
                let target = (1..=segments.len())
                    .rev()
                    .find_map(|k| modules.iter().position(|m| !m.is_empty() && *m == segments[..k].join("::")));
                // `use crate::{a, b::X}` names several modules in one path.
                let mut targets: Vec<usize> = target.into_iter().collect();
                if let Some(list) = line[at..].strip_prefix("crate::{") {
                    let list = &list[..list.find('}').unwrap_or(list.len())];
                    for item in list.split(',') {
                        let first = item.trim().split("::").next().unwrap_or_default();
                        targets.extend(modules.iter().position(|m| !m.is_empty() && m == first));
                    }
                }
                for to in targets {
                    if to != from && !modules[from].is_empty() {
                        edges[from].insert(to);
                    }
                }
            }
        }
    }
    let reach = |start: usize| -> BTreeSet<usize> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(n) = stack.pop() {
            for &m in &edges[n] {
                if seen.insert(m) {
                    stack.push(m);
                }
            }
        }
        seen
    };
    let reached: Vec<BTreeSet<usize>> = (0..files.len()).map(reach).collect();
    let mut reported: BTreeSet<usize> = BTreeSet::new();
    let mut problems = Vec::new();
    for a in 0..files.len() {
        if reported.contains(&a) || !reached[a].contains(&a) {
            continue;
        }
        let circle: Vec<usize> =
            (0..files.len()).filter(|&b| reached[a].contains(&b) && reached[b].contains(&a)).collect();
        reported.extend(&circle);
        let names: Vec<String> = circle.iter().map(|&k| rel(root, &files[k])).collect();
        problems.push(format!(
            "{}: import each other (a circle); move what they share to a module below them",
            names.join(", ")
        ));
    }
    Ok(problems)
}

fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    if !dir.exists() {
        return Ok(out);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_is_tidy() {
        let problems = check(&crate::root()).unwrap();
        assert!(problems.is_empty(), "run `cargo xtask tidy`:\n{}", problems.join("\n"));
    }

    #[test]
    fn a_link_out_of_the_repository_is_caught() {
        let dir = std::env::temp_dir().join(format!("strata-links-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("docs")).unwrap();
        std::fs::write(dir.join("docs/a.md"), "[b](b.md) [up](../../x.md) [gone](c.md) [w](https://x.org)\n").unwrap();
        std::fs::write(dir.join("docs/b.md"), "```\n[not a link](../../y.md)\n```\n").unwrap();
        let problems = markdown_links(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("docs/a.md:1: link `../../x.md`"), "{problems:?}");
        assert!(problems[1].contains("`c.md` names no file"), "{problems:?}");
    }

    #[test]
    fn tidy_catches_a_missing_doc_line_and_a_forbidden_dependency() {
        let dir = std::env::temp_dir().join(format!("strata-tidy-{}", std::process::id()));
        let krate = dir.join("crates/strata-foo");
        std::fs::create_dir_all(krate.join("src")).unwrap();
        std::fs::write(krate.join("src/lib.rs"), "fn x() {}\n").unwrap();
        std::fs::write(
            krate.join("Cargo.toml"),
            "[package]\nname = \"strata-foo\"\n[dependencies]\nanyhow = \"1\"\ncandle-core = { workspace = true }\nstrata-eval = { workspace = true }\n[dev-dependencies]\nstrata-candle = { workspace = true }\n",
        )
        .unwrap();
        for extra in ["eval", "xtask", "benches"] {
            std::fs::create_dir_all(dir.join(extra)).unwrap();
            std::fs::write(
                dir.join(extra).join("Cargo.toml"),
                format!("[package]\nname = \"{extra}\"\n[lints]\nworkspace = true\n"),
            )
            .unwrap();
        }
        let problems = check(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let text = problems.join("\n");
        assert!(text.contains("crates/strata-foo/src/lib.rs: does not open with a `//!` line"), "{text}");
        assert!(text.contains("anyhow sets its own version"), "{text}");
        assert!(text.contains("only strata-candle knows candle"), "{text}");
        assert!(text.contains("library strata-foo depends on anyhow"), "{text}");
        assert!(text.contains("strata-foo depends on the harness (strata-eval)"), "{text}");
        assert!(text.contains("[dev-dependencies] strata-foo depends on strata-candle; models are opened"), "{text}");
        assert!(text.contains("ARCHITECTURE.md: does not mention crate strata-foo"), "{text}");
        assert!(text.contains("missing `[lints] workspace = true`"), "{text}");
    }

    #[test]
    fn a_dependency_the_code_never_names_is_caught_unless_kept_for_features() {
        assert!(names_crate("use serde::Serialize;", "serde"));
        assert!(names_crate("x: ::serde::de::Error", "serde"));
        assert!(!names_crate("use serde_json::Value;", "serde"));
        assert!(!names_crate("use my_serde::X;", "serde"));
        assert!(!names_crate("use crate::serde::X; a::serde::b; Vec<u8>::serde::x", "serde"));
        let dir = std::env::temp_dir().join(format!("strata-unused-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/lib.rs"), "//! x\nuse serde_json::Value;\n").unwrap();
        std::fs::write(dir.join("ex.rs"), "//! y\nfn main() { thiserror::x(); }\n").unwrap();
        let doc: toml::Table = "[package]\nname = \"a\"\nmetadata.tidy.features-only = [\"gemm\", \"serde_json\"]\n\
            [dependencies]\nserde_json = {}\nserde = {}\ngemm = {}\n[dev-dependencies]\nthiserror = {}\n\
            [[example]]\nname = \"ex\"\npath = \"ex.rs\"\n"
            .parse()
            .unwrap();
        let problems = unused_dependencies("a/Cargo.toml", &dir, &doc).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("[dependencies] serde is not used by the code"), "{problems:?}");
        assert!(problems[1].contains("serde_json is listed as features-only but the code uses it"), "{problems:?}");
    }

    #[test]
    fn the_harness_named_outside_the_eval_commands_is_caught() {
        let dir = std::env::temp_dir().join(format!("strata-tidy-doors-{}", std::process::id()));
        let src = dir.join("crates/strata-cli/src");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("eval.rs"), "//! e\nuse strata_eval::EvalConfig;\n").unwrap();
        std::fs::write(src.join("main.rs"), "//! m\n// strata_eval::run, in a comment\nfn f() {}\n").unwrap();
        std::fs::write(src.join("serve.rs"), "//! s\nfn f() { strata_eval::is_bad_input(e); }\n").unwrap();
        std::fs::write(src.join("probes.rs"), "//! p\nfn f() { strata_eval::progress::Progress::new(); }\n").unwrap();
        let problems = harness_outside_its_doors(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("crates/strata-cli/src/serve.rs:2: names the harness"), "{problems:?}");
    }

    #[test]
    fn files_that_import_each_other_are_caught() {
        let dir = std::env::temp_dir().join(format!("strata-circles-{}", std::process::id()));
        let src = dir.join("src");
        std::fs::create_dir_all(src.join("d")).unwrap();
        let files = [
            ("lib.rs", "//! x\nmod a; mod b; mod c; mod d;\nuse crate::a::A;\n"),
            ("a.rs", "//! a\nuse crate::b::B;\n// crate::c::C in a comment\n"),
            ("b.rs", "//! b\nuse crate::{d::D, e};\nfn f() { crate::a::g() }\n"),
            ("c.rs", "//! c\nuse crate::a::A;\n#[cfg(test)]\nmod tests {\n    use crate::c::x;\n}\n"),
            ("d/mod.rs", "//! d\nuse crate::c;\nuse my_crate::b;\n"),
        ];
        for (name, text) in files {
            std::fs::write(src.join(name), text).unwrap();
        }
        let found = import_circles(&dir, &src).unwrap();
        // a -> b -> a, and b -> d -> c -> a -> b: one circle of four files.
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("src/a.rs, src/b.rs, src/c.rs, src/d/mod.rs: import each other"), "{found:?}");
        std::fs::write(src.join("d/mod.rs"), "//! d\n").unwrap();
        let found = import_circles(&dir, &src).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("src/a.rs, src/b.rs: import each other"), "{found:?}");
    }

    #[test]
    fn tidy_catches_a_feature_the_tests_turn_on_and_a_separate_build_does_not() {
        let tree = |rows: &[(&str, &[&str])]| -> Features {
            rows.iter().map(|(p, f)| (p.to_string(), f.iter().map(|x| x.to_string()).collect())).collect()
        };
        let tests =
            tree(&[("getrandom v0.3.3", &["std", "sys_rng"]), ("pyo3-only v1.0.0", &[]), ("serde v1.0.0", &["std"])]);
        let same = tree(&[("getrandom v0.3.3", &["std", "sys_rng"]), ("serde v1.0.0", &["std"])]);
        assert!(build_features("w/Cargo.toml", &same, &tests).is_empty());
        let short = tree(&[("getrandom v0.3.3", &["sys_rng"]), ("serde v1.0.0", &["std"]), ("numpy v0.1.0", &["a"])]);
        let problems = build_features("w/Cargo.toml", &short, &tests);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with(
            "w/Cargo.toml: getrandom v0.3.3 is built with features [std, sys_rng] for the tests but [sys_rng]"
        ));
        assert!(problems[0].contains("the tests' only: [std], its own only: []"), "{}", problems[0]);
    }
}
