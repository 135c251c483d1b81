//! A fake GitHub REST API on a loopback port, serving the response shapes
//! GitHub documents (users, issues with `pull_request` links, pulls with
//! head/base repositories, comments, labels) with `Link` header pagination,
//! so octocrab's typed models parse them exactly as they parse GitHub's.
//! Every mutating request is recorded, so tests can check what changed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

const CREATED: &str = "2026-01-02T03:04:05Z";

#[derive(Debug, Clone)]
pub struct Comment {
    pub id: u64,
    pub author: String,
    pub author_type: String,
    pub body: String,
}

#[derive(Debug, Clone)]
pub struct IssueData {
    pub number: u64,
    pub author: String,
    pub open: bool,
    pub labels: Vec<String>,
    pub comments: Vec<Comment>,
}

#[derive(Debug, Clone)]
pub struct PullData {
    pub number: u64,
    pub author: String,
    pub author_type: String,
    pub head_ref: String,
    pub head_sha: String,
    /// `owner/repo` of the head, `None` for a deleted fork.
    pub head_repo: Option<String>,
    pub open: bool,
    pub labels: Vec<String>,
    pub body: String,
    pub comments: Vec<Comment>,
}

/// One recorded mutating request: method, path, JSON body, caller login.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub method: String,
    pub path: String,
    pub body: Value,
    pub login: String,
}

#[derive(Debug, Default)]
pub struct State {
    pub base: String,
    /// A path prefix the API is served under, as GitHub Enterprise serves
    /// it under `/api/v3`; empty for github.com's root.
    pub prefix: String,
    /// Answer every mutating request 403, as GitHub does for a token
    /// without write access.
    pub refuse_writes: bool,
    /// token -> login
    pub tokens: BTreeMap<String, String>,
    /// "owner/repo" -> (issues, pulls)
    pub issues: BTreeMap<String, Vec<IssueData>>,
    pub pulls: BTreeMap<String, Vec<PullData>>,
    pub writes: Vec<Write>,
    pub requests: u64,
    /// Hold every pull-request listing until this many have arrived (0: no
    /// hold), so racing processes are known to have planned from the same
    /// state before either writes. A listing still goes on after 30 s, so a
    /// caller that never comes fails the test's assertions instead of hanging.
    pub hold_pull_lists_until: usize,
    pull_lists_arrived: usize,
    next_id: u64,
}

#[derive(Debug, Clone)]
pub struct FakeGitHub {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<State>>,
}

impl FakeGitHub {
    /// The API base, what `--forge-url` takes.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.addr, self.state.lock().unwrap().prefix)
    }
    pub fn writes(&self) -> Vec<Write> {
        self.state.lock().unwrap().writes.clone()
    }
}

