//! Completion through kubectl. kubectl (1.26+) completes `kubectl reverser
//! ...` by running `kubectl_complete-reverser ARGS... WORD` from the PATH
//! (the words after the plugin's name, then the word being completed) and
//! reading cobra's protocol back: one candidate per line (`value\tdescription`),
//! then `:DIRECTIVE`. The helper binaries (`src/complete_helper.rs`) hand
//! that to the plugin itself (`kubectl-reverser __complete ...`), which knows its
//! command line and can ask the cluster: subcommands, flags, namespaces,
//! contexts, clusters, users, and object names.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Arg, Args, Command, CommandFactory, FromArgMatches};
use futures::future::BoxFuture;

use super::KubeArgs;
use super::connection::KubeTarget;

/// The word kubectl's helper passes first.
pub const REQUEST: &str = "__complete";

/// cobra's directives.
pub mod directive {
    /// Let the shell complete file names when there is no candidate.
    pub const FILES: u32 = 0;
    /// No space after the completion (`jsonpath=`, `issue/`).
    pub const NO_SPACE: u32 = 2;
    /// Never complete file names.
    pub const NO_FILES: u32 = 4;
}

/// How long each call completion makes waits for the cluster unless
/// `--request-timeout` says otherwise: a TAB must answer quickly or not at
/// all.
pub const TIMEOUT: Duration = Duration::from_secs(1);
/// How long a whole completion may take: a hung server gives no
/// candidates after this, however many calls the completion would make.
pub const DEADLINE: Duration = Duration::from_millis(1500);

/// Candidates and the directive for the shell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completions {
    /// `(value, description)`.
    pub items: Vec<(String, String)>,
    pub directive: u32,
}

impl Completions {
    /// Bare values, no file names.
    pub fn values(values: impl IntoIterator<Item = String>) -> Self {
        Self { items: values.into_iter().map(|v| (v, String::new())).collect(), directive: directive::NO_FILES }
    }

    /// Nothing to offer, and no file names either.
    pub fn none() -> Self {
        Self { items: Vec::new(), directive: directive::NO_FILES }
    }

    /// Let the shell complete file names.
    pub fn files() -> Self {
        Self { items: Vec::new(), directive: directive::FILES }
    }

    /// The same, keeping only what starts with `prefix`.
    #[must_use]
    pub fn starting_with(mut self, prefix: &str) -> Self {
        self.items.retain(|(v, _)| v.starts_with(prefix));
        self
    }

    fn write(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for (value, description) in &self.items {
            match description.as_str() {
                "" => writeln!(out, "{value}")?,
                d => writeln!(out, "{value}\t{d}")?,
            }
        }
        writeln!(out, ":{}", self.directive)
    }
}

/// The cluster as the line typed so far selects it.
#[derive(Debug, Clone)]
pub struct Context {
    /// The connection flags found on the line.
    pub kube: KubeArgs,
}

impl Context {
    /// A client, bounded by [`TIMEOUT`] unless the line sets
    /// `--request-timeout`; `None` when there is no usable cluster.
    pub async fn client(&self) -> Option<KubeTarget> {
        let mut kube = self.kube.clone();
        if kube.request_timeout.is_zero() {
            kube.request_timeout = TIMEOUT;
        }
        kube.client().await.ok()
    }

    /// The namespaces of the cluster.
    pub async fn namespaces(&self) -> Vec<String> {
        let Some(target) = self.client().await else { return Vec::new() };
        super::discovery::list_names(&target.client, "/api/v1/namespaces").await.unwrap_or_default()
    }
}

/// What a plugin completes beyond flags, subcommands and kubectl's own flag
/// values.
pub trait Complete: Sync {
    /// Candidates for the positional argument after `prior` of the command
    /// at `path` (`["why"]`), the word typed so far being `current`.
    fn positional<'a>(
        &'a self,
        ctx: &'a Context,
        path: &'a [String],
        prior: &'a [String],
        current: &'a str,
    ) -> BoxFuture<'a, Completions>;

    /// Candidates for the value of the plugin's own flag `id` (clap's id,
    /// `pod`, `project`), or `None` to let the engine decide.
    fn flag_value<'a>(&'a self, ctx: &'a Context, id: &'a str, current: &'a str) -> BoxFuture<'a, Option<Completions>>;
}

