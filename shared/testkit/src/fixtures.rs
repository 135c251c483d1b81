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
