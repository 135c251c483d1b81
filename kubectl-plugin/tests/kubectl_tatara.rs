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
    // The hint lists the namespace that was searched (issue 29).
    assert!(stderr.contains("list them with `kubectl get issues,mergerequests,tasks -n tatara`"), "{stderr}");
    assert_eq!(w.tatara(&["owners", "pod/a"], None).status.code(), Some(2));
    // A number with no repository cannot name anything: a usage error
    // naming the expected form, not "not found" (issue 29).
    for target in ["#9", "!9"] {
        let out = w.tatara(&["owners", target], None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{target}: {stderr}");
        assert!(stderr.contains("REPO#NUMBER") && stderr.contains("tatara-operator#9"), "{stderr}");
    }
    // -A: a clear refusal, not clap's "tip: to pass '-A' as a value".
    for args in [&["owners", "-A"][..], &["owners", "nope", "-A"], &["owners", "--all-namespaces", "task/umbrella"]] {
        let out = w.tatara(args, None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("tip:") && !stderr.contains("-- -A"), "{args:?}: {stderr}");
        assert!(stderr.contains("across all namespaces") && stderr.contains("-n NAMESPACE"), "{args:?}: {stderr}");
    }
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
    assert_eq!(lines[2].split_whitespace().skip(1).collect::<Vec<_>>(), ["owner", "yes", "open", "rules", "3,5"]);
    assert!(lines[3].starts_with("Task/umbrella "), "{tree}");
    assert_eq!(lines[4].split_whitespace().skip(1).take(2).collect::<Vec<_>>(), ["owner", "no"]);
    assert!(tree.contains("\n! rule 5: ") && tree.contains("\n! rule 3: "), "{tree}");
    // Each rule is named once on its line, by the marker (issue 29: "! rule
    // 5: ...; rule 5: ...").
    for line in tree.lines().filter(|l| l.starts_with("! rule ")) {
        assert_eq!(line.matches("rule ").count(), 1, "{line}");
    }
    assert!(tree.contains("but no controller owner, so it is worked by nobody and re-minted by nobody"), "{tree}");
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
    // A template that fails exits 1, as kubectl's (issue 29); 2 is for
    // bad flags.
    for args in [
        &["owners", "tatara-operator#500", "-o", "jsonpath={.nope}", "--allow-missing-template-keys=false"][..],
        &["owners", "tatara-operator#500", "-o", "jsonpath={.owners["],
        &["repair", "-o", "jsonpath={.nope}", "--allow-missing-template-keys=false"],
    ] {
        let out = w.tatara(args, None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.contains("jsonpath") && !stderr.contains("Usage:"), "{stderr}");
    }
    assert_eq!(w.tatara(&["owners", "tatara-operator#500", "-o", "bogus"], None).status.code(), Some(2));

    // --color always colours even when piped; never and auto (piped) do not.
    // RULES in ascending order, each once: never both 5,3 and 3,5 (issue 29).
    let always = stdout(&w, &["owners", "iss-tatara-operator-500", "--color", "always"]);
    assert!(always.contains("\u{1b}[31mrules 3,5\u{1b}[0m"), "{always:?}");
    assert!(!stdout(&w, &["--color=never", "owners", "iss-tatara-operator-500"]).contains('\u{1b}'));

    // repair: narrow columns, the rules' words only with -o wide; a
    // NAMESPACE column only with -A.
    let plan = stdout(&w, &["repair"]);
    // The plan-only note goes to stderr, stdout stays the table (issue 29).
    assert!(!plan.contains("(plan only"), "{plan}");
    let out = w.tatara(&["repair"], None);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "(plan only: run again with --apply to write these repairs; -o wide says why)\n"
    );
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
fn sweep_plans_a_150_issue_backlog_within_the_budget_all_parked() {
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
    // The plan-only note is for the person, on stderr: stdout is the plan
    // alone, for a pipe (issue 29).
    assert!(!text.contains("(plan only"), "{text}");
    let note = String::from_utf8_lossy(&table.stderr);
    let last = note.lines().last();
    assert_eq!(last, Some("(plan only: the operator mints and adopts; --apply asks it to run its own sweep now)"));
    // Reasons are worded for people: no Rust Debug text (`Some("…")`, a
    // variant name) in any form a user reads (issue 29).
    let wide = w.tatara_forge(&["sweep", "--project", "tatara", "-o", "wide"], "tok-maint");
    let wide = String::from_utf8_lossy(&wide.stdout);
    for shown in [&*text, &*wide, &plan.to_string()] {
        for debug in ["Some(", "None", "ParkedBacklogSweep", "(Triaging)"] {
            assert!(!shown.contains(debug), "{debug:?} in:\n{shown}");
        }
    }

    // The sweep never writes to the forge.
    assert_eq!(w.gh.writes(), vec![]);
}

