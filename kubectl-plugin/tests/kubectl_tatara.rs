//! `kubectl tatara` through the real `kubectl`: kubectl finds the plugin on
//! the PATH and runs it against the fake Kubernetes API
//! (`testkit::fakeapi`, seeded with objects valid under the real CRD
//! schemas, vendored in `shared/testkit/fixtures/crds/tatara/`) and a fake
//! GitHub serving GitHub's REST shapes to octocrab. Each test checks what
//! changed on both.

use std::process::{Child, Command, Output};

use rules::ownership::naming::takeover_task_name;
use serde_json::{Value, json};
use testkit::fake_github::{self, Comment, FakeGitHub, IssueData, PullData};
use testkit::fakeapi::{self, FakeApi, Store};
use testkit::kubectl::{KUBECTL, Kubectl};

const NS: &str = "tatara";
const REPO: &str = "acme/tatara-operator";
const REFUSAL: &str = "author not in maintainer set: only a project maintainer may hand this merge request over";

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
        ("repair", &["--apply", "-A, --all-namespaces"]),
        ("sweep", &["--project <PROJECT>", "--apply", "--github-token <TOKEN>", "--forge-url <URL>"]),
        (
            "takeover",
            &[
                "<REPO#NUMBER>",
                "--project <PROJECT>",
                "--message <TEXT>",
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

#[test]
fn owners_shows_the_tree_with_every_violation_marked_in_table_and_json() {
    let w = World::new(
        |s| {
            let member = s.get("tasks", NS, "member-a").unwrap();
            let umbrella = s.get("tasks", NS, "umbrella").unwrap();
            // Plain owners only, one without blockOwnerDeletion: rules 5 and 3.
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
    );
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

    let out = w.tatara(&["owners", "nope"], None);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "), "{out:?}");
}

/// Runs `kubectl tatara <args>` and returns its stdout, asserting success.
fn stdout(w: &World, args: &[&str]) -> String {
    let out = w.tatara(args, None);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn owners_and_repair_print_as_kubectl_users_expect() {
    let w = World::new(
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
    );
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
        wide.lines().next().unwrap().ends_with("WHY") && wide.contains("promote the oldest surviving owner"),
        "{wide}"
    );
    assert_eq!(stdout(&w, &["repair", "-o", "name"]), "issue.tatara.dev/iss-tatara-operator-500\n");
    let out = w.tatara(&["repair", "-o", "jsonpath={.plan[*].name}"], None);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "iss-tatara-operator-500");

    // A repair that worked is no error: nothing on stderr, piped or not.
    let out = w.tatara(&["repair", "--apply"], None);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "a successful repair logs nothing a human must read");
    assert!(String::from_utf8_lossy(&out.stdout).contains("applied 1 repair(s)"), "{out:?}");

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
                // (rule 3), in varying order: the repair promotes the oldest.
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

    // The oldest surviving owner is umbrella (seeded first) in every case:
    // promoted where no controller was, kept where it already was.
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
                assert_eq!(c[0], "umbrella", "{obj}");
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
    let pr = |number: u64, author: &str, ty: &str, head: &str, head_repo: Option<&str>| PullData {
        number,
        author: author.into(),
        author_type: ty.into(),
        head_ref: head.into(),
        head_sha: format!("{number:040x}"),
        head_repo: head_repo.map(str::to_string),
        open: true,
        labels: vec![],
        body: String::new(),
        comments: vec![],
    };
    s.pulls.insert(
        REPO.into(),
        vec![
            pr(9, "tatara-bot", "Bot", "task/member-b", Some(REPO)),
            pr(3001, "tatara-bot", "Bot", "task/member-b", Some("evil/tatara-operator")),
            pr(3002, "tatara-bot", "Bot", "chore/pin-bump", Some(REPO)),
            pr(3003, "bob", "User", "fix/typo", Some("bob/tatara-operator")),
        ],
    );
    s
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
    for want in [("#9", "adopt"), ("#3001", "ignoreBot"), ("#3002", "ignoreBot"), ("#3003", "review")] {
        assert!(disp.iter().any(|(k, d)| k.ends_with(want.0) && d == want.1), "{want:?} in {disp:?}");
    }
    let table = w.tatara_forge(&["sweep", "--project", "tatara"], "tok-maint");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("parked(backlog-sweep)") && text.contains("no forks, ever"), "{text}");

    let mut minted_all: Vec<String> = Vec::new();
    let mut passes = 0;
    loop {
        passes += 1;
        let r = ok_json(&w.tatara_forge(&["sweep", "--project", "tatara", "--apply", "-o", "json"], "tok-maint"));
        let minted: Vec<String> =
            r["minted"].as_array().unwrap().iter().map(|m| m["key"].as_str().unwrap().to_string()).collect();
        assert!(minted.len() <= 5, "pass {passes} minted {}", minted.len());
        for l in r["issues"].as_array().unwrap().iter().filter(|l| l["decision"] == "mint") {
            assert_eq!(l["stage"], "parked(backlog-sweep)", "{l}");
        }
        for k in &minted {
            assert!(!minted_all.contains(k), "pass {passes} minted {k} again");
        }
        if minted.is_empty() {
            break;
        }
        minted_all.extend(minted);
        assert!(passes < 40, "the sweep does not converge");
    }
    assert_eq!(minted_all.len(), 151, "every allowed open orphan minted once");
    assert_eq!(passes, 32);
    // Every minted Task is parked(backlog-sweep) and controls its Issue CR.
    let tasks = w.all("tasks");
    let minted_tasks: Vec<&Value> =
        tasks.iter().filter(|t| t["metadata"]["name"].as_str().unwrap().starts_with("mt-")).collect();
    assert_eq!(minted_tasks.len(), 151);
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

/// The seeded MR #9 as an external MR a human pushed to: the state a
/// takeover exists for.
fn external_mr(s: &mut Store) {
    let patch = json!({"status": {"ownership": "external", "ownershipReason": "external-push:fff000",
        "headSHA": "fff000", "lastBotHeadSHA": "abc123"}});
    s.patch("mergerequests", NS, "mr-tatara-operator-9", &patch, true).unwrap();
}

fn takeover_gh() -> fake_github::State {
    let mut s = gh_state(&[("tok-maint", "maint"), ("tok-mallory", "mallory")]);
    s.pulls.insert(
        REPO.into(),
        vec![PullData {
            number: 9,
            author: "tatara-bot".into(),
            author_type: "Bot".into(),
            head_ref: "task/member-b".into(),
            head_sha: "fff000fff000fff000fff000fff000fff000fff0".into(),
            head_repo: Some(REPO.into()),
            open: true,
            labels: vec![],
            body: String::new(),
            comments: vec![],
        }],
    );
    s
}

#[test]
fn a_non_maintainer_takeover_changes_nothing_and_exits_with_the_403_text() {
    let w = World::new(external_mr, takeover_gh());
    let before = w.everything();
    let out = w.tatara_forge(&["takeover", "tatara-operator#9", "--project", "tatara", "-o", "json"], "tok-mallory");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Exit 4: forbidden (not a maintainer), as documented.
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("HTTP 403") && stderr.contains(REFUSAL), "{stderr}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert_eq!(w.everything(), before, "a refused takeover changed the cluster");
    assert_eq!(w.gh.writes(), vec![], "a refused takeover wrote to the forge");
    // No token at all: a clear error, nothing changed either.
    let out = w.tatara(&["takeover", "tatara-operator#9", "--project", "tatara", "--forge-url", &w.gh.url()], None);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("GITHUB_TOKEN"), "{out:?}");
    assert_eq!(w.everything(), before);
}

