//! The operational listener: `/metrics` (Prometheus text with every metric
//! of the spec's table), `/healthz` (the process serves), `/readyz` (the
//! follower has caught up to the TTL horizon), and `GET /v1/explain` (the
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
use runtime::attribution::transport::{AnyFollower, FactFollower};
use runtime::metrics::Metrics;
use tokio::sync::watch;

pub fn router(metrics: Arc<Metrics>, ready: watch::Receiver<bool>) -> Router {
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
                let ready = *ready.borrow();
                async move {
                    if ready {
                        (StatusCode::OK, "ready\n").into_response()
                    } else {
                        (
                            StatusCode::SERVICE_UNAVAILABLE,
                            "not ready: the follower has not caught up to the TTL horizon\n",
                        )
                            .into_response()
                    }
                }
            }),
        )
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