#[test]
fn sweep_plans_triaging_when_a_human_waits_and_never_past_max_open_tasks() {
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
    let r = ok_json(&w.tatara_forge(&["sweep", "--project", "tatara", "-o", "json"], "tok"));
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
    // The table says it once, on stdout; stderr does not repeat it as a warning.
    let table = w.tatara_forge(&["sweep", "--project", "tatara"], "tok");
    let (stdout, stderr) = (String::from_utf8_lossy(&table.stdout), String::from_utf8_lossy(&table.stderr));
    assert_eq!(stdout.matches("cap maxOpenTasks bound this pass").count(), 1, "{stdout}");
    assert!(!stderr.contains("cap"), "{stderr}");
}

// --- Pull requests: adopt, ignore, or review, planned ---

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

/// The plan of a sweep (`-o json`), which writes nothing anywhere.
fn sweep_json(w: &World) -> Value {
    let before = w.everything();
    let r = ok_json(&w.tatara_forge(&["sweep", "--project", "tatara", "-o", "json"], "tok"));
    assert_eq!(w.everything(), before, "the plan wrote something");
    assert_eq!(w.gh.writes(), vec![], "the sweep never writes to the forge");
    r
}

/// A pull request the plan leaves alone, with this disposition.
fn assert_left_alone(w: &World, n: u64, disposition: &str) {
    let r = sweep_json(w);
    let l = pull_line(&r, n);
    assert_eq!(l["disposition"]["disposition"], disposition, "{r}");
    assert_eq!(l["decision"], "ignore", "{l}");
}

/// The plan reviews `n` at `stage` with the review-kind Task
/// IntakeTaskName(kind review) names; only the operator mints it.
fn assert_reviewed(r: &Value, n: u64, stage: &str) {
    let l = pull_line(r, n);
    let name = review_task_name("tatara", "tatara-operator", n as i64);
    assert_eq!(l["disposition"]["disposition"], "review", "{l}");
    assert_eq!((&l["decision"], &l["stage"]), (&json!("mint"), &json!(stage)), "{l}");
    assert_eq!(l["task"], name.as_str());
}

#[test]
fn sweep_plans_to_adopt_a_bot_pull_request_on_its_tasks_branch() {
    // 1. ADOPT iff a. author == botLogin, b. head branch == task/<task>,
    // c. head.repo == base.repo. The plan only: the operator adopts.
    let w = pulls_world(None, vec![pull(20, "tatara-bot", "task/member-a", Some(REPO))]);
    let plan = sweep_json(&w);
    let l = pull_line(&plan, 20);
    assert_eq!((&l["decision"], &l["task"]), (&json!("adopt"), &json!("member-a")), "{plan}");
    assert_eq!(plan["pullRequestCounts"]["adopt"], 1);
}

#[test]
fn a_human_pull_request_on_a_task_branch_is_reviewed_never_adopted() {
    // Clause a: the author predicate. A human naming a Task's branch gets a
    // review Task (in reaction scope), never that Task's merge stream.
    let w = pulls_world(None, vec![pull(21, "mallory", "task/member-a", Some(REPO))]);
    let r = sweep_json(&w);
    assert_reviewed(&r, 21, "parked(backlog-sweep)");
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
        let r = sweep_json(&w);
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
    let r = sweep_json(&w);
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
    let r = sweep_json(&w);
    assert!(pull_line(&r, 40)["disposition"]["why"].as_str().unwrap().contains("trusted insider"), "{r}");
    assert_reviewed(&r, 40, "triaging");
}

