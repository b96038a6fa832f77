//! The shell commands in the fenced `sh`/`bash`/`shell` blocks of README.md and docs/ use only
//! what exists: `nmo` and `nmo-dev` (`cargo run -- ...`, `cargo bench --bench drain -- ...`)
//! subcommands and flags, parsed with the real clap definitions as the binaries parse them;
//! cargo packages and targets (`-p`, `--test`, `--bench`, `--bin`); and the repository's paths
//! that `kubectl -f`/`-k` and scripts name.

use crate::support::assert_success;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::process::Command as Process;

use clap::CommandFactory;
use nmo::cli::go_flags::{long_names, normalize_single_dash};
use serde_json::Value;

use super::markdown::{self, fenced_blocks};
use crate::packaging::support::repo;

/// One simple command of a doc: where it is and its words (environment assignments,
/// redirections and the shell's operators taken off).
#[derive(Debug, PartialEq)]
struct DocCommand {
    place: String,
    words: Vec<String>,
}

const SHELLS: [&str; 3] = ["sh", "bash", "shell"];

/// The simple commands of a shell block: continuation lines joined, here-documents' bodies
/// skipped, lists and pipelines split.
fn commands_of(file: &str, first_line: usize, lines: &[&str]) -> Result<Vec<DocCommand>, String> {
    let mut out = Vec::new();
    let mut heredoc_end: Option<String> = None;
    let mut pending = String::new();
    let mut pending_line = first_line;
    for (offset, line) in lines.iter().enumerate() {
        if let Some(end) = &heredoc_end {
            if line.trim() == end {
                heredoc_end = None;
            }
            continue;
        }
        if pending.is_empty() {
            pending_line = first_line + offset;
        }
        if let Some(head) = line.trim_end().strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        let logical = std::mem::take(&mut pending);
        heredoc_end = heredoc_terminator(&logical);
        let place = format!("{file}:{pending_line}");
        let words = shlex::split(&logical)
            .ok_or_else(|| format!("{place}: cannot split `{}` into words", logical.trim()))?;
        for words in simple_commands(words) {
            out.push(DocCommand {
                place: place.clone(),
                words,
            });
        }
    }
    Ok(out)
}

