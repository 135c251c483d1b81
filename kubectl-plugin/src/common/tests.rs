use std::path::PathBuf;

use serde::Serialize;

use clap::{Parser, Subcommand};

use super::*;

#[derive(Debug, Parser)]
#[command(name = "kubectl-example", version)]
struct Cli {
    #[command(flatten)]
    kube: KubeArgs,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    List {
        #[command(flatten)]
        all: AllNamespacesArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    Completion(CompletionArgs),
}

use testkit::fixtures::{KUBECONFIG, text_file as kubeconfig_file};

#[test]
fn kubectl_flags_parse_before_and_after_the_subcommand() {
    let cli = Cli::try_parse_from([
        "kubectl-example",
        "--context",
        "prod",
        "list",
        "-n",
        "shop",
        "-A",
        "-o",
        "json",
        "--kubeconfig",
        "/tmp/kc",
    ])
    .unwrap();
    assert_eq!(cli.kube.context.as_deref(), Some("prod"));
    assert_eq!(cli.kube.namespace.as_deref(), Some("shop"));
    assert_eq!(cli.kube.kubeconfig, Some(PathBuf::from("/tmp/kc")));
    match cli.command {
        Cmd::List { all, output } => {
            assert!(all.all_namespaces);
            assert_eq!(output.format(), OutputFormat::Json);
        }
        Cmd::Completion(_) => panic!("parsed the wrong subcommand"),
    }
}

#[test]
fn output_defaults_to_table_and_refuses_unknown_formats() {
    let cli = Cli::try_parse_from(["kubectl-example", "list"]).unwrap();
    let Cmd::List { output, all } = cli.command else { panic!("parsed the wrong subcommand") };
    assert_eq!(output.format(), OutputFormat::Table);
    assert!(!all.all_namespaces);
    for (flag, want) in [("wide", OutputFormat::Wide), ("name", OutputFormat::Name), ("yaml", OutputFormat::Yaml)] {
        let cli = Cli::try_parse_from(["kubectl-example", "list", "-o", flag]).unwrap();
        let Cmd::List { output, .. } = cli.command else { panic!("parsed the wrong subcommand") };
        assert_eq!(output.format(), want);
    }
    let cli = Cli::try_parse_from(["kubectl-example", "list", "-o", "jsonpath={.a}", "--no-headers"]).unwrap();
    let Cmd::List { output, .. } = cli.command else { panic!("parsed the wrong subcommand") };
    assert!(matches!(output.format(), OutputFormat::JsonPath(_)) && output.no_headers);
    let err = Cli::try_parse_from(["kubectl-example", "list", "-o", "table2"]).unwrap_err().to_string();
    assert!(
        err.contains("-o table2: unknown output format \"table2\"; use json, yaml, wide, name or jsonpath"),
        "{err}"
    );
    // A template that does not parse is refused when the command runs,
    // with kubectl's exit 1, not as a usage error.
    let cli = Cli::try_parse_from(["kubectl-example", "list", "-o", "jsonpath={.a"]).unwrap();
    let Cmd::List { output, .. } = cli.command else { panic!("parsed the wrong subcommand") };
    let e = output.check("list", Offers { wide: true, name: true }).unwrap_err();
    assert_eq!(e.code(), exit_code::FAILURE, "{e}");
    assert!(e.message().contains("jsonpath template \"{.a\""), "{e}");
}

/// A command that prints neither `-o wide` nor `-o name`.
#[derive(Debug, clap::Parser)]
#[command(name = "narrow")]
struct Narrow {
    #[command(flatten)]
    output: OutputArgs<false, false>,
}

#[test]
fn only_the_formats_a_command_prints_are_offered_and_parsed() {
    use clap::CommandFactory;
    let cmd = Narrow::command();
    let arg = cmd.get_arguments().find(|a| a.get_id() == "output").unwrap();
    let offered: Vec<String> = arg.get_possible_values().iter().map(|v| v.get_name().to_owned()).collect();
    assert_eq!(offered, ["json", "yaml", "jsonpath="]);
    let help = arg.get_help().unwrap().to_string();
    assert!(help.starts_with("Output format: json, yaml or jsonpath=TEMPLATE"), "{help}");
    let e = Narrow::try_parse_from(["narrow", "-o", "wide"]).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("narrow does not print -o wide: use json, yaml or jsonpath=TEMPLATE"), "{e}");
    assert!(Narrow::try_parse_from(["narrow", "-o", "yaml"]).is_ok());
}

#[tokio::test]
async fn kubeconfig_flag_selects_context_cluster_and_namespace() {
    let file = kubeconfig_file(KUBECONFIG);
    let args = KubeArgs { kubeconfig: Some(file.path().to_path_buf()), ..KubeArgs::default() };
    let config = args.config().await.unwrap();
    assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
    assert_eq!(config.default_namespace, "shop");

    let args = KubeArgs { context: Some("prod".into()), ..args };
    let config = args.config().await.unwrap();
    assert_eq!(config.cluster_url.to_string(), "https://10.0.0.1:6443/");
    assert_eq!(config.default_namespace, "default");

    let args = KubeArgs { namespace: Some("web".into()), ..args };
    let target = args.client().await.unwrap();
    assert_eq!(target.namespace, "web");
}

