//! The injection rule over one pod template: decide whether it takes the
//! sidecar, then add the sidecar, the socket volume and the watcher's
//! `REVERSER_SOCKET`. Everything else in the pod spec is left as it was.

use serde_norway::{Mapping, Value};

use super::{
    INJECT_KEY, InjectOptions, REDIS_URL_ENV, SIDECAR_NAME, SOCKET_ENV, SidecarMode, VOLUME_NAME, WatcherSelector,
};
use crate::{Error, Result};

/// Why a pod template is left untouched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// It already has a container named `reverser-sidecar`: injecting twice
    /// changes nothing.
    AlreadyInjected,
    /// Its annotation `reverser.dev/inject: disabled` opts it out.
    OptedOut,
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::AlreadyInjected => "already injected",
            Self::OptedOut => "opted out by annotation reverser.dev/inject: disabled",
        })
    }
}

/// What the rule decides for one pod template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Inject,
    Skip(SkipReason),
}

/// The rule: a pod template takes the sidecar unless its annotations opt it
/// out or it already has one. `metadata` is the template's (or the Pod's)
/// metadata, `spec` its pod spec.
pub fn decide(metadata: Option<&Value>, spec: &Value) -> Decision {
    let disabled = metadata
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(INJECT_KEY))
        .and_then(Value::as_str)
        .is_some_and(|v| v.eq_ignore_ascii_case("disabled"));
    if disabled {
        return Decision::Skip(SkipReason::OptedOut);
    }
    let has_sidecar = ["initContainers", "containers"].iter().any(|list| {
        spec.get(list)
            .and_then(Value::as_sequence)
            .is_some_and(|cs| cs.iter().any(|c| name_of(c) == Some(SIDECAR_NAME)))
    });
    if has_sidecar { Decision::Skip(SkipReason::AlreadyInjected) } else { Decision::Inject }
}

/// The sidecar's arguments: `serve --socket <path> --socket-mode=666
/// --audit-listen=off` and the extra ones. The socket lives in an emptyDir
/// only this pod's containers mount, and the watcher usually runs under
/// another uid than the sidecar: mode 0666 lets it connect without forcing a
/// pod fsGroup (which would re-own every volume of the pod). The receiver
/// runs as its own Deployment, so the sidecar in the pod listens for no
/// audit webhook.
pub fn sidecar_args(opts: &InjectOptions) -> Vec<String> {
    let mut args = vec![
        "serve".to_string(),
        "--socket".to_string(),
        opts.socket_path(),
        // `flag=value` forms: a bare `off` or `666` item would be read back as
        // a boolean or a number by YAML 1.1 readers such as kubectl.
        "--socket-mode=666".to_string(),
        "--audit-listen=off".to_string(),
    ];
    args.extend(opts.extra_args.iter().cloned());
    args
}

/// The sidecar container these options describe: `serve --socket <path>
/// --socket-mode=666 --audit-listen=off` plus the extra args, resources, and a restricted security context
/// (non-root, read-only root filesystem, no privilege escalation, all
/// capabilities dropped, the runtime's default seccomp profile).
pub fn sidecar_container(opts: &InjectOptions) -> Value {
    let args = sidecar_args(opts).into_iter().map(Value::from).collect();
    let mut c = Mapping::new();
    c.insert("name".into(), SIDECAR_NAME.into());
    c.insert("image".into(), opts.image.as_str().into());
    c.insert("imagePullPolicy".into(), "IfNotPresent".into());
    c.insert("args".into(), Value::Sequence(args));
    if let Some(secret) = &opts.redis_url_secret {
        let from =
            map([("secretKeyRef", map([("name", secret.name.as_str().into()), ("key", secret.key.as_str().into())]))]);
        c.insert("env".into(), Value::Sequence(vec![map([("name", REDIS_URL_ENV.into()), ("valueFrom", from)])]));
    }
    if opts.mode == SidecarMode::Native {
        // What makes an init container a native sidecar: it keeps running
        // beside the main containers.
        c.insert("restartPolicy".into(), "Always".into());
    }
    c.insert(
        "resources".into(),
        map([
            (
                "requests",
                map([
                    ("cpu", opts.resources.cpu_request.as_str().into()),
                    ("memory", opts.resources.memory_request.as_str().into()),
                ]),
            ),
            ("limits", map([("memory", opts.resources.memory_limit.as_str().into())])),
        ]),
    );
    c.insert(
        "securityContext".into(),
        map([
            ("runAsNonRoot", true.into()),
            ("runAsUser", opts.run_as_user.into()),
            ("readOnlyRootFilesystem", true.into()),
            ("allowPrivilegeEscalation", false.into()),
            ("capabilities", map([("drop", Value::Sequence(vec!["ALL".into()]))])),
            ("seccompProfile", map([("type", "RuntimeDefault".into())])),
        ]),
    );
    c.insert(
        "volumeMounts".into(),
        Value::Sequence(vec![map([("name", VOLUME_NAME.into()), ("mountPath", opts.socket_dir.as_str().into())])]),
    );
    Value::Mapping(c)
}

