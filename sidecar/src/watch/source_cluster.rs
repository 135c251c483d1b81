//! The cluster a GitTarget's watcher lists and watches (issue 27 item 4):
//! the one it runs in, or the remote its ClusterProvider's
//! `spec.kubeConfig.secretRef` names. The CRs (GitTarget, rules, status,
//! CommitRequests) always stay in the control cluster; the kubeconfig
//! Secret is read from the operator's namespace there, never from the
//! source cluster (gitops-reverser `source_cluster_resolver.go`). The
//! rules are `rules::mirror::source_cluster`.

use std::collections::BTreeMap;

use rules::mirror::config::ClusterProvider;
use rules::mirror::rule_status::KubeConfigCheck;
use rules::mirror::source_cluster::kubeconfig::{self, Found, SafetyPolicy};
use rules::mirror::source_cluster::{self as rules_source, Discovery, Refusal, Throttle};
use runtime::kubeconfig::{Bounds, ThrottleLayer};

use crate::apiserver::{Server, WATCH_SILENCE};

/// Where the service account's namespace is mounted in a pod.
const POD_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// What the operator decides about remote clusters.
#[derive(Debug, Clone, clap::Args)]
pub struct RemoteArgs {
    /// The namespace a remote ClusterProvider's kubeconfig Secret is read
    /// from, in the control cluster (default: the pod's own namespace).
    #[arg(long, env = "REVERSER_OPERATOR_NAMESPACE", value_name = "NAMESPACE")]
    pub operator_namespace: Option<String>,
    /// Queries per second to a remote source cluster, unless its
    /// ClusterProvider sets spec.qps.
    #[arg(long, default_value_t = rules_source::DEFAULT_QPS, value_name = "QPS")]
    pub source_cluster_qps: f64,
    /// Burst of queries to a remote source cluster, unless its
    /// ClusterProvider sets spec.burst.
    #[arg(long, default_value_t = rules_source::DEFAULT_BURST, value_name = "N")]
    pub source_cluster_burst: u32,
    /// Allow a remote kubeconfig to use an exec auth provider (it runs a
    /// binary in this pod).
    #[arg(long)]
    pub insecure_kubeconfig_exec: bool,
    /// Allow a remote kubeconfig to set insecure-skip-tls-verify.
    #[arg(long)]
    pub insecure_kubeconfig_tls: bool,
}

impl RemoteArgs {
    fn policy(&self) -> SafetyPolicy {
        SafetyPolicy { allow_exec: self.insecure_kubeconfig_exec, allow_insecure_tls: self.insecure_kubeconfig_tls }
    }

    fn operator_namespace(&self) -> Option<String> {
        self.operator_namespace.clone().or_else(|| {
            std::fs::read_to_string(POD_NAMESPACE_FILE).ok().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
        })
    }
}

/// A ClusterProvider's kubeconfig, judged: the check its status shows,
/// and the bytes when it passed.
pub struct Checked {
    pub check: KubeConfigCheck,
    pub raw: Option<(String, Vec<u8>)>,
}

