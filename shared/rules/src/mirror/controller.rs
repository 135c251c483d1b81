//! The objects that serve one GitTarget (issue 27 item 5): its watcher and
//! sidecar in one Deployment, a ServiceAccount, and RBAC derived from what
//! its rules resolve to, granting nothing else. `reverser-sidecar
//! controller` applies them for every GitTarget (kube-runtime's
//! `Controller`) and removes them with it; the chart's static `mirrors`
//! list renders the same shape (`charts/reverser/templates/mirrors.yaml`).
//!
//! The Deployment and its ServiceAccount run in the operator's namespace,
//! as the chart's mirrors do: the Redis URL Secret and the remote
//! kubeconfigs are there, never in a tenant's namespace. Kubernetes allows
//! no owner reference across namespaces (nor a namespaced owner of a
//! cluster-scoped object), so every object carries the GitTarget's uid in a
//! label instead: the controller's finalizer removes them with the
//! GitTarget, and [`stale`] names what no GitTarget claims any more.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::config::{GitProviderSpec, GitTargetSpec};
use super::watch_rules::{Resolved, WatchScope};

/// The field manager and `app.kubernetes.io/managed-by` of what it applies.
pub const MANAGER: &str = "reverser-controller";
/// The label naming the GitTarget (its uid) an object serves.
pub const TARGET_UID: &str = "reverser.dev/git-target-uid";
/// The annotation naming it as `namespace/name`, as the chart's does.
pub const TARGET: &str = "reverser.dev/git-target";
const SOCKET_DIR: &str = "/var/run/reverser";

/// What every mirror it starts shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The operator's namespace: the Deployments and ServiceAccounts.
    pub namespace: String,
    /// The first part of every name (the chart passes its fullname).
    pub prefix: String,
    pub image: String,
    pub pull_policy: String,
    /// `serve`'s attribution flags (`--author-attribution-*`, the grace).
    pub sidecar_args: Vec<String>,
    /// `REVERSER_REDIS_URL` from this Secret's key, when facts come from Redis.
    pub redis: Option<(String, String)>,
}

/// The GitTarget served, as read.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    pub spec: &'a GitTargetSpec,
    /// Its GitProvider, when it exists: the Secrets it names are readable.
    pub provider: Option<&'a GitProviderSpec>,
    /// What its rules resolve to now: the types, where.
    pub resolved: &'a Resolved,
    /// Its ClusterProvider names a remote cluster: the operator's namespace
    /// and the kubeconfig Secret there. The types are then watched in the
    /// remote, so nothing is granted on them here.
    pub remote: Option<(&'a str, &'a str)>,
}

/// `reverser.mirrorName` of the chart: `<prefix>-mirror-<namespace>-<name>`
/// cut to 48 characters, then 8 hex digits of the SHA-256 of
/// `namespace/name`, so a name is a DNS label, unique per GitTarget and
/// stable.
pub fn mirror_name(prefix: &str, namespace: &str, name: &str) -> String {
    let readable: String = format!("{prefix}-mirror-{namespace}-{name}").replace('.', "-").chars().take(48).collect();
    let hash = hex::encode(Sha256::digest(format!("{namespace}/{name}").as_bytes()));
    format!("{}-{}", readable.trim_end_matches('-'), &hash[..8])
}

fn rule(groups: &[&str], resources: &[&str], names: &[String], verbs: &[&str]) -> Value {
    let mut r = json!({"apiGroups": groups, "resources": resources, "verbs": verbs});
    if !names.is_empty() {
        r["resourceNames"] = json!(names);
    }
    r
}

/// The Secrets and ConfigMap the sidecar reads, and those it may write a
/// generated key into ([`super::credentials::reads`]).
fn secret_rules(t: &Target<'_>) -> Vec<Value> {
    let reads = super::credentials::reads(t.spec, t.provider);
    let names = |set: BTreeSet<String>| set.into_iter().collect::<Vec<_>>();
    let mut rules = Vec::new();
    if !reads.secrets.is_empty() {
        // Read at start, then watched by name (live configuration).
        rules.push(rule(&[""], &["secrets"], &names(reads.secrets), &["get", "list", "watch"]));
    }
    if !reads.config_maps.is_empty() {
        rules.push(rule(&[""], &["configmaps"], &names(reads.config_maps), &["get"]));
    }
    if !reads.generated.is_empty() {
        rules.push(rule(&[""], &["secrets"], &names(reads.generated), &["patch"]));
        // create cannot be restricted to a name.
        rules.push(rule(&[""], &["secrets"], &[], &["create"]));
    }
    rules
}

