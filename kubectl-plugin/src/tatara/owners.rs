//! `kubectl tatara owners ISSUE|MR|TASK`: the ownership tree of one object
//! (controller and plain owners, blockOwnerDeletion, each owner Task's stage,
//! or for a Task everything it owns), with every violation of the five
//! owner-reference rules ("Who owns what") marked. Reads only.

use std::io::Write;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use rules::ownership::decision::{Artifact, Snapshot, is_controller};
use rules::ownership::owners::{Finding, Owned, Violation, check};
use rules::ownership::types::{ArtifactKind, Stage, Task};
use runtime::ownership::executor::Executor;
use serde::Serialize;

use crate::common::{self, Cell, CliError, Human, KubeArgs, Node, Offers, OutputArgs, Paint, Style, Table};

/// The flags of `kubectl tatara owners`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Examples:\n  kubectl tatara owners iss-tatara-operator-412 -n tatara\n  \
                  kubectl tatara owners 'tatara-operator!9'\n  kubectl tatara owners task/umbrella -o json")]
pub struct Args {
    /// The object: an Issue or MergeRequest by name or by its natural key
    /// (REPO#NUMBER for an Issue, REPO!NUMBER for a MergeRequest; # is
    /// accepted for either), a Task by name; prefix issue/, mr/ or task/ to
    /// pick the kind when names collide.
    #[arg(value_name = "ISSUE|MR|TASK")]
    pub target: String,
    #[command(flatten)]
    pub exit_code: common::ExitCodeArg,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// One owner reference of an artifact, resolved against the Tasks.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerNode {
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub controller: bool,
    pub block_owner_deletion: bool,
    /// The owner object exists with this uid (a dangling reference is
    /// dropped by the garbage collector and holds nothing open).
    pub exists: bool,
    /// The owner Task's stage, when it exists.
    pub stage: Option<String>,
}

/// One artifact a Task holds a reference on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnedNode {
    pub kind: ArtifactKind,
    pub name: String,
    pub key: String,
    pub state: Option<String>,
    pub controller: bool,
    pub block_owner_deletion: bool,
    /// Every rule broken on that artifact.
    pub violations: Vec<Finding>,
}

/// The tree `owners` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tree {
    /// `Issue`, `MergeRequest` or `Task`.
    pub kind: String,
    pub name: String,
    /// Natural key of an artifact: `<repositoryRef>#<number>` (Issue),
    /// `<repositoryRef>!<number>` (MergeRequest).
    pub key: Option<String>,
    /// A Task's stage (or an artifact's mirrored state).
    pub stage: Option<String>,
    /// The object's own owner references.
    pub owners: Vec<OwnerNode>,
    /// For a Task: the artifacts it owns.
    pub owns: Vec<OwnedNode>,
    /// Every rule broken on this object.
    pub violations: Vec<Finding>,
}

/// A Task's stage in the operator's words: its `state` (`new`,
/// `under-implementation`, ..., `done`, `rejected`), or, when `parkReason`
/// is set, `parked(<reason>, unpark: <class>)` with the operator's unpark
/// class (`stage.UnparkClassFor`: never, human, timer, retired, retry). The
/// operator has no `failed` state: every such reason is a park.
pub fn stage_text(stage: &Stage) -> String {
    let parked = |r: &str| match rules::ownership::park::unpark_class(r) {
        Some(c) => format!("parked({r}, unpark: {})", c.label()),
        None => format!("parked({r})"),
    };
    match stage {
        Stage::Active(s) => s.clone(),
        Stage::Parked(r) | Stage::Failed(r) => parked(r),
        Stage::Delivered => "done".into(),
        Stage::Rejected => "rejected".into(),
    }
}

fn task_by_uid<'a>(snap: &'a Snapshot, name: &str, uid: &str) -> Option<&'a Task> {
    snap.tasks.iter().find(|t| t.name() == name && t.metadata.uid.as_deref() == Some(uid))
}

/// Every violation on an artifact: the five rules over its references, and
/// rule 5 again when its one controller reference points at a Task that is
/// gone ("An artifact with plain owners and no controller owner is worked by
/// nobody and re-minted by nobody").
pub fn artifact_findings(snap: &Snapshot, a: &Artifact) -> Vec<Finding> {
    let mut out = check(&a.name, Owned::Artifact, &a.owner_references);
    if let Some(c) = a.controller()
        && task_by_uid(snap, &c.name, &c.uid).is_none()
    {
        out.push(Finding {
            object: a.name.clone(),
            rule: 5,
            why: format!(
                "{}: its controller owner {} is gone, and an artifact must never have zero controller owners",
                a.name, c.name
            ),
            violation: Violation::OwnersButNoController {
                owners: a.owner_references.iter().map(|r| r.name.clone()).collect(),
            },
        });
    }
    out
}

