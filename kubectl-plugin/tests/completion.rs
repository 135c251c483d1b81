//! Completion through the real kubectl: `kubectl __complete reverser ...`
//! is what a shell's TAB runs; kubectl finds `kubectl_complete-reverser` on
//! the PATH and reads its candidates. Subcommands, flags, flag values
//! (namespaces, contexts, formats, enumerations, pods, Projects) and object
//! names, from the fake API.

use serde_json::json;
use testkit::fakeapi::{self, FakeApi, Store};
use testkit::kubectl::Kubectl;

const PLUGINS: [&str; 4] = [
    env!("CARGO_BIN_EXE_kubectl-reverser"),
    env!("CARGO_BIN_EXE_kubectl-tatara"),
    env!("CARGO_BIN_EXE_kubectl_complete-reverser"),
    env!("CARGO_BIN_EXE_kubectl_complete-tatara"),
];

struct World {
    _api: FakeApi,
    kubectl: Kubectl,
}

impl World {
    fn new() -> World {
        let mut store = Store::new();
        store.load_crd_schemas(&testkit::fixtures::tatara_crds()).unwrap();
        fakeapi::seed_world(&mut store, "tatara").unwrap();
        let api = fakeapi::spawn(store).unwrap();
        for obj in [
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tatara"}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "tatara"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "tatara"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "elsewhere", "namespace": "shop"}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "watcher-0", "namespace": "tatara"}, "spec": {"containers": [{"name": "w", "image": "w"}]}}),
        ] {
            api.seed_object(obj).unwrap();
        }
        let kubectl = Kubectl::new(&PLUGINS);
        let kc = api.write_kubeconfig(&kubectl.dir.path().join("kubeconfig"), "tatara").unwrap();
        World { _api: api, kubectl: kubectl.kubeconfig(kc) }
    }

