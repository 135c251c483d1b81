//! The resource types the fake API serves: the built-in ones it knows by
//! heart and every CRD loaded from a directory, with the discovery
//! documents (`/api`, `/apis`, `/apis/<group>/<version>`) built from them.

use std::path::Path;
use std::sync::OnceLock;

use serde_json::{Value, json};

/// Every verb of a fully served resource.
pub const ALL_VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/// A subresource listed by discovery (`status`, `proxy`, `scale`, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct Subresource {
    pub name: String,
    pub kind: String,
    pub verbs: Vec<String>,
    /// `group/version` of the subresource's kind when it differs (scale).
    pub group_version: Option<(String, String)>,
}

/// One served resource type.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceType {
    /// `""` for the core group.
    pub group: String,
    pub version: String,
    /// The URL plural, e.g. `configmaps`.
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub verbs: Vec<String>,
    /// With a status subresource, the main resource ignores `status` and
    /// `/status` writes only `status`.
    pub status_subresource: bool,
    /// Other subresources, listed by discovery.
    pub subresources: Vec<Subresource>,
    /// `metadata.generation` is kept (bumped on every non-metadata,
    /// non-status change): every CRD, and the built-ins whose strategy
    /// does it.
    pub generation: bool,
    /// A custom resource: LIST items keep `apiVersion` and `kind` (the
    /// built-ins' LIST items carry neither, as the real server sends them).
    pub custom: bool,
    /// The CRD's `openAPIV3Schema` for this version, when loaded.
    pub schema: Option<Value>,
    /// The CRD's `additionalPrinterColumns` for this version (`None`: not
    /// a CRD; empty: a CRD without them, shown as Name and Age).
    pub printer_columns: Option<Vec<Value>>,
}

impl ResourceType {
    /// A built-in type, served with every verb.
    pub fn builtin(group: &str, version: &str, plural: &str, kind: &str, namespaced: bool) -> Self {
        ResourceType {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            kind: kind.into(),
            namespaced,
            short_names: Vec::new(),
            categories: Vec::new(),
            verbs: ALL_VERBS.iter().map(|v| v.to_string()).collect(),
            status_subresource: false,
            subresources: Vec::new(),
            generation: false,
            custom: false,
            schema: None,
            printer_columns: None,
        }
    }

