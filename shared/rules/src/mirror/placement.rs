//! Placement: where a new object's file goes under a GitTarget's `spec.path`
//! (gitops-reverser `internal/types/identifier.go:96-112`,
//! `internal/manifestanalyzer/placement.go`). Placement runs only for an
//! object with no document in the tree yet: an existing document is edited
//! where it is (see [`super::document`]).
//!
//! - By default, the canonical path
//!   `<namespace or _cluster>/[<group>/]<resource>/<name>.yaml`: namespace
//!   first, the core group omitted, no version (a preferred-version bump
//!   moves no file), `<name>.sops.yaml` for a sensitive type.
//! - `spec.placement.byType["[group/]version/resource"]`, else
//!   `spec.placement.default`: a brace template over the variables in
//!   [`VARIABLES`], checked when the GitTarget is read (a bad one is refused
//!   naming the variable or the rule it breaks).
//!
//! [`LEGACY_TEMPLATE`] is this mirror's former layout, kept as a template.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::attribution::render::ObjectKey;

/// The variables a placement template may use (gitops-reverser
/// `placement.go:478-486`).
pub const VARIABLES: [&str; 11] = [
    "group",
    "groupPath",
    "version",
    "apiVersion",
    "resource",
    "kind",
    "scope",
    "namespace",
    "namespaceOrCluster",
    "name",
    "sensitiveSuffix",
];

/// This mirror's layout before it followed gitops-reverser's, for a
/// repository that already holds it: `{groupPath}` is empty for the core
/// group, so core objects land under `v1/…` rather than `core/v1/…`.
pub const LEGACY_TEMPLATE: &str = "{groupPath}/{version}/{resource}/{namespaceOrCluster}/{name}{sensitiveSuffix}";

/// The byType key of core Secrets: always sensitive, so a template for them
/// must give every Secret its own file.
pub const SECRETS_TYPE_KEY: &str = "v1/secrets";

/// `spec.placement` of a GitTarget.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// `"[group/]version/resource"` → template.
    #[serde(default)]
    pub by_type: BTreeMap<String, String>,
    #[serde(default)]
    pub default: Option<String>,
}

/// A placement that cannot be used: the GitTarget is refused (at start) or
/// one object is not written (at write time), never written elsewhere.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error(
        "GitTarget spec.placement {field}: template {template:?} uses unknown variable {{{variable}}}; \
         the variables are {}",
        VARIABLES.map(|v| format!("{{{v}}}")).join(", ")
    )]
    UnknownVariable { field: String, template: String, variable: String },
    #[error("GitTarget spec.placement {field}: template {template:?} {problem}")]
    BadTemplate { field: String, template: String, problem: String },
    #[error(
        "GitTarget spec.placement byType key {key:?} is not a \"[group/]version/resource\" type key \
         (e.g. \"v1/configmaps\", \"apps/v1/deployments\")"
    )]
    BadTypeKey { key: String },
    #[error(
        "GitTarget spec.placement {field}: template {template:?} could put two Secrets in one file; \
         include {{name}} and {{namespace}} or {{namespaceOrCluster}}{extra}"
    )]
    SharedSensitiveFile { field: String, template: String, extra: &'static str },
    #[error("placement of {object} resolved to {path:?}, which {problem}; fix the GitTarget's spec.placement")]
    BadPath { object: String, path: String, problem: String },
}

/// The type key `byType` is indexed by: `[group/]version/resource`.
pub fn type_key(group: &str, version: &str, resource: &str) -> String {
    if group.is_empty() { format!("{version}/{resource}") } else { format!("{group}/{version}/{resource}") }
}

impl Placement {
    /// The GitTarget's checks (gitops-reverser
    /// `internal/controller/gittarget_placement_validation.go:33-112`): type
    /// keys well formed, templates using known variables only and unable to
    /// escape `spec.path`, and no template that could put two Secrets in one
    /// file.
    pub fn validate(&self) -> Result<(), PlacementError> {
        for (key, template) in &self.by_type {
            let parts: Vec<&str> = key.split('/').collect();
            if !(2..=3).contains(&parts.len()) || parts.iter().any(|p| p.is_empty() || *p != p.trim()) {
                return Err(PlacementError::BadTypeKey { key: key.clone() });
            }
            check_template(&format!("byType[{key:?}]"), template)?;
        }
        if let Some(default) = self.default.as_deref().filter(|d| !d.trim().is_empty()) {
            check_template("default", default)?;
        }
        let secrets = self.by_type.get(SECRETS_TYPE_KEY).map(|t| t.trim()).filter(|t| !t.is_empty());
        let secrets_complete = secrets.is_some_and(|t| identity_complete(t, true));
        if let Some(t) = secrets
            && !secrets_complete
        {
            return Err(PlacementError::SharedSensitiveFile {
                field: format!("byType[{SECRETS_TYPE_KEY:?}]"),
                template: t.to_owned(),
                extra: "",
            });
        }
        if let Some(default) = self.default.as_deref().map(str::trim).filter(|d| !d.is_empty())
            && !identity_complete(default, false)
            && !secrets_complete
        {
            return Err(PlacementError::SharedSensitiveFile {
                field: "default".into(),
                template: default.to_owned(),
                extra: ", {groupPath}, {version} and {resource}; or give byType[\"v1/secrets\"] an identity-complete template",
            });
        }
        Ok(())
    }

