//! gitops-reverser's own configuration (`configbutler.ai/v1alpha3`) as plain
//! data: a GitTarget names where history goes (a GitProvider's repository, a
//! branch, a path), WatchRules and ClusterWatchRules name what is watched.
//! Only the fields the mirror reads are modelled; serde ignores the rest, so
//! a newer CR still parses.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// The group and version of every mirror CR.
pub const API_VERSION: &str = "configbutler.ai/v1alpha3";
pub const GROUP: &str = "configbutler.ai";
pub const VERSION: &str = "v1alpha3";

/// The default commit window when `push.commitWindow` is unset.
pub const DEFAULT_COMMIT_WINDOW: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub resource_version: String,
    /// Bumped by the API server on every spec change (observedGeneration).
    #[serde(default)]
    pub generation: i64,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// A reference by name (and, for a cluster-scoped referrer, namespace).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NameRef {
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
}

/// `GitTarget`: where one mirror's history goes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct GitTarget {
    pub metadata: Meta,
    pub spec: GitTargetSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitTargetSpec {
    /// `providerRef`; `gitProviderRef` is its newer upstream name.
    #[serde(alias = "gitProviderRef")]
    pub provider_ref: NameRef,
    pub branch: String,
    pub path: String,
    #[serde(default)]
    pub cluster_provider_ref: Option<NameRef>,
    #[serde(default)]
    pub prune: Option<Prune>,
    #[serde(default)]
    pub allowed_source_namespaces: Option<AllowedSourceNamespaces>,
    /// How Secrets (and the other sensitive types) are encrypted (SOPS with
    /// age); see [`super::encryption`] for what it resolves to.
    #[serde(default)]
    pub encryption: Option<EncryptionSpec>,
    /// Where new objects' files go (`super::placement`).
    #[serde(default)]
    pub placement: Option<super::placement::Placement>,
    /// The newer upstream shape (gitops-reverser #330, #345): the commit
    /// window and messages on the GitTarget. Where set, it wins over the
    /// GitProvider's `push.commitWindow` and `commit.message`.
    #[serde(default)]
    pub commit: Option<TargetCommitSpec>,
}

/// `GitTarget.spec.commit`: how this target's writes are batched and titled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct TargetCommitSpec {
    #[serde(default)]
    pub window: Option<CommitWindowSpec>,
    #[serde(default)]
    pub message: Option<MessageSpec>,
}

/// `GitTarget.spec.commit.window`: a window closes after `idleTimeout` of
/// silence (default 5s) or `maxDuration` after it opened (default 1m).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitWindowSpec {
    #[serde(default)]
    pub idle_timeout: Option<String>,
    #[serde(default)]
    pub max_duration: Option<String>,
}

/// The upstream default of `spec.commit.window.maxDuration`.
pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(60);

/// A commit window's timers: flush after `silence`; `max_wait` when the
/// GitTarget bounds the window itself (else the window policy's own bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowTimers {
    pub silence: Duration,
    pub max_wait: Option<Duration>,
}

/// The window of `target` writing through `provider`: the GitTarget's
/// `spec.commit.window` when it sets one, else the provider's
/// `push.commitWindow`. Errs naming the field that does not parse.
pub fn commit_window(target: &GitTargetSpec, provider: &GitProviderSpec) -> Result<WindowTimers, String> {
    let Some(window) = target.commit.as_ref().and_then(|c| c.window.as_ref()) else {
        let silence = provider.commit_window().map_err(|e| format!("spec.push.commitWindow: {e}"))?;
        return Ok(WindowTimers { silence, max_wait: None });
    };
    let field = |value: &Option<String>, name: &str, default: Duration| match value.as_deref().map(str::trim) {
        None | Some("") => Ok(default),
        Some(s) => parse_go_duration(s).map_err(|e| format!("GitTarget spec.commit.window.{name}: {e}")),
    };
    let silence = field(&window.idle_timeout, "idleTimeout", DEFAULT_COMMIT_WINDOW)?;
    let max_wait = field(&window.max_duration, "maxDuration", DEFAULT_MAX_DURATION)?;
    if silence > max_wait {
        return Err(format!(
            "GitTarget spec.commit.window.idleTimeout ({silence:?}) exceeds maxDuration ({max_wait:?}); \
             make idleTimeout the shorter"
        ));
    }
    Ok(WindowTimers { silence, max_wait: Some(max_wait) })
}

