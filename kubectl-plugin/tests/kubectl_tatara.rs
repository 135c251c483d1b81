//! `kubectl tatara` through the real `kubectl`: kubectl finds the plugin on
//! the PATH and runs it against the fake Kubernetes API
//! (`testkit::fakeapi`, seeded with objects valid under the real CRD
//! schemas, vendored in `shared/testkit/fixtures/crds/tatara/`) and a fake
//! GitHub serving GitHub's REST shapes to octocrab. Each test checks what
//! changed on both.

use std::process::{Child, Command, Output};

use rules::ownership::naming::review_task_name;
use serde_json::{Value, json};
use testkit::fake_github::{self, Comment, FakeGitHub, IssueData, PullData};
use testkit::fakeapi::{self, FakeApi, Store};
use testkit::kubectl::{KUBECTL, Kubectl};

const NS: &str = "tatara";
const REPO: &str = "acme/tatara-operator";

/// The fake API, the fake GitHub, and kubectl with only the plugin on its
/// PATH and a kubeconfig for the fake API.
struct World {
    /// Serves both fakes for as long as the world lives.
    _rt: tokio::runtime::Runtime,
    api: FakeApi,
    gh: FakeGitHub,
    kubectl: Kubectl,
}

impl World {
    fn new(seed: impl FnOnce(&mut Store), gh: fake_github::State) -> Self {
        let mut store = Store::new();
        store.load_crd_schemas(&testkit::fixtures::tatara_crds()).unwrap();
        fakeapi::seed_world(&mut store, NS).unwrap();
        seed(&mut store);
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let api = rt.block_on(fakeapi::serve(store)).unwrap();
        let gh = rt.block_on(fake_github::serve(gh));
        let kubectl = Kubectl::new(&[env!("CARGO_BIN_EXE_kubectl-tatara")]).env_remove("GITHUB_TOKEN");
        let path = api.write_kubeconfig(&kubectl.dir.path().join("kubeconfig"), NS).unwrap();
        let kubectl = kubectl.kubeconfig(path);
        World { _rt: rt, api, gh, kubectl }
    }

    fn command(&self, args: &[&str], token: Option<&str>) -> Command {
        let mut c = self.kubectl.command(args);
        if let Some(t) = token {
            c.env("GITHUB_TOKEN", t);
        }
        c
    }

    /// `kubectl tatara <args> --forge-url <fake GitHub>` (forge commands only).
    fn forge_args(&self, args: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = std::iter::once("tatara").chain(args.iter().copied()).map(String::from).collect();
        v.push("--forge-url".into());
        v.push(self.gh.url());
        v
    }

    fn tatara(&self, args: &[&str], token: Option<&str>) -> Output {
        let mut v = vec!["tatara"];
        v.extend_from_slice(args);
        self.command(&v, token).output().unwrap()
    }

    fn tatara_forge(&self, args: &[&str], token: &str) -> Output {
        let v = self.forge_args(args);
        let v: Vec<&str> = v.iter().map(String::as_str).collect();
        self.command(&v, Some(token)).output().unwrap()
    }

    fn spawn(&self, args: &[&str]) -> Child {
        let mut v = vec!["tatara"];
        v.extend_from_slice(args);
        self.command(&v, None).spawn().unwrap()
    }

    fn spawn_forge(&self, args: &[&str], token: &str) -> Child {
        let v = self.forge_args(args);
        let v: Vec<&str> = v.iter().map(String::as_str).collect();
        self.command(&v, Some(token)).spawn().unwrap()
    }

    fn all(&self, plural: &str) -> Vec<Value> {
        self.api.store.lock().unwrap().all(plural, NS)
    }

    fn get(&self, plural: &str, name: &str) -> Value {
        self.api.store.lock().unwrap().get(plural, NS, name).unwrap()
    }

    /// Every object in the fake API, for "nothing changed" checks.
    fn everything(&self) -> Vec<Value> {
        ["projects", "repositories", "tasks", "issues", "mergerequests"].iter().flat_map(|p| self.all(p)).collect()
    }
}

