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
mod segment;
mod serve;
mod summarize;
mod tokens;

use std::io::Write;
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
    /// Serve OpenAI-compatible chat completions with the memory in front of a model.
    Serve(Box<serve::Args>),
}

/// An error caused by what the user gave us; exits with status 2.
pub(crate) use strata_eval::BadInput;

fn exit_code(e: &anyhow::Error) -> u8 {
    let bad_input = strata_eval::is_bad_input(e)
        || e.chain().any(|c| {
            c.downcast_ref::<strata_server::ServeError>().is_some_and(|s| {
                matches!(s, strata_server::ServeError::Exposed(_) | strata_server::ServeError::Bind { .. })
            })
        });
    if bad_input {
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
