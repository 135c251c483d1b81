//! `kubectl reverser why TYPE/NAME`: the thin executor. Resolves the type
//! through discovery, GETs the object, asks the evidence (a sidecar's
//! `Explain` over its socket or through the API server's pod proxy, or the
//! plugin's own follower over the fact streams), reads the Git mirror, and
//! prints [`rules::attribution::why::Report`].

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rules::attribution::render::{ObjectKey, layout_path};
use rules::attribution::why::{self, ExplainParams, Explanation, ObjectState, Report};
use rules::attribution::{GroupResource, Scope};
use rules::mirror::placement::canonical_path;
use runtime::attribution::clock::SystemClock;
use runtime::attribution::transport::{
    FactFollower, RedisOptions, Transport, TransportConfig, TransportKind, TransportOptions,
};
use runtime::attribution::{Engine, EngineConfig};
use runtime::metrics::Metrics;
use serde_json::Value;

use crate::common::discovery::{self, get};
use crate::common::{self, Call, Cell, CliError, Human, KubeArgs, Offers, OutputArgs, Paint, Style, Table};

/// The flags of `kubectl reverser why`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Examples:\n  \
    kubectl reverser why deploy/web -n shop --socket /var/run/reverser/reverser.sock --repo ./mirror\n  \
    kubectl reverser why configmap settings --pod gitops-reverser-0 -n gitops --repo ./mirror\n  \
    kubectl reverser why cm/settings --redis-url redis://redis:6379 --route prod-eu-1 -o json")]
pub struct Args {
    /// The object: TYPE/NAME or TYPE NAME (TYPE as kubectl takes it: kind,
    /// plural, singular, short name, or resource.group).
    #[arg(value_name = "TYPE/NAME | TYPE NAME", required = true, num_args = 1..=2)]
    pub target: Vec<String>,

    #[command(flatten)]
    pub kube: KubeArgs,

    #[command(flatten)]
    pub output: OutputArgs<false, false>,

    /// The audit route whose facts to read. It must be the route the API
    /// server's audit webhook posts to (/audit-webhook/<route>, the
    /// ClusterProvider's spec.attribution.auditRoute); the kube context's
    /// cluster name is not a reliable guess, so the default is `default`
    /// (the route `reverser-sidecar serve`'s printed curl posts to).
    #[arg(long, value_name = "ROUTE", default_value = rules::attribution::DEFAULT_ROUTE)]
    pub route: String,

    /// Ask a sidecar's Explain over its Unix socket.
    #[arg(long, value_name = "PATH", env = "REVERSER_SOCKET", conflicts_with_all = ["pod", "redis_url"])]
    pub socket: Option<PathBuf>,

    /// Ask the sidecar inside this pod (in -n's namespace), through the API
    /// server's pod proxy to its ops port.
    #[arg(long, value_name = "NAME", conflicts_with = "redis_url")]
    pub pod: Option<String>,

    /// The namespace of --pod (default: -n's).
    #[arg(long, value_name = "NAMESPACE", requires = "pod")]
    pub pod_namespace: Option<String>,

    /// The sidecar's ops port for --pod (9091 where the chart's webhook injected).
    #[arg(long, value_name = "PORT", default_value_t = 9090)]
    pub pod_port: u16,

    /// Read the fact streams directly (no sidecar needed): follow the
    /// object's stream for one TTL of retention into the plugin's own index.
    // hide_env_values: the URL may carry a password; --help never shows it.
    #[arg(long, value_name = "URL", env = "REVERSER_REDIS_URL", hide_env_values = true)]
    pub redis_url: Option<String>,

    /// A PEM CA bundle to verify a `rediss://` server with (default: the
    /// system roots).
    #[arg(long, value_name = "PATH", requires = "redis_url")]
    pub redis_ca_cert: Option<PathBuf>,

    /// The stream key prefix, with --redis-url.
    #[arg(long, value_name = "PREFIX", default_value = rules::attribution::DEFAULT_STREAM_PREFIX)]
    pub redis_prefix: String,

    /// How far back the streams are read, with --redis-url
    /// (--author-attribution-ttl).
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub ttl: u64,

    /// The Git mirror (a clone, bare or not): the history of the object's file.
    #[arg(long, value_name = "PATH")]
    pub repo: Option<PathBuf>,

    /// The mirror's branch to read (default: HEAD, else `main`).
    #[arg(long, value_name = "BRANCH")]
    pub branch: Option<String>,

    /// How many commits of history to show.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub history: usize,

