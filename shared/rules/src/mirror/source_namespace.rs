//! Which source namespaces a WatchRule may watch: gitops-reverser's
//! source-namespace gate (internal/authz/source_namespace.go:195-320).
//!
//! A WatchRule item watches its own namespace unless `sourceNamespace` names
//! another one or `*`. Its own namespace is free while the GitTarget
//! declares no `allowedSourceNamespaces`. Anything else is a cross-namespace
//! read through the mirror's cluster-wide credential, so it needs three
//! sign-offs: the GitTarget's ClusterProvider admits the target's namespace
//! (`spec.allowedNamespaces`, deny by default), that provider delegates the
//! choice (`spec.allowSourceNamespaceOverride`, default false), and the
//! GitTarget's own policy admits the namespace. A declared target policy is
//! exhaustive, the rule's own namespace included.
//!
//! The verdict is per WatchRule: one refused item refuses the whole rule
//! (watchrule_types.go:121-129), because mirroring part of what a rule asked
//! for is worse than a loud failure. Pure: the ClusterProvider, the target
//! namespace's labels and the source namespaces arrive as data.

use std::collections::BTreeMap;
use std::fmt;

use super::config::{ClusterProviderSpec, GitTargetSpec, Rule, WatchRule};
use super::watch_rules::{Namespace, WatchScope};

/// The WatchRule condition the verdict is published as.
pub const CONDITION: &str = "SourceNamespaceAuthorized";

/// The `SourceNamespaceAuthorized` reasons (source_namespace.go:21-49). The
/// reference's `CheckingSourceNamespacePolicy` (a selector whose namespace
/// cache has not synced) has no counterpart: the namespaces here are a
/// snapshot read before the gate runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// True: every item watches the rule's own namespace and the target
    /// declares no policy.
    LegacySourceNamespace,
    /// True: every item passed, at least one through the target's policy.
    SourceNamespaceAllowed,
    /// True, but the resolved scope is empty (`*` against a policy that
    /// admits nothing today): the rule mirrors nothing, and says so.
    NoAdmittedSourceNamespaces,
    /// False: the provider or the target's policy refuses a namespace.
    SourceNamespaceNotAllowed,
    /// False: the target's policy cannot be evaluated as written.
    SourceNamespacePolicyUnavailable,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::LegacySourceNamespace => "LegacySourceNamespace",
            Reason::SourceNamespaceAllowed => "SourceNamespaceAllowed",
            Reason::NoAdmittedSourceNamespaces => "NoAdmittedSourceNamespaces",
            Reason::SourceNamespaceNotAllowed => "SourceNamespaceNotAllowed",
            Reason::SourceNamespacePolicyUnavailable => "SourceNamespacePolicyUnavailable",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The ClusterProvider side of the gate.
#[derive(Debug, Clone, Copy)]
pub struct Provider<'a> {
    /// The GitTarget's `spec.clusterProviderRef.name` (`default` when unset).
    pub name: &'a str,
    /// `None`: no ClusterProvider of that name exists, and a missing
    /// provider delegates nothing (source_namespace.go:359-369).
    pub spec: Option<&'a ClusterProviderSpec>,
    /// The labels of the GitTarget's namespace, for the provider's
    /// `allowedNamespaces.selector`; empty when that Namespace does not
    /// exist, so a listed name still admits it (clusterprovider_admission.go:77-85).
    pub target_namespace_labels: &'a BTreeMap<String, String>,
}

/// One GitTarget's gate.
#[derive(Debug, Clone, Copy)]
pub struct Gate<'a> {
    pub target_namespace: &'a str,
    pub target_name: &'a str,
    pub target: &'a GitTargetSpec,
    pub provider: Provider<'a>,
    /// The source cluster's namespaces, for the target's selector.
    pub namespaces: &'a [Namespace],
}

/// A WatchRule's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Every item may be watched; `scopes` is index-aligned with
    /// `spec.rules`.
    Authorized { reason: Reason, message: String, scopes: Vec<Vec<WatchScope>> },
    /// Nothing of the rule is watched; the message names the item and the
    /// fix.
    Refused { reason: Reason, message: String },
}

impl Decision {
    pub fn reason(&self) -> Reason {
        match self {
            Decision::Authorized { reason, .. } | Decision::Refused { reason, .. } => *reason,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Decision::Authorized { message, .. } | Decision::Refused { message, .. } => message,
        }
    }
}

/// Whether an item asks for a namespace other than the rule's own
/// (watchrule_types.go:176-178): `*` always does, even when the policy
/// lists only the rule's own, since a later policy edit would widen it.
pub fn overrides(own: &str, item: &Rule) -> bool {
    match requested(item) {
        None => false,
        Some(ns) => ns == "*" || ns != own,
    }
}

