//! `serve --git-target NAMESPACE/NAME`: the sidecar authors for a GitTarget.
//! Its GitProvider gives the remote and credentials (`secretRef`, with
//! `knownHostsRef` for SSH), the committer, the message templates (checked
//! here, so a typo stops the start and never breaks a commit) and commit
//! signing; documents go under the target's `spec.path`, removals follow its
//! prune mode.
//!
//! Secret keys read (the CRD leaves them to the implementation):
//! - credentials: `token`, else `password` (with `username`, default
//!   `x-access-token`) for HTTPS; `ssh-privatekey` or `identity` (with
//!   `known_hosts`) for SSH;
//! - signing: `ssh-privatekey`, `identity` or `signing-key` (an unencrypted
//!   OpenSSH ed25519 or ECDSA key); generated as `ssh-privatekey` and
//!   `ssh-publickey` when `generateWhenMissing` is set and none is there.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use rules::mirror::message::Messages;
use rules::mirror::reconcile::normalize_prefix;
use runtime::attribution::commit::signing::{SshSigner, generate_ed25519_key};
use runtime::attribution::commit::{Identity, RemoteAuth, RemoteConfig, WriterConfig};
use runtime::mirror::{self, Loaded};

use crate::api::MirrorPolicy;
use crate::error::{Error, Result};

/// `NAMESPACE/NAME`.
pub fn parse_target(s: &str) -> Result<(String, String)> {
    Ok(runtime::cli::parse_git_target(s)?)
}

const TOKEN_KEYS: [&str; 2] = ["token", "password"];
const SSH_KEYS: [&str; 2] = ["ssh-privatekey", "identity"];
const SIGNING_KEYS: [&str; 3] = ["ssh-privatekey", "identity", "signing-key"];

fn first<'a>(data: &'a BTreeMap<String, Vec<u8>>, keys: &[&str]) -> Option<&'a [u8]> {
    keys.iter().find_map(|k| data.get(*k)).map(Vec::as_slice)
}

fn text(what: &str, bytes: &[u8]) -> Result<String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| Error::Config(format!("{what} is not UTF-8 text")))
}

/// The writer and the removal policy for GitTarget `target`.
pub async fn writer_for(args: &runtime::cli::Git, target: &str) -> Result<(WriterConfig, MirrorPolicy, Loaded)> {
    let (ns, name) = parse_target(target)?;
    let kube_config =
        runtime::kubeconfig::load(args.kubeconfig.as_deref(), None).await.map_err(runtime::Error::from)?;
    let client = kube::Client::try_from(kube_config)
        .map_err(|e| Error::Config(format!("cannot build a Kubernetes client: {e}; check the kubeconfig")))?;
    let loaded = mirror::load(&client, &ns, &name).await.map_err(runtime::Error::from)?;
    let provider = &loaded.provider.spec;
    let provider_name = format!("GitProvider {ns}/{}", loaded.provider.metadata.name);
    let messages = Messages::new(&provider.messages(), &name)
        .map_err(|e| Error::Config(format!("{provider_name} spec.commit.message: {e}; fix the template")))?;
    provider.commit_window().map_err(|e| Error::Config(format!("{provider_name} spec.push.commitWindow: {e}")))?;
    let prefix = normalize_prefix(&loaded.target.spec.path)?;

    let remote = remote_for(&client, &ns, provider).await?;

    let signer = match provider.signing() {
        None => None,
        Some(signing) => {
            Some(Arc::new(signer(&client, &ns, &signing.secret_ref.name, signing.generate_when_missing).await?))
        }
    };
    let committer = provider.committer();
    let repo_dir = args.git_repo.clone().unwrap_or_else(|| PathBuf::from(format!("mirror-{ns}-{name}")));
    let config = WriterConfig {
        remote: Some(remote),
        prefix,
        messages: Some(messages),
        signer,
        ..WriterConfig::new(repo_dir, loaded.target.spec.branch.clone(), Identity::new(committer.name, committer.email))
    };
    let policy = MirrorPolicy { prune: Some(loaded.target.spec.prune_mode()) };
    if loaded.target.spec.encryption.is_some() {
        tracing::warn!(
            target = %target,
            "spec.encryption is set, but this mirror does not encrypt: Secrets stay skipped (never written in clear text)"
        );
    }
    Ok((config, policy, loaded))
}

/// The GitProvider's credentials Secret cannot be used as it is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialError {
    #[error("{what} does not exist; create it or drop spec.secretRef")]
    SecretNotFound { what: String, secret: String },
    #[error(
        "{what} has none of the keys token, password, ssh-privatekey, identity; add the credential under one of them"
    )]
    NoCredential { what: String, secret: String },
    #[error("{what} {key} is not UTF-8 text; store the credential as text")]
    NotText { what: String, secret: String, key: String },
}

