//! SSH commit signing for git2 commits, producing the same `gpgsig` header that git's `gpg.format=ssh` writes.
//!
//! The flow is: `Repository::commit_create_buffer` → [`SshSigner::sign_commit`] →
//! `Repository::commit_signed(buffer, &signature, Some("gpgsig"))`. The signature is an SSHSIG blob
//! (namespace `git`, message hash SHA-512) in `-----BEGIN SSH SIGNATURE-----` armor, exactly what
//! `ssh-keygen -Y sign -n git` emits, so `git verify-commit` with `gpg.format=ssh` accepts it.
//!
//! Supported keys: OpenSSH-format ed25519 and ECDSA nistp256/nistp384, in clear or passphrase-protected (decrypted
//! once, with the given passphrase). Refused with a clear error: RSA and ECDSA nistp521 (ssh-key 0.6.7 bugs, see `is_supported`), DSA and
//! hardware-backed (`sk-*`) keys.

use base64::Engine as _;
use ssh_key::{Algorithm, EcdsaCurve, HashAlg, LineEnding, PrivateKey, rand_core::OsRng};

/// SSHSIG namespace git uses for commit and tag signatures.
pub const GIT_NAMESPACE: &str = "git";

/// Header field git stores commit signatures in; pass it to `Repository::commit_signed`.
pub const SIGNATURE_FIELD: &str = "gpgsig";

/// Why a key could not be loaded, generated or used for signing.
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    /// The text is not an OpenSSH private key, or it is corrupt.
    #[error(
        "cannot read the SSH signing key ({source}){hint}; provide an unencrypted OpenSSH private key, \
         i.e. text starting with `-----BEGIN OPENSSH PRIVATE KEY-----`"
    )]
    UnreadableKey {
        /// Format-specific advice, starting with `; ` (empty when there is nothing more specific to say).
        hint: &'static str,
        #[source]
        source: ssh_key::Error,
    },

    /// The key is protected by a passphrase and none was given.
    #[error(
        "the SSH signing key is passphrase-protected and no passphrase was given; put it under the \
         signing Secret's `passphrase` key, or provide an unencrypted key"
    )]
    EncryptedKey,

    /// The passphrase given does not decrypt the key.
    #[error("the passphrase does not decrypt the SSH signing key ({source}); check the signing Secret's `passphrase`")]
    WrongPassphrase {
        #[source]
        source: ssh_key::Error,
    },

    /// The key's algorithm is one this module can't sign with (whether or not ssh-key could parse the key).
    #[error(
        "SSH key algorithm `{algorithm}` is not supported for commit signing; use an ed25519 key \
         (`ssh-keygen -t ed25519`) or an ECDSA nistp256/nistp384 key (`ssh-keygen -t ecdsa -b 256`)"
    )]
    UnsupportedAlgorithm {
        /// The algorithm name as OpenSSH spells it, e.g. `ssh-dss`.
        algorithm: String,
    },

    /// The cryptographic signing step itself failed.
    #[error("signing the commit with the {algorithm} SSH key failed: {source}")]
    SigningFailed {
        /// Algorithm of the key that failed to sign.
        algorithm: String,
        #[source]
        source: ssh_key::Error,
    },

    /// Generating a new key, or encoding a key to text, failed.
    #[error("{action} failed: {source}")]
    KeyEncoding {
        /// What was being done, e.g. `generating a new ed25519 signing key`.
        action: &'static str,
        #[source]
        source: ssh_key::Error,
    },
}

/// An unencrypted private key, parsed once and reusable for any number of commits.
pub struct SshSigner {
    key: PrivateKey,
}

// Hand-written so that debug logging of a signer can never print key material.
impl std::fmt::Debug for SshSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshSigner")
            .field("algorithm", &self.key.algorithm().as_str())
            .field("fingerprint", &self.key.fingerprint(HashAlg::Sha256).to_string())
            .finish()
    }
}

impl SshSigner {
    /// Parses an OpenSSH private key (`-----BEGIN OPENSSH PRIVATE KEY-----` text) and checks it can sign.
    pub fn from_openssh(pem: &str) -> Result<Self, SigningError> {
        Self::from_openssh_with_passphrase(pem, None)
    }

    /// [`SshSigner::from_openssh`] for a key that may be passphrase-protected:
    /// it is decrypted once with `passphrase` (ignored for a key in clear).
    pub fn from_openssh_with_passphrase(pem: &str, passphrase: Option<&str>) -> Result<Self, SigningError> {
        // Secrets mounted from Kubernetes often carry stray whitespace or CRLF line endings.
        let key = PrivateKey::from_openssh(pem.trim()).map_err(|source| match declared_algorithm(pem) {
            // ssh-key can't even parse some key types (e.g. a third of nistp521 keys); name the type instead.
            Some(algorithm) if !Algorithm::new(&algorithm).is_ok_and(|a| is_supported(&a)) => {
                SigningError::UnsupportedAlgorithm { algorithm }
            }
            _ => SigningError::UnreadableKey { hint: format_hint(pem), source },
        })?;
        let key = match (key.is_encrypted(), passphrase) {
            (false, _) => key,
            (true, None) => return Err(SigningError::EncryptedKey),
            (true, Some(p)) => key.decrypt(p).map_err(|source| SigningError::WrongPassphrase { source })?,
        };
        if !is_supported(&key.algorithm()) {
            return Err(SigningError::UnsupportedAlgorithm { algorithm: key.algorithm().as_str().to_owned() });
        }
        Ok(Self { key })
    }