#[test]
fn a_human_pull_request_gets_a_review_task_when_the_reaction_scope_is_not_labeled_or_mentioned() {
    // 3. "Scm.PRReactionScope is not labeledOrMentioned": unset and `all`.
    for (n, scope) in [(41, None), (42, Some("all"))] {
        let w = pulls_world(scope, vec![pull(n, "bob", "fix/b", Some("bob/tatara-operator"))]);
        let r = sweep_json(&w);
        assert!(pull_line(&r, n)["disposition"]["why"].as_str().unwrap().contains("not labeledOrMentioned"), "{r}");
        assert_reviewed(&r, n, "parked(backlog-sweep)");
    }
}

#[test]
fn a_human_pull_request_carrying_the_trigger_label_gets_a_review_task() {
    let labeled = PullData { labels: vec!["tatara".into()], ..pull(43, "bob", "fix/c", Some(REPO)) };
    let w = pulls_world(Some("labeledOrMentioned"), vec![labeled]);
    let r = sweep_json(&w);
    assert!(pull_line(&r, 43)["disposition"]["why"].as_str().unwrap().contains("trigger label"), "{r}");
    assert_reviewed(&r, 43, "parked(backlog-sweep)");
}

#[test]
fn a_human_pull_request_mentioning_the_bot_gets_a_review_task() {
    let mention = PullData { body: "@tatara-bot could you look?".into(), ..pull(44, "bob", "fix/d", Some(REPO)) };
    let w = pulls_world(Some("labeledOrMentioned"), vec![mention]);
    let r = sweep_json(&w);
    assert!(pull_line(&r, 44)["disposition"]["why"].as_str().unwrap().contains("mentions the bot"), "{r}");
    assert_reviewed(&r, 44, "parked(backlog-sweep)");
}

#[test]
fn a_human_pull_request_out_of_reaction_scope_is_ignored() {
    // 4. "Everything else is IGNORED": not an insider, scope
    // labeledOrMentioned, no trigger label, no mention.
    let other_label = PullData { labels: vec!["bug".into()], ..pull(45, "bob", "fix/e", Some(REPO)) };
    let w = pulls_world(Some("labeledOrMentioned"), vec![other_label]);
    assert_left_alone(&w, 45, "ignore");
    assert_eq!(sweep_json(&w)["pullRequestCounts"]["ignore"], 1);
}

#[test]
fn review_mints_share_the_issue_mints_budget() {
    // "through the same mint stage, budget and naming as issue mints":
    // maxNewTasksPerSweep 2 with two orphan issues first leaves the review
    // for the next pass.
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
    let r = sweep_json(&w);
    let mints = r["issues"].as_array().unwrap().iter().filter(|l| l["decision"] == "mint").count();
    assert_eq!(mints, 2, "{r}");
    let l = pull_line(&r, 60);
    assert_eq!(l["decision"], "deferred", "{l}");
    assert!(l["why"].as_str().unwrap().contains("maxNewTasksPerSweep"), "{l}");
    assert_eq!(r["capHits"][0]["cap"], "maxNewTasksPerSweep");
}

#[test]
fn an_adoption_into_a_task_whose_mr_refs_are_full_is_planned_as_skip() {
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
    let r = sweep_json(&w);
    let l = pull_line(&r, 70);
    assert_eq!((&l["disposition"]["disposition"], &l["decision"]), (&json!("adopt"), &json!("skip")), "{l}");
    assert!(l["why"].as_str().unwrap().contains("maxItems is 50"), "{l}");
}

// --- sweep --apply: the operator's own sweep, asked for ---

