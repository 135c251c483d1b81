//! `kubectl tatara takeover` through the real `kubectl`, against the fake
//! Kubernetes API, a fake GitHub and the fake tatara operator
//! (`testkit::fake_operator`, which answers as the operator's
//! `internal/restapi/takeover.go` at d22349a does and mirrors the pull
//! request's comments as its webhook would). The plugin asks; the operator
//! acts: every test checks that the plugin itself wrote nothing to the
//! cluster, how many comments reached the forge and how many requests the
//! operator got.
//!
//! Ported from the operator's `internal/restapi/takeover_test.go` where its
//! cases are visible to a client: the maintainer 403, the idempotent
//! already-tatara 200, the unresumable-park 409, the controller hand-over.

use std::process::Output;

use rules::ownership::naming::takeover_task_name;
use serde_json::{Value, json};
use testkit::fake_github::{self, Comment, FakeGitHub, PullData};
use testkit::fake_operator::{self, FakeOperator, OPERATOR_USER};
use testkit::fakeapi::{self, FakeApi, Store};
use testkit::kubectl::Kubectl;

const NS: &str = "tatara";
const REPO: &str = "acme/tatara-operator";
const LIVE: &str = "fff000fff000fff000fff000fff000fff000fff0";
const REFUSAL: &str = "author not in maintainer set: only a project maintainer may hand this merge request over";
const OIDC: &str = "oidc-maint";

struct World {
    _rt: tokio::runtime::Runtime,
    api: FakeApi,
    gh: FakeGitHub,
    op: FakeOperator,
    kubectl: Kubectl,
    /// `XDG_CONFIG_HOME` of every run: tatara-cli's token store lives here.
    xdg: tempfile::TempDir,
}

/// MR #9 after a human push: `external`, still controlled by member-b (the
/// Task the operator's endpoint must be asked as).
fn external_mr(s: &mut Store, comments: Value) {
    let patch = json!({"status": {"ownership": "external", "ownershipReason": "external-push:fff000",
        "headSHA": "fff000", "lastBotHeadSHA": "abc123", "comments": comments}});
    s.patch("mergerequests", NS, "mr-tatara-operator-9", &patch, true).unwrap();
}

fn mirrored(id: &str, author: &str, body: &str) -> Value {
    json!({"externalId": id, "author": author, "body": body, "createdAt": "2026-12-01T00:00:00Z", "isBot": false})
}

impl World {
    /// `comments` are on the pull request and already mirrored.
    fn new(comments: &[(u64, &str, &str)], seed: impl FnOnce(&mut Store)) -> Self {
        let mut store = Store::new();
        store.load_crd_schemas(&testkit::fixtures::tatara_crds()).unwrap();
        fakeapi::seed_world(&mut store, NS).unwrap();
        let mirror: Vec<Value> = comments.iter().map(|(id, a, b)| mirrored(&id.to_string(), a, b)).collect();
        external_mr(&mut store, Value::Array(mirror));
        seed(&mut store);
        // The world's own set-up is not a write anyone made.
        store.take_writes();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let api = rt.block_on(fakeapi::serve(store)).unwrap();
        let mut gh_state = fake_github::State::default();
        for (t, l) in [("tok-maint", "maint"), ("tok-mallory", "mallory"), ("tok-bot", "tatara-bot")] {
            gh_state.tokens.insert(t.into(), l.into());
        }
        gh_state.issues.insert(REPO.into(), vec![]);
        gh_state.pulls.insert(
            REPO.into(),
            vec![PullData {
                number: 9,
                author: "tatara-bot".into(),
                author_type: "Bot".into(),
                head_ref: "task/member-b".into(),
                head_sha: LIVE.into(),
                head_repo: Some(REPO.into()),
                open: true,
                labels: vec![],
                body: String::new(),
                comments: comments
                    .iter()
                    .map(|(id, a, b)| Comment {
                        id: *id,
                        author: a.to_string(),
                        author_type: "User".into(),
                        body: b.to_string(),
                    })
                    .collect(),
            }],
        );
        let gh = rt.block_on(fake_github::serve(gh_state));
        let op_state = fake_operator::State {
            namespace: NS.into(),
            tokens: [(OIDC.to_string(), "maint-sub".to_string()), ("oidc-mallory".into(), "mallory-sub".into())]
                .into_iter()
                .collect(),
            mirroring: true,
            ..Default::default()
        };
        let op = rt.block_on(fake_operator::serve(api.store.clone(), Some(gh.clone()), op_state));
        let xdg = tempfile::tempdir().unwrap();
        let kubectl = Kubectl::new(&[env!("CARGO_BIN_EXE_kubectl-tatara")])
            .env_remove("GITHUB_TOKEN")
            .env_remove("TATARA_TOKEN")
            .env_remove("TATARA_OPERATOR_URL")
            .env("XDG_CONFIG_HOME", xdg.path().to_str().unwrap());
        let path = api.write_kubeconfig(&kubectl.dir.path().join("kubeconfig"), NS).unwrap();
        let kubectl = kubectl.kubeconfig(path);
        // Reads made while building the world are not the plugin's.
        let world = World { _rt: rt, api, gh, op, kubectl, xdg };
        assert!(world.plugin_writes().is_empty());
        world
    }