    /// Algorithm name as OpenSSH spells it, e.g. `ssh-ed25519`.
    pub fn algorithm(&self) -> String {
        self.key.algorithm().as_str().to_owned()
    }

    /// The public key as one `authorized_keys`-style line: `ssh-ed25519 AAAA... comment`.
    ///
    /// The comment is omitted when the key has none. Prefix the line with an email to get an
    /// `allowed_signers` entry.
    pub fn public_key_line(&self) -> Result<String, SigningError> {
        self.key
            .public_key()
            .to_openssh()
            .map_err(|source| SigningError::KeyEncoding { action: "encoding the SSH public key", source })
    }

    /// Signs a commit buffer from `Repository::commit_create_buffer`.
    ///
    /// Returns the armored signature without a trailing newline, ready for
    /// `Repository::commit_signed(buffer, &signature, Some(SIGNATURE_FIELD))`.
    pub fn sign_commit(&self, commit_buffer: &[u8]) -> Result<String, SigningError> {
        let failed = |source| SigningError::SigningFailed { algorithm: self.algorithm(), source };
        let signature = self.key.sign(GIT_NAMESPACE, HashAlg::Sha512, commit_buffer).map_err(failed)?;
        let armored = signature.to_pem(LineEnding::LF).map_err(failed)?;
        // libgit2 turns every '\n' of the signature into "\n " and then appends its own '\n', so a
        // trailing newline would leave a stray " " line; git's own signed commits have none.
        Ok(armored.trim_end().to_owned())
    }
}

/// Generates a new ed25519 private key in OpenSSH format (unencrypted), for `generateWhenMissing`.
///
/// `comment` ends up after the public key in [`SshSigner::public_key_line`]; an email or the
/// owning resource's name makes the key recognisable on a forge's settings page.
pub fn generate_ed25519_key(comment: &str) -> Result<String, SigningError> {
    let encode_failed = |source| SigningError::KeyEncoding { action: "generating a new ed25519 signing key", source };
    let mut key = PrivateKey::random(&mut OsRng, Algorithm::Ed25519).map_err(encode_failed)?;
    key.set_comment(comment);
    // ssh-key returns a zeroizing buffer; the caller stores the text in a Secret anyway.
    let pem = key.to_openssh(LineEnding::LF).map_err(encode_failed)?;
    Ok(pem.as_str().to_owned())
}

/// One-shot form of [`SshSigner::public_key_line`].
pub fn public_key_line(private_key_pem: &str) -> Result<String, SigningError> {
    SshSigner::from_openssh(private_key_pem)?.public_key_line()
}

/// One-shot form of [`SshSigner::sign_commit`]; prefer an [`SshSigner`] when signing many commits.
pub fn sign_commit(private_key_pem: &str, commit_buffer: &[u8]) -> Result<String, SigningError> {
    SshSigner::from_openssh(private_key_pem)?.sign_commit(commit_buffer)
}

/// Whether we can make signatures with this algorithm that `ssh-keygen -Y verify` (what git runs) accepts.
///
/// Left out on purpose, both for ssh-key 0.6.7 bugs (fixed only in its 0.7 pre-releases):
/// - RSA: the private key is built from (p, p) instead of (p, q), so every RSA signature fails; the `rsa` crate
///   also carries RUSTSEC-2023-0071.
/// - ECDSA nistp521: about a third of the keys `ssh-keygen` makes fail to parse; refusing them all is clearer than
///   accepting whichever happen to parse.
fn is_supported(algorithm: &Algorithm) -> bool {
    matches!(algorithm, Algorithm::Ed25519 | Algorithm::Ecdsa { curve: EcdsaCurve::NistP256 | EcdsaCurve::NistP384 })
}

/// The algorithm named in an OpenSSH private key's unencrypted header, read without decoding the key itself.
///
/// Layout (OpenSSH's PROTOCOL.key): `"openssh-key-v1\0"`, ciphername, kdfname, kdfoptions, u32 key count, then the
/// first public key blob, which starts with the algorithm name. Strings are u32-length-prefixed.
fn declared_algorithm(pem: &str) -> Option<String> {
    fn take<'a>(buf: &mut &'a [u8], len: usize) -> Option<&'a [u8]> {
        let (head, tail) = buf.split_at_checked(len)?;
        *buf = tail;
        Some(head)
    }
    fn take_string<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
        let len = u32::from_be_bytes(take(buf, 4)?.try_into().ok()?);
        take(buf, usize::try_from(len).ok()?)
    }
    let body: String = pem.lines().map(str::trim).filter(|l| !l.starts_with("-----")).collect();
    let bytes = base64::engine::general_purpose::STANDARD.decode(body).ok()?;
    let mut rest = bytes.strip_prefix(b"openssh-key-v1\0")?;
    for _ in 0..3 {
        take_string(&mut rest)?;
    }
    take(&mut rest, 4)?;
    let mut public_key = take_string(&mut rest)?;
    String::from_utf8(take_string(&mut public_key)?.to_vec()).ok()
}

/// Advice for the key formats people most often paste by mistake.
fn format_hint(text: &str) -> &'static str {
    let text = text.trim_start();
    if text.is_empty() {
        "; the key is empty"
    } else if text.starts_with("ssh-") || text.starts_with("ecdsa-") {
        "; this looks like a public key, but the private key is needed"
    } else if text.starts_with("-----BEGIN") && !text.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----") {
        "; this is a PEM/PKCS#8 key, convert a copy to OpenSSH format with `ssh-keygen -p -N \"\" -f <copy-of-key>`"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests;