fn ok_json(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// The `pullRequests` line of `tatara-operator!<n>` (the operator's MRKey)
/// in a sweep's JSON.
fn pull_line(r: &Value, n: u64) -> Value {
    let key = format!("tatara-operator!{n}");
    r["pullRequests"].as_array().unwrap().iter().find(|l| l["key"] == key.as_str()).cloned().unwrap_or(Value::Null)
}

fn controllers(obj: &Value) -> Vec<String> {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["controller"] == json!(true))
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

fn task_ref(task: &Value, controller: Option<bool>, bod: bool) -> Value {
    let mut r = json!({"apiVersion": "tatara.dev/v1alpha1", "kind": "Task",
        "name": task["metadata"]["name"], "uid": task["metadata"]["uid"]});
    if let Some(c) = controller {
        r["controller"] = json!(c);
    }
    if bod {
        r["blockOwnerDeletion"] = json!(true);
    }
    r
}

fn gh_state(tokens: &[(&str, &str)]) -> fake_github::State {
    let mut s = fake_github::State::default();
    for (t, l) in tokens {
        s.tokens.insert(t.to_string(), l.to_string());
    }
    s.issues.insert(REPO.into(), vec![]);
    s.pulls.insert(REPO.into(), vec![]);
    s
}

#[test]
fn kubectl_plugin_list_shows_kubectl_tatara() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kubectl-tatara"), dir.path().join("kubectl-tatara")).unwrap();
    let out = Command::new(KUBECTL).args(["plugin", "list"]).env("PATH", dir.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let listed = dir.path().join("kubectl-tatara");
    assert!(stdout.lines().any(|l| l.trim() == listed.to_str().unwrap()), "{stdout}");
}

#[test]
fn help_explains_every_flag_of_every_command() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kubectl-tatara"), dir.path().join("kubectl-tatara")).unwrap();
    let help = |args: &[&str]| {
        let out = Command::new(KUBECTL)
            .arg("tatara")
            .args(args)
            .arg("--help")
            .env("PATH", format!("{}:/usr/bin:/bin", dir.path().display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let top = help(&[]);
    for sub in ["owners", "repair", "sweep", "takeover", "completion"] {
        assert!(top.contains(sub), "{top}");
    }
    let common = ["--kubeconfig <PATH>", "--context <NAME>", "-n, --namespace <NAMESPACE>", "-o, --output <FORMAT>"];
    let cases: &[(&str, &[&str])] = &[
        ("owners", &["<ISSUE|MR|TASK>"]),
        ("owners", &["--exit-code"]),
        ("repair", &["--apply", "-A, --all-namespaces", "--exit-code"]),
        ("sweep", &["--project <PROJECT>", "--apply", "--github-token <TOKEN>", "--forge-url <URL>"]),
        (
            "takeover",
            &[
                "<REPO!NUMBER>",
                "--project <PROJECT>",
                "--message <TEXT>",
                "--mirror-timeout <DURATION>",
                "--operator-base-url <URL>",
                "--github-token <TOKEN>",
                "--forge-url <URL>",
            ],
        ),
    ];
    for (sub, flags) in cases {
        let text = help(&[sub]);
        for flag in common.iter().chain(flags.iter()) {
            // The flag's own entry, not the usage line.
            let line = text
                .lines()
                .find(|l| l.trim_start().starts_with(flag))
                .unwrap_or_else(|| panic!("{sub}: no {flag}\n{text}"));
            // Every flag is explained: its line (or the next) says something.
            let idx = text.lines().position(|l| l == line).unwrap();
            let next = text.lines().nth(idx + 1).unwrap_or("");
            let said = line.split(flag).nth(1).unwrap_or("").trim().len() + next.trim().len();
            assert!(said > 10, "{sub}: {flag} is not explained\n{text}");
        }
        assert!(text.contains("json") && text.contains("yaml"), "{sub}: -o formats not listed\n{text}");
        if text.contains("--github-token") {
            assert!(text.contains("[env: GITHUB_TOKEN"), "{sub}: the token's env var is not named\n{text}");
        }
    }
}

/// The world plus Issue 500 with plain owners only, one of them without
/// blockOwnerDeletion: it breaks rules 5 and 3.
fn world_with_issue_500() -> World {
    World::new(
        |s| {
            let member = s.get("tasks", NS, "member-a").unwrap();
            let umbrella = s.get("tasks", NS, "umbrella").unwrap();
            s.seed(
                "issues",
                NS,
                json!({"metadata": {"name": "iss-tatara-operator-500",
                "ownerReferences": [task_ref(&member, Some(false), true), task_ref(&umbrella, None, false)]},
                "spec": {"number": 500, "projectRef": "tatara", "repositoryRef": "tatara-operator",
                         "url": "https://github.com/acme/tatara-operator/issues/500"},
                "status": {"state": "open", "author": "alice"}}),
            )
            .unwrap();
        },
        gh_state(&[]),
    )
}

#[test]
fn owners_shows_the_tree_with_every_violation_marked_in_table_and_json() {
    let w = world_with_issue_500();
    let tree = ok_json(&w.tatara(&["owners", "tatara-operator#412", "-o", "json"], None));
    assert_eq!(tree["kind"], "Issue");
    assert_eq!(tree["name"], "iss-tatara-operator-412");
    assert_eq!(tree["owners"][0]["name"], "umbrella");
    assert_eq!(tree["owners"][0]["controller"], true);
    assert_eq!(tree["owners"][1]["name"], "member-a");
    assert_eq!(tree["owners"][1]["controller"], false);
    assert_eq!(tree["owners"][1]["blockOwnerDeletion"], true);
    assert_eq!(tree["owners"][1]["stage"], "new");
    assert_eq!(tree["violations"], json!([]));

    let tree = ok_json(&w.tatara(&["owners", "iss-tatara-operator-500", "-o", "json"], None));
    let rules: Vec<i64> = tree["violations"].as_array().unwrap().iter().map(|v| v["rule"].as_i64().unwrap()).collect();
    assert_eq!(rules, vec![5, 3], "{tree}");

    let out = w.tatara(&["owners", "task/member-a"], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("Task/member-a") && text.contains("iss-tatara-operator-413"), "{text}");
    assert!(text.contains("! rule 5:") && text.contains("! rule 3:"), "{text}");

    let yaml = w.tatara(&["owners", "mr-tatara-operator-9", "-o", "yaml"], None);
    let v: Value = serde_norway::from_slice(&yaml.stdout).unwrap();
    assert_eq!(v["owners"][0]["name"], "member-b");

    // Not found is exit code 3, said once; an unusable name is a usage error.
    let out = w.tatara(&["owners", "nope"], None);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: in namespace \"tatara\": Issue, MergeRequest or Task \"nope\" not found;"),
        "{stderr}"
    );
    assert!(!stderr.contains("no Issue"), "doubled wording: {stderr}");
    assert_eq!(w.tatara(&["owners", "pod/a"], None).status.code(), Some(2));
}

/// Runs `kubectl tatara <args>` and returns its stdout, asserting success.
fn stdout(w: &World, args: &[&str]) -> String {
    let out = w.tatara(args, None);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn owners_and_repair_print_as_kubectl_users_expect() {
    let w = world_with_issue_500();
    // The tree, top-down in ownership like kubectl-tree: each owner above
    // the artifact, how it references it, and the violations marked.
    let tree = stdout(&w, &["owners", "iss-tatara-operator-500"]);
    println!("{tree}");
    let lines: Vec<&str> = tree.lines().collect();
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["NAME", "REF", "BLOCKS", "STAGE", "VIOLATIONS"]);
    assert!(lines[1].starts_with("Task/member-a ") && lines[1].contains(" new"), "{tree}");
    assert!(lines[2].starts_with("└─Issue/iss-tatara-operator-500 "), "{tree}");
    assert_eq!(lines[2].split_whitespace().skip(1).collect::<Vec<_>>(), ["owner", "yes", "open", "rules", "5,3"]);
    assert!(lines[3].starts_with("Task/umbrella "), "{tree}");
    assert_eq!(lines[4].split_whitespace().skip(1).take(2).collect::<Vec<_>>(), ["owner", "no"]);
    assert!(tree.contains("\n! rule 5: ") && tree.contains("\n! rule 3: "), "{tree}");
    let table = tree.split("\n\n").next().unwrap();
    assert!(table.lines().all(|l| l.chars().count() <= 80), "narrow enough for a terminal:\n{tree}");
    assert!(!tree.contains('\u{1b}'), "piped output has no colour");

    // A Task: what it owns under it.
    let task = stdout(&w, &["owners", "task/member-b", "--no-headers"]);
    let lines: Vec<&str> = task.lines().collect();
    assert!(lines[0].starts_with("Task/member-b "), "{task}");
    assert!(lines[1..].iter().all(|l| l.starts_with("├─") || l.starts_with("└─")), "{task}");
    assert!(
        lines.iter().any(|l| l.contains("MergeRequest/mr-tatara-operator-9") && l.contains("controller")),
        "{task}"
    );

    // -o wide adds the natural key and the owner's uid; -o name the other
    // side of the tree; jsonpath reads the JSON document.
    let wide = stdout(&w, &["owners", "iss-tatara-operator-500", "-o", "wide"]);
    assert!(
        wide.lines().next().unwrap().ends_with("KEY                      OWNER UID") || wide.contains("OWNER UID"),
        "{wide}"
    );
    assert!(wide.contains("tatara-operator#500"), "{wide}");
    assert_eq!(
        stdout(&w, &["owners", "iss-tatara-operator-500", "-o", "name"]),
        "task.tatara.dev/member-a\ntask.tatara.dev/umbrella\n"
    );
    assert_eq!(
        stdout(
            &w,
            &["owners", "tatara-operator#500", "-o", "jsonpath={range .owners[*]}{.name}={.controller}{\"\\n\"}{end}"]
        ),
        "member-a=false\numbrella=false\n"
    );
    assert_eq!(stdout(&w, &["owners", "tatara-operator#500", "-o=jsonpath={.violations[*].rule}"]), "5 3");

    // --color always colours even when piped; never and auto (piped) do not.
    let always = stdout(&w, &["owners", "iss-tatara-operator-500", "--color", "always"]);
    assert!(always.contains("\u{1b}[31mrules 5,3\u{1b}[0m"), "{always:?}");
    assert!(!stdout(&w, &["--color=never", "owners", "iss-tatara-operator-500"]).contains('\u{1b}'));

    // repair: narrow columns, the rules' words only with -o wide; a
    // NAMESPACE column only with -A.
    let plan = stdout(&w, &["repair"]);
    let header: Vec<&str> = plan.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["ARTIFACT", "NEW", "CONTROLLER", "RULES"], "{plan}");
    assert!(plan.contains("issue/iss-tatara-operator-500") && plan.lines().all(|l| l.chars().count() <= 100), "{plan}");
    let all = stdout(&w, &["repair", "-A", "--no-headers"]);
    assert!(all.lines().all(|l| l.starts_with(&format!("{NS} "))), "{all}");
    let wide = stdout(&w, &["repair", "-o", "wide"]);
    assert!(
        wide.lines().next().unwrap().ends_with("WHY") && wide.contains("its first live owner in owner-reference order"),
        "{wide}"
    );
    assert_eq!(stdout(&w, &["repair", "-o", "name"]), "issue.tatara.dev/iss-tatara-operator-500\n");
    let out = w.tatara(&["repair", "-o", "jsonpath={.plan[*].name}"], None);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "iss-tatara-operator-500");

    // --exit-code, for CI: 6 while something is to report, 0 once clean.
    let out = w.tatara(&["repair", "--exit-code", "-o", "name"], None);
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "issue.tatara.dev/iss-tatara-operator-500\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "1 repair(s) to make (--exit-code)\n");
    let out = w.tatara(&["owners", "iss-tatara-operator-500", "--exit-code"], None);
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("rule violation(s)"), "{out:?}");
    assert!(w.tatara(&["owners", "iss-tatara-operator-500"], None).status.success());

    // A repair that worked is no error: nothing on stderr, piped or not.
    let out = w.tatara(&["repair", "--apply"], None);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "a successful repair logs nothing a human must read");
    assert!(String::from_utf8_lossy(&out.stdout).contains("applied 1 repair(s)"), "{out:?}");
    let out = w.tatara(&["repair", "--exit-code"], None);
    assert_eq!(out.status.code(), Some(0), "nothing left to repair: {out:?}");
    let out = w.tatara(&["owners", "iss-tatara-operator-500", "--exit-code"], None);
    assert_eq!(out.status.code(), Some(0), "repaired, no violation left: {out:?}");

    // A format a command does not print is a usage error, before any call.
    let out = w.tatara(&["takeover", "tatara-operator#9", "--project", "tatara", "-o", "name"], None);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("takeover does not print -o name"), "{out:?}");
}

