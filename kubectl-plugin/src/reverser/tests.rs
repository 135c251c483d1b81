use clap::Parser;
use shared::inject::{InjectOptions, SidecarMode, WatcherSelector};

use super::{Cli, Command, inject};

fn inject_args(argv: &[&str]) -> inject::Args {
    let cli = Cli::try_parse_from(argv).unwrap();
    match cli.command {
        Command::Inject(args) => args,
        Command::Completion(_) | Command::Why(_) => panic!("parsed the wrong subcommand"),
    }
}

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: main, image: busybox}]\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n";

#[test]
fn inject_flags_become_inject_options() {
    let args = inject_args(&["kubectl-reverser", "inject", "-f", "-"]);
    assert_eq!(args.options(), InjectOptions::default());

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
    assert_eq!(o.extra_args, ["--transport", "redis", "--redis-url=redis://r:6379"]);
    assert_eq!(o.socket_path(), "/run/r/reverser.sock");
}

#[test]
fn inject_requires_a_file() {
    let err = Cli::try_parse_from(["kubectl-reverser", "inject"]).unwrap_err();
    assert!(err.to_string().contains("--filename"), "{err}");
}

#[test]
fn inject_reads_stdin_writes_stdout_and_reports_on_stderr() {
    let args = inject_args(&["kubectl-reverser", "inject", "-f", "-"]);
    let (mut out, mut log) = (Vec::new(), Vec::new());
    inject::run(&args, &mut POD.as_bytes(), &mut out, &mut log).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("name: reverser-sidecar"), "{out}");
    assert!(out.ends_with("---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n"), "{out}");
    assert_eq!(String::from_utf8(log).unwrap(), "Pod p injected\n");
}

#[test]
fn inject_errors_name_the_file_and_what_to_do() {
    let args = inject_args(&["kubectl-reverser", "inject", "-f", "/nonexistent/x.yaml"]);
    let err = inject::run(&args, &mut &b""[..], &mut Vec::new(), &mut Vec::new()).unwrap_err();
    assert!(err.message().starts_with("cannot read manifests from /nonexistent/x.yaml:"), "{err}");
    assert!(err.message().contains("-f"), "{err}");

    let args = inject_args(&["kubectl-reverser", "inject", "-f", "-"]);
    let err = inject::run(&args, &mut &b"kind: [\n"[..], &mut Vec::new(), &mut Vec::new()).unwrap_err();
    assert!(err.message().starts_with("stdin: the document starting at line 1 is not valid YAML"), "{err}");
}