/// Whether deciding `rule` reads the ClusterProvider at all (only an
/// overriding item does).
pub fn needs_provider(rule: &WatchRule) -> bool {
    rule.spec.rules.iter().any(|item| overrides(&rule.metadata.namespace, item))
}

fn requested(item: &Rule) -> Option<&str> {
    item.source_namespace.as_deref().filter(|s| !s.is_empty())
}

/// One item's verdict.
enum Item {
    Admitted { reason: Reason, scopes: Vec<WatchScope>, message: String },
    Denied(String),
    Unavailable(String),
}

impl Gate<'_> {
    /// The verdict on `rule`, its items decided in order
    /// (source_namespace.go:250-320) and folded worst first
    /// (source_namespace.go:546-567): a denied item, then an unevaluatable
    /// policy, refuses the rule.
    pub fn decide(&self, rule: &WatchRule) -> Decision {
        let own = rule.metadata.namespace.as_str();
        // The provider's answer is the same for every item: asked once.
        let mut delegation: Option<Option<String>> = None;
        let items: Vec<Item> = rule
            .spec
            .rules
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let label = describe(i, item, own);
                self.item(own, item, &label, || delegation.get_or_insert_with(|| self.delegation(own)).clone())
            })
            .collect();
        if let Some(message) = items.iter().find_map(|i| match i {
            Item::Denied(m) => Some(m),
            _ => None,
        }) {
            return Decision::Refused { reason: Reason::SourceNamespaceNotAllowed, message: message.clone() };
        }
        if let Some(message) = items.iter().find_map(|i| match i {
            Item::Unavailable(m) => Some(m),
            _ => None,
        }) {
            return Decision::Refused { reason: Reason::SourceNamespacePolicyUnavailable, message: message.clone() };
        }
        let admitted: Vec<(Reason, Vec<WatchScope>, String)> = items
            .into_iter()
            .filter_map(|i| match i {
                Item::Admitted { reason, scopes, message } => Some((reason, scopes, message)),
                _ => None,
            })
            .collect();
        let (reason, message) = aggregate(&admitted);
        Decision::Authorized { reason, message, scopes: admitted.into_iter().map(|(_, s, _)| s).collect() }
    }

    fn item(&self, own: &str, item: &Rule, label: &str, delegation: impl FnOnce() -> Option<String>) -> Item {
        let policy = self.target.allowed_source_namespaces.as_ref();
        let overriding = overrides(own, item);
        let target = format!("GitTarget {}/{}", self.target_namespace, self.target_name);
        // The legacy case stays free: gating it would stop every rule
        // written before the gate existed (source_namespace.go:259-270).
        if !overriding && policy.is_none() {
            return Item::Admitted {
                reason: Reason::LegacySourceNamespace,
                scopes: vec![WatchScope::Namespace(own.to_owned())],
                message: format!("{label} watches the WatchRule's own namespace; {target} declares no policy"),
            };
        }
        if overriding && let Some(refusal) = delegation() {
            return Item::Denied(format!("{label}: {refusal}"));
        }
        let Some(policy) = policy else {
            // An override against a target with no policy: denied by default
            // (source_namespace.go:283-294).
            return Item::Denied(format!(
                "{label}: {target} declares no spec.allowedSourceNamespaces, so it mirrors no namespace but the \
                 WatchRule's own; declare that policy on the GitTarget and list {} in it",
                shown(item, own)
            ));
        };
        // A name that cannot be a namespace (`*` among them) makes the
        // policy unevaluatable, not narrower (source_namespace.go:296-310).
        if let Some(bad) = policy.invalid_name() {
            return Item::Unavailable(format!(
                "{label}: {target} spec.allowedSourceNamespaces.names holds {bad:?}, which is no namespace name; \
                 list namespaces by name, or use `selector: {{}}` to admit every namespace"
            ));
        }
        let wanted = requested(item).unwrap_or(own);
        if wanted == "*" {
            // `*` is what the policy admits, never every namespace there is
            // (source_namespace.go:453-504); `selector: {}` is every one, as
            // one cluster-wide watch.
            if policy.selector.as_ref().is_some_and(|s| s.is_empty()) {
                return Item::Admitted {
                    reason: Reason::SourceNamespaceAllowed,
                    scopes: vec![WatchScope::Everywhere],
                    message: format!("{label} watches every namespace ({target} admits all with `selector: {{}}`)"),
                };
            }
            let mut admitted: Vec<String> = policy.names.clone();
            if let Some(sel) = &policy.selector {
                admitted.extend(self.namespaces.iter().filter(|ns| sel.matches(&ns.labels)).map(|ns| ns.name.clone()));
            }
            admitted.sort();
            admitted.dedup();
            let (reason, message) = if admitted.is_empty() {
                (
                    Reason::NoAdmittedSourceNamespaces,
                    format!(
                        "{label}: {target} spec.allowedSourceNamespaces admits no namespace now, so it watches nothing"
                    ),
                )
            } else {
                (
                    Reason::SourceNamespaceAllowed,
                    format!("{label} watches {} ({target} admits them)", admitted.join(", ")),
                )
            };
            return Item::Admitted {
                reason,
                scopes: admitted.into_iter().map(WatchScope::Namespace).collect(),
                message,
            };
        }
        let by_selector = policy.selector.as_ref().is_some_and(|sel| {
            sel.is_empty() || self.namespaces.iter().any(|ns| ns.name == wanted && sel.matches(&ns.labels))
        });
        if policy.names.iter().any(|n| n == wanted) || by_selector {
            return Item::Admitted {
                reason: Reason::SourceNamespaceAllowed,
                scopes: vec![WatchScope::Namespace(wanted.to_owned())],
                message: format!("{label}: {target} spec.allowedSourceNamespaces admits {wanted:?}"),
            };
        }
        // The footgun of an exhaustive policy gets its own wording: declaring
        // one for another item drops the rule's own namespace unless it is
        // listed too (source_namespace.go:506-526).
        Item::Denied(if overriding {
            format!(
                "{label}: {target} spec.allowedSourceNamespaces does not admit {wanted:?}; add it to names, or label \
                 the namespace to match the selector"
            )
        } else {
            format!(
                "{label}: {target} declares spec.allowedSourceNamespaces, which binds the WatchRule's own namespace \
                 too, and does not admit {wanted:?}; add {wanted:?} to it to keep watching this namespace"
            )
        })
    }

    /// The provider's refusal of any override, or `None` when it delegates
    /// (source_namespace.go:354-401): it must exist, admit the GitTarget's
    /// namespace, and set `allowSourceNamespaceOverride`.
    fn delegation(&self, own: &str) -> Option<String> {
        let name = self.provider.name;
        let Some(spec) = self.provider.spec else {
            return Some(format!(
                "ClusterProvider {name:?} does not exist, so nothing delegates the choice of another namespace; a \
                 platform admin creates it with spec.allowSourceNamespaceOverride: true and the GitTarget's namespace \
                 {:?} in spec.allowedNamespaces",
                self.target_namespace
            ));
        };
        // Deny by default: no allowedNamespaces admits no namespace
        // (clusterprovider_admission.go:86-101).
        let admitted = spec
            .allowed_namespaces
            .as_ref()
            .is_some_and(|m| m.admits(self.target_namespace, self.provider.target_namespace_labels));
        if !admitted {
            return Some(format!(
                "ClusterProvider {name:?} spec.allowedNamespaces does not admit the GitTarget's namespace {:?}, so \
                 that GitTarget may not mirror through it; a platform admin adds {:?} there",
                self.target_namespace, self.target_namespace
            ));
        }
        if !spec.allow_source_namespace_override {
            return Some(format!(
                "ClusterProvider {name:?} does not set spec.allowSourceNamespaceOverride, so a WatchRule watches only \
                 its own namespace {own:?}; a platform admin sets it to true to delegate the choice"
            ));
        }
        None
    }
}

