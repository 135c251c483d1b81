//! The runtime edges of both specs: what applies the `rules` crate's
//! decisions to the world, and what waits on it. Transports (memory, Redis
//! Streams), the resolver with its waiters and clock, replay on a virtual
//! clock, the Git writer, the Kubernetes executor, the forge, the socket
//! API's generated types, metrics, telemetry and retry pacing.
//!
//! Each I/O edge is a cargo feature (`redis`, `git`, `grpc`, `kube`,
//! `forge`), so a binary compiles only the edges it uses.

pub mod attribution;
pub mod backoff;
pub mod cli;
mod error;
#[cfg(feature = "kube")]
pub mod kubeconfig;
pub mod metrics;
#[cfg(feature = "kube")]
pub mod mirror;
pub mod ownership;
#[cfg(feature = "grpc")]
pub mod proto;
pub mod redact;
pub mod shutdown;
#[cfg(feature = "kube")]
pub mod status;
pub mod telemetry;

pub use error::{Error, Result, error_chain};
