//! What a GitTarget's `spec.encryption` asks for, as gitops-reverser reads
//! it (internal/git/encryption.go `ResolveTargetEncryption`,
//! internal/controller/gittarget_controller.go `ensureEncryptionSecret`):
//! SOPS with age, recipients from `age.recipients.publicKeys` and from the
//! `*.agekey` entries of `secretRef`, and a date-named key generated into
//! that Secret when it holds none. The key material itself (parsing and
//! deriving age keys) is the runtime's; these are the decisions around it.

use super::config::EncryptionSpec;

/// The only provider (the CRD's enum).
pub const PROVIDER_SOPS: &str = "sops";
/// Secret data keys holding an age identity end with this (Flux's naming).
pub const AGEKEY_SUFFIX: &str = ".agekey";
/// Set on a Secret the mirror wrote a key into: the recipient it derived.
pub const RECIPIENT_ANNOTATION: &str = "configbutler.ai/age-recipient";
/// Set on a Secret the mirror wrote a key into, until someone backs it up.
pub const BACKUP_WARNING_ANNOTATION: &str = "configbutler.ai/backup-warning";
pub const BACKUP_WARNING_VALUE: &str = "REMOVE_AFTER_BACKUP";
/// What SOPS encrypts in a manifest: the values, never the identity.
pub const ENCRYPTED_REGEX: &str = "^(data|stringData)$";

/// A `spec.encryption` that cannot be used; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("spec.encryption: {0}")]
pub struct EncryptionSpecError(pub String);

/// Where the recipients come from, once the spec is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncryptionPlan {
    /// `age.recipients.publicKeys`, blank entries dropped (checked by the
    /// runtime, which can parse them).
    pub public_keys: Vec<String>,
    /// The Secret whose `*.agekey` entries give recipients, when
    /// `extractFromSecret` is set.
    pub key_secret: Option<String>,
    /// Whether a missing `*.agekey` is generated into `key_secret`.
    pub generate_when_missing: bool,
}

/// The plan for `spec`: `None` when encryption is off (no spec, or age not
/// enabled, as the reference treats it); an error for a provider other than
/// sops, a `secretRef` of another kind, or a Secret the options need but do
/// not name.
pub fn plan(spec: Option<&EncryptionSpec>) -> Result<Option<EncryptionPlan>, EncryptionSpecError> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let provider = spec.provider.trim();
    if !provider.is_empty() && provider != PROVIDER_SOPS {
        return Err(EncryptionSpecError(format!("provider {provider:?} is not supported; use sops")));
    }
    let Some(age) = spec.age.as_ref().filter(|a| a.enabled) else {
        return Ok(None);
    };
    let recipients = &age.recipients;
    if recipients.generate_when_missing && !recipients.extract_from_secret {
        return Err(EncryptionSpecError(
            "age.recipients.generateWhenMissing=true requires extractFromSecret=true".into(),
        ));
    }
    let key_secret = if recipients.extract_from_secret {
        let r = spec.secret_ref.as_ref();
        if let Some(kind) = r.and_then(|r| r.kind.as_deref()).filter(|k| !k.is_empty() && *k != "Secret") {
            return Err(EncryptionSpecError(format!("secretRef.kind must be Secret, got {kind:?}")));
        }
        match r.map(|r| r.name.trim()).filter(|n| !n.is_empty()) {
            Some(name) => Some(name.to_owned()),
            None => {
                return Err(EncryptionSpecError(
                    "secretRef.name must be set when age.recipients.extractFromSecret=true".into(),
                ));
            }
        }
    } else {
        None
    };
    let public_keys: Vec<String> =
        recipients.public_keys.iter().map(|k| k.trim().to_owned()).filter(|k| !k.is_empty()).collect();
    if public_keys.is_empty() && key_secret.is_none() {
        return Err(EncryptionSpecError(
            "age.enabled=true needs at least one recipient: set age.recipients.publicKeys, or extractFromSecret with a secretRef"
                .into(),
        ));
    }
    Ok(Some(EncryptionPlan { public_keys, key_secret, generate_when_missing: recipients.generate_when_missing }))
}

/// Whether a Secret's data holds an age identity entry.
pub fn has_agekey<'a>(mut keys: impl Iterator<Item = &'a str>) -> bool {
    keys.any(|k| k.ends_with(AGEKEY_SUFFIX))
}

/// The data key a generated identity is stored under, for the UTC date
/// `year-month-day`: `YYYYMM` then the day unpadded, as the reference's
/// `currentDateAgeKeySecretDataKey` writes it (`%04d%02d%d.agekey`), so a
/// key it would find is the key we write.
pub fn dated_agekey_name(year: i32, month: u32, day: u32) -> String {
    format!("{year:04}{month:02}{day}{AGEKEY_SUFFIX}")
}

