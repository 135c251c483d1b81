//! Stamps the plugins with the commit they were built from
//! (`kubectl reverser version`): `REVERSER_COMMIT` when the release build
//! sets it, else `git rev-parse HEAD`, else `unknown` (a source tarball).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=REVERSER_COMMIT");
    let commit = std::env::var("REVERSER_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(git_head)
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=REVERSER_COMMIT={}", commit.trim());
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The commit checked out, and the files whose change moves it (so the stamp
/// follows new commits without rebuilding on every build).
fn git_head() -> Option<String> {
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    let watch = |path: String| {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    };
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        watch(format!("{dir}/HEAD"));
    }
    if let (Some(common), Some(branch)) =
        (git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]), git(&["symbolic-ref", "-q", "HEAD"]))
    {
        watch(format!("{common}/{branch}"));
        watch(format!("{common}/packed-refs"));
    }
    Some(commit)
}