    /// How long to wait for the sidecar, or for the follower to catch up:
    /// a duration (500ms, 2s, 1m) or bare seconds.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = common::connection::parse_request_timeout)]
    pub timeout: Duration,
}

/// Runs `why` and prints its report to `out`.
pub fn run(args: &Args, colour: bool, out: &mut dyn Write) -> Result<(), CliError> {
    args.output.check("why", Offers::default())?;
    let report = common::block_on(explain(args))?;
    common::print(&args.output, colour, &Answer(report), out)
}

/// The report as `why` prints it.
#[derive(Debug, serde::Serialize)]
#[serde(transparent)]
pub struct Answer(pub Report);

impl Human for Answer {
    fn render(&self, style: &Style, out: &mut dyn Write) -> std::io::Result<()> {
        out.write_all(render_table(&self.0, style).as_bytes())
    }
}

async fn explain(args: &Args) -> Result<Report, CliError> {
    let common::TypedName { type_: type_name, name } = common::TypedName::parse(&args.target)?;
    let target = args.kube.client().await?;
    let (served, versions_of) = discovery::discover(&target.client).await?;
    let res = why::resolve_type(&type_name, &served)
        .map_err(|e| CliError::from(e).with_code(common::exit_code::NOT_FOUND))?
        .clone();
    let namespace = if res.namespaced { target.namespace.clone() } else { String::new() };
    let what = if res.namespaced {
        format!("{} {name:?} in namespace {namespace:?}", res.qualified())
    } else {
        format!("{} {name:?}", res.qualified())
    };

    let mut state = ObjectState {
        group: res.group.clone(),
        version: res.version.clone(),
        resource: res.resource.clone(),
        kind: res.kind.clone(),
        namespace: namespace.clone(),
        name: name.clone(),
        ..ObjectState::default()
    };
    let (mut labels, mut creation_timestamp) = (String::new(), String::new());
    match get::<Value>(&target.client, &res.object_path(&namespace, &name)).await {
        Ok(obj) => {
            let meta = &obj["metadata"];
            let s = |v: &Value| match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => String::new(),
            };
            state.uid = s(&meta["uid"]);
            state.resource_version = s(&meta["resourceVersion"]);
            state.deleting = !meta["deletionTimestamp"].is_null();
            creation_timestamp = s(&meta["creationTimestamp"]);
            if let Some(map) = meta["labels"].as_object() {
                let labels_map = map.iter().map(|(k, v)| (k.clone(), s(v))).collect();
                labels = why::explanation::format_labels(&labels_map);
            }
        }
        Err(kube::Error::Api(status)) if status.code == 404 => state.deleted = true,
        Err(e) => {
            let resource = res.qualified();
            return Err(common::api_failure(
                Call { verb: "get", resource: &resource, name: &name, namespace: &namespace },
                &e,
            ));
        }
    }

    // The preferred version first; the mirror may hold the file under any.
    let mut versions = vec![res.version.clone()];
    for (_, vs) in versions_of.iter().filter(|(g, _)| *g == res.group) {
        versions.extend(vs.iter().filter(|v| **v != res.version).cloned());
    }
    let key_at = |version: &str| ObjectKey {
        group: res.group.clone(),
        version: version.to_owned(),
        resource: res.resource.clone(),
        namespace: namespace.clone(),
        name: name.clone(),
    };
    // Secrets are never written in clear text: only as a SOPS file, and
    // only when encryption is on, which the mirror alone can tell.
    state.sealed_only = rules::mirror::select::is_sensitive(&res.group, &res.resource);
    let paths: Vec<String> = versions
        .iter()
        .filter_map(|v| {
            let key = key_at(v);
            // layout_path only vets the coordinates, as the writer does.
            layout_path(&key).ok().map(|_| canonical_path(&key, state.sealed_only))
        })
        .collect();

    let history = match &args.repo {
        Some(repo) => {
            Some(runtime::attribution::why::read_history(repo, args.branch.as_deref(), &paths, args.history.max(1))?)
        }
        None => None,
    };
    if state.sealed_only {
        let sealed = paths.first().map_or("its .sops.yaml file", String::as_str);
        (state.path, state.no_path) = why::sealed_file(&res.resource, sealed, history.as_deref());
    } else {
        state.path = paths.first().cloned();
    }
    if state.deleted {
        let has_removal = history.iter().flatten().any(|h| h.change == why::FileChange::Delete);
        if !has_removal {
            let git = match &args.repo {
                Some(repo) => format!(
                    "and the Git mirror {} has no commit removing {}",
                    repo.display(),
                    paths.first().map_or("its file", String::as_str)
                ),
                None => "and no Git mirror was given to answer from (pass --repo)".to_string(),
            };
            return Err(CliError::new(format!(
                "{what} not found: the API server answered 404 {git}; check the name, the namespace (-n) and the context"
            ))
            .with_code(common::exit_code::NOT_FOUND));
        }
    }

    let params = ExplainParams {
        route: args.route.clone(),
        group: res.group.clone(),
        version: res.version.clone(),
        resource: res.resource.clone(),
        namespace: namespace.clone(),
        name: name.clone(),
        uid: state.uid.clone(),
        resource_version: state.resource_version.clone(),
        removal: state.deleting || state.deleted,
        labels,
        creation_timestamp,
    };
    // 0 would refuse every answer: at least a second, as before.
    let timeout = if args.timeout.is_zero() { Duration::from_secs(1) } else { args.timeout };
    let (evidence, source, route_ever_fed) = if state.deleted {
        (None, None, None)
    } else if let Some(socket) = &args.socket {
        let e = explain_socket(socket, &params, timeout).await?;
        (Some(e), Some(format!("socket {}", socket.display())), None)
    } else if let Some(pod) = &args.pod {
        let pod_ns = args.pod_namespace.as_deref().unwrap_or(&target.namespace);
        let e = explain_pod(&target.client, pod_ns, pod, args.pod_port, &params).await?;
        (Some(e), Some(format!("pod {pod_ns}/{pod}:{}", args.pod_port)), None)
    } else if let Some(url) = &args.redis_url {
        let (e, fed) = explain_redis(args, url, &params, timeout).await?;
        (Some(e), Some(format!("redis {}", runtime::redact::redact_url(url))), fed)
    } else {
        (None, None, None)
    };
    let now_secs =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
    Ok(why::build_report(
        state,
        why::Inputs { route: args.route.clone(), evidence_source: source, evidence, history, route_ever_fed, now_secs },
    ))
}

