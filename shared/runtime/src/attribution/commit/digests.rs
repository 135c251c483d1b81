//! The digests of live objects' documents, remembered by object uid and
//! resourceVersion: an object whose resourceVersion has not moved renders
//! to the same document, so a relist of an unchanged type hashes nothing
//! again. Filled when an object's file is created and when a reconcile
//! renders it; each type's entries are replaced by the live ones at a
//! reconcile of the whole type, so they follow the cluster, not its past.

use std::collections::HashMap;

use git2::Oid;
use rules::attribution::render::ObjectKey;

/// At most this many entries a type; past it the type's entries are
/// forgotten (only a digest is recomputed: nothing else depends on them).
const MAX_PER_TYPE: usize = 250_000;

/// An object's identity and version: (uid, resourceVersion), both as the
/// API server writes them (a uuid, a decimal); `None` for anything else,
/// which is then never remembered.
pub(super) fn stamp(object: &serde_json::Value) -> Option<(u128, u64)> {
    let meta = object.get("metadata")?;
    let uid = uid_bits(meta.get("uid")?.as_str()?)?;
    let rv = meta.get("resourceVersion")?.as_str()?.parse().ok()?;
    Some((uid, rv))
}

/// A uuid's 32 hex digits as a number, dashes skipped (read once for every
/// object of every relist: no string is built for it).
fn uid_bits(uid: &str) -> Option<u128> {
    let mut bits = 0u128;
    let mut digits = 0;
    for c in uid.chars().filter(|c| *c != '-') {
        bits = (bits << 4) | u128::from(c.to_digit(16)?);
        digits += 1;
        if digits > 32 {
            return None;
        }
    }
    (digits == 32).then_some(bits)
}

/// The digest remembered for an object at `stamp`, if its version has not moved.
pub(super) fn unmoved(of_type: &HashMap<u128, (u64, Oid)>, (uid, rv): (u128, u64)) -> Option<Oid> {
    let (held, digest) = of_type.get(&uid)?;
    (*held == rv).then_some(*digest)
}

#[derive(Debug, Default)]
pub(super) struct Digests {
    /// `group/version/resource` → uid → (resourceVersion, digest).
    by_type: HashMap<String, HashMap<u128, (u64, Oid)>>,
}

fn type_id(key: &ObjectKey) -> String {
    format!("{}/{}/{}", key.group, key.version, key.resource)
}

impl Digests {
    /// The remembered digest of `object`'s document, if its version has not moved.
    #[cfg(test)]
    pub(super) fn get(&self, key: &ObjectKey, object: &serde_json::Value) -> Option<Oid> {
        unmoved(self.of_type(key)?, stamp(object)?)
    }

    /// The digests remembered for `key`'s type (a reconcile's objects are
    /// all of one type: its lookups need not name it each time).
    pub(super) fn of_type(&self, key: &ObjectKey) -> Option<&HashMap<u128, (u64, Oid)>> {
        self.by_type.get(&type_id(key))
    }

    /// The digest remembered for `object`'s uid, whatever version it was
    /// remembered at: the document last rendered for the object.
    pub(super) fn held(&self, key: &ObjectKey, object: &serde_json::Value) -> Option<Oid> {
        let (uid, _) = stamp(object)?;
        self.by_type.get(&type_id(key))?.get(&uid).map(|(_, digest)| *digest)
    }

    pub(super) fn remember(&mut self, key: &ObjectKey, object: &serde_json::Value, digest: Oid) {
        let Some((uid, rv)) = stamp(object) else { return };
        let of_type = self.by_type.entry(type_id(key)).or_default();
        if of_type.len() >= MAX_PER_TYPE {
            of_type.clear();
        }
        of_type.insert(uid, (rv, digest));
    }

    /// What a reconcile digested. A reconcile of the `whole` type saw
    /// every object of it: the type's entries become these (a vanished
    /// object's entry goes); a reconcile of some namespaces adds them.
    pub(super) fn add_type(&mut self, key: &ObjectKey, seen: HashMap<u128, (u64, Oid)>, whole: bool) {
        if whole {
            self.by_type.insert(type_id(key), seen);
            return;
        }
        let of_type = self.by_type.entry(type_id(key)).or_default();
        if of_type.len() + seen.len() > MAX_PER_TYPE {
            of_type.clear();
        }
        of_type.extend(seen);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key() -> ObjectKey {
        ObjectKey {
            version: "v1".into(),
            resource: "configmaps".into(),
            namespace: "shop".into(),
            name: "web".into(),
            ..ObjectKey::default()
        }
    }

    fn object(rv: &str) -> serde_json::Value {
        json!({"metadata": {"name": "web", "uid": "0f8fad5b-d9cb-469f-a165-70867728950e", "resourceVersion": rv}})
    }

    #[test]
    fn a_digest_is_remembered_until_the_resource_version_moves() {
        let mut d = Digests::default();
        let digest = Oid::hash_object(git2::ObjectType::Blob, b"x").unwrap();
        assert_eq!(d.get(&key(), &object("7")), None);
        d.remember(&key(), &object("7"), digest);
        assert_eq!(d.get(&key(), &object("7")), Some(digest));
        assert_eq!(d.get(&key(), &object("8")), None, "a new version renders anew");
        assert_eq!(d.held(&key(), &object("8")), Some(digest), "the last document rendered for the object");
        let other_version = ObjectKey { version: "v2".into(), ..key() };
        assert_eq!(d.get(&other_version, &object("7")), None, "another API version renders another document");
        d.add_type(&key(), HashMap::new(), true);
        assert_eq!(d.get(&key(), &object("7")), None, "gone from the live list, forgotten");
        assert_eq!(d.held(&key(), &object("7")), None);
        // No uid or a non-numeric version: never remembered.
        d.remember(&key(), &json!({"metadata": {"resourceVersion": "7"}}), digest);
        assert!(stamp(&json!({"metadata": {"uid": "x", "resourceVersion": "7"}})).is_none());
    }

    #[test]
    fn a_uid_reads_as_its_32_hex_digits() {
        let uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
        assert_eq!(uid_bits(uuid), Some(0x0f8fad5b_d9cb_469f_a165_70867728950e));
        assert_eq!(uid_bits(&uuid.to_uppercase()), uid_bits(uuid));
        assert_eq!(uid_bits(&uuid.replace('-', "")), uid_bits(uuid), "dashes are not digits");
        assert_eq!(uid_bits("ffffffff-ffff-ffff-ffff-ffffffffffff"), Some(u128::MAX));
        for not_one in ["", "x", &uuid[1..], &format!("{uuid}0"), &uuid.replace('f', "g"), &format!("+{}", &uuid[1..])]
        {
            assert_eq!(uid_bits(not_one), None, "{not_one}");
        }
    }
}
