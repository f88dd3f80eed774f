//! Inputs shared by Strata's benchmarks: deterministic synthetic conversations.

use strata_core::{Role, Turn};

const WORDS: &[&str] = &[
    "the",
    "deploy",
    "failed",
    "because",
    "config",
    "service",
    "billing",
    "we",
    "should",
    "use",
    "Kafka",
    "instead",
    "of",
    "queue",
    "latency",
    "is",
    "about",
    "42",
    "ms",
    "on",
    "staging",
    "and",
    "production",
    "let's",
    "check",
    "logs",
    "in",
    "/var/log/app.log",
    "database",
    "migration",
    "ran",
    "twice",
    "yesterday",
    "team",
    "decided",
    "to",
    "roll",
    "back",
    "version",
    "v2.3.1",
    "cache",
    "hit",
    "rate",
    "dropped",
    "after",
    "the",
    "change",
    "could",
    "you",
    "summarize",
    "options",
];

/// The `i`th turn of a synthetic user/assistant conversation: 20 to 60 words drawn from a
/// fixed vocabulary by a seeded generator, so every run measures the same text.
pub fn synthetic_turn(i: usize) -> Turn {
    let mut state = (i as u64).wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut next = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    let len = 20 + next() % 41;
    let words: Vec<&str> = (0..len).map(|_| WORDS[next() % WORDS.len()]).collect();
    let role = if i.is_multiple_of(2) { Role::User } else { Role::Assistant };
    Turn::new(format!("t{i}"), role, words.join(" "))
}

/// `n` deterministic sentences of 16 to 20 words (about 18), for embedding throughput.
pub fn sentences(n: usize) -> Vec<String> {
    const VOCAB: &[&str] = &[
        "the",
        "team",
        "reviewed",
        "latency",
        "numbers",
        "after",
        "deploy",
        "and",
        "found",
        "that",
        "cache",
        "misses",
        "doubled",
        "during",
        "peak",
        "traffic",
        "so",
        "we",
        "will",
        "add",
        "another",
        "replica",
        "before",
        "launch",
        "customers",
        "asked",
        "about",
        "pricing",
        "for",
        "annual",
        "plans",
        "while",
        "support",
        "tickets",
        "dropped",
        "last",
        "week",
        "because",
        "onboarding",
        "emails",
        "now",
        "explain",
        "setup",
        "steps",
        "clearly",
        "meeting",
        "moved",
        "to",
        "Thursday",
        "morning",
        "budget",
        "review",
        "needs",
        "updated",
        "forecasts",
        "from",
        "finance",
        "database",
        "migration",
        "finished",
        "without",
        "errors",
    ];
    (0..n)
        .map(|i| {
            let mut state = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut next = || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as usize
            };
            let len = 16 + next() % 5;
            let mut words: Vec<&str> = (0..len).map(|_| VOCAB[next() % VOCAB.len()]).collect();
            words[0] = "The";
            words.join(" ") + "."
        })
        .collect()
}

/// Installs pinned Python packages for a bench's reference side (`python3 -m pip install`),
/// with `env` set for the build (llama-cpp-python reads `CMAKE_ARGS`). Panics with the package
/// list when pip fails: a bench cannot go on without its reference.
pub fn pip_install(packages: &[&str], env: &[(&str, &str)]) {
    let mut cmd = pip(packages);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let status = cmd.status().expect("python3 with pip");
    assert!(status.success(), "installing {} failed", packages.join(" "));
}

/// `python3 -m pip install` of `packages`, quiet.
fn pip(packages: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new("python3");
    cmd.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--root-user-action=ignore"]);
    cmd.args(packages);
    cmd
}

/// llama.cpp's reference for the benches: llama-cpp-python 0.3.36 built from source for this
/// machine (`-march=native`) but without AMX, into a folder of its own under `target/` (made
/// once; about 10 minutes), whose path goes on the reference script's `PYTHONPATH`. Without
/// AMX: 0.3.36's AMX matmul crashes (SIGSEGV) on quantized models for any prompt of more than
/// one token on a CPU that has it (session 18's), and llama.cpp keeps its AVX-512 VNNI kernels.
/// Not into the system Python, with pip's cache off: a build already installed or cached with
/// other flags would be taken instead, whatever `CMAKE_ARGS` say.
pub fn llama_cpp_python() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-python/llama-cpp-python-0.3.36");
    let importable = || {
        std::process::Command::new("python3")
            .args(["-c", "import llama_cpp"])
            .env("PYTHONPATH", &dir)
            .status()
            .is_ok_and(|s| s.success())
    };
    if !importable() {
        let _ = std::fs::remove_dir_all(&dir);
        let no_amx = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16";
        let cmake =
            format!("-DGGML_NATIVE=ON -DGGML_OPENMP=ON \"-DCMAKE_C_FLAGS={no_amx}\" \"-DCMAKE_CXX_FLAGS={no_amx}\"");
        let status = pip(&["llama-cpp-python==0.3.36"])
            .args(["--no-cache-dir", "--target"])
            .arg(&dir)
            .env("CMAKE_ARGS", cmake)
            .status()
            .expect("python3 with pip");
        assert!(status.success() && importable(), "installing llama-cpp-python==0.3.36 into {} failed", dir.display());
    }
    dir
}

