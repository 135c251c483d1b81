//! Encryption of sensitive manifests before they reach Git (a GitTarget's
//! `spec.encryption`): Secrets, and the types named by
//! `--additional-sensitive-resources`, are committed only as SOPS files,
//! never in clear text. The writer asks an [`Encryptor`] for the bytes of
//! such a file; without one, sensitive writes are skipped and counted.

/// Seals the sanitized manifest of a sensitive object into the file that is
/// committed for it.
pub trait Encryptor: Send + Sync + std::fmt::Debug {
    /// The file bytes to commit for `plaintext` (the sanitized manifest, as
    /// YAML) at the repository-relative `path`. `existing` is what the tree
    /// holds at that path now, if anything: when it already seals this same
    /// `plaintext`, the encryptor returns it unchanged, so an unchanged
    /// Secret is never re-encrypted (SOPS output is randomized: a relist or a
    /// restart would otherwise commit every Secret again).
    fn seal(&self, path: &str, plaintext: &[u8], existing: Option<&[u8]>) -> Result<Vec<u8>, EncryptionError>;
}

/// Sealing a sensitive manifest failed: the change is skipped (counted and
/// logged), never written in clear text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncryptionError {
    /// The encryption configuration cannot be used (no recipient, a bad
    /// recipient, an unreadable key).
    #[error("{0}")]
    Config(String),
    /// Encrypting this document failed.
    #[error("encrypting {path} failed: {message}")]
    Encrypt { path: String, message: String },
}
