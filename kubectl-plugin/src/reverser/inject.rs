//! `kubectl reverser inject -f FILE|-`: read manifests (YAML, or JSON: one
//! object or a stream of them), write them back in the same language with
//! the sidecar added ([`rules::inject`]), and say on stderr what happened
//! to each object so stdout stays pipeable into `kubectl apply -f -`. Every
//! `--sidecar-arg` is checked with the sidecar's own parser first.

use std::io::{Read, Write};
use std::path::PathBuf;

use rules::inject::{InjectOptions, Outcome, SidecarMode, WatcherSelector, inject_manifests};

use crate::common::CliError;

/// The flags of `kubectl reverser inject`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Examples:\n  \
                  kubectl reverser inject -f deploy.yaml --redis-url-secret redis/url | kubectl apply -f -\n  \
                  kubectl get deploy w -o json | kubectl reverser inject -f - --redis-url-secret redis/url\n  \
                  kubectl reverser inject -f deploy.yaml --redis-url-secret redis/url --watcher-container manager")]
pub struct Args {
    /// The manifests to inject: a YAML or JSON file of one or more
    /// documents, or - for stdin.
    #[arg(short = 'f', long = "filename", value_name = "FILE|-", required = true)]
    pub filename: PathBuf,

    /// The sidecar image.
    #[arg(long, value_name = "IMAGE", default_value_t = rules::inject::default_image())]
    pub image: String,

    /// Add the sidecar as a plain container instead of a native sidecar (an
    /// init container with restartPolicy Always, Kubernetes 1.29+).
    #[arg(long)]
    pub plain_container: bool,

    /// Hand the socket to this container only (default: every container).
    #[arg(long, value_name = "NAME")]
    pub watcher_container: Option<String>,

    /// An extra argument for the sidecar after `serve --socket <path>`, one
    /// of `reverser-sidecar serve --help`'s (checked against the sidecar's
    /// own parser); repeat it, e.g.
    /// --sidecar-arg=--author-attribution-transport=redis.
    #[arg(long = "sidecar-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub sidecar_args: Vec<String>,

    /// Give the sidecar its Redis URL from this Secret key (NAME/KEY, in the
    /// workload's namespace) as REVERSER_REDIS_URL, instead of an argument
    /// that shows the URL and its password in the pod spec.
    #[arg(long, value_name = "NAME/KEY")]
    pub redis_url_secret: Option<rules::inject::SecretKeyRef>,

    /// Where the socket directory is mounted in the sidecar and watchers.
    #[arg(long, value_name = "DIR", default_value = rules::inject::DEFAULT_SOCKET_DIR)]
    pub socket_dir: String,

    /// The port of the sidecar's /metrics, /healthz, /readyz and /v1/explain
    /// on the pod's IP, where `kubectl reverser why --pod` reaches it
    /// (`--pod-port`); pick one the watcher does not use. A
    /// --sidecar-arg=--metrics-listen replaces it.
    #[arg(long, value_name = "PORT", default_value_t = DEFAULT_METRICS_PORT)]
    pub metrics_port: u16,
}

/// `why --pod`'s default `--pod-port`, and `serve`'s own metrics port.
pub const DEFAULT_METRICS_PORT: u16 = 9090;

impl Args {
    /// The injection these flags ask for.
    pub fn options(&self) -> InjectOptions {
        InjectOptions {
            image: self.image.clone(),
            mode: if self.plain_container { SidecarMode::Plain } else { SidecarMode::Native },
            watcher: match &self.watcher_container {
                Some(name) => WatcherSelector::Named(name.clone()),
                None => WatcherSelector::All,
            },
            extra_args: self.extra_args(),
            socket_dir: self.socket_dir.clone(),
            redis_url_secret: self.redis_url_secret.clone(),
            ..InjectOptions::default()
        }
    }
}

impl Args {
    /// The sidecar's extra arguments: its metrics on the pod's IP (the
    /// pod proxy reaches nothing on loopback), then `--sidecar-arg`s.
    fn extra_args(&self) -> Vec<String> {
        let given = |flag: &str| self.sidecar_args.iter().any(|a| a == flag || a.starts_with(&format!("{flag}=")));
        let mut args = Vec::new();
        if !given("--metrics-listen") {
            args.push(format!("--metrics-listen=0.0.0.0:{}", self.metrics_port));
        }
        args.extend(self.sidecar_args.iter().cloned());
        args
    }
}

/// Refuses a sidecar that would crash-loop (`--sidecar-arg`s `serve` would
/// refuse, in its own words), that no fact could reach, or whose Redis
/// password would show in the pod spec.
pub fn check_sidecar_args(options: &InjectOptions) -> Result<(), String> {
    use runtime::cli::InjectRefusal;
    runtime::cli::check_injected_fact_source(options).map_err(|refusal| match refusal {
        InjectRefusal::Args(why) => format!(
            "--sidecar-arg: reverser-sidecar serve would refuse its arguments {:?}, and the injected pod would \
             crash-loop: {why}; see `reverser-sidecar serve --help` (or docs/inject.md) for the flags it takes",
            options.extra_args
        ),
        other => other.to_string(),
    })
}

/// Reads the input (`stdin` when the file is `-`), writes the injected
/// manifests to `out` and one line per workload to `log`.
pub fn run(args: &Args, stdin: &mut dyn Read, out: &mut dyn Write, log: &mut dyn Write) -> Result<(), CliError> {
    let options = args.options();
    check_sidecar_args(&options).map_err(CliError::usage)?;
    let from_stdin = args.filename.as_os_str() == "-";
    let source = if from_stdin { "stdin".to_string() } else { args.filename.display().to_string() };
    let mut text = String::new();
    let read = if from_stdin {
        stdin.read_to_string(&mut text)
    } else {
        std::fs::File::open(&args.filename).and_then(|mut f| f.read_to_string(&mut text))
    };
    read.map_err(|e| {
        CliError::new(format!(
            "cannot read manifests from {source}: {e}; pass an existing YAML or JSON file with -f, or - for stdin"
        ))
    })?;
    if text.trim().is_empty() {
        // As `kubectl apply -f` with nothing in it: an empty pipe is a
        // mistake upstream (a failed `kubectl get`), not a success.
        return Err(CliError::new(format!(
            "{source} holds no manifests; pass a YAML or JSON file with -f, or pipe one into -f -"
        )));
    }
    let injection = inject_manifests(&text, &options).map_err(|e| CliError::new(format!("{source}: {e}")))?;
    out.write_all(injection.output.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| CliError::new(format!("cannot write the injected manifests: {e}")))?;
    // Like linkerd: a line per workload on stderr; other kinds stay quiet.
    for report in &injection.reports {
        if report.outcome != Outcome::NotAWorkload {
            // A closed stderr must not turn a finished injection into an error.
            let _ = writeln!(log, "{report}");
        }
    }
    Ok(())
}