    /// `kubectl tatara takeover <args>` with the forge, operator and tokens
    /// given (`None` leaves one out).
    fn takeover(&self, args: &[&str], github: Option<&str>, oidc: Option<&str>, operator: Option<&str>) -> Output {
        let mut v = vec!["tatara", "takeover"];
        v.extend_from_slice(args);
        let forge = self.gh.url();
        v.extend(["--forge-url", forge.as_str()]);
        let mut c = self.kubectl.command(&v);
        if let Some(t) = github {
            c.env("GITHUB_TOKEN", t);
        }
        if let Some(t) = oidc {
            c.env("TATARA_TOKEN", t);
        }
        if let Some(u) = operator {
            c.env("TATARA_OPERATOR_URL", u);
        }
        c.output().unwrap()
    }

    fn maint(&self, args: &[&str]) -> Output {
        self.takeover(args, Some("tok-maint"), Some(OIDC), Some(&self.op.url()))
    }

    fn get(&self, plural: &str, name: &str) -> Value {
        self.api.store.lock().unwrap().get(plural, NS, name).unwrap()
    }

    /// Every request the plugin sent the fake API that was not a read.
    fn plugin_writes(&self) -> Vec<String> {
        self.api
            .requests()
            .into_iter()
            .filter(|r| r.method != "GET")
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }

    /// Writes in the store by anyone but the operator.
    fn foreign_store_writes(&self) -> usize {
        self.api.store.lock().unwrap().writes().iter().filter(|w| w.user != OPERATOR_USER).count()
    }

