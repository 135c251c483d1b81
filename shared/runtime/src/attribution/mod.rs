//! Attribution's runtime: the resolver that waits up to the grace for a fact
//! ([`Engine`]), the waiter registry, the clock it waits on, the one
//! intent-then-resolve sequence every caller uses ([`Attributor`]), replay
//! on a virtual clock, the fact transports and Git authoring.

mod attribute;
pub mod clock;
#[cfg(feature = "git")]
pub mod commit;
pub mod replay;
pub mod resolver;
pub mod transport;
pub mod waiters;
#[cfg(feature = "git")]
pub mod why;

pub use attribute::{Attributed, Attributor};
pub use resolver::{Engine, EngineConfig, Resolution};
