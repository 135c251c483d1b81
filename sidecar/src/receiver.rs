//! The audit receiver: `POST /audit-webhook/<route>` (every event of the
//! batch belongs to `<route>`) and the bare `POST /audit-webhook` (the route
//! read from each event's annotation). Decode, accept gate, publish gates,
//! one batched append per (route, group/resource), 200 once appended. It
//! makes no Kubernetes API call and holds no per-object state.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http_body_util::BodyExt;
use rules::attribution::audit::{self, Decoded, EventList, Published};
use rules::attribution::route_binding::RouteBindings;
use rules::attribution::{Fact, Scope};
use runtime::attribution::transport::{AnyPublisher, FactPublisher};
use runtime::metrics::Metrics;

use crate::tls::PeerNames;

pub struct ReceiverState {
    pub publisher: AnyPublisher,
    pub metrics: Arc<Metrics>,
    pub route_annotation_key: Option<String>,
    pub body_limit: usize,
    /// The whole body must arrive within this; 408 past it.
    pub body_timeout: std::time::Duration,
    /// Which client certificates may post to which routes.
    pub bindings: RouteBindings,
    /// When each misconfiguration reason was last logged ([`misconfigured`]).
    pub warned: std::sync::Mutex<Vec<(&'static str, std::time::Instant)>>,
}

pub fn router(state: Arc<ReceiverState>) -> Router {
    Router::new()
        .route("/audit-webhook", post(bare))
        .route("/audit-webhook/{route}", post(routed))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found: post audit EventLists to /audit-webhook/<route>\n") })
        .with_state(state)
}

fn reply(code: StatusCode, message: impl Into<String>) -> Response {
    let mut m = message.into();
    m.push('\n');
    (code, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], m).into_response()
}