pub async fn serve(state: State) -> FakeGitHub {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut state = state;
    state.base = format!("http://{addr}");
    state.next_id = 9_000_000;
    let shared = Arc::new(Mutex::new(state));
    let st = shared.clone();
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
        let st = st.clone();
        async move {
            if method == Method::GET && uri.path().ends_with("/pulls") {
                hold_pull_list(&st).await;
            }
            handle(&st, method, uri, headers, body)
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    FakeGitHub { addr, state: shared }
}

async fn hold_pull_list(st: &Mutex<State>) {
    let want = {
        let mut s = st.lock().unwrap();
        s.pull_lists_arrived += 1;
        s.hold_pull_lists_until
    };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while st.lock().unwrap().pull_lists_arrived < want && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

fn user(login: &str, ty: &str) -> Value {
    let id = login.bytes().fold(7u64, |a, b| a.wrapping_mul(31).wrapping_add(b as u64)) % 100_000_000;
    let api = format!("https://api.github.com/users/{login}");
    json!({
        "login": login, "id": id, "node_id": format!("MDQ6VXNlcnt{id}"),
        "avatar_url": format!("https://avatars.githubusercontent.com/u/{id}?v=4"), "gravatar_id": "",
        "url": api, "html_url": format!("https://github.com/{login}"),
        "followers_url": format!("{api}/followers"), "following_url": format!("{api}/following{{/other_user}}"),
        "gists_url": format!("{api}/gists{{/gist_id}}"), "starred_url": format!("{api}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{api}/subscriptions"), "organizations_url": format!("{api}/orgs"),
        "repos_url": format!("{api}/repos"), "events_url": format!("{api}/events{{/privacy}}"),
        "received_events_url": format!("{api}/received_events"), "type": ty, "user_view_type": "public",
        "site_admin": false
    })
}

fn label(base: &str, full: &str, name: &str) -> Value {
    json!({"id": 208045946, "node_id": "MDU6TGFiZWwyMDgwNDU5NDY=", "url": format!("{base}/repos/{full}/labels/{name}"),
           "name": name, "description": null, "color": "ededed", "default": false})
}

fn repo_json(base: &str, full: &str) -> Value {
    let (owner, name) = full.split_once('/').unwrap();
    json!({"id": 1296269, "node_id": "MDEwOlJlcG9zaXRvcnkxMjk2MjY5", "name": name, "full_name": full,
           "owner": user(owner, "Organization"), "private": false, "html_url": format!("https://github.com/{full}"),
           "description": null, "fork": false, "url": format!("{base}/repos/{full}"),
           "default_branch": "main", "visibility": "public"})
}

fn comment_json(base: &str, full: &str, number: u64, c: &Comment) -> Value {
    json!({"id": c.id, "node_id": format!("IC_kwDO{}", c.id), "url": format!("{base}/repos/{full}/issues/comments/{}", c.id),
           "html_url": format!("https://github.com/{full}/issues/{number}#issuecomment-{}", c.id),
           "issue_url": format!("{base}/repos/{full}/issues/{number}"), "body": c.body,
           "user": user(&c.author, &c.author_type), "created_at": CREATED, "updated_at": CREATED,
           "author_association": "CONTRIBUTOR", "performed_via_github_app": null})
}

fn issue_json(base: &str, full: &str, i: &IssueData) -> Value {
    let n = i.number;
    let api = format!("{base}/repos/{full}/issues/{n}");
    json!({"id": 1_000_000 + n, "node_id": format!("I_kwDOABCD{n}"), "url": api,
           "repository_url": format!("{base}/repos/{full}"), "labels_url": format!("{api}/labels{{/name}}"),
           "comments_url": format!("{api}/comments"), "events_url": format!("{api}/events"),
           "html_url": format!("https://github.com/{full}/issues/{n}"), "number": n,
           "state": if i.open { "open" } else { "closed" }, "state_reason": null, "title": format!("Issue {n}"),
           "body": "Something is off.", "user": user(&i.author, "User"),
           "labels": i.labels.iter().map(|l| label(base, full, l)).collect::<Vec<_>>(),
           "assignee": null, "assignees": [], "milestone": null, "locked": false, "active_lock_reason": null,
           "comments": i.comments.len(), "closed_at": null, "created_at": CREATED, "updated_at": CREATED,
           "author_association": "CONTRIBUTOR", "reactions": {"url": format!("{api}/reactions"), "total_count": 0}})
}

fn pull_json(base: &str, full: &str, p: &PullData) -> Value {
    let n = p.number;
    let api = format!("{base}/repos/{full}/pulls/{n}");
    let head_repo = p.head_repo.as_ref().map(|r| repo_json(base, r)).unwrap_or(Value::Null);
    let head_owner = p.head_repo.as_ref().map(|r| r.split('/').next().unwrap().to_string()).unwrap_or_default();
    json!({"url": api, "id": 2_000_000 + n, "node_id": format!("PR_kwDOABCD{n}"),
           "html_url": format!("https://github.com/{full}/pull/{n}"),
           "diff_url": format!("https://github.com/{full}/pull/{n}.diff"),
           "patch_url": format!("https://github.com/{full}/pull/{n}.patch"),
           "issue_url": format!("{base}/repos/{full}/issues/{n}"), "number": n,
           "state": if p.open { "open" } else { "closed" }, "locked": false, "title": format!("PR {n}"),
           "user": user(&p.author, &p.author_type), "body": p.body,
           "labels": p.labels.iter().map(|l| label(base, full, l)).collect::<Vec<_>>(),
           "milestone": null, "active_lock_reason": null, "created_at": CREATED, "updated_at": CREATED,
           "closed_at": null, "merged_at": null, "merge_commit_sha": null, "assignee": null, "assignees": [],
           "requested_reviewers": [], "requested_teams": [], "draft": false,
           "commits_url": format!("{api}/commits"), "review_comments_url": format!("{api}/comments"),
           "review_comment_url": format!("{base}/repos/{full}/pulls/comments{{/number}}"),
           "comments_url": format!("{base}/repos/{full}/issues/{n}/comments"),
           "statuses_url": format!("{base}/repos/{full}/statuses/{}", p.head_sha),
           "head": {"label": format!("{head_owner}:{}", p.head_ref), "ref": p.head_ref, "sha": p.head_sha,
                    "user": user(if head_owner.is_empty() { "ghost" } else { &head_owner }, "User"), "repo": head_repo},
           "base": {"label": format!("{}:main", full.split('/').next().unwrap()), "ref": "main",
                    "sha": "0000000000000000000000000000000000000001", "user": user(full.split('/').next().unwrap(), "Organization"),
                    "repo": repo_json(base, full)},
           "author_association": "MEMBER", "auto_merge": null})
}

fn reply(code: u16, body: Value, headers: Vec<(String, String)>) -> Response {
    let mut r = (StatusCode::from_u16(code).unwrap(), body.to_string()).into_response();
    r.headers_mut().insert("content-type", "application/json; charset=utf-8".parse().unwrap());
    for (k, v) in headers {
        r.headers_mut().insert(axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
    }
    r
}

fn error(code: u16, message: &str) -> Response {
    reply(
        code,
        json!({"message": message, "documentation_url": "https://docs.github.com/rest", "status": code.to_string()}),
        vec![],
    )
}

fn query(uri: &Uri) -> BTreeMap<String, String> {
    uri.query()
        .unwrap_or("")
        .split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// One page of `items` with GitHub's Link header.
fn paged(base: &str, path: &str, uri: &Uri, items: Vec<Value>) -> Response {
    let q = query(uri);
    let per_page: usize = q.get("per_page").and_then(|v| v.parse().ok()).unwrap_or(30).clamp(1, 100);
    let page: usize = q.get("page").and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
    let last = items.len().div_ceil(per_page).max(1);
    let slice: Vec<Value> = items.into_iter().skip((page - 1) * per_page).take(per_page).collect();
    let mut extra: Vec<String> = q
        .iter()
        .filter(|(k, _)| k.as_str() != "page" && k.as_str() != "per_page")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    extra.sort();
    let link = |p: usize, rel: &str| {
        let mut params = extra.clone();
        params.push(format!("per_page={per_page}"));
        params.push(format!("page={p}"));
        format!("<{base}{path}?{}>; rel=\"{rel}\"", params.join("&"))
    };
    let mut links = Vec::new();
    if page < last {
        links.push(link(page + 1, "next"));
        links.push(link(last, "last"));
    }
    if page > 1 {
        links.push(link(1, "first"));
        links.push(link(page - 1, "prev"));
    }
    let headers = if links.is_empty() { vec![] } else { vec![("link".to_string(), links.join(", "))] };
    reply(200, Value::Array(slice), headers)
}

fn handle(st: &Mutex<State>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let mut s = st.lock().unwrap();
    s.requests += 1;
    let base = s.base.clone();
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_start_matches("Bearer ").trim_start_matches("token ").to_string())
        .unwrap_or_default();
    let Some(login) = s.tokens.get(&token).cloned() else {
        return error(401, "Bad credentials");
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    // Link headers carry the full path; routing sees it without the prefix.
    let full_path = uri.path().to_string();
    let Some(path) = full_path.strip_prefix(s.prefix.as_str()).map(str::to_string) else {
        return error(404, "Not Found");
    };
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    if s.refuse_writes && method != Method::GET {
        return error(403, "Resource not accessible by personal access token");
    }
    if segs == ["user"] && method == Method::GET {
        return reply(200, user(&login, "User"), vec![]);
    }
    if segs.len() < 4 || segs[0] != "repos" {
        return error(404, "Not Found");
    }
    let full = format!("{}/{}", segs[1], segs[2]);
    if !s.issues.contains_key(&full) && !s.pulls.contains_key(&full) {
        return error(404, "Not Found");
    }
    let record = |s: &mut State| {
        s.writes.push(Write {
            method: method.to_string(),
            path: path.clone(),
            body: body.clone(),
            login: login.clone(),
        })
    };
    match (&method, &segs[3..]) {
        (&Method::GET, ["issues"]) => {
            let open_only = query(&uri).get("state").is_none_or(|v| v == "open");
            // GitHub lists pull requests on the issues endpoint too, newest first.
            let mut items: Vec<(u64, Value)> = s
                .issues
                .get(&full)
                .into_iter()
                .flatten()
                .filter(|i| !open_only || i.open)
                .map(|i| (i.number, issue_json(&base, &full, i)))
                .collect();
            for p in s.pulls.get(&full).into_iter().flatten().filter(|p| !open_only || p.open) {
                let mut v = issue_json(
                    &base,
                    &full,
                    &IssueData {
                        number: p.number,
                        author: p.author.clone(),
                        open: p.open,
                        labels: p.labels.clone(),
                        comments: p.comments.clone(),
                    },
                );
                v["pull_request"] = json!({"url": format!("{base}/repos/{full}/pulls/{}", p.number),
                    "html_url": format!("https://github.com/{full}/pull/{}", p.number),
                    "diff_url": format!("https://github.com/{full}/pull/{}.diff", p.number),
                    "patch_url": format!("https://github.com/{full}/pull/{}.patch", p.number), "merged_at": null});
                items.push((p.number, v));
            }
            items.sort_by_key(|i| std::cmp::Reverse(i.0));
            paged(&base, &full_path, &uri, items.into_iter().map(|(_, v)| v).collect())
        }
        (&Method::GET, ["issues", n, "comments"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let comments =
                s.issues.get(&full).into_iter().flatten().find(|i| i.number == n).map(|i| i.comments.clone()).or_else(
                    || s.pulls.get(&full).into_iter().flatten().find(|p| p.number == n).map(|p| p.comments.clone()),
                );
            match comments {
                Some(c) => paged(&base, &full_path, &uri, c.iter().map(|c| comment_json(&base, &full, n, c)).collect()),
                None => error(404, "Not Found"),
            }
        }
        (&Method::POST, ["issues", n, "comments"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let Some(text) = body.get("body").and_then(Value::as_str).map(str::to_string) else {
                return error(422, "Validation Failed");
            };
            s.next_id += 1;
            let c = Comment { id: s.next_id, author: login.clone(), author_type: "User".into(), body: text };
            let target = if let Some(i) = s.issues.get_mut(&full).and_then(|v| v.iter_mut().find(|i| i.number == n)) {
                &mut i.comments
            } else if let Some(p) = s.pulls.get_mut(&full).and_then(|v| v.iter_mut().find(|p| p.number == n)) {
                &mut p.comments
            } else {
                return error(404, "Not Found");
            };
            target.push(c.clone());
            record(&mut s);
            reply(201, comment_json(&base, &full, n, &c), vec![])
        }
        (&Method::POST, ["issues", n, "labels"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let add: Vec<String> = body
                .get("labels")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            let Some(i) = s.issues.get_mut(&full).and_then(|v| v.iter_mut().find(|i| i.number == n)) else {
                return error(404, "Not Found");
            };
            for l in add {
                if !i.labels.contains(&l) {
                    i.labels.push(l);
                }
            }
            let labels = i.labels.clone();
            record(&mut s);
            reply(200, Value::Array(labels.iter().map(|l| label(&base, &full, l)).collect()), vec![])
        }
        (&Method::GET, ["pulls"]) => {
            let open_only = query(&uri).get("state").is_none_or(|v| v == "open");
            let mut items: Vec<&PullData> =
                s.pulls.get(&full).into_iter().flatten().filter(|p| !open_only || p.open).collect();
            items.sort_by_key(|p| std::cmp::Reverse(p.number));
            let items = items.into_iter().map(|p| pull_json(&base, &full, p)).collect();
            paged(&base, &full_path, &uri, items)
        }
        (&Method::GET, ["pulls", n]) => {
            let n: u64 = n.parse().unwrap_or(0);
            match s.pulls.get(&full).into_iter().flatten().find(|p| p.number == n) {
                Some(p) => reply(200, pull_json(&base, &full, p), vec![]),
                None => error(404, "Not Found"),
            }
        }
        (&Method::PATCH, ["pulls", n]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let Some(p) = s.pulls.get_mut(&full).and_then(|v| v.iter_mut().find(|p| p.number == n)) else {
                return error(404, "Not Found");
            };
            if body.get("state").and_then(Value::as_str) == Some("closed") {
                p.open = false;
            }
            let v = pull_json(&base, &full, p);
            record(&mut s);
            reply(200, v, vec![])
        }
        (&Method::DELETE, ["git", "refs", "heads", ..]) => {
            record(&mut s);
            (StatusCode::NO_CONTENT, "").into_response()
        }
        _ => error(404, "Not Found"),
    }
}
