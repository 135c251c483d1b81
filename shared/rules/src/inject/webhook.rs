//! The mutating admission webhook's logic: an `admission.k8s.io/v1`
//! AdmissionReview in, the response out. The JSONPatch is the difference
//! between the pod and what [`super::manifest::inject_template`] makes of it,
//! so the webhook and `kubectl reverser inject` can never disagree.
//! A review this cannot act on is allowed unchanged with a message saying
//! why: an injector must never block pod creation, nor panic.

use base64::Engine as _;
use serde_json::{Value, json};

use super::manifest::{Outcome, inject_template};
use super::{INJECT_KEY, InjectOptions, SkipReason};

/// How the webhook decides which pods to inject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// What the sidecar looks like.
    pub inject: InjectOptions,
    /// Inject only pods labelled `reverser.dev/inject: enabled`.
    pub require_opt_in_label: bool,
    /// Namespaces never injected (`kube-system` by default).
    pub excluded_namespaces: Vec<String>,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            inject: InjectOptions::default(),
            require_opt_in_label: false,
            excluded_namespaces: vec!["kube-system".into()],
        }
    }
}

/// Why a pod is admitted without a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowReason {
    /// Not a CREATE of a core/v1 Pod (nothing else is ours to change).
    NotAPodCreate,
    /// The pod's namespace is excluded.
    ExcludedNamespace(String),
    /// `hostNetwork: true` pods are never injected.
    HostNetwork,
    /// The opt-in label is required and the pod does not carry it.
    NotOptedIn,
    /// The injection rule itself said no (opted out, already injected).
    Skipped(SkipReason),
    /// The pod belongs to a Job and the webhook injects plain containers: a
    /// sidecar that never exits would keep the Job from completing. The
    /// response carries the reason as a warning for the client.
    JobWithPlainContainer(String),
}

/// What the webhook does with one review.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Allow(AllowReason),
    /// Admit with this JSONPatch.
    Patch(json_patch::Patch),
}

/// The decision for a well-formed review, echoing its uid.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewDecision {
    pub uid: String,
    pub action: Action,
}

/// A review that could not be acted on: the uid if one could be read, and
/// the message for `response.status.message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewError {
    pub uid: String,
    pub message: String,
}