/// The True reason once every item passed (source_namespace.go:581-600).
fn aggregate(items: &[(Reason, Vec<WatchScope>, String)]) -> (Reason, String) {
    if items.is_empty() {
        return (Reason::LegacySourceNamespace, "no rule items to authorize".into());
    }
    if items.iter().all(|(_, scopes, _)| scopes.is_empty()) {
        return (
            Reason::NoAdmittedSourceNamespaces,
            "every rule item is authorized, but none admits a namespace now, so this WatchRule mirrors nothing".into(),
        );
    }
    if items.iter().all(|(r, _, _)| *r == Reason::LegacySourceNamespace) {
        return (Reason::LegacySourceNamespace, items[0].2.clone());
    }
    let mut all: Vec<String> = items.iter().flat_map(|(_, s, _)| s.iter().map(ToString::to_string)).collect();
    all.sort();
    all.dedup();
    (
        Reason::SourceNamespaceAllowed,
        format!("all {} rule item(s) are authorized: watching {}", items.len(), all.join(", ")),
    )
}

/// An item by index and by what it selects: the index alone goes stale
/// when the list is reordered (source_namespace.go:528-533).
fn describe(i: usize, item: &Rule, own: &str) -> String {
    format!("spec.rules[{i}] (resources {}, sourceNamespace {})", item.resources.join(","), shown(item, own))
}

fn shown(item: &Rule, own: &str) -> String {
    match requested(item) {
        None => format!("{own:?} (omitted: the WatchRule's own)"),
        Some(ns) => format!("{ns:?}"),
    }
}

#[cfg(test)]
mod tests;
