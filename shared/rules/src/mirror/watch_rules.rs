//! Which types a GitTarget's mirror watches, and where: every WatchRule and
//! ClusterWatchRule that names the target, resolved against what the API
//! server serves (discovery). Pure: discovery and the namespaces arrive as
//! data; what cannot be resolved comes back as a [`Problem`] naming the rule
//! and the fix, and the rest is still watched. A WatchRule the
//! source-namespace gate refuses ([`super::source_namespace`]) contributes
//! nothing, and its refusal is kept in [`Resolved::sources`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::config::{ClusterWatchRule, Rule, WatchRule};
use super::resource_policy::excluded_from_wildcard;
use super::source_namespace::{Decision, Gate, Reason};

/// One type the API server serves, as discovery reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub group: String,
    pub version: String,
    /// Plural, as in the API path (`configmaps`).
    pub resource: String,
    pub kind: String,
    pub namespaced: bool,
    /// This version is its group's preferred one.
    pub preferred: bool,
    pub verbs: Vec<String>,
}

impl Served {
    /// Only a type that can be listed and watched can be mirrored; a
    /// subresource (`pods/log`) never is.
    fn watchable(&self) -> bool {
        !self.resource.contains('/') && ["list", "watch"].iter().all(|v| self.verbs.iter().any(|x| x == v))
    }
}

/// A namespace of the source cluster, for `allowedSourceNamespaces.selector`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Namespace {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// The operations a rule mirrors (`operations`: empty or `*` is all three).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Operations {
    pub create: bool,
    pub update: bool,
    pub delete: bool,
}

impl Operations {
    pub const ALL: Operations = Operations { create: true, update: true, delete: true };

    /// From a rule's `operations` list.
    pub fn from_rule(ops: &[String]) -> Self {
        if ops.is_empty() || ops.iter().any(|o| o == "*") {
            return Operations::ALL;
        }
        let has = |name: &str| ops.iter().any(|o| o.eq_ignore_ascii_case(name));
        Operations { create: has("CREATE"), update: has("UPDATE"), delete: has("DELETE") }
    }

    pub fn union(self, other: Operations) -> Operations {
        Operations {
            create: self.create || other.create,
            update: self.update || other.update,
            delete: self.delete || other.delete,
        }
    }

    pub fn allows(self, op: Operation) -> bool {
        match op {
            Operation::Create => self.create,
            Operation::Update => self.update,
            Operation::Delete => self.delete,
        }
    }
}

/// What a watch event does to its object, in the rules' terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    /// `CREATE`, `UPDATE`, `DELETE`, as the templates and the rules spell it.
    pub fn label(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// Where a type is watched.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WatchScope {
    /// A cluster-scoped type, or a namespaced one in every namespace.
    Everywhere,
    /// A namespaced type in one namespace.
    Namespace(String),
}

impl std::fmt::Display for WatchScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Everywhere => f.write_str("everywhere"),
            Self::Namespace(ns) => write!(f, "in namespace {ns}"),
        }
    }
}

/// One type the mirror watches, with the operations mirrored where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedType {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub kind: String,
    pub namespaced: bool,
    pub scopes: BTreeMap<WatchScope, Operations>,
}

impl WatchedType {
    /// `group/version/resource` (core: `v1/configmaps`), the key logs use.
    pub fn key(&self) -> String {
        type_key(&self.group, &self.version, &self.resource)
    }

    /// `group/version` (core: `v1`): the `apiVersion` its objects carry.
    pub fn api_version(&self) -> String {
        api_version(&self.group, &self.version)
    }

    /// The watches to run: one per namespace, or one everywhere (which then
    /// covers every namespace, so the per-namespace ones are dropped).
    pub fn watches(&self) -> Vec<WatchScope> {
        if self.scopes.contains_key(&WatchScope::Everywhere) {
            return vec![WatchScope::Everywhere];
        }
        self.scopes.keys().cloned().collect()
    }

    /// The operations mirrored for an object in `namespace` ("" when
    /// cluster-scoped).
    pub fn operations_for(&self, namespace: &str) -> Operations {
        let everywhere = self.scopes.get(&WatchScope::Everywhere).copied().unwrap_or_default();
        let here = self.scopes.get(&WatchScope::Namespace(namespace.to_owned())).copied().unwrap_or_default();
        everywhere.union(here)
    }
}

