//! Fake API: an in-memory Kubernetes API server speaking the real wire
//! format over HTTP for any registered resource type: the built-ins
//! (core/v1 configmaps, secrets, namespaces, pods, services and more;
//! apps/v1, batch/v1 and the other groups the chart produces:
//! [`Registry::builtin`]) and every CRD loaded from a directory (the vendored
//! tatara.dev and configbutler.ai CRDs by default), writes checked against
//! the CRD schema.
//!
//! What it keeps of the API server ([`Store`] for the data, [`serve`] for
//! HTTP):
//! - discovery (`/api`, `/api/v1`, `/apis`, `/apis/<group>[/<version>]`),
//!   with an aggregated API that is down ([`FakeApi::unavailable_group`]);
//! - GET, LIST (one or all namespaces, label and field selectors, `limit`
//!   and `continue` paging over a consistent snapshot, in etcd's key order
//!   `<namespace>/<name>`), POST (with
//!   `generateName`), PUT (resourceVersion precondition: 409), merge and
//!   JSON PATCH, DELETE (preconditions, finalizers: marked, then deleted
//!   when the last finalizer goes), DELETE of a collection, `dryRun=All`;
//! - WATCH: newline-delimited events in a chunked response, resumable from
//!   any resourceVersion still in the event log, `410 Expired` (an ERROR
//!   event) once compacted away, BOOKMARKs, `sendInitialEvents`,
//!   `timeoutSeconds`; one global resourceVersion across all types;
//! - resourceVersion bumped on every write (a no-op write changes nothing),
//!   422 for two controller owner references and for schema violations
//!   (after pruning and defaulting), 413 past etcd's object limit, the
//!   status subresource split, a synchronous garbage collector;
//! - `fieldValidation` on every create, update and patch (`Strict`: 400,
//!   or 422 for a patch; `Warn`, the default: dropped with a `Warning`
//!   header each; `Ignore`: dropped), unknown fields being those the type
//!   does not declare: a built-in's k8s-openapi type, a CRD's schema,
//!   `ObjectMeta` ([`FieldValidation`]); server-side apply refuses them;
//! - timestamps from the wall clock at second resolution;
//! - `Status` bodies as the API server words them (404, 409, 403, 410 ...);
//! - test hooks: seeds, writes as a user, injected faults and 403s, a
//!   paused server, dropped watches, compaction, the pod proxy.
//!
//! `testkit fake-api` runs the same server as a process.

mod apply;
mod error;
mod fields;
mod protobuf;
mod registry;
mod schema;
mod select;
mod server;
mod store;
mod table;
mod tatara;
mod watch;

pub use error::ApiError;
pub use fields::FieldValidation;
pub use registry::{ALL_VERBS, Registry, ResourceType, Subresource, documents};
pub use schema::{default_and_prune, validate_schema};
pub use select::{Continue, LabelReq, ListOptions, Selectors, query_pairs};
pub use server::{
    Authorization, DEFAULT_BOOKMARK_INTERVAL, FakeApi, Fault, Forbidden, Request, kubeconfig, serve, serve_on, spawn,
};
pub use store::{
    AsUser, DEFAULT_EVENT_WINDOW, DEFAULT_USER, DeleteOptions, ETCD_OBJECT_LIMIT, Event, EventType, GC_USER, Store,
    Write, merge_patch,
};
pub use tatara::seed_world;
pub use watch::{WatchFilter, bookmark, watch_event};

#[cfg(test)]
mod tests;
