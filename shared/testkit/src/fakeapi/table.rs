//! Table output (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`,
//! what `kubectl get` asks for) for custom resources, as
//! apiextensions-apiserver's `tableconvertor` builds it from the CRD's
//! `additionalPrinterColumns`: a Name column first, then each printer
//! column (`Age` from `.metadata.creationTimestamp` when the CRD has none);
//! a JSONPath with no result is a `null` cell; `date` cells are the
//! apimachinery `HumanDuration` since the time; rows carry the object as
//! `PartialObjectMetadata` unless `includeObject=Object` or `None`.
//! Built-in types answer as before (kubectl prints them its own way).

use jsonpath_rust::JsonPath;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::registry::ResourceType;

/// Whether the Accept header asks for a Table first.
pub(crate) fn wants_table(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        let params: Vec<&str> = first.split(';').map(str::trim).collect();
        params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io")
    })
}

/// The columns of `t` (`None` when it is not a CRD).
fn columns(t: &ResourceType) -> Option<Vec<Value>> {
    let mut cols = t.printer_columns.clone()?;
    if cols.is_empty() {
        cols.push(json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}));
    }
    Some(cols)
}

/// `k8s.io/apimachinery/pkg/util/duration.HumanDuration`.
pub(crate) fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 { format!("{m}m") } else { format!("{m}m{}s", s % 60) }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 { format!("{h}h") } else { format!("{h}h{}m", m % 60) }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 { format!("{d}d") } else { format!("{d}d{}h", h % 24) }
    } else if h < 24 * 365 * 2 {
        format!("{d}d")
    } else if h < 24 * 365 * 8 {
        let y = d / 365;
        if d % 365 == 0 { format!("{y}y") } else { format!("{y}y{}d", d % 365) }
    } else {
        format!("{}y", d / 365)
    }
}

fn cell(col: &Value, obj: &Value, now: Timestamp) -> Value {
    let path = col.get("jsonPath").and_then(Value::as_str).unwrap_or_default();
    let results = obj.query(&format!("${path}")).unwrap_or_default();
    let Some(first) = results.first() else { return Value::Null };
    match col.get("type").and_then(Value::as_str).unwrap_or("string") {
        "date" => match first.as_str().and_then(|s| s.parse::<Timestamp>().ok()) {
            Some(t) => json!(human_duration(now.duration_since(t).as_secs())),
            None => Value::Null,
        },
        "string" => {
            let text: Vec<String> = results
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            json!(text.join(","))
        }
        _ => (*first).clone(),
    }
}

/// `objs` (already presented) as a Table; `None` when `t` is not a CRD.
pub(crate) fn table(t: &ResourceType, objs: &[Value], list_meta: Value, query: &str, now: Timestamp) -> Option<Value> {
    let cols = columns(t)?;
    let include = super::select::query_pairs(query)
        .into_iter()
        .find(|(k, _)| k == "includeObject")
        .map(|(_, v)| v)
        .unwrap_or_else(|| "PartialObjectMetadata".into());
    let mut defs = vec![json!({
        "name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Name must be unique within a namespace."
    })];
    for c in &cols {
        defs.push(json!({
            "name": c.get("name").cloned().unwrap_or(json!("")),
            "type": c.get("type").cloned().unwrap_or(json!("string")),
            "format": c.get("format").cloned().unwrap_or(json!("")),
            "description": c.get("description").cloned().unwrap_or(json!("")),
            "priority": c.get("priority").cloned().unwrap_or(json!(0)),
        }));
    }
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| {
            let mut cells = vec![o.pointer("/metadata/name").cloned().unwrap_or(Value::Null)];
            cells.extend(cols.iter().map(|c| cell(c, o, now)));
            let mut row = json!({"cells": cells});
            match include.as_str() {
                "None" => {}
                "Object" => row["object"] = o.clone(),
                _ => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                        "metadata": o.get("metadata").cloned().unwrap_or(json!({}))
                    })
                }
            }
            row
        })
        .collect();
    Some(json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
        "columnDefinitions": defs, "rows": rows
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_apimachinery() {
        for (s, want) in [
            (5, "5s"),
            (119, "119s"),
            (183, "3m3s"),
            (600, "10m"),
            (3 * 3600 + 120, "3h2m"),
            (9 * 3600, "9h"),
            (3 * 86400 + 3600, "3d1h"),
            (30 * 86400, "30d"),
            (3 * 365 * 86400 + 86400, "3y1d"),
            (20 * 365 * 86400, "20y"),
        ] {
            assert_eq!(human_duration(s), want, "{s}");
        }
    }

    #[test]
    fn printer_columns_fill_from_conditions_and_missing_ones_are_null() {
        let mut t = ResourceType::builtin("configbutler.ai", "v1alpha3", "gittargets", "GitTarget", true);
        t.printer_columns = Some(vec![
            json!({"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}),
            json!({"name": "Streams", "type": "string", "jsonPath": ".status.streams.summary"}),
        ]);
        let obj = json!({"metadata": {"name": "x"}, "status": {"conditions": [
            {"type": "Stalled", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        let now = Timestamp::from_second(100).unwrap();
        let table = table(&t, &[obj], json!({}), "", now).unwrap();
        assert_eq!(table["rows"][0]["cells"], json!(["x", "True", null]));
        assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert!(wants_table("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"));
        assert!(!wants_table("application/json"));
    }
}