/// The remote of GitProvider `provider` in `ns`, with the credentials of
/// its `secretRef` (and `knownHostsRef` for SSH).
pub async fn remote_for(
    client: &kube::Client,
    ns: &str,
    provider: &rules::mirror::config::GitProviderSpec,
) -> Result<RemoteConfig> {
    let mut remote = RemoteConfig::new(provider.url.clone());
    let Some(secret_ref) = &provider.secret_ref else { return Ok(remote) };
    let secret = secret_ref.name.clone();
    let what = format!("Secret {ns}/{secret} (the credentials of the GitProvider)");
    let data = mirror::secret(client, ns, &secret)
        .await
        .map_err(runtime::Error::from)?
        .ok_or_else(|| CredentialError::SecretNotFound { what: what.clone(), secret: secret.clone() })?;
    let text_of = |key: &str, bytes: &[u8]| {
        String::from_utf8(bytes.to_vec()).map_err(|_| CredentialError::NotText {
            what: what.clone(),
            secret: secret.clone(),
            key: key.into(),
        })
    };
    remote.auth = if let Some(key) = first(&data, &SSH_KEYS) {
        let known_hosts = match data.get("known_hosts") {
            Some(k) => text_of("known_hosts", k)?,
            None => known_hosts_ref(client, ns, provider).await?.unwrap_or_default(),
        };
        if known_hosts.trim().is_empty() {
            tracing::warn!(
                secret = %format!("{ns}/{secret}"),
                "no known_hosts for SSH (credentials Secret key known_hosts, or spec.knownHostsRef): pushes fail closed"
            );
        }
        RemoteAuth::SshKeyInMemory { username: "git".into(), private_key: text_of("ssh-privatekey", key)?, known_hosts }
    } else if let Some(token) = first(&data, &TOKEN_KEYS) {
        let username = data.get("username").map(|u| text_of("username", u)).transpose()?;
        RemoteAuth::Token {
            username: username.unwrap_or_else(|| "x-access-token".into()),
            token: text_of("token", token)?,
        }
    } else {
        return Err(CredentialError::NoCredential { what, secret }.into());
    };
    Ok(remote)
}

/// `knownHostsRef`: a ConfigMap (default) or Secret, key `known_hosts`.
async fn known_hosts_ref(
    client: &kube::Client,
    ns: &str,
    provider: &rules::mirror::config::GitProviderSpec,
) -> Result<Option<String>> {
    let Some(r) = &provider.known_hosts_ref else {
        return Ok(None);
    };
    let bytes = if r.kind.as_deref() == Some("Secret") {
        mirror::secret(client, ns, &r.name)
            .await
            .map_err(runtime::Error::from)?
            .and_then(|d| d.get("known_hosts").cloned())
    } else {
        mirror::config_map_value(client, ns, &r.name, "known_hosts").await.map_err(runtime::Error::from)?
    };
    bytes.map(|b| text("knownHostsRef known_hosts", &b)).transpose()
}

/// The signing key, generated into the Secret when allowed and missing.
async fn signer(client: &kube::Client, ns: &str, secret: &str, generate: bool) -> Result<SshSigner> {
    let what = format!("signing Secret {ns}/{secret}");
    let data = mirror::secret(client, ns, secret).await.map_err(runtime::Error::from)?.unwrap_or_default();
    let pem = match first(&data, &SIGNING_KEYS) {
        Some(key) => text(&what, key)?,
        None if generate => {
            let pem = generate_ed25519_key(&format!("reverser {ns}/{secret}"))
                .map_err(|e| Error::Config(format!("generating a signing key for {what}: {e}")))?;
            let public = runtime::attribution::commit::signing::public_key_line(&pem)
                .map_err(|e| Error::Config(format!("{what}: {e}")))?;
            let generated = BTreeMap::from([
                ("ssh-privatekey".to_owned(), pem.clone().into_bytes()),
                ("ssh-publickey".to_owned(), public.clone().into_bytes()),
            ]);
            mirror::store_secret(client, ns, secret, generated).await.map_err(runtime::Error::from)?;
            tracing::info!(secret = %format!("{ns}/{secret}"), public_key = %public, "generated a commit signing key; add its public key to your forge and allowed signers");
            pem
        }
        None => {
            return Err(Error::Config(format!(
                "{what} has no key (ssh-privatekey, identity or signing-key); add an unencrypted OpenSSH key, or set generateWhenMissing"
            )));
        }
    };
    SshSigner::from_openssh(&pem).map_err(|e| Error::Config(format!("{what}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_namespace_slash_name() {
        assert_eq!(parse_target("mirror/prod").unwrap(), ("mirror".into(), "prod".into()));
        for bad in ["prod", "/prod", "mirror/", "a/b/c"] {
            assert!(parse_target(bad).unwrap_err().to_string().contains("NAMESPACE/NAME"), "{bad}");
        }
    }
}
