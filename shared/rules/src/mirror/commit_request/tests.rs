use super::*;

fn cond<'a>(status: &'a Value, ty: &str) -> &'a Value {
    status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == ty).unwrap()
}

fn flush(events: usize, carried: Option<Carried>, due: bool) -> Flush {
    Flush { events, carried, push_error: None, due }
}

#[test]
fn the_message_is_verbatim_and_cut_to_1024_bytes_on_a_character_boundary() {
    let spec = |m: &str| Spec { message: Some(m.into()), ..Default::default() };
    assert_eq!(spec("Save: rotate keys\n\nBody line").message().as_deref(), Some("Save: rotate keys\n\nBody line"));
    assert_eq!(spec("").message(), None, "empty keeps the generated message");
    // 1023 ASCII bytes then a 3-byte character: the cut may not split it.
    let long = format!("{}€€", "a".repeat(1023));
    assert_eq!(spec(&long).message().unwrap(), "a".repeat(1023));
    assert_eq!(Spec { close_delay_seconds: Some(900), ..Default::default() }.close_delay_seconds(), 300);
    assert_eq!(Spec { close_delay_seconds: Some(-5), ..Default::default() }.close_delay_seconds(), 0);
}

#[test]
fn a_window_of_the_requester_ends_the_request_whenever_it_flushes() {
    let sha = "0123abcd".to_string();
    assert_eq!(
        decide(&flush(2, Some(Carried::Committed(sha.clone())), false)),
        Some(Finalize::Committed { sha: sha.clone() })
    );
    assert_eq!(decide(&flush(1, Some(Carried::AlreadyPresent), false)), Some(Finalize::AlreadyPresent));
    // Someone else's window before finalizeAt: keep waiting for ours.
    assert_eq!(decide(&flush(3, Some(Carried::NoOpenWindow), false)), None);
    // At finalizeAt the last flush decides.
    assert_eq!(decide(&flush(3, Some(Carried::NoOpenWindow), true)), Some(Finalize::WindowMismatch));
    assert_eq!(decide(&flush(0, Some(Carried::NoOpenWindow), true)), Some(Finalize::NoWindowInGrace));
    // A push that failed is a failure, the commit named.
    let failed =
        decide(&Flush { push_error: Some("remote gone".into()), ..flush(1, Some(Carried::Committed(sha)), false) });
    assert!(
        matches!(failed, Some(Finalize::Failed { why }) if why.contains("0123abcd") && why.contains("remote gone"))
    );
    // A sidecar that says nothing about the request fails it when due.
    assert_eq!(decide(&flush(1, None, false)), None);
    assert!(matches!(decide(&flush(1, None, true)), Some(Finalize::Failed { .. })));
}

#[test]
fn the_status_follows_the_references_conditions() {
    let who = Attribution::Resolved("alice".into());
    let waiting = status(&[], 1, &who, None, "main", "2026-12-04T10:00:00Z");
    assert_eq!(cond(&waiting, "Ready")["status"], "False");
    assert_eq!(cond(&waiting, "Ready")["reason"], WAITING_FOR_CLOSE_DELAY);
    assert_eq!(cond(&waiting, "Reconciling")["status"], "True");
    assert_eq!(cond(&waiting, "Pushed")["status"], "Unknown");
    assert_eq!(cond(&waiting, AUTHOR_ATTRIBUTED)["status"], "True");
    assert_eq!(cond(&waiting, AUTHOR_ATTRIBUTED)["reason"], ATTRIBUTED_FROM_AUDIT);
    assert!(waiting.get("branch").is_none() && waiting.get("sha").is_none());

    let previous: Vec<Condition> = serde_json::from_value(waiting["conditions"].clone()).unwrap();
    assert!(!is_terminal(&previous));
    let done =
        status(&previous, 1, &who, Some(&Finalize::Committed { sha: "abc".into() }), "main", "2026-12-04T10:00:09Z");
    assert_eq!(done["sha"], "abc");
    assert_eq!(done["branch"], "main");
    assert_eq!(cond(&done, "Ready")["status"], "True");
    assert_eq!(cond(&done, "Ready")["reason"], COMMITTED);
    assert_eq!(cond(&done, "Pushed")["status"], "True");
    // AuthorAttributed did not change: it keeps its transition time.
    assert_eq!(cond(&done, AUTHOR_ATTRIBUTED)["lastTransitionTime"], "2026-12-04T10:00:00Z");
    assert_eq!(cond(&done, "Ready")["lastTransitionTime"], "2026-12-04T10:00:09Z");
    let done: Vec<Condition> = serde_json::from_value(done["conditions"].clone()).unwrap();
    assert!(is_terminal(&done));

    // A benign no-commit is Ready=True, Pushed=False; a failure is Stalled.
    let none = status(&[], 2, &Attribution::Unresolved, Some(&Finalize::NoWindowInGrace), "main", "t");
    assert_eq!(cond(&none, "Ready")["status"], "True");
    assert_eq!(cond(&none, "Ready")["reason"], NO_WINDOW_IN_GRACE);
    assert_eq!(cond(&none, "Pushed")["status"], "False");
    assert_eq!(cond(&none, AUTHOR_ATTRIBUTED)["reason"], COMMITTER_FALLBACK);
    assert_eq!(cond(&none, "Ready")["observedGeneration"], 2);
    let failed = status(&[], 1, &who, Some(&Finalize::Failed { why: "boom".into() }), "main", "t");
    assert_eq!(cond(&failed, "Stalled")["status"], "True");
    assert_eq!(cond(&failed, "Ready")["status"], "False");
    assert_eq!(cond(&failed, "Ready")["reason"], FINALIZE_FAILED);
    assert!(failed.get("sha").is_none());
}

#[test]
fn an_unresolved_requester_matches_only_unattributed_changes() {
    assert_eq!(Attribution::Resolved("alice".into()).author(), "alice");
    assert_eq!(Attribution::Unresolved.author(), "");
    assert_eq!(Attribution::NotAttempted.author(), "");
    assert_eq!(Carried::parse("Committed", ""), None, "a commit without an id is no commit");
    assert_eq!(Carried::parse("Committed", "ab"), Some(Carried::Committed("ab".into())));
    assert_eq!(Carried::parse("", ""), None);
}
