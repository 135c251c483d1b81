//! The API server a process talks to and the bounds of its calls: what a
//! failed call says, naming the server and the bound, without the Debug
//! text of the error types.

use std::time::Duration;

use runtime::kubeconfig::{Bounds, Unanswered};

/// How long a watch may go without a byte before it is resumed: the API
/// server sends a bookmark about every minute on a quiet type.
pub const WATCH_SILENCE: Duration = Duration::from_secs(120);

/// kube-runtime's watcher for the CRs the mirror follows (its GitTarget and
/// GitProviders, the rules, CommitRequests): each watch request is renewed
/// after 100 s, under [`WATCH_SILENCE`], so a quiet namespace renews it
/// before the read bound trips.
pub fn cr_watcher_config() -> kube::runtime::watcher::Config {
    kube::runtime::watcher::Config::default().timeout(100)
}

/// The API server and the bounds of the calls to it.
#[derive(Debug, Clone)]
pub struct Server {
    pub url: String,
    pub bounds: Bounds,
}

impl Server {
    /// A client for the configuration `kubeconfig` selects, its calls held
    /// to `bounds`.
    pub async fn connect(
        kubeconfig: Option<&std::path::Path>,
        bounds: Bounds,
    ) -> crate::error::Result<(kube::Client, Self)> {
        let config = runtime::kubeconfig::load(kubeconfig, None).await.map_err(runtime::Error::from)?;
        let (client, url) = runtime::kubeconfig::bounded_client(config, &bounds).map_err(runtime::Error::from)?;
        Ok((client, Self { url, bounds }))
    }

    /// What a failed call says, without the Debug text of the error types.
    pub fn failure(&self, e: &kube::Error) -> String {
        match e {
            kube::Error::Api(s) => format!("the API server at {} answered {}: {}", self.url, s.code, s.message),
            other => match Unanswered::of(other) {
                Some(u) => u.sentence(&self.url, &self.bounds),
                None => runtime::error_chain(other),
            },
        }
    }

    /// The same for the mirror's reads (discovery, the rules).
    pub fn mirror_failure(&self, e: &runtime::mirror::MirrorError) -> String {
        match e {
            runtime::mirror::MirrorError::Kube { what, source } => format!("reading {what}: {}", self.failure(source)),
            other => other.to_string(),
        }
    }

    /// A failed mirror read as the command's error: a transport failure or
    /// a refusal names the server; the rest keeps its own message.
    pub fn mirror_error(&self, e: runtime::mirror::MirrorError) -> crate::error::Error {
        match e {
            runtime::mirror::MirrorError::Kube { .. } => crate::error::Error::ApiServer(self.mirror_failure(&e)),
            other => runtime::Error::from(other).into(),
        }
    }
}
