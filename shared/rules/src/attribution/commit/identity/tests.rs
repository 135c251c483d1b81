use super::*;
use crate::attribution::ActorKind;

fn author(username: &str, display_name: &str, email: &str) -> ResolvedAuthor {
    ResolvedAuthor {
        username: username.into(),
        display_name: display_name.into(),
        email: email.into(),
        actor_kind: ActorKind::of(username),
    }
}

#[test]
fn a_bare_username_gets_the_cluster_local_noreply_address() {
    // commit_test.go:252-272 (TestCommitOptionsFor_NonEmptyAuthorIsHonored).
    assert_eq!(author_identity(Some(&author("alice", "", ""))), Identity::new("alice", "alice@noreply.cluster.local"));
}

#[test]
fn oidc_display_name_and_email_are_honoured() {
    // commit_test.go:274-292.
    let a = author("https://keycloak/realms/cozy#simon", "Simon Koudijs", "something@configbutler.ai");
    assert_eq!(author_identity(Some(&a)), Identity::new("Simon Koudijs", "something@configbutler.ai"));
}

#[test]
fn unusable_oidc_fields_fall_back_to_the_username() {
    // commit_test.go:294-330 (TestCommitOptionsFor_UnusableOIDCFieldsFallBackToUsername).
    let cases = [
        ("newline in display name", "Simon\nKoudijs", "something@configbutler.ai"),
        ("angle brackets in display name", "Simon <root>", "something@configbutler.ai"),
        ("whitespace-only display name", "   ", "something@configbutler.ai"),
        ("non-email in email claim", "Simon Koudijs", "not-an-email"),
    ];
    for (name, display, email) in cases {
        let id = author_identity(Some(&author("alice", display, email)));
        assert!(!id.name.contains('\n') && !id.name.contains('<'), "{name}: {id:?}");
        assert!(is_valid_email(&id.email), "{name}: {id:?}");
    }
    // And exactly what the reference falls back to.
    assert_eq!(author_identity(Some(&author("alice", "Simon <root>", ""))).name, "alice");
    assert_eq!(
        author_identity(Some(&author("alice", "Simon Koudijs", "not-an-email"))).email,
        "alice@noreply.cluster.local"
    );
}

#[test]
fn the_username_is_cleaned_as_the_reference_cleans_it() {
    // commit.go:256-271 (ConstructSafeEmail), its cases spelled out.
    let cases = [
        ("alice", "alice@noreply.cluster.local"),
        ("Alice", "alice@noreply.cluster.local"),
        ("alice@example.com", "alice@example.com"),
        ("Bob.Smith@Example.org", "Bob.Smith@Example.org"),
        ("system:admin", "systemadmin@noreply.cluster.local"),
        (
            "system:serviceaccount:kube-system:deployment-controller",
            "systemserviceaccountkube-systemdeployment-controller@noreply.cluster.local",
        ),
        ("oidc:alice_smith", "oidcalicesmith@noreply.cluster.local"),
        ("https://keycloak/realms/cozy#simon", "httpskeycloakrealmscozysimon@noreply.cluster.local"),
        ("user@localhost", "userlocalhost@noreply.cluster.local"),
        ("üñí", "unknown-user@noreply.cluster.local"),
        ("", "unknown-user@noreply.cluster.local"),
    ];
    for (username, want) in cases {
        assert_eq!(noreply_email(username), want, "{username:?}");
    }
}

#[test]
fn the_email_check_is_the_reference_regex() {
    // commit.go:220: ^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$
    for ok in ["a@b.cd", "first.last+tag@sub.example.com", "x%y@h-1.io", "a@b..cd"] {
        assert!(is_valid_email(ok), "{ok}");
    }
    for bad in ["", "a", "a@b", "a@b.c", "a@@b.cd", "a b@c.de", "a@b.c1", "@b.cd", "a@.cd", "ü@b.cd", "a@b.cd "] {
        assert!(!is_valid_email(bad), "{bad}");
    }
}

#[test]
fn unresolved_is_authored_exactly_as_the_reference_sentinel() {
    // types.go:97-101.
    let id = author_identity(None);
    assert_eq!(id, Identity::new("unknown (attribution unresolved)", "attribution-unresolved@gitops-reverser.invalid"));
    let empty = ResolvedAuthor { actor_kind: ActorKind::None, ..author(" ", "x", "x@y.zz") };
    assert_eq!(author_identity(Some(&empty)), id);
}

// "An author with NUL, control characters, `<`, `>`, newlines or 10 KB must
// still produce a valid commit."
#[test]
fn any_username_gives_an_identity_git_takes_as_is() {
    let who = |u: &str| author_identity(Some(&author(u, "", "")));
    let long = "x".repeat(10 * 1024);
    for u in
        ["ali\0ce", "bob\x1b[31m", "<eve>", "mal\nlory", long.as_str(), "...<>", "\0\n\x1b", "  ,.;:\"'\\  ", ".alice."]
    {
        let id = who(u);
        for s in [&id.name, &id.email] {
            assert!(!s.is_empty(), "{u:?}");
            assert!(!s.chars().any(|c| c.is_control() || c == '<' || c == '>'), "{u:?} -> {s:?}");
            assert!(s.chars().count() <= MAX_IDENT_CHARS + 1, "{u:?}");
            let (first, last) = (s.chars().next().unwrap(), s.chars().last().unwrap());
            assert!(!is_crud(first) && !is_crud(last), "{u:?} -> {s:?}: git would trim it");
        }
        assert!(is_valid_email(&id.email), "{u:?} -> {:?}", id.email);
    }
    assert_eq!(who("ali\0ce"), Identity::new("alice", "alice@noreply.cluster.local"));
    // Nothing printable: the reference's unknown-user stands in.
    assert_eq!(who("...<>"), Identity::new("unknown-user", "unknown-user@noreply.cluster.local"));
    assert_eq!(who(".alice.").email, "alice@noreply.cluster.local");
}

#[test]
fn configured_author_mode_authors_every_commit_as_the_committer() {
    // cmd/main.go:517-520: "When false, every commit is authored by the
    // configured committer identity (configured-author mode)".
    let committer = Identity::new("Lab Mirror", "mirror@lab.invalid");
    let alice = author("alice", "", "");
    assert_eq!(commit_author(AuthorMode::Configured, Some(&alice), &committer), committer);
    assert_eq!(commit_author(AuthorMode::Configured, None, &committer), committer);
    // Attribution on: the actor, and no actor is the unresolved author, never the committer.
    assert_eq!(commit_author(AuthorMode::Attributed, Some(&alice), &committer), author_identity(Some(&alice)));
    assert_eq!(
        commit_author(AuthorMode::Attributed, None, &committer),
        Identity::new(UNRESOLVED_AUTHOR_NAME, UNRESOLVED_AUTHOR_EMAIL)
    );
}