    fn forge_comments_posted(&self) -> usize {
        self.gh.writes().iter().filter(|w| w.method == "POST" && w.path.ends_with("/issues/9/comments")).count()
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn ok_json(o: &Output) -> Value {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        stderr(o)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn owner_names(obj: &Value, controller: bool) -> Vec<String> {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| (r["controller"] == json!(true)) == controller)
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_maintainer_takeover_posts_one_comment_asks_once_and_the_operator_does_the_rest() {
    let w = World::new(&[], |_| {});
    let r = ok_json(&w.maint(&["tatara-operator!9", "-o", "json"]));
    let tk = takeover_task_name("tatara", "tatara-operator", 9);
    assert_eq!(r["task"], tk.as_str(), "{r}");
    assert_eq!(r["comment"]["posted"], true);
    assert_eq!(r["project"], "tatara", "the project comes from the Repository when --project is not given");

    // One comment, as the caller, worded as a take-over.
    let writes = w.gh.writes();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!((writes[0].login.as_str(), &writes[0].body["body"]), ("maint", &json!("take over")));
    let id = r["comment"]["externalId"].as_str().unwrap().to_string();

    // One request: exactly the four keys (takeover.go:20-28), the bearer token.
    let reqs = w.op.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(reqs[0].path, "/api/v1/operator/projects/tatara/scm/mr-takeover");
    assert_eq!(reqs[0].authorization, format!("Bearer {OIDC}"));
    assert_eq!(
        reqs[0].body,
        json!({"repo": "tatara-operator", "number": 9, "commentExternalId": id, "task": "member-b"})
    );
    assert_eq!(reqs[0].status, 200);

    // The plugin wrote nothing; the operator did the takeover.
    assert_eq!(w.plugin_writes(), Vec::<String>::new());
    assert_eq!(w.foreign_store_writes(), 0);
    let mr = w.get("mergerequests", "mr-tatara-operator-9");
    assert_eq!(mr["status"]["ownership"], "tatara");
    assert_eq!(mr["status"]["ownershipReason"], "takeover-requested-by:maint");
    assert_eq!((&mr["status"]["headSHA"], &mr["status"]["lastBotHeadSHA"]), (&json!(LIVE), &json!(LIVE)));
    assert_eq!(owner_names(&mr, true), vec![tk.clone()], "the takeover Task is the controller: {mr}");
    assert_eq!(owner_names(&mr, false), vec!["member-b"], "the caller Task stays a plain owner");
    let t = w.get("tasks", &tk);
    assert_eq!(t["status"]["mrRefs"], json!(["mr-tatara-operator-9"]));

    // Again (with the `#` spelling): the mirrored comment is reused, the
    // operator answers its idempotent 200 (takeover.go:353-366).
    let again = w.maint(&["tatara-operator#9"]);
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(text.contains("already tatara's") && text.contains(&id), "{text}");
    assert_eq!(w.forge_comments_posted(), 1, "a second run posted another comment");
    assert_eq!(w.op.requests().len(), 2);
    assert_eq!(w.op.requests()[1].body["task"], tk.as_str(), "asked as the controller it is now");
    assert_eq!(w.plugin_writes(), Vec::<String>::new());
}

#[test]
fn the_operators_403_is_printed_verbatim_and_a_non_maintainer_without_a_comment_posts_none() {
    // takeover_test.go's non-maintainer case: the comment is mirrored, its
    // author is not a maintainer.
    let w = World::new(&[(500, "mallory", "take over please")], |_| {});
    let out = w.takeover(&["tatara-operator!9"], Some("tok-mallory"), Some("oidc-mallory"), Some(&w.op.url()));
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("HTTP 403: {REFUSAL}")), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert_eq!(w.op.requests().len(), 1);
    assert_eq!(w.op.requests()[0].body["commentExternalId"], "500");
    assert_eq!(w.gh.writes(), vec![]);
    assert_eq!(w.plugin_writes(), Vec::<String>::new());
    assert_eq!(w.api.store.lock().unwrap().writes().len(), 0, "nothing changed");

    // With no comment at all: refused before posting or asking.
    let w = World::new(&[], |_| {});
    let out = w.takeover(&["tatara-operator!9"], Some("tok-mallory"), Some("oidc-mallory"), Some(&w.op.url()));
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains(REFUSAL) && stderr(&out).contains("no comment was posted"), "{}", stderr(&out));
    assert_eq!((w.gh.writes().len(), w.op.requests().len()), (0, 0));
}

#[test]
fn the_operators_409_reason_is_printed_verbatim() {
    // takeover_test.go TestMRTakeover_RefusesReTakeOnAnUnresumableParkedTask:
    // the existing takeover Task is parked implement-declined.
    let tk = takeover_task_name("tatara", "tatara-operator", 9);
    let w = World::new(&[(501, "maint", "take over")], |s| {
        s.seed(
            "tasks",
            NS,
            json!({"metadata": {"name": tk}, "spec": {"projectRef": "tatara", "goal": "Take over",
            "kind": "takeover", "repositoryRef": "tatara-operator"},
            "status": {"state": "under-implementation", "parkReason": "implement-declined"}}),
        )
        .unwrap();
    });
    let out = w.maint(&["tatara-operator!9"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let want = format!("HTTP 409: {}", fake_operator::unresumable_text("implement-declined"));
    assert!(stderr(&out).contains(&want), "{}", stderr(&out));
    assert_eq!(w.forge_comments_posted(), 0, "the mirrored comment was used");
    assert_eq!(w.op.requests().len(), 1);
    assert_eq!(w.api.store.lock().unwrap().writes().len(), 0);
}

#[test]
fn an_unreachable_operator_exits_5_and_the_retry_reuses_the_comment() {
    let w = World::new(&[], |_| {});
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let out = w.takeover(&["tatara-operator!9"], Some("tok-maint"), Some(OIDC), Some(&format!("http://{closed}")));
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("the tatara operator at http://{closed} did not answer")),
        "{}",
        stderr(&out)
    );
    assert_eq!(w.forge_comments_posted(), 1);
    // The retry finds the mirrored comment: no second comment, one request.
    let r = ok_json(&w.maint(&["tatara-operator!9", "-o", "json"]));
    assert_eq!(r["comment"]["posted"], false);
    assert_eq!(w.forge_comments_posted(), 1, "the retry posted a second comment");
    assert_eq!(w.op.requests().len(), 1);
    assert_eq!(w.plugin_writes(), Vec::<String>::new());
}

#[test]
fn a_comment_the_operator_has_not_mirrored_is_waited_for_and_reused_by_the_retry() {
    let w = World::new(&[], |_| {});
    w.op.set_mirroring(false);
    let out = w.maint(&["tatara-operator!9", "--mirror-timeout", "1s"]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("has not mirrored your take-over comment") && stderr(&out).contains("posts no other"),
        "{}",
        stderr(&out)
    );
    assert_eq!((w.forge_comments_posted(), w.op.requests().len()), (1, 0), "nothing is asked before the mirror");
    // The webhook catches up; the retry waits for it, posting nothing.
    w.op.set_mirroring(true);
    let r = ok_json(&w.maint(&["tatara-operator!9", "-o", "json"]));
    assert_eq!(r["comment"]["posted"], false);
    assert_eq!((w.forge_comments_posted(), w.op.requests().len()), (1, 1));
    assert_eq!(w.plugin_writes(), Vec::<String>::new());
}

#[test]
fn the_token_comes_from_tatara_token_or_the_store_and_a_missing_or_expired_one_asks_nothing() {
    let w = World::new(&[(502, "maint", "take over")], |_| {});
    let url = w.op.url();
    // None at all: usage error naming both ways, nothing read or written.
    let before = w.api.requests().len();
    let out = w.takeover(&["tatara-operator!9"], Some("tok-maint"), None, Some(&url));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("TATARA_TOKEN") && stderr(&out).contains("tatara login"), "{}", stderr(&out));
    assert_eq!(w.api.requests().len(), before, "the cluster was read before the token was found");
    // An expired store token (tatara-cli's token.json).
    let dir = w.xdg.path().join("tatara");
    std::fs::create_dir_all(&dir).unwrap();
    let store = |token: &str, at: &str| {
        let t = json!({"access_token": token, "refresh_token": "r", "expires_at": at, "token_type": "Bearer"});
        std::fs::write(dir.join("token.json"), t.to_string()).unwrap();
    };
    store(OIDC, "2020-01-01T00:00:00Z");
    let out = w.takeover(&["tatara-operator!9"], Some("tok-maint"), None, Some(&url));
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("expired at 2020-01-01T00:00:00Z") && stderr(&out).contains("tatara login"));
    assert_eq!(w.op.requests().len(), 0);
    // A token the operator does not accept: its 401 text, verbatim.
    let out = w.takeover(&["tatara-operator!9"], Some("tok-maint"), Some("forged"), Some(&url));
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("HTTP 401: invalid token"), "{}", stderr(&out));
    // A live store token is used as the bearer.
    store(OIDC, "2999-01-01T00:00:00Z");
    ok_json(&w.takeover(&["tatara-operator!9", "-o", "json"], Some("tok-maint"), None, Some(&url)));
    assert_eq!(w.op.requests().last().unwrap().authorization, format!("Bearer {OIDC}"));
    assert_eq!(w.forge_comments_posted(), 0);
    assert_eq!(w.plugin_writes(), Vec::<String>::new());
}

#[test]
fn the_operator_url_must_be_given_and_the_bots_identity_is_refused() {
    let w = World::new(&[(503, "tatara-bot", "take over")], |_| {});
    let out = w.takeover(&["tatara-operator!9"], Some("tok-maint"), Some(OIDC), None);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--operator-base-url") && stderr(&out).contains("TATARA_OPERATOR_URL"));
    // tatara-cli's config file names it too.
    let dir = w.xdg.path().join("tatara");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.yaml"), format!("operatorBaseUrl: {}\n", w.op.url())).unwrap();
    let out = w.takeover(&["tatara-operator!9"], Some("tok-bot"), Some(OIDC), None);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("the project's bot login"), "{}", stderr(&out));
    assert_eq!((w.gh.writes().len(), w.op.requests().len()), (0, 0));
    assert_eq!(w.plugin_writes(), Vec::<String>::new());
}