/// One owner reference, resolved against the Tasks of the snapshot.
fn owner_node(snap: &Snapshot, r: &OwnerReference) -> OwnerNode {
    let task = (r.kind == Task::KIND).then(|| task_by_uid(snap, &r.name, &r.uid)).flatten();
    OwnerNode {
        kind: r.kind.clone(),
        name: r.name.clone(),
        uid: r.uid.clone(),
        controller: is_controller(r),
        block_owner_deletion: r.block_owner_deletion == Some(true),
        exists: task.is_some(),
        stage: task.map(|t| stage_text(&t.stage())),
    }
}

fn artifact_tree(snap: &Snapshot, a: &Artifact) -> Tree {
    let owners = a.owner_references.iter().map(|r| owner_node(snap, r)).collect();
    Tree {
        kind: kind_name(a.kind).into(),
        name: a.name.clone(),
        key: Some(a.key()),
        stage: a.state.clone(),
        owners,
        owns: vec![],
        violations: artifact_findings(snap, a),
    }
}

fn task_tree(snap: &Snapshot, t: &Task) -> Tree {
    let uid = t.metadata.uid.clone().unwrap_or_default();
    let owns = snap
        .artifacts()
        .iter()
        .filter(|a| a.owned_by(&uid))
        .map(|a| {
            let r = a.owner_references.iter().find(|r| r.uid == uid);
            OwnedNode {
                kind: a.kind,
                name: a.name.clone(),
                key: a.key(),
                state: a.state.clone(),
                controller: r.is_some_and(is_controller),
                block_owner_deletion: r.is_some_and(|r| r.block_owner_deletion == Some(true)),
                violations: artifact_findings(snap, a),
            }
        })
        .collect();
    let owners = t.owner_refs().iter().map(|r| owner_node(snap, r)).collect();
    Tree {
        kind: "Task".into(),
        name: t.name().to_string(),
        key: None,
        stage: Some(stage_text(&t.stage())),
        owners,
        owns,
        // Rule 4 ("A Task never owns a Task") and rules 2, 3 on its refs.
        violations: check(t.name(), Owned::Task, t.owner_refs()),
    }
}

/// Why [`tree`] found no single object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Nothing by that name or key (exit code 3).
    NotFound(String),
    /// The target cannot name one object: a bad kind or key, or an
    /// ambiguous name (exit code 2).
    Invalid(String),
}

impl Lookup {
    /// The command's error: exit code 3 for nothing found (with how to list
    /// what the namespace holds), 2 for a target that cannot name one
    /// object.
    pub fn error(self, namespace: &str) -> CliError {
        match self {
            Lookup::NotFound(m) => CliError::new(format!(
                "in namespace {namespace:?}: {m}; list them with `kubectl get issues,mergerequests,tasks -n \
                 {namespace}`"
            ))
            .with_code(common::exit_code::NOT_FOUND),
            Lookup::Invalid(m) => CliError::usage(format!("in namespace {namespace:?}: {m}")),
        }
    }
}

impl std::fmt::Display for Lookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lookup::NotFound(m) | Lookup::Invalid(m) => f.write_str(m),
        }
    }
}

/// One object `target` names.
#[derive(Debug, Clone)]
pub enum Found<'a> {
    Artifact(Artifact),
    Task(&'a Task),
}

/// The tree of `target` in `snap` (see [`find`]).
pub fn tree(snap: &Snapshot, target: &str) -> Result<Tree, Lookup> {
    Ok(match find(snap, target)? {
        Found::Artifact(a) => artifact_tree(snap, &a),
        Found::Task(t) => task_tree(snap, t),
    })
}

