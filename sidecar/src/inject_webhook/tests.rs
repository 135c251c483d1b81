use clap::Parser;

use super::*;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn parse(argv: &[&str]) -> Args {
    let mut all = vec!["inject-webhook", "--tls-cert", "c.pem", "--tls-key", "k.pem"];
    all.extend_from_slice(argv);
    Cli::try_parse_from(all).unwrap().args
}

#[test]
fn defaults_are_the_plugins_defaults() {
    let config = webhook_config(&parse(&[]));
    assert_eq!(config.inject, InjectOptions::default());
    assert!(!config.require_opt_in_label);
    assert_eq!(config.excluded_namespaces, vec!["kube-system".to_string()]);
}

#[test]
fn kube_system_stays_excluded_and_namespaces_are_not_repeated() {
    let config = webhook_config(&parse(&[
        "--exclude-namespace",
        "reverser",
        "--exclude-namespace",
        "kube-system",
        "--exclude-namespace",
        "reverser",
    ]));
    assert_eq!(config.excluded_namespaces, vec!["kube-system", "reverser"]);
}

#[test]
fn flags_map_onto_the_injection_options() {
    let config = webhook_config(&parse(&[
        "--sidecar-image",
        "registry.example/rs:1",
        "--plain-container",
        "--watcher-container",
        "watcher",
        "--sidecar-arg",
        "--author-attribution-grace=5s",
        "--sidecar-arg=--author-attribution-transport=redis",
        "--require-opt-in-label",
    ]));
    assert_eq!(config.inject.image, "registry.example/rs:1");
    assert_eq!(config.inject.mode, SidecarMode::Plain);
    assert_eq!(config.inject.watcher, WatcherSelector::Named("watcher".into()));
    assert_eq!(
        config.inject.extra_args,
        vec!["--author-attribution-grace=5s".to_string(), "--author-attribution-transport=redis".to_string()]
    );
    assert!(config.require_opt_in_label);
}

#[test]
fn tls_paths_are_required() {
    assert!(Cli::try_parse_from(["inject-webhook"]).is_err());
}
