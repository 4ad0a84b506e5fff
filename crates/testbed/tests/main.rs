//! The integration tests of `testbed`, one module per file, linked into one test
//! binary (`cargo test -p <crate> --test integration -- <file>::`): the crate's code
//! and its dependencies are compiled and linked once for all of them, not once per file.

mod disk;
mod report_card;
