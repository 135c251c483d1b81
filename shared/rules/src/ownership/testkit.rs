//! Test builders shared by the ownership unit tests.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;

use super::decision::{Artifact, OwnerInfo};
use super::types::{ArtifactKind, Task, task_owner_ref};

pub fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

pub fn oref(name: &str, controller: bool) -> OwnerReference {
    task_owner_ref(name, &format!("uid-{name}"), controller)
}

pub fn owner(name: &str, created: i64, surviving: bool) -> OwnerInfo {
    OwnerInfo { name: name.into(), uid: format!("uid-{name}"), created: Some(ts(created)), surviving }
}

pub fn issue(name: &str, refs: Vec<OwnerReference>) -> Artifact {
    Artifact {
        kind: ArtifactKind::Issue,
        name: name.into(),
        resource_version: Some("7".into()),
        owner_references: refs,
        repository_ref: "repo".into(),
        number: 1,
        state: Some("open".into()),
        author: None,
        head_branch: None,
    }
}

pub fn mr(name: &str, refs: Vec<OwnerReference>, author: &str, branch: &str) -> Artifact {
    Artifact {
        kind: ArtifactKind::MergeRequest,
        author: Some(author.into()),
        head_branch: Some(branch.into()),
        ..issue(name, refs)
    }
}

pub fn task(name: &str, created: i64) -> Task {
    let mut t = Task::default();
    t.metadata.name = Some(name.into());
    t.metadata.uid = Some(format!("uid-{name}"));
    t.metadata.resource_version = Some("3".into());
    t.metadata.creation_timestamp = Some(Time(ts(created)));
    t.spec.project_ref = "proj".into();
    t.spec.goal = "g".into();
    t.status_mut().state = Some("new".into());
    t
}

pub fn with_state(mut t: Task, state: &str, park: Option<&str>) -> Task {
    t.status_mut().state = Some(state.into());
    t.status_mut().park_reason = park.map(str::to_string);
    t
}