/// list and watch on each watched type, grouped by where it is watched.
fn watch_rules(resolved: &Resolved) -> BTreeMap<WatchScope, Vec<Value>> {
    let mut by_scope: BTreeMap<WatchScope, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for t in &resolved.types {
        for scope in t.watches() {
            by_scope.entry(scope).or_default().entry(t.group.clone()).or_default().insert(t.resource.clone());
        }
    }
    by_scope
        .into_iter()
        .map(|(scope, groups)| {
            let rules = groups
                .into_iter()
                .map(|(group, resources)| {
                    let resources: Vec<&str> = resources.iter().map(String::as_str).collect();
                    rule(&[group.as_str()], &resources, &[], &["list", "watch"])
                })
                .collect();
            (scope, rules)
        })
        .collect()
}

/// All the objects serving `t`, each labelled with its uid.
pub fn desired(t: &Target<'_>, s: &Settings) -> Vec<Value> {
    let name = mirror_name(&s.prefix, t.namespace, t.name);
    let ns = t.namespace;
    let home = s.namespace.as_str();
    let target = format!("{ns}/{}", t.name);
    let labels = json!({"app.kubernetes.io/managed-by": MANAGER, "app.kubernetes.io/component": "mirror",
                        TARGET_UID: t.uid});
    let meta = |object_name: &str, namespace: Option<&str>| {
        let mut m = json!({"name": object_name, "labels": labels, "annotations": {TARGET: target}});
        if let Some(n) = namespace {
            m["namespace"] = json!(n);
        }
        m
    };
    let subject = json!([{"kind": "ServiceAccount", "name": name, "namespace": home}]);
    let role = |object_name: &str, namespace: &str, rules: Vec<Value>| {
        let kind = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": meta(object_name, Some(namespace)), "rules": rules});
        let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": meta(object_name, Some(namespace)),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": object_name},
            "subjects": subject});
        [kind, binding]
    };
    let own = [t.name.to_owned()];
    let cb = "configbutler.ai";
    let mut config = vec![
        rule(&[cb], &["gittargets"], &own, &["get", "list", "watch"]),
        rule(&[cb], &["gitproviders"], &[], &["get", "list", "watch"]),
        rule(&[cb], &["watchrules"], &[], &["list", "watch"]),
        rule(&[cb], &["gittargets/status"], &own, &["patch"]),
        rule(&[cb], &["gitproviders/status"], &[], &["patch"]),
        rule(&[cb], &["watchrules/status"], &[], &["patch"]),
        rule(&[cb], &["commitrequests"], &[], &["list", "watch"]),
        rule(&[cb], &["commitrequests/status"], &[], &["patch"]),
        rule(&[""], &["events"], &[], &["create"]),
    ];
    config.extend(secret_rules(t));

    let mut out = vec![json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(&name, Some(home))})];
    out.extend(role(&name, ns, config));
    let mut cluster = vec![
        rule(&[cb], &["clusterproviders"], &[], &["get"]),
        rule(&[cb], &["clusterproviders/status"], &[], &["patch"]),
        rule(&[cb], &["clusterwatchrules"], &[], &["list", "watch"]),
        rule(&[cb], &["clusterwatchrules/status"], &[], &["patch"]),
    ];
    if t.spec.allowed_source_namespaces.as_ref().is_some_and(|p| p.selector.is_some()) {
        cluster.push(rule(&[""], &["namespaces"], &[], &["list"]));
    }
    let watch_name = format!("{name}-watch");
    let types = if t.remote.is_some() { BTreeMap::new() } else { watch_rules(t.resolved) };
    if let Some((operator_ns, secret)) = t.remote {
        let read = rule(&[""], &["secrets"], &[secret.to_owned()], &["get"]);
        out.extend(role(&format!("{name}-kubeconfig"), operator_ns, vec![read]));
    }
    for (scope, rules) in types {
        match scope {
            WatchScope::Everywhere => cluster.extend(rules),
            WatchScope::Namespace(n) => out.extend(role(&watch_name, &n, rules)),
        }
    }
    out.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": meta(&name, None), "rules": cluster}));
    out.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": meta(&name, None),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": subject}));
    // The Events of cluster-scoped objects (ClusterWatchRules) go to default.
    if ns != "default" {
        out.extend(role(&format!("{name}-event"), "default", vec![rule(&[""], &["events"], &[], &["create"])]));
    }
    let operator_ns = t.remote.map(|(n, _)| n);
    out.push(deployment(&name, &target, operator_ns, meta(&name, Some(home)), s));
    out
}

