//! The integration tests of `broker`, one module per file, linked into one test
//! binary (`cargo test -p <crate> --test integration -- <file>::`): the crate's code
//! and its dependencies are compiled and linked once for all of them, not once per file.
//! Separate binaries: `load` (it measures rates and lowers the descriptor limit, which
//! other tests must not share); `soak` (it fails on a stall of more than a second,
//! which other tests running beside it would cause).

mod common;
mod dropin;
mod errors;
mod filters;
mod hostile;
mod rpcs;
mod sqs;
mod wire_doc;
