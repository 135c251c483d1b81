//! Help, version and exit codes of both plugins through the real `kubectl`
//! (issue 15, point 7): usage lines as the user types them, help wrapped to
//! the terminal, examples and the exit codes at the top level, no secret
//! from the environment in help, a `version` subcommand with the commit.

use std::process::Output;

use testkit::kubectl::Kubectl;

fn plugins() -> Kubectl {
    Kubectl::new(&[env!("CARGO_BIN_EXE_kubectl-reverser"), env!("CARGO_BIN_EXE_kubectl-tatara")])
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn usage_lines_examples_and_exit_codes_read_as_kubectl_users_type_them() {
    let k = plugins();
    for plugin in ["reverser", "tatara"] {
        let top = stdout(&k.run(&[plugin, "--help"]));
        assert!(top.contains(&format!("Usage: kubectl {plugin} [OPTIONS] <COMMAND>")), "{top}");
        assert!(top.contains(&format!("Examples:\n  kubectl {plugin} ")), "{top}");
        for code in ["2  usage error", "3  not found", "4  forbidden", "5  unreachable", "6  findings"] {
            assert!(top.contains(code), "{plugin}: exit code {code:?} not documented\n{top}");
        }
        assert!(top.contains("version "), "{top}");
    }
    let why = stdout(&k.run(&["reverser", "why", "--help"]));
    assert!(why.contains("Usage: kubectl reverser why [OPTIONS] <TYPE/NAME | TYPE NAME>..."), "{why}");
    // One line per flag (no paragraph per value): short enough to read.
    assert!(why.lines().count() < 90, "{} lines:\n{why}", why.lines().count());
    let owners = stdout(&k.run(&["tatara", "owners", "--help"]));
    assert!(owners.contains("Usage: kubectl tatara owners "), "{owners}");
}

#[test]
fn help_is_wrapped_to_the_terminal() {
    for columns in [60usize, 120] {
        let help = stdout(&plugins().env("COLUMNS", &columns.to_string()).run(&["reverser", "why", "--help"]));
        // Prose and flag lines wrap; the usage line and the examples are
        // commands, printed whole.
        let widest = help
            .lines()
            .filter(|l| !l.starts_with("Usage: ") && !l.starts_with("  kubectl "))
            .map(|l| l.chars().count())
            .max()
            .unwrap();
        assert!(widest <= columns, "{columns} columns, a line of {widest}:\n{help}");
        if columns == 120 {
            assert!(widest > 100, "wrapped narrower than the terminal:\n{help}");
        }
    }
}

#[test]
fn help_never_shows_a_secret_from_the_environment() {
    let k = plugins()
        .env("REVERSER_REDIS_URL", "redis://:hunter2@redis.example:6379")
        .env("GITHUB_TOKEN", "ghp_secret-token");
    for args in [&["reverser", "why", "--help"][..], &["tatara", "sweep", "--help"], &["tatara", "takeover", "--help"]]
    {
        let help = stdout(&k.run(args));
        assert!(!help.contains("hunter2") && !help.contains("ghp_secret"), "{args:?}:\n{help}");
    }
    let why = stdout(&k.run(&["reverser", "why", "--help"]));
    assert!(why.contains("[env: REVERSER_REDIS_URL]"), "the variable is still named:\n{why}");
}

#[test]
fn version_names_the_commit_built_from() {
    let k = plugins();
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let head = String::from_utf8(head.stdout).unwrap();
    for plugin in ["reverser", "tatara"] {
        let line = stdout(&k.run(&[plugin, "version"]));
        let prefix = format!("kubectl-{plugin} {} (commit ", env!("CARGO_PKG_VERSION"));
        let commit = line.strip_prefix(&prefix).and_then(|r| r.strip_suffix(")\n")).unwrap_or_else(|| panic!("{line}"));
        assert_eq!(commit.len(), 12, "{line}");
        assert!(head.starts_with(commit), "built from {commit}, HEAD is {head}");
        // --version stays the bare release, which release tooling reads.
        assert_eq!(stdout(&k.run(&[plugin, "--version"])), format!("kubectl-{plugin} {}\n", env!("CARGO_PKG_VERSION")));
    }
}

#[test]
fn usage_errors_are_2_and_not_found_is_not() {
    let k = plugins();
    for args in [
        &["reverser", "why"][..],
        &["reverser", "why", "cm/x", "--bogus"],
        &["tatara", "owners"],
        &["reverser", "nope"],
    ] {
        let out = k.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("Usage: kubectl "), "{args:?}: {stderr}");
    }
}

