//! The source cluster a GitTarget mirrors, chosen by its ClusterProvider
//! (gitops-reverser `internal/kubeconfig`, `internal/authz`,
//! `internal/watch/source_cluster_resolver.go`):
//!
//! - [`admit`]: whether the GitTarget's namespace may mirror through the
//!   ClusterProvider at all (`spec.allowedNamespaces`, deny by default;
//!   `clusterprovider_admission.go` `GitTargetAdmitted`);
//! - [`kubeconfig`]: which Secret key holds a remote's kubeconfig (Flux's
//!   `value` then `value.yaml`) and whether it is safe to use: exec auth and
//!   insecure TLS refused unless the operator allows them, credentials or a
//!   CA named by file path always refused (`kubeconfig.go` `Check`);
//! - [`throttle`]: the client's qps and burst for a remote;
//! - [`reachability`]: the `SourceClusterReachable` verdict from what the
//!   last discovery of the source cluster answered.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::config::ClusterProviderSpec;
use super::status::{ConditionStatus, Verdict};

pub const CLUSTER_PROVIDER_NOT_FOUND: &str = "ClusterProviderNotFound";
pub const NAMESPACE_NOT_AUTHORIZED: &str = "NamespaceNotAuthorized";

/// A denial: the condition reason and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
}

/// `GitTargetAdmitted`: the ClusterProvider must admit the GitTarget's
/// namespace in `spec.allowedNamespaces` (omitted admits none). It is
/// evaluated on every report, so a policy tightened later revokes a
/// running mirror too.
///
/// A GitTarget whose ClusterProvider does not exist is denied by the
/// reference; the mirror admits it on the cluster it runs in (its name is
/// then the audit route, and nothing is delegated), so a cluster without
/// ClusterProviders keeps mirroring its own namespace. `docs/mirror.md`
/// says so.
pub fn admit(
    provider_name: &str,
    provider: Option<&ClusterProviderSpec>,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Result<(), Refusal> {
    let Some(spec) = provider else { return Ok(()) };
    let admitted = spec.allowed_namespaces.as_ref().is_some_and(|m| m.admits(namespace, labels));
    if admitted {
        return Ok(());
    }
    Err(Refusal {
        reason: NAMESPACE_NOT_AUTHORIZED,
        message: format!(
            "namespace {namespace:?} is not permitted to reference ClusterProvider {provider_name:?} \
             (spec.allowedNamespaces); a platform admin adds it there"
        ),
    })
}

/// The kubeconfig of a remote ClusterProvider: where it is and whether it
/// may be used.
pub mod kubeconfig {
    use super::*;

    pub const SECRET_NOT_FOUND: &str = "KubeConfigSecretNotFound";
    pub const KEY_NOT_FOUND: &str = "KubeConfigKeyNotFound";
    pub const INVALID: &str = "KubeConfigInvalid";
    pub const EXEC_NOT_ALLOWED: &str = "KubeConfigExecNotAllowed";
    pub const INSECURE_TLS_NOT_ALLOWED: &str = "KubeConfigInsecureTLSNotAllowed";
    pub const FILE_REFERENCE_NOT_ALLOWED: &str = "KubeConfigFileReferenceNotAllowed";

    /// The operator's opt-ins to the two kubeconfigs refused by default
    /// (`--insecure-kubeconfig-exec`, `--insecure-kubeconfig-tls`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct SafetyPolicy {
        pub allow_exec: bool,
        pub allow_insecure_tls: bool,
    }

    /// `ResolveKey`: an explicit `secretRef.key` wins; otherwise `value`,
    /// then `value.yaml`. An empty value counts as absent.
    pub fn resolve_key<'a>(data: &'a BTreeMap<String, Vec<u8>>, key: Option<&str>) -> Option<(&'a [u8], &'a str)> {
        let at =
            |k: &str| data.get_key_value(k).filter(|(_, v)| !v.is_empty()).map(|(k, v)| (v.as_slice(), k.as_str()));
        match key.filter(|k| !k.is_empty()) {
            Some(k) => at(k),
            None => at("value").or_else(|| at("value.yaml")),
        }
    }

    /// How a missing key is named: an omitted key tried both.
    pub fn describe_key(key: Option<&str>) -> &str {
        key.filter(|k| !k.is_empty()).unwrap_or("value or value.yaml")
    }

    /// The fields of a kubeconfig the safety check reads.
    #[derive(Debug, Default, Deserialize)]
    struct Shape {
        #[serde(default)]
        clusters: Vec<NamedCluster>,
        #[serde(default)]
        users: Vec<NamedUser>,
    }

    #[derive(Debug, Default, Deserialize)]
    struct NamedCluster {
        #[serde(default)]
        name: String,
        #[serde(default)]
        cluster: Option<ClusterShape>,
    }

    #[derive(Debug, Default, Deserialize)]
    struct NamedUser {
        #[serde(default)]
        name: String,
        #[serde(default)]
        user: Option<UserShape>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(rename_all = "kebab-case")]
    struct ClusterShape {
        #[serde(default)]
        insecure_skip_tls_verify: bool,
        #[serde(default)]
        certificate_authority: Option<String>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(rename_all = "kebab-case")]
    struct UserShape {
        #[serde(default)]
        exec: Option<serde_json::Value>,
        #[serde(default)]
        client_certificate: Option<String>,
        #[serde(default)]
        client_key: Option<String>,
        #[serde(default, rename = "tokenFile")]
        token_file: Option<String>,
    }

    /// `Check`: parses the kubeconfig and refuses what the policy does not
    /// allow, without dialing. A credential or CA named by file path would
    /// be read from this pod's own filesystem and sent to the server the
    /// kubeconfig names, so it is refused with no opt-in.
    pub fn check(raw: &[u8], policy: SafetyPolicy) -> Result<(), Refusal> {
        let refuse = |reason, message| Err(Refusal { reason, message });
        let shape: Shape = match serde_norway::from_slice(raw) {
            Ok(s) => s,
            Err(e) => return refuse(INVALID, format!("not a parseable kubeconfig: {e}")),
        };
        if !policy.allow_exec
            && let Some(u) = shape.users.iter().find(|u| u.user.as_ref().is_some_and(|c| c.exec.is_some()))
        {
            return refuse(
                EXEC_NOT_ALLOWED,
                format!(
                    "kubeconfig user {:?} uses an exec auth provider, which runs a binary in the mirror's pod; \
                     rejected. Set --insecure-kubeconfig-exec to allow it, or use a token/cert credential.",
                    u.name
                ),
            );
        }
        if !policy.allow_insecure_tls
            && let Some(c) =
                shape.clusters.iter().find(|c| c.cluster.as_ref().is_some_and(|c| c.insecure_skip_tls_verify))
        {
            return refuse(
                INSECURE_TLS_NOT_ALLOWED,
                format!(
                    "kubeconfig cluster {:?} sets insecure-skip-tls-verify, which disables server certificate \
                     validation; rejected. Set --insecure-kubeconfig-tls to allow it, or embed the CA.",
                    c.name
                ),
            );
        }
        let set = |f: &Option<String>| f.as_deref().is_some_and(|s| !s.is_empty());
        for u in &shape.users {
            let Some(user) = &u.user else { continue };
            let field = [
                (&user.client_certificate, "client-certificate"),
                (&user.client_key, "client-key"),
                (&user.token_file, "tokenFile"),
            ]
            .into_iter()
            .find(|(f, _)| set(f));
            if let Some((_, field)) = field {
                return refuse(
                    FILE_REFERENCE_NOT_ALLOWED,
                    format!(
                        "kubeconfig user {:?} names {field} by file path, which would be read from the mirror's \
                         pod; rejected. Embed the credential with its *-data field (client-certificate-data / \
                         client-key-data) or use an inline token.",
                        u.name
                    ),
                );
            }
        }
        if let Some(c) =
            shape.clusters.iter().find(|c| c.cluster.as_ref().is_some_and(|c| set(&c.certificate_authority)))
        {
            return refuse(
                FILE_REFERENCE_NOT_ALLOWED,
                format!(
                    "kubeconfig cluster {:?} names certificate-authority by file path, which would be read from the \
                     mirror's pod; rejected. Embed it with certificate-authority-data.",
                    c.name
                ),
            );
        }
        Ok(())
    }

    /// Where a remote's kubeconfig Secret is read, and what it held: the
    /// inputs of [`validate`].
    #[derive(Debug, Clone, Copy)]
    pub struct Found<'a> {
        /// `namespace/name` of the Secret, for messages.
        pub secret: &'a str,
        pub key: Option<&'a str>,
        /// `None`: the Secret does not exist.
        pub data: Option<&'a BTreeMap<String, Vec<u8>>>,
    }

    /// The ClusterProvider's `Validated` gate for a remote
    /// (`validateProviderKubeConfig`): the Secret exists in the operator's
    /// namespace, holds a kubeconfig under its key, and passes [`check`].
    /// Returns the kubeconfig's bytes.
    pub fn validate<'a>(found: Found<'a>, policy: SafetyPolicy) -> Result<&'a [u8], Refusal> {
        let Found { secret, key, data } = found;
        let Some(data) = data else {
            return Err(Refusal {
                reason: SECRET_NOT_FOUND,
                message: format!(
                    "spec.kubeConfig.secretRef names Secret {secret}, which does not exist in the operator namespace"
                ),
            });
        };
        let Some((raw, used)) = resolve_key(data, key) else {
            return Err(Refusal {
                reason: KEY_NOT_FOUND,
                message: format!(
                    "kubeconfig Secret {secret} has no kubeconfig under key {:?} (set spec.kubeConfig.secretRef.key)",
                    describe_key(key)
                ),
            });
        };
        check(raw, policy).map_err(|r| Refusal {
            reason: r.reason,
            message: format!("kubeconfig Secret {secret} key {used:?}: {}", r.message),
        })?;
        Ok(raw)
    }
}

