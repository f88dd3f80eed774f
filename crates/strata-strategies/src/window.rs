//! `window`: the system prompt pinned, then the newest turns that fit the budget.

use serde::{Deserialize, Serialize};
use strata_core::{Context, History, Strategy, StrategyError};

use crate::select::{finish, newest_fitting, pin_system, push_verbatim};

/// `window` has nothing to tune beyond the budget; the table exists so that configs can name
/// it and so that later options have a home.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WindowConfig {}

#[derive(Debug, Clone, Default)]
pub struct Window {
    _config: WindowConfig,
}

impl Window {
    pub fn new(config: WindowConfig) -> Window {
        Window { _config: config }
    }

    /// The window context under another strategy's name: the fallback of strategies that
    /// could not summarise.
    pub(crate) fn build_as(name: &str, history: &History, budget: usize) -> Context {
        let mut ctx = Context::new(name, budget, history.counter());
        let left = pin_system(history, &mut ctx);
        let (picked, _) = newest_fitting(history, left);
        push_verbatim(history, &mut ctx, &picked);
        finish(ctx)
    }
}

impl Strategy for Window {
    fn name(&self) -> &str {
        "window"
    }

    fn build(&self, history: &History, budget: usize, _question: Option<&str>) -> Result<Context, StrategyError> {
        Ok(Window::build_as(self.name(), history, budget))
    }
}
