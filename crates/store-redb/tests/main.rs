//! The integration tests of `store-redb`, one module per file, linked into one test
//! binary (`cargo test -p <crate> --test integration -- <file>::`): the crate's code
//! and its dependencies are compiled and linked once for all of them, not once per file.

mod claim_work;
mod power_cut;
mod store;
