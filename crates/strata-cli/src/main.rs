//! The `strata` command: compress a transcript into a context, count its tokens, evaluate
//! strategies, and run the tiered memory on a store file (replay, recall, context).
//!
//! Exit status: 0 on success, 2 for bad input (a file that does not load, an unknown strategy
//! or tokenizer, a bad config, model weights that are missing or not the pinned ones), 1 for
//! anything else. Output is built whole in memory and written at the end, so a failure never
//! leaves half an answer on stdout.

mod compress;
mod eval;
mod input;
mod memory;
mod models;
mod paraphrase;
mod probes;
mod segment;
mod serve;
mod summarize;
mod tokens;

use std::io::Write;

/// candle allocates a fresh buffer for every tensor; glibc's allocator handed those back to the
/// kernel and faulted them in again, a fifth of a reranking run's time (see docs/results.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Manages the memory of long LLM conversations.
#[derive(Parser, Debug)]
#[command(name = "strata", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the context a strategy would send to the model for a transcript.
    Compress(compress::Args),
    /// Print the token count of every turn and the totals.
    Tokens(tokens::Args),
    /// Score strategies' retention and token reduction on benchmark transcripts.
    Eval(Box<eval::Args>),
    /// Split a transcript into topic segments, with the cause of each boundary.
    Segment(segment::Args),
    /// Summarise a transcript extractively, each sentence with its source turn id.
    Summarize(summarize::Args),
    /// Feed a transcript turn by turn into a store on disk, showing tier occupancy as it goes.
    Replay(Box<memory::ReplayArgs>),
    /// Search a stored conversation for a query (BM25 and embeddings, fused).
    Recall(memory::RecallArgs),
    /// Print the context the tiered memory builds from a store within a budget.
    Context(memory::ContextArgs),
    /// Rewrite a store's vectors from before schema 6 (f32) as int8 and shrink the file.
    Compact(memory::CompactArgs),
    /// Replace a store's vectors with another embedding model's (the store remembers which).
    Reembed(memory::ReembedArgs),
    /// Rewrite a probe set's evidence turns with a local model, keeping planted values verbatim.
    Paraphrase(Box<paraphrase::Args>),
    /// Write probes for your own conversations with a model, checked, for `eval --dataset`.
    Probes(Box<probes::Args>),
    /// Serve OpenAI-compatible chat completions with the memory in front of a model.
    Serve(Box<serve::Args>),
}

/// An error caused by what the user gave us; exits with status 2.
pub(crate) use strata_core::BadInput;

/// Whether `e` was caused by what the user gave (a file that does not load, an unknown name, a
/// bad config, weights missing or not the pinned ones, a store refused as given, an address
/// the server cannot take): each library's own judgement of its errors.
fn is_bad_input(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        strata_core::blames_input(c)
            || c.is::<strata_transcript::LoadError>()
            || c.is::<strata::ConfigError>()
            || c.is::<strata_tokens::TokenizerError>()
            || c.downcast_ref::<strata_models::ModelError>().is_some_and(strata_models::ModelError::is_bad_input)
            || c.downcast_ref::<strata::MemoryError>().is_some_and(strata::MemoryError::is_bad_input)
            || c.downcast_ref::<strata_server::ServeError>().is_some_and(|s| {
                matches!(s, strata_server::ServeError::Exposed(_) | strata_server::ServeError::Bind { .. })
            })
    })
}

fn exit_code(e: &anyhow::Error) -> u8 {
    if is_bad_input(e) {
        2
    } else {
        1
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Compress(args) => compress::run(args),
        Command::Tokens(args) => tokens::run(args),
        Command::Eval(args) => eval::run(*args),
        Command::Segment(args) => segment::run(args),
        Command::Summarize(args) => summarize::run(args),
        Command::Replay(args) => memory::replay(*args),
        Command::Recall(args) => memory::recall(args),
        Command::Context(args) => memory::context(args),
        Command::Compact(args) => memory::compact(args),
        Command::Reembed(args) => memory::reembed(args),
        Command::Paraphrase(args) => paraphrase::run(*args),
        Command::Probes(args) => probes::run(*args),
        Command::Serve(args) => serve::run(*args),
    };
    match result {
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            // A closed pipe (`strata ... | head`) is not an error worth reporting.
            let _ = stdout.write_all(out.as_bytes()).and_then(|()| stdout.flush());
            ExitCode::SUCCESS
        }
        Err(e) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("error: {e:#}");
            }
            ExitCode::from(exit_code(&e))
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every flag of every command says what it does in `--help`, and the guide names it:
    /// the two cannot drift apart silently.
    #[test]
    fn every_flag_has_help_and_is_in_the_guide() {
        let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/guide.md")).unwrap();
        let mut problems = Vec::new();
        for command in super::Cli::command().get_subcommands() {
            let name = command.get_name();
            for arg in command.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                if ["help", "version"].contains(&long) {
                    continue;
                }
                if arg.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                    problems.push(format!("strata {name} --{long}: no description in --help"));
                }
                if !guide.contains(&format!("--{long}")) {
                    problems.push(format!("strata {name} --{long}: not in docs/guide.md"));
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    /// `eval` and `compress` take every strategy of the catalog, each with its help line, and
    /// nothing else.
    #[test]
    fn strategy_flags_take_the_catalog() {
        let cli = super::Cli::command();
        let arg = |command: &str, long: &str| {
            let c = cli.find_subcommand(command).unwrap();
            c.get_arguments().find(|a| a.get_long() == Some(long)).unwrap().clone()
        };
        for command in ["eval", "compress"] {
            let values = arg(command, "strategy").get_possible_values();
            let names: Vec<&str> = values.iter().map(|v| v.get_name()).collect();
            let catalog: Vec<&str> = strata::catalog::STRATEGIES.iter().map(|e| e.name).collect();
            assert_eq!(names, catalog, "{command} --strategy");
            assert!(values.iter().all(|v| v.get_help().is_some()), "{command} --strategy: a value without help");
        }
    }
}
