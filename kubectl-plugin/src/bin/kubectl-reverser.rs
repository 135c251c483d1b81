//! `kubectl reverser`.
fn main() {}
