//! Trigger: ask the operator to run its own sweep now, instead of minting
//! for it. The operator has no "sweep now" request: its Project reconcile
//! sweeps every Repository whose `issueScan` slot has come since the slot's
//! base, and that base is the Repository's `status.lastIssueScan`, else the
//! Project's, else the Project's creation (`repoIssueScanBase`,
//! `internal/controller/projectscan.go:144-149`; `dueBase`, :49-54;
//! `reposDueForScan`, :497-529). Clearing both stamps moves the base back to
//! the creation timestamp, so every Repository of a Project older than one
//! `issueScan` period is due on the next reconcile. This module decides, per
//! object, whether clearing its stamp can make the operator sweep, or why
//! the operator would not sweep whatever the stamps say.

use serde::Serialize;

use crate::ownership::types::{Extra, Project, Repository};

/// The status field the operator's scheduler anchors the sweep on, on both
/// the Project and each Repository.
pub const STAMP: &str = "lastIssueScan";

/// The Project annotation that switches the operator's sweep off
/// (`SweepAnnotation`, `internal/controller/sweep.go:45`).
pub const SWEEP_ANNOTATION: &str = "tatara.dev/sweep";

/// The value of [`SWEEP_ANNOTATION`] that disables the sweep
/// (`SweepDisabledValue`, `internal/controller/sweep.go:50`).
pub const SWEEP_DISABLED: &str = "disabled";

/// Which object a decision is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Kind {
    Project,
    Repository,
}

impl Kind {
    /// The kind as kubectl names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Project => "Project",
            Kind::Repository => "Repository",
        }
    }
}

/// What to do about one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "decision")]
pub enum Decision {
    /// Clear these status fields (a merge patch of the status subresource);
    /// empty when the stamp is already unset. `was` is the stamp cleared.
    Trigger { clear: Vec<String>, was: Option<String>, why: String },
    /// The operator would not sweep this object whatever its stamp says.
    Refuse { cause: String, fix: String },
}

/// One object's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Line {
    pub kind: Kind,
    pub name: String,
    #[serde(flatten)]
    pub decision: Decision,
}

/// The decisions for `project` and its `repos`, Repositories first and the
/// Project last: the Project's status write wakes its reconcile at once
/// (`For(&Project{})` with no predicate, `project_controller.go:1018-1020`),
/// and a pass that ran before the Repository stamps were cleared would stamp
/// them all again with its own time (`projectscan.go:1726-1769`).
pub fn decide(project: &Project, repos: &[Repository]) -> Vec<Line> {
    let gate = project_gate(project);
    let mut lines: Vec<Line> = repos
        .iter()
        .map(|r| Line {
            kind: Kind::Repository,
            name: r.name().to_string(),
            decision: match (&gate, r.spec.project_ref == project.name()) {
                (Some(refusal), _) => refusal.clone(),
                // projectReposForScan lists by spec.projectRef (projectscan.go:398-410).
                (None, false) => Decision::Refuse {
                    cause: format!(
                        "Repository {} belongs to project {:?}, not {:?}: the operator sweeps it with its own project",
                        r.name(),
                        r.spec.project_ref,
                        project.name()
                    ),
                    fix: format!("run the sweep with --project {:?}", r.spec.project_ref),
                },
                (None, true) => clear(
                    stamp(r.status.as_ref()),
                    "its own stamp is the base of its issueScan slot (projectscan.go:144-149)".into(),
                ),
            },
        })
        .collect();
    lines.push(Line {
        kind: Kind::Project,
        name: project.name().to_string(),
        decision: gate.unwrap_or_else(|| {
            clear(
                stamp(project.status.as_ref()),
                "the base of every unstamped Repository's slot (projectscan.go:49-54), and the write wakes the Project's reconcile".into(),
            )
        }),
    });
    lines
}

/// The Trigger that clears `was`, or nothing when it is already unset.
fn clear(was: Option<String>, why: String) -> Decision {
    match was {
        Some(_) => {
            Decision::Trigger { clear: vec![format!("status.{STAMP}")], was, why: format!("clear the stamp: {why}") }
        }
        None => Decision::Trigger { clear: vec![], was, why: format!("no stamp to clear: {why}, and it is unset") },
    }
}

fn stamp(status: Option<&Extra>) -> Option<String> {
    status.and_then(|s| s.get(STAMP)).and_then(|v| v.as_str()).map(str::to_string)
}

