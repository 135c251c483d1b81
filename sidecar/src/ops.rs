//! The operational listener: `/metrics` (Prometheus text with every metric
//! of the spec's table), `/healthz` (the process serves), `/readyz` (Redis
//! answers and the follower has caught up to the TTL horizon), and `GET /v1/explain` (the
//! gRPC `Explain` as JSON, for `kubectl reverser why --pod` through the API
//! server's pod proxy).

use std::sync::Arc;

use axum::extract::Query;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use rules::attribution::why::ExplainParams;
use runtime::attribution::Engine;
use runtime::attribution::transport::{AnyFollower, FactFollower, Transport};
use runtime::metrics::Metrics;
use tokio::sync::watch;

/// One readiness condition: ready while it holds `true`; otherwise `/readyz`
/// answers 503 with `why`.
pub type ReadyCheck = (watch::Receiver<bool>, &'static str);

/// Redis's `maxmemory-policy` when it evicts keys: refused (not ready)
/// unless accepted by `--allow-evicting-redis`, then shown as a warning.
#[derive(Clone)]
pub struct Eviction {
    pub policy: watch::Receiver<Option<String>>,
    pub allowed: bool,
}

impl Eviction {
    /// `(blocks readiness, what to say)` while Redis evicts.
    fn detail(&self) -> Option<(bool, String)> {
        let policy = self.policy.borrow().clone()?;
        Some(if self.allowed {
            (
                false,
                format!(
                    "warning: Redis maxmemory-policy {policy} evicts keys (accepted by --allow-evicting-redis): an evicted stream loses acknowledged facts, counted as stream gaps"
                ),
            )
        } else {
            (
                true,
                format!(
                    "Redis maxmemory-policy {policy} evicts keys and may drop acknowledged facts: appends are refused; set noeviction, or give --allow-evicting-redis"
                ),
            )
        })
    }
}

/// `eviction`: Redis's eviction policy, shown in `/readyz`.
pub fn router(metrics: Arc<Metrics>, ready: Vec<ReadyCheck>, eviction: Option<Eviction>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let m = metrics.clone();
                async move {
                    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], m.render())
                }
            }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let mut not_ready: Vec<String> =
                    ready.iter().filter(|(r, _)| !*r.borrow()).map(|(_, why)| (*why).to_owned()).collect();
                let mut warning = None;
                match eviction.as_ref().and_then(Eviction::detail) {
                    Some((true, why)) => not_ready.push(why),
                    Some((false, note)) => warning = Some(note),
                    None => {}
                }
                async move {
                    if not_ready.is_empty() {
                        let body = match warning {
                            Some(note) => format!("ready ({note})\n"),
                            None => "ready\n".to_owned(),
                        };
                        (StatusCode::OK, body).into_response()
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {}\n", not_ready.join("; ")))
                            .into_response()
                    }
                }
            }),
        )
}

/// The readiness conditions of a process on `transport`: Redis answers
/// (when it is the transport), and, with a follower, the follower caught up.
/// What `/readyz` says about Redis's eviction policy, with Redis.
pub fn eviction(transport: &Transport, allowed: bool) -> Option<Eviction> {
    transport.evicting_policy().map(|policy| Eviction { policy, allowed })
}

pub fn ready_checks(transport: &Transport, follower: Option<watch::Receiver<bool>>) -> Vec<ReadyCheck> {
    let mut checks = Vec::new();
    if let Some(up) = transport.health() {
        checks.push((up, "Redis does not answer"));
    }
    if let Some(caught_up) = follower {
        checks.push((caught_up, "the follower has not caught up to the TTL horizon"));
    }
    checks
}

/// `GET /v1/explain?route=&group=&version=&resource=&namespace=&name=&uid=
/// &resourceVersion=&removal=&labels=`: the same content as the gRPC
/// `Explain`, as [`Explanation`] JSON.
pub fn explain_router(engine: Arc<Engine>, follower: AnyFollower) -> Router {
    Router::new().route(
        "/v1/explain",
        get(move |Query(params): Query<ExplainParams>| {
            let (engine, follower) = (engine.clone(), follower.clone());
            async move {
                let scope = match params.scope() {
                    Ok(s) => s,
                    Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
                };
                let q = params.query(engine.clock().now_ms());
                let following = follower.subscriptions().contains(&scope);
                Json(engine.explanation(&scope, &q, following)).into_response()
            }
        }),
    )
}
