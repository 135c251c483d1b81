//! `serve --git-target NAMESPACE/NAME`: the sidecar authors for a GitTarget.
//! Its GitProvider gives the remote and credentials (`secretRef`, with
//! `knownHostsRef` for SSH), the committer, the message templates (checked
//! here, so a typo stops the start and never breaks a commit) and commit
//! signing; documents go under the target's `spec.path`, removals follow its
//! prune mode.
//!
//! Secret keys are read under gitops-reverser's names
//! (`rules::mirror::credentials`); `generateWhenMissing` writes a signing
//! key as `signing.key` and `signing.pub`, and only into a Secret that holds
//! no signing key. A passphrase-protected key is decrypted with the
//! Secret's `passphrase`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use rules::mirror::config::{commit_messages, commit_window};
use rules::mirror::credentials::{self, Credential};
use rules::mirror::message::Messages;
use rules::mirror::reconcile::normalize_prefix;
use runtime::attribution::commit::signing::{SshSigner, generate_ed25519_key};
use runtime::attribution::commit::{Identity, RemoteAuth, RemoteConfig, WriterConfig};
use runtime::mirror::{self, Loaded};

use crate::api::MirrorPolicy;
use crate::apiserver::Server;
use crate::error::{Error, Result};
use runtime::kubeconfig::Bounds;

/// `NAMESPACE/NAME`.
pub fn parse_target(s: &str) -> Result<(String, String)> {
    Ok(runtime::cli::parse_git_target(s)?)
}

fn text(what: &str, bytes: &[u8]) -> Result<String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| Error::Config(format!("{what} is not UTF-8 text")))
}

/// The writer and the removal policy for GitTarget `target`.
pub async fn writer_for(args: &runtime::cli::Git, target: &str) -> Result<(WriterConfig, MirrorPolicy, Loaded)> {
    let (ns, name) = parse_target(target)?;
    // Bounded: a server that never answers stops the start with its name
    // and the bound instead of a hang.
    let (client, server) = Server::connect(args.kubeconfig.as_deref(), Bounds::new(args.request_timeout)).await?;
    let loaded = mirror::load(&client, &ns, &name).await.map_err(|e| server.mirror_error(e))?;
    let provider = &loaded.provider.spec;
    let provider_name = format!("GitProvider {ns}/{}", loaded.provider.metadata.name);
    // The GitTarget's spec.commit (the newer upstream shape) wins over the provider's.
    let messages = Messages::new(&commit_messages(&loaded.target.spec, provider), &name).map_err(|e| {
        Error::Config(format!("GitTarget {ns}/{name} or {provider_name} spec.commit.message: {e}; fix the template"))
    })?;
    commit_window(&loaded.target.spec, provider).map_err(|e| Error::Config(format!("{provider_name}: {e}")))?;
    let prefix = normalize_prefix(&loaded.target.spec.path)?;
    let placement = loaded.target.spec.placement.clone().unwrap_or_default();
    placement.validate().map_err(|e| Error::Config(format!("GitTarget {ns}/{name}: {e}")))?;

    let remote = remote_for(&client, &ns, provider).await?;

    let signer = match provider.signing() {
        None => None,
        Some(signing) => {
            Some(Arc::new(signer(&client, &ns, &signing.secret_ref.name, signing.generate_when_missing).await?))
        }
    };
    let committer = provider.committer();
    let repo_dir = args.git_repo.clone().unwrap_or_else(|| PathBuf::from(format!("mirror-{ns}-{name}")));
    // What was sealed is kept beside the clone's objects, never in Git.
    let encryption = crate::encryption::encryptor_for(
        &client,
        &ns,
        &name,
        loaded.target.spec.encryption.as_ref(),
        &args.sops_binary,
        repo_dir.join("reverser-sealed"),
    )
    .await?;
    // The bootstrap `.sops.yaml` names the recipients the Secrets are sealed to.
    let age_recipients: Vec<String> =
        encryption.as_ref().map(|e| e.recipients().iter().map(|r| r.as_str().to_owned()).collect()).unwrap_or_default();
    let encryption = encryption.map(|e| Arc::new(e) as Arc<dyn runtime::attribution::commit::encryption::Encryptor>);
    let config = WriterConfig {
        remote: Some(remote),
        prefix,
        messages: Some(messages),
        signer,
        placement,
        bootstrap: true,
        encryption,
        sensitive: args.additional_sensitive_resources.clone(),
        age_recipients,
        ..WriterConfig::new(repo_dir, loaded.target.spec.branch.clone(), Identity::new(committer.name, committer.email))
    };
    let policy = MirrorPolicy { prune: Some(loaded.target.spec.prune_mode()) };
    Ok((config, policy, loaded))
}

/// The GitProvider's credentials Secret cannot be used as it is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialError {
    #[error("{what} does not exist; create it or drop spec.secretRef")]
    SecretNotFound { what: String, secret: String },
    #[error("{what} {problem}")]
    NoCredential { what: String, secret: String, problem: String },
    #[error("{what} {key} is not UTF-8 text; store the credential as text")]
    NotText { what: String, secret: String, key: String },
}

