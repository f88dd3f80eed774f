//! Where the CLI finds model weights (`--models-dir`), the names its model flags take, and the
//! chat model `--model` names; the models themselves are opened by `strata_models`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result};
use clap::builder::{PossibleValue, PossibleValuesParser};
use strata_core::Generator;
use strata_models::table::MODELS;
use strata_models::Kind;

/// The values a flag naming a model of `kind` takes: every such model in the pinned table,
/// with what it is as its help, and `none` where the flag can turn the model off.
pub(crate) fn names(kind: Kind, none: bool) -> PossibleValuesParser {
    let models = MODELS.iter().filter(|m| m.open.kind() == kind);
    let mut values: Vec<PossibleValue> = models.map(|m| PossibleValue::new(m.alias).help(m.about)).collect();
    if none {
        values.push(PossibleValue::new("none").help(format!("no {kind}")));
    }
    PossibleValuesParser::new(values)
}

/// `--models-dir`, else `$STRATA_MODELS`, else `./models`, else the checkout's:
/// [`strata_models::dir`].
pub(crate) fn dir(arg: Option<&Path>) -> PathBuf {
    strata_models::dir(arg)
}

/// The chat model `--model` names, if any, from `--models-dir` (see [`dir`]):
/// [`strata_models::generator`].
pub(crate) fn generator(name: Option<&str>, models_dir: Option<&Path>) -> Result<Option<Arc<dyn Generator>>> {
    Ok(name.map(|name| strata_models::generator(name, &dir(models_dir))).transpose()?)
}

/// The reranking stage `--reranker` names (`msmarco`), or none for `none`: the cross-encoder
/// from `--models-dir` (see [`dir`]), with `deadline` per context.
pub(crate) fn reranking(
    name: &str,
    models_dir: Option<&Path>,
    deadline: Option<std::time::Duration>,
) -> Result<Option<Arc<strata::Reranking>>> {
    if name == "none" {
        return Ok(None);
    }
    let model = strata_models::reranker(name, &dir(models_dir))
        .with_context(|| format!("--reranker {name}: pass --reranker none to recall without it"))?;
    Ok(Some(Arc::new(strata::Reranking::new(model, deadline))))
}
