//! Metrics: the ownership signals the spec names, in Prometheus text.
//! `operator_orphan_no_controller_total` (rule 5's guard, with an ERROR
//! log), `operator_tasks_minted_per_sweep{project,stage}` (every pass) and
//! `operator_sweep_mint_cap_hit_total{project,cap}` (with a WARN when a cap
//! binds).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use rules::ownership::owners::{Finding, Violation};
use rules::ownership::sweep::{MintPlan, MintStage};

type Labels = Vec<(String, String)>;

/// The ownership metrics, registered once.
#[derive(Debug, Clone, Default)]
pub struct OwnershipMetrics {
    pub orphan_no_controller: Counter,
    pub tasks_minted_per_sweep: Family<Labels, Gauge>,
    pub sweep_mint_cap_hit: Family<Labels, Counter>,
}

impl OwnershipMetrics {
    /// New metrics registered in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "operator_orphan_no_controller",
            "Artifacts found with owners but no controller owner (rule 5)",
            m.orphan_no_controller.clone(),
        );
        registry.register(
            "operator_tasks_minted_per_sweep",
            "Tasks minted by the last sweep pass, by stage",
            m.tasks_minted_per_sweep.clone(),
        );
        registry.register(
            "operator_sweep_mint_cap_hit",
            "Sweep passes in which a creation cap bound",
            m.sweep_mint_cap_hit.clone(),
        );
        m
    }

    /// Rule 5's reconcile guard: "detects the state, logs at ERROR,
    /// increments operator_orphan_no_controller_total".
    pub fn record_findings(&self, findings: &[Finding]) {
        for f in findings {
            if matches!(f.violation, Violation::OwnersButNoController { .. }) {
                tracing::error!(object = %f.object, why = %f.why, "artifact has owners but no controller owner");
                self.orphan_no_controller.inc();
            }
        }
    }

    /// "records operator_tasks_minted_per_sweep{project,stage} on every pass
    /// and operator_sweep_mint_cap_hit_total{project,cap} with a WARN when
    /// either cap binds".
    pub fn record_sweep(&self, project: &str, plan: &MintPlan) {
        for (stage, label) in [(MintStage::Triaging, "triaging"), (MintStage::ParkedBacklogSweep, "parked")] {
            let n = plan.mint.iter().filter(|(_, s)| *s == stage).count();
            self.tasks_minted_per_sweep
                .get_or_create(&vec![("project".into(), project.into()), ("stage".into(), label.into())])
                .set(n as i64);
        }
        for hit in &plan.cap_hits {
            tracing::warn!(project, cap = %hit.cap, why = %hit.why, deferred = plan.deferred.len(), "sweep mint cap bound");
            self.sweep_mint_cap_hit
                .get_or_create(&vec![("project".into(), project.into()), ("cap".into(), hit.cap.clone())])
                .inc();
        }
    }
}

#[cfg(test)]
mod tests;