/// The median of some timings.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The cosine of two unit vectors (their dot product).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum()
}

/// The median seconds of `runs` timed passes of `e` over `texts` (after a warm-up on the
/// first 64), and the last pass's vectors, each checked to have unit length so that the run
/// measured real work.
pub fn time_embedder(e: &dyn strata_core::Embedder, texts: &[&str], runs: usize) -> (f64, Vec<Vec<f32>>) {
    let mut out = e.embed(&texts[..64.min(texts.len())]).expect("warm-up");
    let mut secs = Vec::new();
    for _ in 0..runs {
        let start = std::time::Instant::now();
        out = e.embed(texts).expect("embedding");
        secs.push(start.elapsed().as_secs_f64());
    }
    assert!(out.iter().all(|v| (v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-3));
    (median(secs), out)
}

/// A deterministic, nearly free embedder: each word hashed into one of 64 buckets, the counts
/// normalised. Similar wording gives similar vectors, so the vector paths (topic similarity,
/// the store's vector index) do their real work without a model's cost hiding theirs.
#[derive(Debug, Clone, Copy, Default)]
pub struct HashedWords;

impl strata_core::Embedder for HashedWords {
    fn model_id(&self) -> &str {
        "hashed-words-64"
    }

    fn dim(&self) -> usize {
        64
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, strata_core::EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; 64];
                for w in t.split_whitespace() {
                    let h = w.bytes().fold(2_166_136_261u32, |h, b| (h ^ u32::from(b)).wrapping_mul(16_777_619));
                    v[(h % 64) as usize] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.iter().map(|x| x / n).collect()
            })
            .collect())
    }
}

/// The median seconds of `runs` timed calls of `f` (after one warm-up call), and the last
/// call's result.
pub fn median_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut out = f();
    let mut secs = Vec::new();
    for _ in 0..runs {
        let start = std::time::Instant::now();
        out = f();
        secs.push(start.elapsed().as_secs_f64());
    }
    (median(secs), out)
}

/// Spearman's rank correlation of two score lists (ties broken by position).
pub fn spearman(a: &[f32], b: &[f32]) -> f64 {
    let ranks = |v: &[f32]| {
        let mut order: Vec<usize> = (0..v.len()).collect();
        order.sort_by(|&x, &y| v[x].total_cmp(&v[y]));
        let mut r = vec![0f64; v.len()];
        for (k, &i) in order.iter().enumerate() {
            r[i] = k as f64;
        }
        r
    };
    let (ra, rb) = (ranks(a), ranks(b));
    let n = a.len() as f64;
    let d: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - y).powi(2)).sum();
    1.0 - 6.0 * d / (n * (n * n - 1.0))
}

/// The (question, `speaker: text`) pairs a reference file names by conversation, question
/// index and turn id (`{"pairs": [[sample_id, qa, dia_id], ...]}`), read from LoCoMo at
/// `locomo`: the texts stay in the dataset, never in the repository.
pub fn locomo_pairs(locomo: &std::path::Path, reference: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(locomo).unwrap_or_else(|e| panic!("{}: {e}", locomo.display()));
    let convs: Vec<serde_json::Value> = serde_json::from_str(&text).expect("LoCoMo JSON");
    let reference: serde_json::Value = serde_json::from_str(reference).expect("reference JSON");
    reference["pairs"]
        .as_array()
        .expect("pairs")
        .iter()
        .map(|r| {
            let conv = convs.iter().find(|c| c["sample_id"] == r[0]).expect("conversation");
            let qa = &conv["qa"][r[1].as_u64().expect("question index") as usize];
            let turn = conv["conversation"]
                .as_object()
                .expect("sessions")
                .iter()
                .filter(|(k, v)| k.starts_with("session_") && v.is_array())
                .flat_map(|(_, v)| v.as_array().into_iter().flatten())
                .find(|t| t["dia_id"] == r[2])
                .expect("turn");
            let field = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            (field(&qa["question"]), format!("{}: {}", field(&turn["speaker"]), field(&turn["text"])))
        })
        .collect()
}
