//! The mirror's configuration, read from the cluster: a GitTarget, its
//! GitProvider, ClusterProvider and rules (`configbutler.ai/v1alpha3`), the
//! Secrets they name, discovery and namespaces. Plain reads through kube;
//! what they mean is the rules' (`rules::mirror`).

use std::collections::BTreeMap;

use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::discovery::{Discovery, Scope as KubeScope};
use rules::mirror::config::{ClusterProvider, ClusterWatchRule, GROUP, GitProvider, GitTarget, VERSION, WatchRule};
use rules::mirror::watch_rules::{Namespace, Served};
use serde::de::DeserializeOwned;

/// Reading the mirror's configuration failed. Messages name the object and
/// the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MirrorError {
    /// A referenced object does not exist.
    #[error("{kind} {namespace}/{name} not found: {hint}")]
    NotFound { kind: &'static str, namespace: String, name: String, hint: String },

    /// The API server refused or could not be reached.
    #[error("reading {what} failed: {source}; check the kubeconfig, the API server and this identity's RBAC")]
    Kube {
        what: String,
        #[source]
        source: Box<kube::Error>,
    },

    /// An object exists but cannot be used as it is.
    #[error("{what}: {message}")]
    Invalid { what: String, message: String },
}

type Result<T, E = MirrorError> = std::result::Result<T, E>;

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> MirrorError {
    let what = what.into();
    move |source| MirrorError::Kube { what, source: Box::new(source) }
}

/// The `configbutler.ai/v1alpha3` resource named by its plural.
pub fn configbutler(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: VERSION.into(),
        api_version: format!("{GROUP}/{VERSION}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn decode<T: DeserializeOwned>(what: &str, object: DynamicObject) -> Result<T> {
    let value = serde_json::to_value(&object)
        .map_err(|e| MirrorError::Invalid { what: what.into(), message: e.to_string() })?;
    serde_json::from_value(value).map_err(|e| MirrorError::Invalid {
        what: what.into(),
        message: format!("does not have the shape of its CRD ({e}); fix the object"),
    })
}

async fn get_opt<T: DeserializeOwned>(
    client: &kube::Client,
    ar: &ApiResource,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<T>> {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    let what = format!("{} {}{name}", ar.kind, namespace.map(|n| format!("{n}/")).unwrap_or_default());
    match api.get_opt(name).await.map_err(kube_err(what.clone()))? {
        Some(object) => Ok(Some(decode(&what, object)?)),
        None => Ok(None),
    }
}

/// A GitTarget and what it names.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub target: GitTarget,
    pub provider: GitProvider,
    /// `None` when no ClusterProvider of that name exists: the audit route
    /// is then the reference's name, as `ClusterProvider.AuditRoute()`
    /// would default it.
    pub cluster_provider: Option<ClusterProvider>,
}

impl Loaded {
    /// The audit route this cluster's facts arrive on.
    pub fn audit_route(&self) -> String {
        match &self.cluster_provider {
            Some(cp) => cp.audit_route().to_owned(),
            None => self.target.spec.cluster_provider().to_owned(),
        }
    }
}

/// Reads GitTarget `namespace/name`, its GitProvider and its ClusterProvider.
pub async fn load(client: &kube::Client, namespace: &str, name: &str) -> Result<Loaded> {
    let target: GitTarget = get_opt(client, &configbutler("GitTarget", "gittargets"), Some(namespace), name)
        .await?
        .ok_or_else(|| MirrorError::NotFound {
            kind: "GitTarget",
            namespace: namespace.into(),
            name: name.into(),
            hint: "create it, or pass the GitTarget this mirror is for with --git-target NAMESPACE/NAME".into(),
        })?;
    let provider_name = &target.spec.provider_ref.name;
    let provider: GitProvider =
        get_opt(client, &configbutler("GitProvider", "gitproviders"), Some(namespace), provider_name)
            .await?
            .ok_or_else(|| MirrorError::NotFound {
                kind: "GitProvider",
                namespace: namespace.into(),
                name: provider_name.clone(),
                hint: format!("GitTarget {namespace}/{name} names it in spec.providerRef; create it in {namespace}"),
            })?;
    if !provider.spec.allows_branch(&target.spec.branch) {
        return Err(MirrorError::Invalid {
            what: format!("GitTarget {namespace}/{name}"),
            message: format!(
                "branch {:?} is not in GitProvider {namespace}/{provider_name} spec.allowedBranches {:?}; allow it there",
                target.spec.branch, provider.spec.allowed_branches
            ),
        });
    }
    let cluster_provider = cluster_provider(client, target.spec.cluster_provider())
        .await
        // Read here for its audit route: a cluster that does not serve the
        // type (or forbids reading it) still mirrors, on the route the
        // reference names. The source-namespace gate reads it strictly.
        .unwrap_or_else(|e| {
            tracing::debug!(error = %e, "no readable ClusterProvider; the audit route is the reference's name");
            None
        });
    Ok(Loaded { target, provider, cluster_provider })
}

/// ClusterProvider `name`, `None` when it does not exist; a refused or
/// failed read is an error.
pub async fn cluster_provider(client: &kube::Client, name: &str) -> Result<Option<ClusterProvider>> {
    get_opt(client, &configbutler("ClusterProvider", "clusterproviders"), None, name).await
}

/// The labels of Namespace `name`, empty when it does not exist (as
/// gitops-reverser evaluates a missing one, clusterprovider_admission.go:77-85).
pub async fn namespace_labels(client: &kube::Client, name: &str) -> Result<BTreeMap<String, String>> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns = api.get_opt(name).await.map_err(kube_err(format!("Namespace {name}")))?;
    Ok(ns.and_then(|n| n.metadata.labels).unwrap_or_default().into_iter().collect())
}