/// The message templates of `target` writing through `provider`, template
/// by template: the GitTarget's `spec.commit.message` where it sets one,
/// else the provider's.
pub fn commit_messages(target: &GitTargetSpec, provider: &GitProviderSpec) -> MessageSpec {
    let base = provider.messages();
    let Some(own) = target.commit.as_ref().and_then(|c| c.message.as_ref()) else {
        return base;
    };
    let pick = |own: &Option<String>, base: Option<String>| own.clone().filter(|s| !s.trim().is_empty()).or(base);
    MessageSpec {
        event_template: pick(&own.event_template, base.event_template),
        group_template: pick(&own.group_template, base.group_template),
        reconcile_template: pick(&own.reconcile_template, base.reconcile_template),
        live_template: pick(&own.live_template, base.live_template),
    }
}

/// `spec.encryption`: gitops-reverser's `EncryptionSpec`
/// (api/v1alpha3/gitprovider_types.go:90).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EncryptionSpec {
    /// `sops` (the CRD's default and only value); empty means `sops`.
    #[serde(default)]
    pub provider: String,
    /// The namespace-local Secret holding `*.agekey` identities.
    #[serde(default)]
    pub secret_ref: Option<NameRef>,
    #[serde(default)]
    pub age: Option<AgeEncryptionSpec>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct AgeEncryptionSpec {
    /// Off (the default) leaves encryption disabled, as the reference does.
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub recipients: AgeRecipientsSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgeRecipientsSpec {
    /// Static `age1...` recipients.
    #[serde(default)]
    pub public_keys: Vec<String>,
    /// Derive a recipient from every `*.agekey` entry of `secretRef`.
    #[serde(default)]
    pub extract_from_secret: bool,
    /// Write a date-named `*.agekey` into `secretRef` when it holds none.
    #[serde(default)]
    pub generate_when_missing: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Prune {
    #[serde(default)]
    pub mode: PruneMode,
}

/// Which deletion paths may remove documents (`spec.prune.mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum PruneMode {
    /// Nothing is ever removed.
    Never,
    /// An observed deletion removes its document; a relist never infers one.
    #[default]
    OnEvent,
    /// Both: an observed deletion, and a document whose object a relist no
    /// longer finds.
    Always,
}

impl PruneMode {
    /// The name as `spec.prune.mode` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            PruneMode::Never => "Never",
            PruneMode::OnEvent => "OnEvent",
            PruneMode::Always => "Always",
        }
    }

    /// Whether an observed deletion (a DELETED event, a set deletionTimestamp)
    /// removes the object's document.
    pub fn on_event(self) -> bool {
        self != PruneMode::Never
    }

    /// Whether a reconcile may remove documents of objects that no longer exist.
    pub fn on_reconcile(self) -> bool {
        self == PruneMode::Always
    }
}

impl GitTargetSpec {
    pub fn prune_mode(&self) -> PruneMode {
        self.prune.as_ref().map(|p| p.mode).unwrap_or_default()
    }

    /// The ClusterProvider this target mirrors from (`default` when unset).
    pub fn cluster_provider(&self) -> &str {
        self.cluster_provider_ref.as_ref().map_or("default", |r| r.name.as_str())
    }
}

/// `spec.allowedSourceNamespaces`: omitted declares no policy; declared but
/// empty admits nothing; `selector: {}` admits every namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct AllowedSourceNamespaces {
    #[serde(default)]
    pub names: Vec<String>,
    #[serde(default)]
    pub selector: Option<LabelSelector>,
}

/// A `metav1.LabelSelector`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: String,
    #[serde(default)]
    pub values: Vec<String>,
}

impl AllowedSourceNamespaces {
    /// `NamespaceMatcher.Matches` (namespace_matcher.go:128-143): a listed
    /// name, or labels matching the selector; no selector matches nothing
    /// and `selector: {}` everything.
    pub fn admits(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.names.iter().any(|n| n == name) || self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }

    /// Whether [`admits`](Self::admits) of `name` needs its Namespace's
    /// labels: only a selector reads them, and a listed name needs none (so
    /// no Namespace read, and no RBAC for one).
    pub fn needs_labels(&self, name: &str) -> bool {
        self.selector.is_some() && !self.names.iter().any(|n| n == name)
    }

