//! How a [`super::GitWriter`] is configured: where its clone lives, what it
//! writes under, and the remote it pushes to with which credentials.

use std::path::PathBuf;
use std::sync::Arc;

use rules::attribution::commit::{AuthorMode, Identity};
use rules::mirror::message::Messages;
use rules::mirror::placement::Placement;
use rules::mirror::select::SensitiveTypes;

use super::signing::SshSigner;

/// Where and how the writer keeps its history.
#[derive(Debug, Clone)]
pub struct WriterConfig {
    /// The local bare clone; created when absent. One writer per directory.
    pub repo_dir: PathBuf,
    /// The branch commits land on (`main`).
    pub branch: String,
    /// The configured committer: it never moves and is never the author.
    pub committer: Identity,
    /// Where to push; `None` keeps history local.
    pub remote: Option<RemoteConfig>,
    /// The folder documents are written under (a GitTarget's `spec.path`,
    /// normalized); empty for the repository root.
    pub prefix: String,
    /// The GitProvider's message templates; `None` titles commits with what
    /// they change.
    pub messages: Option<Messages>,
    /// Signs every commit (the GitProvider's `commit.signing`).
    pub signer: Option<Arc<SshSigner>>,
    /// Seals sensitive manifests (the GitTarget's `spec.encryption`);
    /// `None` skips sensitive writes (counted), never writing them in clear.
    pub encryption: Option<Arc<dyn super::encryption::Encryptor>>,
    /// Where a new object's file goes (the GitTarget's `spec.placement`;
    /// empty: gitops-reverser's canonical layout).
    pub placement: Placement,
    /// The age recipients the bootstrap `.sops.yaml` names, when encryption
    /// is on.
    pub age_recipients: Vec<String>,
    /// Stage the bootstrap files (a GitTarget's `README.md`,
    /// `.gittargetignore`, `.sops.yaml`) with the first write under the prefix.
    pub bootstrap: bool,
    /// The types written only encrypted: core Secrets, and those of
    /// `--additional-sensitive-resources`.
    pub sensitive: SensitiveTypes,
    /// Who authors commits: the resolved actors, or (attribution off) the
    /// committer.
    pub author_mode: AuthorMode,
}

impl WriterConfig {
    /// History in `repo_dir` on `branch` by `committer`: local, at the
    /// repository root, titled by what changes, unsigned.
    pub fn new(repo_dir: impl Into<PathBuf>, branch: impl Into<String>, committer: Identity) -> Self {
        WriterConfig {
            repo_dir: repo_dir.into(),
            branch: branch.into(),
            committer,
            remote: None,
            prefix: String::new(),
            messages: None,
            signer: None,
            encryption: None,
            placement: Placement::default(),
            age_recipients: Vec::new(),
            bootstrap: false,
            sensitive: SensitiveTypes::default(),
            author_mode: AuthorMode::Attributed,
        }
    }
}

/// The remote to push to: `file://` (or a bare path), `https://` with a
/// token, or ssh (`ssh://` or `user@host:path`).
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    pub url: String,
    pub auth: RemoteAuth,
    /// Push attempts before giving up; each rejection fetches and replays.
    pub max_push_attempts: u32,
}

impl RemoteConfig {
    /// A remote with no credentials and the default 10 push attempts.
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), auth: RemoteAuth::None, max_push_attempts: 10 }
    }
}

/// Credentials for the remote.
#[derive(Clone)]
pub enum RemoteAuth {
    None,
    /// HTTPS basic auth with a token as the password (GitHub: username
    /// `x-access-token`; GitLab: `oauth2`).
    Token {
        username: String,
        token: String,
    },
    /// An SSH private key file. The username in the URL wins over this one.
    SshKey {
        username: String,
        private_key: PathBuf,
        passphrase: Option<String>,
    },
    /// An HTTP bearer token (`Authorization: Bearer`, a credentials
    /// Secret's `bearerToken`).
    Bearer {
        token: String,
    },
    /// An SSH private key held in memory (a GitProvider's credentials
    /// Secret), with its passphrase, and the `known_hosts` the server's key
    /// must appear in.
    SshKeyInMemory {
        username: String,
        private_key: String,
        passphrase: Option<String>,
        known_hosts: String,
    },
    /// The running ssh-agent.
    SshAgent {
        username: String,
    },
}

impl std::fmt::Debug for RemoteAuth {
    // Never print a secret into a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteAuth::None => f.write_str("None"),
            RemoteAuth::Token { username, .. } => {
                f.debug_struct("Token").field("username", username).field("token", &"<redacted>").finish()
            }
            RemoteAuth::SshKey { username, private_key, .. } => f
                .debug_struct("SshKey")
                .field("username", username)
                .field("private_key", private_key)
                .finish_non_exhaustive(),
            RemoteAuth::Bearer { .. } => f.debug_struct("Bearer").field("token", &"<redacted>").finish(),
            RemoteAuth::SshAgent { username } => f.debug_struct("SshAgent").field("username", username).finish(),
            RemoteAuth::SshKeyInMemory { username, .. } => {
                f.debug_struct("SshKeyInMemory").field("username", username).finish_non_exhaustive()
            }
        }
    }
}
