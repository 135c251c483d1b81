//! Which keys of a GitProvider's Secrets hold which credential, under
//! gitops-reverser's names (internal/git/credentials.go:145-215 and :288,
//! internal/git/signing.go:25-29), which are also Flux's and Argo CD's, so
//! a credentials Secret made for any of them works unchanged. An empty value
//! counts as absent, as the reference's `firstSecretValue` has it.

use std::collections::{BTreeMap, BTreeSet};

use super::config::{GitProviderSpec, GitTargetSpec};

/// What a mirror reads besides its CRs: the Secrets (the GitProvider's
/// credentials and signing key, a known_hosts Secret, the GitTarget's
/// encryption key), the known_hosts ConfigMap, and the Secrets it may write
/// a generated key into (`generateWhenMissing`). The controller grants
/// exactly these; the sidecar watches the Secrets for changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reads {
    pub secrets: BTreeSet<String>,
    pub config_maps: BTreeSet<String>,
    pub generated: BTreeSet<String>,
}

/// The [`Reads`] of a GitTarget and its GitProvider (when it exists).
pub fn reads(target: &GitTargetSpec, provider: Option<&GitProviderSpec>) -> Reads {
    let mut r = Reads::default();
    if let Some(p) = provider {
        r.secrets.extend(p.secret_ref.as_ref().map(|s| s.name.clone()));
        if let Some(k) = &p.known_hosts_ref {
            match k.kind.as_deref() {
                Some("Secret") => r.secrets.insert(k.name.clone()),
                _ => r.config_maps.insert(k.name.clone()),
            };
        }
        if let Some(s) = p.signing() {
            r.secrets.insert(s.secret_ref.name.clone());
            if s.generate_when_missing {
                r.generated.insert(s.secret_ref.name.clone());
            }
        }
    }
    if let Ok(Some(plan)) = super::encryption::plan(target.encryption.as_ref())
        && let Some(secret) = plan.key_secret
    {
        r.secrets.insert(secret.clone());
        if plan.generate_when_missing {
            r.generated.insert(secret);
        }
    }
    r
}

/// The SSH private key: Kubernetes' `ssh-privatekey`, Flux's `identity`,
/// Argo CD's `sshPrivateKey`.
pub const SSH_KEYS: [&str; 3] = ["ssh-privatekey", "identity", "sshPrivateKey"];
/// Its passphrase: ours, else Flux's `password` (only read beside a key).
pub const SSH_PASSPHRASE_KEYS: [&str; 2] = ["ssh-password", "password"];
/// Known hosts: `known_hosts`, else Argo CD's `ssh_known_hosts`.
pub const KNOWN_HOSTS_KEYS: [&str; 2] = ["known_hosts", "ssh_known_hosts"];
/// The commit signing key and its public half, as the reference writes them.
pub const SIGNING_KEY: &str = "signing.key";
pub const SIGNING_PUBLIC_KEY: &str = "signing.pub";
pub const SIGNING_PASSPHRASE: &str = "passphrase";
/// Signing keys this mirror read before it used the reference's name; still
/// read after `signing.key`, never written.
pub const LEGACY_SIGNING_KEYS: [&str; 3] = ["ssh-privatekey", "identity", "signing-key"];

/// A credentials Secret that cannot be used; the message names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialError {
    #[error("key {0} is not UTF-8 text")]
    NotText(String),
    #[error("has username but no password for HTTPS basic auth; add password (or remove username)")]
    UsernameWithoutPassword,
    #[error(
        "has no credential: add an SSH key (ssh-privatekey, identity or sshPrivateKey), username and password, or bearerToken"
    )]
    None,
}

/// What a credentials Secret holds, in the reference's precedence: an SSH
/// key, else HTTPS basic auth, else a bearer token.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    Ssh {
        private_key: String,
        passphrase: Option<String>,
        /// The Secret's own `known_hosts` (it wins over `knownHostsRef`).
        known_hosts: Option<String>,
    },
    Basic {
        username: String,
        password: String,
    },
    Bearer {
        token: String,
    },
}

impl std::fmt::Debug for Credential {
    // Never print a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::Ssh { passphrase, .. } => {
                f.debug_struct("Ssh").field("passphrase", &passphrase.is_some()).finish_non_exhaustive()
            }
            Credential::Basic { username, .. } => {
                f.debug_struct("Basic").field("username", username).finish_non_exhaustive()
            }
            Credential::Bearer { .. } => f.write_str("Bearer"),
        }
    }
}

/// The first of `keys` with a non-empty value.
pub fn first<'a>(data: &'a BTreeMap<String, Vec<u8>>, keys: &[&str]) -> Option<&'a [u8]> {
    keys.iter().find_map(|k| data.get(*k).filter(|v| !v.is_empty())).map(Vec::as_slice)
}

fn text(data: &BTreeMap<String, Vec<u8>>, keys: &[&str]) -> Result<Option<String>, CredentialError> {
    let Some(key) = keys.iter().find(|k| data.get(**k).is_some_and(|v| !v.is_empty())) else {
        return Ok(None);
    };
    String::from_utf8(data[*key].clone()).map(Some).map_err(|_| CredentialError::NotText((*key).to_owned()))
}