/// Adds the sidecar to `spec` (a pod spec), whatever [`decide`] would say:
/// callers decide first. `object` names the manifest in errors
/// (`Deployment shop/web`). On error `spec` may be partly changed; callers
/// work on a copy.
pub fn inject_pod_spec(spec: &mut Value, opts: &InjectOptions, object: &str) -> Result<()> {
    let spec = spec.as_mapping_mut().ok_or_else(|| Error::InjectMalformed {
        object: object.to_string(),
        path: "pod spec".into(),
        message: "is not a mapping".into(),
    })?;
    let socket_dir = opts.socket_dir.as_str();

    // The watchers first: a missing named watcher must fail before anything
    // is added.
    let containers = seq_mut(spec, "containers", object)?;
    let watchers: Vec<usize> = match &opts.watcher {
        WatcherSelector::All => {
            (0..containers.len()).filter(|&i| name_of(&containers[i]) != Some(SIDECAR_NAME)).collect()
        }
        WatcherSelector::Named(wanted) => match containers.iter().position(|c| name_of(c) == Some(wanted.as_str())) {
            Some(i) => vec![i],
            None => {
                let available: Vec<&str> = containers.iter().filter_map(name_of).collect();
                return Err(Error::InjectWatcherNotFound {
                    object: object.to_string(),
                    container: wanted.clone(),
                    available: if available.is_empty() { "none".into() } else { available.join(", ") },
                });
            }
        },
    };
    for i in watchers {
        let container = containers[i].as_mapping_mut().ok_or_else(|| Error::InjectMalformed {
            object: object.to_string(),
            path: format!("containers[{i}]"),
            message: "is not a mapping".into(),
        })?;
        let container_name = container.get("name").and_then(Value::as_str).unwrap_or("?").to_owned();
        let conflict = |conflict: String| Error::InjectConflict { object: object.to_string(), conflict };
        let env = seq_mut(container, "env", object)?;
        match env.iter().find(|e| name_of(e) == Some(SOCKET_ENV)) {
            None => env.push(map([("name", SOCKET_ENV.into()), ("value", opts.socket_path().into())])),
            Some(e) if e.get("value").and_then(Value::as_str) == Some(opts.socket_path().as_str()) => {}
            Some(e) => {
                let set =
                    e.get("value").and_then(Value::as_str).map_or("from a reference".to_owned(), |v| format!("{v:?}"));
                return Err(conflict(format!(
                    "container {container_name:?} sets {SOCKET_ENV} {set}, but the sidecar's socket is {:?}, so it \
                     could never connect; drop the variable, or move the socket with --socket-dir",
                    opts.socket_path()
                )));
            }
        }
        let mounts = seq_mut(container, "volumeMounts", object)?;
        if let Some(m) = mounts.iter().find(|m| {
            m.get("mountPath").and_then(Value::as_str).map(|p| p.trim_end_matches('/'))
                == Some(socket_dir.trim_end_matches('/'))
                && name_of(m) != Some(VOLUME_NAME)
        }) {
            return Err(conflict(format!(
                "container {container_name:?} already mounts volume {:?} at {socket_dir}, where the sidecar's socket \
                 directory goes; move that mount, or the socket with --socket-dir",
                name_of(m).unwrap_or("?")
            )));
        }
        let mounted = mounts.iter().any(|m| name_of(m) == Some(VOLUME_NAME));
        if !mounted {
            // Read-only is enough: connecting to a Unix socket needs write
            // permission on the socket, which a read-only mount still gives.
            mounts.push(map([
                ("name", VOLUME_NAME.into()),
                ("mountPath", socket_dir.into()),
                ("readOnly", true.into()),
            ]));
        }
    }

    let sidecar = sidecar_container(opts);
    match opts.mode {
        // First, so it is running before any later init container and the
        // main containers start.
        SidecarMode::Native => seq_mut(spec, "initContainers", object)?.insert(0, sidecar),
        // Last, so the first container (kubectl's default for logs and
        // exec) stays the user's.
        SidecarMode::Plain => seq_mut(spec, "containers", object)?.push(sidecar),
    }

    let volumes = seq_mut(spec, "volumes", object)?;
    if let Some(v) = volumes.iter().find(|v| name_of(v) == Some(VOLUME_NAME))
        && v.get("emptyDir").is_none()
    {
        // The socket would land in the user's volume (a PVC, say).
        let source = v
            .as_mapping()
            .and_then(|m| m.keys().filter_map(Value::as_str).find(|k| *k != "name"))
            .unwrap_or("another source");
        return Err(Error::InjectConflict {
            object: object.to_string(),
            conflict: format!(
                "its volume {VOLUME_NAME:?} is a {source}, not an emptyDir: the sidecar's socket would be written \
                 into it; rename that volume (the injection needs the name for the socket's emptyDir)"
            ),
        });
    }
    if !volumes.iter().any(|v| name_of(v) == Some(VOLUME_NAME)) {
        volumes.push(map([("name", VOLUME_NAME.into()), ("emptyDir", Value::Mapping(Mapping::new()))]));
    }
    Ok(())
}

/// The `name` of a container, env var, mount or volume entry.
pub(crate) fn name_of(entry: &Value) -> Option<&str> {
    entry.get("name").and_then(Value::as_str)
}

/// The sequence at `key`, created when absent or null.
fn seq_mut<'a>(map: &'a mut Mapping, key: &str, object: &str) -> Result<&'a mut Vec<Value>> {
    let slot = map.entry(Value::from(key)).or_insert_with(|| Value::Sequence(Vec::new()));
    if slot.is_null() {
        *slot = Value::Sequence(Vec::new());
    }
    slot.as_sequence_mut().ok_or_else(|| Error::InjectMalformed {
        object: object.to_string(),
        path: key.to_string(),
        message: "is not a list".into(),
    })
}

fn map<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Mapping(entries.into_iter().map(|(k, v)| (k.into(), v)).collect())
}