/// A remote's client throttle: the provider's `spec.qps`/`spec.burst`,
/// else the operator-wide defaults (`--source-cluster-qps`,
/// `--source-cluster-burst`; gitops-reverser's 20 and 30).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throttle {
    pub qps: f64,
    pub burst: u32,
}

pub const DEFAULT_QPS: f64 = 20.0;
pub const DEFAULT_BURST: u32 = 30;

/// `throttleFor`: the provider's override wins; below 1 (the CRD's
/// minimum) it is ignored.
pub fn throttle(spec: &ClusterProviderSpec, defaults: Throttle) -> Throttle {
    Throttle {
        qps: spec.qps.filter(|q| *q >= 1).map_or(defaults.qps, f64::from),
        burst: spec.burst.filter(|b| *b >= 1).map_or(defaults.burst, |b| b as u32),
    }
}

/// What the last discovery of the source cluster answered.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Discovery {
    /// Not asked yet.
    #[default]
    Awaiting,
    Answered,
    /// The server answered with this HTTP status (401, 403, ...).
    Refused {
        code: u16,
        message: String,
    },
    /// No answer (DNS, TCP, TLS, a timeout).
    Unreachable(String),
}

/// `SourceClusterReachable` (cluster_context.go
/// `classifySourceClusterReachFailure`): the local cluster is reachable by
/// definition once it answered; a remote is classified by what its
/// discovery hit.
pub fn reachability(remote: bool, discovery: &Discovery) -> Verdict {
    use ConditionStatus::{False, True, Unknown};
    match discovery {
        Discovery::Awaiting => {
            Verdict::new(Unknown, "AwaitingDiscovery", "API discovery of the source cluster has not answered yet")
        }
        Discovery::Answered if remote => {
            Verdict::new(True, "SourceClusterReachable", "API discovery of the remote source cluster succeeded")
        }
        Discovery::Answered => Verdict::new(True, "LocalCluster", "the mirror watches the cluster it runs in"),
        Discovery::Refused { code: 401, message } => {
            Verdict::new(False, "SourceClusterAuthenticationFailed", message.clone())
        }
        Discovery::Refused { code: 403, message } => Verdict::new(False, "SourceClusterAccessDenied", message.clone()),
        Discovery::Refused { message, .. } | Discovery::Unreachable(message) => {
            Verdict::new(False, "SourceClusterUnreachable", message.clone())
        }
    }
}

#[cfg(test)]
mod tests;
