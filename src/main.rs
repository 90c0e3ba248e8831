//! The `rubric` binary: parses the command line and hands over to `cli`.

use clap::Parser;

// mimalloc, counted per row so that the sandbox's memory limit covers every allocation
// (`rubric::meter`).
#[global_allocator]
static GLOBAL: rubric::meter::Counting<mimalloc::MiMalloc> = rubric::meter::Counting(mimalloc::MiMalloc);

fn main() -> std::process::ExitCode {
    rubric::cli::main_with(rubric::cli::Cli::parse())
}
