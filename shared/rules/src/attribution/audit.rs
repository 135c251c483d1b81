//! The audit model (audit.k8s.io/v1 `Event`, `EventList`) and the publish
//! side: the accept gate, then the three publish gates, identity backfill
//! from the bodies, and the collection fact (spec §2, "The publish side").
//! One audit event in; zero or one fact out. Unknown fields are tolerated.
//!
//! A batch is decoded item by item: one event that cannot be decoded (a
//! wrong-typed field) is refused on its own and every other event is kept.
//! The request and response bodies are read for the few `metadata` fields
//! the rules use, skipping the rest without building it, so no nesting depth
//! in an object's spec refuses its event.

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

/// A webhook body decoded item by item: the events that decoded, and the
/// ones refused, each with why.
#[derive(Debug, Clone, Default)]
pub struct Decoded {
    pub events: Vec<Event>,
    pub refused: Vec<Refused>,
}

/// An item of an `EventList` that is no usable `Event`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Its position in `items`.
    pub index: usize,
    /// Its `auditID` when it carried a readable one, else empty.
    pub audit_id: String,
    /// Its verb and `objectRef.apiGroup`/`resource` when readable (metric labels).
    pub verb: String,
    pub group: String,
    pub resource: String,
    /// The decode error.
    pub error: String,
}

/// The parts of an object body (`requestObject`, `responseObject`) the
/// rules read: its `metadata` identity, and for a list the items' uids.
/// Everything else is skipped unparsed, and a body of another shape (a JSON
/// Patch is an array) reads as empty rather than refusing its event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Body {
    #[serde(default, deserialize_with = "map_or_default")]
    pub metadata: Meta,
    #[serde(default, deserialize_with = "list_or_none")]
    pub items: Option<Vec<Item>>,
}

/// One item of a list body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Item {
    #[serde(default, deserialize_with = "map_or_default")]
    pub metadata: Meta,
}

/// `metadata` of a body: the identity fields, strings or numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    #[serde(default, deserialize_with = "lenient_string")]
    pub name: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub namespace: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub uid: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub resource_version: String,
}

impl Body {
    /// `metadata.<field>` (`name`, `namespace`, `uid`, `resourceVersion`).
    pub fn meta(&self, field: &str) -> &str {
        match field {
            "name" => &self.metadata.name,
            "namespace" => &self.metadata.namespace,
            "uid" => &self.metadata.uid,
            "resourceVersion" => &self.metadata.resource_version,
            _ => "",
        }
    }
}

/// Reads a `T` from a JSON object; anything else (skipped unbuilt) is `None`.
struct MapOr<T>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for MapOr<T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Option<T>, A::Error> {
        T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Some)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Option<T>, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_none<E>(self) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Option<T>, E> {
        Ok(None)
    }
}

/// An object as `T`; `None` for any other shape.
fn map_or_none<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    d.deserialize_any(MapOr(std::marker::PhantomData))
}

/// An object as `T`; the default for any other shape.
fn map_or_default<'de, D: serde::Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Ok(map_or_none(d)?.unwrap_or_default())
}

/// An element of a list, read leniently.
struct Lenient<T>(T);

impl<'de, T: Deserialize<'de> + Default> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        map_or_default(d).map(Lenient)
    }
}

/// An array of objects as `T`s (other elements as defaults); `None` for any
/// other shape.
fn list_or_none<'de, D: serde::Deserializer<'de>, T: Deserialize<'de> + Default>(
    d: D,
) -> Result<Option<Vec<T>>, D::Error> {
    struct ListOr<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de> + Default> serde::de::Visitor<'de> for ListOr<T> {
        type Value = Option<Vec<T>>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(Lenient(item)) = seq.next_element::<Lenient<T>>()? {
                out.push(item);
            }
            Ok(Some(out))
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    d.deserialize_any(ListOr(std::marker::PhantomData))
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
    #[serde(default, deserialize_with = "map_or_none")]
    pub request_object: Option<Body>,
    #[serde(default, deserialize_with = "map_or_none")]
    pub response_object: Option<Body>,
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
/// numbers too; accept both, and null (and, so a stray shape never refuses
/// an event, anything else as empty).
fn lenient_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    d.deserialize_any(LenientString)
}

/// A string, a number (as written), or anything else as empty; containers
/// are skipped without being built.
struct LenientString;

impl<'de> serde::de::Visitor<'de> for LenientString {
    type Value = String;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string or a number")
    }
    fn visit_str<E>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }
    fn visit_string<E>(self, v: String) -> Result<String, E> {
        Ok(v)
    }
    fn visit_u64<E>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_i64<E>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_f64<E>(self, v: f64) -> Result<String, E> {
        Ok(serde_json::Number::from_f64(v).map(|n| n.to_string()).unwrap_or_default())
    }
    fn visit_bool<E>(self, _: bool) -> Result<String, E> {
        Ok(String::new())
    }
    fn visit_unit<E>(self) -> Result<String, E> {
        Ok(String::new())
    }
    fn visit_none<E>(self) -> Result<String, E> {
        Ok(String::new())
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<String, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(String::new())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<String, A::Error> {
        while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
        Ok(String::new())
    }
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
    metadata(obj, field).map(value_string).unwrap_or_default()
}