#[test]
fn two_racing_repair_applies_end_with_exactly_one_controller_each() {
    const BROKEN: i64 = 40;
    let w = World::new(
        |s| {
            let t: Vec<Value> =
                ["member-a", "member-b", "umbrella"].iter().map(|n| s.get("tasks", NS, n).unwrap()).collect();
            for n in 0..BROKEN {
                // Plain owners only (rule 5), some without blockOwnerDeletion
                // (rule 3), in varying order: the repair promotes the first.
                let refs = match n % 3 {
                    0 => vec![task_ref(&t[2], Some(false), true), task_ref(&t[0], Some(false), true)],
                    1 => vec![task_ref(&t[1], None, false), task_ref(&t[2], Some(false), true)],
                    _ => vec![task_ref(&t[2], Some(true), false), task_ref(&t[1], Some(false), false)],
                };
                let plural = if n % 4 == 0 { "mergerequests" } else { "issues" };
                let prefix = if plural == "issues" { "iss" } else { "mr" };
                s.seed(plural, NS, json!({"metadata": {"name": format!("{prefix}-tatara-operator-{}", 600 + n), "ownerReferences": refs},
                    "spec": {"number": 600 + n, "projectRef": "tatara", "repositoryRef": "tatara-operator",
                             "url": format!("https://github.com/acme/tatara-operator/issues/{}", 600 + n)},
                    "status": {"state": "open", "author": "alice"}})).unwrap();
            }
        },
        gh_state(&[]),
    );
    // The plan alone changes nothing.
    let before = w.everything();
    let plan = ok_json(&w.tatara(&["repair", "-o", "json"], None));
    assert_eq!(plan["plan"].as_array().unwrap().len(), BROKEN as usize, "{plan}");
    assert_eq!(plan["applied"], json!([]));
    assert_eq!(w.everything(), before, "repair without --apply wrote something");

    let a = w.spawn(&["repair", "--apply", "-o", "json"]);
    let b = w.spawn(&["repair", "--apply", "-o", "json"]);
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let (ra, rb) = (ok_json(&a), ok_json(&b));
    let applied = ra["applied"].as_array().unwrap().len() + rb["applied"].as_array().unwrap().len();
    println!(
        "racing repairs: {} + {} writes, {} + {} conflicts",
        ra["applied"].as_array().unwrap().len(),
        rb["applied"].as_array().unwrap().len(),
        ra["conflicts"],
        rb["conflicts"]
    );
    assert!(applied >= BROKEN as usize, "every artifact repaired by one of them: {applied}");

    // The first live owner in owner-reference order is promoted where no
    // controller was (the operator's OldestSurvivingOwner: "ownerRef order
    // IS creation order"), and a controller is kept where there was one.
    for plural in ["issues", "mergerequests"] {
        for obj in w.all(plural) {
            let c = controllers(&obj);
            let refs = obj["metadata"]["ownerReferences"].as_array().cloned().unwrap_or_default();
            if refs.is_empty() {
                continue; // iss-tatara-operator-415: ownerless, the sweep's to adopt
            }
            assert_eq!(c.len(), 1, "{} has controllers {c:?}", obj["metadata"]["name"]);
            assert!(refs.iter().all(|r| r["blockOwnerDeletion"] == json!(true)), "{obj}");
            let n = obj["spec"]["number"].as_i64().unwrap();
            if n >= 600 {
                let want = if (n - 600) % 3 == 1 { "member-b" } else { "umbrella" };
                assert_eq!(c[0], want, "{obj}");
            }
        }
    }
    let store = w.api.store.lock().unwrap();
    assert_eq!(store.two_controller_rejections, 0, "a write carried two controllers");
    drop(store);
    // Converged: nothing left to repair.
    let again = ok_json(&w.tatara(&["repair", "-A", "-o", "json"], None));
    assert_eq!(again["plan"], json!([]), "{again}");
}

/// An open pull request; the bot's login is a `Bot`, anyone else a `User`.
fn pull(number: u64, author: &str, head: &str, head_repo: Option<&str>) -> PullData {
    PullData {
        number,
        author: author.into(),
        author_type: if author == "tatara-bot" { "Bot" } else { "User" }.into(),
        head_ref: head.into(),
        head_sha: format!("{number:040x}"),
        head_repo: head_repo.map(str::to_string),
        open: true,
        labels: vec![],
        body: String::new(),
        comments: vec![],
    }
}

