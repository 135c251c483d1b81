//! Commit messages from the templates (`spec.commit.message` of the
//! GitProvider, or of the GitTarget, which wins: [`super::config::commit_messages`]),
//! chosen as gitops-reverser chooses them (`internal/git/commit_executor.go:67-96`,
//! `pending_writes.go:231-239` at f0f7b42): a live commit of one change is
//! titled by `eventTemplate`, of several by `groupTemplate`; a reconcile by
//! `reconcileTemplate`. A `liveTemplate` (the newer upstream's, #345), when
//! set, titles every live commit whatever its size. The template gives the
//! subject; the per-change lines and the `Reverser-*` trailers follow, as on
//! every commit the writer makes, so `why` reads the same history however it
//! was titled.
//!
//! As in the reference, `{{.Author}}` and `{{.Username}}` are the actor's
//! username, empty when attribution is unresolved: the unresolved sentinel is
//! the author header's, never a template value (types.go:74-82).

use std::collections::BTreeMap;

use super::config::MessageSpec;
use super::template::{Template, TemplateError, TemplateKind, Value};
use super::watch_rules::api_version;
use crate::attribution::commit::plan::{Applied, Effect, commit_details, commit_message};
use crate::attribution::commit::{Action, ResolvedAuthor};

/// What kind of commit a window becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitKind {
    /// A commit window: one commit per author (`eventTemplate` for one
    /// change, `groupTemplate` for several, or `liveTemplate`).
    Window,
    /// `commitWindow: 0s`: one commit per change (`eventTemplate`, or
    /// `liveTemplate`).
    PerEvent,
    /// A reconcile of one type after a list (`reconcileTemplate`); the
    /// revision is the list's resourceVersion.
    Reconcile { group: String, version: String, resource: String, revision: String },
}

/// The three templates, parsed and checked against their variables when the
/// provider is read, so a typo is an error at start and never a broken
/// commit.
#[derive(Debug, Clone)]
pub struct Messages {
    event: Template,
    group: Template,
    reconcile: Template,
    live: Option<Template>,
    /// The GitTarget's name, the templates' `GitTarget`.
    target: String,
}

impl Messages {
    /// The given templates, the defaults where it sets none.
    pub fn new(spec: &MessageSpec, target: &str) -> Result<Self, TemplateError> {
        let given = |src: &Option<String>| src.as_deref().filter(|s| !s.trim().is_empty()).map(str::to_owned);
        let parse = |src: &Option<String>, kind| match given(src) {
            Some(src) => Template::parse(&src, kind),
            None => Ok(Template::default_for(kind)),
        };
        Ok(Messages {
            event: parse(&spec.event_template, TemplateKind::Event)?,
            group: parse(&spec.group_template, TemplateKind::Group)?,
            reconcile: parse(&spec.reconcile_template, TemplateKind::Reconcile)?,
            live: given(&spec.live_template).map(|src| Template::parse(&src, TemplateKind::Live)).transpose()?,
            target: target.to_owned(),
        })
    }

