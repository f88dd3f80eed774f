//! Whether a strategy may see the question: the axis every record, report and plot of the
//! harness is split by.

use serde::{Deserialize, Serialize};

/// Whether the strategy may see the question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The context is built without the question: what summaries must carry on their own.
    Agnostic,
    /// The strategy may use the question (to recall from a store, say).
    Aware,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Agnostic => "agnostic",
            Mode::Aware => "aware",
        }
    }
}
