//! age's X25519 keys as the `age` CLI writes them: a recipient is the
//! bech32 string `age1...` of a Curve25519 public key, an identity the
//! upper-case bech32 `AGE-SECRET-KEY-1...` of its secret scalar (the
//! age-encryption.org/v1 format). Only what SOPS needs around it: parse,
//! derive the recipient of an identity, generate one.

use bech32::{Bech32, Hrp};
use curve25519_dalek::montgomery::MontgomeryPoint;

use super::EncryptionError;

const RECIPIENT_HRP: &str = "age";
const IDENTITY_HRP: &str = "age-secret-key-";

fn decode(s: &str, hrp: &str) -> Result<[u8; 32], String> {
    let (got, data) = bech32::decode(s).map_err(|e| e.to_string())?;
    if got.as_str().to_ascii_lowercase() != hrp {
        return Err(format!("it starts {:?}, not {hrp:?}", got.as_str()));
    }
    data.try_into().map_err(|d: Vec<u8>| format!("it holds {} bytes, not 32", d.len()))
}

fn encode(hrp: &str, key: &[u8; 32]) -> String {
    // Both prefixes are valid bech32 HRPs and a 32-byte key fits the
    // checksum's length, so encoding cannot fail.
    let hrp = Hrp::parse(hrp).expect("a constant bech32 prefix");
    bech32::encode::<Bech32>(hrp, key).expect("32 bytes fit bech32")
}

/// An age X25519 recipient, in its canonical `age1...` form.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Recipient(String);

impl Recipient {
    /// Parses `age1...`; `source_name` says where it came from, for the
    /// error (`age.recipients.publicKeys[0]`).
    pub fn parse(source_name: &str, value: &str) -> Result<Self, EncryptionError> {
        let refuse = |why: String| EncryptionError::Recipient {
            source_name: source_name.to_owned(),
            value: value.to_owned(),
            why,
        };
        let trimmed = value.trim();
        if trimmed.chars().any(|c| c.is_ascii_uppercase()) {
            return Err(refuse("a recipient is lower case".into()));
        }
        let key = decode(trimmed, RECIPIENT_HRP).map_err(refuse)?;
        Ok(Recipient(encode(RECIPIENT_HRP, &key)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Recipient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An age X25519 identity (a secret key). Never printed: `Debug` shows only
/// its recipient.
#[derive(Clone)]
pub struct Identity([u8; 32]);

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Identity").field(&self.recipient().0).finish()
    }
}

impl Identity {
    /// Parses `AGE-SECRET-KEY-1...`; `entry` names where it came from.
    pub fn parse(entry: &str, value: &str) -> Result<Self, EncryptionError> {
        let trimmed = value.trim();
        if trimmed.chars().any(|c| c.is_ascii_lowercase()) {
            return Err(EncryptionError::Identity { entry: entry.to_owned(), why: "an identity is upper case".into() });
        }
        decode(trimmed, IDENTITY_HRP)
            .map(Identity)
            .map_err(|why| EncryptionError::Identity { entry: entry.to_owned(), why })
    }

    /// A fresh identity from the operating system's randomness.
    pub fn generate() -> Result<Self, EncryptionError> {
        let mut key = [0u8; 32];
        getrandom::getrandom(&mut key)
            .map_err(|e| EncryptionError::Config(format!("no randomness for a new age key: {e}")))?;
        Ok(Identity(key))
    }

    /// Its recipient: the X25519 public key of the (clamped) scalar.
    pub fn recipient(&self) -> Recipient {
        Recipient(encode(RECIPIENT_HRP, &MontgomeryPoint::mul_base_clamped(self.0).to_bytes()))
    }

    /// The `AGE-SECRET-KEY-1...` line, as age-keygen writes it.
    pub fn to_secret_string(&self) -> String {
        encode(IDENTITY_HRP, &self.0).to_ascii_uppercase()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A pair age-keygen (age 1.x) made; `age-keygen -y` printed the
    // recipient. Fresh pairs are checked against the real CLI in
    // tests/encryption.rs.
    const IDENTITY: &str = "AGE-SECRET-KEY-1LKKGPM5CJ2F6KGA49MPJ8HMP0Z82QRZWVRK6UWATZU32358JANPQF0GDYC";
    const RECIPIENT: &str = "age1ddy402qvsvamkzfc67uan7zw2cjafyd3me20tjhcphnkn6cgyfps2s3z0t";

    #[test]
    fn an_identity_derives_its_recipient_and_round_trips() {
        let id = Identity::parse("k.agekey", IDENTITY).unwrap();
        assert_eq!(id.recipient().as_str(), RECIPIENT);
        assert_eq!(id.to_secret_string(), IDENTITY);
        assert_eq!(Recipient::parse("publicKeys[0]", &format!(" {RECIPIENT}\n")).unwrap().as_str(), RECIPIENT);
        let fresh = Identity::generate().unwrap();
        assert_eq!(Identity::parse("x", &fresh.to_secret_string()).unwrap().recipient(), fresh.recipient());
        assert!(!format!("{fresh:?}").contains("AGE-SECRET-KEY"), "Debug never shows the secret");
    }

    #[test]
    fn what_is_not_a_key_is_refused_naming_where_it_came_from() {
        let e = Recipient::parse("age.recipients.publicKeys[1]", "age1notakey").unwrap_err().to_string();
        assert!(e.contains("age.recipients.publicKeys[1]") && e.contains("not an age recipient"), "{e}");
        // An identity is not a recipient, nor the other way round.
        assert!(Recipient::parse("p", &IDENTITY.to_lowercase()).is_err());
        assert!(Identity::parse("k.agekey", &RECIPIENT.to_uppercase()).is_err());
        // One character changed: the checksum fails.
        let tampered = RECIPIENT.replace("ddy4", "ddy5");
        assert!(Recipient::parse("p", &tampered).is_err());
        let e = Identity::parse("2026123.agekey", "AGE-SECRET-KEY-1QQQQ").unwrap_err().to_string();
        assert!(e.contains("2026123.agekey"), "{e}");
    }
}