/// [`dated_agekey_name`] for the UTC day of `unix_secs`.
pub fn dated_agekey_name_at(unix_secs: i64) -> String {
    let (y, m, d) = crate::attribution::index::store::civil_from_days(unix_secs.div_euclid(86_400));
    dated_agekey_name(y as i32, m as u32, d as u32)
}

/// The one identity line of a `*.agekey` entry: comments (`#`) and blank
/// lines are skipped, and exactly one `AGE-SECRET-KEY-` line must remain.
pub fn agekey_identity<'a>(key: &str, value: &'a str) -> Result<&'a str, EncryptionSpecError> {
    let mut lines = value.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'));
    let refuse = |why: &str| EncryptionSpecError(format!("secret entry {key} {why}"));
    let Some(first) = lines.next() else {
        return Err(refuse("must contain one AGE-SECRET-KEY identity; it holds none"));
    };
    if lines.next().is_some() {
        return Err(refuse("must contain exactly one AGE-SECRET-KEY identity; it holds several"));
    }
    if !first.starts_with("AGE-SECRET-KEY-") {
        return Err(refuse("must contain an AGE-SECRET-KEY identity (as age-keygen writes it)"));
    }
    Ok(first)
}

/// Recipients sorted and deduplicated (the order SOPS is given them in, so
/// the same set always seals the same way).
pub fn dedupe_sorted(recipients: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = recipients.into_iter().map(|r| r.trim().to_owned()).filter(|r| !r.is_empty()).collect();
    out.sort();
    out.dedup();
    out
}

/// What checking a GitTarget's encryption found (ref: gitops-reverser
/// `gittarget_controller.go` `evaluateEncryptionGate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncryptionCheck {
    /// No age encryption asked for.
    NotRequired,
    /// The recipients are there.
    Ready,
    /// The spec cannot be used (why).
    InvalidConfig(String),
    /// The key Secret is missing and will be generated (by the sidecar at
    /// its start), or could not be read (why).
    MissingSecret(String),
    /// The key Secret is missing and `generateWhenMissing` is off (why).
    SecretCreateDisabled(String),
}