/// `Explain` over the sidecar's Unix socket (gRPC `reverser.v1`).
async fn explain_socket(
    socket: &std::path::Path,
    params: &ExplainParams,
    timeout: Duration,
) -> Result<Explanation, CliError> {
    use runtime::proto::attribution_client::AttributionClient;

    let unreachable = |cause: String| {
        CliError::new(format!(
            "cannot reach the sidecar at socket {}: {cause}; check the path (the sidecar's --socket, \
             REVERSER_SOCKET in the watcher) and that the sidecar runs",
            socket.display()
        ))
        .with_code(common::exit_code::UNREACHABLE)
    };
    let channel = tokio::time::timeout(timeout, runtime::proto::connect_unix(socket))
        .await
        .map_err(|_| unreachable(format!("no connection within {}", common::connection::humanize(timeout))))?
        .map_err(|e| unreachable(common::chain(&e)))?;
    let mut client = AttributionClient::new(channel);
    let response = tokio::time::timeout(
        timeout,
        client.explain(runtime::proto::ExplainRequest { follow: true, ..runtime::proto::ExplainRequest::from(params) }),
    )
    .await
    .map_err(|_| unreachable(format!("no answer within {}", common::connection::humanize(timeout))))?
    .map_err(|s| unreachable(format!("Explain failed: {}", s.message())))?;
    Ok(Explanation::try_from(response.into_inner())?)
}

/// `GET /v1/explain` on the sidecar's ops port inside `pod`, through the
/// API server's pod proxy.
async fn explain_pod(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    port: u16,
    params: &ExplainParams,
) -> Result<Explanation, CliError> {
    let path =
        format!("/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy/v1/explain?{}", params.to_query_string());
    get::<Explanation>(client, &path).await.map_err(|e| {
        let cause = match &e {
            kube::Error::Api(s) if s.code == 403 => {
                let call = Call { verb: "get", resource: "pods/proxy", name: pod, namespace };
                return common::connection::refused(
                    call,
                    &format!("cannot ask the sidecar in pod {namespace}/{pod}"),
                    403,
                    &s.message,
                );
            }
            kube::Error::Api(s) if s.code == 404 => format!("the API server answered 404 ({})", s.message),
            kube::Error::Api(s) => format!("the API server's proxy answered {} ({})", s.code, s.message),
            other => {
                return common::connection::transport_failure(
                    &format!("cannot ask the sidecar in pod {namespace}/{pod} through the API server"),
                    other,
                );
            }
        };
        CliError::new(format!(
            "cannot reach the sidecar in pod {namespace}/{pod} on port {port} through the API server: {cause}; \
             check the pod name and namespace (-n), and that --pod-port is the sidecar's --metrics-listen port"
        ))
        .with_code(common::exit_code::UNREACHABLE)
    })
}