/// When the process was started as `PLUGIN __complete WORDS...`, answers
/// and returns the exit code; `None` otherwise (a normal run).
pub fn run_if_asked<C: CommandFactory>(plugin: &dyn Complete) -> Option<ExitCode> {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() != Some(REQUEST) {
        return None;
    }
    let words: Vec<String> = args.collect();
    let completions = super::block_on(async {
        Ok(tokio::time::timeout(DEADLINE, complete(&C::command(), &words, plugin))
            .await
            .unwrap_or_else(|_| Completions::none()))
    })
    .unwrap_or_else(|_| Completions::none());
    // A shell that went away needs no answer.
    let _ = completions.write(&mut std::io::stdout().lock());
    Some(ExitCode::SUCCESS)
}

/// What the word being completed is.
#[derive(Debug)]
enum Want<'c> {
    /// A flag's value, the typed part (after `--flag=` when `prefix` is
    /// that).
    Value { arg: &'c Arg, typed: String, prefix: String },
    /// A flag name.
    Flag,
    /// A subcommand's name.
    Subcommand,
    /// A positional argument after `prior`.
    Positional { prior: Vec<String> },
}

/// Finds an argument of `cmd` by its long name or short letter.
fn find<'c>(cmd: &'c Command, long: Option<&str>, short: Option<char>) -> Option<&'c Arg> {
    cmd.get_arguments().find(|a| match (long, short) {
        (Some(l), _) => a.get_long() == Some(l) || a.get_all_aliases().is_some_and(|al| al.contains(&l)),
        (None, Some(s)) => a.get_short() == Some(s),
        (None, None) => false,
    })
}

fn takes_value(arg: &Arg) -> bool {
    arg.get_action().takes_values()
}

/// Walks the words typed so far through `root`'s command line: the
/// subcommand they reach (with its path) and what the last word is.
fn plan<'c>(root: &'c Command, words: &[String]) -> (&'c Command, Vec<String>, Want<'c>) {
    let (current, typed) = match words.split_last() {
        Some((last, rest)) => (last.as_str(), rest),
        None => ("", &[][..]),
    };
    let mut cmd = root;
    let mut path: Vec<String> = Vec::new();
    let mut positionals: Vec<String> = Vec::new();
    let mut pending: Option<&Arg> = None;
    let mut only_positionals = false;
    for w in typed {
        if pending.take().is_some() {
            continue;
        }
        if only_positionals {
            positionals.push(w.clone());
        } else if w == "--" {
            only_positionals = true;
        } else if let Some(long) = w.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or(long);
            pending = find(cmd, Some(name), None).filter(|a| takes_value(a) && !long.contains('='));
        } else if let Some(shorts) = w.strip_prefix('-').filter(|s| !s.is_empty()) {
            let arg = shorts.chars().next().and_then(|c| find(cmd, None, Some(c)));
            pending = arg.filter(|a| takes_value(a) && shorts.chars().count() == 1);
        } else if let Some(sub) = positionals.is_empty().then(|| cmd.find_subcommand(w)).flatten() {
            cmd = sub;
            path.push(sub.get_name().to_string());
        } else {
            positionals.push(w.clone());
        }
    }
    let want = if let Some(arg) = pending {
        Want::Value { arg, typed: current.to_string(), prefix: String::new() }
    } else if let Some((name, value)) = current.strip_prefix("--").and_then(|f| f.split_once('=')) {
        match find(cmd, Some(name), None) {
            Some(arg) => Want::Value { arg, typed: value.to_string(), prefix: format!("--{name}=") },
            None => Want::Flag,
        }
    } else if current.starts_with('-') && !only_positionals {
        Want::Flag
    } else if cmd.has_subcommands() && positionals.is_empty() {
        Want::Subcommand
    } else {
        Want::Positional { prior: positionals }
    };
    (cmd, path, want)
}

/// The connection flags among `words` (the rest ignored), parsed by
/// [`KubeArgs`]' own definitions.
fn kube_args(words: &[String]) -> KubeArgs {
    let cmd = KubeArgs::augment_args(Command::new("kube").no_binary_name(true));
    let mut kept: Vec<String> = Vec::new();
    let mut it = words.iter().peekable();
    while let Some(w) = it.next() {
        let (long, short) = match (w.strip_prefix("--"), w.strip_prefix('-')) {
            (Some(l), _) => (Some(l.split('=').next().unwrap_or(l)), None),
            (None, Some(s)) => (None, s.chars().next()),
            _ => continue,
        };
        let Some(arg) = find(&cmd, long, short) else { continue };
        kept.push(w.clone());
        let inline = w.contains('=') || (short.is_some() && w.chars().count() > 2);
        if takes_value(arg)
            && !inline
            && let Some(value) = it.next()
        {
            kept.push(value.clone());
        }
    }
    cmd.try_get_matches_from(kept).ok().and_then(|m| KubeArgs::from_arg_matches(&m).ok()).unwrap_or_default()
}

