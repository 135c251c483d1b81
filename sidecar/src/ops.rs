//! The operational listener: `/metrics` (Prometheus text with every metric
//! of the spec's table), `/healthz` (the process serves), `/readyz` (the
//! follower has caught up to the TTL horizon).

use std::sync::Arc;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use shared::metrics::Metrics;
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
