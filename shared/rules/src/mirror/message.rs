//! Commit messages from the GitProvider's templates (`spec.commit.message`):
//! `groupTemplate` for a commit window's commit (one per author),
//! `eventTemplate` when the window is `0s` (one commit per change), and
//! `reconcileTemplate` for a reconcile. The template gives the subject; the
//! per-change lines and the `Reverser-*` trailers follow, as on every commit
//! the writer makes, so `why` reads the same history however it was titled.

use std::collections::BTreeMap;

use super::config::MessageSpec;
use super::template::{Template, TemplateError, TemplateKind, Value};
use crate::attribution::commit::plan::{Applied, Effect, UNRESOLVED_AUTHOR_NAME, author_identity, commit_details};
use crate::attribution::commit::{Action, ResolvedAuthor};

/// What kind of commit a window becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitKind {
    /// A commit window: one commit per author (`groupTemplate`).
    Window,
    /// `commitWindow: 0s`: one commit per change (`eventTemplate`).
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
    /// The GitTarget's name, the templates' `GitTarget`.
    target: String,
}

impl Messages {
    /// The provider's templates, the defaults where it sets none.
    pub fn new(spec: &MessageSpec, target: &str) -> Result<Self, TemplateError> {
        let parse = |src: &Option<String>, kind| match src.as_deref().filter(|s| !s.trim().is_empty()) {
            Some(src) => Template::parse(src, kind),
            None => Ok(Template::default_for(kind)),
        };
        Ok(Messages {
            event: parse(&spec.event_template, TemplateKind::Event)?,
            group: parse(&spec.group_template, TemplateKind::Group)?,
            reconcile: parse(&spec.reconcile_template, TemplateKind::Reconcile)?,
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
        let subject = match kind {
            CommitKind::Window => self.group.render(&self.group_context(author, applied))?,
            CommitKind::PerEvent => self.event.render(&self.event_context(author, applied))?,
            CommitKind::Reconcile { group, version, resource, revision } => {
                self.reconcile.render(&self.reconcile_context(applied, group, version, resource, revision))?
            }
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
                ])
            })
            .collect();
        let name = author.map_or_else(|| UNRESOLVED_AUTHOR_NAME.to_owned(), |_| author_identity(author).name);
        Value::map([
            ("Author", Value::from(name)),
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
            ("Username", author.map_or(UNRESOLVED_AUTHOR_NAME, |a| a.username.as_str())),
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
        ])
    }
}

/// `CREATE`, `UPDATE` or `DELETE`, as what the change did to the tree.
fn operation(a: &Applied<'_>) -> &'static str {
    match (a.effect, &a.change.action) {
        (Effect::Create, _) => "CREATE",
        (Effect::Delete, _) | (_, Action::Delete) => "DELETE",
        (Effect::Update, _) => "UPDATE",
    }
}

fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") }
}

#[cfg(test)]
mod tests;