fn about(text: Option<&clap::builder::StyledStr>) -> String {
    text.map(|t| t.to_string().lines().next().unwrap_or_default().trim_end_matches('.').to_string()).unwrap_or_default()
}

/// The candidates for `words` (everything after the plugin's name, the last
/// being the word under completion).
pub async fn complete(root: &Command, words: &[String], plugin: &dyn Complete) -> Completions {
    let mut root = root.clone();
    // Global flags reach every subcommand only once the command is built.
    root.build();
    let (cmd, path, want) = plan(&root, words);
    let ctx = Context { kube: kube_args(words) };
    let current = words.last().map(String::as_str).unwrap_or("");
    match want {
        Want::Subcommand => Completions {
            items: cmd
                .get_subcommands()
                .filter(|s| !s.is_hide_set() && s.get_name() != "help")
                .map(|s| (s.get_name().to_string(), about(s.get_about())))
                .collect(),
            directive: directive::NO_FILES,
        }
        .starting_with(current),
        Want::Flag => {
            let mut items = Vec::new();
            for a in cmd.get_arguments().filter(|a| !a.is_positional()) {
                let help = about(a.get_help());
                if let Some(long) = a.get_long() {
                    items.push((format!("--{long}"), help.clone()));
                }
                if let Some(short) = a.get_short().filter(|_| !current.starts_with("--")) {
                    items.push((format!("-{short}"), help));
                }
            }
            Completions { items, directive: directive::NO_FILES }.starting_with(current)
        }
        Want::Value { arg, typed, prefix } => {
            let mut c = flag_value(&ctx, arg, &typed, plugin).await.starting_with(&typed);
            for (v, _) in &mut c.items {
                v.insert_str(0, &prefix);
            }
            c
        }
        Want::Positional { prior } => {
            let positional = cmd.get_arguments().filter(|a| a.is_positional()).nth(prior.len());
            let values: Vec<String> = positional
                .map(|a| a.get_possible_values().iter().map(|v| v.get_name().to_string()).collect())
                .unwrap_or_default();
            if values.is_empty() {
                plugin.positional(&ctx, &path, &prior, current).await
            } else {
                Completions::values(values).starting_with(current)
            }
        }
    }
}

/// The value of a flag: kubectl's connection flags and output formats
/// here, the plugin's own through [`Complete::flag_value`], enumerations
/// from clap, file names for paths.
async fn flag_value(ctx: &Context, arg: &Arg, typed: &str, plugin: &dyn Complete) -> Completions {
    let id = arg.get_id().as_str();
    if let Some(c) = plugin.flag_value(ctx, id, typed).await {
        return c;
    }
    let kubeconfig = || runtime::kubeconfig::file(ctx.kube.kubeconfig.as_deref()).ok().flatten();
    match id {
        "namespace" | "pod_namespace" => Completions::values(ctx.namespaces().await),
        "context" => Completions::values(kubeconfig().into_iter().flat_map(|k| k.contexts).map(|c| c.name)),
        "cluster" => Completions::values(kubeconfig().into_iter().flat_map(|k| k.clusters).map(|c| c.name)),
        "user" => Completions::values(kubeconfig().into_iter().flat_map(|k| k.auth_infos).map(|u| u.name)),
        // What this command's `-o` offers (its parser's possible values).
        "output" => Completions {
            items: arg.get_possible_values().iter().map(|v| (v.get_name().to_string(), String::new())).collect(),
            directive: directive::NO_FILES | if typed.starts_with('j') { directive::NO_SPACE } else { 0 },
        },
        _ => {
            let values: Vec<String> = arg.get_possible_values().iter().map(|v| v.get_name().to_string()).collect();
            let names_a_path = arg
                .get_value_names()
                .is_some_and(|n| n.iter().any(|n| ["PATH", "FILE", "FILE|-", "DIR"].contains(&n.as_str())));
            if !values.is_empty() {
                Completions::values(values)
            } else if names_a_path {
                Completions::files()
            } else {
                Completions::none()
            }
        }
    }
}
