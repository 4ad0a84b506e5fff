//! The integration tests of `mqlite`, one module per file, linked into one test
//! binary (`cargo test -p <crate> --test integration -- <file>::`): the crate's code
//! and its dependencies are compiled and linked once for all of them, not once per file.
//! Separate binaries: `faults` (it installs the process's global tracing subscriber);
//! `metrics` (it installs the process's global metrics recorder).

mod bad_input;
mod json;
mod lab;
mod layering;
mod migrate;
mod misuse;
mod registry;
mod worker;
