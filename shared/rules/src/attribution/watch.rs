//! Watch events as the API server streams them, and what the join side
//! reads of them: the object's identity, labels, and whether it is a removal.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::audit::meta_field;
use super::index::Query;
use super::index::order::stage_time_us;

/// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum WatchKind {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

impl WatchKind {
    /// The kind a watch event's `type` names (`ADDED`, ...).
    pub fn from_type(t: &str) -> Option<Self> {
        Some(match t {
            "ADDED" => WatchKind::Added,
            "MODIFIED" => WatchKind::Modified,
            "DELETED" => WatchKind::Deleted,
            "BOOKMARK" => WatchKind::Bookmark,
            "ERROR" => WatchKind::Error,
            _ => return None,
        })
    }

    /// BOOKMARK and ERROR carry no change.
    pub fn is_change(self) -> bool {
        !matches!(self, WatchKind::Bookmark | WatchKind::Error)
    }
}

/// One watch event: `{"type": ..., "object": {...}}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WatchEvent {
    #[serde(rename = "type")]
    pub kind: WatchKind,
    #[serde(default)]
    pub object: Value,
}

impl WatchEvent {
    /// Why this event's object cannot be attributed, if it cannot: a change
    /// (ADDED, MODIFIED, DELETED) carries an object with `metadata` naming it
    /// by a name or a uid. Anything else (`null`, `123`, `[]`, `{}`) names no
    /// object, and waiting a grace for its fact could only end `absent`.
    pub fn unusable(&self) -> Option<&'static str> {
        if !self.is_change() {
            return None;
        }
        let Some(object) = self.object.as_object() else {
            return Some("the object is not a JSON object");
        };
        let Some(meta) = object.get("metadata").and_then(Value::as_object) else {
            return Some("the object has no metadata");
        };
        let named = |f: &str| meta.get(f).and_then(Value::as_str).is_some_and(|s| !s.is_empty());
        if !named("name") && !named("uid") {
            return Some("the object's metadata has neither a name nor a uid");
        }
        None
    }

    /// BOOKMARK and ERROR carry no change.
    pub fn is_change(&self) -> bool {
        self.kind.is_change()
    }

    /// A DELETED event, or an object carrying deletionTimestamp: logically
    /// absent from the intent tree (spec §1).
    pub fn is_removal(&self) -> bool {
        self.kind == WatchKind::Deleted
            || self.object.get("metadata").and_then(|m| m.get("deletionTimestamp")).is_some_and(|v| !v.is_null())
    }

    /// What the join side reads of the object.
    pub fn meta(&self) -> ObjectMeta {
        ObjectMeta::of(&self.object)
    }
}

/// What the join side reads of a watched object: its identity, its labels
/// (for a collection's selector) and whether it carries deletionTimestamp.
/// Nothing else of the object decides an author.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectMeta {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub resource_version: String,
    pub labels: BTreeMap<String, String>,
    /// `metadata.deletionTimestamp` is set (not null).
    pub deleting: bool,
    /// `metadata.creationTimestamp` as sent (RFC 3339, second precision).
    pub creation_timestamp: String,
}

/// `metadata` as [`ObjectMeta::parse`] reads it: string fields only, every
/// other field skipped unparsed (`managedFields` alone can be kilobytes).
#[derive(Default)]
struct StrictMeta(ObjectMeta);

/// The top level as [`ObjectMeta::parse`] reads it: `metadata` only.
struct StrictObject(Option<StrictMeta>);

/// Both visitors take a JSON object only (a derived `Deserialize` would take
/// an array too, which [`ObjectMeta::of`] reads as empty) and refuse a
/// repeated field (which `of` reads as its last value): such input, and any
/// non-string value, takes the whole parse instead.
fn repeated<E: serde::de::Error>(seen: &mut u8, bit: u8) -> Result<(), E> {
    if *seen & bit != 0 {
        return Err(E::custom("repeated field"));
    }
    *seen |= bit;
    Ok(())
}

