//! A CRD's structural `openAPIV3Schema` applied as the API server applies
//! it on every write: nulls in non-nullable fields dropped, unknown fields
//! pruned, defaults filled, then the value validated (types, required,
//! enum, length, item and range limits). Not evaluated: `pattern`,
//! `format`, `anyOf`/`oneOf`/`allOf` and CEL `x-kubernetes-validations`.

use serde_json::{Map, Value};

fn preserves_unknown(schema: &Value) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

/// Prunes, drops nulls and fills defaults in `value` under `schema`, the
/// way the API server does before validating. At the root, `apiVersion`,
/// `kind` and `metadata` are the server's and left alone (as in an
/// `x-kubernetes-embedded-resource`).
pub fn default_and_prune(schema: &Value, value: &mut Value) {
    walk(schema, value, true);
}

/// How an object under `schema` treats its fields: the schemas of the
/// known ones, that of any other (`additionalProperties`), and whether
/// the unknown ones are kept.
struct Fields<'a> {
    props: Option<&'a Map<String, Value>>,
    additional: Option<&'a Value>,
    keep_unknown: bool,
}

impl<'a> Fields<'a> {
    fn of(schema: &'a Value) -> Self {
        let props = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties").filter(|a| a.is_object());
        let keep_unknown =
            preserves_unknown(schema) || additional.is_some() || (props.is_none() && schema.get("type").is_none());
        Fields { props, additional, keep_unknown }
    }
}

fn walk(schema: &Value, value: &mut Value, root: bool) {
    let embedded = root || schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
    match value {
        Value::Object(obj) => {
            let Fields { props, additional, keep_unknown } = Fields::of(schema);
            let nullable = |s: Option<&Value>| s.and_then(|s| s.get("nullable")) == Some(&Value::Bool(true));
            obj.retain(|k, v| {
                let sub = props.and_then(|p| p.get(k)).or(additional);
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    return true;
                }
                if v.is_null() && !nullable(sub) && sub.is_some() {
                    return false;
                }
                sub.is_some() || keep_unknown
            });
            for (k, v) in obj.iter_mut() {
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(sub) = props.and_then(|p| p.get(k)).or(additional) {
                    walk(sub, v, false);
                }
            }
            if let Some(props) = props {
                for (k, sub) in props {
                    if !obj.contains_key(k)
                        && let Some(d) = sub.get("default")
                    {
                        let mut d = d.clone();
                        walk(sub, &mut d, false);
                        obj.insert(k.clone(), d);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for v in items.iter_mut() {
                    walk(sub, v, false);
                }
            }
        }
        _ => {}
    }
}

/// One step of a field path: an object's key or a list's index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    Key(String),
    Index(usize),
}

/// A field's path, written as the API server names it for
/// `fieldValidation` (`spec.bogus`, `spec.rules[0].extra`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct FieldPath(pub Vec<Step>);

impl FieldPath {
    pub(crate) fn key(&self, k: &str) -> FieldPath {
        let mut p = self.0.clone();
        p.push(Step::Key(k.to_string()));
        FieldPath(p)
    }

    pub(crate) fn index(&self, i: usize) -> FieldPath {
        let mut p = self.0.clone();
        p.push(Step::Index(i));
        FieldPath(p)
    }
}

impl std::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, step) in self.0.iter().enumerate() {
            match step {
                Step::Key(k) if i == 0 => write!(f, "{k}")?,
                Step::Key(k) => write!(f, ".{k}")?,
                Step::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// The fields of `value` pruning under `schema` would drop; the root's
/// apiVersion, kind and metadata are the server's (ObjectMeta, checked on
/// its own).
pub(crate) fn unknown_fields(schema: &Value, value: &Value) -> Vec<FieldPath> {
    let mut out = Vec::new();
    unknown(schema, value, &FieldPath::default(), true, &mut out);
    out
}

fn unknown(schema: &Value, value: &Value, path: &FieldPath, root: bool, out: &mut Vec<FieldPath>) {
    let embedded = root || schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
    match value {
        Value::Object(obj) => {
            let Fields { props, additional, keep_unknown } = Fields::of(schema);
            for (k, v) in obj {
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                match props.and_then(|p| p.get(k)).or(additional) {
                    Some(sub) => unknown(sub, v, &path.key(k), false, out),
                    None if !keep_unknown && !v.is_null() => out.push(path.key(k)),
                    None => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    unknown(sub, v, &path.index(i), false, out);
                }
            }
        }
        _ => {}
    }
}

/// The errors of `value` under `schema`, each `"<path>: <what>"` with
/// `path` starting at `path` (`""` for the root, so fields read
/// `.spec.goal`).
pub fn validate_schema(schema: &Value, value: &Value, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    if preserves_unknown(schema) && schema.get("properties").is_none() {
        return out;
    }
    if value.is_null() && schema.get("nullable") == Some(&Value::Bool(true)) {
        return out;
    }
    let int_or_string = schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let ty = schema.get("type").and_then(Value::as_str);
    let ok = match (ty, value) {
        _ if int_or_string => value.is_string() || value.is_i64() || value.is_u64(),
        (None, _) => true,
        (Some("object"), Value::Object(_))
        | (Some("array"), Value::Array(_))
        | (Some("string"), Value::String(_))
        | (Some("boolean"), Value::Bool(_)) => true,
        (Some("integer"), Value::Number(n)) => n.is_i64() || n.is_u64(),
        (Some("number"), Value::Number(_)) => true,
        _ => false,
    };
    if !ok {
        let want = if int_or_string { "integer or string" } else { ty.unwrap_or("?") };
        out.push(format!("{path}: expected {want}, got {value}"));
        return out;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        out.push(format!("{path}: {value} is not one of {}", Value::Array(allowed.clone())));
    }
    if let Value::String(s) = value {
        let len = s.chars().count() as u64;
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && len > max
        {
            out.push(format!("{path}: longer than {max}"));
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && len < min
        {
            out.push(format!("{path}: shorter than {min}"));
        }
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            out.push(format!("{path}: should be greater than or equal to {min}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            out.push(format!("{path}: should be less than or equal to {max}"));
        }
    }
    match value {
        Value::Object(obj) => out.extend(validate_object(schema, obj, path)),
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    out.extend(validate_schema(s, v, &format!("{path}[{i}]")));
                }
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && items.len() as u64 > max
            {
                out.push(format!("{path}: must have at most {max} items"));
            }
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && (items.len() as u64) < min
            {
                out.push(format!("{path}: must have at least {min} items"));
            }
        }
        _ => {}
    }
    out
}

fn validate_object(schema: &Value, obj: &Map<String, Value>, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    for req in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
        if let Some(r) = req.as_str()
            && !obj.contains_key(r)
        {
            out.push(format!("{path}.{r}: Required value"));
        }
    }
    if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
        && obj.len() as u64 > max
    {
        out.push(format!("{path}: must have at most {max} properties"));
    }
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    for (k, v) in obj {
        let sub = format!("{path}.{k}");
        match (props.and_then(|p| p.get(k)), additional) {
            (Some(s), _) => out.extend(validate_schema(s, v, &sub)),
            (None, Some(a)) if a.is_object() => out.extend(validate_schema(a, v, &sub)),
            // Unknown fields were pruned before validation; metadata is the
            // API server's own.
            (None, _) => {}
        }
    }
    out
}
