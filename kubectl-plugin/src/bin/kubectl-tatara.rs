//! `kubectl tatara`.
fn main() {}
