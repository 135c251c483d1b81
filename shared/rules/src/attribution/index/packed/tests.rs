use proptest::prelude::*;

use super::PackedFacts;
use crate::attribution::Fact;

/// Strings of every form the packer treats apart, and near misses of each.
fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "[0-9A-F]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "[0-9]{1,20}",
        "0[0-9]{1,3}",
        "20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T[01][0-9]:[0-5][0-9]:[0-5][0-9]\\.[0-9]{6}Z",
        "20[0-9]{2}-0[1-9]-1[0-9]T[01][0-9]:[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?(Z|\\+01:00)",
        Just("system:admin".to_owned()),
        Just("kube-system".to_owned()),
        ".{0,40}",
    ]
}

fn fact() -> impl Strategy<Value = Fact> {
    (prop::collection::vec(field(), 11), prop::option::of(prop::collection::vec(field(), 0..4))).prop_map(
        |(f, uids)| Fact {
            author: f[0].clone(),
            namespace: f[1].clone(),
            name: f[2].clone(),
            uid: f[3].clone(),
            resource_version: f[4].clone(),
            display_name: f[5].clone(),
            email: f[6].clone(),
            verb: f[7].clone(),
            audit_id: f[8].clone(),
            stage_timestamp: f[9].clone(),
            label_selector: f[10].clone(),
            uids,
        },
    )
}

proptest! {
    #[test]
    fn every_batch_reads_back_exactly_as_packed(facts in prop::collection::vec(fact(), 0..20)) {
        let packed = PackedFacts::pack(&facts);
        prop_assert_eq!(packed.len(), facts.len());
        prop_assert_eq!(packed.unpack(), facts);
    }
}

#[test]
fn repeated_strings_are_written_once() {
    let f = |i: usize| Fact {
        author: "system:serviceaccount:kube-system:replicaset-controller".into(),
        namespace: "production".into(),
        name: format!("web-{i}"),
        uid: format!("0c7f3a52-1b9e-4d2a-8f61-{i:012x}"),
        resource_version: format!("{}", 1_000_000 + i),
        verb: "update".into(),
        audit_id: format!("9d1e7b40-22c5-4a8e-b7f3-{i:012x}"),
        stage_timestamp: "2026-11-29T12:00:00.123456Z".into(),
        ..Fact::default()
    };
    let facts: Vec<Fact> = (0..100).map(f).collect();
    let packed = PackedFacts::pack(&facts);
    assert_eq!(packed.unpack(), facts);
    let per_fact = packed.bytes.len() / facts.len();
    assert!(per_fact < 60, "{per_fact} bytes per fact");
}
