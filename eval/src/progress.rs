//! Progress on stderr for long runs (the harness's conversations and reader, `strata probes`):
//! a bar on a terminal, a plain line every ten seconds in a log.

/// Progress on stderr: a bar with the rate and an ETA (a counting spinner when the number of
/// `unit`s is unknown) on a terminal; elsewhere (a pipe, a CI log) a plain line at most every
/// ten seconds and at the end, so that a long run piped to a file still says how far it is.
#[derive(Debug)]
pub enum Progress {
    Hidden,
    Bar(indicatif::ProgressBar),
    Lines(Lines),
}

#[derive(Debug)]
pub struct Lines {
    label: String,
    unit: String,
    total: Option<usize>,
    start: std::time::Instant,
    /// Units done, and when the last line was written.
    state: std::sync::Mutex<(usize, std::time::Instant)>,
}

impl Progress {
    pub fn new(enabled: bool, label: &str, total: Option<usize>, unit: &str) -> Progress {
        use std::io::IsTerminal as _;
        if !enabled {
            return Progress::Hidden;
        }
        if !std::io::stderr().is_terminal() {
            let now = std::time::Instant::now();
            return Progress::Lines(Lines {
                label: label.to_string(),
                unit: unit.to_string(),
                total,
                start: now,
                state: std::sync::Mutex::new((0, now)),
            });
        }
        let (bar, template) = match total {
            Some(n) => (
                indicatif::ProgressBar::new(n as u64),
                format!("{{msg}} [{{bar:30}}] {{pos}}/{{len}} {unit}, {{per_sec}}, {{elapsed}} elapsed, ETA {{eta}}"),
            ),
            None => (
                indicatif::ProgressBar::new_spinner(),
                format!("{{spinner}} {{msg}}: {{pos}} {unit}, {{elapsed}} elapsed"),
            ),
        };
        bar.set_style(
            indicatif::ProgressStyle::with_template(&template).expect("a valid template").progress_chars("=> "),
        );
        bar.set_message(label.to_string());
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        Progress::Bar(bar)
    }

    pub fn inc(&self) {
        match self {
            Progress::Hidden => {}
            Progress::Bar(bar) => bar.inc(1),
            Progress::Lines(lines) => lines.inc(),
        }
    }

    pub fn finish(&self) {
        match self {
            Progress::Hidden => {}
            Progress::Bar(bar) => bar.finish_and_clear(),
            // The last count, unless the line for the last unit already said it.
            Progress::Lines(lines) => {
                let done = lines.state.lock().unwrap_or_else(|p| p.into_inner()).0;
                if lines.total != Some(done) {
                    lines.say(done);
                }
            }
        }
    }
}

impl Lines {
    fn inc(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.0 += 1;
        let done = state.0;
        let last = self.total == Some(done);
        if !last && state.1.elapsed() < std::time::Duration::from_secs(10) {
            return;
        }
        state.1 = std::time::Instant::now();
        self.say(done);
    }

    fn say(&self, done: usize) {
        let elapsed = self.start.elapsed().as_secs_f64();
        let line = match self.total {
            Some(n) => {
                let left = elapsed / done.max(1) as f64 * n.saturating_sub(done) as f64;
                format!("{}: {done}/{n} {}, {elapsed:.0} s elapsed, about {left:.0} s left", self.label, self.unit)
            }
            None => format!("{}: {done} {}, {elapsed:.0} s elapsed", self.label, self.unit),
        };
        #[allow(clippy::print_stderr)]
        {
            eprintln!("{line}");
        }
    }
}
