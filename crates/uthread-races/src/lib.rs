//! No code: this crate holds `tests/races.rs`, uthread's forced-interleaving tests, which need
//! uthread built with the test-only `race-hooks` feature (see this crate's Cargo.toml for why
//! they are not in uthread's own `tests/`).
