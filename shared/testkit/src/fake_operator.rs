//! A fake tatara operator REST API on a loopback port: the one route
//! `kubectl tatara takeover` calls, `POST /projects/{p}/scm/mr-takeover`,
//! answering as the real handler does (szymonrychu/tatara-operator at
//! d22349a, `internal/restapi/takeover.go:117-493`): the same checks in the
//! same order, the same status codes and bodies (`{"error": "..."}` from
//! `writeError`, `internal/restapi/handlers.go:41-43`; plain text from the
//! OIDC middleware, `internal/auth/middleware.go:41-65`). Tokens are looked
//! up in a table instead of being verified as JWTs.
//!
//! Its writes go straight into the fake API's store as the operator's
//! service account ([`OPERATOR_USER`]), so the fake API's request log holds
//! only what the client under test sent. Like the operator's webhook, it
//! mirrors the pull request's comments from a fake GitHub into the
//! MergeRequest's `status.comments` while [`FakeOperator::set_mirroring`] is
//! on (`internal/controller/mirror.go:190-205`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use rules::ownership::logins::is_maintainer;
use rules::ownership::naming::{merge_request_cr_name, takeover_task_name};
use rules::ownership::park::{OWNERSHIP_LOST, unresumable_takeover_park};
use rules::ownership::takeover::{HEAD_BRANCH_ANNOTATION, UNDER_IMPLEMENTATION, controller_task, mirrored_comments};
use rules::ownership::types::{MergeRequest, Project, Repository, Task, task_owner_ref};
use serde_json::{Value, json};

use crate::fake_github::FakeGitHub;
use crate::fakeapi::Store;

/// Who the fake operator's writes are attributed to in the fake API's store.
pub const OPERATOR_USER: &str = "system:serviceaccount:tatara:tatara-operator";

/// Where the routes are mounted: the path of the operator's Ingress that
/// tatara-cli's default base URL names (`/api/v1/operator`).
pub const PREFIX: &str = "/api/v1/operator";

/// One request the fake operator received.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorRequest {
    pub method: String,
    pub path: String,
    /// The `Authorization` header as sent.
    pub authorization: String,
    /// The body, parsed when it is JSON (else the text as a string).
    pub body: Value,
    /// The status code answered.
    pub status: u16,
}

/// The fake operator's configuration and log.
#[derive(Debug, Default)]
pub struct State {
    /// The namespace the operator watches.
    pub namespace: String,
    /// Bearer token -> OIDC subject. Any other token is "invalid token".
    pub tokens: BTreeMap<String, String>,
    /// Every request, in order.
    pub requests: Vec<OperatorRequest>,
    /// Copy the pull requests' comments into the mirrors (the webhook).
    pub mirroring: bool,
}

/// A running fake operator.
#[derive(Debug, Clone)]
pub struct FakeOperator {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<State>>,
}

