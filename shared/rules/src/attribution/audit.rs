//! The audit model (audit.k8s.io/v1 `Event`, `EventList`) and the publish
//! side: the accept gate, then the three publish gates, identity backfill
//! from the bodies, and the collection fact (spec §2, "The publish side").
//! One audit event in; zero or one fact out. Unknown fields are tolerated.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::{Fact, GroupResource, Scope};
use crate::{Error, Result};

/// Past this many uids a collection fact carries no uid set at all
/// ("dropped past the 10000 cap"); the join falls back to scope.
pub const COLLECTION_UID_CAP: usize = 10_000;

/// `audit.k8s.io/v1` `EventList`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EventList {
    #[serde(default)]
    pub items: Vec<Event>,
}

/// `audit.k8s.io/v1` `Event`: the fields the rules read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    #[serde(default, rename = "auditID")]
    pub audit_id: String,
    #[serde(default)]
    pub stage: String,
    #[serde(default, rename = "requestURI")]
    pub request_uri: String,
    #[serde(default)]
    pub verb: String,
    #[serde(default)]
    pub user: UserInfo,
    #[serde(default)]
    pub impersonated_user: Option<UserInfo>,
    #[serde(default)]
    pub object_ref: Option<ObjectReference>,
    #[serde(default)]
    pub response_status: Option<ResponseStatus>,
    #[serde(default)]
    pub request_object: Option<Value>,
    #[serde(default)]
    pub response_object: Option<Value>,
    #[serde(default)]
    pub stage_timestamp: String,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub extra: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub api_group: String,
    #[serde(default)]
    pub api_version: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub resource_version: String,
    #[serde(default)]
    pub subresource: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResponseStatus {
    #[serde(default)]
    pub code: Option<i64>,
}

/// resourceVersion is a string on the wire, but captured records carry
/// numbers too; accept both, and null.
fn lenient_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(value_string(&Value::deserialize(d)?))
}

fn value_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// Reads `metadata.<field>` of a body as a string (numbers accepted).
pub fn meta_field(obj: &Value, field: &str) -> String {
    obj.get("metadata").and_then(|m| m.get(field)).map(value_string).unwrap_or_default()
}

impl EventList {
    /// Decodes a webhook body: an `EventList`, or a lone `Event`.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        let v: Value = serde_json::from_slice(bytes).map_err(Error::AuditDecode)?;
        if v.get("items").is_some() || v.get("kind").and_then(Value::as_str) == Some("EventList") {
            serde_json::from_value(v).map_err(Error::AuditDecode)
        } else {
            Ok(EventList { items: vec![serde_json::from_value(v).map_err(Error::AuditDecode)?] })
        }
    }
}

/// Why an audit event produced no fact. Every rejection is counted with one
/// of these, never silently dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rejection {
    // The accept gate (facts/attribution-wire.md).
    /// `stage` is not `ResponseComplete`.
    Stage,
    /// Not a mutation verb.
    Verb,
    /// `responseStatus.code` >= 300: the request changed nothing.
    Status,
    /// `dryRun=All`.
    DryRun,
    /// Request and response resourceVersion equal: a no-op write.
    NoOpWrite,
    /// A subresource other than `scale`: runtime state, not intent.
    Subresource,
    // The publish gates (spec §2), counted as `no_attribution_fact`.
    /// No objectRef with a resource.
    NoResource,
    /// No resolvable user.
    NoUser,
    /// A non-collection verb whose identity has no name.
    NoName,
}

impl Rejection {
    pub fn label(self) -> &'static str {
        match self {
            Rejection::Stage => "stage",
            Rejection::Verb => "verb",
            Rejection::Status => "status",
            Rejection::DryRun => "dry_run",
            Rejection::NoOpWrite => "no_op_write",
            Rejection::Subresource => "subresource",
            Rejection::NoResource => "no_resource",
            Rejection::NoUser => "no_user",
            Rejection::NoName => "no_name",
        }
    }

    /// `rejected` for the accept gate, `no_attribution_fact` for the publish gates.
    pub fn result(self) -> &'static str {
        match self {
            Rejection::NoResource | Rejection::NoUser | Rejection::NoName => "no_attribution_fact",
            _ => "rejected",
        }
    }
}

/// What the publish side made of one event. A short-lived return value, so
/// the size difference between variants costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Published {
    Fact {
        scope: Scope,
        fact: Fact,
        /// For a collection fact without a uid set: `uid_cap` or `no_uids`.
        without_uidset: Option<&'static str>,
    },
    Rejected(Rejection),
}

const MUTATIONS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

fn query_params(uri: &str) -> impl Iterator<Item = (String, String)> + '_ {
    let query = uri.split_once('?').map(|(_, q)| q).unwrap_or("");
    query.split('&').filter(|p| !p.is_empty()).map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let decode =
            |s: &str| percent_encoding::percent_decode_str(&s.replace('+', " ")).decode_utf8_lossy().into_owned();
        (decode(k), decode(v))
    })
}