/// The object `target` names in `snap`: `issue/NAME`, `mr/NAME`,
/// `task/NAME`, `REPO#NUMBER` (looked up by natural key, never by a hashed
/// name), or a bare name (Issue, then MergeRequest, then Task; ambiguous
/// names refused).
pub fn find<'a>(snap: &'a Snapshot, target: &str) -> Result<Found<'a>, Lookup> {
    let artifacts = snap.artifacts();
    let by_name = |kind: ArtifactKind, name: &str| artifacts.iter().find(|a| a.kind == kind && a.name == name).cloned();
    let task = |name: &str| snap.tasks.iter().find(|t| t.name() == name);
    // `what` names the object sought: "... not found" follows it once;
    // [`Lookup::error`] adds where to list them.
    let not_found = |what: &str| Lookup::NotFound(format!("{what} not found"));
    if let Some((kind, name)) = target.split_once('/') {
        return match kind.to_ascii_lowercase().as_str() {
            "issue" | "issues" | "iss" => by_name(ArtifactKind::Issue, name).map(Found::Artifact),
            "mr" | "mergerequest" | "mergerequests" => by_name(ArtifactKind::MergeRequest, name).map(Found::Artifact),
            "task" | "tasks" => task(name).map(Found::Task),
            other => {
                return Err(Lookup::Invalid(format!("unknown kind {other:?} in {target:?}; use issue/, mr/ or task/")));
            }
        }
        .ok_or_else(|| not_found(target));
    }
    if let Some((repo, number)) = target.rsplit_once(['!', '#']) {
        if repo.is_empty() {
            return Err(Lookup::Invalid(format!(
                "{target:?} names no repository: use REPO#NUMBER for an Issue or REPO!NUMBER for a MergeRequest, \
                 REPO being the Repository CR's name (e.g. tatara-operator#{number})"
            )));
        }
        let number: i64 = number.parse().map_err(|_| {
            Lookup::Invalid(format!("{target:?} is not REPO#NUMBER or REPO!NUMBER: {number:?} is not a number"))
        })?;
        // `!` is the operator's MergeRequest key (`MRKey`); `#` names an
        // Issue, and is accepted for a MergeRequest too.
        let mr_only = target.len() > repo.len() && target.as_bytes()[repo.len()] == b'!';
        let mut found: Vec<Artifact> = artifacts
            .iter()
            .filter(|a| a.repository_ref == repo && a.number == number)
            .filter(|a| !mr_only || a.kind == ArtifactKind::MergeRequest)
            .cloned()
            .collect();
        return match found.len() {
            0 => Err(not_found(&format!("Issue or MergeRequest with key {target}"))),
            1 => Ok(Found::Artifact(found.remove(0))),
            _ => Err(Lookup::Invalid(format!(
                "{target} names both an Issue and a MergeRequest; pick one with issue/NAME, mr/NAME or \
                 {repo}!{number} for the MergeRequest ({})",
                found.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ")
            ))),
        };
    }
    let mut hits: Vec<(&str, Found<'_>)> = Vec::new();
    hits.extend(by_name(ArtifactKind::Issue, target).map(|a| ("Issue", Found::Artifact(a))));
    hits.extend(by_name(ArtifactKind::MergeRequest, target).map(|a| ("MergeRequest", Found::Artifact(a))));
    hits.extend(task(target).map(|t| ("Task", Found::Task(t))));
    match hits.len() {
        0 => Err(not_found(&format!("Issue, MergeRequest or Task {target:?}"))),
        1 => Ok(hits.remove(0).1),
        _ => Err(Lookup::Invalid(format!(
            "{target:?} names more than one kind ({}); prefix issue/, mr/ or task/",
            hits.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// An artifact kind as its CRD names it.
pub fn kind_name(kind: ArtifactKind) -> &'static str {
    match kind {
        ArtifactKind::Issue => "Issue",
        ArtifactKind::MergeRequest => "MergeRequest",
    }
}

/// `kind.tatara.dev/name`, as `kubectl get -o name` prints it.
fn resource_name(kind: &str, name: &str) -> String {
    format!("{}.tatara.dev/{name}", kind.to_lowercase())
}

fn rules_cell(findings: &[Finding]) -> Cell {
    // Ascending, each once (as repair's RULES): `3,5` whatever order the
    // findings came in, never `5,3` beside it nor `5,3,5`.
    let mut rules: Vec<u8> = findings.iter().map(|f| f.rule).collect();
    rules.sort_unstable();
    rules.dedup();
    if rules.is_empty() {
        return Cell::from("-");
    }
    let numbers = rules.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(",");
    let text = if rules.len() == 1 { format!("rule {numbers}") } else { format!("rules {numbers}") };
    Cell::painted(text, Paint::Red)
}

/// One row: NAME, REF, BLOCKS, STAGE, VIOLATIONS, and wide KEY, UID. `edge`
/// is how the row's parent references it: (controller, blockOwnerDeletion).
fn row(name: String, edge: Option<(bool, bool)>, stage: Cell, violations: Cell, key: &str, uid: &str) -> Vec<Cell> {
    let (reference, blocks) = match edge {
        None => (Cell::from("-"), Cell::from("-")),
        Some((controller, bod)) => (
            Cell::from(if controller { "controller" } else { "owner" }),
            if bod { Cell::from("yes") } else { Cell::painted("no", Paint::Red) },
        ),
    };
    vec![Cell::from(name), reference, blocks, stage, violations, Cell::from(or_dash(key)), Cell::from(or_dash(uid))]
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

fn owner_row(o: &OwnerNode) -> Vec<Cell> {
    let stage = match (&o.stage, o.exists) {
        (_, false) => Cell::painted("<gone>", Paint::Red),
        (Some(s), true) => Cell::from(s.as_str()),
        (None, true) => Cell::from("-"),
    };
    row(format!("{}/{}", o.kind, o.name), None, stage, Cell::from("-"), "", &o.uid)
}

impl Tree {
    /// The tree top-down in ownership, like kubectl-tree: an owner above
    /// what it owns. An artifact is drawn under each of its owners (or
    /// alone when it has none); a Task with what it owns under it (and under
    /// each owner of its own, should it have any: rule 4).
    pub fn nodes(&self) -> Vec<Node> {
        let stage = Cell::from(self.stage.as_deref().unwrap_or("-"));
        let me = |edge: Option<(bool, bool)>, children: Vec<Node>| Node {
            cells: row(
                format!("{}/{}", self.kind, self.name),
                edge,
                stage.clone(),
                rules_cell(&self.violations),
                self.key.as_deref().unwrap_or(""),
                "",
            ),
            children,
        };
        let owned: Vec<Node> = self
            .owns
            .iter()
            .map(|o| Node {
                cells: row(
                    format!("{}/{}", kind_name(o.kind), o.name),
                    Some((o.controller, o.block_owner_deletion)),
                    Cell::from(o.state.as_deref().unwrap_or("-")),
                    rules_cell(&o.violations),
                    &o.key,
                    "",
                ),
                children: vec![],
            })
            .collect();
        if self.owners.is_empty() {
            return vec![me(None, owned)];
        }
        self.owners
            .iter()
            .map(|o| Node {
                cells: owner_row(o),
                children: vec![me(Some((o.controller, o.block_owner_deletion)), owned.clone())],
            })
            .collect()
    }
}

impl Human for Tree {
    fn render(&self, style: &Style, out: &mut dyn Write) -> std::io::Result<()> {
        let mut table = Table::new(&[
            ("name", false),
            ("ref", false),
            ("blocks", false),
            ("stage", false),
            ("violations", false),
            ("key", true),
            ("owner uid", true),
        ]);
        for node in self.nodes() {
            node.add_to(&mut table);
        }
        out.write_all(table.render(style).as_bytes())?;
        // The reasons, worded by the rules, under the table (a script uses
        // --no-headers, -o name or JSON).
        let all: Vec<&Finding> =
            self.violations.iter().chain(self.owns.iter().flat_map(|o| o.violations.iter())).collect();
        if style.headers && !all.is_empty() {
            writeln!(out)?;
            for f in all {
                writeln!(out, "{} rule {}: {}", Paint::Red.paint("!", style.colour), f.rule, f.why)?;
            }
        }
        Ok(())
    }

    /// The other side of the tree: an artifact's owners, or what a Task owns.
    fn names(&self) -> Vec<String> {
        if self.kind == "Task" {
            self.owns.iter().map(|o| resource_name(kind_name(o.kind), &o.name)).collect()
        } else {
            self.owners.iter().map(|o| resource_name(&o.kind, &o.name)).collect()
        }
    }
}

/// Runs `kubectl tatara owners`.
pub async fn run(args: &Args, colour: bool, out: &mut dyn Write) -> Result<(), CliError> {
    args.output.check("owners", Offers { wide: true, name: true })?;
    let target = args.kube.client().await?;
    let snap = Executor::new(target.client, &target.namespace)
        .snapshot()
        .await
        .map_err(|e| common::executor_failure(e, &target.namespace))?;
    let t = tree(&snap, &args.target).map_err(|e| e.error(&target.namespace))?;
    common::print(&args.output, colour, &t, out)?;
    let violations = t.violations.len() + t.owns.iter().map(|o| o.violations.len()).sum::<usize>();
    args.exit_code.findings(violations, "rule violation(s)")
}
