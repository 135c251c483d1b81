//! Encryption of sensitive manifests before they reach Git (a GitTarget's
//! `spec.encryption`): Secrets, and the types named by
//! `--additional-sensitive-resources`, are committed only as SOPS files,
//! never in clear text. The writer asks an [`Encryptor`] for the bytes of
//! such a file; without one, sensitive writes are skipped and counted.
//!
//! - [`age`]: age recipients and identities (X25519 keys in bech32).
//! - [`sops`]: the [`Encryptor`] that runs the `sops` binary, as
//!   gitops-reverser does (internal/git/sops_encryptor.go).

pub mod age;
pub mod sops;

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
    /// A string given as an age recipient is not one.
    #[error("{source_name}: {value:?} is not an age recipient ({why}); give the age1... public key age-keygen prints")]
    Recipient { source_name: String, value: String, why: String },
    /// A `*.agekey` entry (or another identity) cannot be read.
    #[error("{entry}: not a usable age identity ({why}); store one AGE-SECRET-KEY-1... line, as age-keygen writes it")]
    Identity { entry: String, why: String },
    /// Encrypting this document failed.
    #[error("encrypting {path} failed: {message}")]
    Encrypt { path: String, message: String },
}