    /// The path (relative to `spec.path`) of a new file for the object:
    /// its type's template, else the default, else the canonical path.
    pub fn path_for(&self, key: &ObjectKey, kind: &str, sensitive: bool) -> Result<String, PlacementError> {
        let template = self
            .by_type
            .get(&type_key(&key.group, &key.version, &key.resource))
            .or(self.default.as_ref())
            .map(|t| t.trim())
            .filter(|t| !t.is_empty());
        let path = match template {
            Some(t) => render(t, key, kind, sensitive).map_err(|variable| PlacementError::UnknownVariable {
                field: "template".into(),
                template: t.to_owned(),
                variable,
            })?,
            None => canonical_path(key, sensitive),
        };
        check_resolved(key, &path)?;
        Ok(path)
    }
}

/// gitops-reverser's canonical path (`identifier.go:96-112` plus the
/// `.sops.yaml` suffix of a sensitive type).
pub fn canonical_path(key: &ObjectKey, sensitive: bool) -> String {
    let scope = if key.namespace.is_empty() { "_cluster" } else { key.namespace.as_str() };
    let suffix = if sensitive { ".sops.yaml" } else { ".yaml" };
    let name = segment(&key.name);
    if key.group.is_empty() {
        format!("{scope}/{}/{name}{suffix}", key.resource)
    } else {
        format!("{scope}/{}/{}/{name}{suffix}", key.group, key.resource)
    }
}

/// Whether a path is a sensitive type's file (`*.sops.yaml`): what the
/// writer hands to the encryptor, never writing it in clear.
pub fn is_sensitive_path(path: &str) -> bool {
    path.ends_with(".sops.yaml") || path.ends_with(".sops.yml")
}

fn check_template(field: &str, template: &str) -> Result<(), PlacementError> {
    let bad = |problem: &str| PlacementError::BadTemplate {
        field: field.to_owned(),
        template: template.to_owned(),
        problem: problem.to_owned(),
    };
    let stub = ObjectKey::default();
    render(template, &stub, "", false).map_err(|variable| PlacementError::UnknownVariable {
        field: field.to_owned(),
        template: template.to_owned(),
        variable,
    })?;
    let t = template.trim();
    if t.is_empty() {
        return Err(bad("is empty"));
    }
    if t.contains('\\') {
        return Err(bad("must use \"/\" separators, not \"\\\""));
    }
    if t.starts_with('/') {
        return Err(bad("must be relative, not absolute"));
    }
    if t.split('/').any(|s| s == "..") {
        return Err(bad("must not contain a \"..\" segment: it would write outside spec.path"));
    }
    if !(t.ends_with("{sensitiveSuffix}") || t.ends_with(".yaml") || t.ends_with(".yml")) {
        return Err(bad("must end in .yaml, .yml or {sensitiveSuffix}"));
    }
    Ok(())
}

/// Gives every distinct object its own path (gitops-reverser
/// `placement.go:645-657`): a byType template is narrowed to one type
/// already, a default must also name the type.
fn identity_complete(template: &str, one_type: bool) -> bool {
    let has_scope = template.contains("{namespace}") || template.contains("{namespaceOrCluster}");
    if !template.contains("{name}") || !has_scope {
        return false;
    }
    one_type || (template.contains("{groupPath}") && template.contains("{version}") && template.contains("{resource}"))
}

/// Substitutes the variables; empty segments left by an empty variable (a
/// core type's `{groupPath}`) collapse. Errs with the first unknown
/// `{variable}`.
fn render(template: &str, key: &ObjectKey, kind: &str, sensitive: bool) -> Result<String, String> {
    let value = |name: &str| -> Option<String> {
        let cluster = key.namespace.is_empty();
        Some(match name {
            "group" | "groupPath" => key.group.clone(),
            "version" => key.version.clone(),
            "apiVersion" if key.group.is_empty() => key.version.clone(),
            "apiVersion" => format!("{}/{}", key.group, key.version),
            "resource" => key.resource.clone(),
            "kind" => kind.to_owned(),
            "scope" => (if cluster { "cluster" } else { "namespaced" }).to_owned(),
            "namespace" => key.namespace.clone(),
            "namespaceOrCluster" if cluster => "_cluster".to_owned(),
            "namespaceOrCluster" => key.namespace.clone(),
            "name" => key.name.clone(),
            "sensitiveSuffix" => (if sensitive { ".sops.yaml" } else { ".yaml" }).to_owned(),
            _ => return None,
        })
    };
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        // Only `{letters}` is a variable, as in the reference's pattern.
        let close = after.find('}').filter(|&c| c > 0 && after[..c].chars().all(|ch| ch.is_ascii_alphabetic()));
        match close {
            Some(c) => {
                let name = &after[..c];
                let v = value(name).ok_or_else(|| name.to_owned())?;
                out.push_str(&segment(&v));
                rest = &after[c + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out.split('/').filter(|s| !s.is_empty()).collect::<Vec<_>>().join("/"))
}

/// A value substituted into a path stays one segment: a separator in it
/// (never in a valid Kubernetes name) is percent-encoded, as the reference
/// does, so two objects cannot fold onto one path.
fn segment(v: &str) -> String {
    if !v.contains(['/', '\\', '%']) {
        return v.to_owned();
    }
    v.replace('%', "%25").replace('/', "%2F").replace('\\', "%5C")
}

fn check_resolved(key: &ObjectKey, path: &str) -> Result<(), PlacementError> {
    let problem = if path.is_empty() {
        Some("is empty")
    } else if path.split('/').any(|s| s == "." || s == ".." || s.eq_ignore_ascii_case(".git")) {
        Some("has a `.`, `..` or `.git` segment")
    } else if path.chars().any(char::is_control) {
        Some("contains a control character")
    } else if !(path.ends_with(".yaml") || path.ends_with(".yml"))
        || path.rsplit('/').next().is_some_and(|f| f.starts_with('.'))
    {
        Some("is not a YAML file name")
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(p) => Err(PlacementError::BadPath { object: key.display(), path: path.to_owned(), problem: p.to_owned() }),
    }
}

#[cfg(test)]
mod tests;
