//! Every model Strata uses, opened by name, file path or `URL#MODEL`, in one place below the
//! eval harness, the server, the CLI and the Python package, and the pinned-model table that
//! `cargo xtask fetch-models` writes from ([`table`]).
//!
//! Two ways to open an embedder: [`embedder`] computes every vector (what a memory or a server
//! wants: its store keeps the vectors it needs), and [`cached_embedder`] keeps them on disk by
//! text under the models folder's `.cache` (what a batch job that embeds the same benchmark
//! texts run after run wants). Generators: a local GGUF model has its answers cached the same
//! way (greedy decoding: a prompt has one answer); an endpoint is asked afresh every time.

pub mod table;

#[cfg(feature = "open")]
mod open;

#[cfg(feature = "open")]
pub use open::{
    cached_embedder, cached_generator, cached_reranker, checkout_models, dir, embedder, generator, reranker, OpenError,
};

#[cfg(all(test, feature = "open"))]
mod tests;
