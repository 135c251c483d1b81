//! `kubectl tatara repair [--apply]`: the operator's zero-controller guard
//! (`RepairZeroController`, `internal/own/own.go`) run by hand. Every Issue
//! and MergeRequest it would repair gets one repair (a dangling controller
//! reference dropped, the first live Task owner in owner-reference order
//! promoted, every Task reference with blockOwnerDeletion), printed first;
//! with `--apply` each is ONE PUT guarded by the resourceVersion it was
//! computed from, recomputed from a fresh read on 409, so two racing repairs
//! end with exactly one controller each. A write that fails does not stop the
//! others, and the result says which were written and which were not.

use std::collections::BTreeSet;
use std::io::Write;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use rules::ownership::decision::{Action, Snapshot, is_controller};
use rules::ownership::owners::decide_repairs;
use rules::ownership::types::{ArtifactKind, Issue, MergeRequest};
use runtime::ownership::executor::Executor;
use serde::Serialize;

use super::owners::{artifact_findings, kind_name};
use crate::common::{
    self, AllNamespacesArgs, Call, Cell, CliError, Human, KubeArgs, Offers, OutputArgs, Paint, Style, Table,
};

/// The flags of `kubectl tatara repair`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Examples:\n  kubectl tatara repair -n tatara\n  kubectl tatara repair -A --apply -o json")]
pub struct Args {
    /// Write the repairs; without it the plan is only printed.
    #[arg(long)]
    pub apply: bool,
    #[command(flatten)]
    pub exit_code: common::ExitCodeArg,
    #[command(flatten)]
    pub all: AllNamespacesArgs,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// One repair: the owner references the artifact gets, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairLine {
    pub namespace: String,
    pub kind: ArtifactKind,
    pub name: String,
    /// The one controller after the repair.
    pub controller: Option<String>,
    /// The owner-reference rules the artifact breaks now.
    pub rules: Vec<u8>,
    pub owner_references: Vec<OwnerReference>,
    pub why: String,
}

/// A repair whose write failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedRepair {
    pub namespace: String,
    pub kind: ArtifactKind,
    pub name: String,
    pub error: String,
    #[serde(skip)]
    pub code: u8,
}

/// What `repair` prints.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairResult {
    /// Whether `--apply` was given.
    pub apply: bool,
    /// The repairs computed from the first read.
    pub plan: Vec<RepairLine>,
    /// The writes that landed (with `--apply`); fewer than the plan when
    /// another writer repaired some first.
    pub applied: Vec<RepairLine>,
    /// The repairs whose write failed (with `--apply`), each with why.
    pub failed: Vec<FailedRepair>,
    /// 409s met and recomputed from fresh reads.
    pub conflicts: usize,
    /// Whether the plan covers every namespace (`-A`): the table then has
    /// a NAMESPACE column.
    #[serde(skip)]
    pub all_namespaces: bool,
}

fn line(namespace: &str, snap: &Snapshot, a: &Action) -> Option<RepairLine> {
    let Action::SetOwners { kind, name, owner_references, why, .. } = a else {
        return None;
    };
    let artifacts = snap.artifacts();
    let broken = artifacts.iter().find(|x| x.kind == *kind && x.name == *name);
    let mut rules: Vec<u8> =
        broken.map(|x| artifact_findings(snap, x).iter().map(|f| f.rule).collect()).unwrap_or_default();
    rules.sort_unstable();
    rules.dedup();
    Some(RepairLine {
        namespace: namespace.to_string(),
        kind: *kind,
        name: name.clone(),
        controller: owner_references.iter().find(|r| is_controller(r)).map(|r| r.name.clone()),
        rules,
        owner_references: owner_references.clone(),
        why: why.clone(),
    })
}

impl Human for RepairResult {
    /// NAMESPACE (with -A), ARTIFACT, NEW CONTROLLER, RULES; -o wide adds
    /// the rules' own words (WHY).
    fn render(&self, style: &Style, out: &mut dyn Write) -> std::io::Result<()> {
        if self.plan.is_empty() {
            writeln!(out, "No Issue or MergeRequest breaks an owner-reference rule.")?;
        } else {
            let mut columns = vec![("artifact", false), ("new controller", false), ("rules", false), ("why", true)];
            if self.all_namespaces {
                columns.insert(0, ("namespace", false));
            }
            let mut table = Table::new(&columns);
            for l in &self.plan {
                let rules = l.rules.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(",");
                let mut row = vec![
                    Cell::from(format!("{}/{}", kind_name(l.kind).to_lowercase(), l.name)),
                    Cell::from(l.controller.clone().unwrap_or_else(|| "-".into())),
                    Cell::painted(rules, Paint::Red),
                    Cell::from(l.why.as_str()),
                ];
                if self.all_namespaces {
                    row.insert(0, Cell::from(l.namespace.as_str()));
                }
                table.row(row);
            }
            out.write_all(table.render(style).as_bytes())?;
        }
        if !style.headers {
            return Ok(());
        }
        if self.apply {
            writeln!(
                out,
                "applied {} repair(s) in guarded writes ({} conflict(s) recomputed from fresh reads)",
                self.applied.len(),
                self.conflicts
            )?;
            if !self.failed.is_empty() {
                for l in &self.applied {
                    writeln!(out, "written: {}/{}", kind_name(l.kind).to_lowercase(), l.name)?;
                }
                for f in &self.failed {
                    writeln!(out, "NOT written: {}/{}: {}", kind_name(f.kind).to_lowercase(), f.name, f.error)?;
                }
            }
        }
        Ok(())
    }

