//! Cases ported from gitops-reverser `internal/manifestanalyzer/acceptance_test.go`
//! and `gittargetignore_test.go` (named after the test each follows).

use super::*;

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: shop\ndata:\n  a: b\n";

fn kinds(issues: &[Issue]) -> Vec<IssueKind> {
    issues.iter().map(|i| i.kind).collect()
}

fn file(rel: &str) -> Role {
    classify(rel, EntryKind::File, &TargetIgnore::none())
}

#[test]
fn roles_follow_the_references_precedence() {
    // TestForeignContent_NonYAMLFileRefused, _OperatorArtifactsAccepted,
    // TestIsBenignPassenger_AcceptedAndRefused, _NestedGitTargetIgnoreRefused.
    assert_eq!(file("shop/configmaps/web.yaml"), Role::Managed);
    assert_eq!(file("a.yml"), Role::Managed);
    assert_eq!(file("deploy.sh"), Role::Foreign(IssueKind::ForeignFile));
    assert_eq!(file("notes.txt"), Role::Foreign(IssueKind::ForeignFile));
    assert_eq!(file("values.json"), Role::Foreign(IssueKind::ForeignFile));
    assert_eq!(file("README.md"), Role::Artifact);
    assert_eq!(file("x/README.md"), Role::Artifact);
    assert_eq!(file(".sops.yaml"), Role::Retained);
    assert_eq!(file("apps/kustomization.yaml"), Role::Retained);
    assert_eq!(file("shop/secrets/db.sops.yaml"), Role::Managed);
    for p in ["LICENSE", "NOTICE.txt", "docs/guide.md", "a/.gitkeep", ".gitignore", "x.markdown"] {
        assert_eq!(file(p), Role::Passenger, "{p}");
    }
    assert_eq!(file("guide.MD"), Role::Foreign(IssueKind::ForeignFile), "case-sensitive, as a *.md glob on Linux");
    assert_eq!(file(".gittargetignore"), Role::Ignored);
    assert_eq!(file("sub/.gittargetignore"), Role::Foreign(IssueKind::ForeignFile));
    // TestForeignContent_SymlinkRefused: even one named like a manifest.
    let none = TargetIgnore::none();
    assert_eq!(classify("a.yaml", EntryKind::Symlink, &none), Role::Foreign(IssueKind::ForeignSymlink));
    assert_eq!(classify("vendor/lib", EntryKind::Submodule, &none), Role::Foreign(IssueKind::ForeignSubmodule));
}

#[test]
fn the_ignore_file_hides_user_content_but_never_the_operators() {
    // TestGitTargetIgnore_FileNeverRead, _SubtreeNeverRead,
    // _ImmuneFilesNotHidden, TestCollectFiles_BenignPassengerStillUserSuppressible.
    let ig =
        TargetIgnore::parse(IGNORE_FILE, "scripts/\nnotes.txt\nREADME.md\nkustomization.yaml\nLICENSE\nln\n").unwrap();
    assert_eq!(classify("scripts/deploy.sh", EntryKind::File, &ig), Role::Ignored);
    assert_eq!(classify("scripts/x.yaml", EntryKind::File, &ig), Role::Ignored);
    assert_eq!(classify("notes.txt", EntryKind::File, &ig), Role::Ignored);
    assert_eq!(classify("LICENSE", EntryKind::File, &ig), Role::Ignored);
    assert_eq!(classify("ln", EntryKind::Symlink, &ig), Role::Ignored);
    assert_eq!(classify("README.md", EntryKind::File, &ig), Role::Artifact);
    assert_eq!(classify("kustomization.yaml", EntryKind::File, &ig), Role::Retained);
    assert_eq!(ig.matching_pattern("scripts/a/b.sh"), Some("scripts/"));
    assert_eq!(ig.matching_pattern("other.sh"), None);
}

#[test]
fn a_clean_file_passes_and_impure_ones_refuse() {
    // TestAccept_CleanFolderPasses.
    let f = yaml_file("shop/a.yaml", &format!("{CM}---\n{}", CM.replace("web", "api")));
    assert!(f.issues.is_empty(), "{:?}", f.issues);
    assert_eq!(f.identities.iter().flatten().count(), 2);
    // TestAccept_ImpureManagedFileEmptyDocument: a trailing separator is an
    // empty document, and a file with objects may hold only objects.
    let f = yaml_file("shop/a.yaml", &format!("{CM}---\n# nothing here\n"));
    assert_eq!(kinds(&f.issues), [IssueKind::ImpureManagedFile]);
    assert_eq!(f.issues[0].document, Some(1));
    assert!(f.issues[0].message.ends_with("document #1 is an empty document"), "{}", f.issues[0].message);
    // TestAccept_ImpureManagedFileNonKRM.
    let f = yaml_file("shop/a.yaml", &format!("{CM}---\nfoo: bar\n"));
    assert_eq!(kinds(&f.issues), [IssueKind::ImpureManagedFile]);
    let f = yaml_file("shop/a.yaml", &format!("{CM}---\nfoo: [\n"));
    assert_eq!(kinds(&f.issues), [IssueKind::ImpureManagedFile]);
    assert_eq!(f.unparsable, 1);
}