impl FakeOperator {
    /// The REST base, what `--operator-base-url` takes.
    pub fn url(&self) -> String {
        format!("http://{}{PREFIX}", self.addr)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<OperatorRequest> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Turn the comment mirroring on or off.
    pub fn set_mirroring(&self, on: bool) {
        self.state.lock().unwrap().mirroring = on;
    }
}

/// Serve the fake operator over `store` (the fake API's), mirroring comments
/// from `gh` when given.
pub async fn serve(store: Arc<Mutex<Store>>, gh: Option<FakeGitHub>, state: State) -> FakeOperator {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shared = Arc::new(Mutex::new(state));
    let (st, db, forge) = (shared.clone(), store.clone(), gh.clone());
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
        let (st, db, forge) = (st.clone(), db.clone(), forge.clone());
        async move { handle(&st, &db, forge.as_ref(), method, uri, headers, body) }
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    if let Some(gh) = gh {
        let (st, db) = (shared.clone(), store);
        tokio::spawn(async move {
            loop {
                let (on, ns) = {
                    let s = st.lock().unwrap();
                    (s.mirroring, s.namespace.clone())
                };
                if on {
                    mirror_comments(&db, &gh, &ns);
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        });
    }
    FakeOperator { addr, state: shared }
}

/// `owner/repo` of a Repository CR: the last two segments of `spec.url`.
fn forge_repo(repo: &Value) -> Option<String> {
    let url = repo.pointer("/spec/url")?.as_str()?;
    let segs: Vec<&str> = url.trim_end_matches(".git").split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        [.., owner, name] => Some(format!("{owner}/{name}")),
        _ => None,
    }
}

/// The webhook's comment mirroring: every pull request comment not in the
/// mirror yet is appended (`mirrorCommentFrom`: externalId, author, body,
/// createdAt, isBot against the project's botLogin).
fn mirror_comments(db: &Mutex<Store>, gh: &FakeGitHub, ns: &str) {
    let mut store = db.lock().unwrap();
    for mr in store.all("mergerequests", ns) {
        let Some(repo_ref) = mr.pointer("/spec/repositoryRef").and_then(Value::as_str) else { continue };
        let number = mr.pointer("/spec/number").and_then(Value::as_u64).unwrap_or(0);
        let Ok(repo) = store.get("repositories", ns, repo_ref) else { continue };
        let Some(full) = forge_repo(&repo) else { continue };
        let bot = repo
            .pointer("/spec/projectRef")
            .and_then(Value::as_str)
            .and_then(|p| store.get("projects", ns, p).ok())
            .and_then(|p| p.pointer("/spec/scm/botLogin").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_default();
        let forge_comments = {
            let s = gh.state.lock().unwrap();
            s.pulls.get(&full).and_then(|ps| ps.iter().find(|p| p.number == number)).map(|p| p.comments.clone())
        };
        let Some(forge_comments) = forge_comments else { continue };
        let mut list: Vec<Value> =
            mr.pointer("/status/comments").and_then(Value::as_array).cloned().unwrap_or_default();
        let before = list.len();
        for c in forge_comments {
            let id = c.id.to_string();
            if list.iter().any(|m| m["externalId"] == id.as_str()) {
                continue;
            }
            list.push(json!({"externalId": id, "author": c.author, "body": c.body,
                "createdAt": "2026-12-03T12:00:00Z", "isBot": !bot.is_empty() && c.author == bot}));
        }
        if list.len() == before {
            continue;
        }
        let name = mr.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        let _ = store.as_user(OPERATOR_USER).patch(
            "mergerequests",
            ns,
            &name,
            &json!({"status": {"comments": list}}),
            true,
        );
    }
}

fn error(code: u16, message: &str) -> Response {
    json_reply(code, json!({"error": message}))
}

fn json_reply(code: u16, body: Value) -> Response {
    let mut r = (StatusCode::from_u16(code).unwrap(), format!("{body}\n")).into_response();
    r.headers_mut().insert("content-type", "application/json".parse().unwrap());
    r
}

/// `http.Error`: text/plain with a trailing newline.
fn plain(code: u16, message: &str, challenge: bool) -> Response {
    let mut r = (StatusCode::from_u16(code).unwrap(), format!("{message}\n")).into_response();
    r.headers_mut().insert("content-type", "text/plain; charset=utf-8".parse().unwrap());
    r.headers_mut().insert("x-content-type-options", "nosniff".parse().unwrap());
    if challenge {
        r.headers_mut().insert("www-authenticate", r#"Bearer realm="tatara-operator""#.parse().unwrap());
    }
    r
}

fn handle(
    st: &Mutex<State>,
    db: &Mutex<Store>,
    gh: Option<&FakeGitHub>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let (tokens, ns) = {
        let s = st.lock().unwrap();
        (s.tokens.clone(), s.namespace.clone())
    };
    let resp = route(&tokens, &ns, db, gh, &method, uri.path(), &authorization, &body);
    let parsed = serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into()));
    st.lock().unwrap().requests.push(OperatorRequest {
        method: method.to_string(),
        path: uri.path().to_string(),
        authorization,
        body: parsed,
        status: resp.status().as_u16(),
    });
    resp
}

#[allow(clippy::too_many_arguments)]
fn route(
    tokens: &BTreeMap<String, String>,
    ns: &str,
    db: &Mutex<Store>,
    gh: Option<&FakeGitHub>,
    method: &Method,
    path: &str,
    authorization: &str,
    body: &[u8],
) -> Response {
    // The OIDC middleware runs before any route (middleware.go:37-65).
    let Some(rest) = path.strip_prefix(PREFIX) else { return plain(404, "404 page not found", false) };
    let raw = authorization
        .get(..7)
        .filter(|p| p.eq_ignore_ascii_case("Bearer "))
        .map(|_| authorization[7..].trim())
        .unwrap_or_default();
    if raw.is_empty() {
        return plain(401, "missing bearer token", true);
    }
    if !tokens.contains_key(raw) {
        return plain(401, "invalid token", true);
    }
    let segs: Vec<&str> = rest.trim_matches('/').split('/').collect();
    match (method, segs.as_slice()) {
        (&Method::POST, ["projects", p, "scm", "mr-takeover"]) => mr_takeover(ns, db, gh, p, body),
        (_, ["projects", _, "scm", "mr-takeover"]) => plain(405, "", false),
        _ => plain(404, "404 page not found", false),
    }
}

/// The decoded body: exactly the four keys (`DisallowUnknownFields`,
/// handlers.go:188-193), each of its JSON type.
fn decode(body: &[u8]) -> Result<(String, i64, String, String), String> {
    let v: Value = serde_json::from_slice(body).map_err(|_| "invalid JSON body".to_string())?;
    let obj = v.as_object().ok_or("invalid JSON body")?;
    for k in obj.keys() {
        if !["repo", "number", "commentExternalId", "task"].contains(&k.as_str()) {
            return Err(format!("invalid JSON body: unknown field {k:?}"));
        }
    }
    let s = |k: &str| match obj.get(k) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("invalid JSON body: field {k:?} has the wrong type")),
    };
    let number = match obj.get("number") {
        None | Some(Value::Null) => 0,
        Some(Value::Number(n)) if n.is_i64() => n.as_i64().unwrap_or(0),
        Some(_) => return Err("invalid JSON body: field \"number\" has the wrong type".into()),
    };
    Ok((s("repo")?, number, s("commentExternalId")?, s("task")?))
}

