//! The sidecar's Unix-socket API (`reverser.v1`), generated from
//! `proto/reverser/v1/reverser.proto`, and conversions from the engine's types.

#![allow(clippy::all, missing_docs, rust_2018_idioms)]

tonic::include_proto!("reverser.v1");

use crate::attribution::index::StoredFact;

impl From<&StoredFact> for Fact {
    fn from(s: &StoredFact) -> Self {
        let f = &s.fact;
        Fact {
            author: f.author.clone(),
            namespace: f.namespace.clone(),
            name: f.name.clone(),
            uid: f.uid.clone(),
            resource_version: f.resource_version.clone(),
            display_name: f.display_name.clone(),
            email: f.email.clone(),
            verb: f.verb.clone(),
            audit_id: f.audit_id.clone(),
            stage_timestamp: f.stage_timestamp.clone(),
            label_selector: f.label_selector.clone(),
            uids: f.uids.clone().unwrap_or_default(),
            has_uids: f.uids.is_some(),
            appended_at_ms: s.at_ms,
        }
    }
}
