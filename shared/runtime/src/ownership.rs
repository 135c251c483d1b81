//! Ownership's runtime: the executor that applies the rules' decisions
//! (`rules::ownership`) to the Kubernetes API with resourceVersion
//! preconditions (feature `kube`), the forge it hands forge steps to
//! (GitHub through octocrab, feature `forge`), the tatara operator's REST API
//! (`operator`, feature `forge`), and the ownership metrics.

#[cfg(feature = "kube")]
pub mod executor;
#[cfg(feature = "forge")]
pub mod forge;
pub mod metrics;
#[cfg(feature = "forge")]
pub mod operator;

#[cfg(test)]
mod interleavings;