/// Follows the object's stream for one TTL into a local engine, waits until
/// caught up, then explains locally. Also says whether any stream of the
/// route exists (any fact ever arrived on it within retention).
async fn explain_redis(
    args: &Args,
    url: &str,
    params: &ExplainParams,
    timeout: Duration,
) -> Result<(Explanation, Option<bool>), CliError> {
    let scope = Scope::new(&args.route, GroupResource::new(&params.group, &params.resource));
    let redacted = runtime::redact::redact_url(url);
    let metrics = Arc::new(Metrics::new());
    let ttl = Duration::from_secs(args.ttl.max(1));
    let config = TransportConfig { prefix: args.redis_prefix.clone(), ttl, ..TransportConfig::default() };
    let ca_cert_pem = match &args.redis_ca_cert {
        Some(path) => Some(std::fs::read(path).map_err(|e| {
            CliError::new(format!(
                "cannot read the Redis CA bundle {}: {e}; pass a PEM file with --redis-ca-cert",
                path.display()
            ))
        })?),
        None => None,
    };
    let transport = Transport::build(
        TransportOptions {
            kind: TransportKind::Redis,
            replica_count: 1,
            redis: Some(RedisOptions { url: url.to_owned(), ca_cert_pem }),
            config,
        },
        metrics.clone(),
    )?;
    let mut engine_config = EngineConfig::default();
    engine_config.index.ttl_ms = ttl.as_millis() as u64;
    let engine = Arc::new(Engine::new(engine_config, Arc::new(SystemClock), metrics.clone()));
    let follower = transport.follower();
    follower.acquire(&scope);
    let mut caught_up = follower.caught_up();
    let task = {
        let (f, sink) = (follower.clone(), engine.clone());
        tokio::spawn(async move { f.follow(sink).await })
    };
    let waited = tokio::time::timeout(timeout, caught_up.wait_for(|c| *c)).await;
    task.abort();
    if !matches!(waited, Ok(Ok(_))) {
        return Err(CliError::new(format!(
            "cannot read the fact stream {} from {redacted} within {}; check --redis-url and that Redis is \
             reachable, or give it longer with --timeout",
            scope.stream_key(&args.redis_prefix),
            common::connection::humanize(timeout),
        ))
        .with_code(common::exit_code::UNREACHABLE));
    }
    let q = params.query(engine.clock().now_ms());
    let explanation = engine.explanation(&scope, &q, true);
    // Best effort, and bounded like every other call: `None` says "cannot tell".
    let fed = tokio::time::timeout(timeout, route_has_streams(url, &scope, &args.redis_prefix)).await.ok().flatten();
    Ok((explanation, fed))
}

/// Whether any stream of `scope`'s route exists; `None` when it cannot be told.
async fn route_has_streams(url: &str, scope: &Scope, prefix: &str) -> Option<bool> {
    let key = scope.stream_key(prefix);
    let route_prefix = key.strip_suffix(&scope.group_resource.path_form())?;
    let pattern: String = route_prefix
        .chars()
        .flat_map(|c| if matches!(c, '*' | '?' | '[' | ']' | '\\') { vec!['\\', c] } else { vec![c] })
        .chain(['*'])
        .collect();
    let client = redis::Client::open(url).ok()?;
    let mut conn = client.get_multiplexed_async_connection().await.ok()?;
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .ok()?;
        if !keys.is_empty() {
            return Some(true);
        }
        if next == 0 {
            return Some(false);
        }
        cursor = next;
    }
}

fn or_dash(s: &str) -> String {
    if s.is_empty() { "-".into() } else { why::printable(s) }
}