impl<'de> Deserialize<'de> for StrictMeta {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = StrictMeta;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object's metadata")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<StrictMeta, A::Error> {
                let (mut m, mut seen) = (ObjectMeta::default(), 0u8);
                while let Some(key) = map.next_key::<&'de str>()? {
                    let text = match key {
                        "uid" => Some((1, &mut m.uid)),
                        "namespace" => Some((2, &mut m.namespace)),
                        "name" => Some((4, &mut m.name)),
                        "resourceVersion" => Some((8, &mut m.resource_version)),
                        "creationTimestamp" => Some((64, &mut m.creation_timestamp)),
                        _ => None,
                    };
                    if let Some((bit, slot)) = text {
                        repeated(&mut seen, bit)?;
                        *slot = map.next_value::<Option<String>>()?.unwrap_or_default();
                    } else if key == "labels" {
                        repeated(&mut seen, 16)?;
                        m.labels = map.next_value::<Option<BTreeMap<String, String>>>()?.unwrap_or_default();
                    } else if key == "deletionTimestamp" {
                        repeated(&mut seen, 32)?;
                        m.deleting = map.next_value::<Option<serde::de::IgnoredAny>>()?.is_some();
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(StrictMeta(m))
            }
        }
        d.deserialize_map(V)
    }
}

impl<'de> Deserialize<'de> for StrictObject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = StrictObject;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a watched object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<StrictObject, A::Error> {
                let (mut meta, mut seen) = (None, 0u8);
                while let Some(key) = map.next_key::<&'de str>()? {
                    if key == "metadata" {
                        repeated(&mut seen, 1)?;
                        meta = map.next_value::<Option<StrictMeta>>()?;
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(StrictObject(meta))
            }
        }
        d.deserialize_map(V)
    }
}

impl ObjectMeta {
    /// Reads `object` the way every rule of the join side always has: a
    /// string or number field is read as its text, anything else as empty;
    /// only string labels count.
    pub fn of(object: &Value) -> Self {
        Self {
            uid: meta_field(object, "uid"),
            namespace: meta_field(object, "namespace"),
            name: meta_field(object, "name"),
            resource_version: meta_field(object, "resourceVersion"),
            labels: object
                .get("metadata")
                .and_then(|m| m.get("labels"))
                .and_then(Value::as_object)
                .map(|l| l.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
                .unwrap_or_default(),
            deleting: super::audit::metadata(object, "deletionTimestamp").is_some_and(|v| !v.is_null()),
            creation_timestamp: meta_field(object, "creationTimestamp"),
        }
    }

    /// The metadata of a watched object's JSON, parsed without building the
    /// object: what [`ObjectMeta::of`] would read of it, whenever the object
    /// takes the shape every API server sends (a JSON object whose
    /// `metadata` is an object of string fields and string labels). `None`
    /// for any other shape, which the caller then parses whole: anything this
    /// reads, [`ObjectMeta::of`] reads the same.
    pub fn parse(json: &[u8]) -> Option<Self> {
        serde_json::from_slice::<StrictObject>(json).ok()?.0.map(|m| m.0)
    }

    /// Names an object: a name or a uid (what a change must carry to be
    /// attributed at all; see [`WatchEvent::unusable`]).
    pub fn names_an_object(&self) -> bool {
        !self.name.is_empty() || !self.uid.is_empty()
    }

    /// A DELETED event, or an object carrying deletionTimestamp (spec §1).
    pub fn is_removal(&self, kind: WatchKind) -> bool {
        kind == WatchKind::Deleted || self.deleting
    }

    /// The index query for this object, observed at `observed_at_ms`.
    pub fn query(self, removal: bool, observed_at_ms: u64) -> Query {
        Query {
            uid: self.uid,
            resource_version: self.resource_version,
            namespace: self.namespace,
            name: self.name,
            labels: self.labels,
            removal,
            observed_at_ms,
            created_at_us: stage_time_us(&self.creation_timestamp),
            written_at_us: None,
            previous: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn an_api_server_object_takes_the_fast_parse() {
        let object = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "web", "namespace": "shop", "uid": "0f8e2c1a-3b4d-4e5f-8a9b-0c1d2e3f4a5b",
                "resourceVersion": "184467", "labels": {"app": "web", "tier": "front"},
                "deletionTimestamp": "2026-06-25T12:00:00Z",
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:data": {"f:a": {}}}}],
                "annotations": {"a": "b"}, "creationTimestamp": "2026-06-25T11:00:00Z"
            },
            "data": {"a": "x".repeat(4096)}
        });
        let bytes = serde_json::to_vec(&object).unwrap();
        let meta = ObjectMeta::parse(&bytes).expect("the shape every API server sends");
        assert_eq!(meta, ObjectMeta::of(&object));
        assert!(meta.deleting && meta.names_an_object());
        assert_eq!(meta.labels.len(), 2);
        // Escaped strings are read, not refused.
        let escaped = br#"{"metadata":{"name":"a\u0041\n","uid":""}}"#;
        assert_eq!(ObjectMeta::parse(escaped).unwrap().name, "aA\n");
    }

