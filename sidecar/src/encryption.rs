//! A GitTarget's `spec.encryption` made into the writer's encryptor, as
//! gitops-reverser resolves it (internal/git/encryption.go
//! `ResolveTargetEncryption`; the key generation of
//! internal/controller/gittarget_controller.go `ensureEncryptionSecret`):
//! recipients from `age.recipients.publicKeys` and from each `*.agekey`
//! entry of `secretRef`, a date-named key generated into that Secret when
//! `generateWhenMissing` is set and it holds none. Any bad key or recipient
//! stops the start with a message naming it: nothing is written with a
//! configuration that is half right.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rules::mirror::config::EncryptionSpec;
use rules::mirror::encryption::{
    self as rule, BACKUP_WARNING_ANNOTATION, BACKUP_WARNING_VALUE, RECIPIENT_ANNOTATION, agekey_identity,
    dated_agekey_name_at, has_agekey,
};
use runtime::attribution::commit::encryption::EncryptionError;
use runtime::attribution::commit::encryption::age::{Identity, Recipient};
use runtime::attribution::commit::encryption::sops::SopsEncryptor;
use runtime::mirror;

use crate::error::{Error, Result};

fn refused(target: &str, e: impl std::fmt::Display) -> Error {
    Error::Config(format!("GitTarget {target}: {e}; nothing is written until it is fixed"))
}

/// The encryptor for GitTarget `ns/name`, `None` when encryption is off.
/// What was sealed is recorded in `state_file` (beside the clone).
pub async fn encryptor_for(
    client: &kube::Client,
    ns: &str,
    name: &str,
    spec: Option<&EncryptionSpec>,
    sops_binary: &Path,
    state_file: PathBuf,
) -> Result<Option<SopsEncryptor>> {
    let target = format!("{ns}/{name}");
    let Some(plan) = rule::plan(spec).map_err(|e| refused(&target, e))? else {
        if spec.is_some() {
            tracing::warn!(target = %target, "spec.encryption is set but age is not enabled: Secrets stay skipped (never written in clear text)");
        }
        return Ok(None);
    };
    let mut recipients = Vec::new();
    for (i, key) in plan.public_keys.iter().enumerate() {
        let source = format!("spec.encryption.age.recipients.publicKeys[{i}]");
        recipients.push(Recipient::parse(&source, key).map_err(|e| refused(&target, e))?);
    }
    let mut identities = Vec::new();
    if let Some(secret) = &plan.key_secret {
        let content = key_secret(client, ns, secret, plan.generate_when_missing).await?;
        for (key, value) in content.data.iter().filter(|(k, _)| k.ends_with(rule::AGEKEY_SUFFIX)) {
            let entry = format!("Secret {ns}/{secret} key {key}");
            let identity = std::str::from_utf8(value)
                .map_err(|_| EncryptionError::Identity { entry: entry.clone(), why: "it is not UTF-8 text".into() })
                .and_then(|text| {
                    agekey_identity(&entry, text)
                        .map_err(|e| EncryptionError::Identity { entry: entry.clone(), why: e.to_string() })
                })
                .and_then(|line| Identity::parse(&entry, line))
                .map_err(|e| refused(&target, e))?;
            recipients.push(identity.recipient());
            identities.push(identity);
        }
    }
    let encryptor =
        SopsEncryptor::new(sops_binary, recipients, identities, Some(state_file)).map_err(|e| refused(&target, e))?;
    tracing::info!(
        target = %target,
        recipients = %encryptor.recipients().iter().map(Recipient::as_str).collect::<Vec<_>>().join(", "),
        "sensitive types are written SOPS-encrypted"
    );
    Ok(Some(encryptor))
}

/// The `secretRef` Secret, with an age key generated into it when allowed
/// and it holds none (a Secret that holds one is never given another).
async fn key_secret(client: &kube::Client, ns: &str, secret: &str, generate: bool) -> Result<mirror::SecretContent> {
    let what = format!("Secret {ns}/{secret} (spec.encryption.secretRef)");
    let existing = mirror::secret_content(client, ns, secret).await.map_err(runtime::Error::from)?;
    if let Some(content) = &existing
        && has_agekey(content.data.keys().map(String::as_str))
    {
        if content.annotations.get(BACKUP_WARNING_ANNOTATION).map(String::as_str) == Some(BACKUP_WARNING_VALUE) {
            tracing::warn!(secret = %what, annotation = BACKUP_WARNING_ANNOTATION, "ENCRYPTION KEY BACKUP REQUIRED: back up the age key, then remove the annotation");
        }
        return Ok(existing.unwrap_or_default());
    }
    if !generate {
        return Err(Error::Config(match existing {
            None => format!(
                "{what} does not exist; create it with a *.agekey entry, or set age.recipients.generateWhenMissing"
            ),
            Some(_) => {
                format!("{what} has no *.agekey entry; add one (age-keygen), or set age.recipients.generateWhenMissing")
            }
        }));
    }
    let identity = Identity::generate().map_err(|e| Error::Config(format!("{what}: {e}")))?;
    let recipient = identity.recipient().to_string();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let key = dated_agekey_name_at(now);
    let data = BTreeMap::from([(key.clone(), identity.to_secret_string().into_bytes())]);
    let annotations = BTreeMap::from([
        (RECIPIENT_ANNOTATION.to_owned(), recipient.clone()),
        (BACKUP_WARNING_ANNOTATION.to_owned(), BACKUP_WARNING_VALUE.to_owned()),
    ]);
    mirror::store_secret(client, ns, secret, data.clone(), annotations.clone()).await.map_err(runtime::Error::from)?;
    tracing::warn!(secret = %what, key, recipient, annotation = BACKUP_WARNING_ANNOTATION, "generated an age key for encryption: back it up, then remove the annotation");
    let mut content = existing.unwrap_or_default();
    content.data.extend(data);
    content.annotations.extend(annotations);
    Ok(content)
}