/// Judges `provider`'s kubeconfig, reading its Secret from the control
/// cluster. A failed read (not a missing Secret) is an error: the status
/// stays as it was and the next report asks again.
pub async fn check(control: &kube::Client, provider: &ClusterProvider, args: &RemoteArgs) -> Result<Checked, String> {
    let Some(reference) = &provider.spec.kube_config else {
        return Ok(Checked { check: KubeConfigCheck::InCluster, raw: None });
    };
    let refused =
        |reason, message| Ok(Checked { check: KubeConfigCheck::Refused(Refusal { reason, message }), raw: None });
    let Some(secret_ref) = &reference.secret_ref else {
        return refused(
            kubeconfig::INVALID,
            "spec.kubeConfig.secretRef is required for a remote ClusterProvider".into(),
        );
    };
    let Some(namespace) = args.operator_namespace() else {
        return refused(
            kubeconfig::SECRET_NOT_FOUND,
            format!(
                "the operator namespace, where Secret {:?} is read, is unknown outside a pod: pass \
                 --operator-namespace",
                secret_ref.name
            ),
        );
    };
    let data: Option<BTreeMap<String, Vec<u8>>> = runtime::mirror::secret(control, &namespace, &secret_ref.name)
        .await
        .map_err(|e| format!("reading the kubeconfig Secret {namespace}/{}: {e}", secret_ref.name))?;
    let secret = format!("{namespace}/{}", secret_ref.name);
    let found = Found { secret: &secret, key: secret_ref.key.as_deref(), data: data.as_ref() };
    Ok(match kubeconfig::validate(found, args.policy()) {
        Ok(raw) => {
            let raw = raw.to_vec();
            Checked { check: KubeConfigCheck::Validated(secret.clone()), raw: Some((secret, raw)) }
        }
        Err(r) => Checked { check: KubeConfigCheck::Refused(r), raw: None },
    })
}

/// The clients of the cluster that is watched.
#[derive(Clone)]
pub struct Cluster {
    /// For discovery and lists, each call bounded.
    pub client: kube::Client,
    /// For watches, read-bounded by the watch silence.
    pub watch_client: kube::Client,
    pub server: Server,
    pub remote: bool,
}

impl Cluster {
    pub fn local(client: kube::Client, watch_client: kube::Client, server: Server) -> Self {
        Cluster { client, watch_client, server, remote: false }
    }

    /// The cluster `provider` names: `local` without a kubeConfig, else a
    /// client from its Secret, paced by its throttle. `Err` says why it
    /// cannot be used now.
    pub async fn of(
        local: &Cluster,
        control: &kube::Client,
        provider: Option<&ClusterProvider>,
        args: &RemoteArgs,
        bounds: Bounds,
    ) -> Result<Cluster, String> {
        let Some(provider) = provider.filter(|p| p.spec.kube_config.is_some()) else { return Ok(local.clone()) };
        let name = &provider.metadata.name;
        let checked = check(control, provider, args).await?;
        let Some((secret, raw)) = checked.raw else {
            let why = match checked.check {
                KubeConfigCheck::Refused(r) => format!("{}: {}", r.reason, r.message),
                other => format!("{other:?}"),
            };
            return Err(format!("ClusterProvider {name:?}: {why}"));
        };
        let defaults = Throttle { qps: args.source_cluster_qps, burst: args.source_cluster_burst };
        let throttle = rules_source::throttle(&provider.spec, defaults);
        // One bucket for both clients: the remote sees one client's rate.
        let layer = ThrottleLayer::new(throttle.qps, throttle.burst);
        let connect = |bounds| {
            let (raw, secret, layer) = (&raw, &secret, &layer);
            async move { runtime::kubeconfig::remote_client(raw, secret, &bounds, layer).await.map_err(|e| e.to_string()) }
        };
        let (client, url) = connect(bounds).await?;
        let (watch_client, _) = connect(bounds.with_read(WATCH_SILENCE)).await?;
        tracing::info!(
            cluster_provider = %name,
            qps = throttle.qps,
            burst = throttle.burst,
            "source cluster {url} (ClusterProvider {name:?}, kubeconfig Secret {secret}); the CRs stay in the control \
             cluster"
        );
        Ok(Cluster { client, watch_client, server: Server { url, bounds }, remote: true })
    }
}

/// What a discovery failure says for `SourceClusterReachable`.
pub fn discovery_failed(server: &Server, e: &runtime::mirror::MirrorError) -> Discovery {
    match e {
        runtime::mirror::MirrorError::Kube { source, .. } if let kube::Error::Api(s) = source.as_ref() => {
            Discovery::Refused { code: s.code, message: server.mirror_failure(e) }
        }
        other => Discovery::Unreachable(server.mirror_failure(other)),
    }
}