#[tokio::test]
async fn unreadable_or_malformed_kubeconfig_is_a_clear_error() {
    let missing = KubeArgs { kubeconfig: Some(PathBuf::from("/nonexistent/kubeconfig")), ..KubeArgs::default() };
    let err = missing.config().await.unwrap_err();
    assert!(err.message().contains("/nonexistent/kubeconfig"), "{err}");
    assert!(err.message().contains("--kubeconfig"), "{err}");

    let file = kubeconfig_file("clusters: [this is: not a kubeconfig");
    let bad = KubeArgs { kubeconfig: Some(file.path().to_path_buf()), ..KubeArgs::default() };
    let err = bad.config().await.unwrap_err();
    assert!(err.message().starts_with("cannot read kubeconfig"), "{err}");

    let file = kubeconfig_file(KUBECONFIG);
    let no_such_context = KubeArgs {
        kubeconfig: Some(file.path().to_path_buf()),
        context: Some("staging".into()),
        ..KubeArgs::default()
    };
    let err = no_such_context.config().await.unwrap_err();
    assert!(err.message().contains("\"staging\""), "{err}");
    assert!(err.message().contains("--context"), "{err}");
}

#[tokio::test]
async fn every_call_is_bounded_even_without_request_timeout() {
    let file = kubeconfig_file(KUBECONFIG);
    let args = KubeArgs { kubeconfig: Some(file.path().to_path_buf()), ..KubeArgs::default() };
    let config = args.config().await.unwrap();
    assert_eq!(config.connect_timeout, Some(connection::CONNECT_TIMEOUT));
    assert_eq!(config.read_timeout, Some(connection::IDLE_TIMEOUT));
    assert!(!config.default_retry, "a CLI answers at once");

    let cli = Cli::try_parse_from(["kubectl-example", "--request-timeout", "2s", "list"]).unwrap();
    let args = KubeArgs { kubeconfig: Some(file.path().to_path_buf()), ..cli.kube };
    let config = args.config().await.unwrap();
    assert_eq!(config.connect_timeout, Some(std::time::Duration::from_secs(2)));
    assert_eq!(config.read_timeout, Some(std::time::Duration::from_secs(2)));
    let cli = Cli::try_parse_from(["kubectl-example", "list", "--request-timeout=500ms"]).unwrap();
    assert_eq!(cli.kube.request_timeout, std::time::Duration::from_millis(500));
    assert!(Cli::try_parse_from(["kubectl-example", "list", "--request-timeout=soon"]).is_err());
}

#[derive(Serialize)]
struct Row {
    name: String,
    age: u32,
}

#[derive(Serialize)]
#[serde(transparent)]
struct Rows(Vec<Row>);

impl Human for Rows {
    fn render(&self, style: &Style, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let mut t = Table::new(&[("name", false), ("age", false), ("born", true)]);
        for r in &self.0 {
            t.row(vec![r.name.as_str().into(), Cell::painted(r.age.to_string(), Paint::Red), "2020".into()]);
        }
        out.write_all(t.render(style).as_bytes())
    }
    fn names(&self) -> Vec<String> {
        self.0.iter().map(|r| format!("row/{}", r.name)).collect()
    }
}

