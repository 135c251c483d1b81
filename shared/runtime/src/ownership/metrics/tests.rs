use super::*;
use rules::ownership::owners::{Owned, check};
use rules::ownership::sweep::{ForgeIssue, MintSource, plan_mints};
use rules::ownership::types::task_owner_ref;

fn oref(name: &str, controller: bool) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
    task_owner_ref(name, &format!("uid-{name}"), controller)
}
use rules::ownership::types::Project;

fn text(registry: &Registry) -> String {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
    out
}

fn fi(n: i64) -> ForgeIssue {
    ForgeIssue {
        repository_ref: "r".into(),
        number: n,
        state: "open".into(),
        author: "a".into(),
        url: String::new(),
        last_comment_human: false,
        labels: vec![],
    }
}

#[test]
fn the_spec_metric_names_are_exposed() {
    let mut registry = Registry::default();
    let m = OwnershipMetrics::register(&mut registry);
    m.record_findings(&check("iss", Owned::Artifact, &[oref("a", false)]));
    m.record_findings(&check("iss", Owned::Artifact, &[oref("a", true)]));
    let orphans: Vec<_> = (1..=7).map(|n| (MintSource::Issue(fi(n)), MintStage::ParkedBacklogSweep)).collect();
    m.record_sweep("tatara", &plan_mints(orphans, &Project::default(), 0));
    let out = text(&registry);
    assert!(out.contains("operator_orphan_no_controller_total 1"), "{out}");
    assert!(out.contains("operator_tasks_minted_per_sweep{project=\"tatara\",stage=\"parked\"} 5"), "{out}");
    assert!(out.contains("operator_tasks_minted_per_sweep{project=\"tatara\",stage=\"triaging\"} 0"), "{out}");
    assert!(
        out.contains("operator_sweep_mint_cap_hit_total{project=\"tatara\",cap=\"maxNewTasksPerSweep\"} 1"),
        "{out}"
    );
}