    fn short(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|n| n.to_string()).collect();
        self
    }

    fn category_all(mut self) -> Self {
        self.categories = vec!["all".into()];
        self
    }

    fn with_status(mut self) -> Self {
        self.status_subresource = true;
        self
    }

    fn sub(mut self, name: &str, kind: &str, verbs: &[&str], gv: Option<(&str, &str)>) -> Self {
        self.subresources.push(Subresource {
            name: name.into(),
            kind: kind.into(),
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            group_version: gv.map(|(g, v)| (g.into(), v.into())),
        });
        self
    }

    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// `plural` for the core group, else `plural.group`: how the API server
    /// names the resource in messages, and the store's key.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() { self.plural.clone() } else { format!("{}.{}", self.plural, self.group) }
    }

    /// `/api/v1` or `/apis/<group>/<version>`.
    pub fn base_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }

    /// The API path of an object (or of the collection, `name` empty).
    pub fn path(&self, namespace: &str, name: &str) -> String {
        let mut p = self.base_path();
        if self.namespaced && !namespace.is_empty() {
            p.push_str(&format!("/namespaces/{namespace}"));
        }
        p.push_str(&format!("/{}", self.plural));
        if !name.is_empty() {
            p.push_str(&format!("/{name}"));
        }
        p
    }

    /// The discovery entries: the resource and its subresources.
    pub fn discovery(&self) -> Vec<Value> {
        let mut r = json!({
            "name": self.plural, "singularName": self.singular, "namespaced": self.namespaced,
            "kind": self.kind, "verbs": self.verbs,
        });
        if !self.short_names.is_empty() {
            r["shortNames"] = json!(self.short_names);
        }
        if !self.categories.is_empty() {
            r["categories"] = json!(self.categories);
        }
        let mut out = vec![r];
        if self.status_subresource {
            out.push(
                json!({"name": format!("{}/status", self.plural), "singularName": "", "namespaced": self.namespaced,
                "kind": self.kind, "verbs": ["get", "patch", "update"]}),
            );
        }
        for s in &self.subresources {
            let mut e = json!({"name": format!("{}/{}", self.plural, s.name), "singularName": "",
                "namespaced": self.namespaced, "kind": s.kind, "verbs": s.verbs});
            if let Some((g, v)) = &s.group_version {
                e["group"] = json!(g);
                e["version"] = json!(v);
            }
            out.push(e);
        }
        out
    }

    /// The types a CRD document declares, one per served version.
    pub fn from_crd(crd: &Value) -> Result<Vec<ResourceType>, String> {
        let s = |p: &str| crd.pointer(p).and_then(Value::as_str).map(str::to_string);
        let name = s("/metadata/name").unwrap_or_default();
        let missing = |what: &str| format!("CRD {name:?} has no {what}");
        let group = s("/spec/group").ok_or_else(|| missing("spec.group"))?;
        let plural = s("/spec/names/plural").ok_or_else(|| missing("spec.names.plural"))?;
        let kind = s("/spec/names/kind").ok_or_else(|| missing("spec.names.kind"))?;
        let singular = s("/spec/names/singular").unwrap_or_else(|| kind.to_lowercase());
        let list = |p: &str| -> Vec<String> {
            crd.pointer(p)
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default()
        };
        let namespaced = match s("/spec/scope").as_deref() {
            Some("Namespaced") => true,
            Some("Cluster") => false,
            other => return Err(format!("CRD {name:?}: spec.scope is {other:?}, not Namespaced or Cluster")),
        };
        let versions =
            crd.pointer("/spec/versions").and_then(Value::as_array).ok_or_else(|| missing("spec.versions"))?;
        let mut out = Vec::new();
        for v in versions {
            if v.get("served") == Some(&Value::Bool(false)) {
                continue;
            }
            let version = v.get("name").and_then(Value::as_str).ok_or_else(|| missing("version name"))?;
            let mut t = ResourceType::builtin(&group, version, &plural, &kind, namespaced);
            t.singular = singular.clone();
            t.short_names = list("/spec/names/shortNames");
            t.categories = list("/spec/names/categories");
            t.status_subresource = v.pointer("/subresources/status").is_some();
            if v.pointer("/subresources/scale").is_some() {
                t = t.sub("scale", "Scale", &["get", "patch", "update"], Some(("autoscaling", "v1")));
            }
            t.generation = true;
            t.custom = true;
            t.schema = v.pointer("/schema/openAPIV3Schema").cloned();
            t.printer_columns =
                Some(v.get("additionalPrinterColumns").and_then(Value::as_array).cloned().unwrap_or_default());
            out.push(t);
        }
        Ok(out)
    }
}

/// Kubernetes' version priority: GA before beta before alpha, higher
/// numbers first (`v2` > `v1` > `v1beta2` > `v1beta1` > `v1alpha1`).
fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (class, minor) = if tail.is_empty() {
        (3, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (class, major, minor)
}

/// The served types.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    types: Vec<ResourceType>,
}

impl Registry {
    /// No types at all.
    pub fn empty() -> Self {
        Registry::default()
    }