/// The check, from the spec's [`plan`] and what its key Secret holds
/// (`None`: the Secret does not exist; its data keys otherwise).
pub fn check(
    plan: Result<Option<EncryptionPlan>, EncryptionSpecError>,
    ns: &str,
    secret_keys: Option<&[String]>,
) -> EncryptionCheck {
    let plan = match plan {
        Err(e) => return EncryptionCheck::InvalidConfig(e.to_string()),
        Ok(None) => return EncryptionCheck::NotRequired,
        Ok(Some(p)) => p,
    };
    let Some(secret) = plan.key_secret.as_deref() else {
        return EncryptionCheck::Ready;
    };
    let has_key = secret_keys.is_some_and(|keys| has_agekey(keys.iter().map(String::as_str)));
    match (secret_keys, has_key, plan.generate_when_missing) {
        (_, true, _) => EncryptionCheck::Ready,
        (_, false, true) => EncryptionCheck::MissingSecret(format!(
            "Secret {ns}/{secret} holds no *.agekey yet; the sidecar generates one when it starts (generateWhenMissing)"
        )),
        (None, false, false) => EncryptionCheck::SecretCreateDisabled(format!(
            "Secret {ns}/{secret} (spec.encryption.secretRef) is missing and generateWhenMissing is disabled; create it with an age key"
        )),
        (Some(_), false, false) => EncryptionCheck::InvalidConfig(format!(
            "Secret {ns}/{secret} (spec.encryption.secretRef) holds no *.agekey entry; add one, or set generateWhenMissing"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_follows_the_references_encryption_gate() {
        let spec = |extract: bool, generate: bool| -> EncryptionSpec {
            serde_json::from_value(serde_json::json!({"provider": "sops", "secretRef": {"name": "sops-age"},
                "age": {"enabled": true, "recipients": {"extractFromSecret": extract, "generateWhenMissing": generate,
                        "publicKeys": if extract { serde_json::json!([]) } else { serde_json::json!(["age1x"]) }}}}))
            .unwrap()
        };
        assert_eq!(check(plan(None), "ns", None), EncryptionCheck::NotRequired);
        assert_eq!(check(plan(Some(&spec(false, false))), "ns", None), EncryptionCheck::Ready);
        let key = ["20261204.agekey".to_string()];
        assert_eq!(check(plan(Some(&spec(true, false))), "ns", Some(&key)), EncryptionCheck::Ready);
        assert!(
            matches!(check(plan(Some(&spec(true, false))), "ns", None), EncryptionCheck::SecretCreateDisabled(m) if m.contains("generateWhenMissing is disabled"))
        );
        assert!(matches!(check(plan(Some(&spec(true, true))), "ns", None), EncryptionCheck::MissingSecret(_)));
        assert!(
            matches!(check(plan(Some(&spec(true, false))), "ns", Some(&["other".to_string()])), EncryptionCheck::InvalidConfig(m) if m.contains("no *.agekey"))
        );
        assert!(
            matches!(check(plan(Some(&spec(false, true))), "ns", None), EncryptionCheck::InvalidConfig(m) if m.contains("requires extractFromSecret"))
        );
    }
    use crate::mirror::config::{AgeEncryptionSpec, AgeRecipientsSpec, NameRef};

    fn spec(public: &[&str], extract: bool, generate: bool, secret: Option<&str>) -> EncryptionSpec {
        EncryptionSpec {
            provider: "sops".into(),
            secret_ref: secret.map(|n| NameRef { name: n.into(), ..Default::default() }),
            age: Some(AgeEncryptionSpec {
                enabled: true,
                recipients: AgeRecipientsSpec {
                    public_keys: public.iter().map(|s| s.to_string()).collect(),
                    extract_from_secret: extract,
                    generate_when_missing: generate,
                },
            }),
        }
    }

    #[test]
    fn off_unless_age_is_enabled() {
        assert_eq!(plan(None), Ok(None));
        let mut s = spec(&["age1x"], false, false, None);
        s.age.as_mut().unwrap().enabled = false;
        assert_eq!(plan(Some(&s)), Ok(None));
        s.age = None;
        assert_eq!(plan(Some(&s)), Ok(None));
    }

    #[test]
    fn recipient_sources_are_read_as_the_reference_reads_them() {
        let p = plan(Some(&spec(&[" age1a ", "", "age1b"], false, false, None))).unwrap().unwrap();
        assert_eq!(p.public_keys, ["age1a", "age1b"]);
        assert_eq!(p.key_secret, None);
        let p = plan(Some(&spec(&[], true, true, Some("sops-age")))).unwrap().unwrap();
        assert_eq!((p.key_secret.as_deref(), p.generate_when_missing), (Some("sops-age"), true));
    }

    #[test]
    fn unusable_specs_are_refused_naming_the_field() {
        let mut other = spec(&["age1a"], false, false, None);
        other.provider = "vault".into();
        assert!(plan(Some(&other)).unwrap_err().to_string().contains("provider \"vault\""));
        let e = plan(Some(&spec(&[], false, true, Some("k")))).unwrap_err().to_string();
        assert!(e.contains("generateWhenMissing=true requires extractFromSecret=true"), "{e}");
        let e = plan(Some(&spec(&[], true, false, None))).unwrap_err().to_string();
        assert!(e.contains("secretRef.name must be set"), "{e}");
        let e = plan(Some(&spec(&[], false, false, None))).unwrap_err().to_string();
        assert!(e.contains("at least one recipient"), "{e}");
        let mut cm = spec(&[], true, false, Some("k"));
        cm.secret_ref.as_mut().unwrap().kind = Some("ConfigMap".into());
        assert!(plan(Some(&cm)).unwrap_err().to_string().contains("secretRef.kind must be Secret"));
    }

    #[test]
    fn the_generated_key_name_is_the_references() {
        // `%04d%02d%d`: the day is not padded.
        assert_eq!(dated_agekey_name(2026, 12, 3), "2026123.agekey");
        assert_eq!(dated_agekey_name(2026, 1, 24), "20260124.agekey");
        // 2026-12-03T23:59:59Z and the second after it.
        assert_eq!(dated_agekey_name_at(1_796_342_399), "2026123.agekey");
        assert_eq!(dated_agekey_name_at(1_796_342_400), "2026124.agekey");
        assert!(has_agekey(["token", "20260124.agekey"].into_iter()));
        assert!(!has_agekey(["signing.key", "agekey"].into_iter()));
    }

    #[test]
    fn an_agekey_entry_holds_exactly_one_identity() {
        let one = "# created: 2026-12-03\n# public key: age1...\nAGE-SECRET-KEY-1ABC\n";
        assert_eq!(agekey_identity("k.agekey", one), Ok("AGE-SECRET-KEY-1ABC"));
        let e = agekey_identity("k.agekey", "# nothing\n\n").unwrap_err().to_string();
        assert!(e.contains("k.agekey") && e.contains("holds none"), "{e}");
        let two = "AGE-SECRET-KEY-1A\nAGE-SECRET-KEY-1B\n";
        assert!(agekey_identity("k.agekey", two).unwrap_err().to_string().contains("exactly one"));
        assert!(agekey_identity("k.agekey", "age1abc").unwrap_err().to_string().contains("AGE-SECRET-KEY identity"));
        assert_eq!(dedupe_sorted(["b".into(), " a".into(), "b".into(), "".into()]), ["a", "b"]);
    }
}
