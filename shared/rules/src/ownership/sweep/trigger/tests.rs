use serde_json::json;

use super::*;

/// A Project the operator sweeps: an issueScan cron, both stamps set.
fn project() -> Project {
    let mut p = Project::new("proj");
    p.spec.scm.extra.insert("cron".into(), json!({"issueScan": {"schedule": "0 */4 * * *"}}));
    p.status = Some(json!({"lastIssueScan": "2026-12-04T04:00:00Z"}).as_object().unwrap().clone());
    p
}

fn repo(name: &str, project: &str, stamp: Option<&str>) -> Repository {
    let mut r = Repository::new(name);
    r.spec.project_ref = project.into();
    if let Some(s) = stamp {
        r.status = Some(json!({"lastIssueScan": s}).as_object().unwrap().clone());
    }
    r
}

fn refusal(line: &Line) -> &str {
    match &line.decision {
        Decision::Refuse { cause, .. } => cause,
        d => panic!("{} {} is not refused: {d:?}", line.kind.as_str(), line.name),
    }
}

#[test]
fn clears_every_repository_stamp_then_the_projects() {
    // repoIssueScanBase falls back to the Project's stamp, dueBase to the
    // creation timestamp (projectscan.go:144-149, :49-54): both must go.
    let lines = decide(&project(), &[repo("a", "proj", Some("2026-12-04T05:00:00Z")), repo("b", "proj", None)]);
    let order: Vec<(Kind, &str)> = lines.iter().map(|l| (l.kind, l.name.as_str())).collect();
    assert_eq!(order, [(Kind::Repository, "a"), (Kind::Repository, "b"), (Kind::Project, "proj")]);
    match &lines[0].decision {
        Decision::Trigger { clear, was, .. } => {
            assert_eq!(clear, &["status.lastIssueScan"]);
            assert_eq!(was.as_deref(), Some("2026-12-04T05:00:00Z"));
        }
        d => panic!("{d:?}"),
    }
    // An unstamped Repository has nothing to clear, and is no refusal.
    assert!(matches!(&lines[1].decision, Decision::Trigger { clear, was: None, .. } if clear.is_empty()));
    assert!(matches!(&lines[2].decision, Decision::Trigger { clear, .. } if clear == &["status.lastIssueScan"]));
}

#[test]
fn no_cron_means_no_scan_at_all() {
    // runScans returns before every scan without spec.scm.cron (projectscan.go:1567-1584).
    let mut p = project();
    p.spec.scm.extra.remove("cron");
    let lines = decide(&p, &[repo("a", "proj", Some("2026-12-04T05:00:00Z"))]);
    assert!(lines.iter().all(|l| refusal(l).contains("no spec.scm.cron")), "{lines:?}");
    p.spec.scm.extra.insert("cron".into(), serde_json::Value::Null);
    assert!(refusal(&decide(&p, &[])[0]).contains("no spec.scm.cron"));
}

#[test]
fn the_break_glass_annotation_switches_the_sweep_off() {
    // SweepEnabled (sweep.go:209-211), checked by runScans (projectscan.go:1674).
    let mut p = project();
    p.metadata.annotations = Some([(SWEEP_ANNOTATION.to_string(), SWEEP_DISABLED.to_string())].into());
    let lines = decide(&p, &[repo("a", "proj", None)]);
    assert!(lines.iter().all(|l| refusal(l).contains("tatara.dev/sweep: disabled")), "{lines:?}");
    match &lines[1].decision {
        Decision::Refuse { fix, .. } => {
            assert!(fix.contains("kubectl annotate project proj tatara.dev/sweep-"), "{fix}")
        }
        d => panic!("{d:?}"),
    }
    // Any other value leaves it on: the sweep is on by default.
    p.metadata.annotations = Some([(SWEEP_ANNOTATION.to_string(), "enabled".to_string())].into());
    assert!(matches!(decide(&p, &[])[0].decision, Decision::Trigger { .. }));
}

#[test]
fn an_empty_or_unparseable_issue_scan_schedule_disables_the_sweep() {
    // reposDueForScan answers !ok for both (projectscan.go:497-505).
    let mut p = project();
    p.spec.scm.extra.insert("cron".into(), json!({"refine": {"schedule": "0 1 * * *"}}));
    assert!(refusal(&decide(&p, &[])[0]).contains("no spec.scm.cron.issueScan.schedule"));
    p.spec.scm.extra.insert("cron".into(), json!({"issueScan": {"schedule": "61 * * * *"}}));
    let cause = refusal(&decide(&p, &[])[0]).to_string();
    assert!(cause.contains("\"61 * * * *\" does not parse (minute: \"61\" is outside 0-59)"), "{cause}");
}

#[test]
fn a_repository_of_another_project_is_not_this_sweeps() {
    // projectReposForScan lists by spec.projectRef (projectscan.go:398-410).
    let lines = decide(&project(), &[repo("other", "elsewhere", Some("2026-12-04T05:00:00Z"))]);
    assert!(refusal(&lines[0]).contains("belongs to project \"elsewhere\""));
    assert!(matches!(lines[1].decision, Decision::Trigger { .. }));
}

#[test]
fn parse_standard_accepts_what_robfig_accepts() {
    for ok in
        ["0 */4 * * *", "*/15 9-17 * * mon-fri", "0 0 1,15 jan,JUL ?", "5/10 * * * 0", "0 3 * * 6", "1,,2 * * * *"]
    {
        assert_eq!(parse_standard(ok), Ok(()), "{ok}");
    }
    for (bad, why) in [
        ("0 */4 * *", "expected 5 fields"),
        ("0 0 0 * *", "day of month: \"0\" is outside 1-31"),
        ("0 24 * * *", "hour: \"24\" is outside 0-23"),
        ("0 0 * 13 *", "month: \"13\" is outside 1-12"),
        ("0 0 * * 7", "day of week: \"7\" is outside 0-6"),
        ("*/0 * * * *", "a step must be positive"),
        ("5-1 * * * *", "begins after it ends"),
        ("x * * * *", "minute: \"x\" is not a number"),
        ("@hourly", "expected 5 fields"),
    ] {
        let e = parse_standard(bad).unwrap_err();
        assert!(e.contains(why), "{bad}: {e}");
    }
}

#[test]
fn an_unreadable_scm_secret_stops_the_scan_before_the_sweep() {
    // validateSecret's reasons for a Secret scanReader cannot get either
    // (project_controller.go:990-1001, projectscan.go:365-376, :1651-1657).
    let mut p = project();
    let ready = |reason: &str, status: &str| {
        json!({"lastIssueScan": "2026-12-04T04:00:00Z", "conditions": [
            {"type": "Ready", "status": status, "reason": reason, "message": "secret \"tatara-scm\" not found"}]})
        .as_object()
        .unwrap()
        .clone()
    };
    p.status = Some(ready("SecretNotFound", "False"));
    let cause = refusal(&decide(&p, &[])[0]).to_string();
    assert!(cause.contains("not Ready (SecretNotFound: secret \"tatara-scm\" not found)"), "{cause}");
    // A missing webhookSecret key leaves the reader its token; Ready=True is ready.
    for (reason, status) in [("SecretMissingKeys", "False"), ("Validated", "True")] {
        p.status = Some(ready(reason, status));
        assert!(matches!(decide(&p, &[])[0].decision, Decision::Trigger { .. }), "{reason}");
    }
}