    /// The built-ins: core/v1 configmaps, secrets, namespaces, pods,
    /// serviceaccounts, services, endpoints, events,
    /// persistentvolumeclaims; apps/v1 deployments, statefulsets,
    /// daemonsets, replicasets, controllerrevisions; batch/v1 jobs,
    /// cronjobs; and the other types the chart produces or a `*` rule
    /// excludes (events.k8s.io, coordination, discovery, flowcontrol,
    /// policy, rbac, networking, admissionregistration).
    pub fn builtin() -> Self {
        let core =
            |plural: &str, kind: &str, namespaced: bool| ResourceType::builtin("", "v1", plural, kind, namespaced);
        let mut r = Registry::empty();
        r.register(core("configmaps", "ConfigMap", true).short(&["cm"]));
        r.register(core("secrets", "Secret", true));
        let mut ns = core("namespaces", "Namespace", false).short(&["ns"]).with_status();
        ns.verbs =
            ["create", "delete", "get", "list", "patch", "update", "watch"].iter().map(|v| v.to_string()).collect();
        r.register(ns.sub("finalize", "Namespace", &["update"], None));
        r.register(core("pods", "Pod", true).short(&["po"]).category_all().with_status().sub(
            "proxy",
            "PodProxyOptions",
            &["create", "delete", "get", "patch", "update"],
            None,
        ));
        r.register(core("serviceaccounts", "ServiceAccount", true).short(&["sa"]));
        let mut deploy = ResourceType::builtin("apps", "v1", "deployments", "Deployment", true)
            .short(&["deploy"])
            .category_all()
            .with_status()
            .sub("scale", "Scale", &["get", "patch", "update"], Some(("autoscaling", "v1")));
        deploy.generation = true;
        r.register(deploy);
        // What the chart and `inject` produce, and what a mirror's `*` rule
        // must leave out (gitops-reverser's default watch exclusions), so
        // both can be tried against the fake API.
        r.register(core("services", "Service", true).short(&["svc"]).category_all().with_status());
        r.register(core("endpoints", "Endpoints", true).short(&["ep"]));
        r.register(core("events", "Event", true).short(&["ev"]));
        r.register(core("persistentvolumeclaims", "PersistentVolumeClaim", true).short(&["pvc"]).with_status());
        let generational = |group: &str, version: &str, plural: &str, kind: &str, namespaced: bool| {
            let mut t = ResourceType::builtin(group, version, plural, kind, namespaced);
            t.generation = true;
            t
        };
        for (plural, kind, short) in [
            ("statefulsets", "StatefulSet", "sts"),
            ("daemonsets", "DaemonSet", "ds"),
            ("replicasets", "ReplicaSet", "rs"),
        ] {
            r.register(generational("apps", "v1", plural, kind, true).short(&[short]).category_all().with_status());
        }
        r.register(ResourceType::builtin("apps", "v1", "controllerrevisions", "ControllerRevision", true));
        r.register(generational("batch", "v1", "jobs", "Job", true).category_all().with_status());
        r.register(
            generational("batch", "v1", "cronjobs", "CronJob", true).short(&["cj"]).category_all().with_status(),
        );
        r.register(ResourceType::builtin("events.k8s.io", "v1", "events", "Event", true).short(&["ev"]));
        r.register(ResourceType::builtin("coordination.k8s.io", "v1", "leases", "Lease", true));
        r.register(ResourceType::builtin("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true));
        for (plural, kind) in
            [("flowschemas", "FlowSchema"), ("prioritylevelconfigurations", "PriorityLevelConfiguration")]
        {
            r.register(ResourceType::builtin("flowcontrol.apiserver.k8s.io", "v1", plural, kind, false).with_status());
        }
        r.register(
            generational("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true)
                .short(&["pdb"])
                .with_status(),
        );
        for (plural, kind, namespaced) in [
            ("roles", "Role", true),
            ("rolebindings", "RoleBinding", true),
            ("clusterroles", "ClusterRole", false),
            ("clusterrolebindings", "ClusterRoleBinding", false),
        ] {
            r.register(ResourceType::builtin("rbac.authorization.k8s.io", "v1", plural, kind, namespaced));
        }
        r.register(generational("networking.k8s.io", "v1", "ingresses", "Ingress", true).short(&["ing"]).with_status());
        r.register(
            generational("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", true).short(&["netpol"]),
        );
        for (plural, kind) in [
            ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration"),
            ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration"),
        ] {
            r.register(generational("admissionregistration.k8s.io", "v1", plural, kind, false));
        }
        r
    }

    /// The built-ins plus the vendored CRDs (tatara.dev and
    /// configbutler.ai) with their schemas, parsed once per process.
    pub fn vendored() -> Self {
        static VENDORED: OnceLock<Registry> = OnceLock::new();
        VENDORED
            .get_or_init(|| {
                let mut r = Registry::builtin();
                for dir in [crate::fixtures::tatara_crds(), crate::fixtures::gitops_reverser_crds()] {
                    if let Err(e) = r.load_crds(&dir) {
                        panic!("the vendored CRDs in {} do not load: {e}", dir.display());
                    }
                }
                r
            })
            .clone()
    }

    /// [`Registry::vendored`] without the schemas: every type served,
    /// no write validated (load the CRDs again to validate).
    pub fn standard() -> Self {
        let mut r = Self::vendored();
        for t in &mut r.types {
            t.schema = None;
        }
        r
    }

    /// Adds `t`, replacing a type with the same group, version and plural.
    pub fn register(&mut self, t: ResourceType) {
        match self.types.iter_mut().find(|x| x.group == t.group && x.version == t.version && x.plural == t.plural) {
            Some(slot) => *slot = t,
            None => self.types.push(t),
        }
    }

    /// Registers every CRD in the `*.yaml`/`*.yml`/`*.json` files of `dir`
    /// (multi-document files and `List`s too); returns how many CRDs.
    pub fn load_crds(&mut self, dir: &Path) -> Result<usize, String> {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("read {}: {e}", dir.display()))?;
        let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        let mut count = 0;
        for path in paths {
            if !matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json")) {
                continue;
            }
            let text = std::fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
            for doc in documents(&text).map_err(|e| format!("parse {}: {e}", path.display()))? {
                if doc.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
                    continue;
                }
                for t in ResourceType::from_crd(&doc).map_err(|e| format!("{}: {e}", path.display()))? {
                    self.register(t);
                }
                count += 1;
            }
        }
        Ok(count)
    }