/// The human answer.
pub fn render_table(r: &Report, style: &Style) -> String {
    let o = &r.object;
    let mut t = String::new();
    let gr = if o.group.is_empty() { o.resource.clone() } else { format!("{}.{}", o.resource, o.group) };
    let place =
        if o.namespace.is_empty() { String::new() } else { format!(" in namespace {}", why::printable(&o.namespace)) };
    t.push_str(&format!("Object:     {gr}/{}{place}\n", why::printable(&o.name)));
    let state = if o.deleted {
        "deleted (the API server answered 404; answered from the Git mirror)".to_string()
    } else if o.deleting {
        format!(
            "terminating (deletionTimestamp set: a removal), uid {}, resourceVersion {}",
            why::printable(&o.uid),
            why::printable(&o.resource_version)
        )
    } else {
        format!("exists, uid {}, resourceVersion {}", why::printable(&o.uid), why::printable(&o.resource_version))
    };
    t.push_str(&format!("State:      {state}\n"));
    match (&o.path, &o.no_path) {
        (Some(p), _) if o.sealed_only => t.push_str(&format!("Git path:   {} (sealed with sops)\n", why::printable(p))),
        (Some(p), _) => t.push_str(&format!("Git path:   {}\n", why::printable(p))),
        (None, Some(why_not)) => t.push_str(&format!("Git path:   none: {why_not}\n")),
        (None, None) => {}
    }
    t.push_str(&format!("Route:      {}\n", why::printable(&r.route)));
    t.push_str(&format!(
        "Evidence:   {}\n\n",
        r.evidence_source.as_deref().unwrap_or("none asked (pass --socket, --pod or --redis-url)")
    ));
    let v = &r.verdict;
    let what = if o.deleted || o.deleting { "the removal" } else { "the current state" };
    match &v.author {
        Some(author) => {
            let mut who = why::printable(author);
            if !v.display_name.is_empty() {
                who.push_str(&format!(" ({})", why::printable(&v.display_name)));
            }
            let who = Paint::Green.paint(&who, style.colour);
            t.push_str(&format!("Author of {what}: {who} [{}]\n", v.actor_kind.label()));
            t.push_str(&format!("  tier:        {} ({})\n", v.tier, v.asserts));
            t.push_str(&format!("  verb:        {}\n", or_dash(&v.verb)));
            t.push_str(&format!("  auditID:     {}\n", or_dash(&v.audit_id)));
            t.push_str(&format!("  stage time:  {}\n", or_dash(&v.stage_timestamp)));
            let from = match (&v.source, &v.commit) {
                (why::Source::Git, Some(c)) => format!("the Git mirror, commit {}", &c[..c.len().min(12)]),
                _ => "the fact index".into(),
            };
            t.push_str(&format!("  read from:   {from}\n"));
        }
        // Nobody was asked: not a verdict, so no UNRESOLVED.
        None if r.evidence.is_none() && r.evidence_source.is_none() => {
            t.push_str(&format!(
                "Author of {what}: not known, no evidence was asked (pass --socket, --pod or --redis-url)\n"
            ));
        }
        None => {
            let unresolved = Paint::Red.paint("UNRESOLVED", style.colour);
            let committed = if o.sealed_only && o.path.is_none() {
                "no commit known: see Git path".to_owned()
            } else {
                "committed as `unknown (attribution unresolved)`".to_owned()
            };
            t.push_str(&format!("Author of {what}: {unresolved} ({committed})\n"));
            if r.causes.is_empty() && r.evidence.is_none() {
                t.push_str("  ask the evidence (--socket, --pod or --redis-url) to learn which cause fits\n");
            }
            for c in &r.causes {
                t.push_str(&format!("  cause: {} [{}]\n", c.summary, c.cause));
                t.push_str(&format!("    how to check: {}\n", c.check));
            }
        }
    }
    if !r.competing.is_empty() {
        t.push_str("\nCompeting facts:\n");
        let mut table = Table::new(&[
            ("tier", false),
            ("author", false),
            ("verb", false),
            ("auditID", false),
            ("lost because", false),
        ]);
        for c in &r.competing {
            table.row(vec![
                c.tier.label().into(),
                why::printable(&c.author).into(),
                or_dash(&c.verb).into(),
                or_dash(&c.audit_id).into(),
                Cell::painted(c.lost_because.clone(), Paint::Dim),
            ]);
        }
        t.push_str(&table.render(style));
    }
    if !r.history.is_empty() {
        t.push_str("\nHistory (newest first):\n");
        let mut table = Table::new(&[
            ("commit", false),
            ("date", false),
            ("change", false),
            ("author", false),
            ("tier", false),
            ("auditID", false),
        ]);
        for h in &r.history {
            table.row(vec![
                h.commit[..h.commit.len().min(12)].into(),
                h.date.as_str().into(),
                h.change.label().into(),
                why::printable(&h.author_name).into(),
                or_dash(h.trailer("Reverser-Tier").unwrap_or_default()).into(),
                or_dash(h.trailer("Reverser-Audit-ID").unwrap_or_default()).into(),
            ]);
        }
        t.push_str(&table.render(style));
    }
    t
}
