//! The `rubric` binary: parses the command line and hands over to `cli`.

use clap::Parser;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    rubric::cli::main_with(rubric::cli::Cli::parse())
}
