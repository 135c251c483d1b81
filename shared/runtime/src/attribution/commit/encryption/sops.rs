//! The [`Encryptor`] of `spec.encryption.provider: sops`: it runs the `sops`
//! binary, as gitops-reverser does (internal/git/sops_encryptor.go), so the
//! file is SOPS's own format byte for byte (age stanzas, MAC,
//! `encrypted_regex: ^(data|stringData)$`) and any `sops --decrypt` reads it.
//!
//! SOPS output is randomized, so an unchanged manifest must not be sealed
//! again. Each sealed file is remembered by path as (digest of the file,
//! digest of the recipients and the plaintext), kept in memory and in a
//! state file beside the clone (never in Git), so a relist or a restart
//! finds the file already sealing the same manifest for the same
//! recipients. When that record is missing (a fresh clone) and the
//! identities are at hand (`extractFromSecret`), the existing file is
//! decrypted and compared instead.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;

use rules::mirror::encryption::ENCRYPTED_REGEX;
use sha2::{Digest, Sha256};

use super::age::{Identity, Recipient};
use super::{EncryptionError, Encryptor};

/// Seals with `sops --encrypt --age ...`.
pub struct SopsEncryptor {
    binary: PathBuf,
    recipients: Vec<Recipient>,
    identities: Vec<Identity>,
    state_file: Option<PathBuf>,
    /// path -> (digest of the sealed file, digest of recipients + plaintext).
    sealed: Mutex<BTreeMap<String, (String, String)>>,
}

impl std::fmt::Debug for SopsEncryptor {
    // Identities are secret: only their count is shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SopsEncryptor")
            .field("binary", &self.binary)
            .field("recipients", &self.recipients)
            .field("identities", &self.identities.len())
            .field("state_file", &self.state_file)
            .finish_non_exhaustive()
    }
}

fn digest(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    hex::encode(h.finalize())
}

impl SopsEncryptor {
    /// Seals to `recipients` (at least one) with the `sops` at `binary`.
    /// `identities` (may be empty) let an existing file be compared after a
    /// fresh clone; `state_file` keeps what was sealed across restarts.
    pub fn new(
        binary: impl Into<PathBuf>,
        mut recipients: Vec<Recipient>,
        identities: Vec<Identity>,
        state_file: Option<PathBuf>,
    ) -> Result<Self, EncryptionError> {
        recipients.sort();
        recipients.dedup();
        if recipients.is_empty() {
            return Err(EncryptionError::Config(
                "no age recipient to encrypt to; set age.recipients.publicKeys or a *.agekey entry".into(),
            ));
        }
        let sealed = state_file.as_deref().map(load_state).unwrap_or_default();
        Ok(SopsEncryptor { binary: binary.into(), recipients, identities, state_file, sealed: Mutex::new(sealed) })
    }

    /// The recipients every file is sealed to, sorted.
    pub fn recipients(&self) -> &[Recipient] {
        &self.recipients
    }

    fn plain_digest(&self, plaintext: &[u8]) -> String {
        let joined = self.recipients.iter().map(Recipient::as_str).collect::<Vec<_>>().join(",");
        digest(&[joined.as_bytes(), plaintext])
    }

    fn remember(&self, path: &str, sealed: String, plain: String) {
        let mut map = self.sealed.lock().unwrap_or_else(|p| p.into_inner());
        if map.get(path) == Some(&(sealed.clone(), plain.clone())) {
            return;
        }
        map.insert(path.to_owned(), (sealed, plain));
        if let Some(file) = &self.state_file
            && let Err(e) = save_state(file, &map)
        {
            // Only costs a re-encryption after a restart.
            tracing::warn!(file = %file.display(), error = %e, "cannot record what was sealed; a restart seals again");
        }
    }