fn backlog() -> fake_github::State {
    let mut s = gh_state(&[("tok-maint", "maint")]);
    let bot = |id: u64| Comment { id, author: "tatara-bot".into(), author_type: "Bot".into(), body: "noted".into() };
    let human =
        |id: u64| Comment { id, author: "alice".into(), author_type: "User".into(), body: "still broken".into() };
    let mut issues: Vec<IssueData> = (1000..1150)
        .map(|n| IssueData {
            number: n,
            author: "alice".into(),
            open: true,
            labels: vec![],
            // Some threads end with the bot's comment: still nobody waiting.
            comments: if n % 7 == 0 { vec![human(n * 10), bot(n * 10 + 1)] } else { vec![] },
        })
        .collect();
    // Issues already worked (controller owners in the seeded world).
    for n in [412, 413, 414] {
        issues.push(IssueData { number: n, author: "alice".into(), open: true, labels: vec![], comments: vec![] });
    }
    // The ownerless survivor of a failed Task, re-minted parked because of
    // the tatara-parked label even though a human spoke last.
    issues.push(IssueData {
        number: 415,
        author: "alice".into(),
        open: true,
        labels: vec!["tatara-parked".into()],
        comments: vec![human(4150)],
    });
    // Not an allowed reporter (clause c), and a closed issue.
    issues.push(IssueData { number: 2000, author: "mallory".into(), open: true, labels: vec![], comments: vec![] });
    issues.push(IssueData { number: 2001, author: "alice".into(), open: false, labels: vec![], comments: vec![] });
    s.issues.insert(REPO.into(), issues);
    s.pulls.insert(
        REPO.into(),
        vec![
            pull(9, "tatara-bot", "task/member-b", Some(REPO)),
            pull(3001, "tatara-bot", "task/member-b", Some("evil/tatara-operator")),
            pull(3002, "tatara-bot", "chore/pin-bump", Some(REPO)),
            pull(3003, "bob", "fix/typo", Some("bob/tatara-operator")),
        ],
    );
    s
}

/// Ported from the operator's `internal/own/own_test.go`
/// (TestOldestSurvivingOwner, TestDropOwner) with `RepairZeroController`'s
/// "A TERMINAL OWNER IS NOT AN HEIR" (own.go:198-205), through the real
/// binary: a finished heir is skipped, a dangling controller reference is
/// dropped, and when one of several writes fails the others are still made
/// and the result says which were written and which were not.
#[test]
fn repair_promotes_only_live_heirs_and_reports_a_failed_write_among_several() {
    let w = World::new(
        |s| {
            s.patch("tasks", NS, "member-a", &json!({"status": {"state": "done"}}), true).unwrap();
            let (a, b) = (s.get("tasks", NS, "member-a").unwrap(), s.get("tasks", NS, "member-b").unwrap());
            let gone = json!({"apiVersion": "tatara.dev/v1alpha1", "kind": "Task", "name": "gone", "uid": "uid-gone",
                "controller": true, "blockOwnerDeletion": true});
            let seed = |s: &mut Store, n: i64, refs: Vec<Value>| {
                s.seed(
                    "issues",
                    NS,
                    json!({"metadata": {"name": format!("iss-tatara-operator-{n}"), "ownerReferences": refs},
                    "spec": {"number": n, "projectRef": "tatara", "repositoryRef": "tatara-operator",
                             "url": format!("https://github.com/acme/tatara-operator/issues/{n}")},
                    "status": {"state": "open", "author": "alice"}}),
                )
                .unwrap();
            };
            // 700: the done member-a is first in order; member-b inherits.
            seed(s, 700, vec![task_ref(&a, Some(false), true), task_ref(&b, Some(false), true)]);
            // 701: a controller reference to a Task that is gone.
            seed(s, 701, vec![gone, task_ref(&b, Some(false), true)]);
            // 702: only the done member-a: the sweep's, not the repair's.
            seed(s, 702, vec![task_ref(&a, Some(false), true)]);
        },
        gh_state(&[]),
    );
    let plan = ok_json(&w.tatara(&["repair", "-o", "json"], None));
    let names: Vec<&str> = plan["plan"].as_array().unwrap().iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["iss-tatara-operator-700", "iss-tatara-operator-701"], "{plan}");
    for l in plan["plan"].as_array().unwrap() {
        assert_eq!(l["controller"], "member-b", "{l}");
    }
    let refs701 = &plan["plan"][1]["ownerReferences"];
    assert_eq!(refs701.as_array().unwrap().len(), 1, "the dangling controller reference is dropped: {refs701}");

    // One of the two writes fails: the other is made, and both are named.
    w.api.fail(Some("PUT"), "/apis/tatara.dev/v1alpha1/namespaces/tatara/issues/iss-tatara-operator-700", 500, None);
    let out = w.tatara(&["repair", "--apply"], None);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("written: issue/iss-tatara-operator-701"), "{stdout}");
    assert!(stdout.contains("NOT written: issue/iss-tatara-operator-700"), "{stdout}");
    assert!(
        stderr.contains("1 of 2 repair(s) could not be written")
            && stderr.contains("written: issue/iss-tatara-operator-701")
            && stderr.contains("not written: issue/iss-tatara-operator-700"),
        "{stderr}"
    );
    assert_eq!(controllers(&w.get("issues", "iss-tatara-operator-701")), vec!["member-b"]);
    assert_eq!(controllers(&w.get("issues", "iss-tatara-operator-700")), Vec::<String>::new());
    assert_eq!(controllers(&w.get("issues", "iss-tatara-operator-702")), Vec::<String>::new(), "left to the sweep");
    w.api.clear_faults();
    let again = ok_json(&w.tatara(&["repair", "--apply", "-o", "json"], None));
    assert_eq!(again["applied"].as_array().unwrap().len(), 1, "{again}");
    assert_eq!(controllers(&w.get("issues", "iss-tatara-operator-700")), vec!["member-b"]);
}

