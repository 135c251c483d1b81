//! The fact: what one audit event asserts about who changed which object.
//! Its JSON is the wire contract of `facts/attribution-wire.md` ("A fact on
//! the wire"): camelCase, empty optional fields omitted, `author` required.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// One fact. The group/resource is not on the fact: it is the stream's (the
/// [`Scope`](super::Scope)'s) own name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fact {
    /// The effective user. Required and non-empty: a fact always names an actor.
    pub author: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub email: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub verb: String,
    /// Never joined on; kept so a wrong author can be traced to its event.
    #[serde(rename = "auditID", default, skip_serializing_if = "String::is_empty")]
    pub audit_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stage_timestamp: String,
    /// Collection facts only: the selector the request URI expressed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
    /// Collection facts only: uids the response body named; absent past the cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uids: Option<Vec<String>>,
}

impl Fact {
    /// Decodes one fact, refusing one that names nobody (`AuthorFact.UnmarshalJSON`).
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        let fact: Fact = serde_json::from_slice(bytes).map_err(Error::FactDecode)?;
        fact.validated()
    }

    /// Decodes a stream entry's `facts` field: a JSON array of facts. One
    /// authorless fact refuses the entry whole.
    pub fn decode_entry(bytes: &[u8]) -> Result<Vec<Self>> {
        let facts: Vec<Fact> = serde_json::from_slice(bytes).map_err(Error::FactDecode)?;
        facts.into_iter().map(Fact::validated).collect()
    }

    /// Encodes facts as a stream entry's `facts` value.
    pub fn encode_entry(facts: &[Fact]) -> String {
        serde_json::to_string(facts).expect("a fact always serializes")
    }

    fn validated(self) -> Result<Self> {
        if self.author.trim().is_empty() {
            return Err(Error::AuthorlessFact);
        }
        Ok(self)
    }

    /// Whether this fact is evidence about a deletion.
    pub fn is_removal(&self) -> bool {
        is_removal_verb(&self.verb)
    }

    /// A collection fact describes a `deletecollection` request, not one object.
    pub fn is_collection(&self) -> bool {
        self.verb == "deletecollection"
    }

    /// Who the evidence named, as the `actor_kind` label reads it.
    pub fn actor_kind(&self) -> ActorKind {
        ActorKind::of(&self.author)
    }
}

/// The removal verbs (`isRemovalVerb`): evidence about a deletion.
pub fn is_removal_verb(verb: &str) -> bool {
    matches!(verb, "delete" | "deletecollection")
}

/// The `actor_kind` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActorKind {
    User,
    #[serde(rename = "serviceaccount")]
    ServiceAccount,
    None,
}

impl ActorKind {
    /// `system:serviceaccount:<ns>:<name>` is a service account; anything else
    /// non-empty is a user; nobody is `none`.
    pub fn of(author: &str) -> Self {
        if author.is_empty() {
            ActorKind::None
        } else if author.starts_with("system:serviceaccount:") {
            ActorKind::ServiceAccount
        } else {
            ActorKind::User
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            ActorKind::User => "user",
            ActorKind::ServiceAccount => "serviceaccount",
            ActorKind::None => "none",
        }
    }
}

/// The `tier` label: which evidence named the author, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    DeleteSticky,
    Exact,
    DeletecollectionBodyUid,
    Latest,
    Name,
    DeletecollectionScope,
    ResourceVersion,
    Absent,
    /// Attribution is off (`--author-attribution=false`, gitops-reverser's
    /// configured-author mode): no fact was looked for, and the configured
    /// committer authors the change. Never an answer of the index.
    Configured,
}

impl Tier {
    pub const ALL: [Tier; 9] = [
        Tier::DeleteSticky,
        Tier::Exact,
        Tier::DeletecollectionBodyUid,
        Tier::Latest,
        Tier::Name,
        Tier::DeletecollectionScope,
        Tier::ResourceVersion,
        Tier::Absent,
        Tier::Configured,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Tier::DeleteSticky => "delete_sticky",
            Tier::Exact => "exact",
            Tier::DeletecollectionBodyUid => "deletecollection_body_uid",
            Tier::Latest => "latest",
            Tier::Name => "name",
            Tier::DeletecollectionScope => "deletecollection_scope",
            Tier::ResourceVersion => "resource_version",
            Tier::Absent => "absent",
            Tier::Configured => "configured",
        }
    }

    /// What a match on this tier asserts (the spec's tier table).
    pub fn asserts(self) -> &'static str {
        match self {
            Tier::DeleteSticky => "who asked for this object's deletion",
            Tier::Exact => "this actor produced this exact version",
            Tier::DeletecollectionBodyUid => "the API server said this request deleted this object",
            Tier::Latest => "this object's own delete fact, or who last wrote it",
            Tier::Name => "a fact filed under namespace + name",
            Tier::DeletecollectionScope => "a collection request covering it was made",
            Tier::ResourceVersion => "a fact with an rv but no uid",
            Tier::Absent => "no usable fact: committer-authored",
            Tier::Configured => "attribution is off: the configured committer authors every change",
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_json_omits_empty_fields_and_uses_wire_names() {
        let f = Fact {
            author: "alice".into(),
            uid: "u1".into(),
            resource_version: "7".into(),
            audit_id: "a-1".into(),
            verb: "update".into(),
            ..Fact::default()
        };
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"author":"alice","uid":"u1","resourceVersion":"7","verb":"update","auditID":"a-1"}"#
        );
    }

    #[test]
    fn decoding_refuses_an_authorless_fact() {
        assert!(matches!(Fact::from_json(br#"{"uid":"u"}"#), Err(Error::FactDecode(_))));
        assert!(matches!(Fact::from_json(br#"{"author":"","uid":"u"}"#), Err(Error::AuthorlessFact)));
        // One authorless fact refuses the whole entry.
        let entry = br#"[{"author":"a","uid":"1"},{"author":"","uid":"2"}]"#;
        assert!(matches!(Fact::decode_entry(entry), Err(Error::AuthorlessFact)));
    }

    #[test]
    fn decoding_tolerates_unknown_fields() {
        let f = Fact::from_json(br#"{"author":"a","future":"x","uids":["1","2"]}"#).unwrap();
        assert_eq!(f.uids.as_deref(), Some(&["1".to_string(), "2".to_string()][..]));
    }

    #[test]
    fn actor_kind_reads_the_service_account_prefix() {
        assert_eq!(ActorKind::of("system:serviceaccount:ns:sa"), ActorKind::ServiceAccount);
        assert_eq!(ActorKind::of("system:admin"), ActorKind::User);
        assert_eq!(ActorKind::of(""), ActorKind::None);
    }
}