    /// `NamespaceMatcher.ValidateNames` (namespace_matcher.go:80-90): the
    /// first entry that could never be a namespace name (a DNS-1123 label),
    /// such as `*`.
    pub fn invalid_name(&self) -> Option<&str> {
        self.names.iter().map(String::as_str).find(|n| !is_dns1123_label(n))
    }
}

/// A namespace name: 1-63 of `a-z0-9-`, starting and ending alphanumeric.
fn is_dns1123_label(s: &str) -> bool {
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let b = s.as_bytes();
    !b.is_empty() && b.len() <= 63 && alnum(b[0]) && alnum(b[b.len() - 1]) && b.iter().all(|&c| alnum(c) || c == b'-')
}

impl LabelSelector {
    /// Whether the selector is `{}`, which admits everything.
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let got = labels.get(&r.key);
                match r.operator.as_str() {
                    "In" => got.is_some_and(|v| r.values.contains(v)),
                    "NotIn" => got.is_none_or(|v| !r.values.contains(v)),
                    "Exists" => got.is_some(),
                    "DoesNotExist" => got.is_none(),
                    // An operator the API would have refused admits nothing.
                    _ => false,
                }
            })
    }
}

/// `GitProvider`: the repository and how commits are made in it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct GitProvider {
    pub metadata: Meta,
    pub spec: GitProviderSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitProviderSpec {
    pub url: String,
    #[serde(default)]
    pub allowed_branches: Vec<String>,
    #[serde(default)]
    pub secret_ref: Option<NameRef>,
    #[serde(default)]
    pub known_hosts_ref: Option<NameRef>,
    #[serde(default)]
    pub commit: Option<CommitSpec>,
    #[serde(default)]
    pub push: Option<PushSpec>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct CommitSpec {
    #[serde(default)]
    pub committer: Option<Committer>,
    #[serde(default)]
    pub message: Option<MessageSpec>,
    #[serde(default)]
    pub signing: Option<SigningSpec>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Committer {
    #[serde(default = "default_committer_name")]
    pub name: String,
    #[serde(default = "default_committer_email")]
    pub email: String,
}

impl Default for Committer {
    fn default() -> Self {
        Committer { name: default_committer_name(), email: default_committer_email() }
    }
}

// The CRD's defaults.
fn default_committer_name() -> String {
    "GitOps Reverser".into()
}

fn default_committer_email() -> String {
    "noreply@configbutler.ai".into()
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageSpec {
    #[serde(default)]
    pub event_template: Option<String>,
    #[serde(default)]
    pub group_template: Option<String>,
    #[serde(default)]
    pub reconcile_template: Option<String>,
    /// The newer upstream's one template for every live window (#345);
    /// when set, it titles windows of any size in place of
    /// `eventTemplate`/`groupTemplate`.
    #[serde(default)]
    pub live_template: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SigningSpec {
    pub secret_ref: NameRef,
    #[serde(default)]
    pub generate_when_missing: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushSpec {
    #[serde(default)]
    pub commit_window: Option<String>,
}

impl GitProviderSpec {
    pub fn committer(&self) -> Committer {
        self.commit.as_ref().and_then(|c| c.committer.clone()).unwrap_or_default()
    }

    pub fn messages(&self) -> MessageSpec {
        self.commit.as_ref().and_then(|c| c.message.clone()).unwrap_or_default()
    }

    pub fn signing(&self) -> Option<&SigningSpec> {
        self.commit.as_ref().and_then(|c| c.signing.as_ref())
    }

    /// `push.commitWindow`, parsed; 5 s when unset.
    pub fn commit_window(&self) -> Result<Duration, String> {
        match self.push.as_ref().and_then(|p| p.commit_window.as_deref()) {
            None | Some("") => Ok(DEFAULT_COMMIT_WINDOW),
            Some(s) => parse_go_duration(s),
        }
    }

    /// Whether `branch` may be written: `allowedBranches` entries are exact
    /// names or globs where `*` matches any run of characters.
    pub fn allows_branch(&self, branch: &str) -> bool {
        self.allowed_branches.iter().any(|pattern| glob_match(pattern, branch))
    }
}

/// `*` matches any run (including `/`), everything else itself.
fn glob_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || !text[first.len()..].ends_with(last) || text.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Parses a Go `time.Duration` string: `0s`, `5s`, `1m30s`, `250ms`, `1h`
/// (units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`; a bare `0` is zero).
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration: use Go's form, e.g. 5s, 0s, 1m30s, 500ms");
    let t = s.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    if t.is_empty() || t.starts_with('-') {
        return Err(bad());
    }
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(rest.len());
        if num_end == 0 {
            return Err(bad());
        }
        let n: f64 = rest[..num_end].parse().map_err(|_| bad())?;
        rest = &rest[num_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += n * scale;
        rest = &rest[unit_end..];
    }
    Ok(Duration::from_secs_f64(total))
}

/// `ClusterProvider`: the audit route (spec §3, "The scope is an audit
/// route and a type": `spec.attribution.auditRoute`, defaulting to the
/// object's name) and the source-namespace delegation
/// (`super::source_namespace`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ClusterProvider {
    pub metadata: Meta,
    #[serde(default)]
    pub spec: ClusterProviderSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProviderSpec {
    #[serde(default)]
    pub attribution: Option<AttributionSpec>,
    /// Which GitTarget namespaces may mirror through this provider; omitted
    /// or empty admits none (clusterprovider_types.go:71-76). The same
    /// names-or-selector shape as a GitTarget's source policy.
    #[serde(default)]
    pub allowed_namespaces: Option<AllowedSourceNamespaces>,
    /// Whether WatchRules mirroring through this provider may watch a
    /// namespace other than their own, `*` included (default false,
    /// clusterprovider_types.go:95-107).
    #[serde(default)]
    pub allow_source_namespace_override: bool,
    /// The remote cluster this provider names (Flux's
    /// `KubeConfigReference`); omitted, the cluster the mirror runs in
    /// (clusterprovider_types.go:58-68, `super::source_cluster`).
    #[serde(default)]
    pub kube_config: Option<KubeConfigReference>,
    /// The remote client's queries per second and burst; omitted, the
    /// watcher's `--source-cluster-qps` / `--source-cluster-burst`.
    #[serde(default)]
    pub qps: Option<i32>,
    #[serde(default)]
    pub burst: Option<i32>,
}

/// Flux's `meta.KubeConfigReference`: only `secretRef` is honoured (the CRD
/// refuses `configMapRef`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfigReference {
    #[serde(default)]
    pub secret_ref: Option<SecretKeyReference>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct SecretKeyReference {
    pub name: String,
    #[serde(default)]
    pub key: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttributionSpec {
    #[serde(default)]
    pub audit_route: Option<String>,
}

impl ClusterProvider {
    /// `ClusterProvider.AuditRoute()`: the declared route, else the name.
    pub fn audit_route(&self) -> &str {
        self.spec
            .attribution
            .as_ref()
            .and_then(|a| a.audit_route.as_deref())
            .filter(|r| !r.is_empty())
            .unwrap_or(&self.metadata.name)
    }
}

/// One rule of a WatchRule or ClusterWatchRule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// `None` (omitted) resolves a resource name across all served groups.
    #[serde(default)]
    pub api_groups: Option<Vec<String>>,
    #[serde(default)]
    pub api_versions: Vec<String>,
    pub resources: Vec<String>,
    #[serde(default)]
    pub operations: Vec<String>,
    /// WatchRule only: omitted for the rule's own namespace, a name, or `*`.
    #[serde(default)]
    pub source_namespace: Option<String>,
}

/// `WatchRule` (namespaced): namespaced types in its own namespace, or in
/// `sourceNamespace` when the target admits it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchRule {
    pub metadata: Meta,
    pub spec: WatchRuleSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchRuleSpec {
    pub target_ref: NameRef,
    pub rules: Vec<Rule>,
}

/// `ClusterWatchRule`: cluster-scoped types.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterWatchRule {
    pub metadata: Meta,
    pub spec: WatchRuleSpec,
}

impl WatchRule {
    /// Whether this rule writes to the GitTarget `namespace/name` (a
    /// WatchRule's target is in its own namespace).
    pub fn targets(&self, namespace: &str, name: &str) -> bool {
        self.metadata.namespace == namespace && self.spec.target_ref.name == name
    }
}

impl ClusterWatchRule {
    pub fn targets(&self, namespace: &str, name: &str) -> bool {
        self.spec.target_ref.name == name && self.spec.target_ref.namespace.as_deref() == Some(namespace)
    }
}

#[cfg(test)]
mod tests;