/// The accept gate: `None` when the event is considered at all.
pub fn accept_gate(ev: &Event) -> Option<Rejection> {
    if ev.stage != "ResponseComplete" {
        return Some(Rejection::Stage);
    }
    if !MUTATIONS.contains(&ev.verb.as_str()) {
        return Some(Rejection::Verb);
    }
    if ev.response_status.as_ref().and_then(|s| s.code).is_some_and(|c| c >= 300) {
        return Some(Rejection::Status);
    }
    if query_params(&ev.request_uri).any(|(k, v)| k == "dryRun" && v == "All") {
        return Some(Rejection::DryRun);
    }
    if !super::is_removal_verb(&ev.verb) {
        let rv = |o: &Option<Value>| o.as_ref().map(|o| meta_field(o, "resourceVersion")).unwrap_or_default();
        let (req, resp) = (rv(&ev.request_object), rv(&ev.response_object));
        if !req.is_empty() && req == resp {
            return Some(Rejection::NoOpWrite);
        }
    }
    if let Some(r) = &ev.object_ref
        && !r.subresource.is_empty()
        && r.subresource != "scale"
    {
        return Some(Rejection::Subresource);
    }
    None
}

/// The effective user: `impersonatedUser` when present and non-empty, else `user`.
pub fn effective_user(ev: &Event) -> &UserInfo {
    match &ev.impersonated_user {
        Some(u) if !u.username.is_empty() => u,
        _ => &ev.user,
    }
}

fn first_extra(user: &UserInfo, key: &str) -> String {
    user.extra.get(key).and_then(|v| v.first()).cloned().unwrap_or_default()
}

/// The publish side for one event on `route`.
pub fn publish(route: &str, ev: &Event) -> Published {
    if let Some(r) = accept_gate(ev) {
        return Published::Rejected(r);
    }
    // Gate 1: no resource, no fact.
    let Some(oref) = ev.object_ref.as_ref().filter(|r| !r.resource.is_empty()) else {
        return Published::Rejected(Rejection::NoResource);
    };
    // Gate 3: no resolvable user, no fact.
    let user = effective_user(ev);
    if user.username.trim().is_empty() {
        return Published::Rejected(Rejection::NoUser);
    }
    let scope = Scope::new(route, GroupResource::new(&oref.api_group, &oref.resource));
    let mut fact = Fact {
        author: user.username.clone(),
        display_name: first_extra(user, "configbutler.ai/claims/display-name"),
        email: first_extra(user, "configbutler.ai/claims/email"),
        verb: ev.verb.clone(),
        audit_id: ev.audit_id.clone(),
        stage_timestamp: ev.stage_timestamp.clone(),
        namespace: oref.namespace.clone(),
        ..Fact::default()
    };

    if ev.verb == "deletecollection" {
        // A collection request names no object by nature: exempt from the
        // name gate; it drops uid, name and rv, keeps the selector and the
        // uid set the body named.
        fact.label_selector =
            query_params(&ev.request_uri).find(|(k, _)| k == "labelSelector").map(|(_, v)| v).unwrap_or_default();
        let uids: Option<Vec<String>> = ev
            .response_object
            .as_ref()
            .and_then(|o| o.get("items"))
            .and_then(Value::as_array)
            .map(|items| items.iter().map(|i| meta_field(i, "uid")).filter(|u| !u.is_empty()).collect());
        let without_uidset = match &uids {
            None => Some("no_uids"),
            Some(u) if u.len() > COLLECTION_UID_CAP => Some("uid_cap"),
            Some(_) => None,
        };
        fact.uids = if without_uidset.is_some() { None } else { uids };
        return Published::Fact { scope, fact, without_uidset };
    }

    // Identity: objectRef, then backfill what is missing from the bodies,
    // the request object first for a delete, the response object otherwise.
    let bodies: Vec<&Value> = if ev.verb == "delete" {
        [&ev.request_object, &ev.response_object].into_iter().flatten().collect()
    } else {
        [&ev.response_object, &ev.request_object].into_iter().flatten().collect()
    };
    let backfill = |have: &str, field: &str| -> String {
        if !have.is_empty() {
            return have.to_owned();
        }
        bodies.iter().map(|b| meta_field(b, field)).find(|v| !v.is_empty()).unwrap_or_default()
    };
    fact.namespace = backfill(&oref.namespace, "namespace");
    fact.name = backfill(&oref.name, "name");
    fact.uid = backfill(&oref.uid, "uid");
    // resourceVersion: the response object's, else objectRef's.
    fact.resource_version = ev
        .response_object
        .as_ref()
        .map(|o| meta_field(o, "resourceVersion"))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| oref.resource_version.clone());

    // Gate 2: no resolvable name on a non-collection verb, no fact.
    if fact.name.is_empty() {
        return Published::Rejected(Rejection::NoName);
    }
    Published::Fact { scope, fact, without_uidset: None }
}

#[cfg(test)]
mod tests;
