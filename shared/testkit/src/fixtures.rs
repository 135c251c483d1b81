//! The fixtures the tests need, vendored in the repository so a fresh clone
//! tests everything: the captured corpus (from gitops-reverser, Apache-2.0;
//! see `fixtures/corpus/NOTICE`) and structural copies of the CRD schemas
//! (`scripts/vendor-crds`). A missing fixture fails the test that wants it,
//! with the path it looked for; nothing is skipped.

use std::path::PathBuf;

/// `shared/testkit/fixtures`.
pub fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures"))
}

fn existing(path: PathBuf, what: &str) -> PathBuf {
    assert!(
        path.exists(),
        "the {what} fixture {} is missing: it is vendored in the repository (regenerate CRDs with scripts/vendor-crds)",
        path.display()
    );
    path
}

/// The captured corpus: `<type>/<scenario>/` directories.
pub fn corpus() -> PathBuf {
    existing(root().join("corpus"), "corpus")
}

/// One corpus scenario, e.g. `configmap/finalizer-delete`.
pub fn corpus_scenario(name: &str) -> PathBuf {
    existing(root().join("corpus").join(name), "corpus scenario")
}

/// The tatara operator's CRDs (`tatara.dev`), descriptions removed.
pub fn tatara_crds() -> PathBuf {
    existing(root().join("crds/tatara"), "tatara CRD")
}

/// gitops-reverser's CRDs (`configbutler.ai`), descriptions removed.
pub fn gitops_reverser_crds() -> PathBuf {
    existing(root().join("crds/gitops-reverser"), "gitops-reverser CRD")
}

/// A kubeconfig for the connection-flag tests of `runtime::kubeconfig` and
/// the plugins: clusters dev and prod, contexts dev (namespace shop) and
/// prod, users me (a token) and robot (an exec plugin that does not exist).
pub const KUBECONFIG: &str = r#"apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev
  cluster:
    server: https://127.0.0.1:6443
- name: prod
  cluster:
    server: https://10.0.0.1:6443
contexts:
- name: dev
  context:
    cluster: dev
    user: me
    namespace: shop
- name: prod
  context:
    cluster: prod
    user: me
users:
- name: me
  user:
    token: abc
- name: robot
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /nonexistent/credential-helper
"#;

/// `text` in a temporary file, removed when dropped.
pub fn text_file(text: &str) -> tempfile::NamedTempFile {
    use std::io::Write as _;
    let mut f = tempfile::NamedTempFile::new().expect("a temporary file");
    f.write_all(text.as_bytes()).expect("write the temporary file");
    f
}