/// The watcher and its sidecar, in the shape of the chart's mirrors.
fn deployment(name: &str, target: &str, operator_ns: Option<&str>, metadata: Value, s: &Settings) -> Value {
    let socket = format!("{SOCKET_DIR}/reverser.sock");
    let selector = json!({"app.kubernetes.io/name": "reverser", "app.kubernetes.io/component": "mirror",
                          "reverser.dev/mirror": name});
    let hardened = json!({"runAsNonRoot": true, "runAsUser": 65532, "readOnlyRootFilesystem": true,
        "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}});
    let probe =
        |path: &str, port: &str, period: u32| json!({"httpGet": {"path": path, "port": port}, "periodSeconds": period});
    let mut serve_args: Vec<String> = vec![
        "serve".into(),
        "--socket".into(),
        socket.clone(),
        "--socket-mode=666".into(),
        "--audit-listen=off".into(),
        format!("--git-target={target}"),
        "--git-repo=/var/lib/reverser/clone".into(),
        "--metrics-listen=0.0.0.0:9090".into(),
    ];
    serve_args.extend(s.sidecar_args.iter().cloned());
    let mut sidecar = json!({
        "name": "reverser-sidecar", "image": s.image, "imagePullPolicy": s.pull_policy, "args": serve_args,
        "restartPolicy": "Always",
        "ports": [{"name": "sidecar-metrics", "containerPort": 9090, "protocol": "TCP"}],
        "readinessProbe": probe("/readyz", "sidecar-metrics", 5), "livenessProbe": probe("/healthz", "sidecar-metrics", 10),
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": hardened,
        "volumeMounts": [{"name": "reverser-socket", "mountPath": SOCKET_DIR}, {"name": "git-repo", "mountPath": "/var/lib/reverser"}],
    });
    if let Some((secret, key)) = &s.redis {
        sidecar["env"] =
            json!([{"name": "REVERSER_REDIS_URL", "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}]);
    }
    let mut watch_args = vec![
        "watch".to_owned(),
        format!("--git-target={target}"),
        format!("--socket={socket}"),
        "--metrics-listen=0.0.0.0:9091".into(),
    ];
    watch_args.extend(operator_ns.map(|n| format!("--operator-namespace={n}")));
    let watcher = json!({
        "name": "watcher", "image": s.image, "imagePullPolicy": s.pull_policy,
        "args": watch_args,
        "env": [{"name": "REVERSER_SOCKET", "value": socket}],
        "ports": [{"name": "metrics", "containerPort": 9091, "protocol": "TCP"}],
        "readinessProbe": probe("/readyz", "metrics", 5), "livenessProbe": probe("/healthz", "metrics", 10),
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": hardened,
        "volumeMounts": [{"name": "reverser-socket", "mountPath": SOCKET_DIR, "readOnly": true}],
    });
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
        "spec": {
            // One writer per branch: never two pods at once, not even in a rollout.
            "replicas": 1, "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector, "annotations": {TARGET: target}},
                "spec": {
                    "serviceAccountName": name, "automountServiceAccountToken": true,
                    "terminationGracePeriodSeconds": 40,
                    "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "initContainers": [sidecar], "containers": [watcher],
                    "volumes": [{"name": "reverser-socket", "emptyDir": {}}, {"name": "git-repo", "emptyDir": {}}],
                },
            },
        },
    })
}

/// An object by kind, namespace and name.
pub type Identity = (String, Option<String>, String);

/// An object the controller applied, as listed by its label.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Applied {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    /// Its `reverser.dev/git-target-uid`.
    pub uid: String,
}

/// What to delete: an applied object whose GitTarget is gone (its uid is not
/// in `live`), or that its GitTarget no longer wants (a namespace no rule
/// watches any more: not in `wanted`, by kind, namespace and name).
pub fn stale<'a>(
    applied: &'a [Applied],
    live: &BTreeSet<String>,
    wanted: &BTreeMap<String, BTreeSet<Identity>>,
) -> Vec<&'a Applied> {
    applied
        .iter()
        .filter(|a| match wanted.get(&a.uid) {
            _ if !live.contains(&a.uid) => true,
            Some(w) => !w.contains(&(a.kind.clone(), a.namespace.clone(), a.name.clone())),
            // Live but not reconciled yet: left alone.
            None => false,
        })
        .collect()
}

/// The (kind, namespace, name) of each object, for [`stale`].
pub fn identities(objects: &[Value]) -> BTreeSet<Identity> {
    objects
        .iter()
        .map(|o| {
            let s = |p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_owned);
            (s("/kind").unwrap_or_default(), s("/metadata/namespace"), s("/metadata/name").unwrap_or_default())
        })
        .collect()
}

#[cfg(test)]
mod tests;