/// The credential a GitProvider's `secretRef` data holds. `token` (this
/// mirror's earlier key) is still read after `password`, with `username`
/// defaulting to `x-access-token` as it did.
pub fn credential(data: &BTreeMap<String, Vec<u8>>) -> Result<Credential, CredentialError> {
    if let Some(private_key) = text(data, &SSH_KEYS)? {
        return Ok(Credential::Ssh {
            private_key,
            passphrase: text(data, &SSH_PASSPHRASE_KEYS)?,
            known_hosts: text(data, &KNOWN_HOSTS_KEYS[..1])?,
        });
    }
    let username = text(data, &["username"])?;
    if let Some(password) = text(data, &["password"])? {
        // Azure DevOps documents an empty username with a token as the
        // password: the username defaults to empty, as in the reference.
        return Ok(Credential::Basic { username: username.unwrap_or_default(), password });
    }
    if let Some(token) = text(data, &["token"])? {
        return Ok(Credential::Basic {
            username: username.unwrap_or_else(|| "x-access-token".into()),
            password: token,
        });
    }
    if username.is_some() {
        return Err(CredentialError::UsernameWithoutPassword);
    }
    match text(data, &["bearerToken"])? {
        Some(token) => Ok(Credential::Bearer { token }),
        None => Err(CredentialError::None),
    }
}

/// Known hosts in a `knownHostsRef` Secret's data.
pub fn known_hosts(data: &BTreeMap<String, Vec<u8>>) -> Result<Option<String>, CredentialError> {
    text(data, &KNOWN_HOSTS_KEYS)
}

/// The signing key of a `commit.signing.secretRef` Secret and its
/// passphrase: `signing.key`, else the legacy names.
pub fn signing_key(data: &BTreeMap<String, Vec<u8>>) -> Result<Option<(String, Option<String>)>, CredentialError> {
    let mut keys = vec![SIGNING_KEY];
    keys.extend(LEGACY_SIGNING_KEYS);
    Ok(match text(data, &keys)? {
        Some(key) => Some((key, text(data, &[SIGNING_PASSPHRASE])?)),
        None => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect()
    }

    #[test]
    fn every_ssh_key_name_of_kubernetes_flux_and_argo_is_read() {
        for key in SSH_KEYS {
            let c = credential(&data(&[(key, "KEY"), ("known_hosts", "KH")])).unwrap();
            assert_eq!(
                c,
                Credential::Ssh { private_key: "KEY".into(), passphrase: None, known_hosts: Some("KH".into()) },
                "{key}"
            );
        }
        // The passphrase: ssh-password, else password (only beside a key).
        let c = credential(&data(&[("identity", "KEY"), ("ssh-password", "pp"), ("password", "other")])).unwrap();
        assert!(matches!(c, Credential::Ssh { passphrase: Some(ref p), .. } if p == "pp"));
        let c = credential(&data(&[("sshPrivateKey", "KEY"), ("password", "flux")])).unwrap();
        assert!(matches!(c, Credential::Ssh { passphrase: Some(ref p), known_hosts: None, .. } if p == "flux"));
        // An SSH key wins over basic auth; an empty value is absent.
        let c = credential(&data(&[("ssh-privatekey", ""), ("identity", "KEY"), ("username", "u"), ("password", "p")]));
        assert!(matches!(c, Ok(Credential::Ssh { ref private_key, .. }) if private_key == "KEY"));
    }

    #[test]
    fn https_basic_auth_and_bearer_tokens_under_the_references_names() {
        assert_eq!(
            credential(&data(&[("username", "bot"), ("password", "pat")])),
            Ok(Credential::Basic { username: "bot".into(), password: "pat".into() })
        );
        // Azure DevOps: no username, the PAT as the password.
        assert_eq!(
            credential(&data(&[("password", "pat")])),
            Ok(Credential::Basic { username: String::new(), password: "pat".into() })
        );
        assert_eq!(credential(&data(&[("bearerToken", "tok")])), Ok(Credential::Bearer { token: "tok".into() }));
        // This mirror's earlier key still works as it did.
        assert_eq!(
            credential(&data(&[("token", "t")])),
            Ok(Credential::Basic { username: "x-access-token".into(), password: "t".into() })
        );
        assert_eq!(
            credential(&data(&[("username", "bot"), ("bearerToken", "t")])),
            Err(CredentialError::UsernameWithoutPassword)
        );
        assert_eq!(credential(&data(&[("bearerToken", "")])), Err(CredentialError::None));
        let mut bad = data(&[]);
        bad.insert("password".into(), vec![0xff]);
        assert_eq!(credential(&bad), Err(CredentialError::NotText("password".into())));
        assert!(!format!("{:?}", credential(&data(&[("password", "pat")])).unwrap()).contains("pat"));
    }

    #[test]
    fn known_hosts_and_signing_keys_under_the_references_names() {
        assert_eq!(known_hosts(&data(&[("ssh_known_hosts", "argo")])), Ok(Some("argo".into())));
        assert_eq!(known_hosts(&data(&[("known_hosts", "kh"), ("ssh_known_hosts", "argo")])), Ok(Some("kh".into())));
        assert_eq!(known_hosts(&data(&[])), Ok(None));
        assert_eq!(
            signing_key(&data(&[("signing.key", "K"), ("passphrase", "p"), ("ssh-privatekey", "old")])),
            Ok(Some(("K".into(), Some("p".into()))))
        );
        assert_eq!(signing_key(&data(&[("signing-key", "old")])), Ok(Some(("old".into(), None))));
        assert_eq!(signing_key(&data(&[("signing.pub", "only the public half")])), Ok(None));
    }
}
