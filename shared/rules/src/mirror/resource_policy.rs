//! The types a wildcard never reaches, as gitops-reverser's default watch
//! policy has them (`internal/watch/resource_policy.go:14-31` at f0f7b42):
//! high-churn runtime state (Pods, Events, Endpoints, Leases, …) and the
//! output of controllers (ControllerRevisions, Jobs of CronJobs), which
//! would commit constantly and are never anyone's intent.
//!
//! Where the reference refuses these types outright, here a rule that names
//! one explicitly (`resources: ["leases"]`) still watches it: naming a type is
//! a deliberate choice, `*` is not.

/// `(group, resource)` of every type `resources: ["*"]` leaves out.
pub const DEFAULT_EXCLUDED: [(&str, &str); 11] = [
    ("", "pods"),
    ("", "events"),
    ("events.k8s.io", "events"),
    ("", "endpoints"),
    ("discovery.k8s.io", "endpointslices"),
    ("coordination.k8s.io", "leases"),
    ("apps", "controllerrevisions"),
    ("flowcontrol.apiserver.k8s.io", "flowschemas"),
    ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"),
    ("batch", "jobs"),
    ("batch", "cronjobs"),
];

/// Whether `resources: ["*"]` leaves this type out.
pub fn excluded_from_wildcard(group: &str, resource: &str) -> bool {
    DEFAULT_EXCLUDED.iter().any(|(g, r)| *g == group && *r == resource)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_list_is_excluded_and_nothing_else() {
        // resource_policy.go:16-26, entry by entry.
        for (g, r) in [
            ("", "pods"),
            ("", "events"),
            ("events.k8s.io", "events"),
            ("", "endpoints"),
            ("discovery.k8s.io", "endpointslices"),
            ("coordination.k8s.io", "leases"),
            ("apps", "controllerrevisions"),
            ("flowcontrol.apiserver.k8s.io", "flowschemas"),
            ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"),
            ("batch", "jobs"),
            ("batch", "cronjobs"),
        ] {
            assert!(excluded_from_wildcard(g, r), "{g}/{r}");
        }
        for (g, r) in [("", "configmaps"), ("apps", "deployments"), ("example.com", "pods"), ("", "leases")] {
            assert!(!excluded_from_wildcard(g, r), "{g}/{r}");
        }
    }
}