    /// Runs sops on `input` with `args`; `age_keys` set for decryption only.
    fn run(
        &self,
        path: &str,
        args: &[&str],
        input: &[u8],
        age_keys: Option<String>,
    ) -> Result<Vec<u8>, EncryptionError> {
        let fail = |message: String| EncryptionError::Encrypt { path: path.to_owned(), message };
        let mut cmd = Command::new(&self.binary);
        // No .sops.yaml of the working directory may change what is sealed:
        // the flags say everything.
        cmd.args(["--config", "/dev/null"]).args(args).arg("/dev/stdin");
        for var in ["SOPS_AGE_KEY", "SOPS_AGE_KEY_FILE", "SOPS_AGE_KEY_CMD", "SOPS_AGE_RECIPIENTS"] {
            cmd.env_remove(var);
        }
        if let Some(keys) = age_keys {
            cmd.env("SOPS_AGE_KEY", keys);
        }
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| {
            fail(format!(
                "cannot run {}: {e}; install sops (the image ships it) or pass --sops-binary",
                self.binary.display()
            ))
        })?;
        let written = child.stdin.take().map(|mut stdin| stdin.write_all(input));
        let out = child.wait_with_output().map_err(|e| fail(format!("sops did not finish: {e}")))?;
        if let Some(Err(e)) = written {
            return Err(fail(format!("writing to sops failed: {e}")));
        }
        if !out.status.success() {
            return Err(fail(format!("sops exited {}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim())));
        }
        Ok(out.stdout)
    }

    /// Whether `existing` is sealed to exactly our recipients and decrypts
    /// to the same manifest as `plaintext` (needs the identities).
    fn seals_same(&self, path: &str, existing: &[u8], plaintext: &[u8]) -> bool {
        if self.identities.is_empty() {
            return false;
        }
        let Ok(file) = serde_norway::from_slice::<serde_norway::Value>(existing) else {
            return false;
        };
        let mut theirs: Vec<&str> = file["sops"]["age"]
            .as_sequence()
            .map(|s| s.iter().filter_map(|a| a["recipient"].as_str()).collect())
            .unwrap_or_default();
        theirs.sort_unstable();
        if theirs != self.recipients.iter().map(Recipient::as_str).collect::<Vec<_>>() {
            return false;
        }
        let keys = self.identities.iter().map(Identity::to_secret_string).collect::<Vec<_>>().join("\n");
        let args = ["--decrypt", "--input-type", "yaml", "--output-type", "yaml"];
        match self.run(path, &args, existing, Some(keys)) {
            Ok(decrypted) => {
                let a = serde_norway::from_slice::<serde_norway::Value>(&decrypted);
                let b = serde_norway::from_slice::<serde_norway::Value>(plaintext);
                matches!((a, b), (Ok(a), Ok(b)) if a == b)
            }
            Err(e) => {
                tracing::debug!(path, error = %e, "the existing file does not decrypt with our identities; sealing anew");
                false
            }
        }
    }
}

impl Encryptor for SopsEncryptor {
    fn seal(&self, path: &str, plaintext: &[u8], existing: Option<&[u8]>) -> Result<Vec<u8>, EncryptionError> {
        let plain = self.plain_digest(plaintext);
        if let Some(existing) = existing {
            let sealed = digest(&[existing]);
            let known = self.sealed.lock().unwrap_or_else(|p| p.into_inner()).get(path).cloned();
            if known == Some((sealed.clone(), plain.clone())) || self.seals_same(path, existing, plaintext) {
                self.remember(path, sealed, plain);
                return Ok(existing.to_vec());
            }
        }
        let recipients = self.recipients.iter().map(Recipient::as_str).collect::<Vec<_>>().join(",");
        let args = [
            "--encrypt",
            "--age",
            &recipients,
            "--encrypted-regex",
            ENCRYPTED_REGEX,
            "--input-type",
            "yaml",
            "--output-type",
            "yaml",
        ];
        let out = self.run(path, &args, plaintext, None)?;
        check_sealed(path, &out)?;
        self.remember(path, digest(&[&out]), plain);
        Ok(out)
    }
}

/// Refuses what does not look sealed (no MAC, no age stanza, a `data` or
/// `stringData` value in clear): a guard against a sops that misbehaves,
/// since what is returned is committed.
fn check_sealed(path: &str, out: &[u8]) -> Result<(), EncryptionError> {
    let refuse = |why: &str| EncryptionError::Encrypt {
        path: path.to_owned(),
        message: format!("sops output refused, it is not a sealed file ({why}); nothing written"),
    };
    let file: serde_norway::Value = serde_norway::from_slice(out).map_err(|_| refuse("not YAML"))?;
    if file["sops"]["mac"].as_str().is_none_or(|m| !m.starts_with("ENC[")) {
        return Err(refuse("no MAC"));
    }
    if file["sops"]["age"].as_sequence().is_none_or(|s| s.is_empty()) {
        return Err(refuse("no age recipient"));
    }
    for field in ["data", "stringData"] {
        if let Some(values) = file[field].as_mapping()
            && values.values().any(|v| v.as_str().is_none_or(|s| !s.starts_with("ENC[")))
        {
            return Err(refuse(&format!("a {field} value in clear")));
        }
    }
    Ok(())
}

fn load_state(file: &std::path::Path) -> BTreeMap<String, (String, String)> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return BTreeMap::new();
    };
    text.lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            Some((f.next()?.to_owned(), (f.next()?.to_owned(), f.next()?.to_owned())))
        })
        .collect()
}

fn save_state(file: &std::path::Path, map: &BTreeMap<String, (String, String)>) -> std::io::Result<()> {
    let mut text = String::new();
    for (path, (sealed, plain)) in map {
        text.push_str(&format!("{path}\t{sealed}\t{plain}\n"));
    }
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(tmp, file)
}