async fn read_batch(s: &ReceiverState, headers: &HeaderMap, body: Body) -> Result<Decoded, Response> {
    let too_large = || {
        reply(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "audit batch larger than the {} byte limit: lower the API server's --audit-webhook-batch-max-size \
                 or raise --audit-body-limit",
                s.body_limit
            ),
        )
    };
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    // Reading the body would tell such a client to send it.
    let waits_for_continue =
        headers.get(header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let read = async {
        let mut body = body;
        // Refused by its declared length before a byte is read: nothing of
        // it is ever buffered.
        if declared.is_some_and(|n| n > s.body_limit) {
            if !waits_for_continue {
                drain(&mut body).await;
            }
            return Err(too_large());
        }
        let mut bytes = Vec::with_capacity(declared.unwrap_or(0));
        while let Some(frame) = body.frame().await {
            let frame =
                frame.map_err(|e| reply(StatusCode::BAD_REQUEST, format!("reading the audit batch failed: {e}")))?;
            if let Ok(data) = frame.into_data() {
                if bytes.len() + data.len() > s.body_limit {
                    // No length declared (chunked): stop at the limit.
                    drop(bytes);
                    drain(&mut body).await;
                    return Err(too_large());
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok(bytes)
    };
    // A body sent slowly, or never finished, holds no connection past this.
    let bytes = match tokio::time::timeout(s.body_timeout, read).await {
        Ok(result) => result?,
        Err(_) => {
            return Err(reply(
                StatusCode::REQUEST_TIMEOUT,
                format!("the audit batch did not arrive within {:?} (--audit-body-timeout)", s.body_timeout),
            ));
        }
    };
    EventList::decode(&bytes).map_err(|e| reply(StatusCode::BAD_REQUEST, format!("malformed audit batch: {e}")))
}

/// Reads and discards what a client already sent of a refused body, up to
/// [`DRAIN_CAP`] and [`DRAIN_TIME`], so a small one gets its 413 rather than
/// a reset connection; never buffered. A client that waits for `100
/// Continue` sends nothing more.
async fn drain(body: &mut Body) {
    let mut seen = 0usize;
    let _ = tokio::time::timeout(DRAIN_TIME, async {
        while seen <= DRAIN_CAP {
            match body.frame().await {
                Some(Ok(frame)) => seen += frame.data_ref().map_or(0, |d| d.len()),
                _ => break,
            }
        }
    })
    .await;
}

const DRAIN_CAP: usize = 1 << 20;
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(1);

async fn routed(
    State(s): State<Arc<ReceiverState>>,
    Path(route): Path<String>,
    peer: Option<Extension<PeerNames>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let list = match read_batch(&s, &headers, body).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    let names = peer.map(|Extension(p)| p.0).unwrap_or_default();
    if !s.bindings.allows(&names, &route) {
        let may = s.bindings.routes_of(&names);
        tracing::warn!(%route, certificate = %names.join(", "), "audit batch refused: the client certificate is not bound to its route");
        return reply(
            StatusCode::FORBIDDEN,
            format!(
                "the client certificate ({}) may not post to route {route:?}: it may post to {} (--audit-route-binding)",
                if names.is_empty() { "no name".to_string() } else { names.join(", ") },
                if may.is_empty() { "no route".to_string() } else { may.join(", ") },
            ),
        );
    }
    ingest(&s, list, |_| Some(route.clone())).await
}

async fn bare(
    State(s): State<Arc<ReceiverState>>,
    peer: Option<Extension<PeerNames>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // Read the body first even when the request will be refused, so the
    // client gets the answer instead of a reset stream.
    let list = match read_batch(&s, &headers, body).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    let Some(key) = s.route_annotation_key.clone() else {
        return reply(
            StatusCode::BAD_REQUEST,
            "the bare /audit-webhook path needs --author-attribution-audit-route-annotation-key; \
             otherwise post to /audit-webhook/<route>",
        );
    };
    // An event whose annotated route the certificate is not bound to has
    // no route here: counted and dropped, as one without the annotation.
    let names = peer.map(|Extension(p)| p.0).unwrap_or_default();
    ingest(&s, list, |ev| ev.annotations.get(&key).filter(|r| !r.is_empty() && s.bindings.allows(&names, r)).cloned())
        .await
}

async fn ingest(s: &ReceiverState, list: Decoded, route_of: impl Fn(&audit::Event) -> Option<String>) -> Response {
    let mut facts: Vec<(Scope, Fact)> = Vec::new();
    let (mut rejected, total) = (list.refused.len(), list.events.len() + list.refused.len());
    // Why events made no fact, by reason: in the reply, and said in the log
    // when the reason means a misconfiguration.
    let mut reasons: std::collections::BTreeMap<&'static str, usize> = std::collections::BTreeMap::new();
    // (Each undecodable event is logged on its own, below.)
    if !list.refused.is_empty() {
        reasons.insert("undecodable", list.refused.len());
    }
    // One undecodable event costs only itself: counted and logged, the
    // others go on.
    for r in &list.refused {
        tracing::warn!(audit_id = %r.audit_id, index = r.index, error = %r.error, "audit event refused: it is not an audit.k8s.io/v1 Event; the rest of its batch is kept");
        s.metrics.audit_event(&r.group, &r.resource, &r.verb, "rejected", "undecodable");
    }
    for ev in &list.events {
        let Some(route) = route_of(ev) else {
            // Never credited to a fallback route: counted and dropped.
            let (g, r) =
                ev.object_ref.as_ref().map(|o| (o.api_group.as_str(), o.resource.as_str())).unwrap_or(("", ""));
            s.metrics.audit_event(g, r, &ev.verb, "rejected", "no_route");
            rejected += 1;
            *reasons.entry("no_route").or_default() += 1;
            continue;
        };
        match runtime::metrics::publish_counted(&route, ev, &s.metrics) {
            Published::Fact { scope, fact, .. } => facts.push((scope, fact)),
            Published::Rejected(why) => {
                rejected += 1;
                *reasons.entry(why.label()).or_default() += 1;
            }
        }
    }
    misconfigured(&s.warned, &reasons);
    let n = facts.len();
    if n > 0
        && let Err(e) = s.publisher.publish(facts).await
    {
        tracing::error!(error = %e, "appending an audit batch failed");
        // 5xx: the API server retries the batch; a duplicate is harmless.
        return reply(StatusCode::SERVICE_UNAVAILABLE, format!("could not append the batch: {e}"));
    }
    tracing::debug!(events = total, facts = n, rejected, "audit batch appended");
    let mut body = format!("{{\"events\":{total},\"facts\":{n},\"rejected\":{rejected}");
    if !reasons.is_empty() {
        let by: Vec<String> = reasons.iter().map(|(r, k)| format!("\"{r}\":{k}")).collect();
        body.push_str(&format!(",\"reasons\":{{{}}}", by.join(",")));
    }
    body.push('}');
    reply(StatusCode::OK, body)
}

/// What each reason that no API server should cause means, and what to do.
fn advice(reason: &str) -> Option<&'static str> {
    Some(match reason {
        "no_route" => "no route: post to /audit-webhook/<route>, or set the route annotation the bare path reads",
        "no_user" => "no user.username: is this an audit.k8s.io/v1 Event from an API server?",
        "no_resource" => "no objectRef.resource: is this an audit.k8s.io/v1 Event from an API server?",
        "no_name" => "a write with no object name (and no response object to read it from)",
        _ => return None,
    })
}

/// Events refused for a reason that means a misconfigured sender are
/// logged, at most once a minute per reason (the reply and
/// `gitopsreverser_audit_events_total` count every one); the rest (reads,
/// dry runs, failed requests) are what a broad audit policy sends.
fn misconfigured(
    warned: &std::sync::Mutex<Vec<(&'static str, std::time::Instant)>>,
    reasons: &std::collections::BTreeMap<&'static str, usize>,
) {
    let now = std::time::Instant::now();
    for (reason, count) in reasons {
        let Some(advice) = advice(reason) else { continue };
        let mut last = warned.lock().unwrap_or_else(|e| e.into_inner());
        match last.iter_mut().find(|(r, _)| r == reason) {
            Some((_, at)) if now.duration_since(*at) < std::time::Duration::from_secs(60) => continue,
            Some((_, at)) => *at = now,
            None => last.push((reason, now)),
        }
        tracing::warn!(
            reason,
            events = count,
            "audit events make no fact: {advice} (said at most once a minute; counted on gitopsreverser_audit_events_total)"
        );
    }
}