/// A rule item that cannot be (fully) honoured, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `WatchRule ns/name rules[i]` or `ClusterWatchRule name rules[i]`.
    pub rule: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.rule, self.message)
    }
}

/// One WatchRule's source-namespace verdict, for its
/// `SourceNamespaceAuthorized` condition and the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceVerdict {
    pub namespace: String,
    pub name: String,
    /// False: nothing of the rule is watched.
    pub authorized: bool,
    pub reason: Reason,
    /// Names the item and, when refused, the fix.
    pub message: String,
}

/// Which of the two rule kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RuleKind {
    WatchRule,
    ClusterWatchRule,
}

impl RuleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::WatchRule => "WatchRule",
            RuleKind::ClusterWatchRule => "ClusterWatchRule",
        }
    }
}

/// What one rule resolved to, for its own status (`super::rule_status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleTypes {
    pub kind: RuleKind,
    /// Empty for a ClusterWatchRule.
    pub namespace: String,
    pub name: String,
    /// The keys ([`WatchedType::key`]) of the types it watches, sorted;
    /// empty when the source-namespace gate refused it.
    pub types: Vec<String>,
    /// Its items that cannot be watched (the messages of its [`Problem`]s).
    pub problems: Vec<String>,
}

impl RuleTypes {
    /// A rule before its items are resolved.
    fn new(kind: RuleKind, namespace: &str, name: &str) -> Self {
        RuleTypes {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            types: Vec::new(),
            problems: Vec::new(),
        }
    }
}

/// What the rules of one target resolve to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// Sorted by group, version, resource.
    pub types: Vec<WatchedType>,
    pub problems: Vec<Problem>,
    /// Every WatchRule naming the target, in the order read.
    pub sources: Vec<SourceVerdict>,
    /// Every rule naming the target, WatchRules first, in the order read.
    pub rules: Vec<RuleTypes>,
}

impl Resolved {
    pub fn get(&self, group: &str, version: &str, resource: &str) -> Option<&WatchedType> {
        self.types.iter().find(|t| t.group == group && t.version == version && t.resource == resource)
    }

    /// The WatchRules the source-namespace gate refused.
    pub fn refused(&self) -> impl Iterator<Item = &SourceVerdict> {
        self.sources.iter().filter(|v| !v.authorized)
    }

    /// The source-namespace verdict of WatchRule `namespace/name`.
    pub fn source(&self, namespace: &str, name: &str) -> Option<&SourceVerdict> {
        self.sources.iter().find(|v| v.namespace == namespace && v.name == name)
    }
}