    /// `kubectl __complete WORDS...`: the candidates (without their
    /// descriptions) and the directive.
    fn complete(&self, words: &[&str]) -> (Vec<String>, u32) {
        let mut args = vec!["__complete"];
        args.extend_from_slice(words);
        let out = self.kubectl.run(&args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let mut lines: Vec<&str> = stdout.lines().collect();
        let directive = lines.pop().and_then(|l| l.strip_prefix(':')).and_then(|d| d.parse().ok());
        let directive = directive.unwrap_or_else(|| panic!("no directive in {stdout:?}"));
        (lines.iter().map(|l| l.split('\t').next().unwrap_or_default().to_string()).collect(), directive)
    }

    fn candidates(&self, words: &[&str]) -> Vec<String> {
        self.complete(words).0
    }
}

#[test]
fn kubectl_completes_subcommands_and_flags_through_the_helpers() {
    let w = World::new();
    let (subs, directive) = w.complete(&["reverser", ""]);
    assert_eq!(subs, ["inject", "why", "completion", "version"]);
    assert_eq!(directive, 4, "no file names for a subcommand");
    assert_eq!(w.candidates(&["tatara", "o"]), ["owners"]);
    assert_eq!(w.candidates(&["reverser", "why", "--req"]), ["--request-timeout"]);
    let flags = w.candidates(&["tatara", "repair", "--"]);
    for f in
        ["--apply", "--exit-code", "--all-namespaces", "--context", "--namespace", "--output", "--no-headers", "--as"]
    {
        assert!(flags.contains(&f.to_string()), "{f} missing from {flags:?}");
    }
    assert!(w.candidates(&["tatara", "repair", "-"]).contains(&"-A".to_string()));
    // Values: enumerations and kubectl's formats.
    assert_eq!(w.candidates(&["tatara", "--color", ""]), ["auto", "always", "never"]);
    assert_eq!(w.candidates(&["reverser", "completion", "z"]), ["zsh"]);
    let (formats, directive) = w.complete(&["reverser", "why", "-o", "js"]);
    assert_eq!(
        (formats, directive),
        (vec!["json".to_string(), "jsonpath=".to_string()], 6),
        "no space after jsonpath="
    );
    assert_eq!(w.candidates(&["reverser", "why", "--output=y"]), ["--output=yaml"]);
    // Only what each command prints: why neither wide nor name, sweep no name.
    assert_eq!(w.candidates(&["reverser", "why", "-o", ""]), ["json", "yaml", "jsonpath="]);
    assert_eq!(w.candidates(&["tatara", "sweep", "-o", ""]), ["json", "yaml", "wide", "jsonpath="]);
    assert_eq!(w.candidates(&["tatara", "owners", "-o", ""]), ["json", "yaml", "wide", "name", "jsonpath="]);
    // Paths are the shell's to complete.
    assert_eq!(w.complete(&["reverser", "inject", "-f", ""]), (vec![], 0));
    assert_eq!(w.complete(&["reverser", "why", "--kubeconfig", ""]), (vec![], 0));
}

#[test]
fn kubectl_completes_namespaces_contexts_and_object_names_from_the_cluster() {
    let w = World::new();
    let namespaces = w.candidates(&["reverser", "why", "-n", ""]);
    assert!(namespaces.contains(&"shop".to_string()) && namespaces.contains(&"tatara".to_string()), "{namespaces:?}");
    assert_eq!(w.candidates(&["tatara", "owners", "--namespace=sh"]), ["--namespace=shop"]);
    assert_eq!(w.candidates(&["reverser", "why", "--context", ""]), ["fake"]);
    assert_eq!(w.candidates(&["reverser", "why", "--user", ""]), ["tester"]);

    // why: the types the API serves, then the objects of one (in -n's
    // namespace, else the context's).
    let types = w.candidates(&["reverser", "why", "config"]);
    assert_eq!(types, ["configmaps"]);
    assert!(w.candidates(&["reverser", "why", ""]).contains(&"tasks".to_string()));
    let mut names = w.candidates(&["reverser", "why", "configmaps/"]);
    names.sort();
    assert_eq!(names, ["configmaps/settings", "configmaps/web"]);
    assert_eq!(w.candidates(&["reverser", "why", "cm", "w"]), ["web"]);
    assert_eq!(w.candidates(&["reverser", "why", "-n", "shop", "configmap/"]), ["configmap/elsewhere"]);
    assert_eq!(w.candidates(&["reverser", "why", "cm/web", "--pod", ""]), ["watcher-0"]);

    // tatara: Issues, MergeRequests and Tasks; merge requests by key;
    // Projects.
    let all = w.candidates(&["tatara", "owners", ""]);
    for n in ["iss-tatara-operator-412", "mr-tatara-operator-9", "umbrella", "member-a"] {
        assert!(all.contains(&n.to_string()), "{n} missing from {all:?}");
    }
    let tasks = w.candidates(&["tatara", "owners", "task/m"]);
    assert_eq!(tasks, ["task/member-a", "task/member-b"]);
    assert_eq!(w.candidates(&["tatara", "takeover", "tatara-operator!"]), ["tatara-operator!9"]);
    assert_eq!(w.candidates(&["tatara", "sweep", "--project", ""]), ["tatara"]);
}

#[test]
fn without_the_helper_kubectl_completes_nothing() {
    // The plugins alone on the PATH: kubectl has no helper to ask.
    let k = Kubectl::new(&PLUGINS[..2]);
    let out = k.run(&["__complete", "reverser", ""]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("why"), "{stdout}");
}

#[test]
fn a_tab_against_a_server_that_never_answers_gives_up_within_two_seconds() {
    let hang = testkit::process::Hang::start();
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, fakeapi::kubeconfig(&hang.url(), "shop")).unwrap();
    // The helper kubectl runs for a TAB (kubectl itself spends about 5 s
    // against such a server before it runs the helper: not ours to bound).
    for (helper, words) in [
        (PLUGINS[2], &["why", ""][..]),
        (PLUGINS[2], &["why", "-n", ""]),
        (PLUGINS[2], &["why", "cm/"]),
        (PLUGINS[3], &["owners", ""]),
    ] {
        let started = std::time::Instant::now();
        let out = std::process::Command::new(helper).args(words).env("KUBECONFIG", &kc).output().unwrap();
        let elapsed = started.elapsed();
        assert!(elapsed < std::time::Duration::from_secs(2), "{words:?} took {elapsed:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && stdout.lines().all(|l| l.starts_with(':')), "{words:?}: {stdout}");
    }
}