    #[test]
    fn shapes_the_fast_parse_does_not_read_take_the_whole_parse() {
        for json in [
            r#"[{"uid":"u"}]"#,
            r#"{"metadata":["u","ns","n"]}"#,
            r#"{"metadata":{"uid":7}}"#,
            r#"{"metadata":{"labels":{"a":1}}}"#,
            r#"{"metadata":{"name":"a","name":"b"}}"#,
            r#"{"metadata":{"name":"a"},"metadata":{"name":"b"}}"#,
            r#"{"metadata":null}"#,
            r#"{}"#,
            "",
        ] {
            assert_eq!(ObjectMeta::parse(json.as_bytes()), None, "{json}");
        }
    }

    /// A JSON value as text, with the shapes metadata fields take in the
    /// wild and the ones they must not be mistaken for.
    fn value(depth: u32) -> BoxedStrategy<String> {
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            (-5i64..1000).prop_map(|n| n.to_string()),
            Just("1.5".to_owned()),
            "[a-z0-9:-]{0,8}".prop_map(|s| format!("\"{s}\"")),
            Just(r#""e\u0073c\"aped""#.to_owned()),
        ];
        if depth == 0 {
            return leaf.boxed();
        }
        prop_oneof![
            3 => leaf,
            1 => prop::collection::vec(value(depth - 1), 0..3).prop_map(|v| format!("[{}]", v.join(","))),
            2 => object(&["app", "tier", "a\\u0062"], depth - 1),
        ]
        .boxed()
    }

    fn object(keys: &'static [&'static str], depth: u32) -> BoxedStrategy<String> {
        prop::collection::vec((prop::sample::select(keys), value(depth)), 0..6)
            .prop_map(|fields| {
                let fields: Vec<String> = fields.into_iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", fields.join(","))
            })
            .boxed()
    }

    const META: &[&str] = &[
        "uid",
        "name",
        "namespace",
        "resourceVersion",
        "labels",
        "deletionTimestamp",
        "creationTimestamp",
        "managedFields",
        "nam\\u0065",
    ];

    fn watched_object() -> impl Strategy<Value = String> {
        let metadata = prop_oneof![
            4 => prop::collection::vec((prop::sample::select(META), value(2)), 0..8).prop_map(|fields| {
                let fields: Vec<String> = fields.into_iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", fields.join(","))
            }),
            1 => value(2),
        ];
        (prop::collection::vec((prop::sample::select(&["metadata", "data", "kind"][..]), metadata), 0..3), value(1))
            .prop_map(|(fields, other)| {
                if fields.is_empty() {
                    return other;
                }
                let fields: Vec<String> = fields.into_iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", fields.join(","))
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]
        /// Whatever the fast parse reads, the whole parse reads the same.
        #[test]
        fn the_fast_parse_reads_what_the_whole_parse_reads(json in watched_object()) {
            if let Some(meta) = ObjectMeta::parse(json.as_bytes()) {
                let value: Value = serde_json::from_str(&json).expect("the fast parse read valid JSON");
                prop_assert_eq!(meta, ObjectMeta::of(&value));
            }
        }
    }
}