    /// The plan was not applied: say how to, on stderr.
    fn note(&self, style: &Style) -> Option<String> {
        (style.headers && !self.apply && !self.plan.is_empty())
            .then(|| "(plan only: run again with --apply to write these repairs; -o wide says why)".into())
    }

    fn names(&self) -> Vec<String> {
        self.plan.iter().map(|l| format!("{}.tatara.dev/{}", kind_name(l.kind).to_lowercase(), l.name)).collect()
    }
}

/// The namespaces holding an Issue or MergeRequest (for `-A`).
async fn artifact_namespaces(client: &kube::Client) -> Result<BTreeSet<String>, CliError> {
    let fail = |resource: &'static str| {
        move |e: kube::Error| common::api_failure(Call { verb: "list", resource, name: "", namespace: "" }, &e)
    };
    let lp = Default::default();
    let mut out: BTreeSet<String> = BTreeSet::new();
    let issues = Api::<Issue>::all(client.clone()).list(&lp).await.map_err(fail("issues.tatara.dev"))?;
    out.extend(issues.items.into_iter().filter_map(|i| i.metadata.namespace));
    let mrs = Api::<MergeRequest>::all(client.clone()).list(&lp).await.map_err(fail("mergerequests.tatara.dev"))?;
    out.extend(mrs.items.into_iter().filter_map(|m| m.metadata.namespace));
    Ok(out)
}

/// Runs `kubectl tatara repair`.
pub async fn run(args: &Args, colour: bool, out: &mut dyn Write) -> Result<(), CliError> {
    args.output.check("repair", Offers { wide: true, name: true })?;
    let target = args.kube.client().await?;
    let namespaces: Vec<String> = if args.all.all_namespaces {
        artifact_namespaces(&target.client).await?.into_iter().collect()
    } else {
        vec![target.namespace.clone()]
    };
    let mut result = RepairResult { apply: args.apply, all_namespaces: args.all.all_namespaces, ..Default::default() };
    for ns in &namespaces {
        let mut exec = Executor::new(target.client.clone(), ns);
        let snap = exec.snapshot().await.map_err(|e| common::executor_failure(e, ns))?;
        let plan = decide_repairs(&snap);
        // Each 409 means another writer landed on one of the planned
        // artifacts (a racing repair: that artifact then drops out of our
        // plan), so the conflict budget scales with the plan, not a constant.
        exec.max_conflicts = exec.max_conflicts.max(10 + 2 * plan.len());
        exec.max_rounds = exec.max_rounds.max(exec.max_conflicts + 10);
        result.plan.extend(plan.iter().filter_map(|a| line(ns, &snap, a)));
        if args.apply {
            // One converge per artifact, so a write that fails leaves the
            // others to be made and reported. Each is recomputed from a
            // fresh read every round: a 409 means another writer moved
            // first, and its repair may already be ours.
            for planned in plan.iter().filter_map(|a| line(ns, &snap, a)) {
                let (kind, name) = (planned.kind, planned.name.clone());
                let this =
                    |a: &Action| matches!(a, Action::SetOwners { kind: k, name: n, .. } if *k == kind && *n == name);
                let what = format!("repair of {}/{name} in namespace {ns}", kind_name(kind).to_lowercase());
                match exec
                    .converge(&what, None, |snap| Ok(decide_repairs(snap).into_iter().filter(this).collect()))
                    .await
                {
                    Ok(report) => {
                        result.applied.extend(report.applied.iter().filter_map(|a| line(ns, &snap, a)));
                        result.conflicts += report.conflicts;
                    }
                    Err(e) => {
                        let e = common::executor_failure(e, ns);
                        result.failed.push(FailedRepair {
                            namespace: ns.clone(),
                            kind,
                            name,
                            error: e.message().to_string(),
                            code: e.code(),
                        });
                    }
                }
            }
        }
    }
    common::print(&args.output, colour, &result, out)?;
    if let Some(first) = result.failed.first() {
        let names = |v: Vec<String>| if v.is_empty() { "none".to_string() } else { v.join(", ") };
        let written =
            names(result.applied.iter().map(|l| format!("{}/{}", kind_name(l.kind).to_lowercase(), l.name)).collect());
        let not =
            names(result.failed.iter().map(|f| format!("{}/{}", kind_name(f.kind).to_lowercase(), f.name)).collect());
        return Err(CliError::new(format!(
            "{} of {} repair(s) could not be written (written: {written}; not written: {not}); the first failure: {}",
            result.failed.len(),
            result.failed.len() + result.applied.len(),
            first.error
        ))
        .with_code(first.code));
    }
    // Findings: what is still to repair (the plan without --apply; what did
    // not land with it).
    let left = if args.apply { result.plan.len().saturating_sub(result.applied.len()) } else { result.plan.len() };
    args.exit_code.findings(left, "repair(s) to make")
}
