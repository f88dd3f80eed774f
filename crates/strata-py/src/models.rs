//! `strata.Embedder` and `strata.Generator`: the models Strata runs on its own engine, for code
//! that needs an embedder or a chat model of its own (the peers in `strata.peers` wrap them in
//! LangChain's, LlamaIndex's and Mem0's interfaces, so that a peer uses the model Strata uses
//! for the same job). Both run with the interpreter released.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use strata_core::{ChatMessage, GenerateRequest, Role};

use crate::errors::{input_error, IntoPy as _};

/// A sentence embedder of the pinned table (`"minilm"`, ...; docs/models.md) from the models folder: unit vectors,
/// one per text, as the harness and the memory compute them.
#[pyclass(module = "strata", frozen)]
pub(crate) struct Embedder {
    inner: Arc<dyn strata_core::Embedder>,
}

#[pymethods]
impl Embedder {
    #[new]
    #[pyo3(signature = (name="minilm", *, models_dir=None))]
    fn py_new(py: Python<'_>, name: &str, models_dir: Option<PathBuf>) -> PyResult<Embedder> {
        let models = crate::models_dir(models_dir);
        let inner = py.detach(|| strata_models::embedder(name, &models)).into_py()?;
        Ok(Embedder { inner })
    }

    /// The model's name and revision.
    #[getter]
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    /// The length of every vector.
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    /// One vector per text, for texts to be found (turns, facts).
    fn embed(&self, py: Python<'_>, texts: Vec<String>) -> PyResult<Vec<Vec<f32>>> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        py.detach(|| self.inner.embed(&refs)).into_py()
    }

    /// One vector per text, for texts that search (questions); the same as `embed` for a
    /// model without task prefixes (MiniLM, bge).
    fn embed_query(&self, py: Python<'_>, texts: Vec<String>) -> PyResult<Vec<Vec<f32>>> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        py.detach(|| self.inner.embed_query(&refs)).into_py()
    }

    fn __repr__(&self) -> String {
        format!("Embedder({:?}, dim={})", self.inner.model_id(), self.inner.dim())
    }
}

/// A chat model on Strata's engine (`"qwen"`, `"qwen1.5b"`, `"smollm2"`, a GGUF path) or an
/// OpenAI-compatible endpoint (`URL#MODEL`): greedy, so the same prompt gets the same reply,
/// and a local model's replies are cached on disk under the models folder's `.cache`.
#[pyclass(module = "strata", frozen)]
pub(crate) struct Generator {
    inner: Arc<dyn strata_core::Generator>,
}

#[pymethods]
impl Generator {
    #[new]
    #[pyo3(signature = (name="qwen", *, models_dir=None))]
    fn py_new(py: Python<'_>, name: &str, models_dir: Option<PathBuf>) -> PyResult<Generator> {
        let models = crate::models_dir(models_dir);
        let inner = py.detach(|| strata_models::generator(name, &models)).into_py()?;
        Ok(Generator { inner })
    }

    /// The model's name (or `MODEL@URL` for an endpoint).
    #[getter]
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    /// The reply to `messages` (dicts with `role` and `content`, as OpenAI's), at most
    /// `max_tokens` tokens, as a dict: `text`, `prompt_tokens`, `generated_tokens` and
    /// `reused_tokens` (prompt tokens the engine's cache held from an earlier prompt).
    #[pyo3(signature = (messages, max_tokens=256))]
    fn chat<'py>(
        &self,
        py: Python<'py>,
        messages: &Bound<'py, PyList>,
        max_tokens: i64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let max_tokens = crate::errors::budget("max_tokens", max_tokens)?;
        let mut prompt = Vec::with_capacity(messages.len());
        for (i, m) in messages.iter().enumerate() {
            let m = m.cast::<PyDict>().map_err(|_| input_error(format!("messages[{i}]: expected a dict")))?;
            let field = |key: &str| -> PyResult<String> {
                m.get_item(key)?
                    .ok_or_else(|| input_error(format!("messages[{i}]: missing `{key}`")))?
                    .extract()
                    .map_err(|_| input_error(format!("messages[{i}].{key}: expected a string")))
            };
            let role = field("role")?;
            let role = Role::parse(&role).ok_or_else(|| {
                input_error(format!("messages[{i}].role: `{role}`: expected system, user, assistant or tool"))
            })?;
            prompt.push(ChatMessage { role, content: field("content")? });
        }
        let request = GenerateRequest { messages: prompt, max_tokens, deadline: None };
        let g = py.detach(|| self.inner.generate(&request)).into_py()?;
        let d = PyDict::new(py);
        d.set_item("text", g.text)?;
        d.set_item("prompt_tokens", g.prompt_tokens)?;
        d.set_item("generated_tokens", g.generated_tokens)?;
        d.set_item("reused_tokens", g.reused_tokens)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!("Generator({:?})", self.inner.model_id())
    }
}
