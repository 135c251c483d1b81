use std::time::{Duration, UNIX_EPOCH};

use super::*;
use crate::attribution::commit::Action;
use crate::attribution::{ActorKind, Tier};

fn who(name: &str) -> Option<ResolvedAuthor> {
    Some(ResolvedAuthor {
        username: name.into(),
        display_name: String::new(),
        email: String::new(),
        actor_kind: ActorKind::of(name),
    })
}

fn change(author: Option<ResolvedAuthor>, name: &str) -> Change {
    Change {
        action: Action::Delete,
        object: ObjectKey {
            group: String::new(),
            version: "v1".into(),
            resource: "configmaps".into(),
            namespace: "ns".into(),
            name: name.into(),
        },
        author,
        tier: Tier::Exact,
        audit_id: Some(format!("audit-{name}")),
        observed_at: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
    }
}

fn shape(groups: &[CommitGroup]) -> Vec<(Option<String>, Vec<usize>)> {
    groups.iter().map(|g| (g.author.as_ref().map(|a| a.username.clone()), g.changes.clone())).collect()
}

#[test]
fn one_commit_per_author_ordered_by_first_change() {
    let window = [
        change(who("alice"), "a"),
        change(who("bob"), "b"),
        change(None, "u"),
        change(who("alice"), "c"),
        change(who("bob"), "d"),
        change(None, "v"),
    ];
    assert_eq!(
        shape(&plan_commits(&window)),
        vec![(Some("alice".into()), vec![0, 3]), (Some("bob".into()), vec![1, 4]), (None, vec![2, 5]),]
    );
}

#[test]
fn a_change_never_overtakes_another_authors_earlier_change_to_the_same_object() {
    // alice X, bob X, alice X: alice's second edit must come after bob's.
    let window = [
        change(who("alice"), "x"),
        change(who("bob"), "x"),
        change(who("alice"), "x"),
        change(who("alice"), "y"),
        change(who("bob"), "z"),
    ];
    assert_eq!(
        shape(&plan_commits(&window)),
        vec![(Some("alice".into()), vec![0]), (Some("bob".into()), vec![1, 4]), (Some("alice".into()), vec![2, 3]),]
    );
}

#[test]
fn same_author_same_object_stays_in_one_commit() {
    let window = [change(who("alice"), "x"), change(who("alice"), "x")];
    assert_eq!(shape(&plan_commits(&window)), vec![(Some("alice".into()), vec![0, 1])]);
    assert!(plan_commits(&[]).is_empty());
}

proptest::proptest! {
    /// Every change lands in exactly one commit, and each object's changes
    /// stay in event order across commits.
    #[test]
    fn plan_keeps_every_change_and_per_object_order(
        events in proptest::collection::vec((0u8..3, 0u8..4), 0..40)
    ) {
        let names = ["alice", "bob", "carol"];
        let window: Vec<Change> = events
            .iter()
            .map(|(a, o)| change(who(names[*a as usize]), &format!("o{o}")))
            .collect();
        let plan = plan_commits(&window);
        let order: Vec<usize> = plan.iter().flat_map(|g| g.changes.clone()).collect();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        proptest::prop_assert_eq!(sorted, (0..window.len()).collect::<Vec<_>>());
        for g in &plan {
            for &i in &g.changes {
                proptest::prop_assert_eq!(&window[i].author, &g.author);
            }
        }
        for o in 0..4 {
            let name = format!("o{o}");
            let seq: Vec<usize> = order.iter().copied().filter(|&i| window[i].object.name == name).collect();
            proptest::prop_assert!(seq.windows(2).all(|w| w[0] < w[1]), "object {} reordered: {:?}", name, seq);
        }
        // No more commits than needed when authors never cross on an object.
        let authors: std::collections::HashSet<_> = window.iter().map(|c| c.author.clone()).collect();
        proptest::prop_assert!(plan.len() >= authors.len());
    }
}

#[test]
fn author_prefers_display_name_and_email_from_the_fact() {
    let full = ResolvedAuthor {
        username: "oidc:alice".into(),
        display_name: "Alice Example".into(),
        email: "alice@example.com".into(),
        actor_kind: ActorKind::User,
    };
    assert_eq!(author_identity(Some(&full)), Identity::new("Alice Example", "alice@example.com"));
    let bare = ResolvedAuthor { display_name: String::new(), email: String::new(), ..full.clone() };
    let id = author_identity(Some(&bare));
    assert_eq!(id.name, "oidc:alice");
    assert_eq!(id.email, noreply_email("oidc:alice"));
    // Angle brackets would break the signature; they are dropped.
    let odd = ResolvedAuthor { display_name: "Eve <root>".into(), ..bare };
    assert_eq!(author_identity(Some(&odd)).name, "Eve root");
}