/// Resolves every rule naming the GitTarget of `gate`, each WatchRule
/// through that gate first.
pub fn resolve(
    gate: &Gate<'_>,
    watch_rules: &[WatchRule],
    cluster_rules: &[ClusterWatchRule],
    served: &[Served],
) -> Resolved {
    let (target_namespace, target_name) = (gate.target_namespace, gate.target_name);
    let mut types: BTreeMap<(String, String, String), WatchedType> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut sources = Vec::new();
    let mut rules = Vec::new();
    let served: Vec<&Served> = served.iter().filter(|s| s.watchable()).collect();

    let mut add = |s: &Served, scope: WatchScope, ops: Operations| {
        let t = types.entry((s.group.clone(), s.version.clone(), s.resource.clone())).or_insert_with(|| WatchedType {
            group: s.group.clone(),
            version: s.version.clone(),
            resource: s.resource.clone(),
            kind: s.kind.clone(),
            namespaced: s.namespaced,
            scopes: BTreeMap::new(),
        });
        let entry = t.scopes.entry(scope).or_default();
        *entry = entry.union(ops);
    };

    for wr in watch_rules.iter().filter(|r| r.targets(target_namespace, target_name)) {
        let decision = gate.decide(wr);
        sources.push(SourceVerdict {
            namespace: wr.metadata.namespace.clone(),
            name: wr.metadata.name.clone(),
            authorized: matches!(decision, Decision::Authorized { .. }),
            reason: decision.reason(),
            message: decision.message().to_owned(),
        });
        // A refused rule is not compiled at all, not trimmed to its
        // admitted items (watchrule_compile.go:98-104).
        let mut own = RuleTypes::new(RuleKind::WatchRule, &wr.metadata.namespace, &wr.metadata.name);
        let Decision::Authorized { scopes: item_scopes, .. } = decision else {
            rules.push(own);
            continue;
        };
        let mut keys = BTreeSet::new();
        for ((i, rule), scopes) in wr.spec.rules.iter().enumerate().zip(item_scopes) {
            let label = format!("WatchRule {}/{} rules[{i}]", wr.metadata.namespace, wr.metadata.name);
            let mut problem = |message: String| {
                own.problems.push(format!("rules[{i}]: {message}"));
                problems.push(Problem { rule: label.clone(), message })
            };
            let ops = Operations::from_rule(&rule.operations);
            for s in matching(rule, &served, &mut problem) {
                if !s.namespaced {
                    problem(format!(
                        "{} is cluster-scoped; a WatchRule watches namespaced types, use a ClusterWatchRule for it",
                        describe(s)
                    ));
                    continue;
                }
                for scope in &scopes {
                    add(s, scope.clone(), ops);
                }
                // An item admitted with no namespace today watches nothing.
                if !scopes.is_empty() {
                    keys.insert(type_key(&s.group, &s.version, &s.resource));
                }
            }
        }
        own.types = keys.into_iter().collect();
        rules.push(own);
    }
    for cr in cluster_rules.iter().filter(|r| r.targets(target_namespace, target_name)) {
        let mut own = RuleTypes::new(RuleKind::ClusterWatchRule, "", &cr.metadata.name);
        let mut keys = BTreeSet::new();
        for (i, rule) in cr.spec.rules.iter().enumerate() {
            let label = format!("ClusterWatchRule {} rules[{i}]", cr.metadata.name);
            let mut problem = |message: String| {
                own.problems.push(format!("rules[{i}]: {message}"));
                problems.push(Problem { rule: label.clone(), message })
            };
            let ops = Operations::from_rule(&rule.operations);
            for s in matching(rule, &served, &mut problem) {
                if s.namespaced {
                    problem(format!(
                        "{} is namespaced; a ClusterWatchRule watches cluster-scoped types, use a WatchRule \
                         with rules[].sourceNamespace for it",
                        describe(s)
                    ));
                    continue;
                }
                add(s, WatchScope::Everywhere, ops);
                keys.insert(type_key(&s.group, &s.version, &s.resource));
            }
        }
        own.types = keys.into_iter().collect();
        rules.push(own);
    }
    Resolved { types: types.into_values().collect(), problems, sources, rules }
}

/// The types of `watch --resource` flags, without custom resources: each
/// flag is `resource` or `resource.group` (as kubectl spells types), at its
/// group's preferred version, for every operation, in `namespace` or (when
/// `None`) everywhere. Cluster-scoped types are watched everywhere.
pub fn from_flags(resources: &[String], namespace: Option<&str>, served: &[Served]) -> Resolved {
    let mut types: BTreeMap<(String, String, String), WatchedType> = BTreeMap::new();
    let mut problems = Vec::new();
    let served: Vec<&Served> = served.iter().filter(|s| s.watchable()).collect();
    for (i, flag) in resources.iter().enumerate() {
        let (name, group) = match flag.split_once('.') {
            Some((n, g)) => (n, Some(g)),
            None => (flag.as_str(), None),
        };
        let rule = Rule {
            api_groups: group.map(|g| vec![if g == "core" { String::new() } else { g.to_owned() }]),
            resources: vec![name.to_owned()],
            ..Rule::default()
        };
        let label = format!("--resource {flag}");
        let mut problem = |message: String| problems.push(Problem { rule: label.clone(), message });
        if i > 0 && resources[..i].contains(flag) {
            continue;
        }
        for s in matching(&rule, &served, &mut problem) {
            let scope = match namespace {
                Some(ns) if s.namespaced => WatchScope::Namespace(ns.to_owned()),
                _ => WatchScope::Everywhere,
            };
            types.entry((s.group.clone(), s.version.clone(), s.resource.clone())).or_insert_with(|| WatchedType {
                group: s.group.clone(),
                version: s.version.clone(),
                resource: s.resource.clone(),
                kind: s.kind.clone(),
                namespaced: s.namespaced,
                scopes: BTreeMap::from([(scope, Operations::ALL)]),
            });
        }
    }
    Resolved { types: types.into_values().collect(), problems, sources: Vec::new(), rules: Vec::new() }
}