#[test]
fn standalone_files_refuse_unless_empty() {
    // TestAccept_StandaloneNonKRMRefuses, _StandaloneInvalidRefuses,
    // _StandaloneEmptyIgnored.
    let f = yaml_file("values.yaml", "replicas: 3\n");
    assert_eq!(kinds(&f.issues), [IssueKind::NonKrm]);
    assert_eq!(f.issues[0].message, "YAML is not a Kubernetes manifest");
    let f = yaml_file("broken.yaml", "a: [\n");
    assert_eq!(kinds(&f.issues), [IssueKind::InvalidYaml]);
    assert!(f.issues[0].message.starts_with("invalid YAML: "), "{}", f.issues[0].message);
    assert!(yaml_file("empty.yaml", "# only a comment\n").issues.is_empty());
    assert!(yaml_file("empty.yaml", "").issues.is_empty());
}

#[test]
fn a_sealed_file_without_its_sops_key_is_invalid() {
    // manifestedit/index.go ReasonMissingSopsKey.
    let f = yaml_file("shop/secrets/db.sops.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n");
    assert_eq!(kinds(&f.issues), [IssueKind::InvalidYaml]);
    let ok = yaml_file(
        "shop/secrets/db.sops.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  a: ENC[x]\nsops:\n  version: 3.9.0\n",
    );
    assert!(ok.issues.is_empty(), "{:?}", ok.issues);
}

#[test]
fn a_duplicate_names_both_places() {
    // TestAccept_DuplicateRefuses.
    let f = yaml_file("shop/a.yaml", &format!("{CM}---\n{CM}"));
    assert_eq!(kinds(&f.issues), [IssueKind::Duplicate]);
    assert_eq!(
        f.issues[0].message,
        "duplicate manifest identity ConfigMap/shop/web at shop/a.yaml#1; first occurrence at shop/a.yaml#0"
    );
}

#[test]
fn build_directives_are_retained_and_objects_in_them_refused() {
    // TestAccept_AllowlistedFileRetained, _CleanKustomizationNotFlaggedUnsupported.
    let k = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- web.yaml\n";
    assert!(retained_file("apps/kustomization.yaml", k).is_empty());
    assert!(retained_file(".sops.yaml", "creation_rules: []\n").is_empty());
    // TestAccept_MixedManagedInAllowlistedFileRefuses.
    let issues = retained_file("apps/kustomization.yaml", &format!("{k}---\n{CM}"));
    assert_eq!(kinds(&issues), [IssueKind::MixedFile]);
    assert_eq!(issues[0].document, Some(1));
}

#[test]
fn kustomizations_the_mirror_cannot_render_refuse_the_folder() {
    // TestAccept_UnsupportedKustomizeRefuses: a generator, a remote base,
    // and what the reference models but this mirror does not.
    let generator = "resources:\n- a.yaml\nconfigMapGenerator:\n- name: x\n";
    let issues = retained_file("kustomization.yaml", generator);
    assert_eq!(kinds(&issues), [IssueKind::UnsupportedKustomize]);
    assert!(issues[0].message.contains("configMapGenerator: (unsupported)"), "{}", issues[0].message);
    let remote = "resources:\n- github.com/org/repo//base?ref=main\n";
    assert!(retained_file("kustomization.yaml", remote)[0].message.contains("a remote base"));
    let ns = "namespace: shop\nresources:\n- a.yaml\n";
    assert!(retained_file("kustomization.yaml", ns)[0].message.contains("namespace:"));
    assert!(retained_file("kustomization.yaml", "images: []\nresources: [a.yaml]\n").is_empty(), "empty is zero");
    assert!(retained_file("kustomization.yaml", "a: [\n")[0].message.contains("unparseable"));
}

#[test]
fn a_refusal_picks_its_reason_and_names_the_first_file() {
    // TestRefusalError, TestAccept_MultipleRefusalsSorted, and
    // event_router.go gitPathRefusalReason.
    assert_eq!(Refusal::of(Vec::new()), None);
    let shadow = shadowed_write("shop/a.yaml", "shop/");
    let r = Refusal::of(vec![shadow.clone()]).unwrap();
    assert_eq!(r.reason, IGNORE_SHADOWS_MANAGED_PATH);
    let r = Refusal::of(vec![foreign(IssueKind::ForeignFile, "z.sh"), shadow, foreign(IssueKind::ForeignSymlink, "a")])
        .unwrap();
    assert_eq!(r.reason, UNSUPPORTED_CONTENT);
    assert_eq!(r.issues[0].path, "a");
    assert_eq!(
        r.to_string(),
        "Git path refused at a: symlink a is not managed content; remove it or name it in .gittargetignore \
         (and 2 more issue(s))"
    );
    let one = Refusal::of(vec![foreign(IssueKind::ForeignFile, "deploy.sh")]).unwrap();
    assert_eq!(
        one.to_string(),
        "Git path refused at deploy.sh: foreign file deploy.sh is not a managed manifest; remove it or name it in \
         .gittargetignore"
    );
}

#[test]
fn a_write_outside_the_folder_is_refused() {
    // ref: plan_flush.go pathScopePrecondition.
    assert_eq!(escapes_scope("clusters/prod", "clusters/prod/shop/a.yaml"), None);
    assert_eq!(escapes_scope("", "shop/a.yaml"), None);
    for outside in ["clusters/production/a.yaml", "clusters/prod/../x.yaml", "/etc/a.yaml", "clusters/prod//a.yaml"] {
        let issue = escapes_scope("clusters/prod", outside).unwrap_or_else(|| panic!("{outside}"));
        assert_eq!(issue.kind, IssueKind::WriteEscapesScope);
    }
    assert_eq!(Refusal::of(vec![escapes_scope("", "../a.yaml").unwrap()]).unwrap().reason, WRITE_BOUNDARY_REFUSED);
}
