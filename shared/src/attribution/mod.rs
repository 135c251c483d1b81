//! Attribution (`spec/attribution.md`): audit events become facts (publish
//! side), watch events find their fact in an index (join side), waiting up to
//! a grace window for facts that arrive late.

pub mod commit;
mod fact;
pub mod render;
mod scope;
pub mod transport;

pub use fact::{ActorKind, Fact, Tier, is_removal_verb};
pub use scope::{DEFAULT_STREAM_PREFIX, GroupResource, Scope};