/// The remote of GitProvider `provider` in `ns`, with the credentials of
/// its `secretRef` (keys as gitops-reverser names them,
/// `rules::mirror::credentials`; `knownHostsRef` for SSH).
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
    let credential = credentials::credential(&data).map_err(|e| match e {
        credentials::CredentialError::NotText(key) => {
            CredentialError::NotText { what: what.clone(), secret: secret.clone(), key }
        }
        other => {
            CredentialError::NoCredential { what: what.clone(), secret: secret.clone(), problem: other.to_string() }
        }
    })?;
    remote.auth = match credential {
        Credential::Ssh { private_key, passphrase, known_hosts } => {
            let known_hosts = match known_hosts {
                Some(k) => k,
                None => known_hosts_ref(client, ns, provider).await?.unwrap_or_default(),
            };
            if known_hosts.trim().is_empty() {
                tracing::warn!(
                    secret = %format!("{ns}/{secret}"),
                    "no known_hosts for SSH (credentials Secret key known_hosts, or spec.knownHostsRef): pushes fail closed"
                );
            }
            RemoteAuth::SshKeyInMemory { username: "git".into(), private_key, passphrase, known_hosts }
        }
        Credential::Basic { username, password } => RemoteAuth::Token { username, token: password },
        Credential::Bearer { token } => RemoteAuth::Bearer { token },
    };
    Ok(remote)
}

/// `knownHostsRef`: a ConfigMap (default) or Secret, key `known_hosts`, else
/// `ssh_known_hosts` (Argo CD's key).
async fn known_hosts_ref(
    client: &kube::Client,
    ns: &str,
    provider: &rules::mirror::config::GitProviderSpec,
) -> Result<Option<String>> {
    let Some(r) = &provider.known_hosts_ref else {
        return Ok(None);
    };
    let what = format!("knownHostsRef {ns}/{}", r.name);
    match r.kind.as_deref() {
        Some("Secret") => {
            let data = mirror::secret(client, ns, &r.name).await.map_err(runtime::Error::from)?.unwrap_or_default();
            credentials::known_hosts(&data).map_err(|e| Error::Config(format!("{what}: {e}")))
        }
        None | Some("") | Some("ConfigMap") => {
            for key in credentials::KNOWN_HOSTS_KEYS {
                let value = mirror::config_map_value(client, ns, &r.name, key).await.map_err(runtime::Error::from)?;
                if let Some(v) = value.filter(|v| !v.is_empty()) {
                    return text(&format!("{what} {key}"), &v).map(Some);
                }
            }
            Ok(None)
        }
        Some(other) => Err(Error::Config(format!("{what}: kind {other:?} is not supported; use ConfigMap or Secret"))),
    }
}

/// The public half of the signing key in Secret `secret`, in
/// authorized_keys format: `signing.pub`, else derived from the private
/// key. `None` when the Secret holds no usable key (yet).
pub async fn signing_public_key(client: &kube::Client, ns: &str, secret: &str) -> Option<String> {
    let data = mirror::secret(client, ns, secret).await.ok()??;
    if let Some(public) = data.get(credentials::SIGNING_PUBLIC_KEY).and_then(|b| std::str::from_utf8(b).ok()) {
        let public = public.trim();
        if !public.is_empty() {
            return Some(public.to_owned());
        }
    }
    let (pem, passphrase) = credentials::signing_key(&data).ok()??;
    SshSigner::from_openssh_with_passphrase(&pem, passphrase.as_deref()).ok()?.public_key_line().ok()
}

/// The signing key, generated into the Secret when allowed and missing.
async fn signer(client: &kube::Client, ns: &str, secret: &str, generate: bool) -> Result<SshSigner> {
    let what = format!("signing Secret {ns}/{secret}");
    let data = mirror::secret(client, ns, secret).await.map_err(runtime::Error::from)?.unwrap_or_default();
    let found = credentials::signing_key(&data).map_err(|e| Error::Config(format!("{what}: {e}")))?;
    let (pem, passphrase) = match found {
        Some(found) => found,
        None if generate => {
            let pem = generate_ed25519_key(&format!("reverser {ns}/{secret}"))
                .map_err(|e| Error::Config(format!("generating a signing key for {what}: {e}")))?;
            let public = runtime::attribution::commit::signing::public_key_line(&pem)
                .map_err(|e| Error::Config(format!("{what}: {e}")))?;
            let generated = BTreeMap::from([
                (credentials::SIGNING_KEY.to_owned(), pem.clone().into_bytes()),
                (credentials::SIGNING_PUBLIC_KEY.to_owned(), public.clone().into_bytes()),
            ]);
            mirror::store_secret(client, ns, secret, generated, BTreeMap::new()).await.map_err(runtime::Error::from)?;
            tracing::info!(secret = %format!("{ns}/{secret}"), public_key = %public, "generated a commit signing key; add its public key to your forge and allowed signers");
            return SshSigner::from_openssh(&pem).map_err(|e| Error::Config(format!("{what}: {e}")));
        }
        None => {
            return Err(Error::Config(format!(
                "{what} has no key (signing.key); add an OpenSSH ed25519 or ECDSA key, or set generateWhenMissing"
            )));
        }
    };
    SshSigner::from_openssh_with_passphrase(&pem, passphrase.as_deref())
        .map_err(|e| Error::Config(format!("{what}: {e}")))
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