/// Every WatchRule in `namespace` and every ClusterWatchRule (the caller
/// keeps those naming its target).
pub async fn rules(client: &kube::Client, namespace: &str) -> Result<(Vec<WatchRule>, Vec<ClusterWatchRule>)> {
    let list = |ar: ApiResource, ns: Option<String>| {
        let client = client.clone();
        async move {
            let api: Api<DynamicObject> = match &ns {
                Some(ns) => Api::namespaced_with(client, ns, &ar),
                None => Api::all_with(client, &ar),
            };
            api.list(&ListParams::default()).await.map_err(kube_err(format!("the {}", ar.plural)))
        }
    };
    let mut watch_rules = Vec::new();
    for o in list(configbutler("WatchRule", "watchrules"), Some(namespace.into())).await?.items {
        watch_rules.push(decode::<WatchRule>("a WatchRule", o)?);
    }
    let mut cluster_rules = Vec::new();
    match list(configbutler("ClusterWatchRule", "clusterwatchrules"), None).await {
        Ok(l) => {
            for o in l.items {
                cluster_rules.push(decode::<ClusterWatchRule>("a ClusterWatchRule", o)?);
            }
        }
        // Cluster rules are optional: a namespaced mirror may not be allowed
        // to read them.
        Err(e) => tracing::debug!(error = %e, "ClusterWatchRules not readable; none apply"),
    }
    Ok((watch_rules, cluster_rules))
}

/// What the API server serves (every group, every version), as discovery
/// reports it. Groups whose discovery fails (an aggregated API that is
/// down) are left out, and logged.
pub async fn served(client: &kube::Client) -> Result<Vec<Served>> {
    let discovery = Discovery::new(client.clone()).run().await.map_err(kube_err("API discovery"))?;
    let mut out = Vec::new();
    for group in discovery.groups() {
        let preferred = group.preferred_version_or_latest().to_owned();
        for version in group.versions() {
            for (ar, caps) in group.versioned_resources(version) {
                out.push(Served {
                    group: ar.group.clone(),
                    version: ar.version.clone(),
                    resource: ar.plural.clone(),
                    kind: ar.kind.clone(),
                    namespaced: caps.scope == KubeScope::Namespaced,
                    preferred: version == preferred,
                    verbs: caps.operations.clone(),
                });
            }
        }
    }
    Ok(out)
}