/// `mrTakeover` (takeover.go:117-493), step by step.
fn mr_takeover(ns: &str, db: &Mutex<Store>, gh: Option<&FakeGitHub>, project: &str, body: &[u8]) -> Response {
    let (repo_name, number, comment_id, task_name) = match decode(body) {
        Ok(v) => v,
        Err(m) => return error(400, &m),
    };
    if repo_name.is_empty() || number <= 0 || comment_id.is_empty() {
        return error(400, "repo, number, commentExternalId required");
    }
    let mut guard = db.lock().unwrap();
    let store: &Store = &guard;
    let get = |store: &Store, plural: &str, name: &str| store.get(plural, ns, name).ok();
    let Some(proj) = get(store, "projects", project) else { return error(404, "not found") };
    let proj: Project = serde_json::from_value(proj).unwrap();
    let Some(repo) = get(store, "repositories", &repo_name) else { return error(404, "not found") };
    let repo: Repository = serde_json::from_value(repo).unwrap();
    // repoCR's "not in project" is a plain error: writeClientErr's 500.
    if repo.spec.project_ref != project {
        return error(500, "internal error");
    }
    // callerTask (handlers_v2.go:1020-1031).
    if task_name.is_empty() {
        return error(400, "task required");
    }
    let Some(caller) = get(store, "tasks", &task_name) else { return error(404, "not found") };
    let caller: Task = serde_json::from_value(caller).unwrap();
    let mr_name = merge_request_cr_name(&repo_name, number);
    let Some(mr_json) = get(store, "mergerequests", &mr_name) else { return error(404, "not found") };
    let mr: MergeRequest = serde_json::from_value(mr_json.clone()).unwrap();
    if controller_task(&mr).as_deref() != Some(task_name.as_str()) {
        return error(409, "task does not own this merge request");
    }
    let status = mr.status.clone().unwrap_or_default();
    if status.state.as_deref() != Some("open") {
        return error(409, "merge request is not open");
    }
    let Some(cmt) = mirrored_comments(&mr).into_iter().find(|c| c.external_id == comment_id) else {
        return error(422, "referenced comment not found in the merge request mirror");
    };
    if cmt.is_bot
        || cmt.author.is_empty()
        || cmt.author == proj.spec.scm.bot_login
        || !is_maintainer(&proj, Some(&repo), &cmt.author)
    {
        return error(403, rules::ownership::takeover::REFUSAL_BODY);
    }
    let tk_name = takeover_task_name(project, &repo_name, number);
    let existing: Option<Task> = get(store, "tasks", &tk_name).and_then(|t| serde_json::from_value(t).ok());
    if let Some(t) = existing.as_ref().filter(|t| unresumable_takeover_park(t)) {
        let reason = t.status.as_ref().and_then(|s| s.park_reason.clone()).unwrap_or_default();
        return error(409, &unresumable_text(&reason));
    }
    if status.ownership.as_deref() == Some("tatara") {
        return json_reply(200, json!({"status": "ok", "repo": repo_name, "number": number, "task": task_name}));
    }
    let mut store = guard.as_user(OPERATOR_USER);
    // MintOrUnparkTakeoverTask, reduced to what a client can observe: the
    // deterministic Task, minted or un-parked from ownership-lost.
    let tk = match existing {
        None => {
            let url = mr.spec.extra.get("url").and_then(Value::as_str).unwrap_or_default().to_string();
            let proj_uid = proj.metadata.uid.clone().unwrap_or_default();
            let task = json!({"metadata": {"name": tk_name,
                "annotations": {HEAD_BRANCH_ANNOTATION: status.head_branch.clone().unwrap_or_default()},
                "ownerReferences": [{"apiVersion": "tatara.dev/v1alpha1", "kind": "Project", "name": project,
                    "uid": proj_uid, "controller": true, "blockOwnerDeletion": true}]},
                "spec": {"projectRef": project, "repositoryRef": repo_name, "kind": "takeover",
                    "goal": format!("Take over {url} at @{}'s request. Triggering comment:\n\n{}", cmt.author, cmt.body),
                    "initialState": UNDER_IMPLEMENTATION, "mergeOrder": [repo_name],
                    "source": {"provider": "github", "issueRef": url, "url": url, "number": number, "isPR": true,
                        "headSHA": status.head_sha.clone().unwrap_or_default(), "authorLogin": status.author.clone().unwrap_or_default()}}});
            let Ok(created) = store.create("tasks", ns, task) else { return error(500, "internal error") };
            let _ = store.patch("tasks", ns, &tk_name, &json!({"status": {"mrRefs": [mr_name]}}), true);
            created
        }
        Some(t) => {
            if t.status.as_ref().and_then(|s| s.park_reason.as_deref()) == Some(OWNERSHIP_LOST) {
                let patch = json!({"status": {"parkReason": null, "parkedAt": null, "state": UNDER_IMPLEMENTATION,
                    "stateEnteredAt": "2026-12-03T12:00:00Z"}});
                if store.patch("tasks", ns, &tk_name, &patch, true).is_err() {
                    return error(500, "internal error");
                }
            }
            store.get("tasks", ns, &tk_name).unwrap()
        }
    };
    // The controller hand-over from the caller Task, in one update
    // (takeover.go:406-429: AddPlainOwner, then HandOverController).
    let tk_uid = tk.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
    let mut refs: Vec<Value> =
        mr_json.pointer("/metadata/ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default();
    for r in refs.iter_mut() {
        if r["name"] == caller.name() {
            r["controller"] = json!(false);
            r["blockOwnerDeletion"] = json!(true);
        }
    }
    refs.retain(|r| r["name"] != tk_name.as_str());
    refs.push(serde_json::to_value(task_owner_ref(&tk_name, &tk_uid, true)).unwrap());
    let rv =
        store.get("mergerequests", ns, &mr_name).ok().and_then(|m| m.pointer("/metadata/resourceVersion").cloned());
    let owners = json!({"metadata": {"ownerReferences": refs, "resourceVersion": rv}});
    if store.patch("mergerequests", ns, &mr_name, &owners, false).is_err() {
        return error(500, "internal error");
    }
    // The live head (takeover.go:440-451), falling back to the mirror's.
    let live = gh
        .and_then(|g| {
            let full = forge_repo(&serde_json::to_value(&repo).ok()?)?;
            let s = g.state.lock().unwrap();
            s.pulls.get(&full)?.iter().find(|p| p.number as i64 == number).map(|p| p.head_sha.clone())
        })
        .or(status.head_sha.clone())
        .unwrap_or_default();
    let stamp = json!({"status": {"ownership": "tatara", "ownershipReason": format!("takeover-requested-by:{}", cmt.author),
        "ownershipChangedAt": "2026-12-03T12:00:00Z", "lastBotHeadSHA": live, "headSHA": live}});
    if store.patch("mergerequests", ns, &mr_name, &stamp, true).is_err() {
        return error(500, "internal error");
    }
    json_reply(200, json!({"status": "ok", "repo": repo_name, "number": number, "task": tk_name}))
}

/// The unresumable-park 409 text (takeover.go:340-349).
pub fn unresumable_text(reason: &str) -> String {
    format!(
        "the takeover task for this merge request is parked {reason} and can never resume: only \
         parked(ownership-lost) re-takes. Push to the branch, then ask again: the push marks the merge request \
         yours again, which every route back needs, and for a take-over that was declined, asking again then \
         resumes it - the push on its own only makes it resumable. For any other park the task must also age out \
         at ParkRetention first - collection on its own does not restore the take-over, because it does not \
         change who the merge request is marked for. The merge request is yours to work on in the meantime"
    )
}
