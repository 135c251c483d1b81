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
