//! API errors, rendered as the `Status` objects kube-apiserver answers with
//! (same `reason`, `code`, `details` and message shapes).

use serde_json::{Value, json};

use super::registry::ResourceType;

/// An API error; [`ApiError::status`] is its wire form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
    /// `details` of the Status (`name`, `group`, `kind`, `causes`, ...).
    pub details: Value,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `details` naming an object of a resource type, as the API server fills
/// it (`group` only for named groups).
fn details(t: &ResourceType, name: &str) -> Value {
    let mut d = json!({});
    if !name.is_empty() {
        d["name"] = json!(name);
    }
    if !t.group.is_empty() {
        d["group"] = json!(t.group);
    }
    d["kind"] = json!(t.plural);
    d
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError { code, reason: reason.to_string(), message: message.into(), details: json!({}) }
    }

    /// The same error with these `details`.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    /// The `Status` body the real API server answers with.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.message, "reason": self.reason, "code": self.code
        });
        if self.reason.is_empty()
            && let Some(o) = s.as_object_mut()
        {
            // StatusReasonUnknown is left out, as the API server sends it.
            o.remove("reason");
        }
        if self.details.as_object().is_some_and(|d| !d.is_empty()) {
            s["details"] = self.details.clone();
        }
        s
    }

    /// `400 BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// `404 NotFound` for a path no resource serves.
    pub fn no_resource() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource")
    }

    /// `404 NotFound` for a missing object.
    pub fn not_found(t: &ResourceType, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{} {name:?} not found", t.qualified())).with_details(details(t, name))
    }

    /// `409 AlreadyExists`.
    pub fn already_exists(t: &ResourceType, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{} {name:?} already exists", t.qualified()))
            .with_details(details(t, name))
    }

    /// `409 Conflict` for a stale resourceVersion.
    pub fn conflict(t: &ResourceType, name: &str) -> Self {
        Self::conflict_because(
            t,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// `409 Conflict` with the API server's reason text.
    pub fn conflict_because(t: &ResourceType, name: &str, why: &str) -> Self {
        Self::new(409, "Conflict", format!("Operation cannot be fulfilled on {} {name:?}: {why}", t.qualified()))
            .with_details(details(t, name))
    }

    /// `422 Invalid`: `causes` are `(field, message)` pairs; the message
    /// lists them as the API server does.
    pub fn invalid(t: &ResourceType, name: &str, causes: &[(String, String)]) -> Self {
        let text: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let mut d = details(t, name);
        d["kind"] = json!(t.kind);
        d["causes"] = Value::Array(
            causes.iter().map(|(f, m)| json!({"reason": "FieldValueInvalid", "message": m, "field": f})).collect(),
        );
        Self::new(422, "Invalid", format!("{} {name:?} is invalid: {}", t.kind, text.join(", "))).with_details(d)
    }

    /// `403 Forbidden` as the authorizer words it.
    pub fn forbidden(
        t: &ResourceType,
        subresource: Option<&str>,
        name: &str,
        ns: &str,
        user: &str,
        verb: &str,
    ) -> Self {
        let resource = match subresource {
            Some(s) => format!("{}/{s}", t.plural),
            None => t.plural.clone(),
        };
        let what = if name.is_empty() { t.qualified() } else { format!("{} {name:?}", t.qualified()) };
        let scope = if ns.is_empty() { "at the cluster scope".to_string() } else { format!("in the namespace {ns:?}") };
        Self::new(
            403,
            "Forbidden",
            format!(
                "{what} is forbidden: User {user:?} cannot {verb} resource {resource:?} in API group {:?} {scope}",
                t.group
            ),
        )
        .with_details(details(t, name))
    }

    /// `410 Expired`: a resourceVersion or continue token older than the
    /// retained history.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// `405 MethodNotAllowed`.
    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    /// The reason the API server gives for a bare status code (injected
    /// faults, an unavailable aggregated API).
    pub fn for_code(code: u16, message: impl Into<String>) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "Unknown",
        };
        Self::new(code, reason, message)
    }
}