#[test]
fn print_renders_each_format() {
    let rows = Rows(vec![Row { name: "web".into(), age: 3 }, Row { name: "database".into(), age: 12 }]);
    let render = |flags: &[&str], colour: bool| {
        let mut argv = vec!["kubectl-example", "list"];
        argv.extend_from_slice(flags);
        let Cmd::List { output, .. } = Cli::try_parse_from(argv).unwrap().command else { panic!("wrong subcommand") };
        let mut out = Vec::new();
        print(&output, colour, &rows, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    assert_eq!(render(&[], false), "NAME       AGE\nweb        3\ndatabase   12\n");
    assert_eq!(render(&["-o", "wide"], false), "NAME       AGE   BORN\nweb        3     2020\ndatabase   12    2020\n");
    assert_eq!(render(&["--no-headers"], false), "web        3\ndatabase   12\n");
    assert_eq!(render(&["--no-headers"], true), "web        \u{1b}[31m3\u{1b}[0m\ndatabase   \u{1b}[31m12\u{1b}[0m\n");
    assert_eq!(render(&["-o", "name"], false), "row/web\nrow/database\n");
    assert_eq!(render(&["-o", "jsonpath={range [*]}{.name}={.age}{\"\\n\"}{end}"], false), "web=3\ndatabase=12\n");
    let json: serde_json::Value = serde_json::from_str(&render(&["-o", "json"], true)).unwrap();
    assert_eq!(json[1]["name"], "database");
    let yaml: serde_json::Value = serde_norway::from_str(&render(&["-o", "yaml"], false)).unwrap();
    assert_eq!(yaml[0]["age"], 3);
}

#[test]
fn a_command_refuses_the_formats_it_does_not_print() {
    let Cmd::List { output, .. } = Cli::try_parse_from(["kubectl-example", "list", "-o", "name"]).unwrap().command
    else {
        panic!("wrong subcommand")
    };
    let e = output.check("why", Offers::default()).unwrap_err();
    assert_eq!(e.code(), exit_code::USAGE);
    assert!(e.message().contains("why does not print -o name: use json, yaml or jsonpath=TEMPLATE"), "{e}");
    output.check("owners", Offers { wide: true, name: true }).unwrap();
}

#[test]
fn trees_are_drawn_like_kubectl_tree() {
    let leaf = |n: &str| Node { cells: vec![n.into(), "x".into()], children: vec![] };
    let tree = Node {
        cells: vec!["root".into(), "r".into()],
        children: vec![Node { cells: vec!["a".into(), "y".into()], children: vec![leaf("a1"), leaf("a2")] }, leaf("b")],
    };
    let mut t = Table::new(&[("name", false), ("v", false)]);
    tree.add_to(&mut t);
    let text = t.render(&Style { wide: false, headers: true, colour: false });
    assert_eq!(text, "NAME     V\nroot     r\n├─a      y\n│ ├─a1   x\n│ └─a2   x\n└─b      x\n");
}

#[test]
fn completion_script_names_the_binary_and_its_subcommands() {
    let cli = Cli::try_parse_from(["kubectl-example", "completion", "bash"]).unwrap();
    let Cmd::Completion(args) = cli.command else { panic!("parsed the wrong subcommand") };
    let mut out = Vec::new();
    print_completions::<Cli>(args.shell, &mut out);
    let script = String::from_utf8(out).unwrap();
    assert!(script.contains("kubectl-example"), "{script}");
    assert!(script.contains("list"), "{script}");
    assert!(Cli::try_parse_from(["kubectl-example", "completion", "tcsh"]).is_err());
}

#[test]
fn errors_exit_non_zero() {
    let e = CliError::new("boom").with_code(0);
    assert_eq!(e.code(), 1, "a failure never exits 0");
    assert_eq!(CliError::new("x").with_code(3).code(), 3);
    assert_eq!(e.to_string(), "boom");
}

#[test]
fn typed_names_parse_both_kubectl_forms() {
    let parse = |args: &[&str]| TypedName::parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
    let web = TypedName { type_: "deploy".into(), name: "web".into() };
    assert_eq!(parse(&["deploy/web"]).unwrap(), web);
    assert_eq!(parse(&["deploy", "web"]).unwrap(), web);
    assert_eq!(web.to_string(), "deploy/web");
    assert_eq!(parse(&["mergerequests.tatara.dev", "mr-12"]).unwrap().type_, "mergerequests.tatara.dev");
    for bad in [
        &[][..],
        &["deploy"][..],
        &["deploy/"][..],
        &["/web"][..],
        &["a/b/c"][..],
        &["deploy/web", "extra"][..],
        &["deploy", "web", "extra"][..],
    ] {
        let err = parse(bad).unwrap_err();
        assert!(err.message().starts_with("expected one object as TYPE/NAME"), "{err}");
    }
}

#[test]
fn completion_to_a_closed_pipe_does_not_panic() {
    // `kubectl tatara completion bash | head -1` closes the pipe early.
    struct Closed;
    impl std::io::Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    print_completions::<Cli>(clap_complete::Shell::Bash, &mut Closed);
}

#[test]
fn a_refused_status_write_hints_a_can_i_that_kubectl_accepts() {
    // `kubectl auth can-i patch status mergerequests.tatara.dev` is refused
    // by kubectl ("you must specify two arguments"); the subresource is a flag.
    let call = connection::Call {
        verb: "patch status",
        resource: "mergerequests.tatara.dev",
        name: "mr-tatara-operator-9",
        namespace: "tatara",
    };
    let e = connection::refused(call, "cannot patch status", 403, "forbidden");
    assert_eq!(e.code(), exit_code::FORBIDDEN);
    assert!(
        e.message().contains("`kubectl auth can-i patch mergerequests.tatara.dev --subresource=status -n tatara`"),
        "{}",
        e.message()
    );
    assert!(e.message().contains("needs the \"patch\" verb on mergerequests.tatara.dev/status"), "{}", e.message());
    let plain = connection::Call { verb: "update", resource: "issues.tatara.dev", name: "", namespace: "" };
    let e = connection::refused(plain, "cannot update", 403, "forbidden");
    assert!(e.message().contains("`kubectl auth can-i update issues.tatara.dev -A`"), "{}", e.message());
}