/// The pure rule: what to do with the AdmissionReview `review`.
pub fn decide_review(review: &Value, config: &WebhookConfig) -> std::result::Result<ReviewDecision, ReviewError> {
    let fail = |uid: &str, message: String| ReviewError { uid: uid.to_string(), message };
    let api_version = review.get("apiVersion").and_then(Value::as_str);
    let kind = review.get("kind").and_then(Value::as_str);
    if api_version != Some("admission.k8s.io/v1") || kind != Some("AdmissionReview") {
        return Err(fail(
            "",
            format!(
                "expected an admission.k8s.io/v1 AdmissionReview, got apiVersion {api_version:?} kind {kind:?}; configure the webhook with admissionReviewVersions: [v1]"
            ),
        ));
    }
    let Some(request) = review.get("request").filter(|r| r.is_object()) else {
        return Err(fail("", "the AdmissionReview has no request object".into()));
    };
    let uid = match request.get("uid").and_then(Value::as_str) {
        Some(uid) if !uid.is_empty() => uid,
        _ => {
            return Err(fail("", "the AdmissionReview request has no uid to answer".into()));
        }
    };
    let decided = |action| Ok(ReviewDecision { uid: uid.to_string(), action });

    let str_at = |v: &Value, ptr: &str| v.pointer(ptr).and_then(Value::as_str).map(str::to_string);
    let is_pod = str_at(request, "/kind/group").as_deref().unwrap_or("").is_empty()
        && str_at(request, "/kind/kind").as_deref() == Some("Pod");
    let is_create = str_at(request, "/operation").as_deref() == Some("CREATE");
    let is_subresource = str_at(request, "/subResource").is_some_and(|s| !s.is_empty());
    if !is_pod || !is_create || is_subresource {
        return decided(Action::Allow(AllowReason::NotAPodCreate));
    }
    let Some(pod) = request.get("object").filter(|o| o.is_object()) else {
        return Err(fail(uid, format!("the Pod CREATE review {uid} carries no object to inject")));
    };

    let namespace = str_at(request, "/namespace").or_else(|| str_at(pod, "/metadata/namespace")).unwrap_or_default();
    if config.excluded_namespaces.contains(&namespace) {
        return decided(Action::Allow(AllowReason::ExcludedNamespace(namespace)));
    }
    if pod.pointer("/spec/hostNetwork").and_then(Value::as_bool) == Some(true) {
        return decided(Action::Allow(AllowReason::HostNetwork));
    }
    let label = pod.pointer("/metadata/labels").and_then(|l| l.get(INJECT_KEY)).and_then(Value::as_str);
    if config.require_opt_in_label && label != Some("enabled") {
        return decided(Action::Allow(AllowReason::NotOptedIn));
    }

    let name = str_at(pod, "/metadata/name")
        .or_else(|| str_at(pod, "/metadata/generateName").map(|g| format!("{g}*")))
        .unwrap_or_else(|| "<unnamed>".into());
    let object = format!("Pod {namespace}/{name}");
    let job = pod.pointer("/metadata/ownerReferences").and_then(Value::as_array).and_then(|refs| {
        refs.iter().find(|r| {
            str_at(r, "/kind").as_deref() == Some("Job")
                && str_at(r, "/apiVersion").is_some_and(|v| v.starts_with("batch/"))
        })
    });
    if let (super::SidecarMode::Plain, Some(job)) = (config.inject.mode, job) {
        let job = str_at(job, "/name").unwrap_or_default();
        return decided(Action::Allow(AllowReason::JobWithPlainContainer(
            crate::Error::InjectPlainJob { object: format!("{object} of Job {namespace}/{job}") }.to_string(),
        )));
    }
    // The same rule `inject` applies, over the same data model.
    let template: serde_norway::Value =
        serde_json::from_value(pod.clone()).map_err(|e| fail(uid, format!("{object} is not a pod object: {e}")))?;
    let (injected, outcome) =
        inject_template(&template, &config.inject, &object).map_err(|e| fail(uid, e.to_string()))?;
    match (injected, outcome) {
        (Some(injected), Outcome::Injected) => {
            let injected = serde_json::to_value(&injected)
                .map_err(|e| fail(uid, format!("cannot turn injected {object} into JSON: {e}")))?;
            decided(Action::Patch(json_patch::diff(pod, &injected)))
        }
        (_, Outcome::Skipped(why)) => decided(Action::Allow(AllowReason::Skipped(why))),
        // inject_template only injects or skips; anything else admits as is.
        (_, _) => decided(Action::Allow(AllowReason::NotAPodCreate)),
    }
}

/// The webhook: AdmissionReview JSON bytes in, AdmissionReview JSON out.
/// Always `allowed: true`; a patch (base64 JSONPatch) when the pod is
/// injected; `status.message` (and a warning) when the review could not be
/// acted on.
pub fn review(request: &[u8], config: &WebhookConfig) -> Value {
    let decision = match serde_json::from_slice::<Value>(request) {
        Ok(review) => decide_review(&review, config),
        Err(e) => {
            Err(ReviewError { uid: String::new(), message: format!("the admission request body is not JSON: {e}") })
        }
    };
    let response = match decision {
        Ok(ReviewDecision { uid, action: Action::Patch(patch) }) => match serde_json::to_vec(&patch) {
            Ok(bytes) => json!({
                "uid": uid,
                "allowed": true,
                "patchType": "JSONPatch",
                "patch": base64::engine::general_purpose::STANDARD.encode(bytes),
            }),
            Err(e) => error_response(&uid, &format!("cannot encode the JSONPatch: {e}")),
        },
        Ok(ReviewDecision { uid, action: Action::Allow(AllowReason::JobWithPlainContainer(why)) }) => {
            json!({ "uid": uid, "allowed": true, "warnings": [format!("reverser sidecar not injected: {why}")] })
        }
        Ok(ReviewDecision { uid, action: Action::Allow(_) }) => json!({ "uid": uid, "allowed": true }),
        Err(ReviewError { uid, message }) => error_response(&uid, &message),
    };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    })
}

fn error_response(uid: &str, message: &str) -> Value {
    let message = format!("reverser sidecar not injected: {message}");
    json!({
        "uid": uid,
        "allowed": true,
        "status": { "message": message },
        "warnings": [message],
    })
}
