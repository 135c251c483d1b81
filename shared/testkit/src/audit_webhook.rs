//! The API server's audit webhook backend, for the fake API (`testkit
//! fake-api --audit-webhook-config-file`): every write becomes its
//! RequestResponse audit event ([`crate::audit::from_write`], stamped now),
//! posted as an `EventList` to the server a kubeconfig-format file names,
//! with its CA and client certificate, in batches of at most `max_size`
//! waiting at most `max_wait` (kube-apiserver's `--audit-webhook-batch-*`).
//! A batch the receiver refuses is tried three times, then dropped with a
//! line on stderr, as the API server's batching backend drops it.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::Value;

use crate::fakeapi::Store;

/// How a batch fills.
#[derive(Debug, Clone, Copy)]
pub struct Batch {
    pub max_size: usize,
    pub max_wait: Duration,
}

/// The receiver the events go to.
pub struct Webhook {
    client: kube::Client,
    path: String,
    url: String,
}

impl Webhook {
    /// The receiver a kubeconfig-format webhook file names (its current
    /// context's cluster `server`, CA, and user's client certificate).
    pub async fn from_file(file: &Path) -> Result<Webhook, String> {
        let kubeconfig = Kubeconfig::read_from(file).map_err(|e| e.to_string())?;
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| e.to_string())?;
        let url = config.cluster_url.to_string();
        let path = config.cluster_url.path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "/".into());
        // The client's base is the server; the webhook's path goes on each post.
        let base = format!(
            "{}://{}",
            config.cluster_url.scheme_str().unwrap_or("https"),
            config.cluster_url.authority().map(|a| a.as_str()).unwrap_or_default()
        );
        config.cluster_url = base.parse().map_err(|e| format!("server {url:?}: {e}"))?;
        let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
        Ok(Webhook { client, path, url })
    }

    /// Posts the store's writes as they happen, until aborted.
    pub async fn run(self, store: Arc<Mutex<Store>>, batch: Batch) {
        let mut pending: Vec<Value> = Vec::new();
        let mut since: Option<Instant> = None;
        loop {
            tokio::time::sleep(Duration::from_millis(50).min(batch.max_wait)).await;
            let writes = store.lock().unwrap_or_else(|e| e.into_inner()).take_writes();
            if !writes.is_empty() && since.is_none() {
                since = Some(Instant::now());
            }
            let now = now();
            pending.extend(writes.iter().map(|w| {
                let mut e = crate::audit::from_write(w);
                e["requestReceivedTimestamp"] = now.clone().into();
                e["stageTimestamp"] = now.clone().into();
                e
            }));
            let due = since.is_some_and(|t| t.elapsed() >= batch.max_wait);
            while pending.len() >= batch.max_size || (due && !pending.is_empty()) {
                let n = pending.len().min(batch.max_size);
                let events: Vec<Value> = pending.drain(..n).collect();
                self.deliver(&events).await;
            }
            if pending.is_empty() {
                since = None;
            }
        }
    }

    async fn deliver(&self, events: &[Value]) {
        let mut last = String::new();
        for attempt in 0..3u32 {
            match self.post(events).await {
                Ok(()) => return,
                Err(e) => last = e,
            }
            tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
        }
        eprintln!("audit webhook {}: {} event(s) dropped after 3 attempts: {last}", self.url, events.len());
    }

    async fn post(&self, events: &[Value]) -> Result<(), String> {
        let request = http::Request::post(&self.path)
            .header("content-type", "application/json")
            .body(crate::audit::event_list(events.to_vec()))
            .map_err(|e| e.to_string())?;
        self.client.request_text(request).await.map(|_| ()).map_err(|e| e.to_string())
    }
}

/// Now, as the API server stamps an event (RFC 3339, microseconds).
fn now() -> String {
    use k8s_openapi::jiff::{Timestamp, Unit};
    Timestamp::now().round(Unit::Microsecond).map(|t| t.to_string()).unwrap_or_default()
}
