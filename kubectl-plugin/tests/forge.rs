//! The octocrab forge (`runtime::ownership::forge::GitHub`) as the
//! shared executor's `Forge`: the reaper's terminal path ("failed releases
//! its Issues immediately") applied to the fake Kubernetes API and a fake
//! GitHub. Comments, the tatara-parked label, closing the bot's pull request
//! and deleting its head branch land on the forge in the spec's order around
//! the ownership release; a 403 on a blocking step stops everything after it.
//! The CRD schemas are the vendored fixtures (`testkit::fixtures`).

use rules::ownership::reap;
use rules::ownership::types::Project;
use runtime::ownership::executor::Executor;
use runtime::ownership::forge::{ForgeArgs, GitHub, RepoCoords};
use serde_json::{Value, json};
use testkit::fake_github::{self, FakeGitHub, IssueData, PullData};
use testkit::fakeapi::{self, FakeApi, Store};

const NS: &str = "tatara";
const REPO: &str = "acme/tatara-operator";

async fn world(refuse_writes: bool) -> (FakeApi, FakeGitHub, GitHub) {
    let mut store = Store::new();
    store.load_crd_schemas(&testkit::fixtures::tatara_crds()).unwrap();
    fakeapi::seed_world(&mut store, NS).unwrap();
    // member-b stands down: parked, so the reaper runs its terminal path.
    store
        .patch(
            "tasks",
            NS,
            "member-b",
            &json!({"status": {"parkReason": "awaiting-human",
            "parkedAt": "2026-11-01T00:00:00Z"}}),
            true,
        )
        .unwrap();
    let api = fakeapi::serve(store).await.unwrap();
    let mut gh_state = fake_github::State::default();
    gh_state.tokens.insert("tok".into(), "tatara-bot".into());
    gh_state.refuse_writes = refuse_writes;
    gh_state.issues.insert(
        REPO.into(),
        vec![IssueData { number: 414, author: "alice".into(), open: true, labels: vec![], comments: vec![] }],
    );
    gh_state.pulls.insert(
        REPO.into(),
        vec![PullData {
            number: 9,
            author: "tatara-bot".into(),
            author_type: "Bot".into(),
            head_ref: "task/member-b".into(),
            head_sha: "abc123".into(),
            head_repo: Some(REPO.into()),
            open: true,
            labels: vec![],
            body: String::new(),
            comments: vec![],
        }],
    );
    let gh = fake_github::serve(gh_state).await;
    let mut forge = GitHub::new(&ForgeArgs { github_token: Some("tok".into()), forge_url: gh.url() }).unwrap();
    forge.register("tatara-operator", RepoCoords { owner: "acme".into(), repo: "tatara-operator".into() });
    (api, gh, forge)
}

fn get(api: &FakeApi, plural: &str, name: &str) -> Value {
    api.store.lock().unwrap().get(plural, NS, name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terminal_path_reaches_the_forge_in_the_spec_order() {
    let (api, gh, forge) = world(false).await;
    let exec = Executor::new(api.client(NS).unwrap(), NS);
    let project: Project = serde_json::from_value(get(&api, "projects", "tatara")).unwrap();
    let report = exec
        .converge("reap member-b", Some(&forge), |snap| Ok(reap::decide(snap, &project, "member-b")))
        .await
        .unwrap();
    assert!(!report.applied.is_empty());

    let writes: Vec<(String, String)> = gh.writes().into_iter().map(|w| (w.method, w.path)).collect();
    assert_eq!(
        writes,
        vec![
            ("POST".to_string(), "/repos/acme/tatara-operator/issues/414/comments".to_string()),
            ("POST".to_string(), "/repos/acme/tatara-operator/issues/414/labels".to_string()),
            ("PATCH".to_string(), "/repos/acme/tatara-operator/pulls/9".to_string()),
            ("DELETE".to_string(), "/repos/acme/tatara-operator/git/refs/heads/task/member-b".to_string()),
        ]
    );
    let w = gh.writes();
    assert!(w[0].body["body"].as_str().unwrap().contains("awaiting-human"), "{:?}", w[0]);
    assert_eq!(w[1].body["labels"], json!(["tatara-parked"]));
    assert_eq!(w[2].body["state"], "closed");
    {
        let st = gh.state.lock().unwrap();
        assert!(st.issues[REPO][0].labels.contains(&"tatara-parked".to_string()));
        assert!(!st.pulls[REPO][0].open);
    }
    // Released with no survivor: the Issue CR is kept with zero owners for
    // the next sweep to adopt; the Task is reaped.
    let iss = get(&api, "issues", "iss-tatara-operator-414");
    assert_eq!(iss["metadata"]["ownerReferences"], json!([]), "{iss}");
    assert!(api.store.lock().unwrap().get("tasks", NS, "member-b").is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_blocking_comment_stops_the_release() {
    let (api, gh, forge) = world(true).await;
    let before = api.store.lock().unwrap().all("issues", NS);
    let exec = Executor::new(api.client(NS).unwrap(), NS);
    let project: Project = serde_json::from_value(get(&api, "projects", "tatara")).unwrap();
    let err = exec
        .converge("reap member-b", Some(&forge), |snap| Ok(reap::decide(snap, &project, "member-b")))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("forge refused a blocking step") && text.contains("HTTP 403"), "{text}");
    // "BLOCKING: a 403 requeues the reap": nothing after it was applied.
    assert_eq!(api.store.lock().unwrap().all("issues", NS), before);
    assert!(api.store.lock().unwrap().get("tasks", NS, "member-b").is_ok());
    assert_eq!(gh.writes(), vec![]);
}
