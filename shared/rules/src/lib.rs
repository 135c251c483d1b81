//! Every rule of the attribution and ownership specs, as plain data and pure
//! decisions; the binaries (`reverser-sidecar`, `kubectl-reverser`,
//! `kubectl-tatara`) are thin executors over this crate.
//!
//! - [`attribution`]: audit events become facts, watch events find their fact
//!   in an index within a grace window (`spec/attribution.md`).
//! - [`ownership`]: forge artifacts mirrored as CRs, owned by Tasks through
//!   owner references (`spec/ownership.md`).
//! - [`inject`]: add the sidecar to Kubernetes manifests and admission
//!   reviews (issue 9's `kubectl reverser inject`).

pub mod attribution;
mod error;
pub mod inject;
pub mod metrics;
pub mod ownership;
pub mod proto;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;

pub use error::{Error, Result};