#[test]
fn unresolved_is_authored_exactly_unknown() {
    let id = author_identity(None);
    assert_eq!(id.name, "unknown (attribution unresolved)");
    assert_eq!(id.email, UNRESOLVED_AUTHOR_EMAIL);
    let empty = ResolvedAuthor {
        username: " ".into(),
        display_name: "x".into(),
        email: "x@y".into(),
        actor_kind: ActorKind::None,
    };
    assert_eq!(author_identity(Some(&empty)).name, UNRESOLVED_AUTHOR_NAME);
}

#[test]
fn noreply_email_is_deterministic_readable_and_distinct() {
    assert_eq!(noreply_email("alice"), "alice@users.noreply.reverser.invalid");
    let admin = noreply_email("system:admin");
    assert!(admin.starts_with("system-admin-"), "{admin}");
    assert!(admin.ends_with("@users.noreply.reverser.invalid"));
    assert_eq!(admin, noreply_email("system:admin"));
    assert_ne!(admin, noreply_email("system-admin"));
    assert_ne!(noreply_email("Alice"), noreply_email("alice"));
    let sa = noreply_email("system:serviceaccount:kube-system:deployment-controller");
    let local = sa.split('@').next().unwrap();
    assert!(local.len() <= 48 + 9, "{sa}");
    assert!(local.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)));
    assert!(noreply_email("").starts_with("user-"));
    assert!(noreply_email("üñí").starts_with("user-"));
}

#[test]
fn message_carries_one_tier_and_audit_trailer_per_change() {
    let a = change(who("alice"), "a");
    let mut b = change(who("alice"), "b");
    b.tier = Tier::DeleteSticky;
    b.audit_id = Some("id\nInjected: x".into());
    let mut c = change(who("alice"), "c");
    c.audit_id = None;
    let applied = [
        Applied { effect: Effect::Create, path: "core/v1/configmaps/ns/a.yaml", change: &a },
        Applied { effect: Effect::Delete, path: "core/v1/configmaps/ns/b.yaml", change: &b },
        Applied { effect: Effect::Delete, path: "core/v1/configmaps/ns/c.yaml", change: &c },
    ];
    let msg = commit_message(a.author.as_ref(), &applied);
    assert!(msg.starts_with("3 changes: 1 create, 2 delete\n\n"), "{msg}");
    assert!(
        msg.ends_with(
            "Reverser-Actor: alice\n\
         Reverser-Tier: exact\n\
         Reverser-Audit-ID: audit-a\n\
         Reverser-Tier: delete_sticky\n\
         Reverser-Audit-ID: id Injected: x\n\
         Reverser-Tier: exact\n"
        ),
        "{msg}"
    );
    let one = commit_message(None, &applied[..1]);
    assert!(one.starts_with("create core/v1/configmaps/ns/a.yaml\n\n"), "{one}");
    assert!(!one.contains("Reverser-Actor"));
}

// "An author with NUL, control characters, `<`, `>`, newlines or 10 KB must
// still produce a valid commit."
#[test]
fn any_username_gives_an_identity_git_takes_as_is() {
    let who = |u: &str| {
        author_identity(Some(&ResolvedAuthor {
            username: u.into(),
            display_name: String::new(),
            email: String::new(),
            actor_kind: ActorKind::of(u),
        }))
    };
    let long = "x".repeat(10 * 1024);
    for u in ["ali\0ce", "bob\x1b[31m", "<eve>", "mal\nlory", long.as_str(), "...<>", "\0\n\x1b", "  ,.;:\"'\\  "] {
        let id = who(u);
        for s in [&id.name, &id.email] {
            assert!(!s.is_empty(), "{u:?}");
            assert!(!s.chars().any(|c| c.is_control() || c == '<' || c == '>'), "{u:?} -> {s:?}");
            assert!(s.chars().count() <= MAX_IDENT_CHARS + 1, "{u:?}");
            let (first, last) = (s.chars().next().unwrap(), s.chars().last().unwrap());
            assert!(!is_crud(first) && !is_crud(last), "{u:?} -> {s:?}: git would trim it");
        }
    }
    assert_eq!(who("ali\0ce").name, "alice");
    // Nothing printable: the no-reply local part still names this actor.
    assert!(who("...<>").name.starts_with("user-"), "{:?}", who("...<>"));
    assert_ne!(who("...<>").name, who("\0\n\x1b").name);
}
