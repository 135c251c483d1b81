//! Attribution (`spec/attribution.md`): audit events become facts (publish
//! side), watch events find their fact in an index (join side), waiting up to
//! a grace window for facts that arrive late.

pub mod audit;
pub mod clock;
pub mod commit;
mod fact;
pub mod index;
pub mod intent;
pub mod render;
pub mod replay;
pub mod resolver;
mod scope;
pub mod selector;
pub mod transport;
pub mod waiters;
pub mod watch;
pub mod why;

pub use fact::{ActorKind, Fact, Tier, is_removal_verb};
pub use resolver::{Engine, EngineConfig, Resolution};
pub use scope::{DEFAULT_STREAM_PREFIX, GroupResource, Scope};
