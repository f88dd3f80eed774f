//! The text signals the triggers and guards read: finished tasks, new tasks, references back,
//! and debugging output. Plain phrase rules: cheap, deterministic and easy to explain.

/// Phrases that close a task: the user confirms something works or is done.
const COMPLETION: &[&str] = &[
    "that worked",
    "that works",
    "it works now",
    "works now",
    "that fixed it",
    "that did it",
    "problem solved",
    "all set",
    "all done",
    "that's done",
    "it's done",
    "task complete",
    "resolved",
    "closing this",
    "ship it",
    "merged",
    "perfect, thanks",
    "great, thanks",
    "thanks, that",
];

/// Phrases that start a task.
const START: &[&str] = &[
    "can you",
    "could you",
    "please ",
    "help me",
    "i need to",
    "i need you to",
    "how do i",
    "how can i",
    "write a",
    "implement",
    "fix ",
];

/// Phrases that point back at earlier turns.
const BACK: &[&str] = &[
    "as i mentioned",
    "as i said",
    "like i said",
    "as we discussed",
    "as discussed",
    "you said earlier",
    "you mentioned",
    "earlier you",
    "we talked about",
    "going back to",
    "back to what",
    "remember when",
    "remember the",
    "the one from before",
    "from earlier",
];

/// Lines that mark error output and stack traces.
const DEBUG: &[&str] = &[
    "traceback (most recent call last)",
    "panicked at",
    "stack trace",
    "stacktrace",
    "exception in thread",
    "segmentation fault",
    "core dumped",
    "error[e",
    "uncaught ",
    "fatal error",
];

fn has_any(text: &str, phrases: &[&str]) -> bool {
    let lower = text.to_lowercase();
    phrases.iter().any(|p| lower.contains(p))
}

pub fn is_task_completion(text: &str) -> bool {
    has_any(text, COMPLETION)
}

pub fn is_task_start(text: &str) -> bool {
    has_any(text, START)
}

pub fn is_back_reference(text: &str) -> bool {
    has_any(text, BACK)
}

/// Error output: the phrases above, or Java/JS frames ("    at f (file:1)") and Python frames.
pub fn is_debugging(text: &str) -> bool {
    has_any(text, DEBUG)
        || text.lines().any(|l| {
            let t = l.trim_start();
            (t.starts_with("at ") && t.contains('(') && t.contains(':'))
                || t.starts_with("File \"") && t.contains(", line ")
        })
}