/// The served resources `name` is probably a typo of (or the kind or the
/// singular of), as `--resource` would name them, closest first.
pub fn close_matches(name: &str, served: &[&Served]) -> Vec<String> {
    let wanted = name.to_ascii_lowercase();
    let mut scored: Vec<(usize, String)> = served
        .iter()
        .filter_map(|s| {
            let distance =
                [s.resource.clone(), s.kind.to_ascii_lowercase(), format!("{}s", s.kind.to_ascii_lowercase())]
                    .iter()
                    .map(|candidate| strsim::damerau_levenshtein(&wanted, candidate))
                    .min()?;
            // Two edits is a typo; more is another word (short names allow one).
            let limit = if wanted.len() <= 4 { 1 } else { 2 };
            (distance <= limit).then(|| (distance, describe(s)))
        })
        .collect();
    scored.sort();
    let mut out: Vec<String> = Vec::new();
    for (_, d) in scored {
        if !out.contains(&d) && out.len() < 3 {
            out.push(d);
        }
    }
    out
}

/// `[group/]version` (core: `v1`): the `apiVersion` of a type's objects.
pub fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") }
}

/// `[group/]version/resource`: [`WatchedType::key`], and the key of the
/// type a served resource resolves to.
fn type_key(group: &str, version: &str, resource: &str) -> String {
    if group.is_empty() { format!("{version}/{resource}") } else { format!("{group}/{version}/{resource}") }
}

fn describe(s: &Served) -> String {
    if s.group.is_empty() { s.resource.clone() } else { format!("{}.{}", s.resource, s.group) }
}

/// The served types one rule names, its unresolvable names reported.
fn matching<'a>(rule: &Rule, served: &[&'a Served], problem: &mut dyn FnMut(String)) -> Vec<&'a Served> {
    let group_ok = |g: &str| match &rule.api_groups {
        None => true,
        Some(groups) if groups.is_empty() => true,
        Some(groups) => groups.iter().any(|x| x == "*" || x == g),
    };
    // `apiGroups` omitted or empty resolves a named resource only when one
    // group serves it.
    let across_groups = rule.api_groups.as_ref().is_none_or(|g| g.is_empty());
    let mut out: Vec<&Served> = Vec::new();
    for name in &rule.resources {
        if name.contains('/') {
            problem(format!("{name:?} is a subresource; only whole resources can be watched"));
            continue;
        }
        let by_name: Vec<&Served> = served
            .iter()
            .copied()
            .filter(|s| {
                let named = if name == "*" {
                    !excluded_from_wildcard(&s.group, &s.resource)
                } else {
                    s.resource.eq_ignore_ascii_case(name)
                };
                named && group_ok(&s.group)
            })
            .collect();
        if by_name.is_empty() {
            let close = close_matches(name, served);
            problem(format!(
                "no served resource matches {name:?}{}; {}check the name (plural, as `kubectl api-resources` lists \
                 it) and apiGroups",
                rule.api_groups
                    .as_ref()
                    .filter(|g| !g.is_empty())
                    .map(|g| format!(" in groups {g:?}"))
                    .unwrap_or_default(),
                if close.is_empty() { String::new() } else { format!("did you mean {}? ", close.join(" or ")) }
            ));
            continue;
        }
        let groups: BTreeSet<&str> = by_name.iter().map(|s| s.group.as_str()).collect();
        if across_groups && name != "*" && groups.len() > 1 {
            problem(format!(
                "{name:?} is served by several API groups ({}); name the one meant in apiGroups",
                groups
                    .iter()
                    .map(|g| if g.is_empty() { "\"\" (core)".to_owned() } else { format!("{g:?}") })
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            continue;
        }
        let versions_ok = |s: &Served| {
            if rule.api_versions.is_empty() {
                s.preferred
            } else {
                rule.api_versions.iter().any(|v| v == "*" || *v == s.version)
            }
        };
        let picked: Vec<&Served> = by_name.into_iter().filter(|s| versions_ok(s)).collect();
        if picked.is_empty() {
            problem(format!(
                "{name:?} is not served at versions {:?}; name a served version or leave apiVersions empty",
                rule.api_versions
            ));
        }
        for s in picked {
            if !out.iter().any(|o| std::ptr::eq(*o, s)) {
                out.push(s);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
