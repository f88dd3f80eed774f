//! `full`: the whole history, whatever the budget. The upper bound every other strategy is
//! measured against.

use strata_core::{Context, History, Strategy, StrategyError};

use crate::select::{finish, pin_system, push_verbatim};

#[derive(Debug, Clone, Copy, Default)]
pub struct Full;

impl Strategy for Full {
    fn name(&self) -> &str {
        "full"
    }

    fn bounded(&self) -> bool {
        false
    }

    fn build(&self, history: &History, budget: usize, _question: Option<&str>) -> Result<Context, StrategyError> {
        // Pinning with an unlimited budget keeps the system prompt's block kind; the budget is
        // recorded as asked so reports can show how far over it the upper bound goes.
        let mut ctx = Context::new(self.name(), usize::MAX, history.counter());
        pin_system(history, &mut ctx);
        ctx.budget = budget;
        let rest: Vec<usize> = (history.pinned()..history.len()).collect();
        push_verbatim(history, &mut ctx, &rest);
        let mut ctx = finish(ctx);
        if ctx.total_tokens() > budget {
            ctx.notes
                .push(format!("full sends everything: {} tokens, over the budget of {budget}", ctx.total_tokens()));
        }
        Ok(ctx)
    }
}
