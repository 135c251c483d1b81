//! Every rule of the attribution and ownership specs, as pure functions over
//! plain data that return decisions. No I/O: the `runtime` crate and the
//! binaries apply these decisions to Redis, Git, the Kubernetes API and the
//! forge.
//!
//! - [`attribution`]: audit events become facts, watch events find their fact
//!   in an index within a grace window (`spec/attribution.md`).
//! - [`ownership`]: forge artifacts mirrored as CRs, owned by Tasks through
//!   owner references (`spec/ownership.md`).
//! - [`mirror`]: the GitTarget's watcher and the sidecar that authors for it
//!   (`spec/mirror.md`), configured by gitops-reverser's CRs.
//! - [`inject`]: add the sidecar to Kubernetes manifests and admission
//!   reviews (`kubectl reverser inject`, the injection webhook).

pub mod attribution;
mod error;
pub mod inject;
pub mod mirror;
pub mod ownership;

pub use error::{Error, Result};
