use clap::Parser;
use rules::inject::{InjectOptions, SidecarMode, WatcherSelector};

use super::{Cli, Command, inject};

fn inject_args(argv: &[&str]) -> inject::Args {
    let cli = Cli::try_parse_from(argv).unwrap();
    match cli.command {
        Command::Inject(args) => args,
        Command::Completion(_) | Command::Why(_) | Command::Version => panic!("parsed the wrong subcommand"),
    }
}

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: main, image: busybox}]\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n";

#[test]
fn inject_flags_become_inject_options() {
    let args = inject_args(&["kubectl-reverser", "inject", "-f", "-"]);
    // The sidecar's metrics listen on the pod's IP, where `why --pod` looks.
    assert_eq!(
        args.options(),
        InjectOptions { extra_args: vec!["--metrics-listen=0.0.0.0:9090".into()], ..InjectOptions::default() }
    );

    let args = inject_args(&[
        "kubectl-reverser",
        "inject",
        "--filename",
        "deploy.yaml",
        "--image",
        "example/sidecar:dev",
        "--plain-container",
        "--watcher-container",
        "manager",
        "--sidecar-arg",
        "--transport",
        "--sidecar-arg=redis",
        "--sidecar-arg",
        "--redis-url=redis://r:6379",
        "--socket-dir",
        "/run/r",
    ]);
    assert_eq!(args.filename.to_str(), Some("deploy.yaml"));
    let o = args.options();
    assert_eq!(o.image, "example/sidecar:dev");
    assert_eq!(o.mode, SidecarMode::Plain);
    assert_eq!(o.watcher, WatcherSelector::Named("manager".into()));
    assert_eq!(o.extra_args, ["--metrics-listen=0.0.0.0:9090", "--transport", "redis", "--redis-url=redis://r:6379"]);
    assert_eq!(o.socket_path(), "/run/r/reverser.sock");
}

#[test]
fn inject_requires_a_file() {
    let err = Cli::try_parse_from(["kubectl-reverser", "inject"]).unwrap_err();
    assert!(err.to_string().contains("--filename"), "{err}");
}

#[test]
fn inject_reads_stdin_writes_stdout_and_reports_on_stderr() {
    let args = inject_args(&["kubectl-reverser", "inject", "-f", "-", "--redis-url-secret", "r/url"]);
    let (mut out, mut log) = (Vec::new(), Vec::new());
    inject::run(&args, &mut POD.as_bytes(), &mut out, &mut log).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("name: reverser-sidecar"), "{out}");
    assert!(out.ends_with("---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n"), "{out}");
    assert_eq!(String::from_utf8(log).unwrap(), "Pod p injected\n");
}

#[test]
fn inject_errors_name_the_file_and_what_to_do() {
    let args = inject_args(&["kubectl-reverser", "inject", "-f", "/nonexistent/x.yaml", "--redis-url-secret", "r/url"]);
    let err = inject::run(&args, &mut &b""[..], &mut Vec::new(), &mut Vec::new()).unwrap_err();
    assert!(err.message().starts_with("cannot read manifests from /nonexistent/x.yaml:"), "{err}");
    assert!(err.message().contains("-f"), "{err}");

    let args = inject_args(&["kubectl-reverser", "inject", "-f", "-", "--redis-url-secret", "r/url"]);
    let err = inject::run(&args, &mut &b"kind: [\n"[..], &mut Vec::new(), &mut Vec::new()).unwrap_err();
    assert!(err.message().starts_with("stdin: the document starting at line 1 is not valid YAML"), "{err}");
}

fn why_args(argv: &[&str]) -> Result<super::why::Args, clap::Error> {
    match Cli::try_parse_from(argv)?.command {
        Command::Why(args) => Ok(*args),
        _ => panic!("parsed the wrong subcommand"),
    }
}

#[test]
fn why_takes_type_slash_name_or_type_name_and_one_evidence_source() {
    let a = why_args(&["kubectl-reverser", "why", "cm/web", "-n", "shop", "-o", "json"]).unwrap();
    assert_eq!(a.target, vec!["cm/web".to_string()]);
    assert_eq!(a.kube.namespace.as_deref(), Some("shop"));
    assert_eq!(a.output.format(), crate::common::OutputFormat::Json);
    // The route defaults to `default`: nothing in a kubeconfig names it.
    assert_eq!((a.route.as_str(), a.pod_port, a.history), ("default", 9090, 10));
    let a = why_args(&["kubectl-reverser", "why", "deploy", "web", "--pod", "p", "--pod-port", "8080"]).unwrap();
    assert_eq!((a.target.len(), a.pod.as_deref(), a.pod_port), (2, Some("p"), 8080));
    for conflicting in [
        &["--socket", "s", "--redis-url", "redis://x"][..],
        &["--socket", "s", "--pod", "p"],
        &["--pod", "p", "--redis-url", "redis://x"],
        &["--pod-namespace", "ops"],
    ] {
        let mut argv = vec!["kubectl-reverser", "why", "cm/web"];
        argv.extend_from_slice(conflicting);
        assert!(why_args(&argv).is_err(), "{conflicting:?} should be refused");
    }
    assert!(why_args(&["kubectl-reverser", "why"]).is_err());
    assert!(why_args(&["kubectl-reverser", "why", "a", "b", "c"]).is_err());
}
