//! Stage 1, text → AST: the pest grammar (`grammar/rubric.pest`), an error-recovering parser,
//! and a pretty-printer whose output parses back to the same tree. pest's `Rule` never leaves
//! this module.

pub mod ast;
mod parser;
pub mod printer;

pub use parser::{comment_spans, parse_file, parse_type_sig, scan_comments, ParseOutput, BROKEN_HEADER, MAX_NESTING};

#[derive(pest_derive::Parser)]
#[grammar = "../grammar/rubric.pest"]
pub(crate) struct RubricParser;
