//! Ownership's runtime: the executor that applies the rules' decisions
//! (`rules::ownership`) to the Kubernetes API with resourceVersion
//! preconditions (feature `kube`), the forge it hands forge steps to
//! (GitHub through octocrab, feature `forge`), and the ownership metrics.

#[cfg(feature = "kube")]
pub mod executor;
#[cfg(feature = "forge")]
pub mod forge;
pub mod metrics;

#[cfg(test)]
mod interleavings;
