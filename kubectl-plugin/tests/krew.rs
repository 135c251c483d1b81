//! `krew/reverser.yaml` and `krew/tatara.yaml` are krew plugin manifests krew would accept: the
//! schema's required fields (krew's `pkg/index` types, unknown fields
//! refused so a typo cannot hide), this crate's version, and one archive per
//! platform for linux and darwin on amd64 and arm64, each installing the
//! binary, kubectl's completion helper (`kubectl_complete-NAME`, which the
//! caveats say how to put on the PATH: krew links only `bin`), LICENSE and
//! NOTICE. They are the templates `scripts/release`
//! fills; tests/release/test_release.py checks what it writes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Plugin {
    api_version: String,
    kind: String,
    metadata: Metadata,
    spec: Spec,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Metadata {
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Spec {
    version: String,
    short_description: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    homepage: String,
    #[serde(default)]
    caveats: String,
    platforms: Vec<Platform>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Platform {
    selector: Selector,
    uri: String,
    sha256: String,
    bin: String,
    #[serde(default)]
    files: Vec<FileOperation>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Selector {
    match_labels: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileOperation {
    from: String,
    to: String,
}

/// Both plugins' manifests: (plugin name, a flag its caveats must mention).
const PLUGINS: &[(&str, &str)] = &[("reverser", "--plain-container"), ("tatara", "GITHUB_TOKEN")];

fn manifest(name: &str) -> Plugin {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../krew/{name}.yaml"));
    let text = std::fs::read_to_string(&path).unwrap();
    serde_norway::from_str(&text).unwrap()
}

#[test]
fn krew_manifests_have_the_schema_required_fields() {
    for (name, caveat) in PLUGINS {
        has_the_schema_required_fields(name, caveat);
    }
}

#[test]
fn krew_manifests_cover_linux_and_darwin_on_amd64_and_arm64() {
    let mut all_digests = BTreeSet::new();
    for (name, _) in PLUGINS {
        for digest in covers_linux_and_darwin_on_amd64_and_arm64(name) {
            assert!(all_digests.insert(digest.clone()), "{name} shares sha256 {digest} with another plugin");
        }
    }
}

fn has_the_schema_required_fields(name: &str, caveat: &str) {
    let plugin = manifest(name);
    assert_eq!(plugin.api_version, "krew.googlecontainertools.github.com/v1alpha2");
    assert_eq!(plugin.kind, "Plugin");
    // krew requires the name to match the file name and the plugin's
    // command (`kubectl reverser`, `kubectl tatara`).
    assert_eq!(plugin.metadata.name, name);
    assert_eq!(
        plugin.spec.version,
        concat!("v", env!("CARGO_PKG_VERSION")),
        "the manifest's version must be the crate's, with krew's leading v"
    );
    let short = &plugin.spec.short_description;
    assert!(!short.trim().is_empty() && short.len() <= 50, "{short:?}");
    assert!(!plugin.spec.description.trim().is_empty());
    assert!(plugin.spec.homepage.starts_with("https://"));
    assert!(plugin.spec.caveats.contains(caveat), "{name}: caveats do not mention {caveat}");
    let link = format!("ln -sf ~/.krew/store/{name}/*/kubectl_complete-{name} ~/.krew/bin/");
    assert!(plugin.spec.caveats.contains(&link), "{name}: caveats do not say how to put the helper on the PATH");
}

/// Returns the platforms' digests.
fn covers_linux_and_darwin_on_amd64_and_arm64(name: &str) -> BTreeSet<String> {
    let plugin = manifest(name);
    let mut seen = BTreeSet::new();
    let mut digests = BTreeSet::new();
    for p in &plugin.spec.platforms {
        let os = p.selector.match_labels.get("os").cloned().unwrap_or_default();
        let arch = p.selector.match_labels.get("arch").cloned().unwrap_or_default();
        assert_eq!(p.selector.match_labels.len(), 2, "{p:?}");
        assert!(seen.insert((os.clone(), arch.clone())), "{os}/{arch} twice");

        assert!(p.uri.starts_with("https://"), "{}", p.uri);
        assert!(
            p.uri.ends_with(&format!("/{v}/kubectl-{name}_{v}_{os}_{arch}.tar.gz", v = plugin.spec.version)),
            "{} is not this version's {os}/{arch} archive",
            p.uri
        );
        assert_eq!(p.sha256.len(), 64, "{}", p.sha256);
        assert!(
            p.sha256.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)),
            "{} is not lowercase hex",
            p.sha256
        );
        assert!(digests.insert(p.sha256.clone()), "two platforms share a sha256");

        assert_eq!(p.bin, format!("kubectl-{name}"));
        assert!(
            p.files.iter().any(|f| f.from == p.bin && f.to == "."),
            "the archive's binary must be installed: {:?}",
            p.files
        );
        let helper = format!("kubectl_complete-{name}");
        assert!(
            p.files.iter().any(|f| f.from == helper && f.to == "."),
            "{name} {os}/{arch} does not install {helper}: {:?}",
            p.files
        );
        // The archive carries the licence and its notice (Apache-2.0, section 4).
        for legal in ["LICENSE", "NOTICE"] {
            assert!(
                p.files.iter().any(|f| f.from == legal && f.to == "."),
                "{name} {os}/{arch} does not install {legal}: {:?}",
                p.files
            );
        }
    }
    let want: BTreeSet<(String, String)> =
        [("darwin", "amd64"), ("darwin", "arm64"), ("linux", "amd64"), ("linux", "arm64")]
            .into_iter()
            .map(|(o, a)| (o.to_string(), a.to_string()))
            .collect();
    assert_eq!(seen, want);
    digests
}