#[test]
fn a_maintainer_takeover_leaves_exactly_the_spec_state_and_reuses_its_task() {
    let w = World::new(external_mr, takeover_gh());
    let live = "fff000fff000fff000fff000fff000fff000fff0";
    let task_name = takeover_task_name("tatara", "tatara-operator", 9);
    let tasks_before = w.all("tasks").len();
    let issues_before = w.all("issues");
    let r =
        ok_json(&w.tatara_forge(&["takeover", "tatara-operator#9", "--project", "tatara", "-o", "json"], "tok-maint"));
    assert_eq!(r["caller"], "maint");
    assert_eq!(r["taskStep"], "mint");
    assert_eq!(r["task"], task_name.as_str());

    // The MergeRequest: ownership tatara, takeover-requested-by:<login>,
    // lastBotHeadSHA bumped to the live head; everything else kept.
    let mr = w.get("mergerequests", "mr-tatara-operator-9");
    assert_eq!(mr["status"]["ownership"], "tatara");
    assert_eq!(mr["status"]["ownershipReason"], "takeover-requested-by:maint");
    assert_eq!(mr["status"]["lastBotHeadSHA"], live);
    assert!(mr["status"]["ownershipChangedAt"].is_string());
    assert_eq!(mr["status"]["ciStatus"], "green");
    assert_eq!(controllers(&mr), vec!["member-b"], "owner references are not the takeover's business");

    // The one takeover Task: straight into under-implementation, bound to
    // the MR's head branch, owning nothing.
    let t = w.get("tasks", &task_name);
    assert_eq!(t["spec"]["kind"], "takeover");
    assert_eq!(t["spec"]["initialState"], "under-implementation");
    assert_eq!(t["spec"]["repositoryRef"], "tatara-operator");
    assert_eq!(t["metadata"]["annotations"]["tatara.dev/takeover-head-branch"], "task/member-b");
    assert_eq!(w.all("tasks").len(), tasks_before + 1);
    let uid = t["metadata"]["uid"].as_str().unwrap();
    assert!(!w.everything().iter().any(|o| o["metadata"]["ownerReferences"].to_string().contains(uid)));
    assert_eq!(w.all("issues"), issues_before);

    // The forge: exactly one write, the caller's comment on the PR.
    let writes = w.gh.writes();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(writes[0].method, "POST");
    assert_eq!(writes[0].path, "/repos/acme/tatara-operator/issues/9/comments");
    assert_eq!(writes[0].login, "maint");

    // Again at the same head: nothing to do, no second comment.
    let r =
        ok_json(&w.tatara_forge(&["takeover", "tatara-operator#9", "--project", "tatara", "-o", "json"], "tok-maint"));
    assert_eq!(r["comment"], Value::Null);
    assert_eq!(r["taskStep"], "leave");
    assert_eq!(w.gh.writes().len(), 1);

    // A later round: stood down (parked ownership-lost, external push); the
    // same Task is un-parked, never re-minted.
    {
        let mut s = w.api.store.lock().unwrap();
        s.patch(
            "tasks",
            NS,
            &task_name,
            &json!({"status": {"state": "under-implementation",
            "parkReason": "ownership-lost", "parkedAt": "2026-11-29T00:00:00Z"}}),
            true,
        )
        .unwrap();
        s.patch(
            "mergerequests",
            NS,
            "mr-tatara-operator-9",
            &json!({"status": {"ownership": "external",
            "ownershipReason": "external-push:aaa111"}}),
            true,
        )
        .unwrap();
    }
    // (table output this time)
    let out = w.tatara_forge(&["takeover", "tatara-operator#9", "--project", "tatara"], "tok-maint");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("unpark") && text.contains("commented on the pull request"), "{text}");
    let t2 = w.get("tasks", &task_name);
    assert_eq!(t2["metadata"]["uid"], t["metadata"]["uid"], "the takeover Task was re-minted");
    assert!(t2["status"].get("parkReason").is_none(), "{t2}");
    assert_eq!(t2["status"]["state"], "under-implementation");
    let mr = w.get("mergerequests", "mr-tatara-operator-9");
    assert_eq!(mr["status"]["ownershipReason"], "takeover-requested-by:maint");
    assert_eq!(w.all("tasks").len(), tasks_before + 1);
    assert_eq!(w.gh.writes().len(), 2);
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
    let mut gh = backlog();
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
    assert_eq!(planned(&ra).len(), 5);
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
    assert_eq!(minted_tasks, 5);
    for key in &all {
        let n = key.rsplit_once('#').unwrap().1;
        let iss = w.get("issues", &format!("iss-tatara-operator-{n}"));
        assert_eq!(controllers(&iss).len(), 1, "{iss}");
    }
    assert_eq!(w.api.store.lock().unwrap().two_controller_rejections, 0);
}