    /// Every type.
    pub fn types(&self) -> &[ResourceType] {
        &self.types
    }

    /// `/openapi/v3`: one document per group-version, as the real server
    /// lists them (kubectl's client-side validation and `explain` read it).
    pub fn openapi_v3_index(&self) -> Value {
        let mut paths = serde_json::Map::new();
        for t in &self.types {
            let path = openapi_path(&t.group, &t.version);
            let url = format!("/{path}");
            paths.entry(path).or_insert_with(|| json!({"serverRelativeURL": format!("/openapi/v3{url}")}));
        }
        json!({"paths": paths})
    }

    /// `/openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`: a schema
    /// per kind, found by its `x-kubernetes-group-version-kind`. A CRD's is
    /// its `openAPIV3Schema` (what the fake API validates against); a
    /// built-in's accepts any object (the server checks a built-in's
    /// fields against its k8s-openapi type, and kubectl leaves that to the
    /// server).
    pub fn openapi_v3(&self, group: &str, version: &str) -> Option<Value> {
        let mut schemas = serde_json::Map::new();
        let mut paths = serde_json::Map::new();
        for t in self.types.iter().filter(|t| t.group == group && t.version == version) {
            // The writes, with the fieldValidation parameter: kubectl then
            // leaves validation to the server (`fieldValidation=Strict`),
            // as it does against a real one (QueryParamVerifierV3).
            let gvk = json!({"group": group, "version": version, "kind": t.kind});
            let param = json!([{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}]);
            let op = |action: &str| json!({"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk, "parameters": param});
            let scope = if t.namespaced { "namespaces/{namespace}/" } else { "" };
            let collection = format!("/{}/{scope}{}", openapi_path(group, version), t.plural);
            paths.insert(collection.clone(), json!({"post": op("post")}));
            paths.insert(format!("{collection}/{{name}}"), json!({"put": op("put"), "patch": op("patch")}));
            let mut schema = t
                .schema
                .clone()
                .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
            schema["x-kubernetes-group-version-kind"] = json!([{"group": group, "version": version, "kind": t.kind}]);
            let prefix = if group.is_empty() { "io.k8s.api.core".to_string() } else { group.to_string() };
            schemas.insert(format!("{prefix}.{version}.{}", t.kind), schema);
        }
        if schemas.is_empty() {
            return None;
        }
        Some(json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes (testkit fake API)", "version": version},
            "paths": paths,
            "components": {"schemas": schemas},
        }))
    }