#[test]
fn sweep_of_a_150_issue_backlog_mints_at_most_the_budget_per_pass_all_parked() {
    let w = World::new(|_| {}, backlog());
    // The plan alone changes nothing on either side.
    let before = w.everything();
    let plan = ok_json(&w.tatara_forge(&["sweep", "--project", "tatara", "-o", "json"], "tok-maint"));
    assert_eq!(w.everything(), before);
    let decisions = |r: &Value, d: &str| -> Vec<String> {
        r["issues"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["decision"] == d)
            .map(|l| l["key"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(decisions(&plan, "mint").len(), 5, "{plan}");
    assert_eq!(decisions(&plan, "deferred").len(), 151 - 5);
    let skips = decisions(&plan, "skip");
    for k in ["tatara-operator#412", "tatara-operator#413", "tatara-operator#414", "tatara-operator#2000"] {
        assert!(skips.contains(&k.to_string()), "{k} not skipped: {skips:?}");
    }
    assert!(!plan.to_string().contains("tatara-operator#2001"), "a closed issue was considered");
    assert!(!plan.to_string().contains("tatara-operator#3003\",\"decision"), "a PR was treated as an issue");
    assert_eq!(plan["capHits"][0]["cap"], "maxNewTasksPerSweep");
    // Pull requests: adopt, ignore (fork), ignore (bot, no task), review.
    let disp: Vec<(String, String)> = plan["pullRequests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (p["key"].as_str().unwrap().to_string(), p["disposition"]["disposition"].as_str().unwrap().to_string())
        })
        .collect();
    for want in [("!9", "adopt"), ("!3001", "ignoreBot"), ("!3002", "ignoreBot"), ("!3003", "review")] {
        assert!(disp.iter().any(|(k, d)| k.ends_with(want.0) && d == want.1), "{want:?} in {disp:?}");
    }
    // #9 is adopted already (member-b lists it and controls its mirror);
    // the review of #3003 waits behind the 151 orphans for the budget.
    assert_eq!(pull_line(&plan, 9)["decision"], "skip", "{plan}");
    assert!(pull_line(&plan, 9)["why"].as_str().unwrap().starts_with("already adopted"), "{plan}");
    assert_eq!(pull_line(&plan, 3003)["decision"], "deferred", "{plan}");
    assert_eq!(plan["pullRequestCounts"], json!({"adopt": 1, "ignoreBot": 2, "review": 1, "ignore": 0}));
    let table = w.tatara_forge(&["sweep", "--project", "tatara"], "tok-maint");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("parked(backlog-sweep)") && text.contains("no forks, ever"), "{text}");
    // Reasons are worded for people: no Rust Debug text (`Some("…")`, a
    // variant name) in any form a user reads (issue 29).
    let wide = w.tatara_forge(&["sweep", "--project", "tatara", "-o", "wide"], "tok-maint");
    let wide = String::from_utf8_lossy(&wide.stdout);
    for shown in [&*text, &*wide, &plan.to_string()] {
        for debug in ["Some(", "None", "ParkedBacklogSweep", "(Triaging)"] {
            assert!(!shown.contains(debug), "{debug:?} in:\n{shown}");
        }
    }

    let mut minted_all: Vec<String> = Vec::new();
    let mut reviews_all: Vec<String> = Vec::new();
    let mut passes = 0;
    loop {
        passes += 1;
        let r = ok_json(&w.tatara_forge(&["sweep", "--project", "tatara", "--apply", "-o", "json"], "tok-maint"));
        let minted: Vec<String> =
            r["minted"].as_array().unwrap().iter().map(|m| m["key"].as_str().unwrap().to_string()).collect();
        let reviews: Vec<String> = r["pullRequests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["outcome"] == "minted")
            .map(|p| p["key"].as_str().unwrap().to_string())
            .collect();
        assert!(minted.len() + reviews.len() <= 5, "pass {passes} minted {minted:?} {reviews:?}");
        for l in r["issues"].as_array().unwrap().iter().filter(|l| l["decision"] == "mint") {
            assert_eq!(l["stage"], "parked(backlog-sweep)", "{l}");
        }
        for k in &minted {
            assert!(!minted_all.contains(k), "pass {passes} minted {k} again");
        }
        if minted.is_empty() && reviews.is_empty() {
            break;
        }
        minted_all.extend(minted);
        reviews_all.extend(reviews);
        assert!(passes < 40, "the sweep does not converge");
    }
    assert_eq!(minted_all.len(), 151, "every allowed open orphan minted once");
    // The review mint shares the budget: the last pass minted 1 orphan + it.
    assert_eq!(reviews_all, vec!["tatara-operator!3003"]);
    assert_eq!(passes, 32);
    // Every minted Task is parked(backlog-sweep) and controls its Issue CR.
    let tasks = w.all("tasks");
    let is_review = |t: &&Value| t["metadata"]["name"].as_str().unwrap().starts_with("mt-r-");
    let minted_tasks: Vec<&Value> = tasks
        .iter()
        .filter(|t| t["metadata"]["name"].as_str().unwrap().starts_with("mt-"))
        .filter(|t| !is_review(t))
        .collect();
    assert_eq!(minted_tasks.len(), 151);
    assert_eq!(tasks.iter().filter(is_review).count(), 1);
    for t in &minted_tasks {
        assert_eq!(t["spec"]["initialParkReason"], "backlog-sweep", "{t}");
        assert_eq!(t["spec"]["projectRef"], "tatara");
    }
    for n in (1000..1150).chain([415]) {
        let iss = w.get("issues", &format!("iss-tatara-operator-{n}"));
        let c = controllers(&iss);
        assert_eq!(c.len(), 1, "{iss}");
        assert!(c[0].starts_with("mt-"), "{iss}");
    }
    // 415 was ADOPTED (the ownerless survivor kept its status), not re-created.
    let adopted = w.get("issues", "iss-tatara-operator-415");
    assert_eq!(adopted["status"]["comments"][0]["externalId"], "c415", "{adopted}");
    assert!(w.all("issues").iter().all(|i| i["spec"]["number"] != json!(2000)));
    // The sweep never writes to the forge.
    assert_eq!(w.gh.writes(), vec![]);
}

#[test]
fn sweep_mints_triaging_when_a_human_waits_and_never_lets_active_tasks_exceed_max_open_tasks() {
    let w = World::new(
        |s| {
            s.patch("projects", NS, "tatara", &json!({"spec": {"maxNewTasksPerSweep": 10}}), false).unwrap();
        },
        {
            let mut s = gh_state(&[("tok", "maint")]);
            // Served like GitHub Enterprise, under /api/v3 (--forge-url).
            s.prefix = "/api/v3".into();
            let human =
                |id: u64| Comment { id, author: "alice".into(), author_type: "User".into(), body: "any news?".into() };
            let issues = (1..=7)
                .map(|n| IssueData {
                    number: n,
                    author: "alice".into(),
                    open: true,
                    labels: vec![],
                    comments: if n <= 5 { vec![human(n * 100)] } else { vec![] },
                })
                .collect();
            s.issues.insert(REPO.into(), issues);
            s
        },
    );
    // Seeded: umbrella, member-a, member-b are active (3 of maxOpenTasks 6);
    // old-failed is failed and does not count.
    let r = ok_json(&w.tatara_forge(&["sweep", "--project", "tatara", "--apply", "-o", "json"], "tok"));
    assert_eq!(r["activeTasks"], 3);
    let line = |n: u64| {
        r["issues"].as_array().unwrap().iter().find(|l| l["key"] == format!("tatara-operator#{n}")).unwrap().clone()
    };
    for n in [6, 7] {
        assert_eq!(line(n)["stage"], "parked(backlog-sweep)", "{}", line(n));
    }
    let triaging: Vec<u64> = (1..=5).filter(|n| line(*n)["stage"] == "triaging").collect();
    let deferred: Vec<u64> = (1..=5).filter(|n| line(*n)["decision"] == "deferred").collect();
    assert_eq!(triaging.len(), 3, "{r}");
    assert_eq!(deferred.len(), 2, "{r}");
    assert_eq!(r["capHits"][0]["cap"], "maxOpenTasks");
    assert_eq!(r["minted"].as_array().unwrap().len(), 5);
    let active_now = w
        .all("tasks")
        .iter()
        .filter(|t| t["metadata"]["name"].as_str().unwrap().starts_with("mt-"))
        .filter(|t| t["spec"].get("initialParkReason").is_none())
        .count();
    assert_eq!(active_now, 3);
    // Next pass: six active Tasks, so the two waiting issues stay deferred.
    let r = ok_json(&w.tatara_forge(&["sweep", "--project", "tatara", "--apply", "-o", "json"], "tok"));
    assert_eq!(r["activeTasks"], 6);
    assert_eq!(r["minted"], json!([]));
    assert_eq!(r["capHits"][0]["cap"], "maxOpenTasks");
}

#[test]
fn two_racing_sweeps_mint_each_orphan_once() {
    // Both passes must plan from the same state for the race to be the
    // interesting one (each mint contended); otherwise the later pass sees
    // the earlier one's mints and, rightly, spends its own budget on the
    // next five orphans. The fake GitHub holds both pull listings (read
    // after the snapshot and the issue scan, before any mint) until both
    // arrived.
    // Four orphan issues (1000-1002 and the ownerless survivor 415) and one
    // review mint (#3003) fill the budget of five; two bot pull requests on
    // live Tasks' branches are adopted by both passes at once.
    let mut gh = backlog();
    gh.issues.get_mut(REPO).unwrap().retain(|i| !(1003..1150).contains(&i.number));
    gh.pulls.get_mut(REPO).unwrap().extend([
        pull(3005, "tatara-bot", "task/member-a", Some(REPO)),
        pull(3006, "tatara-bot", "task/umbrella", Some(REPO)),
    ]);
    gh.hold_pull_lists_until = 2;
    let w = World::new(|_| {}, gh);
    let args = ["sweep", "--project", "tatara", "--apply", "-o", "json"];
    let a = w.spawn_forge(&args, "tok-maint");
    let b = w.spawn_forge(&args, "tok-maint");
    let (ra, rb) = (ok_json(&a.wait_with_output().unwrap()), ok_json(&b.wait_with_output().unwrap()));
    let keys = |r: &Value, field: &str| -> Vec<String> {
        let mut v: Vec<String> =
            r[field].as_array().unwrap().iter().map(|m| m["key"].as_str().unwrap().to_string()).collect();
        v.sort();
        v
    };
    let planned = |r: &Value| -> Vec<String> {
        let mut v: Vec<String> = r["issues"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["decision"] == "mint")
            .map(|l| l["key"].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(planned(&ra), planned(&rb), "both passes planned from the same state");
    assert_eq!(planned(&ra).len(), 4);
    for r in [&ra, &rb] {
        assert_eq!(pull_line(r, 3003)["decision"], "mint", "{r}");
        assert_eq!(
            (pull_line(r, 3005)["decision"].clone(), pull_line(r, 3006)["decision"].clone()),
            (json!("adopt"), json!("adopt"))
        );
    }
    // Between them each planned orphan was minted (its Task created) exactly
    // once. What a pass found already minted it reports as not minted, or as
    // completed when it finished the other writer's mint (the mirror).
    let (ma, mb) = (keys(&ra, "minted"), keys(&rb, "minted"));
    println!(
        "racing sweeps: {} + {} minted, {} + {} completed, {} + {} not minted",
        ma.len(),
        mb.len(),
        keys(&ra, "completed").len(),
        keys(&rb, "completed").len(),
        keys(&ra, "notMinted").len(),
        keys(&rb, "notMinted").len()
    );
    assert!(ma.iter().all(|k| !mb.contains(k)), "minted twice:\n{ra}\n{rb}");
    let mut all: Vec<String> = ma.iter().chain(mb.iter()).cloned().collect();
    all.sort();
    assert_eq!(all, planned(&ra), "{ra}\n{rb}");
    for r in [&ra, &rb] {
        let mut accounted: Vec<String> = ["minted", "completed", "notMinted"].iter().flat_map(|f| keys(r, f)).collect();
        accounted.sort();
        assert_eq!(accounted, planned(&ra), "each pass accounts for every planned mint once: {r}");
        for m in r["completed"].as_array().unwrap() {
            assert!(m["task"].as_str().unwrap().starts_with("mt-"), "{m}");
        }
    }
    let minted_tasks =
        w.all("tasks").into_iter().filter(|t| t["metadata"]["name"].as_str().unwrap().starts_with("mt-")).count();
    assert_eq!(minted_tasks, 5, "four issue Tasks and one review Task");
    for key in &all {
        let n = key.rsplit_once('#').unwrap().1;
        let iss = w.get("issues", &format!("iss-tatara-operator-{n}"));
        assert_eq!(controllers(&iss).len(), 1, "{iss}");
    }

    // The review of #3003 was minted by exactly one pass; the other found it
    // minted (and maybe finished its mirror).
    let outcomes = |n: u64| -> Vec<String> {
        let mut v: Vec<String> =
            [&ra, &rb].iter().map(|r| pull_line(r, n)["outcome"].as_str().unwrap_or("").to_string()).collect();
        v.sort();
        v
    };
    println!(
        "racing pull requests: #3003 {:?}, #3005 {:?}, #3006 {:?}",
        outcomes(3003),
        outcomes(3005),
        outcomes(3006)
    );
    let review = outcomes(3003);
    assert_eq!(review.iter().filter(|o| *o == "minted").count(), 1, "{review:?}");
    assert!(review.iter().all(|o| ["minted", "completed", "nothingToDo"].contains(&o.as_str())), "{review:?}");
    let name = review_task_name("tatara", "tatara-operator", 3003);
    assert_eq!(controllers(&w.get("mergerequests", "mr-tatara-operator-3003")), vec![name]);
    // Each adoption landed once: one mrRefs entry, one mirror with one
    // controller, and between the two passes one successful create of it.
    for (n, task) in [(3005, "member-a"), (3006, "umbrella")] {
        let o = outcomes(n);
        assert!(o.contains(&"adopted".to_string()), "{o:?}");
        assert!(o.iter().all(|o| o == "adopted" || o == "nothingToDo"), "{o:?}");
        assert_eq!(w.get("tasks", task)["status"]["mrRefs"], json!([format!("tatara-operator#{n}")]));
        assert_eq!(controllers(&w.get("mergerequests", &format!("mr-tatara-operator-{n}"))), vec![task]);
    }
    let store = w.api.store.lock().unwrap();
    let creates = |resource: &str, name: &str| {
        store.writes().iter().filter(|x| x.verb == "create" && x.resource == resource && x.name == name).count()
    };
    for n in [3003, 3005, 3006] {
        assert_eq!(creates("mergerequests", &format!("mr-tatara-operator-{n}")), 1, "#{n}");
    }
    assert_eq!(creates("tasks", &review_task_name("tatara", "tatara-operator", 3003)), 1);
    assert_eq!(store.two_controller_rejections, 0);
}

// --- Pull requests: adopt, ignore, or review, applied ---

/// A world whose forge has these pull requests and no issues; the Project's
/// `scm.prReactionScope` is `scope` (unset: the open default).
fn pulls_world(scope: Option<&str>, pulls: Vec<PullData>) -> World {
    let mut gh = gh_state(&[("tok", "maint")]);
    gh.pulls.insert(REPO.into(), pulls);
    World::new(
        |s| {
            if let Some(scope) = scope {
                let patch = json!({"spec": {"scm": {"prReactionScope": scope}}});
                s.patch("projects", NS, "tatara", &patch, false).unwrap();
            }
        },
        gh,
    )
}

fn sweep_json(w: &World, apply: bool) -> Value {
    let mut args = vec!["sweep", "--project", "tatara", "-o", "json"];
    if apply {
        args.push("--apply");
    }
    ok_json(&w.tatara_forge(&args, "tok"))
}

/// A pull request the pass left alone: no Task, no mirror, nothing written
/// anywhere (the plan and the apply alike), with this disposition.
fn assert_left_alone(w: &World, n: u64, disposition: &str) {
    let before = w.everything();
    for apply in [false, true] {
        let r = sweep_json(w, apply);
        let l = pull_line(&r, n);
        assert_eq!(l["disposition"]["disposition"], disposition, "{r}");
        assert_eq!(l["decision"], "ignore", "{l}");
        assert_eq!((&l["outcome"], &l["writes"]), (&Value::Null, &json!([])), "{l}");
    }
    assert_eq!(w.everything(), before, "an ignored pull request changed the cluster");
    assert_eq!(w.gh.writes(), vec![]);
}

/// The review of `n` minted by this pass at `stage`, exactly as the rules
/// require: a review-kind Task named by IntakeTaskName(kind review) that
/// controls the MergeRequest mirror, whose ownership the author predicate
/// gives (a human: external, initial).
fn assert_reviewed(w: &World, r: &Value, n: u64, author: &str, stage: &str) {
    let l = pull_line(r, n);
    let name = review_task_name("tatara", "tatara-operator", n as i64);
    assert_eq!(l["disposition"]["disposition"], "review", "{l}");
    assert_eq!((&l["decision"], &l["stage"], &l["outcome"]), (&json!("mint"), &json!(stage), &json!("minted")), "{l}");
    assert_eq!(l["task"], name.as_str());
    assert_eq!(l["writes"].as_array().unwrap().len(), 3, "Task, mirror, mirror status: {l}");
    let t = w.get("tasks", &name);
    assert_eq!(t["spec"]["kind"], "review");
    assert_eq!(t["spec"]["repositoryRef"], "tatara-operator");
    let parked = if stage == "triaging" { Value::Null } else { json!("backlog-sweep") };
    assert_eq!(t["spec"].get("initialParkReason").cloned().unwrap_or(Value::Null), parked, "{t}");
    let mr = w.get("mergerequests", &format!("mr-tatara-operator-{n}"));
    assert_eq!(mr["metadata"]["ownerReferences"], json!([task_ref(&t, Some(true), true)]), "{mr}");
    assert_eq!(mr["spec"]["url"], format!("https://github.com/{REPO}/pull/{n}"));
    let st = &mr["status"];
    assert_eq!((&st["ownership"], &st["ownershipReason"]), (&json!("external"), &json!("initial")), "{mr}");
    assert_eq!((&st["author"], &st["state"]), (&json!(author), &json!("open")), "{mr}");
    assert_eq!(st["headSHA"], format!("{n:040x}"));
    assert!(st.get("lastBotHeadSHA").is_none(), "{mr}");
}

#[test]
fn sweep_adopts_a_bot_pull_request_on_its_tasks_branch_into_mr_refs_once() {
    // 1. ADOPT iff a. author == botLogin, b. head branch == task/<task>,
    // c. head.repo == base.repo.
    let w = pulls_world(None, vec![pull(20, "tatara-bot", "task/member-a", Some(REPO))]);
    let before = w.everything();
    let plan = sweep_json(&w, false);
    assert_eq!(pull_line(&plan, 20)["decision"], "adopt", "{plan}");
    assert_eq!(w.everything(), before, "the plan wrote something");

    let r = sweep_json(&w, true);
    let l = pull_line(&r, 20);
    assert_eq!((&l["outcome"], &l["task"]), (&json!("adopted"), &json!("member-a")), "{l}");
    let writes: Vec<&str> = l["writes"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert!(writes[0].contains("mrRefs") && writes[1].contains("create") && writes[2].contains("ownership tatara"));
    // The Task's status.mrRefs (the field the schema defines), appended.
    let member_a = w.get("tasks", "member-a");
    assert_eq!(member_a["status"]["mrRefs"], json!(["tatara-operator#20"]));
    assert_eq!(member_a["status"]["issueRefs"], json!(["tatara-operator#412", "tatara-operator#413"]), "kept");
    // The mirror: controller-owned by member-a (controller, blockOwnerDeletion),
    // ownership tatara as ownershipForAuthor gives the bot, no reason.
    let mr = w.get("mergerequests", "mr-tatara-operator-20");
    assert_eq!(mr["metadata"]["ownerReferences"], json!([task_ref(&member_a, Some(true), true)]), "{mr}");
    assert_eq!(
        mr["spec"],
        json!({"number": 20, "projectRef": "tatara", "repositoryRef": "tatara-operator",
        "url": format!("https://github.com/{REPO}/pull/20")})
    );
    let st = &mr["status"];
    assert_eq!(st["ownership"], "tatara");
    assert!(st.get("ownershipReason").is_none(), "{mr}");
    let sha = format!("{:040x}", 20);
    assert_eq!((&st["headSHA"], &st["lastBotHeadSHA"]), (&json!(sha), &json!(sha)), "{mr}");
    assert_eq!(
        (&st["author"], &st["headBranch"], &st["state"]),
        (&json!("tatara-bot"), &json!("task/member-a"), &json!("open"))
    );
    assert_eq!(r["pullRequestCounts"]["adopt"], 1);

    // Idempotent: a second sweep adds nothing.
    let after = w.everything();
    let again = sweep_json(&w, true);
    let l = pull_line(&again, 20);
    assert_eq!((&l["decision"], &l["outcome"]), (&json!("skip"), &Value::Null), "{l}");
    assert!(l["why"].as_str().unwrap().starts_with("already adopted"), "{l}");
    assert_eq!(w.everything(), after, "a second sweep wrote something");
    assert_eq!(w.gh.writes(), vec![], "the sweep never writes to the forge");
}

#[test]
fn a_human_pull_request_on_a_task_branch_is_reviewed_never_adopted() {
    // Clause a: the author predicate. A human naming a Task's branch gets a
    // review Task (in reaction scope), never that Task's merge stream.
    let w = pulls_world(None, vec![pull(21, "mallory", "task/member-a", Some(REPO))]);
    let r = sweep_json(&w, true);
    assert_reviewed(&w, &r, 21, "mallory", "parked(backlog-sweep)");
    assert!(w.get("tasks", "member-a")["status"].get("mrRefs").is_none());
}

#[test]
fn a_bot_pull_request_whose_branch_names_no_live_task_is_not_adopted() {
    // Clause b: head branch == task/<owning-task-name>. A branch naming no
    // Task, and one naming a failed Task ("owning nothing"), adopt nothing.
    for (n, branch) in [(22, "task/no-such-task"), (23, "task/old-failed"), (24, "member-a")] {
        let w = pulls_world(None, vec![pull(n, "tatara-bot", branch, Some(REPO))]);
        assert_left_alone(&w, n, "ignoreBot");
    }
}

#[test]
fn a_fork_with_a_task_branch_is_never_adopted() {
    // Clause c: "head.repo == base.repo (NO forks, ever)"; a deleted fork
    // (no head repo) fails closed.
    for (n, head_repo) in [(25, Some("evil/tatara-operator")), (26, None)] {
        let w = pulls_world(None, vec![pull(n, "tatara-bot", "task/member-a", head_repo)]);
        assert_left_alone(&w, n, "ignoreBot");
        let r = sweep_json(&w, false);
        let why = pull_line(&r, n)["why"].as_str().unwrap().to_string();
        assert!(why.contains("no forks, ever"), "{r}");
        // Named as a person reads it, not as Rust's Option (issue 29).
        let named = head_repo.map_or("head repo unknown".to_string(), |r| format!("head repo \"{r}\""));
        assert!(why.contains(&named) && !why.contains("Some(") && !why.contains("None"), "{why}");
    }
}

#[test]
fn bot_pull_requests_that_are_not_adoptable_are_ignored_and_counted() {
    // 2. "BOT-AUTHORED and NOT ADOPTABLE -> IGNORE. FULL STOP. No Task. No
    // pod. No tokens. Never a review Task." A pin-bump PR and an orphaned
    // agent PR, even labelled and mentioning the bot.
    let bump = PullData {
        labels: vec!["tatara".into()],
        body: "@tatara-bot bump".into(),
        ..pull(30, "tatara-bot", "chore/pin-bump", Some(REPO))
    };
    let w = pulls_world(None, vec![bump, pull(31, "tatara-bot", "task/reaped-long-ago", Some(REPO))]);
    assert_left_alone(&w, 30, "ignoreBot");
    let r = sweep_json(&w, true);
    assert_eq!(r["pullRequestCounts"], json!({"adopt": 0, "ignoreBot": 2, "review": 0, "ignore": 0}));
    let text = String::from_utf8_lossy(&w.tatara_forge(&["sweep", "--project", "tatara"], "tok").stdout).to_string();
    assert!(text.contains("pull requests: 0 adopt, 2 ignore (bot), 0 review, 0 ignore"), "{text}");
}

#[test]
fn a_human_pull_request_from_a_trusted_insider_gets_a_review_task() {
    // 3. "the author is a trusted insider" (maintainerLogins), even under
    // scope labeledOrMentioned; a human is waiting (last comment): triaging.
    let waiting = PullData {
        comments: vec![Comment { id: 1, author: "alice".into(), author_type: "User".into(), body: "ping".into() }],
        ..pull(40, "maint", "fix/a", Some(REPO))
    };
    let w = pulls_world(Some("labeledOrMentioned"), vec![waiting]);
    let r = sweep_json(&w, true);
    assert!(pull_line(&r, 40)["disposition"]["why"].as_str().unwrap().contains("trusted insider"), "{r}");
    assert_reviewed(&w, &r, 40, "maint", "triaging");
    // Idempotent: the next sweep finds the mirror controlled and mints nothing.
    let after = w.everything();
    let again = sweep_json(&w, true);
    let l = pull_line(&again, 40);
    assert_eq!((&l["decision"], &l["outcome"]), (&json!("skip"), &Value::Null), "{l}");
    assert!(l["why"].as_str().unwrap().ends_with("reviews tatara-operator!40 and controls its mirror"), "{l}");
    assert_eq!(w.everything(), after);
}

#[test]
fn a_human_pull_request_gets_a_review_task_when_the_reaction_scope_is_not_labeled_or_mentioned() {
    // 3. "Scm.PRReactionScope is not labeledOrMentioned": unset and `all`.
    for (n, scope) in [(41, None), (42, Some("all"))] {
        let w = pulls_world(scope, vec![pull(n, "bob", "fix/b", Some("bob/tatara-operator"))]);
        let r = sweep_json(&w, true);
        assert!(pull_line(&r, n)["disposition"]["why"].as_str().unwrap().contains("not labeledOrMentioned"), "{r}");
        assert_reviewed(&w, &r, n, "bob", "parked(backlog-sweep)");
    }
}

#[test]
fn a_human_pull_request_carrying_the_trigger_label_gets_a_review_task() {
    let labeled = PullData { labels: vec!["tatara".into()], ..pull(43, "bob", "fix/c", Some(REPO)) };
    let w = pulls_world(Some("labeledOrMentioned"), vec![labeled]);
    let r = sweep_json(&w, true);
    assert!(pull_line(&r, 43)["disposition"]["why"].as_str().unwrap().contains("trigger label"), "{r}");
    assert_reviewed(&w, &r, 43, "bob", "parked(backlog-sweep)");
}

#[test]
fn a_human_pull_request_mentioning_the_bot_gets_a_review_task() {
    let mention = PullData { body: "@tatara-bot could you look?".into(), ..pull(44, "bob", "fix/d", Some(REPO)) };
    let w = pulls_world(Some("labeledOrMentioned"), vec![mention]);
    let r = sweep_json(&w, true);
    assert!(pull_line(&r, 44)["disposition"]["why"].as_str().unwrap().contains("mentions the bot"), "{r}");
    assert_reviewed(&w, &r, 44, "bob", "parked(backlog-sweep)");
}

#[test]
fn a_human_pull_request_out_of_reaction_scope_is_ignored() {
    // 4. "Everything else is IGNORED": not an insider, scope
    // labeledOrMentioned, no trigger label, no mention.
    let other_label = PullData { labels: vec!["bug".into()], ..pull(45, "bob", "fix/e", Some(REPO)) };
    let w = pulls_world(Some("labeledOrMentioned"), vec![other_label]);
    assert_left_alone(&w, 45, "ignore");
    assert_eq!(sweep_json(&w, false)["pullRequestCounts"]["ignore"], 1);
}

#[test]
fn review_mints_share_the_issue_mints_budget() {
    // "through the same mint stage, budget and naming as issue mints":
    // maxNewTasksPerSweep 2 with two orphan issues first leaves the review
    // for the next pass, which mints it.
    let mut gh = gh_state(&[("tok", "maint")]);
    gh.issues.insert(
        REPO.into(),
        (50..52)
            .map(|n| IssueData { number: n, author: "alice".into(), open: true, labels: vec![], comments: vec![] })
            .collect(),
    );
    gh.pulls.insert(REPO.into(), vec![pull(60, "bob", "fix/f", Some(REPO))]);
    let w = World::new(
        |s| {
            s.patch("projects", NS, "tatara", &json!({"spec": {"maxNewTasksPerSweep": 2}}), false).unwrap();
        },
        gh,
    );
    let r = sweep_json(&w, true);
    assert_eq!(r["minted"].as_array().unwrap().len(), 2, "{r}");
    let l = pull_line(&r, 60);
    assert_eq!((&l["decision"], &l["outcome"]), (&json!("deferred"), &Value::Null), "{l}");
    assert!(l["why"].as_str().unwrap().contains("maxNewTasksPerSweep"), "{l}");
    assert_eq!(r["capHits"][0]["cap"], "maxNewTasksPerSweep");
    let r = sweep_json(&w, true);
    assert_eq!(r["minted"], json!([]));
    assert_reviewed(&w, &r, 60, "bob", "parked(backlog-sweep)");
}

#[test]
fn an_adoption_into_a_task_whose_mr_refs_are_full_writes_nothing() {
    // "respect its maxItems": 50 in the CRD. The API server would refuse a
    // 51st (422); the sweep does not try, and says why.
    let w = World::new(
        |s| {
            let full: Vec<String> = (100..150).map(|n| format!("tatara-operator#{n}")).collect();
            s.patch("tasks", NS, "member-a", &json!({"status": {"mrRefs": full}}), true).unwrap();
        },
        {
            let mut gh = gh_state(&[("tok", "maint")]);
            gh.pulls.insert(REPO.into(), vec![pull(70, "tatara-bot", "task/member-a", Some(REPO))]);
            gh
        },
    );
    let before = w.everything();
    let r = sweep_json(&w, true);
    let l = pull_line(&r, 70);
    assert_eq!((&l["disposition"]["disposition"], &l["decision"]), (&json!("adopt"), &json!("skip")), "{l}");
    assert!(l["why"].as_str().unwrap().contains("maxItems is 50"), "{l}");
    assert_eq!(w.everything(), before);
}