/// `<<'YAML'`, `<<EOF`, `<<-EOF`: the word that ends the here-document.
fn heredoc_terminator(line: &str) -> Option<String> {
    let after = &line[line.find("<<")? + 2..];
    let after = after.trim_start_matches('-').trim_start();
    let word: String = after
        .trim_start_matches(['\'', '"'])
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// Splits words at `&&`, `||`, `|`, `;` and `&` (also when glued to a word's end), and takes
/// off redirections and leading `NAME=value` assignments.
fn simple_commands(words: Vec<String>) -> Vec<Vec<String>> {
    let mut commands = vec![Vec::new()];
    let mut skip_next = false;
    for word in words {
        if skip_next {
            skip_next = false;
            continue;
        }
        if ["&&", "||", "|", ";", "&"].contains(&word.as_str()) {
            commands.push(Vec::new());
            continue;
        }
        if let Some(rest) = word
            .strip_prefix("2>")
            .or(word.strip_prefix('>'))
            .or(word.strip_prefix('<'))
        {
            // `> file` takes the next word; `>file`, `2>&1` and `<<YAML` do not.
            skip_next = rest.is_empty() || rest == ">";
            continue;
        }
        let (word, ends) = match word.strip_suffix([';', '&']) {
            Some(head) if !head.is_empty() => (head.to_string(), true),
            _ => (word, false),
        };
        let current = commands.last_mut().expect("one command at least");
        let assignment = current.is_empty() && is_assignment(&word);
        if !assignment {
            current.push(word);
        }
        if ends {
            commands.push(Vec::new());
        }
    }
    commands.into_iter().filter(|c| !c.is_empty()).collect()
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// Which of the two command lines parses a command.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Binary {
    /// `nmo`, the operator's binary (`nmo::cli::commands::Cli`).
    Nmo,
    /// `nmo-dev`, with demo, bench and sim (`nmo_devtools::cli::Cli`).
    NmoDev,
}

/// The workspace's packages and each one's targets, from `cargo metadata`.
struct Workspace {
    packages: BTreeSet<String>,
    /// (kind, name): `("bin", "nmo")`, `("test", "it")`, `("bench", "drain")`...
    targets: BTreeSet<(String, String)>,
}

impl Workspace {
    fn read() -> Workspace {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let output = Process::new(cargo)
            .args([
                "metadata",
                "--no-deps",
                "--format-version",
                "1",
                "--offline",
            ])
            .current_dir(repo())
            .output()
            .expect("cargo metadata runs");
        assert_success(&output, "cargo metadata failed");
        let metadata: Value =
            serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON");
        let mut packages = BTreeSet::new();
        let mut targets = BTreeSet::new();
        for package in metadata["packages"].as_array().into_iter().flatten() {
            packages.insert(package["name"].as_str().unwrap_or_default().to_string());
            for target in package["targets"].as_array().into_iter().flatten() {
                let name = target["name"].as_str().unwrap_or_default().to_string();
                for kind in target["kind"].as_array().into_iter().flatten() {
                    targets.insert((kind.as_str().unwrap_or_default().to_string(), name.clone()));
                }
            }
        }
        Workspace { packages, targets }
    }
}

/// What is wrong with a command, if anything it names does not exist.
fn check(command: &DocCommand, workspace: &Workspace) -> Result<(), String> {
    let words = &command.words;
    let program = words[0].as_str();
    let args = &words[1..];
    match program {
        "cargo" => check_cargo(args, workspace),
        "kubectl" => check_kubectl_paths(args),
        "nmo" | "/manager" => parse(Binary::Nmo, args),
        "nmo-dev" => parse(Binary::NmoDev, args),
        _ if program.ends_with("/nmo") => parse(Binary::Nmo, args),
        _ if program.ends_with("/nmo-dev") => parse(Binary::NmoDev, args),
        _ => check_script(program),
    }
}

/// `cargo <subcommand>`: its packages and targets exist; `cargo run` and `cargo bench --bench
/// drain` hand what follows `--` to nmo's command line.
fn check_cargo(args: &[String], workspace: &Workspace) -> Result<(), String> {
    let Some(subcommand) = args.first() else {
        return Ok(());
    };
    let (cargo_args, after) = match args.iter().position(|a| a == "--") {
        Some(at) => (&args[1..at], &args[at + 1..]),
        None => (&args[1..], &args[args.len()..]),
    };
    let mut package = None;
    let mut bin = None;
    let mut bench = None;
    let mut pairs = cargo_args.iter().peekable();
    while let Some(arg) = pairs.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_string())),
            None => (arg.as_str(), None),
        };
        let kind = match flag {
            "-p" | "--package" => "package",
            "--bin" => "bin",
            "--test" => "test",
            "--bench" => "bench",
            "--example" => "example",
            _ => continue,
        };
        let Some(value) = inline.or_else(|| pairs.next().cloned()) else {
            return Err(format!("`{flag}` without a value"));
        };
        let exists = if kind == "package" {
            workspace.packages.contains(&value)
        } else {
            workspace
                .targets
                .contains(&(kind.to_string(), value.clone()))
        };
        if !exists {
            return Err(format!("no {kind} `{value}` in the workspace"));
        }
        match kind {
            "package" => package = Some(value),
            "bin" => bin = Some(value),
            "bench" => bench = Some(value),
            _ => {}
        }
    }
    match subcommand.as_str() {
        "run" => {
            // `cargo run` at the root runs nmo-dev; `-p nmo` or `--bin nmo` the operator's.
            let binary = if bin.as_deref() == Some("nmo") || package.as_deref() == Some("nmo") {
                Binary::Nmo
            } else if bin.is_none() && package.as_deref().is_none_or(|p| p == "nmo-devtools") {
                Binary::NmoDev
            } else {
                return Ok(());
            };
            parse(binary, after)
        }
        "bench" if bench.as_deref() == Some("drain") => {
            // benches/drain.rs takes `nmo bench`'s flags.
            let mut bench_args = vec!["bench".to_string()];
            bench_args.extend(after.iter().cloned());
            parse(Binary::NmoDev, &bench_args)
        }
        _ => Ok(()),
    }
}

/// Parses `args` as the binary does (Go's one-dash flags included); asking for help is fine.
fn parse(binary: Binary, args: &[String]) -> Result<(), String> {
    let command = match binary {
        Binary::Nmo => nmo::cli::commands::Cli::command(),
        Binary::NmoDev => nmo_devtools::cli::Cli::command(),
    };
    let name = match binary {
        Binary::Nmo => "nmo",
        Binary::NmoDev => "nmo-dev",
    };
    let argv = std::iter::once(OsString::from(name)).chain(args.iter().map(OsString::from));
    let argv = normalize_single_dash(argv, &long_names(&command));
    match command.try_get_matches_from(argv) {
        Ok(_) => Ok(()),
        Err(error) => {
            use clap::error::ErrorKind;
            match error.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => Ok(()),
                _ => Err(format!(
                    "{name}'s command line refuses it: {}",
                    error
                        .render()
                        .to_string()
                        .lines()
                        .next()
                        .unwrap_or_default()
                )),
            }
        }
    }
}

