//! The rules crate cannot do I/O: nothing in its normal dependency tree is
//! a runtime, a network or storage client, or a server. `cargo tree` is the
//! source of truth, so a dependency added anywhere below fails here.

use std::process::Command;

/// Crates that do I/O (or exist only to serve it).
const FORBIDDEN: &[&str] = &[
    "tokio",
    "mio",
    "redis",
    "git2",
    "libgit2-sys",
    "kube",
    "kube-client",
    "tonic",
    "prost",
    "axum",
    "hyper",
    "hyper-util",
    "reqwest",
    "octocrab",
    "rustls",
    "tower",
    "prometheus-client",
    "tracing-subscriber",
];

#[test]
fn the_rules_crate_depends_on_nothing_that_does_io() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "-p", "rules", "-e", "normal", "--prefix", "none", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8(out.stdout).unwrap();
    let names: Vec<&str> = tree.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(names.contains(&"serde"), "cargo tree printed no dependencies:\n{tree}");
    let found: Vec<&str> = names.iter().copied().filter(|n| FORBIDDEN.contains(n)).collect();
    assert!(found.is_empty(), "the rules crate must not depend on {found:?}; move that code to `runtime`");
}