    /// The type named `resource`: `plural`, a short name, `kind` in lower
    /// case or `singular`, optionally qualified `.group` or
    /// `.version.group` (as kubectl accepts them). An unqualified name
    /// matching types of several groups is ambiguous: `None`.
    /// A core type's own plural (`events`) names it even where another
    /// group has the same plural (`events.k8s.io`): the store's key, and
    /// kubectl's choice (the core group first).
    pub fn resolve(&self, resource: &str) -> Option<&ResourceType> {
        if let Some(core) = self
            .types
            .iter()
            .filter(|t| t.group.is_empty() && t.plural == resource)
            .max_by_key(|t| version_priority(&t.version))
        {
            return Some(core);
        }
        let matches_name = |t: &ResourceType, n: &str| {
            t.plural == n || t.singular == n || t.kind.to_lowercase() == n || t.short_names.iter().any(|s| s == n)
        };
        let (name, qualifier) = resource.split_once('.').unwrap_or((resource, ""));
        let candidates: Vec<&ResourceType> = self
            .types
            .iter()
            .filter(|t| matches_name(t, name))
            .filter(|t| {
                qualifier.is_empty()
                    || t.group == qualifier
                    || (qualifier.split_once('.').is_some_and(|(v, g)| t.version == v && t.group == g))
                    || (t.group.is_empty() && t.version == qualifier)
            })
            .collect();
        let first = *candidates.first()?;
        if candidates.iter().any(|t| t.group != first.group) {
            return None;
        }
        // Several versions of one group: the preferred one.
        candidates.into_iter().max_by_key(|t| version_priority(&t.version))
    }

    /// The type at `group`/`version`/`plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types.iter().find(|t| t.group == group && t.version == version && t.plural == plural)
    }

    /// The type of an `apiVersion` and `kind` (an object's or an owner
    /// reference's); the version need not be served.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&ResourceType> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.kind == kind)
            .or_else(|| self.types.iter().find(|t| t.group == group && t.kind == kind))
    }

    /// The versions of `group`, preferred first.
    pub fn versions(&self, group: &str) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for t in self.types.iter().filter(|t| t.group == group) {
            if !v.contains(&t.version) {
                v.push(t.version.clone());
            }
        }
        v.sort_by_key(|x| std::cmp::Reverse(version_priority(x)));
        v
    }

    /// The named groups, in registration order.
    pub fn groups(&self) -> Vec<String> {
        let mut g: Vec<String> = Vec::new();
        for t in self.types.iter().filter(|t| !t.group.is_empty()) {
            if !g.contains(&t.group) {
                g.push(t.group.clone());
            }
        }
        g
    }

    /// `GET /api`.
    pub fn api_versions(&self) -> Value {
        json!({"kind": "APIVersions", "versions": self.versions(""),
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]})
    }

    /// The `APIGroup` entry of `group`.
    pub fn api_group(&self, group: &str) -> Option<Value> {
        group_entry(group, &self.versions(group))
    }

    /// `GET /apis`; `extra` are further `(group, version)` pairs to list
    /// (aggregated APIs the fake does not serve).
    pub fn api_group_list(&self, extra: &[(String, String)]) -> Value {
        let mut groups: Vec<Value> = self.groups().iter().filter_map(|g| self.api_group(g)).collect();
        for (g, v) in extra {
            if let Some(e) = group_entry(g, std::slice::from_ref(v)) {
                groups.push(e);
            }
        }
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `GET /api/v1` or `/apis/<group>/<version>`.
    pub fn api_resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let types: Vec<&ResourceType> =
            self.types.iter().filter(|t| t.group == group && t.version == version).collect();
        if types.is_empty() {
            return None;
        }
        let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
        Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": types.iter().flat_map(|t| t.discovery()).collect::<Vec<_>>()}))
    }
}

fn group_entry(group: &str, versions: &[String]) -> Option<Value> {
    let gv = |v: &String| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    let preferred = versions.first()?;
    Some(
        json!({"name": group, "versions": versions.iter().map(gv).collect::<Vec<_>>(), "preferredVersion": gv(preferred)}),
    )
}

/// The documents of a YAML (or JSON) text: multi-document streams and
/// `kind: List` (or `*List`) items flattened; empty documents skipped.
pub fn documents(text: &str) -> Result<Vec<Value>, String> {
    use serde::Deserialize;
    let mut out = Vec::new();
    for doc in serde_norway::Deserializer::from_str(text) {
        let v = Value::deserialize(doc).map_err(|e| e.to_string())?;
        match v {
            Value::Null => {}
            Value::Object(ref o)
                if o.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"))
                    && o.get("items").is_some_and(Value::is_array) =>
            {
                out.extend(o["items"].as_array().into_iter().flatten().cloned());
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// `api/v1` or `apis/<group>/<version>`.
fn openapi_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}