/// `kubectl ... -f PATH` / `-k PATH` / `kustomize PATH` with a path of this repository: it
/// exists. Placeholders (`<...>`), variables, `-` and URLs are not paths to check.
fn check_kubectl_paths(args: &[String]) -> Result<(), String> {
    let mut words = args.iter();
    let kustomize = args.first().is_some_and(|a| a == "kustomize");
    let mut paths = Vec::new();
    if kustomize {
        paths.extend(args.get(1).cloned());
    }
    while let Some(word) = words.next() {
        match word.as_str() {
            "-f" | "--filename" | "-k" | "--kustomize" => paths.extend(words.next().cloned()),
            _ => {
                for flag in ["-f=", "--filename=", "-k=", "--kustomize="] {
                    if let Some(path) = word.strip_prefix(flag) {
                        paths.push(path.to_string());
                    }
                }
            }
        }
    }
    for path in paths {
        let checkable = !path.is_empty()
            && path != "-"
            && !path.contains(['<', '$', ':'])
            && !path.starts_with('/');
        if checkable && !repo().join(&path).exists() {
            return Err(format!("`{path}` does not exist in the repository"));
        }
    }
    Ok(())
}

/// A script of the repository run by its path (`deploy/image/build`): it exists. Paths outside
/// the repository's own directories (`./jaeger`, `target/...`) are not checked.
fn check_script(program: &str) -> Result<(), String> {
    let Some((top, _)) = program.split_once('/') else {
        return Ok(());
    };
    let ours = !top.is_empty() && top != "." && top != "target" && repo().join(top).is_dir();
    if ours && !repo().join(program).exists() {
        return Err(format!("`{program}` does not exist in the repository"));
    }
    Ok(())
}

/// Every command of every shell block of README.md and docs/.
fn doc_commands() -> Result<Vec<DocCommand>, String> {
    let mut out = Vec::new();
    for file in markdown::documents() {
        let text = markdown::read(&file);
        for block in fenced_blocks(&text) {
            if SHELLS.contains(&block.language) {
                out.extend(commands_of(&file, block.first_line, &block.lines)?);
            }
        }
    }
    Ok(out)
}

#[test]
fn the_docs_shell_commands_use_only_what_exists() {
    let workspace = Workspace::read();
    let commands = doc_commands().unwrap_or_else(|e| panic!("{e}"));
    let checked = |binary: &str| commands.iter().filter(|c| c.words[0] == binary).count();
    // The README's first lines are two cargo commands; a reader that found none is broken.
    assert!(
        checked("cargo") >= 2,
        "no cargo command found in the docs: {commands:?}"
    );
    let failures: Vec<String> = commands
        .iter()
        .filter_map(|command| {
            check(command, &workspace)
                .err()
                .map(|why| format!("{}: `{}`: {why}", command.place, command.words.join(" ")))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "these commands in the docs name what does not exist (fix the doc, or the code if the \
         doc is right; nmo's flags are nmo::cli::commands::Cli, nmo-dev's \
         nmo_devtools::cli::Cli):\n{}",
        failures.join("\n")
    );
}

#[test]
fn shell_lines_split_into_simple_commands() {
    let lines = [
        "KUBECONFIG=/tmp/k cargo run -- run --webhook-port 0 &   # the operator",
        "cargo run -- crd > deploy/base/crd.yaml && echo done",
        "kubectl apply -f - <<'YAML'",
        "kind: NodeMaintenance",
        "YAML",
        "docker build -f deploy/Dockerfile \\",
        "  -t nmo:1 .; nmo plan a|jq .",
    ];
    let commands = commands_of("x.md", 10, &lines).expect("splits");
    let words: Vec<Vec<&str>> = commands
        .iter()
        .map(|c| c.words.iter().map(String::as_str).collect())
        .collect();
    assert_eq!(
        words,
        vec![
            vec!["cargo", "run", "--", "run", "--webhook-port", "0"],
            vec!["cargo", "run", "--", "crd"],
            vec!["echo", "done"],
            vec!["kubectl", "apply", "-f", "-"],
            vec![
                "docker",
                "build",
                "-f",
                "deploy/Dockerfile",
                "-t",
                "nmo:1",
                "."
            ],
            vec!["nmo", "plan", "a|jq", "."],
        ]
    );
    assert_eq!(commands[4].place, "x.md:15");
}

#[test]
fn a_flag_or_subcommand_that_does_not_exist_is_caught() {
    let workspace = Workspace::read();
    let command = |line: &str| DocCommand {
        place: "x".into(),
        words: shlex::split(line).expect("words"),
    };
    for good in [
        "cargo run --release -- demo --nodes 3",
        "cargo run -- run --leader-elect -metrics-bind-address=:9090",
        "nmo plan worker-1 -o json",
        "/manager --leader-elect --zap-log-level=info",
        "cargo bench --bench drain -- --scenario a",
        "cargo test -p nmo-sim --test it",
        "kubectl apply -k deploy/install",
        "nmo --help",
    ] {
        assert_eq!(check(&command(good), &workspace), Ok(()), "{good}");
    }
    for bad in [
        "cargo run --release -- demo --nodez 3",
        "nmo demo",
        "nmo --no-such-flag",
        "cargo bench --bench drian",
        "cargo test -p nmo-simulator",
        "kubectl apply -k deploy/no-such-entry-point",
        "deploy/image/no-such-script",
    ] {
        assert!(check(&command(bad), &workspace).is_err(), "{bad} passed");
    }
}
