//! The documented variables of each template kind, as static types the checker walks.

use super::*;

#[derive(Debug, Clone, Copy)]
pub(super) enum Ty {
    Str,
    Int,
    Bool,
    List(&'static Ty),
    Map(&'static MapTy),
    Struct(&'static StructTy),
    /// Statically unknown (e.g. `and` of mixed types): fields are checked at render time only.
    Any,
}

#[derive(Debug)]
pub(super) struct StructTy {
    pub(super) name: &'static str,
    pub(super) fields: &'static [(&'static str, Ty)],
}

/// A string-keyed map whose documented keys are known, like `.Operations`.
#[derive(Debug)]
pub(super) struct MapTy {
    pub(super) name: &'static str,
    pub(super) keys: &'static [&'static str],
    pub(super) value: Ty,
}

pub(super) static EVENT: StructTy = StructTy {
    name: "eventTemplate",
    fields: &[
        ("Operation", Ty::Str),
        ("Group", Ty::Str),
        ("Version", Ty::Str),
        ("Resource", Ty::Str),
        ("Namespace", Ty::Str),
        ("Name", Ty::Str),
        ("APIVersion", Ty::Str),
        ("Username", Ty::Str),
        ("GitTarget", Ty::Str),
    ],
};
pub(super) static RESOURCE: StructTy = StructTy {
    name: "a .Resources element",
    fields: &[
        ("Group", Ty::Str),
        ("Version", Ty::Str),
        ("Resource", Ty::Str),
        ("Namespace", Ty::Str),
        ("Name", Ty::Str),
        ("Operation", Ty::Str),
        ("APIVersion", Ty::Str),
    ],
};
pub(super) static RESOURCE_TY: Ty = Ty::Struct(&RESOURCE);
pub(super) static OPERATIONS: MapTy =
    MapTy { name: ".Operations", keys: &["CREATE", "UPDATE", "DELETE"], value: Ty::Int };
pub(super) static GROUP: StructTy = StructTy {
    name: "groupTemplate",
    fields: &[
        ("Author", Ty::Str),
        ("GitTarget", Ty::Str),
        ("Count", Ty::Int),
        ("Operations", Ty::Map(&OPERATIONS)),
        ("Resources", Ty::List(&RESOURCE_TY)),
    ],
};
pub(super) static RECONCILE: StructTy = StructTy {
    name: "reconcileTemplate",
    fields: &[
        ("Count", Ty::Int),
        ("GitTarget", Ty::Str),
        ("Group", Ty::Str),
        ("Version", Ty::Str),
        ("Resource", Ty::Str),
        ("APIVersion", Ty::Str),
        ("Namespace", Ty::Str),
        ("Revision", Ty::Str),
        // The newer upstream's name for Revision.
        ("ResourceVersion", Ty::Str),
    ],
};
pub(super) static LIVE: StructTy = StructTy {
    name: "liveTemplate",
    fields: &[
        ("Author", Ty::Str),
        ("GitTarget", Ty::Str),
        ("Count", Ty::Int),
        ("Operations", Ty::Map(&OPERATIONS)),
        ("Resources", Ty::List(&RESOURCE_TY)),
    ],
};

impl Ty {
    pub(super) fn name(self) -> &'static str {
        match self {
            Ty::Str => "a string",
            Ty::Int => "an int",
            Ty::Bool => "a bool",
            Ty::List(_) => "a list",
            Ty::Map(_) | Ty::Struct(_) => "a map",
            Ty::Any => "a value",
        }
    }

    /// Go's zero value, rendered for variables missing from the context.
    pub(super) fn zero(self) -> Option<Value> {
        Some(match self {
            Ty::Str => Value::Str(String::new()),
            Ty::Int => Value::Int(0),
            Ty::Bool => Value::Bool(false),
            Ty::List(_) => Value::List(Vec::new()),
            Ty::Map(_) | Ty::Struct(_) => Value::Map(BTreeMap::new()),
            Ty::Any => return None,
        })
    }

    /// The comparable kind for `eq`/`lt`/…, if statically known.
    pub(super) fn basic(self) -> Option<&'static str> {
        match self {
            Ty::Str => Some("string"),
            Ty::Int => Some("int"),
            Ty::Bool => Some("bool"),
            _ => None,
        }
    }

    pub(super) fn same(self, other: Ty) -> bool {
        match (self, other) {
            (Ty::List(a), Ty::List(b)) => a.same(*b),
            (Ty::Map(a), Ty::Map(b)) => std::ptr::eq(a, b),
            (Ty::Struct(a), Ty::Struct(b)) => std::ptr::eq(a, b),
            (a, b) => a.basic().is_some() && a.basic() == b.basic(),
        }
    }
}

/// Checks that the caller's context has the documented shape, so type errors point at the caller, not the template.
pub(super) fn check_context(kind: TemplateKind, value: &Value, ty: Ty, path: &str) -> Result<(), TemplateError> {
    let mismatch = || TemplateError::Context {
        kind,
        path: if path.is_empty() { ".".to_owned() } else { path.to_owned() },
        expected: ty.name(),
        found: value.type_name(),
    };
    match (ty, value) {
        (Ty::Any, _) | (Ty::Str, Value::Str(_)) | (Ty::Int, Value::Int(_)) | (Ty::Bool, Value::Bool(_)) => Ok(()),
        (Ty::List(elem), Value::List(items)) => {
            items.iter().enumerate().try_for_each(|(i, item)| check_context(kind, item, *elem, &format!("{path}[{i}]")))
        }
        (Ty::Map(map), Value::Map(entries)) => {
            entries.iter().try_for_each(|(k, v)| check_context(kind, v, map.value, &format!("{path}.{k}")))
        }
        (Ty::Struct(st), Value::Map(entries)) => {
            st.fields.iter().try_for_each(|(name, field_ty)| match entries.get(*name) {
                Some(v) => check_context(kind, v, *field_ty, &format!("{path}.{name}")),
                None => Ok(()),
            })
        }
        _ => Err(mismatch()),
    }
}