/// Why the operator's scheduler would never sweep `project`, in the order
/// its reconcile checks: `runScans` returns before any scan without
/// `spec.scm.cron` (`projectscan.go:1567-1584`) and without the forge token
/// (:1651-1657, see [`secret_gate`]), the break-glass annotation
/// skips the sweep (:1674, `sweep.go:209-211`), and `reposDueForScan`
/// answers "not ok" for an empty or unparseable `issueScan` schedule
/// (:497-505, logged as "invalid issueScan cron, disabling" at :1772-1780).
fn project_gate(project: &Project) -> Option<Decision> {
    let name = project.name();
    let cron = project.spec.scm.extra.get("cron").filter(|c| !c.is_null());
    let Some(cron) = cron else {
        return Some(Decision::Refuse {
            cause: format!(
                "Project {name} has no spec.scm.cron: the operator runs none of its scans, the sweep included"
            ),
            fix: "set spec.scm.cron.issueScan.schedule to a 5-field cron (e.g. \"0 */4 * * *\")".into(),
        });
    };
    if let Some(refusal) = secret_gate(project) {
        return Some(refusal);
    }
    let annotation = project.metadata.annotations.as_ref().and_then(|a| a.get(SWEEP_ANNOTATION));
    if annotation.map(String::as_str) == Some(SWEEP_DISABLED) {
        return Some(Decision::Refuse {
            cause: format!(
                "Project {name} carries {SWEEP_ANNOTATION}: {SWEEP_DISABLED}, which switches the operator's sweep off"
            ),
            fix: format!(
                "remove the annotation (kubectl annotate project {name} {SWEEP_ANNOTATION}-) if the sweep should run"
            ),
        });
    }
    let schedule = cron.pointer("/issueScan/schedule").and_then(|s| s.as_str()).unwrap_or("");
    if schedule.is_empty() {
        return Some(Decision::Refuse {
            cause: format!("Project {name} has no spec.scm.cron.issueScan.schedule: the operator's sweep is disabled"),
            fix: "set spec.scm.cron.issueScan.schedule to a 5-field cron (e.g. \"0 */4 * * *\")".into(),
        });
    }
    if let Err(e) = parse_standard(schedule) {
        return Some(Decision::Refuse {
            cause: format!(
                "Project {name}'s spec.scm.cron.issueScan.schedule {schedule:?} does not parse ({e}): the operator disables the sweep"
            ),
            fix: "fix the schedule: minute hour day-of-month month day-of-week".into(),
        });
    }
    None
}

/// The Ready condition's reasons that say `scanReader` cannot get the scm
/// Secret (`validateSecret`, `project_controller.go:990-1001`; `scanReader`
/// gets the same Secret, `projectscan.go:365-376`). `SecretMissingKeys` is
/// not one: the reader needs only the token, and the webhook secret may be
/// the key that is missing.
const UNREADABLE_SECRET: [&str; 3] = ["SecretRefEmpty", "SecretNotFound", "SecretError"];

/// Refuses when the operator's last Ready condition says it could not read
/// the Project's scm Secret: `runScans` then returns before the sweep.
fn secret_gate(project: &Project) -> Option<Decision> {
    let conditions = project.status.as_ref()?.get("conditions")?.as_array()?;
    let ready = conditions.iter().find(|c| c.get("type").and_then(|t| t.as_str()) == Some("Ready"))?;
    let field = |k: &str| ready.get(k).and_then(|v| v.as_str()).unwrap_or("");
    if field("status") != "False" || !UNREADABLE_SECRET.contains(&field("reason")) {
        return None;
    }
    Some(Decision::Refuse {
        cause: format!(
            "Project {} is not Ready ({}: {}): the operator cannot read its scm Secret, so its sweep stops before listing the forge",
            project.name(),
            field("reason"),
            field("message")
        ),
        fix: "create the Secret spec.scmSecretRef names, with the keys token and webhookSecret".into(),
    })
}

/// Whether `schedule` is a cron robfig/cron's `ParseStandard` accepts, in
/// the shape the CRD admits (5 fields, `CronActivity.Schedule`,
/// `api/v1alpha1/project_types.go:640-643`): each field a comma list of
/// `*`, `?`, `N` or `N-M`, optionally `/STEP`, inside the field's bounds,
/// month and weekday also by name.
pub fn parse_standard(schedule: &str) -> Result<(), String> {
    const FIELDS: [(&str, u32, u32, &[&str]); 5] = [
        ("minute", 0, 59, &[]),
        ("hour", 0, 23, &[]),
        ("day of month", 1, 31, &[]),
        ("month", 1, 12, &["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]),
        ("day of week", 0, 6, &["sun", "mon", "tue", "wed", "thu", "fri", "sat"]),
    ];
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    if fields.len() != FIELDS.len() {
        return Err(format!("expected 5 fields, found {}", fields.len()));
    }
    for (text, (what, min, max, names)) in fields.iter().zip(FIELDS) {
        let number = |s: &str| -> Result<u32, String> {
            if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
                return Ok(i as u32 + min);
            }
            s.parse::<u32>().map_err(|_| format!("{what}: {s:?} is not a number"))
        };
        // robfig splits with FieldsFunc: empty list items are skipped.
        for part in text.split(',').filter(|p| !p.is_empty()) {
            let (range, step) = match part.split_once('/') {
                Some((r, s)) => (r, Some(s.parse::<u32>().map_err(|_| format!("{what}: bad step {s:?}"))?)),
                None => (part, None),
            };
            if step == Some(0) {
                return Err(format!("{what}: a step must be positive"));
            }
            let (lo, hi) = match range {
                "*" | "?" => (min, max),
                _ => match range.split_once('-') {
                    Some((a, b)) => (number(a)?, number(b)?),
                    None => {
                        let n = number(range)?;
                        (n, if step.is_some() { max } else { n })
                    }
                },
            };
            if lo < min || hi > max {
                return Err(format!("{what}: {part:?} is outside {min}-{max}"));
            }
            if lo > hi {
                return Err(format!("{what}: {part:?} begins after it ends"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
