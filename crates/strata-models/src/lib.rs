//! Every model Strata uses, in one place below the eval harness, the server, the CLI and the
//! Python package: the pinned-model table ([`table`]: what each model is, how it opens, the
//! files `cargo xtask fetch-models` writes and their hashes), and the openers that read it by
//! name, file path or `URL#MODEL` (feature `open`). strata-candle builds models from files;
//! everything that knows a model's name, its pins, the models folder or a disk cache is here.
//!
//! Two ways to open an embedder: [`embedder`] computes every vector (what a memory or a server
//! wants: its store keeps the vectors it needs), and [`cached_embedder`] keeps them on disk by
//! text under the models folder's `.cache` (what a batch job that embeds the same benchmark
//! texts run after run wants). Generators: a local GGUF model has its answers cached the same
//! way (greedy decoding: a prompt has one answer); an endpoint is asked afresh every time.
//! [`local_generator`] gives a server its model with the token counter and window that match.

mod folder;
pub mod table;

#[cfg(feature = "open")]
mod cache;
#[cfg(feature = "open")]
mod error;
#[cfg(feature = "open")]
mod gencache;
#[cfg(feature = "open")]
mod open;

#[cfg(feature = "open")]
pub use cache::{CachedEmbedder, CachedReranker};
#[cfg(feature = "open")]
pub use error::ModelError;
pub use folder::{checkout_models, dir};
#[cfg(feature = "open")]
pub use gencache::{CachedGenerator, LazyGenerator};
#[cfg(feature = "open")]
pub use open::{
    cached_embedder, cached_generator, cached_reranker, embedder, fresh_generator, generator, local_generator, pinned,
    reranker, LocalGenerator,
};
pub use table::{aliases, Kind};

#[cfg(all(test, feature = "open"))]
mod tests;