/// The namespaces with their labels (for `allowedSourceNamespaces.selector`);
/// empty when listing them is forbidden (a policy of names still works).
pub async fn namespaces(client: &kube::Client) -> Vec<Namespace> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    match api.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .into_iter()
            .map(|n| Namespace {
                name: n.metadata.name.unwrap_or_default(),
                labels: n.metadata.labels.unwrap_or_default().into_iter().collect(),
            })
            .collect(),
        Err(e) => {
            tracing::debug!(error = %e, "namespaces not listable; selector policies admit none");
            Vec::new()
        }
    }
}

/// The data of Secret `namespace/name`, `None` when it does not exist.
pub async fn secret(client: &kube::Client, namespace: &str, name: &str) -> Result<Option<BTreeMap<String, Vec<u8>>>> {
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), namespace);
    let s = api.get_opt(name).await.map_err(kube_err(format!("Secret {namespace}/{name}")))?;
    Ok(s.map(|s| s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect()))
}

/// The value of `key` in ConfigMap `namespace/name` (`data`, else `binaryData`).
pub async fn config_map_value(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    key: &str,
) -> Result<Option<Vec<u8>>> {
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), namespace);
    let cm = api.get_opt(name).await.map_err(kube_err(format!("ConfigMap {namespace}/{name}")))?;
    Ok(cm.and_then(|cm| {
        cm.data
            .and_then(|d| d.get(key).map(|v| v.clone().into_bytes()))
            .or_else(|| cm.binary_data.and_then(|d| d.get(key).map(|v| v.0.clone())))
    }))
}

/// A Secret's data and annotations.
#[derive(Debug, Clone, Default)]
pub struct SecretContent {
    pub data: BTreeMap<String, Vec<u8>>,
    pub annotations: BTreeMap<String, String>,
}

/// Secret `namespace/name` with its annotations, `None` when it does not
/// exist.
pub async fn secret_content(client: &kube::Client, namespace: &str, name: &str) -> Result<Option<SecretContent>> {
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), namespace);
    let s = api.get_opt(name).await.map_err(kube_err(format!("Secret {namespace}/{name}")))?;
    Ok(s.map(|s| SecretContent {
        data: s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect(),
        annotations: s.metadata.annotations.unwrap_or_default().into_iter().collect(),
    }))
}

/// Writes `data` (and `annotations`) into Secret `namespace/name`, creating
/// it when absent (`generateWhenMissing`). Existing keys are kept.
pub async fn store_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    data: BTreeMap<String, Vec<u8>>,
    annotations: BTreeMap<String, String>,
) -> Result<()> {
    use k8s_openapi::ByteString;
    use kube::api::{Patch, PatchParams, PostParams};
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), namespace);
    let what = format!("Secret {namespace}/{name}");
    let encoded: BTreeMap<String, ByteString> = data.into_iter().map(|(k, v)| (k, ByteString(v))).collect();
    if api.get_opt(name).await.map_err(kube_err(what.clone()))?.is_some() {
        let mut patch = serde_json::json!({"data": encoded});
        if !annotations.is_empty() {
            patch["metadata"] = serde_json::json!({"annotations": annotations});
        }
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(kube_err(what))?;
    } else {
        let secret = k8s_openapi::api::core::v1::Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                annotations: (!annotations.is_empty()).then(|| annotations.into_iter().collect()),
                ..Default::default()
            },
            type_: Some("Opaque".into()),
            data: Some(encoded),
            ..Default::default()
        };
        api.create(&PostParams::default(), &secret).await.map_err(kube_err(what))?;
    }
    Ok(())
}