/// The seeded world with an issueScan cron, a second Repository of the
/// project and one of another project, each stamped by an earlier pass.
fn scheduled_world() -> World {
    let w = World::new(
        |s| {
            let cron = json!({"spec": {"scm": {"cron": {"issueScan": {"schedule": "0 */4 * * *"}}}}});
            s.patch("projects", NS, "tatara", &cron, false).unwrap();
            let status =
                json!({"status": {"lastIssueScan": "2026-12-04T04:00:00Z", "webhookURL": "https://hooks/tatara"}});
            s.patch("projects", NS, "tatara", &status, true).unwrap();
            let stamp = json!({"status": {"lastIssueScan": "2026-12-04T04:00:07Z"}});
            s.patch("repositories", NS, "tatara-operator", &stamp, true).unwrap();
            for (name, project) in [("tatara-cli", "tatara"), ("elsewhere", "other")] {
                let url = format!("https://github.com/acme/{name}");
                s.seed(
                    "repositories",
                    NS,
                    json!({"metadata": {"name": name},
                        "spec": {"projectRef": project, "url": url, "reingestSchedule": "0 3 * * *"}}),
                )
                .unwrap();
                s.patch("repositories", NS, name, &stamp, true).unwrap();
            }
        },
        gh_state(&[]),
    );
    // The seeding patches are not the plugin's writes.
    w.api.store.lock().unwrap().take_writes();
    w
}

/// `kubectl get <what> -o jsonpath=<path>` through the real kubectl.
fn kubectl_get(w: &World, what: &[&str], path: &str) -> String {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    let jsonpath = format!("jsonpath={path}");
    args.extend_from_slice(&["-o", &jsonpath]);
    let out = w.kubectl.run(&args);
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The operator sweeps a Repository once its `status.lastIssueScan` and the
/// Project's are gone (`repoIssueScanBase`, `dueBase`,
/// `internal/controller/projectscan.go:144-149, 49-54`), so `--apply`
/// clears exactly those, on the status subresource, Repositories before the
/// Project (whose write wakes its reconcile), and mints nothing.
#[test]
fn sweep_apply_asks_the_operator_to_sweep_by_clearing_the_issue_scan_stamps() {
    let w = scheduled_world();
    let before_tasks = w.all("tasks");
    let before_issues = w.all("issues");
    // No forge token: --apply leaves the forge to the operator.
    let out = w.tatara(&["sweep", "--project", "tatara", "--apply"], None);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for repo in ["tatara-operator", "tatara-cli"] {
        assert!(
            stdout.contains(&format!("the operator sweeps repository {repo} of project tatara on its next scan tick")),
            "{stdout}"
        );
    }
    assert!(stdout.contains("on its next scan tick (within about 30 s), minting and adopting under its own budgets"));
    assert!(stdout.contains("cleared status.lastIssueScan (was 2026-12-04T04:00:00Z)"), "{stdout}");
    assert!(!stdout.contains("elsewhere"), "another project's Repository: {stdout}");

    // What the API server holds now, read with kubectl.
    assert_eq!(kubectl_get(&w, &["project", "tatara"], "{.status.lastIssueScan}"), "");
    assert_eq!(kubectl_get(&w, &["project", "tatara"], "{.status.webhookURL}"), "https://hooks/tatara", "kept");
    assert_eq!(kubectl_get(&w, &["project", "tatara"], "{.spec.scm.cron.issueScan.schedule}"), "0 */4 * * *");
    for repo in ["tatara-operator", "tatara-cli"] {
        assert_eq!(kubectl_get(&w, &["repository", repo], "{.status.lastIssueScan}"), "", "{repo}");
    }
    assert_eq!(kubectl_get(&w, &["repository", "elsewhere"], "{.status.lastIssueScan}"), "2026-12-04T04:00:07Z");

    // Three status patches, the Project's last, and no Task, no Issue.
    let writes: Vec<(String, String, Option<String>, String)> = w
        .api
        .store
        .lock()
        .unwrap()
        .writes()
        .iter()
        .map(|x| (x.verb.clone(), x.resource.clone(), x.subresource.clone(), x.name.clone()))
        .collect();
    let status = Some("status".to_string());
    assert_eq!(
        writes,
        [
            ("patch".into(), "repositories".into(), status.clone(), "tatara-cli".into()),
            ("patch".into(), "repositories".into(), status.clone(), "tatara-operator".into()),
            ("patch".into(), "projects".into(), status, "tatara".into()),
        ]
    );
    assert_eq!((w.all("tasks"), w.all("issues")), (before_tasks, before_issues), "the plugin minted");

    // Again: nothing left to clear, so nothing is written, and it still says
    // what the operator does next.
    let again = ok_json(&w.tatara(&["sweep", "--project", "tatara", "--apply", "-o", "json"], None));
    let outcomes: Vec<(&str, &str, &str)> = again["triggers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["kind"].as_str().unwrap(), t["name"].as_str().unwrap(), t["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("Repository", "tatara-cli", "alreadyClear"),
            ("Repository", "tatara-operator", "alreadyClear"),
            ("Project", "tatara", "alreadyClear")
        ]
    );
    assert_eq!(again["next"].as_array().unwrap().len(), 2, "{again}");
    assert_eq!(w.api.store.lock().unwrap().writes().len(), 3, "a second --apply wrote");
}