/// The words of one shell command line as bash reads it: quotes removed.
/// An `!` outside single quotes is refused: interactive bash expands it
/// from history (`!9: event not found`), so an example holding one does
/// not run as written (issue 29).
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut in_word) = (Vec::new(), String::new(), false);
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('\''), c) => word.push(c),
            (_, '!') => panic!("{line}: an unquoted `!` (bash history expansion): single-quote the word"),
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => (quote, in_word) = (Some(c), true),
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                }
                in_word = false;
            }
            (None, c) => (word.push(c), in_word = true).1,
        }
    }
    assert_eq!(quote, None, "{line}: an unclosed quote");
    if in_word {
        words.push(word);
    }
    words
}

#[test]
fn shell_words_refuse_what_bash_would_expand() {
    assert_eq!(
        shell_words("kubectl tatara takeover 'repo!9' -n \"a b\""),
        ["kubectl", "tatara", "takeover", "repo!9", "-n", "a b"]
    );
    for line in ["kubectl tatara takeover repo!9", "kubectl tatara takeover \"repo!9\""] {
        assert!(std::panic::catch_unwind(|| shell_words(line)).is_err(), "{line}");
    }
}

/// Every example in every help, the subcommands' too, runs as written in
/// an interactive shell: no unquoted `!` (issue 29).
#[test]
fn no_example_in_any_help_has_an_unquoted_bang() {
    let k = plugins().env("COLUMNS", "400");
    let helps = [("reverser", &["why", "inject"][..]), ("tatara", &["owners", "repair", "sweep", "takeover", "why"])];
    for (plugin, subcommands) in helps {
        let mut pages = vec![stdout(&k.run(&[plugin, "--help"]))];
        pages.extend(subcommands.iter().map(|s| stdout(&k.run(&[plugin, s, "--help"]))));
        for page in pages {
            let Some(examples) = page.split("Examples:\n").nth(1) else { continue };
            // A command continued with `\` is one line to the shell.
            let examples = examples.split("\n\n").next().unwrap().replace("\\\n", " ");
            for line in examples.lines() {
                shell_words(line);
            }
        }
    }
}

/// Every example in the top-level help is valid usage (issue 29: tatara's
/// takeover example was refused for a missing `--project`, then for a
/// missing TATARA_TOKEN, and its `!` broke interactive bash). Run as
/// written against a server that refuses connections, with only the
/// variables it sets, an example may fail to reach it, never with the
/// usage code 2.
#[test]
fn every_top_level_example_is_valid_usage() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, testkit::fakeapi::kubeconfig("http://127.0.0.1:9", "tatara")).unwrap();
    // Nothing from the developer's shell or config stands in for what an
    // example leaves out: no token, URL or tatara-cli config of theirs.
    let bare = || {
        ["GITHUB_TOKEN", "TATARA_TOKEN", "TATARA_OPERATOR_URL", "REVERSER_REDIS_URL", "REDIS_URL"]
            .into_iter()
            .fold(plugins().kubeconfig(&kc), |k, var| k.env_remove(var))
            .env("XDG_CONFIG_HOME", dir.path().to_str().unwrap())
    };
    // Wide enough that no example wraps onto a second line.
    let k = bare().env("COLUMNS", "400");
    for plugin in ["reverser", "tatara"] {
        let top = stdout(&k.run(&[plugin, "--help"]));
        let examples = top.split("Examples:\n").nth(1).unwrap().split("\n\n").next().unwrap();
        for line in examples.lines() {
            let mut k = bare();
            let words = shell_words(line);
            let mut words = words.iter().map(String::as_str).peekable();
            // `VAR=... kubectl ...`: the variables, with a stand-in value.
            while let Some((var, _)) = words.peek().and_then(|w| w.split_once('=')) {
                k = k.env(var, "http://127.0.0.1:9");
                words.next();
            }
            // Only the plugin's own command: not `source <(...)`, nor what
            // a pipe feeds.
            if words.next() != Some("kubectl") {
                continue;
            }
            let args: Vec<&str> = words.take_while(|w| *w != "|").collect();
            let out = k.run(&args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_ne!(out.status.code(), Some(2), "{line}: {stderr}");
        }
    }
}
