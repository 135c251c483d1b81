//! Attribution (`spec/attribution.md`): audit events become facts (publish
//! side), watch events find their fact in an index (join side). This module
//! holds the decisions; the resolver that waits up to the grace for a fact
//! lives in the `runtime` crate.

pub mod audit;
pub mod commit;
mod fact;
pub mod grace;
pub mod index;
pub mod intent;
pub mod render;
pub mod replay;
pub mod route_binding;
pub mod sanitize;
mod scope;
pub mod selector;
pub mod watch;
pub mod why;

pub use fact::{ActorKind, Fact, Tier, is_removal_verb};
pub use scope::{DEFAULT_ROUTE, DEFAULT_STREAM_PREFIX, GroupResource, Scope, ScopeHasher};