/// Where the operator's scheduler would not sweep whatever the stamps say,
/// `--apply` writes nothing and says why and what to do, exit 1: no
/// `spec.scm.cron` (`projectscan.go:1567`), and the break-glass annotation
/// (`sweep.go:209-211`).
#[test]
fn sweep_apply_refuses_where_the_operator_would_not_sweep() {
    // The seeded Project has no cron at all.
    let w = World::new(|_| {}, gh_state(&[]));
    let out = w.tatara(&["sweep", "--project", "tatara", "--apply"], None);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("error: the tatara operator will not sweep project \"tatara\", so nothing was asked of it")
            && stderr.contains("has no spec.scm.cron")
            && stderr.contains("set spec.scm.cron.issueScan.schedule"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("has no spec.scm.cron").count(), 1, "one cause, said once: {stderr}");
    assert!(stdout.contains("refused"), "{stdout}");
    assert_eq!(w.api.store.lock().unwrap().writes().len(), 0);

    let w = scheduled_world();
    let ann = json!({"metadata": {"annotations": {"tatara.dev/sweep": "disabled"}}});
    {
        let mut store = w.api.store.lock().unwrap();
        store.patch("projects", NS, "tatara", &ann, false).unwrap();
        store.take_writes();
    }
    let out = w.tatara(&["sweep", "--project", "tatara", "--apply"], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("kubectl annotate project tatara tatara.dev/sweep-"), "{stderr}");
    assert_eq!(w.api.store.lock().unwrap().writes().len(), 0);
    assert_eq!(kubectl_get(&w, &["project", "tatara"], "{.status.lastIssueScan}"), "2026-12-04T04:00:00Z");
}

/// A status patch the API server refuses is named with the RBAC it needs,
/// exit 4; the writes before it stand, and the operator's next step is not
/// promised for a Project whose stamp is still there.
#[test]
fn sweep_apply_names_a_refused_status_patch() {
    let w = scheduled_world();
    w.api.forbid(None, "patch", "projects/status");
    let out = w.tatara(&["sweep", "--project", "tatara", "--apply"], None);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(4), "{stdout}\n{stderr}");
    assert!(stderr.contains("could not clear status.lastIssueScan on project/tatara"), "{stderr}");
    assert!(stderr.contains("kubectl auth can-i patch projects.tatara.dev --subresource=status -n tatara"), "{stderr}");
    assert!(stdout.contains("NOT cleared: status.lastIssueScan"), "{stdout}");
    assert!(!stdout.contains("the operator sweeps"), "{stdout}");
    assert_eq!(kubectl_get(&w, &["repository", "tatara-operator"], "{.status.lastIssueScan}"), "");
    assert_eq!(kubectl_get(&w, &["project", "tatara"], "{.status.lastIssueScan}"), "2026-12-04T04:00:00Z");
}
