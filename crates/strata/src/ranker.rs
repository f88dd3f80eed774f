//! Background sentence rankings: the thread keeps a conversation's word statistics and, after
//! turns arrive, ranks its sentences by information (`strata_summarize::Salience`), so that
//! building a context only walks a finished ranking and never ranks.

use std::sync::Arc;

use strata_core::{TokenCounter, Turn};
use strata_summarize::{Ranking, Salience, SalienceConfig};

use crate::background::{Outbox, Work};

/// Turns come in batches (index, turn); every batch waiting is added to the statistics and the
/// sentences are ranked once for all of them, so a burst of pushes costs one ranking.
pub(crate) struct Rankings {
    counter: Arc<dyn TokenCounter>,
    config: SalienceConfig,
    salience: Salience,
}

impl Rankings {
    pub(crate) fn new(counter: Arc<dyn TokenCounter>, config: SalienceConfig) -> Rankings {
        Rankings { salience: Salience::for_config(&config), counter, config }
    }
}

impl Work for Rankings {
    type Job = Vec<(usize, Turn)>;
    type Done = Arc<Ranking>;

    fn what(&self) -> &'static str {
        "ranking the salient sentences"
    }

    fn run(&mut self, batches: Vec<Self::Job>, out: &Outbox<'_, Arc<Ranking>>) {
        for (i, t) in batches.iter().flatten() {
            self.salience.add_turn(*i, t);
        }
        if out.closing() {
            return;
        }
        let s = &self.salience;
        out.done(Arc::new(s.rank(0..s.turns(), self.counter.as_ref(), &self.config)));
    }
}
