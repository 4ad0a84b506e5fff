//! Benchmarks of mqlite live in this crate's bench targets; see docs/benchmark.md.