    /// The full message of one commit: the template's subject, then the
    /// per-change lines and trailers.
    pub fn message(
        &self,
        kind: &CommitKind,
        author: Option<&ResolvedAuthor>,
        applied: &[Applied<'_>],
    ) -> Result<String, TemplateError> {
        let subject = match (kind, &self.live) {
            (CommitKind::Reconcile { group, version, resource, revision }, _) => {
                self.reconcile.render(&self.reconcile_context(applied, group, version, resource, revision))?
            }
            (_, Some(live)) => live.render(&self.group_context(author, applied))?,
            (CommitKind::PerEvent, None) => self.event.render(&self.event_context(author, applied))?,
            (CommitKind::Window, None) if applied.len() == 1 => {
                self.event.render(&self.event_context(author, applied))?
            }
            (CommitKind::Window, None) => self.group.render(&self.group_context(author, applied))?,
        };
        Ok(format!("{}\n\n{}", subject.trim(), commit_details(author, applied)))
    }

    fn group_context(&self, author: Option<&ResolvedAuthor>, applied: &[Applied<'_>]) -> Value {
        let mut ops: BTreeMap<String, Value> =
            ["CREATE", "UPDATE", "DELETE"].into_iter().map(|k| (k.to_owned(), Value::Int(0))).collect();
        for a in applied {
            if let Some(Value::Int(n)) = ops.get_mut(operation(a)) {
                *n += 1;
            }
        }
        let resources: Vec<Value> = applied
            .iter()
            .map(|a| {
                let o = &a.change.object;
                Value::map([
                    ("Group", o.group.as_str()),
                    ("Version", o.version.as_str()),
                    ("Resource", o.resource.as_str()),
                    ("Namespace", o.namespace.as_str()),
                    ("Name", o.name.as_str()),
                    ("Operation", operation(a)),
                    ("APIVersion", api_version(&o.group, &o.version).as_str()),
                ])
            })
            .collect();
        Value::map([
            ("Author", Value::from(username(author))),
            ("GitTarget", Value::from(self.target.as_str())),
            ("Count", Value::from(applied.len())),
            ("Operations", Value::Map(ops)),
            ("Resources", Value::List(resources)),
        ])
    }

    fn event_context(&self, author: Option<&ResolvedAuthor>, applied: &[Applied<'_>]) -> Value {
        // One change per commit on this path; the first is it.
        let Some(a) = applied.first() else {
            return Value::map([("GitTarget", self.target.as_str())]);
        };
        let o = &a.change.object;
        let api = api_version(&o.group, &o.version);
        Value::map([
            ("Operation", operation(a)),
            ("Group", o.group.as_str()),
            ("Version", o.version.as_str()),
            ("Resource", o.resource.as_str()),
            ("Namespace", o.namespace.as_str()),
            ("Name", o.name.as_str()),
            ("APIVersion", api.as_str()),
            ("Username", username(author)),
            ("GitTarget", self.target.as_str()),
        ])
    }

    fn reconcile_context(
        &self,
        applied: &[Applied<'_>],
        group: &str,
        version: &str,
        resource: &str,
        revision: &str,
    ) -> Value {
        let api = if version.is_empty() { String::new() } else { api_version(group, version) };
        Value::map([
            ("Count", Value::from(applied.len())),
            ("GitTarget", Value::from(self.target.as_str())),
            ("Group", Value::from(group)),
            ("Version", Value::from(version)),
            ("Resource", Value::from(resource)),
            ("APIVersion", Value::from(api)),
            ("Revision", Value::from(revision)),
            ("ResourceVersion", Value::from(revision)),
        ])
    }
}

/// The message of a commit when no templates are configured (`serve`
/// without a GitTarget): a reconcile is still titled as one, by the default
/// `reconcileTemplate`; other commits by what they changed.
pub fn untemplated_message(kind: &CommitKind, author: Option<&ResolvedAuthor>, applied: &[Applied<'_>]) -> String {
    match kind {
        CommitKind::Reconcile { .. } => {
            let defaults =
                Messages::new(&MessageSpec::default(), "").expect("the default templates are tested to parse");
            defaults.message(kind, author, applied).unwrap_or_else(|_| commit_message(author, applied))
        }
        _ => commit_message(author, applied),
    }
}

/// The actor's username, empty when unresolved (the reference's
/// `UserInfo.Username` of an unattributed event).
fn username(author: Option<&ResolvedAuthor>) -> &str {
    author.map_or("", |a| a.username.as_str())
}

/// `CREATE`, `UPDATE` or `DELETE`, as what the change did to the tree.
fn operation(a: &Applied<'_>) -> &'static str {
    match (a.effect, &a.change.action) {
        (Effect::Create, _) => "CREATE",
        (Effect::Delete, _) | (_, Action::Delete) => "DELETE",
        (Effect::Update, _) => "UPDATE",
    }
}

#[cfg(test)]
mod tests;