/// `metadata.<field>` of an object, as it is. (`Value::pointer` allocates
/// twice per step to unescape it; this is read once per object of every
/// list and event.)
pub fn metadata<'v>(obj: &'v Value, field: &str) -> Option<&'v Value> {
    obj.get("metadata")?.get(field)
}

impl EventList {
    /// Decodes a webhook body whole: every item must be an `Event`. The
    /// receiver uses [`EventList::decode`], which keeps the good items.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        let decoded = Self::decode(bytes)?;
        match decoded.refused.into_iter().next() {
            Some(r) => Err(Error::AuditItem { index: r.index, audit_id: r.audit_id, error: r.error }),
            None => Ok(EventList { items: decoded.events }),
        }
    }

    /// Decodes a webhook body item by item: an `EventList` (or a lone
    /// `Event`). An item that is no usable `Event` is refused on its own,
    /// with its auditID when readable; only a body that is neither an
    /// `EventList` nor an `Event` is an error.
    pub fn decode(bytes: &[u8]) -> Result<Decoded> {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| Error::AuditDecode(serde::de::Error::custom(format!("the body is not UTF-8: {e}"))))?;
        if !text.trim_start().starts_with('{') {
            return Err(Error::AuditDecode(serde::de::Error::custom("the body is not a JSON object")));
        }
        let top: Top<'_> = serde_json::from_str(text).map_err(Error::AuditDecode)?;
        let Some(items) = top.items.or_else(|| (top.kind.as_deref() == Some("EventList")).then(Vec::new)) else {
            // A lone Event: the whole body is the one item.
            let event: Event = serde_json::from_str(text).map_err(Error::AuditDecode)?;
            return Ok(Decoded { events: vec![event], refused: Vec::new() });
        };
        let mut out = Decoded { events: Vec::with_capacity(items.len()), refused: Vec::new() };
        for (index, raw) in items.into_iter().enumerate() {
            match serde_json::from_str::<Event>(raw.get()) {
                Ok(event) => out.events.push(event),
                Err(e) => {
                    let id: Identity = serde_json::from_str(raw.get()).unwrap_or_default();
                    out.refused.push(Refused {
                        index,
                        audit_id: id.audit_id,
                        verb: id.verb,
                        group: id.object_ref.api_group,
                        resource: id.object_ref.resource,
                        error: e.to_string(),
                    });
                }
            }
        }
        Ok(out)
    }
}

/// The top level of a webhook body: items kept raw, decoded one by one.
#[derive(Deserialize)]
struct Top<'a> {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default, borrow)]
    items: Option<Vec<&'a serde_json::value::RawValue>>,
}

/// What a refused item still tells about itself, read leniently.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Identity {
    #[serde(default, rename = "auditID", deserialize_with = "lenient_string")]
    audit_id: String,
    #[serde(default, deserialize_with = "lenient_string")]
    verb: String,
    #[serde(default, deserialize_with = "map_or_default")]
    object_ref: RefIdentity,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RefIdentity {
    #[serde(default, deserialize_with = "lenient_string")]
    api_group: String,
    #[serde(default, deserialize_with = "lenient_string")]
    resource: String,
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
    /// `responseStatus.code` outside 2xx: the request changed nothing (the
    /// reference refuses >= 300 only, so it made a fact of a 123 or a -1).
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
    if ev.response_status.as_ref().and_then(|s| s.code).is_some_and(|c| !(200..300).contains(&c)) {
        return Some(Rejection::Status);
    }
    if query_params(&ev.request_uri).any(|(k, v)| k == "dryRun" && v == "All") {
        return Some(Rejection::DryRun);
    }
    if !super::is_removal_verb(&ev.verb) {
        fn rv(o: &Option<Body>) -> &str {
            o.as_ref().map_or("", |o| o.metadata.resource_version.as_str())
        }
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
            .and_then(|o| o.items.as_ref())
            .map(|items| items.iter().map(|i| i.metadata.uid.clone()).filter(|u| !u.is_empty()).collect());
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
    let bodies: Vec<&Body> = if ev.verb == "delete" {
        [&ev.request_object, &ev.response_object].into_iter().flatten().collect()
    } else {
        [&ev.response_object, &ev.request_object].into_iter().flatten().collect()
    };
    let backfill = |have: &str, field: &str| -> String {
        if !have.is_empty() {
            return have.to_owned();
        }
        bodies.iter().map(|b| b.meta(field)).find(|v| !v.is_empty()).unwrap_or_default().to_owned()
    };
    fact.namespace = backfill(&oref.namespace, "namespace");
    fact.name = backfill(&oref.name, "name");
    fact.uid = backfill(&oref.uid, "uid");
    // resourceVersion: the response object's, else objectRef's.
    fact.resource_version = ev
        .response_object
        .as_ref()
        .map(|o| o.metadata.resource_version.clone())
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
